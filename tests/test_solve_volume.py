"""The solve's byte model (and float32 bytes) against the one oracle (volume_reference)."""
import numpy as np
import pytest
from volume_reference import (SOLVE_MAP_IDS, SOLVE_MAPS, SOLVE_SIZES, cholesky_bytes,
                              over_solve_cases, solve_bytes)

from starchol.distributions import get_map
from starchol.model.volume import solve_transfer_pairs_bytes, transfer_pairs_bytes

@over_solve_cases()
def test_solve_model_equals_oracle(name, nodes, grid, c, cache, n, nb, k):
    m = get_map(name, nodes, grid=grid, slices=c)
    for itemsize in (8, 4):
        model = solve_transfer_pairs_bytes(m, n, nb, k, cache=cache, itemsize=itemsize)
        assert model.tolist() == solve_bytes(m, n, nb, k, cache=cache, itemsize=itemsize)


@over_solve_cases(SOLVE_SIZES[:2])
def test_one_pass_model_equals_oracle(name, nodes, grid, c, cache, n, nb, k):
    """Factor.solve_triangular's passes: each equals the oracle's; without the receive
    cache the two add up to the whole solve, with it they send at least as much."""
    m = get_map(name, nodes, grid=grid, slices=c)
    parts = {}
    for which in ("forward", "backward"):
        parts[which] = solve_transfer_pairs_bytes(m, n, nb, k, cache=cache, which=which)
        assert parts[which].tolist() == solve_bytes(m, n, nb, k, cache=cache, which=which)
    both = solve_transfer_pairs_bytes(m, n, nb, k, cache=cache)
    if cache:
        assert (parts["forward"] + parts["backward"] >= both).all()
    else:
        assert np.array_equal(parts["forward"] + parts["backward"], both)


def test_one_pass_bad_which():
    with pytest.raises(ValueError, match="which must be 'both', 'forward' or 'backward', "
                                         "got 'up'"):
        solve_transfer_pairs_bytes(get_map("sbc", 3), 100, 10, 1, which="up")


@pytest.mark.parametrize("name,nodes,grid,c", SOLVE_MAPS, ids=SOLVE_MAP_IDS)
def test_float32_cholesky_bytes_are_half(name, nodes, grid, c):
    m = get_map(name, nodes, grid=grid, slices=c)
    b8 = transfer_pairs_bytes(m, 333, 50)
    b4 = transfer_pairs_bytes(m, 333, 50, itemsize=4)
    assert (b8 == 2 * b4).all()
    assert b4.tolist() == cholesky_bytes(m, 333, 50, itemsize=4)
    assert np.array_equal(b8, np.asarray(cholesky_bytes(m, 333, 50)))


def test_hand_count_solve_1x2_partial_tiles():
    # 2dbc 1x2 (owner j % 2), N = 5, NB = 2: rows [2, 2, 1], d = [0, 1, 0]; K = 3: B's
    # column tiles [2, 1], a B row tile k weighs rows[k] * 3 * 8 bytes.
    # cache on:  L10 (node 0) -> d(1) = 1: 32 | L21 (node 1) -> d(2) = 0: 16 | L20 local
    #            forward  B0 -> {1}: 48, B1 -> {0}: 48 | backward B2 -> {1}: 24, B1 -> {0}: 48
    # cache off: L10 read by 2 tasks on node 1: 64 | L21 by 2 tasks on node 0: 32; B as above
    #            (one read per task and column tile, the same total here)
    m = get_map("2dbc", 2, grid="1x2")
    on = [[0, 32 + 48 + 24], [16 + 48 + 48, 0]]
    off = [[0, 64 + 48 + 24], [32 + 48 + 48, 0]]
    for cache, expect in ((True, on), (False, off)):
        assert solve_transfer_pairs_bytes(m, 5, 2, 3, cache=cache).tolist() == expect
        assert solve_bytes(m, 5, 2, 3, cache=cache) == expect
        # one pass: forward sends L10, L21 and B0, B1; backward L10 -> d(0) is local
        # (node 0 holds it), L21 -> d(1) local too, and B2, B1
        fwd = [[0, 32 * (1 if cache else 2) + 48], [16 * (1 if cache else 2) + 48, 0]]
        bwd = [[0, 24], [48, 0]]
        assert solve_transfer_pairs_bytes(m, 5, 2, 3, cache=cache,
                                          which="forward").tolist() == fwd
        assert solve_transfer_pairs_bytes(m, 5, 2, 3, cache=cache,
                                          which="backward").tolist() == bwd
        half = (np.asarray(expect) // 2).tolist()
        assert solve_transfer_pairs_bytes(m, 5, 2, 3, cache=cache, itemsize=4).tolist() == half


@pytest.mark.parametrize("block,pairs", [(1, [[0, 56], [0, 0]]), (2, [[0, 8], [0, 0]]),
                                         (3, [[0, 0], [0, 0]])])
def test_hand_count_25d_reductions_partial_tiles(block, pairs):
    # 2dbc25d, 2 slices of one node (slice 0 = node 0, slice 1 = node 1), N = 5, NB = 2:
    # rows [2, 2, 1]. The panels stay inside a slice (one node); only partial sums move.
    # b = 1: iterations on slices 0 1 1: column 1 (factored on slice 1) gets slice 0's
    # (1,1) and (2,1), 32 + 16 bytes; column 2 (slice 1) slice 0's (2,2), 8 bytes.
    # b = 2: slices 0 0 1: column 2 gets slice 0's (2,2). b = 3: all on slice 0.
    # Cache off alike.
    m = get_map("2dbc25d", 2, slices=2, grid="1x1", slice_block=block)
    for cache in (True, False):
        assert transfer_pairs_bytes(m, 5, 2, cache=cache).tolist() == pairs
        assert cholesky_bytes(m, 5, 2, cache=cache) == pairs
        assert transfer_pairs_bytes(m, 5, 2, cache=cache, itemsize=4).tolist() == \
            [[v // 2 for v in row] for row in pairs]


@pytest.mark.parametrize("n,nb,k,msg", [(10, 5, 0, "nrhs must be an integer >= 1, got 0"),
                                        (0, 5, 1, "got 0"), (10, 0, 1, "nb must be"),
                                        (10.5, 5, 1, "got 10.5")])
def test_sizes_are_checked(n, nb, k, msg):
    # a bare IndexError / ZeroDivisionError once, or (10.5) a silently truncated count
    m = get_map("2dbc", 2)
    with pytest.raises(ValueError, match=msg):
        solve_transfer_pairs_bytes(m, n, nb, k)
