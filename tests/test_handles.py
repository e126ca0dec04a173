"""The tile handles a node registers in the factorization (``starchol.model.handles``):
hand counts, and the rule against the recorded task graph of every map family (the
tiles a node owns or the tasks it runs touch)."""
import numpy as np
import pytest

from starchol.distributions import BlockCyclic2D, get_map
from starchol.model.handles import cholesky_handle_counts, cholesky_handles, partial_mask
from starchol.model.memory import HANDLE_BYTES, handle_count, node_memory


def _tiles(mask):
    return sorted(map(tuple, np.argwhere(mask).tolist()))


def test_hand_count_2dbc_2x1():
    # NT = 3, rows 0 and 2 on node 0, row 1 on node 1. Node 0 owns (0,0) (2,0) (2,1)
    # (2,2); its TRSM(2,1) reads L11, its GEMM(2,1,0) L10: 6 handles. Node 1 owns (1,0)
    # (1,1); its TRSM(1,0) reads L00, its SYRK(1,0) its own L10; row 2 is never read
    # there: 3 handles (every node registered all 6 before).
    m = BlockCyclic2D(2, 1)
    so, it = m.owner_maps(3), m.iteration_slices(3)
    home0, parts0 = cholesky_handles(so, it, 0)
    home1, _ = cholesky_handles(so, it, 1)
    assert _tiles(home0) == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]
    assert _tiles(home1) == [(0, 0), (1, 0), (1, 1)]
    assert parts0 == []
    assert cholesky_handle_counts(so, it, 2).tolist() == [6, 3]
    mem = node_memory(m, 300, 100)
    assert mem["tile handles"].tolist() == [6 * HANDLE_BYTES, 3 * HANDLE_BYTES]


def test_hand_count_two_slices_of_one_node():
    # 2dbc25d, 2 slices of 1x1, slice block 1, NT = 3: iteration 0 on slice 0 (node 0),
    # iterations 1 and 2 on slice 1 (node 1). Node 0 factors column 0 (3 tiles) and
    # updates its partial sums of columns 1 and 2 (3 tiles); node 1 owns the factoring
    # copies of columns 1 and 2 (3 tiles) and its ADDs read slice 0's partial sums of
    # them (3 tiles); node 0 never reads column 1 or 2, node 1 never column 0.
    m = get_map("2dbc25d", 2, slices=2, grid="1x1", slice_block=1)
    so, it = m.owner_maps(3), m.iteration_slices(3)
    assert it.tolist() == [0, 1, 1]
    home0, (p00, p01) = cholesky_handles(so, it, 0)
    home1, (p10, p11) = cholesky_handles(so, it, 1)
    assert _tiles(home0) == [(0, 0), (1, 0), (2, 0)]
    assert _tiles(p00) == [(1, 1), (2, 1), (2, 2)] and not p01.any()
    assert _tiles(home1) == [(1, 1), (2, 1), (2, 2)]
    assert _tiles(p10) == [(1, 1), (2, 1), (2, 2)] and not p11.any()
    assert _tiles(partial_mask(3, 2, 0, it)) == [(1, 1), (2, 1), (2, 2)]
    assert cholesky_handle_counts(so, it, 2).tolist() == [6, 6]
    assert handle_count(3, 2, 1) == 6 + 3          # every tile of every copy


@pytest.mark.parametrize("name,nodes,nt,kw", [
    ("2dbc", 1, 5, {}), ("2dbc", 4, 9, {}), ("2dbc", 6, 11, {"grid": "3x2"}),
    ("sbc", 3, 7, {}), ("sbc", 6, 13, {}), ("sbc-basic", 8, 12, {}), ("pplane", 7, 10, {}),
    ("aplane", 6, 9, {}), ("sym", 5, 9, {}), ("sbc25d", 6, 13, {"slices": 2}),
    ("sbc25d", 6, 13, {"slices": 2, "slice_block": 3}), ("2dbc25d", 12, 10, {"slices": 3}),
    ("2dbc25d", 8, 9, {"slices": 4}), ("sym25d", 8, 11, {"slices": 2})])
def test_the_rule_is_the_recorded_graph(name, nodes, nt, kw):
    """Per node: the tiles it owns and the operands of the tasks it runs, read off the
    graph the compiled loop records (every node's tasks), are exactly the handles."""
    pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
    from starchol.linalg.task_graph import record_cholesky

    m = get_map(name, nodes, nt=nt, **kw)
    g = record_cholesky(m, nt * 10 - 3, 10)
    tasks = g.records[g.records[:, 0] != 0]
    ids, owners = tasks[:, [2, 5, 8]], tasks[:, [4, 7, 10]]
    so, it = m.owner_maps(nt), m.iteration_slices(nt)
    counts = cholesky_handle_counts(so, it, nodes)
    for b in range(nodes):
        want = set(ids[g.node == b].ravel().tolist()) | set(ids[owners == b].tolist())
        want.discard(-1)
        home, partials = cholesky_handles(so, it, b)
        got = set(np.flatnonzero(home).tolist())
        for t, mask in enumerate(partials):       # the recorder's ids: matrix after matrix
            got |= set((np.flatnonzero(mask) + (t + 1) * nt * nt).tolist())
        assert got == want, b
        assert counts[b] == len(want)
    assert counts.max() <= handle_count(nt, m.slices, m.slice_block)


