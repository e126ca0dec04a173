"""The exact volume model against hand counts, a slow oracle and the closed forms."""
import numpy as np
import pytest

from starchol.distributions import get_map
from starchol.model.volume import (leading_term_tiles, stored_tiles, tile_bytes,
                                    tile_extents, transfer_pairs, transfer_pairs_bytes,
                                    transfer_pairs_tiles)
from volume_reference import as_matrix, reference_pairs, slice_of


def test_hand_count_nt3_on_2x2():
    # owners (i%2)*2 + j%2:  row0: 0 | row1: 2 3 | row2: 0 1 0
    # L00 (node 0) -> TRSM(1,0) on 2                         : 0->2
    # L10 (node 2) -> SYRK(1,0) on 3, GEMM(2,1,0) on 1       : 2->3, 2->1
    # L20 (node 0) -> SYRK(2,0) on 0 (local), GEMM(2,1,0) on 1: 0->1
    # L11 (node 3) -> TRSM(2,1) on 1                         : 3->1
    # L21 (node 1) -> SYRK(2,1) on 0                         : 1->0
    expected = np.zeros((4, 4), dtype=int)
    for a, b in [(0, 2), (2, 3), (2, 1), (0, 1), (3, 1), (1, 0)]:
        expected[a, b] += 1
    m = get_map("2dbc", 4, grid="2x2")
    for cache in (True, False):
        np.testing.assert_array_equal(transfer_pairs_tiles(m, 3, cache=cache), expected)


def test_hand_count_cache_off_counts_each_task():
    # 1x2 grid, NT = 3: owners j % 2. L[2][0] (node 0) is read by SYRK(2,0) (node 0) and
    # GEMM(2,1,0) (node 1): 1 remote read. L[1][0] (node 0): SYRK(1,0) on 1, GEMM(2,1,0) on 1
    # -> cache on 1 transfer, cache off 2. L00: TRSM(1,0), TRSM(2,0) on 0: none.
    # L11 (node 1) -> TRSM(2,1) on node 1: none; L21 (node 1) -> SYRK(2,1) on node 0: 1.
    m = get_map("2dbc", 2, grid="1x2")
    on = transfer_pairs_tiles(m, 3, cache=True)
    off = transfer_pairs_tiles(m, 3, cache=False)
    assert on.tolist() == [[0, 2], [1, 0]]
    assert off.tolist() == [[0, 3], [1, 0]]


def test_hand_count_sbc_r3_and_r4():
    # SBC (extended): node a(a-1)/2 + b owns the pair {a, b}; diagonal cell x of the first
    # pattern block goes to the pair {x, x+1 mod r} (FACTS.md section 2).
    # r = 3, NT = 3:  row0: 0 | row1: 0 2 | row2: 1 2 1
    #   L00 (0) -> TRSMs on 0, 1: 0->1 | L10 (0) -> SYRK(1,0), GEMM(2,1,0) on 2: 0->2
    #   L20 (1) -> SYRK on 1, GEMM(2,1,0) on 2: 1->2 | L11 (2) -> TRSM on 2 | L21 (2) -> 1
    # N = 5, NB = 2 (rows 2 2 1): L00, L10 32 bytes; L20, L21 16 bytes.
    m = get_map("sbc", 3)
    assert m.owner_map(3)[np.tril_indices(3)].tolist() == [0, 0, 2, 1, 2, 1]
    assert transfer_pairs_tiles(m, 3).tolist() == [[0, 1, 1], [0, 0, 1], [0, 1, 0]]
    assert transfer_pairs_tiles(m, 3, cache=False).tolist() == [[0, 1, 2], [0, 0, 1],
                                                                [0, 1, 0]]
    assert transfer_pairs_bytes(m, 5, 2).tolist() == [[0, 32, 32], [0, 0, 16], [0, 16, 0]]
    # r = 4 (6 nodes), NT = 4:  row0: 0 | row1: 0 2 | row2: 1 2 5 | row3: 3 4 5 3
    #   k=0: L00 -> {1, 3}; L10 (0) -> {2, 4}; L20 (1) -> {2, 5}; L30 (3) -> {4, 5}
    #   k=1: L11 (2) -> {4}; L21 (2) -> {5}; L31 (4) -> {5, 3};  k=2: L32 (5) -> {3}
    m = get_map("sbc", 6)
    assert m.owner_map(4)[np.tril_indices(4)].tolist() == [0, 0, 2, 1, 2, 5, 3, 4, 5, 3]
    expected = np.zeros((6, 6), dtype=int)
    for a, b in [(0, 1), (0, 3), (0, 2), (0, 4), (1, 2), (1, 5), (3, 4), (3, 5), (2, 4),
                 (2, 5), (4, 5), (4, 3), (5, 3)]:
        expected[a, b] += 1
    np.testing.assert_array_equal(transfer_pairs_tiles(m, 4), expected)


