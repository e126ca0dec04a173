"""The simulator (starchol.linalg.simulate, on SimGrid): bytes = the exact model per node
pair, makespans worked out by hand, determinism, clear errors for bad platforms."""
import json

import numpy as np
import pytest

from starchol.distributions import CustomMap, get_map
from starchol.errors import UsageError
from starchol.model.platform import (NodeSpec, Platform, load_node, node_from_dict,
                                      parse_bandwidth, parse_latency)
from starchol.linalg.task_graph import record_cholesky, record_solve
from starchol.model.volume import solve_transfer_pairs_bytes, transfer_pairs_bytes
from starchol.model.memory import WINDOW
from starchol.model.counts import KERNELS

sim = pytest.importorskip("starchol.linalg.simulate")
pytest.importorskip("starchol.runtime._sim")

SPEEDS = {"potrf": 2.0, "trsm": 4.0, "syrk": 4.0, "gemm": 8.0, "add": 1.0}   # GFlop/s


def _node(workers=2, **kw):
    return NodeSpec(workers=workers, gflops={"float64": dict(SPEEDS),
                                             "float32": {k: 2 * v for k, v in SPEEDS.items()}},
                    **kw)


def _platform(nodes, workers=2, bandwidth="10mbit", latency="0.1ms", **kw):
    return Platform(node=_node(workers), nodes=nodes, bandwidth=parse_bandwidth(bandwidth),
                    latency=parse_latency(latency), **kw)


MAPS = [("2dbc", 6, {"grid": "2x3"}), ("sbc", 6, {}), ("sbc25d", 6, {"slices": 2}),
        ("2dbc25d", 8, {"grid": "2x2", "slices": 2}), ("sym", 7, {})]


@pytest.mark.parametrize("name,nodes,kw", MAPS)
@pytest.mark.parametrize("cache", [True, False])
def test_cholesky_bytes_equal_the_model_per_pair(name, nodes, kw, cache):
    tile_map = get_map(name, nodes, **kw)
    n, nb = 1100, 100                      # NT = 11, a smaller last tile
    got = sim.simulate_cholesky(tile_map, n, nb, _platform(nodes), cache=cache)
    want = transfer_pairs_bytes(tile_map, n, nb, cache=cache)
    np.testing.assert_array_equal(got.pair_bytes, want)
    assert got.bytes == want.sum() > 0
    assert got.tasks == record_cholesky(tile_map, n, nb).tasks


def test_custom_map_and_float32_bytes_equal_the_model():
    tile_map = CustomMap([[0, 1, 2], [2, 0, 1], [1, 2, 0]])
    got = sim.simulate_cholesky(tile_map, 700, 64, _platform(3), dtype="float32")
    np.testing.assert_array_equal(got.pair_bytes,
                                  transfer_pairs_bytes(tile_map, 700, 64, itemsize=4))


@pytest.mark.parametrize("which", ["both", "forward", "backward"])
@pytest.mark.parametrize("cache", [True, False])
def test_solve_bytes_equal_the_model_per_pair(which, cache):
    tile_map = get_map("sbc25d", 6, slices=2)
    got = sim.simulate_solve(tile_map, 900, 100, 150, _platform(6), which=which,
                             cache=cache)
    np.testing.assert_array_equal(
        got.pair_bytes, solve_transfer_pairs_bytes(tile_map, 900, 100, 150, cache=cache,
                                                   which=which))


@pytest.mark.parametrize("which", ["both", "forward", "backward"])
@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("name,nodes,kw", [("sbc25d", 6, {"slices": 2}), ("2dbc", 4, {})])
def test_rhs_solve_bytes_equal_the_model_per_pair(which, cache, name, nodes, kw):
    """The rhs variant's graph (L in place, partial sums) replayed: its bytes are
    rhs_solve_transfer_pairs_bytes per pair, far below the factor variant's for K = 3."""
    from starchol.model.rhs_volume import rhs_solve_transfer_pairs_bytes

    tile_map = get_map(name, nodes, **kw)
    got = sim.simulate_solve(tile_map, 900, 100, 3, _platform(nodes), which=which,
                             cache=cache, variant="rhs")
    want = rhs_solve_transfer_pairs_bytes(tile_map, 900, 100, 3, cache=cache, which=which)
    np.testing.assert_array_equal(got.pair_bytes, want)
    assert 0 < want.sum() * 10 < solve_transfer_pairs_bytes(tile_map, 900, 100, 3,
                                                            cache=cache, which=which).sum()


def test_chain_of_tasks_on_one_worker():
    """NT = 2 on one node, one worker: POTRF, TRSM, SYRK, POTRF one after the other."""
    nb = 100
    got = sim.simulate_cholesky(get_map("2dbc", 1), 2 * nb, nb, _platform(1, workers=1))
    f = nb ** 3
    want = (f / 3 / 2e9) + (f / 4e9) + (f / 4e9) + (f / 3 / 2e9)
    assert got.makespan_s == pytest.approx(want, rel=1e-9)
    assert got.critical_path_s == pytest.approx(want, rel=1e-9)
    assert list(got.worker) == [0, 0, 0, 0]
    np.testing.assert_allclose(np.diff(got.start), [f / 3 / 2e9, f / 4e9, f / 4e9])
    assert got.busy[0] == pytest.approx(1.0)
    assert got.gflops == pytest.approx((2 * nb) ** 3 / 3 / want / 1e9)


def test_one_transfer_over_a_link_of_known_bandwidth_and_latency():
    """2dbc 2x1, NT = 2: L[0][0] goes from node 0 to node 1 once (latency of both
    links + bytes / bandwidth), then TRSM, SYRK, POTRF on node 1."""
    nb = 100
    plat = _platform(2, workers=1, bandwidth=1e6, latency=0.01)
    got = sim.simulate_cholesky(get_map("2dbc", 2, grid="2x1"), 2 * nb, nb, plat)
    f = nb ** 3
    transfer = 2 * 0.01 + nb * nb * 8 / 1e6
    want = f / 3 / 2e9 + transfer + f / 4e9 + f / 4e9 + f / 3 / 2e9
    assert got.transfers == 1
    assert got.pair_bytes.tolist() == [[0, nb * nb * 8], [0, 0]]
    assert got.makespan_s == pytest.approx(want, rel=1e-9)
    assert got.critical_path_comm_s == pytest.approx(want, rel=1e-9)
    # a backbone in the route: its latency adds, its bandwidth caps
    slow = sim.simulate_cholesky(get_map("2dbc", 2, grid="2x1"), 2 * nb, nb, Platform(
        node=_node(1), nodes=2, bandwidth=1e6, latency=0.01, backbone_bandwidth=5e5,
        backbone_latency=0.5))
    assert slow.makespan_s == pytest.approx(want - transfer + 0.52 + nb * nb * 8 / 5e5,
                                            rel=1e-9)


