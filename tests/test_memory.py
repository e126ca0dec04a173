"""Peak memory per node (``starchol.model.memory``): hand counts, and a real run's peak
resident memory against the model."""
import json

import numpy as np
import pytest

from starchol import UsageError
from starchol.distributions import BlockCyclic2D, get_map
from starchol.model.counts import task_counts
from starchol.model.load import node_load
from starchol.linalg.cholesky import partial_mask
from starchol.model.counts import local_task_count
from starchol.model.handles import cholesky_handle_counts
from starchol.model.memory import (HANDLE_BYTES, PROCESS_BASE_BYTES, TASK_BYTES, WINDOW,
                                   check_window, default_window, handle_count,
                                   node_memory, panel_received_bytes, panel_tasks)
from starchol.model.volume import tile_bytes, transfer_pairs

TILE = 100 * 100 * 8


def test_hand_count_of_every_part():
    # 2dbc 2x1, N = 300, NB = 100 (NT = 3): rows 0 and 2 on node 0, row 1 on node 1.
    # node 0: tiles (0,0) (2,0) (2,1) (2,2); receives L10 and L11; tasks POTRF(0,0),
    # TRSM(2,0), GEMM + TRSM (2,1), 2 SYRK + POTRF (2,2) = 7.
    # node 1: tiles (1,0) (1,1); receives L00; tasks TRSM(1,0), SYRK + POTRF (1,1) = 3.
    # Handles: the tiles a node owns or its tasks read: node 0 its 4 and L10, L11; node 1
    # its 2 and L00 (not row 2: its tasks never read it).
    mem = node_memory(BlockCyclic2D(2, 1), 300, 100, check=True, gather=True)
    assert mem["tiles"].tolist() == [4 * TILE, 2 * TILE]
    assert mem["received tiles"].tolist() == [2 * TILE, 1 * TILE]
    assert mem["tile handles"].tolist() == [6 * HANDLE_BYTES, 3 * HANDLE_BYTES]
    assert mem["tasks"].tolist() == [7 * TASK_BYTES, 3 * TASK_BYTES]
    assert mem["owner tables"].tolist() == [2 * 9 * 8] * 2
    assert mem["process"].tolist() == [PROCESS_BASE_BYTES] * 2
    assert mem["copies of A (--check)"].tolist() == [8 * TILE, 4 * TILE]
    # the residual A - L L^T: node 0's R[2][1] reads L10 and L11, node 1's nothing remote
    # but L00 (R[1][0] reads L10 and L00)
    assert mem["residual's received tiles (--check)"].tolist() == [2 * TILE, 1 * TILE]
    assert mem["gathered factor"].tolist() == [2 * 300 * 300 * 8, 0]
    assert mem["total"].tolist() == [sum(int(v[r]) for k, v in mem.items() if k != "total")
                                     for r in range(2)]
    # without --check and --gather those parts are absent
    assert set(node_memory(BlockCyclic2D(2, 1), 300, 100)) == {
        "tiles", "received tiles", "tile handles", "tasks", "owner tables", "process",
        "total"}


def test_smaller_last_tile_float32_and_cache_off():
    # 2dbc 1x2, N = 250, NB = 100 (last row 50), float32: columns 0 and 2 on node 0,
    # column 1 on node 1. Cache on: node 1 receives L10 (100 x 100, for SYRK(1,0) and
    # GEMM(2,1,0)) and L20 (50 x 100, GEMM(2,1,0)); node 0 receives L21 (SYRK(2,1)).
    # Cache off: one copy per task, L10 twice.
    on = node_memory(BlockCyclic2D(1, 2), 250, 100, itemsize=4)
    assert on["tiles"].tolist() == [(2 * 100 * 100 + 50 * 100 + 50 * 50) * 4,
                                    (100 * 100 + 50 * 100) * 4]
    assert on["received tiles"].tolist() == [50 * 100 * 4, (100 * 100 + 50 * 100) * 4]
    off = node_memory(BlockCyclic2D(1, 2), 250, 100, itemsize=4, cache=False)
    assert off["received tiles"].tolist() == [50 * 100 * 4, (2 * 100 * 100 + 50 * 100) * 4]


