"""``starchol plan``: 2D and 2.5D options within a memory budget, best first."""
import json

from starchol.cli import main


def test_plan_lists_2d_and_25d_options_and_explains_the_pick(capsys):
    assert main(["plan", "--nodes", "12", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "2e9", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    dists = {r["dist"] for r in d["rows"]}
    assert {"2dbc", "sbc", "sbc25d", "2dbc25d"} <= dists
    fitting = [r for r in d["rows"] if r["fits"]]
    assert d["pick"] == fitting[0]
    est = [(not r["balanced"], r["estimate_s"]) for r in fitting]
    assert est == sorted(est)  # balanced maps first (NT holds >= 6 periods), then by estimate
    assert all(r["memory_per_node_bytes"] <= 2e9 for r in fitting)
    assert all(r["memory_per_node_bytes"] > 2e9 for r in d["rows"] if not r["fits"])
    assert d["explanation"].startswith("pick: " + d["pick"]["map"])


def test_plan_memory_grows_with_slices(capsys):
    assert main(["plan", "--nodes", "12", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "1e12", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    sbc2 = next(r for r in rows if r["dist"] == "sbc25d" and r["slices"] == 2)
    sbc1 = next(r for r in rows if r["dist"] == "sbc" and r["nodes"] == 10)
    assert sbc2["memory_per_node_bytes"] > 1.5 * sbc1["memory_per_node_bytes"]


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


def test_plan_ranks_patterns_too_large_for_nt_last(capsys):
    # NT = 40: pplane on 31 nodes has r = 31 (1.3 periods), too coarse to balance
    assert main(["plan", "--nodes", "31", "--n", "20000", "--nb", "500",
                 "--memory-per-node", "1e12", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    pp = next(r for r in d["rows"] if r["dist"] == "pplane")
    assert pp["pattern_size"] == 31 and not pp["balanced"] and pp["periods"] < 6
    assert d["pick"]["balanced"]
    assert "pattern too large for NT = 40" in d["explanation"]
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
    from starchol.linalg.volume_summary import format_seconds

    assert [format_seconds(s) for s in (0, 3.2e-6, 0.0456, 1, 12.34, 301.2)] == \
        ["0 s", "3.20 us", "45.6 ms", "1.00 s", "12.3 s", "301 s"]