CASES = [
    ("2dbc", 4, {"grid": "2x2"}), ("2dbc", 6, {"grid": "3x2"}), ("2dbc", 6, {"grid": "1x6"}),
    ("sbc", 3, {}), ("sbc", 6, {}), ("sbc", 10, {}), ("sbc", 15, {}),
    ("sbc-basic", 2, {}), ("sbc-basic", 8, {}),
    ("sbc25d", 6, {"slices": 2}), ("sbc25d", 16, {"slices": 2}), ("sbc25d", 9, {"slices": 3}),
    ("2dbc25d", 8, {"slices": 2, "grid": "2x2"}), ("2dbc25d", 12, {"slices": 3}),
    ("2dbc25d", 4, {"slices": 1, "grid": "2x2"}),
]


@pytest.mark.parametrize("name,nodes,kw", CASES)
@pytest.mark.parametrize("nt", [1, 2, 5, 7, 11])
@pytest.mark.parametrize("cache", [True, False])
def test_fast_model_equals_reference(name, nodes, kw, nt, cache):
    m = get_map(name, nodes, **kw)
    fast = transfer_pairs_tiles(m, nt, cache=cache)
    slow = as_matrix(reference_pairs(list(m.owner_maps(nt)), cache=cache), m.nodes)
    assert fast.tolist() == slow


def test_fast_model_equals_reference_on_random_maps():
    rng = np.random.default_rng(7)
    for trial in range(12):
        nt = int(rng.integers(1, 10))
        nodes = int(rng.integers(1, 7))
        c = int(rng.integers(1, 4))
        owners = rng.integers(0, nodes, size=(c, nt, nt)) + (np.arange(c) * nodes)[:, None, None]
        for cache in (True, False):
            fast = transfer_pairs(owners, nodes * c, cache=cache)
            slow = as_matrix(reference_pairs(list(owners), cache=cache), nodes * c)
            assert fast.tolist() == slow, (trial, cache)


def test_fast_model_equals_reference_when_slices_share_nodes():
    # a 2.5D owner stack whose slices share nodes (a Sliced25D of maps without offsets,
    # or any TileMap subclass): a partial sum held by the node that factors the tile is
    # added in place and moves nothing, as StarPU-MPI and the oracle have it
    rng = np.random.default_rng(11)
    for trial in range(40):
        nt, nodes, c = int(rng.integers(2, 9)), int(rng.integers(1, 5)), int(rng.integers(2, 4))
        owners = rng.integers(0, nodes, size=(c, nt, nt))
        for cache in (True, False):
            fast = transfer_pairs(owners, nodes, cache=cache)
            slow = as_matrix(reference_pairs(list(owners), cache=cache), nodes)
            assert fast.tolist() == slow, (trial, cache)
            assert not np.diag(fast).any()


@pytest.mark.parametrize("n,nb", [(1000, 96), (960, 80), (500, 500), (10, 3)])
@pytest.mark.parametrize("cache", [True, False])
def test_bytes_weigh_each_tile_by_its_size(n, nb, cache):
    m = get_map("sbc25d", 6, slices=2) if n == 960 else get_map("sbc", 6)
    nt = len(tile_extents(n, nb))
    sizes = tile_bytes(n, nb)
    fast = transfer_pairs_bytes(m, n, nb, cache=cache)
    slow = as_matrix(reference_pairs(list(m.owner_maps(nt)), cache=cache,
                                     weight=lambda i, j: int(sizes[i, j])), m.nodes)
    assert fast.tolist() == slow


