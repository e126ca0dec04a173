"""The rank-free command line: map, volume, compare (acceptance figures and bad input)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from starchol.cli import main
from volume_reference import as_matrix, reference_pairs


def status(argv):
    """The exit status of ``starchol ARGV``: ``main``'s, or the parser's (an option's
    value refused by its argparse type exits at parsing)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def run_json(capsys, *argv):
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_volume_acceptance_figures(capsys):
    d = run_json(capsys, "volume", "--dist", "sbc", "--nodes", "28", "--nt", "600")
    assert 5.99 <= d["ratio"] <= 6.01
    d = run_json(capsys, "volume", "--dist", "2dbc", "--nodes", "28", "--grid", "7x4", "--nt", "600")
    assert 8.90 <= d["ratio"] <= 8.92
    d = run_json(capsys, "volume", "--dist", "sbc-basic", "--nodes", "32", "--nt", "120")
    assert 6.98 <= d["ratio"] <= 6.99
    d = run_json(capsys, "volume", "--dist", "sbc25d", "--nodes", "16", "--slices", "2", "--nt", "120")
    assert abs(d["ratio"] - d["leading_term_tiles"] / d["stored_tiles"]) < 0.1


def test_volume_json_keys_and_bytes(capsys):
    d = run_json(capsys, "volume", "--dist", "sbc", "--nodes", "6", "--nt", "12")
    for key in ("dist", "nodes", "slices", "nt", "nb", "stored_tiles", "transfers_tiles", "bytes",
                "ratio", "leading_term_tiles", "per_node", "pairs_tiles", "load"):
        assert key in d
    assert d["nb"] == 500 and d["bytes"] == d["transfers_tiles"] * 500 * 500 * 8
    assert d["stored_tiles"] == 78 and d["ratio"] == d["transfers_tiles"] / 78
    pairs = np.array(d["pairs_tiles"])
    assert pairs.sum(axis=1).tolist() == d["per_node"]["sent_tiles"]
    assert pairs.sum(axis=0).tolist() == d["per_node"]["received_tiles"]
    assert set(d["load"]) >= {"tiles", "flops_max_over_avg"}
    # --n/--nb with a smaller last tile counts bytes per tile size
    e = run_json(capsys, "volume", "--dist", "sbc", "--nodes", "6", "--n", "1000", "--nb", "96")
    assert e["nt"] == 11 and e["bytes"] < e["transfers_tiles"] * 96 * 96 * 8
    off = run_json(capsys, "volume", "--dist", "sbc", "--nodes", "6", "--nt", "12", "--cache", "off")
    assert off["transfers_tiles"] > d["transfers_tiles"]
    # the leading terms count cached transfers: none with the cache off
    assert d["leading_term_tiles"] == 2 * 78 and off["leading_term_tiles"] is None
    assert main(["volume", "--dist", "sbc", "--nodes", "6", "--nt", "12", "--cache", "off"]) == 0
    assert "leading:    - (the leading terms hold with the cache on)" in capsys.readouterr().out


def test_volume_counts_the_solve(capsys):
    """--nrhs K: the solve's bytes (whole, and each pass alone) as the one model gives
    them, in the variant that runs (auto: fewer bytes on the busiest link; --variant
    forces one); sbc on 6 nodes, N = 3000, NB = 200, K = 4: the factor variant is what
    a real `starchol run --nrhs 4` measured before the rhs variant, 40,384,000 B
    (2026-12-04). float32 halves them; --nrhs 0 is refused."""
    from starchol.distributions import get_map
    from starchol.model.rhs_volume import rhs_solve_transfer_pairs_bytes
    from starchol.model.volume import solve_transfer_pairs_bytes

    argv = ["volume", "--dist", "sbc", "--nodes", "6", "--n", "3000", "--nb", "200"]
    d = run_json(capsys, *argv, "--nrhs", "4")
    m = get_map("sbc", 6)
    both = rhs_solve_transfer_pairs_bytes(m, 3000, 200, 4)
    assert d["solve"]["nrhs"] == 4 and d["solve"]["variant"] == "rhs"
    assert d["solve"]["bytes"] == int(both.sum()) == 665600
    assert d["solve"]["variants"]["factor"]["bytes"] == 40384000
    assert d["solve"]["variants"]["rhs"]["busiest_link_bytes"] == int(both.max())
    assert "busiest link" in d["solve"]["variant_reason"]
    assert d["solve"]["per_node"]["sent_bytes"] == both.sum(axis=1).tolist()
    assert d["solve"]["per_node"]["received_bytes"] == both.sum(axis=0).tolist()
    for which in ("forward", "backward"):
        assert d["solve"][f"bytes_{which}"] == int(
            rhs_solve_transfer_pairs_bytes(m, 3000, 200, 4, which=which).sum())
    forced = run_json(capsys, *argv, "--nrhs", "4", "--variant", "factor")["solve"]
    assert forced["variant"] == "factor" and forced["bytes"] == 40384000
    for which in ("forward", "backward"):
        assert forced[f"bytes_{which}"] == int(
            solve_transfer_pairs_bytes(m, 3000, 200, 4, which=which).sum())
    assert run_json(capsys, *argv, "--nrhs", "4", "--dtype", "float32")["solve"]["bytes"] \
        == 665600 // 2
    assert "solve" not in run_json(capsys, *argv)
    assert main(argv + ["--nrhs", "4"]) == 0
    assert "solve:      K = 4, variant rhs: 665.60 kB (forward pass alone " in \
        capsys.readouterr().out
    assert status(argv + ["--nrhs", "0"]) == 2
    assert "argument --nrhs: must be an integer >= 1, got '0'" in capsys.readouterr().err
    assert main(argv + ["--variant", "rhs"]) == 2
    assert "--variant chooses the graph of a solve: give --nrhs K" in \
        capsys.readouterr().err