def test_a_nodes_sends_follow_each_other_without_a_latency_each():
    """NT = 3, tiles (0,0) on node 0, (1,0) and (1,1) on node 1, (2,0) on node 2, one
    send in flight per node: L[0][0] leaves node 0 for node 1 (TRSM(1,0), the higher
    priority) and then for node 2, whose link carries nothing else meanwhile. The second
    send starts when the first one's bytes have left, not when they arrive: TRSM(2,0)
    starts at POTRF + 2 bytes / bandwidth + the route's latency (TCP streams a node's
    sends), not at POTRF + 2 (bytes / bandwidth + latency)."""
    nb, lat, bw = 100, 0.01, 1e6
    plat = _platform(3, workers=1, bandwidth=bw, latency=lat)
    tile_map = CustomMap([[0, 0, 0], [1, 1, 0], [2, 1, 2]])
    got = sim.simulate_cholesky(tile_map, 3 * nb, nb, plat, sends_in_flight=1)
    potrf = nb ** 3 / 3 / 2e9
    tile = nb * nb * 8 / bw
    first = {node: got.start[got.node == node].min() for node in (1, 2)}
    assert first[1] == pytest.approx(potrf + tile + 2 * lat, rel=1e-9)
    assert first[2] == pytest.approx(potrf + 2 * tile + 2 * lat, rel=1e-9)


def test_message_overhead_serializes_a_senders_messages():
    """The map of the test above, one send in flight, and the communication thread's
    overhead o per message on each end: L[0][0] to node 1 takes o (node 0's thread),
    bytes / bandwidth, the latency, o (node 1's thread); the second message's o on node 0
    starts when the first one's bytes have left (its send slot), so node 2 gets it at
    POTRF + 3 o + 2 bytes / bandwidth + latency."""
    from starchol.linalg.runtime_costs import RuntimeSpec

    nb, lat, bw, o = 100, 0.01, 1e6, 0.003
    plat = _platform(3, workers=1, bandwidth=bw, latency=lat)
    tile_map = CustomMap([[0, 0, 0], [1, 1, 0], [2, 1, 2]])
    got = sim.simulate_cholesky(tile_map, 3 * nb, nb, plat, sends_in_flight=1,
                                runtime=RuntimeSpec(message_overhead_s=o))
    potrf = nb ** 3 / 3 / 2e9
    tile = nb * nb * 8 / bw
    first = {node: got.start[got.node == node].min() for node in (1, 2)}
    assert first[1] == pytest.approx(potrf + 2 * o + tile + 2 * lat, rel=1e-9)
    assert first[2] == pytest.approx(potrf + 3 * o + 2 * tile + 2 * lat, rel=1e-9)
    np.testing.assert_array_equal(got.pair_bytes, transfer_pairs_bytes(tile_map, 3 * nb, nb))


def test_receive_overhead_serializes_a_receivers_messages():
    """NT = 3, (0,0) on node 0, (1,0) on node 1, (2,0) and (2,2) on node 2, (1,1) and
    (2,1) on node 3, one send in flight, a receive overhead r per message on the
    receiver's thread only (no message_overhead): L[0][0] reaches node 1 at POTRF + tile
    + 2 lat + r and node 2 one tile later (node 0's one send slot; each receiver pays r
    on its own thread). TRSM(1,0) and TRSM(2,0) then send L[1][0] and L[2][0] to node 3,
    the second's bytes right after the first's: SYRK(1,1) starts at A = TRSM(1,0)'s end
    + tile + 2 lat + r, and with r > tile node 3's thread takes L[2][0] only after
    L[1][0]: GEMM(2,1), node 3's third task, starts at A + r (not at A + tile)."""
    from starchol.linalg.runtime_costs import RuntimeSpec

    nb, lat, bw, r = 100, 0.01, 1e6, 0.2
    plat = _platform(4, workers=1, bandwidth=bw, latency=lat)
    tile_map = CustomMap([[0, 0, 0], [1, 3, 0], [2, 3, 2]])
    rt = RuntimeSpec(receive_overhead_s=r)
    got = sim.simulate_cholesky(tile_map, 3 * nb, nb, plat, sends_in_flight=1, runtime=rt)
    potrf, trsm = nb ** 3 / 3 / 2e9, nb ** 3 / 4e9
    tile = nb * nb * 8 / bw
    first = {node: got.start[got.node == node].min() for node in (1, 2, 3)}
    assert first[1] == pytest.approx(potrf + tile + 2 * lat + r, rel=1e-9)
    assert first[2] == pytest.approx(potrf + 2 * tile + 2 * lat + r, rel=1e-9)
    a = first[1] + trsm + tile + 2 * lat + r
    assert first[3] == pytest.approx(a, rel=1e-9)
    assert np.sort(got.start[got.node == 3])[2] == pytest.approx(a + r, rel=1e-9)
    np.testing.assert_array_equal(got.pair_bytes, transfer_pairs_bytes(tile_map, 3 * nb, nb))
    again = sim.simulate_cholesky(tile_map, 3 * nb, nb, plat, sends_in_flight=1, runtime=rt)
    np.testing.assert_array_equal(got.start, again.start)
    # on top of message_overhead o: each receiver's thread spends o + r per message
    o = 0.003
    both = sim.simulate_cholesky(tile_map, 3 * nb, nb, plat, sends_in_flight=1,
                                 runtime=RuntimeSpec(message_overhead_s=o,
                                                     receive_overhead_s=r))
    assert both.start[both.node == 1].min() == pytest.approx(
        potrf + 2 * o + tile + 2 * lat + r, rel=1e-9)


