"""``plan``'s estimate with the runtime's costs: the simulator's quantities, counted
(starchol.model.runtime_time; one time model for ``plan`` and ``simulate``)."""
import json

import numpy as np
import pytest

from starchol.distributions import BlockCyclic2D, get_map
from starchol.model.plan import rank_maps, score_map
from starchol.model.runtime_time import participation_counts


class _Runtime:
    """The attributes of linalg.runtime_costs.RuntimeSpec that the model reads."""

    def __init__(self, submission="pruned", insert_s=0.0, walk_s=0.0, startup_s=0.0,
                 message_overhead_s=0.0):
        self.submission, self.insert_s, self.walk_s = submission, insert_s, walk_s
        self.startup_s, self.message_overhead_s = startup_s, message_overhead_s


def test_participation_hand_count():
    # 2dbc 2x1, NT = 3: rows 0, 2 on node 0, row 1 on node 1. Tasks and the nodes taking
    # part (runner, operand owners): POTRF00 {0}, TRSM10 {1, 0}, TRSM20 {0}, SYRK110 {1},
    # GEMM210 {0, 1}, SYRK220 {0}, POTRF11 {1}, TRSM21 {0, 1}, SYRK221 {0}, POTRF22 {0}:
    # node 0 in 8 of the 10 tasks, node 1 in 5
    assert participation_counts(BlockCyclic2D(2, 1), 3).tolist() == [8, 5]


@pytest.mark.parametrize("name,nodes,kw", [("2dbc", 6, {"grid": "2x3"}), ("sbc", 6, {}),
                                           ("sym", 7, {})])
def test_participation_equals_the_recorded_graph(name, nodes, kw):
    """The count is the simulator's: per recorded task, the runner and the owners of its
    operands, each node once."""
    pytest.importorskip("starchol.runtime._sim")
    from starchol.linalg.task_graph import record_cholesky

    tile_map = get_map(name, nodes, **kw)
    g = record_cholesky(tile_map, 900, 100)
    tasks = g.records[g.records[:, 0] != 0]
    want = np.zeros(nodes, dtype=np.int64)
    for rec in tasks:
        owners = {int(rec[4 + 3 * k]) for k in range(3) if rec[2 + 3 * k] >= 0}
        for o in owners:
            want[o] += 1
    np.testing.assert_array_equal(participation_counts(tile_map, 9), want)


def test_score_map_with_runtime_costs_hand_count():
    # the map above, N = 300, NB = 100 (tiles of 80 kB): each node sends + receives 3
    # tiles; o per message on one thread: 3 o. Every task: node 0 inserts 8 and walks 2,
    # node 1 inserts 5 and walks 5. comm_throughput below the link sets comm_s.
    tile = 100 * 100 * 8
    o, ins, walk = 1e-3, 1e-4, 1e-5
    free = score_map(BlockCyclic2D(2, 1), 300, 100, node_gflops=1.0, node_bandwidth=1e8)
    rt = _Runtime("every-task", insert_s=ins, walk_s=walk, startup_s=0.5, message_overhead_s=o)
    row = score_map(BlockCyclic2D(2, 1), 300, 100, node_gflops=1.0, node_bandwidth=1e8,
                    runtime=rt, comm_throughput=5e7)
    assert row["message_s"] == pytest.approx(3 * o, rel=1e-12)
    assert row["submission_s"] == pytest.approx(0.5 + max(8 * ins + 2 * walk,
                                                          5 * ins + 5 * walk), rel=1e-12)
    assert row["comm_s"] == pytest.approx(3 * tile / 5e7, rel=1e-12)
    assert row["compute_s"] == free["compute_s"]
    # submission (0.5 s) bounds the estimate here; with it small, the sum does
    assert row["estimate_s"] == row["submission_s"]
    rt.startup_s = 0.0
    row = score_map(BlockCyclic2D(2, 1), 300, 100, node_gflops=1.0, node_bandwidth=1e8,
                    runtime=rt, comm_throughput=5e7)
    assert row["estimate_s"] == pytest.approx(
        row["compute_s"] + row["comm_s"] + row["message_s"], rel=1e-12)
    # pruned: no walk; without a runtime, the estimate is the old one
    rt.submission = "pruned"
    assert score_map(BlockCyclic2D(2, 1), 300, 100, 1.0, 1e8, runtime=rt)[
        "submission_s"] == pytest.approx(8 * ins, rel=1e-12)
    assert free["message_s"] == free["submission_s"] == 0.0
    assert free["estimate_s"] == free["compute_s"] + free["comm_s"]