def test_volume_acceptance_sbc28_solve(capsys):
    """Issue 45: the solve of one right-hand side at 28 nodes, N = 100,000, NB = 500,
    sends at least 100x less than the 65.7 GB of the variant that moves L."""
    d = run_json(capsys, "volume", "--dist", "sbc", "--nodes", "28", "--n", "100000",
                 "--nb", "500", "--nrhs", "1", "--quiet")["solve"]
    assert d["variant"] == "rhs" and d["variants"]["factor"]["bytes"] > 65.7e9
    assert d["bytes"] * 100 <= 65.7e9


def test_volume_counts_a_mixed_precision_solve(capsys):
    """--dtype mixed --nrhs K --iterations I [--fallback WHY]: the sum of the graphs'
    models (starchol/model/mixed_volume.py); the float32 factorization is half of float64's;
    without --nrhs, or --iterations without mixed, a one-line error."""
    from starchol.distributions import get_map
    from starchol.model.mixed_volume import mixed_phase_bytes, mixed_transfer_pairs_bytes
    from starchol.model.volume import transfer_pairs_bytes

    argv = ["volume", "--dist", "sbc", "--nodes", "6", "--n", "2000", "--nb", "100",
            "--dtype", "mixed", "--nrhs", "1"]
    m = get_map("sbc", 6)
    d = run_json(capsys, *argv, "--iterations", "3")
    total = mixed_transfer_pairs_bytes(m, 2000, 100, 1, iterations=3)
    assert d["dtype"] == "mixed" and "solve" not in d
    assert d["mixed"]["bytes"] == int(total.sum()) and d["mixed"]["iterations"] == 3
    assert d["mixed"]["per_node"]["sent_bytes"] == total.sum(axis=1).tolist()
    assert d["bytes"] == d["mixed"]["phases"]["factor32"] == \
        int(transfer_pairs_bytes(m, 2000, 100).sum()) // 2
    back = run_json(capsys, *argv, "--fallback", "refinement")
    assert back["mixed"]["iterations"] == 2          # the default
    assert back["mixed"]["phases"] == {k: int(v.sum()) for k, v in mixed_phase_bytes(
        m, 2000, 100, 1, iterations=2, fallback="refinement").items()}
    assert main(argv + ["--iterations", "3"]) == 0
    out = capsys.readouterr().out
    assert "mixed:      K = 1, I = 3 refinement iteration(s): " in out
    assert "(4 float32 solve(s) and 4 residual(s)" in out
    assert main(argv[:-2]) == 2
    assert "--dtype mixed counts a solve refined to float64: give --nrhs K" in \
        capsys.readouterr().err
    assert main(argv[:-4] + ["--iterations", "2"]) == 2
    assert "give --dtype mixed" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--dist", "sbc", "--nodes", "6", "--nt", "11"],
    ["--dist", "2dbc", "--nodes", "6", "--grid", "3x2", "--nt", "7"],
    ["--dist", "sbc-basic", "--nodes", "8", "--nt", "9"],
    ["--dist", "sbc25d", "--nodes", "6", "--slices", "2", "--nt", "12"],
    ["--dist", "2dbc25d", "--nodes", "8", "--slices", "2", "--grid", "2x2", "--nt", "9"],
])
def test_recount_from_map_json_matches_volume(capsys, argv):
    m = run_json(capsys, "map", *argv)
    v = run_json(capsys, "volume", *argv)
    owners = [np.array(o) for o in m["owner"]]
    assert len(owners) == m["slices"] and owners[0].shape == (m["nt"], m["nt"])
    recount = as_matrix(reference_pairs(owners), m["nodes"])
    assert recount == v["pairs_tiles"]
    assert sum(map(sum, recount)) == v["transfers_tiles"]