def test_sent_overhead_delays_what_follows_on_the_senders_thread_not_the_message():
    """2dbc 2x1, NT = 3: (0,0), (2,0), (2,1), (2,2) on node 0; (1,0), (1,1) on node 1;
    one worker per node. L[0][0] leaves node 0 for node 1 at POTRF + tile, arrives 2 lat
    later and node 1's thread takes r: TRSM(1,0) starts at POTRF + tile + 2 lat + r, the
    same with or without a sent_overhead s (it does not delay the message). Node 0's
    thread then spends s on that send, from POTRF + tile: L[1][0] comes back to node 0
    (for GEMM(2,1)) while it does, waits, and takes r after it, so GEMM(2,1) starts at
    POTRF + tile + s + r, where without s it starts at L[1][0]'s arrival + r."""
    from starchol.linalg.runtime_costs import RuntimeSpec

    nb, lat, bw, r, s = 100, 0.01, 1e6, 0.002, 1.0
    plat = _platform(2, workers=1, bandwidth=bw, latency=lat)
    tile_map = get_map("2dbc", 2, grid="2x1")
    potrf, trsm = nb ** 3 / 3 / 2e9, nb ** 3 / 4e9
    tile = nb * nb * 8 / bw
    gemm = KERNELS.index("gemm")
    got = {}
    for name, sent in (("without", 0.0), ("with", s)):
        res = sim.simulate_cholesky(tile_map, 3 * nb, nb, plat, runtime=RuntimeSpec(
            receive_overhead_s=r, sent_overhead_s=sent))
        np.testing.assert_array_equal(res.pair_bytes,
                                      transfer_pairs_bytes(tile_map, 3 * nb, nb))
        got[name] = res
    a1 = potrf + tile + 2 * lat + r
    for res in got.values():
        assert res.start[res.node == 1].min() == pytest.approx(a1, rel=1e-9)
    back = a1 + trsm + tile + 2 * lat               # L[1][0] arrives at node 0
    assert got["without"].start[got["without"].kernel == gemm][0] == pytest.approx(
        back + r, rel=1e-9)
    assert got["with"].start[got["with"].kernel == gemm][0] == pytest.approx(
        potrf + tile + s + r, rel=1e-9)


def test_chameleon_priorities_rank_a_steps_updates_by_anti_diagonal():
    """Chameleon's pzpotrf priorities: SYRK(n, k) gets 2 NT - 2k - n and GEMM(m, n, k) of
    tile (m, n) 2 NT - 2k - m - n (starchol's loops: 2 NT - 2k - 2n for both); POTRF and
    TRSM keep theirs, the bytes do not change and the same inputs give the same times."""
    from starchol.linalg.runtime_costs import RuntimeSpec

    nt, nb = 5, 100
    tile_map = get_map("2dbc", 4, grid="2x2")
    graph = record_cholesky(tile_map, nt * nb, nb)
    cham = graph.chameleon_records()
    assert cham is not graph.records and cham.shape == graph.records.shape
    rows = np.flatnonzero(graph.records[:, 0] != 0)
    names = np.array(graph.codelet_names)[graph.codelet]
    for t, row in enumerate(rows):
        rec = graph.records[row]
        k = rec[11]
        m, n = graph.task_tile[t]
        if names[t] in ("gemm", "gemm0"):
            assert m > n > k
            assert rec[1] == 2 * nt - 2 * k - 2 * n
            assert cham[row, 1] == 2 * nt - 2 * k - m - n
        elif names[t] in ("syrk", "syrk0"):
            assert m == n > k
            assert rec[1] == 2 * nt - 2 * k - 2 * n
            assert cham[row, 1] == 2 * nt - 2 * k - n
        else:
            assert cham[row, 1] == rec[1]
    np.testing.assert_array_equal(np.delete(cham, 1, axis=1),
                                  np.delete(graph.records, 1, axis=1))
    assert (names == "gemm").sum() == nt * (nt - 1) * (nt - 2) // 6
    assert (names == "syrk").sum() == nt * (nt - 1) // 2
    plat = _platform(4, workers=2)
    rt = RuntimeSpec(priorities="chameleon", sends_in_flight=1)
    a = sim.simulate_cholesky(tile_map, nt * nb, nb, plat, runtime=rt)
    np.testing.assert_array_equal(a.pair_bytes, transfer_pairs_bytes(tile_map, nt * nb, nb))
    b = sim.simulate_cholesky(tile_map, nt * nb, nb, plat, runtime=rt)
    np.testing.assert_array_equal(a.start, b.start)


def test_comm_throughput_is_shared_by_a_nodes_sends_and_receives():
    """2dbc 2x1, NT = 2 (the one-transfer test): with the nodes' communication at
    ``comm_throughput`` below the link, the transfer takes bytes / comm_throughput."""
    nb = 100
    tile = nb * nb * 8
    node = _node(1, comm_throughput=2e5)
    plat = Platform(node=node, nodes=2, bandwidth=1e6, latency=0.0)
    got = sim.simulate_cholesky(get_map("2dbc", 2, grid="2x1"), 2 * nb, nb, plat)
    f = nb ** 3
    assert got.makespan_s == pytest.approx(
        f / 3 / 2e9 + tile / 2e5 + f / 4e9 + f / 4e9 + f / 3 / 2e9, rel=1e-9)
    # node 0 holds (0,0) and (1,1), node 1 holds (1,0): (0,0) goes 0 -> 1, then (1,0)
    # goes 1 -> 0 (after TRSM): one at a time, each at the full comm_throughput
    seq = sim.simulate_cholesky(CustomMap([[0, 1], [1, 0]]), 2 * nb, nb, plat)
    assert seq.makespan_s == pytest.approx(
        f / 3 / 2e9 + tile / 2e5 + f / 4e9 + tile / 2e5 + f / 4e9 + f / 3 / 2e9, rel=1e-9)