def test_tile_extents():
    assert tile_extents(1000, 96).tolist() == [96] * 10 + [40]
    assert tile_extents(960, 80).tolist() == [80] * 12
    assert tile_bytes(10, 4)[2, 0] == 2 * 4 * 8


def test_reference_figures_from_the_paper():
    # FACTS.md section 1: NT = 600, NB = 500 (GB = 1e9 bytes)
    tile = 500 * 500 * 8
    for name, nodes, kw, gb in [("sbc", 21, {}, 1803), ("2dbc", 20, {"grid": "5x4"}, 2505),
                                ("2dbc", 21, {"grid": "7x3"}, 2856), ("sbc", 28, {}, 2163),
                                ("2dbc", 28, {"grid": "7x4"}, 3213)]:
        total = int(transfer_pairs_tiles(get_map(name, nodes, **kw), 600).sum())
        assert round(total * tile / 1e9) == gb, (name, nodes)
    s = stored_tiles(120)
    assert transfer_pairs_tiles(get_map("2dbc", 28, grid="7x4"), 120).sum() / s == \
        pytest.approx(8.559, abs=5e-4)
    assert transfer_pairs_tiles(get_map("sbc", 28), 120).sum() / s == pytest.approx(5.989, abs=5e-4)


@pytest.mark.parametrize("r,expected", [(5, 2.998), (6, 3.996), (7, 4.994), (8, 5.989), (9, 6.985)])
def test_extended_sbc_ratio_at_nt120(r, expected):
    m = get_map("sbc", r * (r - 1) // 2)
    assert transfer_pairs_tiles(m, 120).sum() / stored_tiles(120) == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize("name,nodes,kw", [
    ("2dbc", 12, {"grid": "3x4"}), ("sbc", 10, {}), ("sbc-basic", 8, {}),
    ("sbc25d", 12, {"slices": 2}), ("2dbc25d", 8, {"slices": 2})])
def test_ratio_approaches_leading_term(name, nodes, kw):
    m = get_map(name, nodes, **kw)
    gaps = []
    for nt in (40, 160, 480):
        d = transfer_pairs_tiles(m, nt).sum()
        gaps.append(abs(leading_term_tiles(m, nt) - d) / stored_tiles(nt))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.01 * leading_term_tiles(m, 1)  # within 1% of the leading factor


def test_2_5d_with_one_slice_equals_2d():
    a = transfer_pairs_tiles(get_map("2dbc25d", 6, slices=1, grid="2x3"), 13)
    b = transfer_pairs_tiles(get_map("2dbc", 6, grid="2x3"), 13)
    np.testing.assert_array_equal(a, b)
    a = transfer_pairs_tiles(get_map("sbc25d", 10, slices=1), 13)
    b = transfer_pairs_tiles(get_map("sbc", 10), 13)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("block", [1, 2, 3])
def test_2_5d_reductions_count_one_per_tile_and_other_updating_slice(block):
    # with one node per... 2dbc25d 1x1 slices: every transfer is a reduction
    m = get_map("2dbc25d", 3, slices=3, grid="1x1", slice_block=block)
    nt = 9
    d = transfer_pairs_tiles(m, nt)
    # panel broadcasts stay on the one node of each slice; tile (i, j) gets one partial
    # from each other slice that ran an iteration k < j (b = 1: min(j, c - 1))
    others = [len({slice_of(k, 3, block) for k in range(j)} - {slice_of(j, 3, block)})
              for j in range(nt)]
    if block == 1:
        assert others == [min(j, 2) for j in range(nt)]
    assert d.sum() == sum(others[j] for j in range(nt) for i in range(j, nt))


@pytest.mark.parametrize("owners,nodes,msg", [
    ([[0, 0], [-2, 1]], 3, "got -2"),          # once counted silently (wrapped index)
    ([[0, 0], [2, 1]], 2, "0..1 (nodes=2), got 2"),
    ([[0.0, 0], [1, 1]], None, "integer node ids"),
    (np.zeros((0, 0), dtype=int), None, "nt >= 1"),
])
def test_owner_arrays_are_checked(owners, nodes, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        transfer_pairs(owners, nodes)
    # the upper triangle is not read
    assert transfer_pairs([[0, -5], [1, 1]], 2).tolist() == [[0, 1], [0, 0]]


@pytest.mark.parametrize("n, nb", [(3000, 200), (2950, 200)])
def test_volume_and_compare_float32_count_4_byte_entries(capsys, n, nb):
    """--dtype float32: every byte count is the 4-byte model's (half of float64's, the
    smaller last tile included); tile counts do not change."""
    import json

    from starchol.cli import main

    tile_map = get_map("sbc", 6)
    argv = ["volume", "--dist", "sbc", "--nodes", "6", "--n", str(n), "--nb", str(nb),
            "--json"]
    assert main(argv + ["--dtype", "float32"]) == 0
    d32 = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    d64 = json.loads(capsys.readouterr().out)
    pairs = transfer_pairs_bytes(tile_map, n, nb, cache=True, itemsize=4)
    assert d32["dtype"] == "float32" and d32["bytes"] == int(pairs.sum())
    assert d32["per_node"]["sent_bytes"] == pairs.sum(axis=1).tolist()
    assert d32["per_node"]["received_bytes"] == pairs.sum(axis=0).tolist()
    assert 2 * d32["bytes"] == d64["bytes"]
    assert d32["transfers_tiles"] == d64["transfers_tiles"]
    argv = ["compare", "--nodes", "6", "--n", str(n), "--nb", str(nb), "--json", "--quiet"]
    assert main(argv + ["--dtype", "float32"]) == 0
    c32 = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    c64 = {r["map"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert c32["dtype"] == "float32"
    assert all(2 * r["bytes"] == c64[r["map"]]["bytes"] for r in c32["rows"])
    assert next(r for r in c32["rows"] if r["map"] == str(tile_map))["bytes"] == d32["bytes"]


@pytest.mark.parametrize("block", [2, 3, 5])
@pytest.mark.parametrize("shared", [False, True], ids=["own-nodes", "shared-nodes"])
def test_fast_model_equals_reference_with_slice_blocks(block, shared):
    # b iterations in a row per slice: the oracle applies the rule on its own
    from starchol.distributions.base import iteration_slices
    rng = np.random.default_rng(13 + block)
    for trial in range(12):
        nt, nodes, c = int(rng.integers(1, 12)), int(rng.integers(1, 5)), int(rng.integers(2, 4))
        owners = rng.integers(0, nodes, size=(c, nt, nt))
        p = nodes
        if not shared:
            owners = owners + (np.arange(c) * nodes)[:, None, None]
            p = nodes * c
        it = iteration_slices(nt, c, block)
        for cache in (True, False):
            fast = transfer_pairs(owners, p, cache=cache, it=it)
            slow = as_matrix(reference_pairs(list(owners), cache=cache, block=block), p)
            assert fast.tolist() == slow, (trial, cache)


@pytest.mark.parametrize("name,nodes,c,kw", [("sbc25d", 6, 2, {}), ("2dbc25d", 12, 3, {}),
                                             ("sym25d", 8, 2, {"nt": 9})])
@pytest.mark.parametrize("block", [1, 2, 4])
def test_map_slice_block_drives_model_and_oracle(name, nodes, c, kw, block):
    m = get_map(name, nodes, slices=c, slice_block=block, **kw)
    assert m.slice_block == block and m.params()["slice_block"] == block
    assert m.iteration_slices(9).tolist() == [slice_of(k, c, block) for k in range(9)]
    for cache in (True, False):
        fast = transfer_pairs_tiles(m, 9, cache=cache)
        slow = as_matrix(reference_pairs(list(m.owner_maps(9)), cache=cache, block=block),
                         m.nodes)
        assert fast.tolist() == slow


def test_slice_block_moves_no_more_bytes():
    # with b > 1 every tile still receives at most c - 1 partial sums, and the columns
    # of the first block none (only slice 0 has updated them): fewer bytes than b = 1,
    # by exactly the partial sums of columns 1 .. b-1 (c = 2, NT = 30)
    nt = 30
    one = transfer_pairs_tiles(get_map("sbc25d", 12, slices=2, slice_block=1), nt)
    for b in (2, 3, 4):
        got = transfer_pairs_tiles(get_map("sbc25d", 12, slices=2, slice_block=b), nt)
        assert int(one.sum()) - int(got.sum()) == sum(nt - j for j in range(1, b)), b