def test_map_outputs(tmp_path, capsys):
    png = tmp_path / "m.png"
    cham = tmp_path / "m.txt"
    assert main(["map", "--dist", "sbc", "--nodes", "6", "--nt", "8", "--png", str(png),
                 "--chameleon", str(cham)]) == 0
    out = capsys.readouterr().out
    assert "sbc r=4" in out and png.read_bytes()[:4] == b"\x89PNG"
    # extended SBC r = 4: its diagonal variants repeat every 3 blocks, a 12 x 12 period
    # (the file held the 8 x 8 owners of NT = 8, which Chameleon repeats into another map)
    assert f"Chameleon map written to {cham}: the map's 12 x 12 period (any NT)" in out
    assert cham.read_text().split("\n")[0] == "12 12"
    # the Chameleon file reads back as a custom map with the same owners, at any NT
    for nt in ("8", "29"):
        m = run_json(capsys, "map", "--dist", "custom", "--map-file", str(cham), "--nt", nt)
        n = run_json(capsys, "map", "--dist", "sbc", "--nodes", "6", "--nt", nt)
        low = np.tril(np.ones((int(nt), int(nt)), dtype=bool))
        assert (np.array(m["owner"])[0][low] == np.array(n["owner"])[0][low]).all()
    # a plane is aligned to the last tile row: the file is for this NT only, and says so
    assert main(["map", "--dist", "pplane", "--nodes", "7", "--nt", "17", "--chameleon",
                 str(cham)]) == 2           # an existing file: replaced only with --overwrite
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert main(["map", "--dist", "pplane", "--nodes", "7", "--nt", "17", "--chameleon",
                 str(cham), "--overwrite"]) == 0
    assert (f"Chameleon map written to {cham}: a 14 x 14 pattern, the period of its owners "
            f"at NT = 17 only") in capsys.readouterr().out
    m = run_json(capsys, "map", "--dist", "custom", "--map-file", str(cham), "--nt", "17")
    n = run_json(capsys, "map", "--dist", "pplane", "--nodes", "7", "--nt", "17")
    low = np.tril(np.ones((17, 17), dtype=bool))
    assert (np.array(m["owner"])[0][low] == np.array(n["owner"])[0][low]).all()


def test_compare_lists_maps_sorted_by_bytes(capsys):
    d = run_json(capsys, "compare", "--nodes", "28", "--nt", "60")
    names = [r["map"] for r in d["rows"]]
    assert any(n.startswith("sbc r=8") for n in names)
    assert "2dbc 7x4 (28 nodes)" in names and "2dbc 4x7 (28 nodes)" in names
    assert any(n.startswith("sbc25d") for n in names) and any(n.startswith("2dbc25d") for n in names)
    b = [r["bytes"] for r in d["rows"]]
    assert b == sorted(b)
    assert main(["compare", "--nodes", "10", "--n", "2000", "--nb", "300"]) == 0
    assert "sorted by predicted bytes" in capsys.readouterr().out


BAD = [
    (["volume", "--dist", "sbc", "--nodes", "20", "--nt", "10"], ["15", "21"]),
    (["volume", "--dist", "sbc", "--nodes", "6"], ["--nt NT"]),
    (["volume", "--dist", "sbc", "--nodes", "6", "--nt", "0"], [">= 1"]),
    (["volume", "--dist", "sbc", "--nodes", "6", "--n", "100", "--nb", "200"], ["larger than --n"]),
    (["volume", "--dist", "sbc", "--nodes", "6", "--nt", "5", "--n", "10"], ["not both"]),
    (["volume", "--dist", "2dbc", "--nodes", "6", "--grid", "4x4", "--nt", "5"], ["16 nodes"]),
    (["volume", "--dist", "sbc", "--nodes", "6", "--grid", "2x3", "--nt", "5"], ["--grid applies"]),
    (["volume", "--dist", "sbc25d", "--nodes", "7", "--slices", "2", "--nt", "5"], ["divisible"]),
    (["volume", "--dist", "sbc25d", "--nodes", "12", "--nt", "5"],
     ["with --slices 1 use --nodes 8 or", "--slices 2 or --slices 4 or --slices 6, or --dist "
                                          "sym25d"]),
    (["volume", "--dist", "sbc25d", "--nodes", "7", "--nt", "5"],
     ["--nodes 10, or --dist sym25d"]),
    (["volume", "--dist", "custom", "--nt", "5"], ["--map-file"]),
    (["volume", "--dist", "custom", "--map-file", "/nonexistent.txt", "--nt", "5"], ["not found"]),
    (["map", "--dist", "sbc25d", "--nodes", "12", "--slices", "2", "--nt", "5",
      "--chameleon", "/tmp/x.txt"], ["no 2.5D"]),
    (["compare", "--nodes", "0", "--nt", "5"], [">= 1"]),
]


