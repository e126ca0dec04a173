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