def test_two_opposite_transfers_share_both_nodes_comm_throughput():
    """Two transfers at once, node 0 -> 1 and 1 -> 0 (NT = 3, custom map, POTRF-free
    writers): with a shared comm_throughput C on each node, each gets C / 2: both arrive
    at 2 bytes / C; without it (links full-duplex) at bytes / bandwidth."""
    from starchol.linalg.task_graph import TaskGraph

    tile = 80000
    # records: task 0 writes d0 on node 0, task 1 writes d1 on node 1, task 2 (node 1)
    # reads d0 and writes d2, task 3 (node 0) reads d1 and writes d3
    rec = np.full((4, 12), -1, dtype=np.int64)
    rec[:, 0], rec[:, 1] = 4, 0
    rec[0, 2:5] = [0, 2, 0]
    rec[1, 2:5] = [1, 2, 1]
    rec[2, 2:8] = [0, 1, 0, 2, 2, 1]
    rec[3, 2:8] = [1, 1, 1, 3, 2, 0]
    graph = TaskGraph(records=rec, codelet=np.zeros(4, dtype=np.int32),
                      codelet_names=["gemm"], kernel_names=["gemm"],
                      flops=np.full(4, 8e3), node=np.array([0, 1, 1, 0]),
                      data_bytes=np.full(4, tile, dtype=np.int64), nodes=2,
                      flops_total=3.2e4)
    task = 8e3 / 8e9
    free = sim.simulate_graph(graph, Platform(node=_node(1), nodes=2, bandwidth=1e6))
    assert free.makespan_s == pytest.approx(task + tile / 1e6 + task, rel=1e-9)
    shared = sim.simulate_graph(graph, Platform(node=_node(1, comm_throughput=4e5),
                                                nodes=2, bandwidth=1e6))
    assert shared.makespan_s == pytest.approx(task + 2 * tile / 4e5 + task, rel=1e-9)
    assert shared.pair_bytes.tolist() == [[0, tile], [tile, 0]]


def test_submission_clock_every_task_and_pruned():
    """Four independent tasks on nodes 0, 1, 0, 1 (one worker each, d seconds each):
    a node submits a task it takes part in in ``insert``, any other in ``walk`` when
    every rank walks every task, from ``startup``. Every task: node 0 submits its two at
    startup + insert and startup + 2 insert + walk; node 1 at startup + insert + walk
    and startup + 2 insert + 2 walk, the last task ending d later. Pruned: walk free."""
    from starchol.linalg.runtime_costs import RuntimeSpec
    from starchol.linalg.task_graph import TaskGraph

    rec = np.full((4, 12), -1, dtype=np.int64)
    rec[:, 0], rec[:, 1] = 4, 0
    for t, owner in enumerate([0, 1, 0, 1]):
        rec[t, 2:5] = [t, 2, owner]
    d = 5e-4
    graph = TaskGraph(records=rec, codelet=np.zeros(4, dtype=np.int32),
                      codelet_names=["gemm"], kernel_names=["gemm"],
                      flops=np.full(4, d * 8e9), node=np.array([0, 1, 0, 1]),
                      data_bytes=np.full(4, 800, dtype=np.int64), nodes=2,
                      flops_total=4 * d * 8e9)
    plat = Platform(node=_node(1), nodes=2, bandwidth=1e6)
    ins, walk, start = 1e-3, 2.5e-4, 2e-3
    every = sim.simulate_graph(graph, plat, runtime=RuntimeSpec(
        submission="every-task", insert_s=ins, walk_s=walk, startup_s=start))
    np.testing.assert_allclose(every.start, [start + ins, start + ins + walk,
                                             start + 2 * ins + walk,
                                             start + 2 * ins + 2 * walk], rtol=1e-9)
    assert every.makespan_s == pytest.approx(start + 2 * ins + 2 * walk + d, rel=1e-9)
    pruned = sim.simulate_graph(graph, plat, runtime=RuntimeSpec(
        submission="pruned", insert_s=ins, walk_s=walk, startup_s=start))
    np.testing.assert_allclose(pruned.start, [start + ins, start + ins,
                                              start + 2 * ins, start + 2 * ins], rtol=1e-9)


def test_a_transfer_waits_for_both_ends_submission():
    """Two tasks, every rank walking every task: d0 leaves node 0 only when node 1 has
    submitted the task that reads it (node 1 walks task 0 first)."""
    from starchol.linalg.runtime_costs import RuntimeSpec
    from starchol.linalg.task_graph import TaskGraph

    rec = np.full((2, 12), -1, dtype=np.int64)
    rec[:, 0], rec[:, 1] = 4, 0
    rec[0, 2:5] = [0, 2, 0]                     # task 0: node 0 writes d0
    rec[1, 2:8] = [0, 1, 0, 1, 2, 1]            # task 1: node 1 reads d0, writes d1
    graph = TaskGraph(records=rec, codelet=np.zeros(2, dtype=np.int32),
                      codelet_names=["gemm"], kernel_names=["gemm"],
                      flops=np.full(2, 8e3), node=np.array([0, 1]),
                      data_bytes=np.full(2, 1000, dtype=np.int64), nodes=2,
                      flops_total=1.6e4)
    plat = Platform(node=_node(1), nodes=2, bandwidth=1e6)
    walk, ins = 0.5, 1e-3                       # node 1 walks task 0 for half a second
    got = sim.simulate_graph(graph, plat, runtime=RuntimeSpec(
        submission="every-task", insert_s=ins, walk_s=walk))
    # node 0 submits task 0 at ins and task 1 (it owns d0) at 2 ins; node 1 submits
    # task 1 at walk + ins: the transfer starts then, the task follows its arrival
    assert got.start[0] == pytest.approx(ins, rel=1e-9)
    assert got.start[1] == pytest.approx(walk + ins + 1000 / 1e6, rel=1e-9)


COSTLY = dict(sends_in_flight=10, submission="every-task", insert_s=2e-5, walk_s=2e-6,
              startup_s=1e-3, message_overhead_s=1e-4, receive_overhead_s=5e-5,
              sent_overhead_s=7e-5, tasks_fifo=True, sends_fifo=True, priorities="chameleon")


@pytest.mark.parametrize("name,nodes,kw", MAPS[:3])
def test_bytes_equal_the_model_with_every_runtime_cost(name, nodes, kw):
    """The runtime's costs move time, never bytes; and the same inputs give the same
    result, to the last bit."""
    from starchol.linalg.runtime_costs import RuntimeSpec

    tile_map = get_map(name, nodes, **kw)
    plat = Platform(node=_node(2, comm_throughput=5e5), nodes=nodes,
                    bandwidth=parse_bandwidth("10mbit"), latency=1e-4)
    a = sim.simulate_cholesky(tile_map, 1100, 100, plat, runtime=RuntimeSpec(**COSTLY))
    np.testing.assert_array_equal(a.pair_bytes, transfer_pairs_bytes(tile_map, 1100, 100))
    b = sim.simulate_cholesky(tile_map, 1100, 100, plat, runtime=RuntimeSpec(**COSTLY))
    assert a.makespan_s == b.makespan_s
    np.testing.assert_array_equal(a.start, b.start)
    free = sim.simulate_cholesky(tile_map, 1100, 100, Platform(
        node=_node(2), nodes=nodes, bandwidth=parse_bandwidth("10mbit"), latency=1e-4))
    assert a.makespan_s > free.makespan_s