@pytest.mark.parametrize("argv,words", BAD)
def test_bad_input_gives_clear_error_and_nonzero_exit(argv, words, capsys):
    assert status(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"starchol {argv[0]}: error:")
    for w in words:
        assert w in err


def test_argparse_errors_and_module_entry_point():
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "starchol", "volume", "--dist", "nope",
                        "--nodes", "3", "--nt", "3"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "invalid choice" in p.stderr
    p = subprocess.run([sys.executable, "-m", "starchol", "volume", "--dist", "sbc",
                        "--nodes", "20", "--nt", "10"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "15" in p.stderr and "21" in p.stderr and not p.stdout


@pytest.mark.parametrize("argv,words", [
    (["volume", "--dist", "sbc", "--nodes", "6", "--nt", "1e3"],
     ["argument --nt: must be an integer >= 1, got '1e3'", "write it as an integer: 1000"]),
    (["volume", "--dist", "sbc", "--nodes", "6", "--nt", "4", "--nb", "1e2"],
     ["argument --nb: must be an integer >= 1, got '1e2'", "write it as an integer: 100"]),
    (["run", "--dist", "2dbc", "--n", "1e3", "--nb", "100"],
     ["argument --n: invalid int value: '1e3'", "write it as an integer: 1000"]),
    (["volume", "--dist", "sbc", "--nodes", "6", "--nt", "4", "--bogus", "1"],
     ["unrecognized arguments: --bogus 1"]),
    (["run", "--dist", "sbc", "--nodes", "6", "--n", "40", "--nb", "10"],
     ["unrecognized arguments: --nodes 6", "the node count is mpirun -np P"]),
    (["--bogus", "map", "--dist", "sbc", "--nodes", "6", "--nt", "4"],
     ["unrecognized arguments: --bogus"]),
])
def test_argument_errors_are_one_line_from_the_command(argv, words, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    cmd = next(w for w in argv if not w.startswith("-"))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err
    assert err.startswith(f"starchol {cmd}: error: ") and err.rstrip().endswith(
        f"(see starchol {cmd} --help)")
    for w in words:
        assert w in err


def test_vv_prints_the_traceback_of_every_error(capsys):
    bad = ["volume", "--dist", "sbc", "--nodes", "20", "--nt", "10"]
    assert main(bad + ["-v"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("starchol volume: error:")
    assert main(["-vv"] + bad) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Traceback") and any("UsageError" in ln for ln in err)
    assert err[-1].startswith("starchol volume: error:") and "--nodes 21" in err[-1]


@pytest.mark.parametrize("argv", [
    ["map", "--dist", "sbc", "--nodes", "6", "--nt", "5"],
    ["volume", "--dist", "sbc", "--nodes", "6", "--nt", "8"],
    ["compare", "--nodes", "6", "--nt", "8", "--quiet"],
    ["plan", "--nodes", "6", "--n", "2000", "--nb", "200", "--memory-per-node", "1e9",
     "--quiet"],
])
def test_json_is_file_or_stdout_in_every_command(argv, tmp_path, capsys):
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert main(argv + ["--json", "-"]) == 0     # '-' and a bare --json: stdout
    dash = capsys.readouterr()
    assert json.loads(dash.out) and dash.err.strip() == text.strip()  # text on stderr
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(dash.out)
    out = tmp_path / "d.json"
    assert main(argv + ["--json", str(out)]) == 0     # a file: the text on stdout
    assert json.loads(out.read_text()) == json.loads(dash.out)
    assert capsys.readouterr().out == text
    assert main(argv + ["--json", str(tmp_path / "no" / "d.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"starchol {argv[0]}: error: --json ") and "does not exist" in err
    assert os.listdir(tmp_path) == ["d.json"]


def test_v_logs_the_steps_of_the_model_commands(tmp_path):
    out = tmp_path / "v.json"
    p = subprocess.run([sys.executable, "-m", "starchol", "-v", "volume", "--dist", "sbc",
                        "--nodes", "6", "--nt", "10", "--json", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "INFO: counting the transfers of sbc r=4 (extended, 6 nodes), N = 5000" in p.stderr
    assert "INFO: counted 103 transfers in " in p.stderr and f"INFO: wrote {out}" in p.stderr
    p = subprocess.run([sys.executable, "-m", "starchol", "plan", "--nodes", "6", "--n",
                        "1000", "--nb", "100", "--memory-per-node", "1e9", "-vv"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "INFO: scored in " in p.stderr and "DEBUG: sbc r=4 (extended, 6 nodes): " \
        "estimate " in p.stderr