def test_fewer_handles_where_the_map_spreads_rows():
    # sbc r = 8 (28 nodes): a node's tasks read the rows and columns of 2 of the 8
    # classes: about 0.44 of the tiles before, under 0.3 of them now (NT = 120)
    m = get_map("sbc", 28)
    nt = 120
    counts = cholesky_handle_counts(m.owner_maps(nt), m.iteration_slices(nt), 28)
    assert counts.max() < 0.3 * handle_count(nt, 1)


def _recorded_use(g, nodes):
    """Per node, the data ids of the tiles it owns or its tasks touch in the recorded
    graph ``g`` (records, node per task)."""
    tasks = g.records[g.records[:, 0] != 0]
    ids, owners = tasks[:, [2, 5, 8]], tasks[:, [4, 7, 10]]
    out = []
    for b in range(nodes):
        use = set(ids[g.node == b].ravel().tolist()) | set(ids[owners == b].tolist())
        use.discard(-1)
        out.append(use)
    return out


@pytest.mark.parametrize("name,nodes,kw", [("2dbc", 4, {}), ("sbc", 6, {}),
                                           ("2dbc", 6, {"grid": "3x2"}),
                                           ("sbc25d", 6, {"slices": 2})])
@pytest.mark.parametrize("variant", ["factor", "rhs"])
@pytest.mark.parametrize("which", ["both", "forward", "backward"])
def test_solve_rule_is_the_recorded_graph(name, nodes, kw, variant, which):
    """The solve's tiles of L per node: those it owns or its tasks read, as recorded."""
    pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
    from starchol.linalg.distributed import layout
    from starchol.linalg.task_graph import record_solve
    from starchol.model.handles import solve_handles

    nt, nb = 9, 10
    m = get_map(name, nodes, nt=nt, **kw)
    g = record_solve(m, nt * nb - 3, nb, 2 * nb + 1, which=which, variant=variant)
    owners, _ = layout(m, nt * nb - 3, nb, "symmetric")
    for b, use in enumerate(_recorded_use(g, nodes)):
        want = {x for x in use if x < nt * nt}           # L's ids come first
        got = set(np.flatnonzero(solve_handles(owners, b, variant, which)).tolist())
        assert got == want, b


@pytest.mark.parametrize("name,nodes,kw", [("2dbc", 4, {}), ("sbc", 6, {}),
                                           ("sym25d", 8, {"slices": 2})])
@pytest.mark.parametrize("graph", ["llt", "symm", "symm_rhs"])
def test_residual_rules_are_the_recorded_graphs(name, nodes, kw, graph):
    """The residuals' tiles of L (A) and R per node, against the recorded graphs."""
    pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
    from starchol.linalg.distributed import layout
    from starchol.linalg.rhs_solve import partial_layout
    from starchol.linalg.task_graph import _backend
    from starchol.model.handles import llt_residual_handles, symm_residual_handles
    from starchol.model.volume import tile_extents

    nt, nb = 8, 10
    n = nt * nb - 3
    m = get_map(name, nodes, nt=nt, **kw)
    b_, g_, _ = _backend()
    rows = tile_extents(n, nb)
    cols = tile_extents(3, nb)
    lo, ls = layout(m, n, nb, "symmetric")
    lo = np.ascontiguousarray(lo, dtype=np.int64)
    bo, bs = layout(m, n, nb, "rhs", 3)
    bo = np.ascontiguousarray(bo, dtype=np.int64)
    b_.record_start()
    try:
        hl = b_.TileHandles.recording(lo, rows, rows, ls)
        if graph == "llt":
            hr = b_.TileHandles.recording(lo, rows, rows, ls)
            g_.llt_residual(hl, hr)
        else:
            hx = b_.TileHandles.recording(bo, rows, cols, bs)
            hr = b_.TileHandles.recording(bo, rows, cols, bs)
            if graph == "symm":
                g_.symm_residual(hl, hx, hr)
            else:
                po, pc, pm = partial_layout(lo, nodes, cols, "residual")
                ht = b_.TileHandles.recording(po, rows, pc, pm)
                g_.symm_residual_rhs(hl, hx, hr, ht, nodes)
    finally:
        records, _ = b_.record_stop()
    tasks = records[records[:, 0] != 0]
    modes, ids, owners = tasks[:, [3, 6, 9]], tasks[:, [2, 5, 8]], tasks[:, [4, 7, 10]]
    runs = owners[np.arange(len(tasks)), np.argmax((modes & 2) != 0, axis=1)]
    for b in range(nodes):
        use = set(ids[runs == b].ravel().tolist()) | set(ids[owners == b].tolist())
        use.discard(-1)
        if graph == "llt":
            want_l, want_r = llt_residual_handles(lo, b)
            assert set(np.flatnonzero(want_r).tolist()) == \
                {x - nt * nt for x in use if nt * nt <= x < 2 * nt * nt}, b
        else:
            want_l = symm_residual_handles(lo, b, "rhs" if graph == "symm_rhs" else "factor")
        assert set(np.flatnonzero(want_l).tolist()) == {x for x in use if x < nt * nt}, b
