"""Tile maps: formulas, SBC properties, 2.5D slices, custom files, fix-it errors."""
import numpy as np
import pytest

from starchol import UsageError
from starchol.distributions import (candidate_maps, get_map, maps_for_nodes,
                                    read_chameleon_text, square_grid, write_chameleon_text)
from starchol.model.load import node_load


def test_2dbc_formula_and_default_grid():
    m = get_map("2dbc", 28, grid="7x4")
    o = m.owner_map(15)
    i, j = np.indices(o.shape)
    np.testing.assert_array_equal(o, (i % 7) * 4 + j % 4)
    assert (get_map("2dbc", 28).p, get_map("2dbc", 28).q) == (4, 7)
    assert square_grid(20) == (4, 5) and square_grid(7) == (1, 7)
    assert m.owner(9, 2) == (9 % 7) * 4 + 2


def test_descriptions_count_nodes_in_words():
    assert str(get_map("2dbc", 1)) == "2dbc 1x1 (1 node)"
    assert str(get_map("sbc", 6)) == "sbc r=4 (extended, 6 nodes)"
    from starchol.distributions.base import count_text

    assert (count_text(1, "rank"), count_text(2, "rank")) == ("1 rank", "2 ranks")


SBC = [("sbc", 3), ("sbc", 6), ("sbc", 10), ("sbc", 15), ("sbc", 21), ("sbc", 28),
       ("sbc", 36), ("sbc-basic", 2), ("sbc-basic", 8), ("sbc-basic", 18), ("sbc-basic", 32)]


@pytest.mark.parametrize("name,nodes", SBC)
def test_sbc_pairs_are_symmetric_and_rows_hold_r_minus_1_nodes(name, nodes):
    m = get_map(name, nodes)
    r = m.r
    nt = 3 * r + 2  # not a multiple of the pattern
    o = m.owner_map(nt)
    i, j = np.indices(o.shape)
    off = i % r != j % r
    np.testing.assert_array_equal(o[off], o.T[off])  # cell (x, y) and (y, x): same node
    assert sorted(np.unique(o[np.tril_indices(nt)])) == list(range(nodes))
    for x in range(r):
        rows = [i for i in range(nt) if i % r == x]
        offdiag = {int(o[i, j]) for i in rows for j in range(nt) if j % r != x}
        assert len(offdiag) == r - 1
        diag = {int(o[i, i]) for i in rows}
        if m.extended:
            assert diag <= offdiag  # the diagonal node already sits in its row
        else:
            assert not diag & offdiag and len(diag) == 1