def test_runtime_descriptions_are_checked():
    from starchol.linalg.runtime_costs import RuntimeSpec, load_runtime, runtime_from_dict

    rt = runtime_from_dict({"sends_in_flight": 10, "submission": "every-task",
                            "insert": "20us", "walk": "2us", "message_overhead": "0.1ms",
                            "receive_overhead": "0.5ms", "sent_overhead": "0.9ms",
                            "priorities": "chameleon"})
    assert rt.sends_in_flight == 10 and rt.submission == "every-task"
    assert rt.receive_overhead_s == pytest.approx(5e-4)
    assert rt.sent_overhead_s == pytest.approx(9e-4) and rt.priorities == "chameleon"
    assert rt.to_dict()["priorities"] == "chameleon"
    assert RuntimeSpec().receive_overhead_s == RuntimeSpec().sent_overhead_s == 0
    assert RuntimeSpec().priorities == "starchol"
    assert (rt.insert_s, rt.walk_s, rt.message_overhead_s) == pytest.approx((2e-5, 2e-6, 1e-4))
    assert rt.window is None and runtime_from_dict({"window": 0}).window == 0
    for bad, word in [({"submission": "some"}, "submission"), ({"insert": "-1us"}, "insert"),
                      ({"sends_in_flight": -1}, "sends_in_flight"), ({"speed": 1}, "speed"),
                      ({"receive_overhead": "-1ms"}, "receive_overhead"),
                      ({"sent_overhead": "-1ms"}, "sent_overhead"),
                      ({"priorities": "dplasma"}, "priorities must be one of starchol, "
                                                  "chameleon"),
                      ({"window": -1}, "window must be an integer >= 0"),
                      ({"window": 1.5}, "window")]:
        with pytest.raises(UsageError, match=word):
            runtime_from_dict(bad)
    with pytest.raises(UsageError, match="cannot read runtime description"):
        load_runtime("/nonexistent/runtime.json")
    with pytest.raises(UsageError, match="comm_throughput"):
        node_from_dict({"workers": 1, "gflops": {"float64": SPEEDS}, "comm_throughput": "x"})


def test_priorities_order_ready_tasks():
    """One worker, NT = 4: POTRF(0) (priority 8), TRSM(1,0) (7), TRSM(2,0) (6), then the
    updates of column 1 (one priority per column: 2 NT - 2 k - 2 n = 6; SYRK(1,1) was
    submitted first), then POTRF(1) (2 NT - 2 k = 6, submitted later) before TRSM(3,0)
    (5): ready tasks by priority, ties by submission."""
    got = sim.simulate_cholesky(get_map("2dbc", 1), 400, 100, _platform(1, workers=1))
    graph = record_cholesky(get_map("2dbc", 1), 400, 100)
    prio = graph.records[graph.records[:, 0] != 0][:, 1]
    order = np.argsort(got.start, kind="stable")
    assert [graph.codelet_names[graph.codelet[t]] for t in order[:6]] == \
        ["potrf", "trsm", "trsm", "syrk", "gemm", "potrf"]
    assert list(prio[order[:6]]) == [8, 7, 6, 6, 6, 6]


def test_same_inputs_same_result():
    tile_map = get_map("sbc", 6)
    a = sim.simulate_cholesky(tile_map, 1500, 100, _platform(6))
    b = sim.simulate_cholesky(tile_map, 1500, 100, _platform(6))
    assert a.makespan_s == b.makespan_s
    for key in ("start", "end", "worker", "node", "pair_bytes", "busy"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))


def test_more_bandwidth_never_slower_and_compute_bound_limit():
    tile_map = get_map("2dbc", 4, grid="2x2")
    slow = sim.simulate_cholesky(tile_map, 1600, 100, _platform(4, bandwidth="10mbit"))
    fast = sim.simulate_cholesky(tile_map, 1600, 100, _platform(4, bandwidth="1000Gbit",
                                                                latency=0))
    assert fast.makespan_s < slow.makespan_s
    # infinite network: bounded below by the critical path and by the busiest node
    assert fast.makespan_s >= fast.critical_path_s * (1 - 1e-9)
    assert fast.busy.max() <= 1 + 1e-9


def test_platform_nodes_must_match_the_map():
    with pytest.raises(ValueError, match="the graph has 6 nodes, the platform 4"):
        sim.simulate_graph(record_cholesky(get_map("sbc", 6), 500, 100), _platform(4))


# -- bad platform input: clear errors ---------------------------------------------------
GOOD = {"workers": 2, "gflops": {"float64": dict(SPEEDS)}}


@pytest.mark.parametrize("change,message", [
    ({"workers": 0}, "workers must be an integer from 1 to"),
    ({"workers": "2"}, "workers must be an integer from 1 to"),
    ({"gflops": {"float64": {**SPEEDS, "gemm": -1}}}, r"gflops.float64.gemm must be a number"),
    ({"gflops": {"float64": {"gemm": 1}}}, "lacks potrf, trsm, syrk, add"),
    ({"gflops": {"float16": dict(SPEEDS)}}, "dtype 'float16'"),
    ({"gflops": {"float64": {**SPEEDS, "getrf": 1}}}, "unknown kernel"),
    ({"gflops": {}}, "give gflops"),
    ({"bandwidth": "10 furlongs"}, "unknown unit 'furlongs'"),
    ({"latency": "-1ms"}, "cannot read"),
    ({"speed": 3}, "unknown field"),
])
def test_bad_node_descriptions(change, message):
    with pytest.raises(UsageError, match=message):
        node_from_dict({**GOOD, **change})


def test_bad_node_files(tmp_path):
    with pytest.raises(UsageError, match="node description .*missing.json' not found"):
        load_node(tmp_path / "missing.json")
    with pytest.raises(UsageError, match="--node .*missing.json' not found"):
        load_node(tmp_path / "missing.json", "--node")
    bad = tmp_path / "bad.json"
    bad.write_text("{workers: 2")
    with pytest.raises(UsageError, match=r"bad.json is not JSON: .* line 1"):
        load_node(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({**GOOD, "bandwidth": "100Gbit", "latency": "2us",
                                "memory": "192GB"}))
    node = load_node(good)
    assert (node.workers, node.bandwidth, node.latency, node.memory) == \
        (2, 12.5e9, 2e-6, 192e9)