@pytest.mark.parametrize("name,nodes,c,b", [("sbc25d", 6, 2, None), ("2dbc25d", 12, 3, None),
                                            ("2dbc", 4, 1, None), ("sym25d", 8, 2, None),
                                            ("sbc25d", 6, 2, 3), ("2dbc25d", 12, 3, 2)])
def test_tasks_and_handles_match_the_graph(name, nodes, c, b):
    nt = 9
    m = get_map(name, nodes, slices=c, nt=nt, slice_block=b)
    so, it = m.owner_maps(nt), m.iteration_slices(nt)
    counts = task_counts(so, nodes, it)
    assert counts.tolist() == [local_task_count(so, r, it) for r in range(nodes)]
    assert node_load(m, nt)["tasks"].tolist() == counts.tolist()
    adds = [len({int(q) for q in it[:k]} - {int(it[k])}) for k in range(nt)]
    assert counts.sum() == sum(  # every task once: updates, POTRF/TRSM, ADDs
        (nt - k - 1) * (nt - k) // 2 + (nt - k) * (1 + adds[k]) for k in range(nt))
    handles = nt * (nt + 1) // 2 + (sum(int(partial_mask(nt, c, s, it).sum())
                                        for s in range(c)) if c > 1 else 0)
    assert handle_count(nt, c, m.slice_block) == handles
    mem = node_memory(m, nt * 50, 50, window=0)
    used = cholesky_handle_counts(so, it, nodes)
    assert mem["tile handles"].tolist() == (used * HANDLE_BYTES).tolist()
    assert (used <= handles).all() and (used < handles).any()
    assert node_memory(m, nt * 50, 50, window=0, exact=False)["tile handles"].tolist() \
        == [handles * HANDLE_BYTES] * nodes
    assert mem["tasks"].tolist() == (counts * TASK_BYTES).tolist()
    # per iteration, the tasks and the received bytes add up to the whole graph's
    per = panel_tasks(m, nt)
    assert per.sum(axis=0).tolist() == counts.tolist()
    n = nt * 50 - 17                                  # a smaller last tile
    got = panel_received_bytes(m, n, 50)
    want = transfer_pairs(so, nodes, row_weights=tile_bytes(n, 50), it=it).sum(axis=0)
    assert got.sum(axis=0).tolist() == want.tolist()
    # a window of W iterations holds the most of any W consecutive ones
    for w in (1, 2, 4):
        win = node_memory(m, n, 50, window=w)
        assert win["received tiles"].tolist() == [
            max(int(got[k:k + w, b].sum()) for k in range(nt - w + 1)) for b in range(nodes)]
        assert win["tasks"].tolist() == [
            TASK_BYTES * max(int(per[k:k + w, b].sum()) for k in range(nt - w + 1))
            for b in range(nodes)]


def test_window_rule():
    assert WINDOW >= 2     # the next iteration's critical path is submitted while k runs
    assert default_window(WINDOW) == 0 and default_window(100, 8) == WINDOW
    # a graph of at most 256 tasks per node is submitted whole: NT = 10 (220 tasks) on
    # one node, NT = 11 (286) windowed
    assert default_window(10) == 0 and default_window(11) == WINDOW
    assert default_window(19, 6) == 0 and default_window(20, 6) == WINDOW
    assert check_window(None, 100) == WINDOW and check_window(0, 100) == 0
    assert check_window(7, 5) == 0 and check_window(2, 5) == 2
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="window must be an integer >= 0"):
            check_window(bad, 10)
    # the default run holds a few iterations' copies, the whole graph every copy
    m = get_map("sbc", 6)
    whole, win = node_memory(m, 8000, 200, window=0), node_memory(m, 8000, 200)
    assert (win["received tiles"] * 3 < whole["received tiles"]).all()
    assert (win["tiles"] == whole["tiles"]).all()