def test_message_seconds_with_a_receive_overhead_hand_count():
    """o per message on each end, r more per message received: node 0 sends 2 tiles and
    receives 1 (3 o + r), node 1 sends 1 and receives 2 (3 o + 2 r)."""
    from starchol.linalg.runtime_costs import RuntimeSpec
    from starchol.model.runtime_time import message_seconds

    o, r = 1e-3, 5e-4
    got = message_seconds(RuntimeSpec(message_overhead_s=o, receive_overhead_s=r),
                          [2, 1], [1, 2])
    np.testing.assert_allclose(got, [3 * o + r, 3 * o + 2 * r], rtol=1e-12)
    # and d per message sent, after its bytes left: 2 d on node 0, d on node 1
    d = 2e-4
    got = message_seconds(RuntimeSpec(message_overhead_s=o, receive_overhead_s=r,
                                      sent_overhead_s=d), [2, 1], [1, 2])
    np.testing.assert_allclose(got, [3 * o + r + 2 * d, 3 * o + 2 * r + d], rtol=1e-12)
    # an object without the attribute (the model's duck type) pays no receive share
    np.testing.assert_allclose(message_seconds(_Runtime(message_overhead_s=o), [2, 1],
                                               [1, 2]), [3 * o, 3 * o], rtol=1e-12)


def test_plan_pick_agrees_with_the_simulator_under_message_costs():
    """With a large per-message time on one communication thread (2 ms, 6-9 times the
    runtime-free time), the estimate and the simulator pick the same map (sbc, the
    fewest messages on the busiest node), and the estimate is within 25% of the
    simulated makespan for every map (0.91-1.10 when written)."""
    sim = pytest.importorskip("starchol.linalg.simulate")
    pytest.importorskip("starchol.runtime._sim")
    from starchol.linalg.runtime_costs import RuntimeSpec
    from starchol.model.platform import NodeSpec, Platform

    speeds = {"potrf": 50.0, "trsm": 50.0, "syrk": 50.0, "gemm": 50.0, "add": 1.0}
    node = NodeSpec(workers=2, gflops={"float64": speeds})
    rt = RuntimeSpec(message_overhead_s=2e-3)
    n, nb = 2400, 200
    cands = [get_map("2dbc", 6, grid="2x3"), get_map("2dbc", 6, grid="6x1"),
             get_map("sbc", 6), get_map("2dbc", 4, grid="2x2")]
    rows = [score_map(m, n, nb, node_gflops=100.0, node_bandwidth=1.25e9, runtime=rt)
            for m in cands]
    est_pick = rank_maps(rows)[1]["map"]
    simulated = {}
    for m in cands:
        plat = Platform(node=node, nodes=m.nodes, bandwidth=1.25e9, latency=1e-6)
        simulated[str(m)] = sim.simulate_cholesky(m, n, nb, plat, runtime=rt).makespan_s
    assert est_pick == min(simulated, key=simulated.get)
    for r in rows:
        assert r["message_s"] <= simulated[r["map"]]
        assert 0.8 <= r["estimate_s"] / simulated[r["map"]] <= 1.25


def test_plan_command_with_a_runtime(capsys, tmp_path):
    from starchol.cli import main

    rt = tmp_path / "rt.json"
    rt.write_text(json.dumps({"submission": "every-task", "insert": "13us", "walk": "2us",
                              "message_overhead": "1ms"}))
    assert main(["plan", "--nodes", "6", "--n", "4000", "--nb", "200", "--memory-per-node",
                 "1e9", "--runtime", str(rt), "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runtime"]["message_overhead_s"] == pytest.approx(1e-3)
    for r in doc["rows"]:
        assert r["message_s"] > 0 and r["submission_s"] > 0
        assert r["estimate_s"] == pytest.approx(max(
            r["submission_s"], r["compute_s"] + r["comm_s"] + r["message_s"]
            + r["overhead_s"]))
    assert main(["plan", "--nodes", "6", "--n", "4000", "--nb", "200", "--memory-per-node",
                 "1e9", "--runtime", str(tmp_path / "none.json"), "--quiet"]) == 2
    assert "cannot read --runtime description" in capsys.readouterr().err