@pytest.mark.parametrize("text,value", [("10mbit", 1.25e6), ("100Gbit", 12.5e9),
                                        ("1.25GB/s", 1.25e9), (1e6, 1e6)])
def test_bandwidth_units(text, value):
    assert parse_bandwidth(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0mbit", "fast", "", None, "-3Gbit"])
def test_bad_bandwidth(text):
    with pytest.raises(UsageError):
        parse_bandwidth(text)


def test_nb_specific_speeds_are_used():
    node = node_from_dict({"workers": 1, "gflops_by_nb": {"float64": {
        "100": dict(SPEEDS), "200": {k: 100 * v for k, v in SPEEDS.items()}}}})
    assert node.kernel_gflops("float64", 100)["gemm"] == 8.0
    assert node.kernel_gflops("float64", 200)["gemm"] == 800.0
    assert node.kernel_gflops("float64", 190)["gemm"] == 800.0      # the nearest NB
    with pytest.raises(UsageError, match="no kernel speeds for float32"):
        NodeSpec(workers=1, gflops={"float64": dict(SPEEDS)}).kernel_gflops("float32", 100)


def test_recorded_graph_is_the_runtime_graph():
    """The recorder sees the loops' tasks: NT(NT+1)(NT+2)/6 for a 2D map, the ADDs of
    2.5D on top, and the solve's NT(NT+1) KT tasks."""
    from starchol.model.counts import solve_task_count, task_count

    g = record_cholesky(get_map("sbc", 6), 1000, 100)
    assert g.tasks == task_count(10)
    assert sorted(g.codelet_names) == ["gemm", "potrf", "syrk", "trsm"]
    assert g.flops.sum() == pytest.approx(1000 ** 3 / 3, rel=0.02)
    g25 = record_cholesky(get_map("sbc25d", 6, slices=2), 1000, 100)
    assert "add" in g25.codelet_names and g25.tasks > task_count(10)
    s = record_solve(get_map("sbc", 6), 1000, 100, 250)
    assert s.tasks == solve_task_count(10, 3)


def _graph(rec, nodes, seconds, node, tile=1000):
    """A hand-written TaskGraph: ``rec`` (T, 12) task records, each task ``seconds[t]`` on
    a worker of :func:`_node` (8 GFlop/s GEMM), run on ``node[t]``."""
    from starchol.linalg.task_graph import TaskGraph

    flops = np.asarray(seconds, dtype=float) * 8e9
    return TaskGraph(records=rec, codelet=np.zeros(len(rec), dtype=np.int32),
                     codelet_names=["gemm"], kernel_names=["gemm"], flops=flops,
                     node=np.array(node), data_bytes=np.full(len(rec), tile, dtype=np.int64),
                     nodes=nodes, flops_total=float(flops.sum()))


def test_the_window_holds_back_later_iterations():
    """One node, one worker, three independent 1 s tasks of iterations 0, 1, 2 with
    rising priorities. Whole graph: the highest first (starts 2, 1, 0). W = 1: iteration
    k submitted when k - 1 is done (starts 0, 1, 2). W = 2: iterations 0 and 1 at once,
    the higher first; 2 when 0 is done (starts 1, 0, 2). W >= 3 = NT: the whole graph."""
    rec = np.full((3, 12), -1, dtype=np.int64)
    rec[:, 0], rec[:, 1], rec[:, 11] = 4, [0, 10, 20], [0, 1, 2]
    for t in range(3):
        rec[t, 2:5] = [t, 2, 0]
    g = _graph(rec, 1, [1.0] * 3, [0, 0, 0])
    plat = Platform(node=_node(1), nodes=1, bandwidth=1e6)
    for w, starts in ((0, [2, 1, 0]), (1, [0, 1, 2]), (2, [1, 0, 2]), (3, [2, 1, 0])):
        got = sim.simulate_graph(g, plat, window=w)
        np.testing.assert_allclose(got.start, starts, rtol=0, atol=1e-9)
        assert got.makespan_s == pytest.approx(3.0, rel=1e-9)


def test_a_transfer_waits_for_its_receivers_window():
    """Node 0 writes d0 (1 s, iteration 0); node 1 runs a 3 s task of iteration 0 and,
    at iteration 2, a 1 s task that reads d0 (1 s on the link). Whole graph: d0 leaves
    at 1 s and arrives at 2 s, the task waits for the worker until 3 s, ends at 4 s.
    W = 1 or 2: node 1 submits iteration 2 only when its iteration 0 is done, at 3 s:
    the transfer starts then, the task runs 4-5 s. The bytes do not change."""
    rec = np.full((3, 12), -1, dtype=np.int64)
    rec[:, 0], rec[:, 1], rec[:, 11] = 4, [0, 0, 5], [0, 0, 2]
    rec[0, 2:5] = [0, 2, 0]
    rec[1, 2:5] = [1, 2, 1]
    rec[2, 2:8] = [0, 1, 0, 2, 2, 1]
    g = _graph(rec, 2, [1.0, 3.0, 1.0], [0, 1, 1])
    plat = Platform(node=_node(1), nodes=2, bandwidth=1000.0, latency=0.0)
    for w, start in ((0, 3.0), (1, 4.0), (2, 4.0), (3, 3.0)):
        got = sim.simulate_graph(g, plat, window=w)
        assert got.start[2] == pytest.approx(start, rel=1e-9)
        assert got.makespan_s == pytest.approx(start + 1, rel=1e-9)
        assert got.pair_bytes.tolist() == [[0, 1000], [0, 0]]


def test_recorded_iterations_and_the_default_window():
    """The recorder gives each task its iteration (the Cholesky's k: POTRF of column k
    in iteration k; the solve's 2 NT steps), non-decreasing in submission order; the
    simulated Cholesky and solve take run's window by default (W = 6 here,
    :func:`~starchol.model.memory.default_window`) and move the model's bytes whatever W."""
    from starchol.model.memory import default_window

    tile_map = get_map("2dbc", 6, grid="2x3")
    n, nb = 2000, 100                                      # NT = 20
    g = record_cholesky(tile_map, n, nb)
    tasks = g.records[g.records[:, 0] != 0]
    assert np.all(np.diff(tasks[:, 11]) >= 0) and tasks[-1, 11] == 19
    potrf = np.array([g.codelet_names[c] == "potrf" for c in g.codelet])
    assert tasks[potrf, 11].tolist() == list(range(20))
    s = record_solve(tile_map, n, nb, 3)
    steps = s.records[s.records[:, 0] != 0][:, 11]
    assert np.all(np.diff(steps) >= 0) and steps[0] == 0 and steps[-1] == 39
    assert default_window(20, 6) == WINDOW
    plat = _platform(6, bandwidth="1gbit")
    model = transfer_pairs_bytes(tile_map, n, nb)
    default = sim.simulate_cholesky(tile_map, n, nb, plat)
    assert default.makespan_s == sim.simulate_cholesky(tile_map, n, nb, plat,
                                                        window=WINDOW).makespan_s
    for w in (0, 1):
        got = sim.simulate_cholesky(tile_map, n, nb, plat, window=w)
        assert np.array_equal(got.pair_bytes, model)
        assert got.makespan_s != default.makespan_s
    solve = sim.simulate_solve(tile_map, n, nb, 3, plat, window=1)
    assert np.array_equal(solve.pair_bytes, solve_transfer_pairs_bytes(tile_map, n, nb, 3))
    # a runtime description that says its window (Chameleon's: the whole graph at once)
    import os

    from starchol.linalg.runtime_costs import load_runtime

    runtimes = os.path.join(os.path.dirname(__file__), "..", "examples", "runtimes")
    chameleon = load_runtime(os.path.join(runtimes, "chameleon-starpu-1.3.json"))
    assert chameleon.window == 0
    assert sim.run_window(None, n, nb, plat, chameleon) == 0
    assert sim.run_window(None, n, nb, plat, load_runtime(
        os.path.join(runtimes, "starchol.json"))) == WINDOW
    assert sim.run_window(2, n, nb, plat, chameleon) == 2


# -- the command line -------------------------------------------------------------------
def test_simulate_command_acceptance(capsys, tmp_path):
    """`starchol simulate` prints a makespan, and bytes equal to `starchol volume`."""
    from starchol.cli import main

    node = tmp_path / "node.json"
    node.write_text(json.dumps({"workers": 2, "gflops": {"float64": SPEEDS}}))
    gantt = tmp_path / "g.png"
    argv = ["--dist", "sbc", "--nodes", "6", "--n", "3072", "--nb", "128"]
    assert main(["simulate", *argv, "--node", str(node), "--bandwidth", "10mbit",
                 "--gantt", str(gantt), "--json", "-"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert main(["volume", *argv, "--json", "-"]) == 0
    vol = json.loads(capsys.readouterr().out)
    assert doc["bytes"] == vol["bytes"] == doc["model_bytes"] and doc["bytes_equal_model"]
    assert doc["makespan_s"] > 0 and len(doc["busy_fraction"]) == 6
    assert doc["sends_in_flight"] == 1 and doc["critical_path_s"] <= doc["makespan_s"]
    assert doc["window"] == WINDOW                     # run's rule at NT = 24 on 6 nodes
    assert "makespan:" in out.err and "equal per node pair" in out.err
    assert f"window {WINDOW} iterations" in out.err
    assert gantt.read_bytes()[:4] == b"\x89PNG"


def test_simulate_command_with_the_solve(capsys):
    """`--nrhs K` adds the solve: its bytes equal the solve's model per node pair (2.5D
    map, cache off too), and the total is the factorization's time plus the solve's."""
    from starchol.cli import main
    from starchol.model.rhs_volume import choose_variant, solve_bytes_by_variant

    for cache in ("on", "off"):
        assert main(["simulate", "--dist", "sbc25d", "--slices", "2", "--nodes", "6",
                     "--n", "1000", "--nb", "100", "--nrhs", "150", "--cache", cache,
                     "--node-gflops", "5", "--cores", "2", "--bandwidth", "1gbit",
                     "--json", "-"]) == 0
        out = capsys.readouterr()
        doc = json.loads(out.out)
        solve = doc["solve"]
        by = solve_bytes_by_variant(get_map("sbc25d", 6, slices=2), 1000, 100, 150,
                                    cache=cache == "on")
        assert solve["variant"] == choose_variant(by)[0]
        model = by[solve["variant"]]
        assert solve["pair_bytes"] == model.tolist() and solve["bytes_equal_model"]
        assert solve["makespan_s"] > 0 and solve["nrhs"] == 150
        assert doc["total_makespan_s"] == pytest.approx(doc["makespan_s"]
                                                        + solve["makespan_s"])
        assert "solve:" in out.err and "total:" in out.err
    with pytest.raises(SystemExit, match="2"):     # refused by the parser
        main(["simulate", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb", "100",
              "--nrhs", "0", "--node-gflops", "5", "--cores", "2"])
    assert "argument --nrhs: must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_simulate_command_figures_and_errors(capsys, tmp_path):
    from starchol.cli import main

    argv = ["simulate", "--dist", "2dbc", "--nodes", "2", "--n", "200", "--nb", "100"]
    assert main(argv + ["--node-gflops", "potrf=2,trsm=4,syrk=4,gemm=8,add=1", "--cores",
                        "1", "--bandwidth", "8mbit", "--latency", "10ms", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    f = 100 ** 3
    want = f / 3 / 2e9 + 0.02 + 80000 / 1e6 + 2 * f / 4e9 + f / 3 / 2e9
    assert doc["makespan_s"] == pytest.approx(want, rel=1e-9)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"workers": 2, "gflops": {"float64": {"gemm": 3}}}))
    for extra, message in [
            (["--node", str(bad)], "lacks potrf, trsm, syrk, add"),
            (["--node", str(tmp_path / "none.json")], "none.json' not found"),
            ([], "describe the nodes"),
            (["--node-gflops", "fast", "--cores", "2"], "--node-gflops: cannot read"),
            (["--node-gflops", "5", "--cores", "2", "--bandwidth", "9 parsecs"],
             "unknown unit"),
            (["--node-gflops", "5", "--cores", "2", "--sends-in-flight", "-1"],
             "argument --sends-in-flight: must be an integer from 0 to 2147483647, got '-1'")]:
        try:
            code = main(argv + extra)
        except SystemExit as exc:                  # refused by the parser
            code = exc.code
        assert code == 2, extra
        assert message in capsys.readouterr().err


def test_calibrate_writes_a_node_description(capsys, tmp_path):
    from starchol.cli import main

    out = tmp_path / "here.json"
    assert main(["calibrate", "--method", "fork", "--nb", "32", "64", "--workers", "1",
                 "--repeats", "3",
                 "--bandwidth", "1gbit", "-o", str(out), "--quiet"]) == 0
    node = load_node(out)
    assert node.workers == 1 and node.bandwidth == 1.25e8
    assert set(node.gflops_by_nb["float64"]) == {"32", "64"}
    assert node.kernel_gflops("float64", 64) == node.gflops["float64"]
    assert all(v > 0 for v in node.gflops["float64"].values())
    assert "float64 NB = 32:" in capsys.readouterr().out


def test_speeds_from_trace_weigh_kernels_by_their_time():
    """A kernel's speed is its tasks' flops over their total time; 2.5D's gemm0 and
    syrk0 count as GEMM and SYRK; kernels without tasks are left out."""
    from starchol.linalg.calibrate import speeds_from_trace

    nb = 100                                   # GEMM 2e6 flops, POTRF 1e6 / 3
    summary = {"task_fields": ["kernel", "rank", "worker", "start_ms", "end_ms"],
               "tasks": [["gemm", 0, 0, 0.0, 1.0], ["gemm0", 0, 1, 0.0, 3.0],
                         ["potrf", 0, 0, 1.0, 2.0], ["starpu_data_unregister", 0, 0, 2, 9]]}
    got = speeds_from_trace(summary, nb)
    assert got == {"gemm": pytest.approx(2 * 2e6 / 4e-3 / 1e9),
                   "potrf": pytest.approx(1e6 / 3 / 1e-3 / 1e9)}
    with pytest.raises(ValueError, match="no tasks"):
        speeds_from_trace({"tasks": []}, nb)


def test_calibrate_runtime_from_a_traced_run(capsys, tmp_path):
    """The default method: a traced factorization with the runtime's kernels; every
    kernel gets a speed (ADD from the fork timing: a 2D run on one rank has none)."""
    from starchol.cli import main
    from starchol.runtime import starpu_build

    if "STARPU_USE_FXT" not in starpu_build.describe()["config"]:
        pytest.skip("the loaded StarPU has no FxT")
    out = tmp_path / "here.json"
    assert main(["calibrate", "--nb", "32", "--workers", "2", "-o", str(out),
                 "--quiet"]) == 0
    node = load_node(out)
    assert node.workers == 2
    assert set(node.gflops_by_nb["float64"]["32"]) == {"potrf", "trsm", "syrk", "gemm",
                                                        "add"}
    assert all(v > 0 for v in node.gflops["float64"].values())
    assert "(2 workers x 1 rank(s), runtime)" in capsys.readouterr().out


def test_example_nodes_load():
    import glob
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "examples", "nodes")
    files = sorted(glob.glob(os.path.join(root, "*.json")))
    assert len(files) >= 3
    for path in files:
        node = load_node(path)
        assert node.kernel_gflops("float64", 500)["gemm"] > 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_scale_sbc_210_nodes_nt_160():
    """Point 5: P = 210 (sbc r = 21), NT = 160 (695,520 tasks) within 8 GB (the
    simulator's child process; the recorder's arrays are in this one). Its time is
    printed, not asserted (10 minutes here): a run that hangs fails by the timeout."""
    import resource
    import time

    node = NodeSpec(workers=35, gflops={"float64": {"potrf": 19.0, "trsm": 47.0,
                                                    "syrk": 47.0, "gemm": 62.0, "add": 1.0}})
    plat = Platform(node=node, nodes=210, bandwidth=parse_bandwidth("100Gbit"),
                    latency=1.5e-6)
    t0 = time.perf_counter()
    got = sim.simulate_cholesky(get_map("sbc", 210), 160 * 500, 500, plat)
    wall = time.perf_counter() - t0
    child_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2 ** 20
    self_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(f"{got.tasks} tasks in {wall:.1f} s ({got.tasks_per_s:.0f} tasks/s in the "
          f"simulator), peak memory {self_gb:.2f} GB here, {child_gb:.2f} GB in the child")
    assert got.tasks == 695520
    assert child_gb < 8 and self_gb < 8
    np.testing.assert_array_equal(got.pair_bytes,
                                  transfer_pairs_bytes(get_map("sbc", 210), 80000, 500))


def test_plan_simulate_ranks_by_simulated_makespan(capsys, tmp_path):
    from starchol.cli import main

    node = tmp_path / "node.json"
    node.write_text(json.dumps({"workers": 2, "gflops": {"float64": SPEEDS}}))
    assert main(["plan", "--nodes", "6", "--n", "1600", "--nb", "200", "--memory-per-node",
                 "1e9", "--node-bandwidth", "1.25e6", "--simulate", "--node", str(node),
                 "--simulate-top", "3", "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sims = [r for r in doc["rows"] if r.get("simulated_s") is not None]
    assert len(sims) == 3
    assert [r["simulated_s"] for r in sims] == sorted(r["simulated_s"] for r in sims)
    assert doc["rows"][0] is not None and doc["pick"]["map"] == sims[0]["map"]
    assert "Picked by simulated makespan" in doc["explanation"]
    assert main(["plan", "--nodes", "6", "--n", "1600", "--nb", "200", "--memory-per-node",
                 "1e9", "--simulate"]) == 2
    assert "--simulate needs --node FILE" in capsys.readouterr().err


def test_report_simulate_sweeps_node_counts(capsys, tmp_path):
    from starchol.cli import main

    node = tmp_path / "node.json"
    node.write_text(json.dumps({"workers": 2, "gflops": {"float64": SPEEDS},
                                "bandwidth": "1Gbit"}))
    out = tmp_path / "rep"
    assert main(["report", "--simulate", "--nodes-range", "5..6", "--n", "1200", "--nb",
                 "200", "--node", str(node), "-o", str(out), "--quiet"]) == 0
    doc = json.loads((out / "simulate.json").read_text())
    fams = {(r["nodes"], r["family"]) for r in doc["rows"]}
    assert {(5, "2dbc"), (6, "2dbc"), (6, "sbc")} <= fams
    assert (out / "simulate.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 6 | sbc r=4" in (out / "simulate.md").read_text()
    capsys.readouterr()
    assert main(["report", "--simulate", "--nodes-range", "5..6", "--n", "1200", "--nb",
                 "200", "-o", str(out)]) == 2
    assert "--simulate needs --node FILE" in capsys.readouterr().err