def test_without_tables_every_node_gets_the_balanced_mean():
    m = get_map("sbc", 6)
    exact = node_memory(m, 6000, 100, window=0)
    mean = node_memory(m, 6000, 100, exact=False, window=0)
    for part in ("owner tables", "process"):
        assert mean[part].tolist() == exact[part].tolist()
    # the handles: the bound of every tile on every node
    assert (mean["tile handles"] > exact["tile handles"]).all()
    # the leading term S (r - 2) bounds the received tiles; tiles and tasks are means
    assert mean["received tiles"][0] >= exact["received tiles"].mean()
    assert abs(mean["tiles"][0] - exact["tiles"].mean()) <= 1
    assert abs(mean["tasks"][0] - exact["tasks"].mean()) <= TASK_BYTES
    # N = 10^7: NT = 20,000 would need 6.4 GB of owner tables; nothing that large is made
    big = node_memory(get_map("2dbc", 4), 10**7, 500)
    assert big["owner tables"][0] == 2 * 20_000 ** 2 * 8
    assert big["tiles"][0] == -(-(10**7 * (10**7 + 500) // 2) * 8 // 4)
    # windowed: the first W iterations' panels, a bound of the exact windowed figures
    exact, mean = node_memory(m, 6000, 100), node_memory(m, 6000, 100, exact=False)
    assert (mean["received tiles"] >= exact["received tiles"]).all()
    assert abs(mean["tasks"][0] - exact["tasks"].mean()) <= 0.01 * exact["tasks"].mean()


def test_preflight_names_the_parts(monkeypatch):
    from starchol.jobs import preflight

    monkeypatch.setattr(preflight, "memory_available", lambda: (10**9, "MemAvailable"))
    with pytest.raises(UsageError, match=r"not enough memory: this rank needs about "
                                         r"[0-9.]+ GB \(tiles [0-9.]+ GB, received tiles "
                                         r"[0-9.]+ [kMG]B, tile handles .*, tasks .*, owner "
                                         r"tables .*, process 85.00 MB\)"):
        preflight.check_rank_memory(get_map("2dbc", 4), 40_000, 500, 1, 4)
    assert preflight.check_rank_memory(get_map("2dbc", 4), 4000, 500, 1, 1) == \
        node_memory(get_map("2dbc", 4), 4000, 500)["total"][1]


@pytest.mark.parametrize("window", [None, 0])
def test_a_real_run_peaks_at_the_model(mpirun, tmp_path, window):
    """Peak resident memory of every rank of a 4-rank run (1 x 4 grid: each rank receives
    three times its own tiles) against the model, in the default window (a few
    iterations' copies alive) and with the whole graph at once (every copy alive)."""
    out = tmp_path / "run.json"
    more = () if window is None else ("--window", str(window))
    p = mpirun(4, "run", "--dist", "2dbc", "--grid", "1x4", "--n", "6000", "--nb", "200",
               "--workers", "1", "--quiet", "--json", out, *more, timeout=300)
    assert p.rank_exits == [0] * 4, p.stderr
    doc = json.loads(out.read_text())["memory"]
    rss = np.array(doc["peak_rss_bytes_per_rank"])
    mem = node_memory(get_map("2dbc", 4, grid="1x4"), 6000, 200, window=window)
    assert doc["model_peak_bytes_per_rank"] == mem["total"].tolist()
    ratio = mem["total"] / rss
    assert ((ratio > 0.9) & (ratio < 1.15)).all(), (ratio, rss, mem)
    whole = node_memory(get_map("2dbc", 4, grid="1x4"), 6000, 200, window=0)
    if window is None:     # the window keeps a small part of the copies (the model's
        # window keeps 0.39-0.42 of them here: 0.5 leaves room for the measured noise)
        assert (rss < whole["total"] - 0.5 * whole["received tiles"]).all(), (rss, whole)
    else:                  # without the received copies the model would fall short
        assert ((mem["total"] - mem["received tiles"]) < 0.75 * rss).all(), (rss, mem)


def test_right_hand_sides_part():
    """nrhs K: every node gets the bound 2 N K itemsize (B, solved in place, and a copy of
    every row tile) plus a handle per tile of B; nothing else changes."""
    from starchol.distributions import get_map
    from starchol.model.memory import HANDLE_BYTES, node_memory

    m = get_map("sbc", 6)
    base = node_memory(m, 1000, 96)
    for itemsize in (8, 4):
        mem = node_memory(m, 1000, 96, nrhs=130, itemsize=itemsize)
        part = 2 * 1000 * 130 * itemsize + HANDLE_BYTES * 11 * 2       # NT 11, KT 2
        assert mem["right-hand sides"].tolist() == [part] * 6
    mem = node_memory(m, 1000, 96, nrhs=130)
    assert (mem["total"] - base["total"]).tolist() == (
        mem["right-hand sides"] + mem["partial sums (rhs solve)"]).tolist()
    assert "right-hand sides" not in base
    # --check keeps B and makes the residual B - A X: twice the entries
    checked = node_memory(m, 1000, 96, nrhs=130, check=True)
    assert checked["right-hand sides"].tolist() == [4 * 1000 * 130 * 8 +
                                                    HANDLE_BYTES * 11 * 2] * 6


def test_partial_sums_part():
    """The rhs variant's partial sums: per node, rows(m) x K x itemsize for each row block
    m it writes a partial sum of, in each pass (forward: the nodes of row m left of the
    diagonal; backward: of column m below it; never d(m)); the residual's with --check.
    Without the tables: the bound of every row block on every node."""
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import node_memory
    from starchol.model.volume import factor_owners

    m = get_map("sbc", 6)
    f = factor_owners(m, 11)
    rows = np.array([96] * 10 + [40])
    want = np.zeros(6, dtype=np.int64)
    for i in range(11):
        for line in (f[i, :i], f[i + 1:, i]):
            for q in set(line.tolist()) - {int(f[i, i])}:
                want[q] += rows[i] * 3 * 8
    mem = node_memory(m, 1000, 96, nrhs=3)
    assert mem["partial sums (rhs solve)"].tolist() == want.tolist()
    assert node_memory(m, 1000, 96, nrhs=3, exact=False)["partial sums (rhs solve)"].tolist() \
        == [2 * 1000 * 3 * 8] * 6
    assert (node_memory(m, 1000, 96, nrhs=3, check=True)["partial sums (rhs solve)"]
            > want).all()
    # one node: no partial sums
    assert node_memory(get_map("2dbc", 1), 1000, 96, nrhs=3)[
        "partial sums (rhs solve)"].tolist() == [0]


def test_mixed_precision_parts():
    """--dtype mixed: the factorization's parts in float32, plus the float64 A on its
    holders, the float64 right-hand sides (4 copies) and one residual's received A and X
    bytes; plan and slurm --mem auto count them."""
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import HANDLE_BYTES, node_memory
    from starchol.model.rhs_volume import rhs_residual_transfer_pairs_bytes
    from starchol.model.volume import factor_owners, tile_bytes

    m = get_map("sbc", 6)
    f32 = node_memory(m, 1000, 96, itemsize=4)
    mixed = node_memory(m, 1000, 96, nrhs=3, mixed=True)
    for part in ("tiles", "received tiles", "tile handles", "tasks"):
        assert mixed[part].tolist() == f32[part].tolist(), part
    idx = np.tril_indices(11)
    home = np.bincount(factor_owners(m, 11)[idx], weights=tile_bytes(1000, 96, 8)[idx],
                       minlength=6)
    assert mixed["float64 A (mixed)"].tolist() == home.astype(int).tolist()
    assert mixed["right-hand sides"].tolist() == [4 * 1000 * 3 * 8 + HANDLE_BYTES * 11] * 6
    got = rhs_residual_transfer_pairs_bytes(m, 1000, 96, 3).sum(axis=0)   # K = 3: rhs
    assert mixed["residual's received tiles (mixed)"].tolist() == got.tolist()
    # without the tables: the balanced means
    rough = node_memory(m, 1000, 96, nrhs=3, mixed=True, exact=False)
    assert rough["float64 A (mixed)"].sum() >= home.sum()