@pytest.mark.parametrize("r", range(3, 10))  # NT=120 holds >= 13 pattern blocks
def test_extended_sbc_diagonal_is_balanced(r):
    m = get_map("sbc", r * (r - 1) // 2)
    load = node_load(m, 120)
    assert load["flops_max_over_avg"] < 1.10
    nt = r * 40
    o = m.owner_map(nt)
    i, j = np.indices(o.shape)
    on_pattern_diagonal = (i % r == j % r) & (i >= j)
    counts = np.bincount(o[on_pattern_diagonal], minlength=m.nodes)
    assert counts.max() / counts.mean() < 1.10


def test_load_figures_from_the_paper():
    for nodes, expected in [(10, 1.035), (15, 1.042), (21, 1.052), (28, 1.061), (36, 1.093)]:
        assert node_load(get_map("sbc", nodes), 120)["flops_max_over_avg"] == \
            pytest.approx(expected, abs=1e-3)
    assert node_load(get_map("2dbc", 28, grid="7x4"), 120)["flops_max_over_avg"] == \
        pytest.approx(1.078, abs=1e-3)
    assert node_load(get_map("2dbc", 36), 120)["flops_max_over_avg"] == pytest.approx(1.116, abs=1e-3)


def test_load_counts_every_task_once():
    nt = 9
    load = node_load(get_map("sbc", 6), nt)
    total = nt / 3 + nt * (nt - 1) / 2 + sum(n for n in range(nt)) + \
        2 * sum(n * (nt - 1 - n) for n in range(nt))
    assert load["flops"].sum() == pytest.approx(total)
    assert load["tiles"].sum() == nt * (nt + 1) // 2


@pytest.mark.parametrize("name,nodes,c,base", [("sbc25d", 12, 2, "sbc"), ("sbc25d", 16, 2, "sbc-basic"),
                                               ("2dbc25d", 8, 2, "2dbc"), ("sbc25d", 18, 3, "sbc")])
def test_2_5d_slices_use_their_own_nodes(name, nodes, c, base):
    m = get_map(name, nodes, slices=c)
    assert m.slices == c and m.nodes == nodes and m.base.name == base
    per = nodes // c
    o = m.owner_maps(11)
    for s in range(c):
        low = o[s][np.tril_indices(11)]
        assert low.min() >= s * per and low.max() < (s + 1) * per
        np.testing.assert_array_equal(o[s] - s * per, o[0])
    assert m.slice_of_iteration(5) == m.iteration_slices(6)[5]
    b = get_map(name, nodes, slices=c, slice_block=3)
    turn = list(range(c)) + list(range(c - 1, -1, -1))      # back and forth
    want = [turn[(k // 3) % (2 * c)] for k in range(12)]
    assert [b.slice_of_iteration(k) for k in range(12)] == want
    assert b.iteration_slices(12).tolist() == want
    assert "3 iterations per slice turn" in str(b) and "iterations" not in str(m)


def test_slice_block_is_checked():
    from starchol.cli import flag_message
    from starchol.errors import UsageError
    for bad in (0, -2, 1.5, "x", True):
        with pytest.raises(UsageError, match="slice_block=.*must be an integer >= 1"):
            get_map("sbc25d", 6, slices=2, slice_block=bad)
    with pytest.raises(UsageError, match="applies to the 2.5D maps only") as e:
        get_map("sbc", 6, slice_block=2)
    assert "--slice-block 2" in flag_message(e.value)
    assert get_map("sbc", 6, slice_block=1).slices == 1


def test_sliced25d_refuses_slices_that_are_not_p_over_c_disjoint_2d_maps():
    from starchol.distributions import BlockCyclic2D, CustomMap, Sliced25D, TileMap

    ok = Sliced25D("2dbc25d", [BlockCyclic2D(1, 2), BlockCyclic2D(1, 2, offset=2)])
    assert ok.nodes == 4 and ok.owner_maps(3)[1].tolist() == [[2, 3, 2]] * 3
    with pytest.raises(UsageError, match=r"^slice_maps is empty"):
        Sliced25D("x", [])
    with pytest.raises(UsageError, match=r"slice_maps\[1\] .* has 0 nodes"):
        Sliced25D("x", [BlockCyclic2D(1, 1), TileMap(0)])
    with pytest.raises(UsageError, match=r"slice_maps\[1\] \(2dbc25d: 2 slices of .*\) is "
                                         r"itself a 2.5D map with 2 slices"):
        Sliced25D("x", [BlockCyclic2D(1, 2), ok])
    with pytest.raises(UsageError, match=r"slice_maps\[1\] \(2dbc 1x3 .*\) has 3 nodes but "
                                         r"slice_maps\[0\] has 2"):
        Sliced25D("x", [BlockCyclic2D(1, 2), BlockCyclic2D(1, 3, offset=2)])
    with pytest.raises(UsageError, match=r"^slice_maps\[1\] uses nodes 0..1, which overlaps "
                                         r"slice_maps\[0\] \(nodes 0..1\); slice 1 of 2 "
                                         r"slices of 2 nodes must use nodes 2..3 \(offset 2\)"):
        Sliced25D("x", [BlockCyclic2D(1, 2), BlockCyclic2D(1, 2)])
    with pytest.raises(UsageError, match=r"slice_maps\[1\] uses nodes 1..2, which overlaps"):
        Sliced25D("x", [BlockCyclic2D(1, 2), BlockCyclic2D(1, 2, offset=1)])
    with pytest.raises(UsageError, match=r"slice_maps\[1\] uses nodes 4..5, which leaves a "
                                         r"gap or is out of order; .* must use nodes 2..3"):
        Sliced25D("x", [BlockCyclic2D(1, 2), BlockCyclic2D(1, 2, offset=4)])
    with pytest.raises(UsageError, match=r"slice_maps\[0\] uses nodes 2..3, which overlaps "
                                         r"slice_maps\[1\]"):
        Sliced25D("x", [BlockCyclic2D(1, 2, offset=2), BlockCyclic2D(1, 2, offset=2)])

    class Unshifted(TileMap):     # says it starts at node 2, puts tiles on nodes 0..1
        offset = 2

        def _slice_owner_map(self, nt, s):
            return np.add.outer(np.arange(nt), np.arange(nt)) % 2

    # a map whose node ids ignore its offset: refused where its owners are made
    wrong = Sliced25D("x", [CustomMap(np.array([[0, 1]])), Unshifted(2)])
    with pytest.raises(UsageError, match=r"slice_maps\[1\] .* puts tiles on nodes 0..1 at "
                                         r"NT = 2, outside its nodes 2..3"):
        wrong.owner_maps(2)


def test_custom_map_refuses_slices_and_grid(tmp_path, capsys):
    from starchol.cli import main

    path = tmp_path / "m.txt"
    write_chameleon_text(path, [[0, 1], [1, 0]])
    with pytest.raises(UsageError, match=r"^slices=2 does not apply to dist=custom: a custom "
                                         r"map is 2D, .*drop slices=, or use dist=2dbc25d"):
        get_map("custom", path=str(path), slices=2)
    with pytest.raises(UsageError, match=r"^grid=2x2 does not apply to dist=custom"):
        get_map("custom", path=str(path), grid="2x2")
    assert get_map("custom", path=str(path), slices=1).nodes == 2
    for flag, value, text in (("--slices", "3", "--slices 3 does not apply to --dist custom"),
                              ("--grid", "1x2", "--grid 1x2 does not apply to --dist custom")):
        assert main(["map", "--dist", "custom", "--map-file", str(path), flag, value,
                     "--nt", "4"]) == 2
        assert text in capsys.readouterr().err


def test_chameleon_pattern_is_the_map_period():
    from starchol.distributions import chameleon_pattern
    from starchol.distributions.custom import _lower_period

    # extended SBC: the smallest period of the owners is the one period() derives
    for nodes, period in ((6, (12, 12)), (10, (20, 10)), (21, (21, 21)), (28, (56, 56)),
                          (36, (72, 36))):
        m = get_map("sbc", nodes)
        assert m.period() == period
        owners = m.owner_map(300)
        assert (_lower_period(owners, 0), _lower_period(owners, 1)) == period
        pattern, every_nt = chameleon_pattern(m, 5)
        assert every_nt and pattern.shape == period
        i, j = np.tril_indices(300)
        assert (pattern[i % period[0], j % period[1]] == owners[i, j]).all()
    # sym at NT = 40: the owners of this NT, repeated every 2r rows/columns or not at all
    m = get_map("sym", 11, nt=40)
    pattern, every_nt = chameleon_pattern(m, 40)
    owners = m.owner_map(40)
    i, j = np.tril_indices(40)
    assert not every_nt
    assert (pattern[i % pattern.shape[0], j % pattern.shape[1]] == owners[i, j]).all()


def test_candidates_have_at_most_nt_slices():
    # a slice s >= NT runs no iteration and factors no column
    maps = candidate_maps(48, nt=5)
    assert max(m.slices for m in maps) == 5
    assert max(m.slices for m in candidate_maps(48, nt=100)) == 24
    assert {m.slices for m in maps if m.name == "2dbc25d"} == {2, 3, 4}


def test_grid_of_2dbc25d_is_one_slice():
    m = get_map("2dbc25d", 8, slices=2, grid="2x2")
    assert m.base.p == 2 and m.base.q == 2
    with pytest.raises(UsageError, match="2x2"):
        get_map("2dbc25d", 8, slices=2, grid="2x4")


def test_wrong_sbc_count_lists_valid_counts_and_a_map_that_fits():
    # the library names its parameters (nodes=, grid=, dist=), not command-line flags
    with pytest.raises(UsageError) as e:
        get_map("sbc", 20)
    msg = str(e.value)
    assert "15" in msg and "21" in msg and "r(r-1)/2" in msg and "dist=2dbc grid=4x5" in msg
    assert "dist=sym" in msg and "--" not in msg
    with pytest.raises(UsageError, match=r"r\^2/2.*use nodes=18 or nodes=32"):
        get_map("sbc-basic", 20)
    with pytest.raises(UsageError, match="divisible by 4"):
        get_map("sbc25d", 18, slices=4)
    with pytest.raises(UsageError, match="neither.*dist=sym25d"):
        get_map("sbc25d", 14, slices=2)
    with pytest.raises(UsageError, match="unknown map"):
        get_map("cyclic", 4)
    with pytest.raises(UsageError, match="grid=7x4 has 28 nodes but nodes is 20"):
        get_map("2dbc", 20, grid="7x4")
    with pytest.raises(UsageError, match="PxQ"):
        get_map("2dbc", 20, grid="7by4")
    with pytest.raises(UsageError, match=">= 1"):
        get_map("2dbc", 0)
    with pytest.raises(UsageError, match="2D map"):
        get_map("sbc", 6, slices=2)
    with pytest.raises(UsageError, match=r"q\^2\+q\+1.*use nodes=13 or nodes=21"):
        get_map("pplane", 20)
    with pytest.raises(UsageError, match=r"q\^2\+q .*use nodes=12 or nodes=20"):
        get_map("aplane", 14)
    with pytest.raises(UsageError, match="at least 2"):
        get_map("sym", 1)


def test_cli_translates_parameters_to_flags():
    from starchol.jobs.options import cli_message

    with pytest.raises(UsageError) as e:
        get_map("sbc", 20)
    msg = str(cli_message(e.value))
    assert "use --nodes 15 or --nodes 21" in msg and "--dist 2dbc --grid 4x5" in msg
    assert "--dist sym" in msg and "nodes=" not in msg


def test_custom_map_files(tmp_path):
    text = tmp_path / "map.txt"
    text.write_text("2 3\n0 1 2\n3 4 5\n")
    m = get_map("custom", path=str(text))
    assert m.nodes == 6 and m.owner(3, 4) == 3 + 1
    o = m.owner_map(5)
    assert o[4, 2] == 2 and o[1, 0] == 3
    npy = tmp_path / "map.npy"
    np.save(npy, np.array([[0, 1], [1, 0]]))
    assert get_map("custom", 4, path=str(npy)).nodes == 4
    out = tmp_path / "out.txt"
    write_chameleon_text(str(out), o)
    np.testing.assert_array_equal(read_chameleon_text(str(out)), o)
    bad = tmp_path / "bad.txt"
    bad.write_text("2 2\n0 1\n")
    with pytest.raises(UsageError, match="header says 2 x 2"):
        get_map("custom", path=str(bad))
    with pytest.raises(UsageError, match="not found"):
        get_map("custom", path=str(tmp_path / "missing.txt"))
    with pytest.raises(UsageError, match="nodes=6"):
        get_map("custom", 4, path=str(text))
    np.save(tmp_path / "neg.npy", np.array([[0, -1]]))
    with pytest.raises(UsageError, match="negative"):
        get_map("custom", path=str(tmp_path / "neg.npy"))


def test_maps_for_nodes():
    names = {(m.name, m.slices) for m in maps_for_nodes(28)}
    assert ("sbc", 1) in names and ("2dbc", 1) in names and ("2dbc25d", 2) in names
    assert ("sbc25d", 14) in names  # 2 nodes per slice: basic SBC r = 2
    assert ("sbc-basic", 1) not in names and ("sym", 1) in names and ("sym25d", 2) in names
    assert all(m.nodes == 28 for m in maps_for_nodes(28))


def test_candidates_for_at_most_p_nodes():
    maps = candidate_maps(31, nt=620)
    by = {(m.name, m.slices): m for m in maps}
    assert by[("pplane", 1)].nodes == 31 and by[("aplane", 1)].nodes == 30
    assert by[("sbc", 1)].nodes == 28 and by[("sym", 1)].nodes == 31
    assert all(m.nodes <= 31 for m in maps)
    assert {g.summary()["grid"] for g in maps if g.name == "2dbc"} == {"1x31", "31x1"}


def test_a_tile_map_subclass_has_a_description():
    # the base class's __repr__ uses str(): a subclass that only gives the owners (as
    # the base class asks) must still print, e.g. in error messages and records
    from starchol.distributions import TileMap

    class Diagonal(TileMap):
        name = "diagonal"

        def _slice_owner_map(self, nt, s):
            i = np.arange(nt)
            return (i[:, None] + i[None, :]) % self.nodes

    m = Diagonal(3)
    assert str(m) == "diagonal (3 nodes)" and repr(m) == "<Diagonal diagonal (3 nodes)>"


def _same_map(a, b, nts=(1, 7, 25)):
    """Same class, description, parameters, owners and iteration slices at several NT."""
    assert type(a) is type(b) and str(a) == str(b) and a.params() == b.params()
    for nt in nts:
        np.testing.assert_array_equal(a.owner_maps(nt), b.owner_maps(nt))
        np.testing.assert_array_equal(a.iteration_slices(nt), b.iteration_slices(nt))


@pytest.mark.parametrize("nodes, nt", [(1, None), (2, 30), (6, None), (7, 40), (8, 24),
                                       (12, None), (13, 60), (20, 100)])
def test_params_rebuild_every_catalogue_map(nodes, nt):
    """``get_map(**m.params())`` gives an equal map for every catalogue map (2dbc grids,
    sbc and sbc-basic, the planes, sym for NT, and the 2.5D maps), on P nodes or fewer."""
    maps = candidate_maps(nodes, nt=nt)
    assert maps
    for m in maps:
        params = m.params()
        assert set(params) <= {"dist", "nodes", "slices", "grid", "path", "nt", "slice_block"}
        assert ("slice_block" in params) == (m.slices > 1)
        _same_map(get_map(**params), m)


def test_params_rebuild_a_custom_map_and_a_sym_map_for_nt(tmp_path):
    path = tmp_path / "m.txt"
    write_chameleon_text(str(path), [[0, 1], [1, 2]])
    m = get_map("custom", 5, path=str(path))
    assert m.params() == {"dist": "custom", "nodes": 5, "slices": 1, "path": str(path)}
    _same_map(get_map(**m.params()), m)
    small = get_map("sym", 31, nt=60)   # NT too small for PG(2,5): another pattern
    assert small.params() == {"dist": "sym", "nodes": 31, "slices": 1, "nt": 60}
    assert str(small) != str(get_map("sym", 31))
    _same_map(get_map(**small.params()), small)
    sliced = get_map("sym25d", 12, slices=2, nt=30)
    assert sliced.params() == {"dist": "sym25d", "nodes": 12, "slices": 2, "nt": 30,
                               "slice_block": 1}
    _same_map(get_map(**sliced.params()), sliced)
    blocks = get_map("sbc25d", 12, slices=2, slice_block=5)
    assert blocks.params()["slice_block"] == 5
    _same_map(get_map(**blocks.params()), blocks)
