"""``starchol plan``: 2D and 2.5D options within a memory budget, best first."""
import json

import pytest

from starchol.cli import main
from starchol.units import format_bytes


def test_plan_lists_2d_and_25d_options_and_explains_the_pick(capsys):
    assert main(["plan", "--nodes", "12", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "2e9", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    dists = {r["dist"] for r in d["rows"]}
    assert {"2dbc", "sbc", "sbc25d", "2dbc25d"} <= dists
    fitting = [r for r in d["rows"] if r["fits"]]
    assert d["pick"] == fitting[0]
    est = [r["estimate_s"] for r in fitting]
    assert est == sorted(est)  # the measured load is in the estimate: no separate balance rule
    assert all(r["memory_per_node_bytes"] <= 2e9 for r in fitting)
    assert all(r["memory_per_node_bytes"] > 2e9 for r in d["rows"] if not r["fits"])
    assert d["explanation"].startswith("pick: " + d["pick"]["map"])


def test_plan_memory_grows_with_slices(capsys):
    assert main(["plan", "--nodes", "12", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "1e12", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    sbc2 = next(r for r in rows if r["dist"] == "sbc25d" and r["slices"] == 2)
    sbc1 = next(r for r in rows if r["dist"] == "sbc" and r["nodes"] == 10)
    assert sbc2["tile_bytes_per_node"] > 1.5 * sbc1["tile_bytes_per_node"]
    # the peak counts the received tile copies too (a few iterations' worth: the
    # submission window; less than a node's own tiles)
    for r in (sbc1, sbc2):
        assert r["memory_per_node_bytes"] == sum(r["memory_parts"].values())
        assert r["memory_parts"]["tiles"] <= r["tile_bytes_per_node"]
        assert 0 < r["memory_parts"]["received tiles"] < r["memory_parts"]["tiles"]


def test_plan_nothing_fits(capsys):
    assert main(["plan", "--nodes", "6", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "1e6"]) == 1
    assert "no map fits" in capsys.readouterr().out


def test_plan_bad_input(capsys):
    assert main(["plan", "--nodes", "6", "--n", "100", "--nb", "500",
                 "--memory-per-node", "1e9"]) == 2
    assert "larger than --n" in capsys.readouterr().err
    assert main(["plan", "--nodes", "6", "--n", "1000", "--nb", "100",
                 "--memory-per-node", "-1"]) == 2
    assert "positive" in capsys.readouterr().err


def test_score_map_hand_count():
    # 2dbc 2x1, NT = 3 (N = 300, NB = 100): rows 0, 2 on node 0, row 1 on node 1.
    # Flops (NB^3): node 0 (0,0) 1/3 + (2,0) 1 + (2,1) 2+1 + (2,2) 2+1/3 = 20/3;
    # node 1 (1,0) 1 + (1,1) 1+1/3 = 7/3. Transfers (cache on): L00 -> 1, L10 -> 0,
    # L11 -> 0: node 0 sends 1 and receives 2, node 1 sends 2 and receives 1.
    from starchol.distributions import BlockCyclic2D
    from starchol.model.plan import score_map

    # Peak memory of node 0: its 4 tiles, the 2 it receives (L10, L11), 6 handles, 7 tasks
    # ((0,0) POTRF, (2,0) TRSM, (2,1) GEMM + TRSM, (2,2) 2 SYRK + POTRF), 2 x 9 int64
    # owner entries and the process (node 1: 2 tiles, 1 received, 3 tasks).
    from starchol.model.memory import HANDLE_BYTES, PROCESS_BASE_BYTES, TASK_BYTES
    tile = 100 * 100 * 8
    peak = 6 * tile + 6 * HANDLE_BYTES + 7 * TASK_BYTES + 144 + PROCESS_BASE_BYTES
    row = score_map(BlockCyclic2D(2, 1), 300, 100, node_gflops=1.0, node_bandwidth=1e8,
                    memory_per_node=peak)
    assert row["bytes"] == 3 * tile and row["ratio"] == 3 / 6
    assert row["memory_per_node_bytes"] == peak and row["fits"]
    assert row["memory_parts"] == {"tiles": 4 * tile, "received tiles": 2 * tile,
                                   "tile handles": 6 * HANDLE_BYTES, "tasks": 7 * TASK_BYTES,
                                   "owner tables": 144, "process": PROCESS_BASE_BYTES}
    assert row["tile_bytes_per_node"] == 4 * tile
    assert row["busiest_node_traffic_bytes"] == 3 * tile
    assert abs(row["flops_max_over_avg"] - (20 / 3) / 4.5) < 1e-12
    assert abs(row["tiles_max_over_avg"] - 4 / 3) < 1e-12
    assert abs(row["compute_s"] - 20 / 3 * 1e6 / 1e9) < 1e-15
    assert abs(row["comm_s"] - 3 * tile / 1e8) < 1e-15
    assert abs(row["estimate_s"] - (row["compute_s"] + row["comm_s"])) < 1e-15
    assert row["periods"] == 1.5 and "balanced" not in row
    assert not score_map(BlockCyclic2D(2, 1), 300, 100, 1.0, 1e8,
                         memory_per_node=peak - 1)["fits"]


def test_score_map_counts_the_smaller_last_tile():
    # 2dbc 1x2, N = 250, NB = 100 (NT = 3, last row 50): L10 (100 x 100) and L20 (50 x 100)
    # go from node 0 to 1, L21 (50 x 100) from node 1 to 0: 160 kB each way, not 3 tiles
    from starchol.distributions import BlockCyclic2D
    from starchol.model.plan import score_map

    row = score_map(BlockCyclic2D(1, 2), 250, 100, node_gflops=1.0, node_bandwidth=1e8)
    assert row["bytes"] == 80_000 + 40_000 + 40_000
    assert row["busiest_node_traffic_bytes"] == 160_000
    assert abs(row["comm_s"] - 160_000 / 1e8) < 1e-15


def test_rank_maps_fits_then_estimate_then_bytes_then_memory():
    from starchol.model.plan import rank_maps

    def row(name, fits, est, nbytes, mem):
        return {"map": name, "fits": fits, "estimate_s": est, "bytes": nbytes,
                "memory_per_node_bytes": mem}

    rows, pick = rank_maps([row("unfit", False, 1.0, 1, 1), row("25d", True, 2.0, 5, 30),
                            row("2d", True, 2.0, 5, 10), row("slow", True, 3.0, 1, 1),
                            row("fewer-bytes", True, 2.0, 4, 99)])
    assert [r["map"] for r in rows] == ["fewer-bytes", "2d", "25d", "slow", "unfit"]
    assert pick["map"] == "fewer-bytes"
    assert rank_maps([row("unfit", False, 1.0, 1, 1)])[1] is None


def test_plan_picks_least_estimate_even_with_few_periods(capsys):
    # N = 3000, NB = 200: NT = 15 holds 3.75 periods of AG(2,2) (r = 4); its flops max/avg
    # at NT = 15 is 1.063; 2dbc25d 3 x (1x2), which the old 6-period rule picked, has
    # 1.045 (1.205 when its slices took the iterations cyclically) but moves more bytes
    # and has a larger estimate
    assert main(["plan", "--nodes", "6", "--n", "3000", "--nb", "200",
                 "--memory-per-node", "1e9", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    tile = 200 * 200 * 8
    pick = d["pick"]
    assert pick["map"] == "aplane r=4 (AG(2,2), 6 nodes)" and pick["periods"] == 3.75
    assert pick["bytes"] == 233 * tile
    assert pick["tile_bytes_per_node"] == 23 * tile     # 120 tiles over 6 nodes, max 23
    assert round(pick["flops_max_over_avg"], 3) == 1.063
    old = next(r for r in d["rows"] if r["dist"] == "2dbc25d" and r["slices"] == 3)
    assert old["bytes"] == 301 * tile and round(old["flops_max_over_avg"], 3) == 1.045
    assert old["tile_bytes_per_node"] == 64 * tile
    assert (old["estimate_s"], old["bytes"], old["memory_per_node_bytes"]) > \
        (pick["estimate_s"], pick["bytes"], pick["memory_per_node_bytes"])
    assert pick["estimate_s"] == min(r["estimate_s"] for r in d["rows"])
    # compare's first row moves fewer bytes: the explanation says why it was set aside
    assert "move fewer bytes in all but take longer on their busiest node (best: " \
           "sbc-basic r=2 (basic, 2 nodes), 38.08 MB against 74.56 MB" in d["explanation"]


def test_plan_25d_pick_states_its_memory_against_the_best_2d(capsys):
    assert main(["plan", "--nodes", "31", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "1e12", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    pick = d["pick"]
    assert pick["slices"] > 1
    flat = next(r for r in d["rows"] if r["slices"] == 1)
    assert flat["estimate_s"] > pick["estimate_s"]
    assert (f"against {format_bytes(flat['memory_per_node_bytes'])} for the best 2D map, "
            f"{flat['map']}") in d["explanation"]
    sym = next(r for r in d["rows"] if r["dist"] == "sym")
    # sym keeps r <= max(NT / 6, the r an SBC of 31 nodes needs) = 9
    assert sym["pattern_size"] <= 9


def test_plan_small_estimates_keep_their_digits(capsys):
    # N = 3000 on 6 nodes: every estimate is a few ms, which printed as 0.0 s
    assert main(["plan", "--nodes", "6", "--n", "3000", "--nb", "200",
                 "--memory-per-node", "1e9", "--quiet"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.endswith(" ms")]
    assert len(rows) >= 5 and " 0.0 " not in out
    assert "smallest estimate (" in out and " ms compute on the busiest node" in out


def test_format_seconds():
    from starchol.units import format_seconds

    assert [format_seconds(s) for s in (0, 3.2e-6, 0.0456, 1, 12.34, 301.2)] == \
        ["0 s", "3.20 us", "45.6 ms", "1.00 s", "12.3 s", "301 s"]


@pytest.mark.parametrize("argv", [
    ["--nodes", "30", "--n", "300000", "--nb", "500", "--memory-per-node", "128e9"],
    ["--nodes", "31", "--n", "20000", "--nb", "500", "--memory-per-node", "1e12"],
    ["--nodes", "12", "--n", "20000", "--nb", "500", "--memory-per-node", "2e9"],
    ["--nodes", "8", "--n", "4000", "--nb", "500", "--memory-per-node", "1e12"],
    ["--nodes", "6", "--n", "3000", "--nb", "200", "--memory-per-node", "1e9",
     "--node-bandwidth", "1e6"],
    ["--nodes", "5", "--n", "2000", "--nb", "500", "--memory-per-node", "1e12"],
    ["--nodes", "11", "--n", "20000", "--nb", "500", "--memory-per-node", "1e12"],
    ["--nodes", "4", "--n", "8000", "--nb", "500", "--memory-per-node", "1e12",
     "--node-bandwidth", "1e12"],
], ids=["aplane-30", "sbc25d-on-30-of-31", "aplane-12", "pplane-7-of-8", "sym25d-6",
        "2dbc-1x5", "sbc-on-10-of-11", "sym-4"])
def test_plan_prints_the_commands_that_run_its_pick(capsys, argv):
    """The printed `starchol run` and `starchol slurm` lines parse with their commands and
    build exactly the picked map (owners equal at the run's NT)."""
    import shlex

    import numpy as np

    from starchol.cli import check_command_argv
    from starchol.distributions import candidate_maps, get_map
    from starchol.jobs.plan_cmd import text_table

    assert main(["plan", *argv, "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pick, cmds = doc["pick"], doc["commands"]
    nt = -(-doc["n"] // doc["nb"])
    picked = next(m for m in candidate_maps(doc["nodes"], nt=nt) if str(m) == pick["map"])
    run = shlex.split(cmds["run"])
    assert run[:5] == ["mpirun", "-np", str(pick["nodes"]), "starchol", "run"]
    assert check_command_argv("run", run[5:]) is None
    flags = dict(zip(run[5::2], run[6::2]))
    built = get_map(flags["--dist"], int(run[2]), grid=flags.get("--grid"),
                    slices=int(flags.get("--slices", 1)), nt=nt)
    assert str(built) == pick["map"]
    assert np.array_equal(built.owner_maps(nt), picked.owner_maps(nt))
    assert (flags["--n"], flags["--nb"]) == (str(doc["n"]), str(doc["nb"]))
    slurm = shlex.split(cmds["slurm"])
    assert slurm[:2] == ["starchol", "slurm"] and slurm[-2:] == ["--mem", "auto"]
    assert check_command_argv("slurm", slurm[2:]) is None
    assert dict(zip(slurm[2::2], slurm[3::2])) == {**flags, "--nodes": str(pick["nodes"]),
                                                   "--mem": "auto"}
    text = text_table(doc)
    assert f"run it with:\n  {cmds['run']}\n" in text and text.endswith(cmds["slurm"])


def test_plan_without_a_pick_prints_no_command(capsys):
    assert main(["plan", "--nodes", "6", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "1e6", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["pick"] is None and doc["commands"] is None


def test_plan_float32_halves_bytes_and_tiles_and_says_so_in_its_commands(capsys):
    """--dtype float32: 4-byte entries in bytes, tiles and received copies (not in the
    runtime's handles, tasks and tables), so a budget too small in float64 can fit."""
    argv = ["plan", "--nodes", "6", "--n", "20000", "--nb", "500", "--json",
            "--memory-per-node"]
    assert main(argv + ["1e12"]) == 0
    f64 = json.loads(capsys.readouterr().out)
    assert main(argv + ["1e12", "--dtype", "float32"]) == 0
    f32 = json.loads(capsys.readouterr().out)
    assert f64["dtype"] == "float64" and f32["dtype"] == "float32"
    rows32 = {r["map"]: r for r in f32["rows"]}
    assert len(rows32) == len(f64["rows"])
    for a in f64["rows"]:
        b = rows32[a["map"]]
        assert a["bytes"] == 2 * b["bytes"]
        assert b["comm_s"] < a["comm_s"] or a["bytes"] == 0
        assert a["tile_bytes_per_node"] == 2 * b["tile_bytes_per_node"]
        for part in ("tiles", "received tiles"):
            assert a["memory_parts"][part] == 2 * b["memory_parts"][part]
    assert "--dtype" not in f64["commands"]["run"]
    assert f32["commands"]["run"].endswith("--dtype float32")
    assert "--dtype float32 --mem auto" in f32["commands"]["slurm"]
    need64 = f64["pick"]["memory_per_node_bytes"]
    assert main(argv + [str(need64 - 1), "--dtype", "float32"]) == 0   # fits in float32
    assert json.loads(capsys.readouterr().out)["pick"] is not None


def test_25d_ranks_above_its_2d_slice_map_only_when_its_gain_exceeds_its_overhead():
    """The comm_bound case (6 nodes, N = 3072, NB = 128, 15 GFlop/s per node) with the
    step latency measured on the emulated cluster (5 ms): at 1 gbit/s sbc25d c=2 gains
    less over sbc than its 12 reduction steps (b = 1, slices back and forth) cost and ranks
    below it; at 10 mbit/s it gains more and ranks above. With the slices alternating at
    every step (23 reduction steps) it was measured 1.19x slower at 1 gbit/s."""
    from starchol.distributions import get_map
    from starchol.distributions.base import iteration_slices
    from starchol.model.plan import (MEASURED_STEP_LATENCY_S, overhead_25d_s, rank_maps,
                                      reduction_steps, score_map, versus_2d)

    assert overhead_25d_s(24, 2, 5e-3) == pytest.approx(0.06)    # b = 1: 0 1 1 0 0 1 1 ..
    assert reduction_steps(24, 2, 2) == 6 and reduction_steps(24, 2, 1) == 12
    assert reduction_steps(24, 3, 1) == 16      # 0 1 2 2 1 0 0 1 ..: 4 changes in 6
    for c, b in ((2, 3), (3, 2), (4, 5)):
        it = iteration_slices(50, c, b)
        assert reduction_steps(50, c, b) == sum(it[k] != it[k - 1] for k in range(1, 50))
    assert overhead_25d_s(24, 1, 5e-3) == 0.0
    for bandwidth, ahead in ((125e6, False), (1.25e6, True)):
        rows = [score_map(get_map(d, 6, **kw), 3072, 128, 15.0, bandwidth,
                          step_latency_s=MEASURED_STEP_LATENCY_S)
                for d, kw in (("sbc", {}), ("sbc25d", {"slices": 2}))]
        flat, sliced = rows
        assert flat["overhead_s"] == 0 and sliced["overhead_s"] == pytest.approx(0.06)
        assert sliced["reduction_steps"] == 12
        assert sliced["estimate_s"] == pytest.approx(
            sliced["compute_s"] + sliced["comm_s"] + 0.06)
        v = versus_2d(sliced, rows)
        assert v["flat"] is flat and v["ahead"] is ahead
        assert v["gain_s"] == pytest.approx(flat["compute_s"] + flat["comm_s"]
                                            - sliced["compute_s"] - sliced["comm_s"])
        best = rank_maps(rows)[1]
        assert best is (sliced if ahead else flat)
    assert versus_2d(flat, rows) is None


def test_plan_says_why_no_25d_map_was_picked(capsys):
    assert main(["plan", "--nodes", "6", "--n", "3072", "--nb", "128", "--memory-per-node",
                 "1e12", "--node-gflops", "15", "--node-bandwidth", "125e6",
                 "--step-latency", "5e-3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["step_latency_s"] == 5e-3 and d["pick"]["slices"] == 1
    assert "no 2.5D map picked: the best, " in d["explanation"]
    assert "60.0 ms for its 12 reduction steps on the critical path" in d["explanation"]
    assert main(["plan", "--nodes", "6", "--n", "3072", "--nb", "128", "--memory-per-node",
                 "1e9", "--step-latency", "-1"]) == 2
    assert "--step-latency must be a finite number of seconds >= 0" in capsys.readouterr().err


def test_plan_mixed_precision(capsys):
    """--dtype mixed: the float32 factorization's bytes, and memory for float32 tiles
    plus the float64 A and right-hand sides; the commands carry --dtype mixed --nrhs K;
    --nrhs without mixed is refused."""
    argv = ["plan", "--nodes", "6", "--n", "4000", "--nb", "500", "--memory-per-node", "1e12"]
    assert main(argv + ["--dtype", "float32", "--json"]) == 0
    f32 = {r["map"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert main(argv + ["--dtype", "mixed", "--nrhs", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["dtype"] == "mixed" and d["nrhs"] == 2
    for r in d["rows"]:
        assert r["bytes"] == f32[r["map"]]["bytes"]
        parts = r["memory_parts"]
        assert parts["float64 A (mixed)"] > 0 and parts["right-hand sides"] > 0
        assert r["memory_per_node_bytes"] > f32[r["map"]]["memory_per_node_bytes"]
    assert "--dtype mixed --nrhs 2" in d["commands"]["run"]
    assert "--dtype mixed --run-arg=--nrhs=2 --mem auto" in d["commands"]["slurm"]
    assert main(argv + ["--nrhs", "2"]) == 2
    assert "--nrhs applies to --dtype mixed" in capsys.readouterr().err
