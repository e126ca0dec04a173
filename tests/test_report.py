"""``starchol report``: model reports, run reports, bad input, and one real 4-rank run."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import _starchol_exe, run_or_fail

from starchol.cli import main
from starchol.distributions import get_map
from starchol.model.volume import transfer_pairs_bytes, transfer_pairs_tiles

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def figure_links(md):
    """Relative figure links of report.md, in order."""
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)


def assert_png(path):
    assert os.path.isfile(path), path
    with open(path, "rb") as fh:
        head = fh.read(8)
    assert head == PNG_MAGIC and os.path.getsize(path) > 5000, path


def assert_report(folder, expected):
    """report.md exists, links exactly ``expected`` figures, each a real PNG; no temp files."""
    md = open(os.path.join(folder, "report.md")).read()
    links = figure_links(md)
    assert links == expected
    for name in links:
        assert_png(os.path.join(folder, name))
        assert f"Figure {links.index(name) + 1}." in md  # every figure has a caption
    assert not [f for f in os.listdir(folder) if f.startswith(".tmp")]
    return md


# -- model report --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_report(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("model") / "new" / "folder")
    assert main(["report", "--model", "--nodes-range", "3..21", "--nt", "24", "--nb", "100",
                 "-o", out, "--quiet"]) == 0
    return out


def test_model_report_files_and_figures(model_report):
    md = assert_report(model_report, ["model_volume.png", "model_gain.png"])
    assert "sbc is below 2dbc at every node count where both exist" in md
    assert "[model.json](model.json)" in md
    # the table has one row per node count
    for p in range(3, 22):
        assert re.search(rf"^\| {p} \|", md, re.M), p


def test_model_sbc_below_2dbc_everywhere(model_report):
    doc = json.load(open(os.path.join(model_report, "model.json")))
    two_d = {pt["nodes"]: pt for pt in doc["series"]["2dbc"]}
    sbc = doc["series"]["sbc"]
    assert [pt["nodes"] for pt in sbc] == [3, 6, 10, 15, 21]
    for pt in sbc:
        assert pt["bytes"] < two_d[pt["nodes"]]["bytes"]
    assert all(row["sbc_below"] for row in doc["sbc_vs_2dbc"])
    assert [pt["nodes"] for pt in doc["series"]["sbc-basic"]] == [8, 18]
    # prime P only has a 1 x P grid, marked
    assert two_d[7]["degenerate"] and two_d[7]["grid"] == "1x7"
    assert not two_d[12]["degenerate"] and two_d[12]["grid"] == "3x4"


def test_model_points_are_the_exact_model(model_report):
    doc = json.load(open(os.path.join(model_report, "model.json")))
    nt, nb = doc["nt"], doc["nb"]
    for name, kwargs in (("sbc", {}), ("2dbc", {"grid": (3, 4)})):
        pts = {pt["nodes"]: pt for pt in doc["series"][name]}
        p = 15 if name == "sbc" else 12
        tiles = int(transfer_pairs_tiles(get_map(name, p, **kwargs), nt).sum())
        assert pts[p]["transfers_tiles"] == tiles
        assert pts[p]["bytes"] == tiles * nb * nb * 8
    # the best c really is the best over every 2 <= c <= P/c
    for fam in ("2dbc25d", "sbc25d"):
        for pt in doc["series"][f"{fam} (best c)"]:
            p = pt["nodes"]
            counts = []
            for c in range(2, p + 1):
                if c * c > p or p % c:
                    continue
                try:
                    m = get_map(fam, p, slices=c)  # 2dbc25d: most square slice grid
                except ValueError:
                    continue  # no SBC slice of p / c nodes
                counts.append(int(transfer_pairs_tiles(m, nt).sum()))
            assert pt["transfers_tiles"] == min(counts), (fam, p)


def test_model_fixed_slices_and_partial_last_tile(tmp_path):
    out = str(tmp_path / "m")
    assert main(["report", "--model", "--nodes-range", "6..12", "--n", "1000", "--nb", "96",
                 "--slices", "2,3", "-o", out, "--quiet"]) == 0
    doc = json.load(open(os.path.join(out, "model.json")))
    assert doc["nt"] == 11
    assert {"2dbc25d c=2", "2dbc25d c=3", "sbc25d c=2", "sbc25d c=3"} <= set(doc["series"])
    pts = {pt["nodes"]: pt for pt in doc["series"]["sbc25d c=2"]}
    assert sorted(pts) == [6, 12]
    exact = int(transfer_pairs_bytes(get_map("sbc25d", 12, slices=2), 1000, 96).sum())
    assert pts[12]["bytes"] == exact
    assert_report(out, ["model_volume.png", "model_gain.png"])


def test_model_float32_counts_4_byte_entries(tmp_path):
    """--dtype float32: every byte figure is the 4-byte model's (the partial last tile
    included), tile counts and ratios unchanged; report.md names the precision."""
    out = str(tmp_path / "m")
    assert main(["report", "--model", "--nodes-range", "6..12", "--n", "1000", "--nb", "96",
                 "--slices", "2", "--dtype", "float32", "-o", out, "--quiet"]) == 0
    doc = json.load(open(os.path.join(out, "model.json")))
    assert doc["dtype"] == "float32"
    pts = {pt["nodes"]: pt for pt in doc["series"]["sbc25d c=2"]}
    m = get_map("sbc25d", 12, slices=2)
    assert pts[12]["bytes"] == int(transfer_pairs_bytes(m, 1000, 96, itemsize=4).sum())
    assert 2 * pts[12]["bytes"] == int(transfer_pairs_bytes(m, 1000, 96).sum())
    assert pts[12]["leading_bytes"] == m.leading_factor() * doc["stored_bytes"]
    assert "NT = 11, float32:" in open(os.path.join(out, "report.md")).read()


# -- run reports ---------------------------------------------------------------------------
def model_run_doc(dist, nodes, n, nb, grid=None, measured=None, **extra):
    """A run document as `starchol run --json` writes it, with the exact model's bytes."""
    m = get_map(dist, nodes, grid=grid)
    pred = transfer_pairs_bytes(m, n, nb)
    meas = pred if measured is None else measured(pred.copy())
    doc = {
        "dist": dist, "map": str(m), "nodes": nodes, "n": n, "nb": nb, "nt": -(-n // nb),
        "time_s": 1.5, "gflops": n ** 3 / 3 / 1.5 / 1e9, "residual": 3e-17,
        "bytes_measured_pairs": meas.tolist(), "bytes_predicted_pairs": pred.tolist(),
        "bytes_measured_total": int(meas.sum()), "bytes_predicted_total": int(pred.sum()),
        "match": bool((meas == pred).all()),
        "runtime": {"scheduler": "prio", "workers_per_rank": 1, "starpu_version": "1.3.10"},
    }
    doc.update(extra)
    return doc


def write(path, doc):
    with open(path, "w") as fh:
        fh.write(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_run_report_two_runs(tmp_path, capsys):
    a = write(tmp_path / "a.json", model_run_doc("2dbc", 4, 400, 100, grid=(2, 2)))
    b = write(tmp_path / "b.json", model_run_doc(
        "sbc", 6, 1000, 96, kernel_blas="OpenBLAS 0.3.21 (system: /usr/lib/libopenblas.so)",
        starpu_build="StarPU 1.3.10 (built from Debian bookworm source, /opt/s)"))
    out = str(tmp_path / "out")
    assert main(["report", a, b, "-o", out]) == 0
    assert "6 figures for 2 runs" in capsys.readouterr().out
    md = assert_report(out, ["run1-a_pairs.png", "run1-a_per_node.png", "run2-b_pairs.png",
                             "run2-b_per_node.png", "runs_gflops.png", "runs_bytes.png"])
    assert "2dbc 2x2 (4 nodes)" in md and "sbc r=4 (extended, 6 nodes)" in md
    assert md.count("| yes |") == 2 and "DIFFER" not in md
    # the kernels' BLAS column: version and source (file left out); "-" before it existed;
    # the StarPU column: the build that ran, the bare version before it was recorded
    assert "| 1.3.10 | - |" in md
    assert ("| 1.3.10 (built from Debian bookworm source, /opt/s) | OpenBLAS 0.3.21 (system) |"
            in md)
    # the per-node table of run 2 holds the model's sent bytes of node 0
    pred = transfer_pairs_bytes(get_map("sbc", 6), 1000, 96)
    from starchol.units import format_bytes

    assert f"| 0 | {format_bytes(pred[0].sum())} |" in md


def test_run_report_mismatch_and_missing_optional_keys(tmp_path):
    def skew(m):
        m[0, 1] += 80000
        return m

    bad = model_run_doc("2dbc", 4, 400, 100, grid=(2, 2), measured=skew)
    del bad["match"]  # the report computes it from the two matrices
    bad = write(tmp_path / "bad.json", bad)
    bare = write(tmp_path / "bare.json", {"dist": "sbc", "nodes": 6, "n": 1000, "nb": 96})
    out = str(tmp_path / "out")
    assert main(["report", bad, bare, "-o", out]) == 0
    md = assert_report(out, ["run1-bad_pairs.png", "run1-bad_per_node.png"])
    assert "**NO**" in md and "DIFFER" in md
    assert "no `bytes_measured_pairs` in the document" in md


def test_run_report_shows_the_solve_against_its_model(tmp_path, capsys):
    """A run document with a solve (`starchol run --nrhs K --json`): a Solves table and a
    pairs figure for the solve; its bytes are checked against solve_transfer_pairs_bytes
    (computed by the report when the document lacks them), a skewed matrix is flagged,
    and the run's own bytes never stand in for the solve's."""
    from starchol.model.volume import solve_transfer_pairs_bytes

    m = get_map("sbc", 6)
    pred = solve_transfer_pairs_bytes(m, 1000, 96, 4)
    solve = {"operation": "solve", "nrhs": 4, "time_s": 0.04, "tasks": 264,
             "residual": 1.1e-17, "bytes_measured_pairs": pred.tolist(),
             "bytes_predicted_pairs": pred.tolist(), "cache": True, "match": True}
    a = write(tmp_path / "a.json", model_run_doc("sbc", 6, 1000, 96, cache=True,
                                                 solve=solve))
    skewed = pred.copy()
    skewed[1, 0] += 8
    # no predicted pairs: the report computes the solve's model (not the factor's)
    b = write(tmp_path / "b.json", model_run_doc(
        "sbc", 6, 1000, 96, cache=True,
        solve={**solve, "bytes_measured_pairs": skewed.tolist(), "match": None,
               "bytes_predicted_pairs": None, "residual": None}))
    out = str(tmp_path / "out")
    assert main(["report", a, b, "-o", out]) == 0
    md = assert_report(out, ["run1-a_pairs.png", "run1-a_per_node.png",
                             "run1-a_solve_pairs.png", "run2-b_pairs.png",
                             "run2-b_per_node.png", "run2-b_solve_pairs.png",
                             "runs_gflops.png", "runs_bytes.png"])
    from starchol.units import format_bytes

    total = format_bytes(int(pred.sum()))
    assert "## Solves" in md
    assert (f"| 1 | sbc r=4 (extended, 6 nodes) | 1000 | 96 | 4 | factor | 0.040 | 264 | "
            f"1.10e-17 | {total} | {total} | yes |") in md
    assert f"| 2 | sbc r=4 (extended, 6 nodes) | 1000 | 96 | 4 | factor | 0.040 | 264 | - |" \
        in md
    assert "**Measured bytes of the solve differ from the model in run(s) 2.**" in md
    assert ("the solve: no `bytes_predicted_pairs` in the document: the predicted bytes were "
            "computed by this report with the exact model (") in md
    assert "solve of 4 right-hand sides)" in md
    assert "The solve: bytes sent from each node (row) to each node (column)" in md


def test_run_report_refuses_a_damaged_solve(tmp_path, capsys):
    bad = write(tmp_path / "bad.json", model_run_doc("sbc", 3, 300, 100,
                                                     solve={"nrhs": 0}))
    assert main(["report", bad, "-o", str(tmp_path / "o")]) == 2
    assert "key 'solve.nrhs' must be a positive integer, got 0" in capsys.readouterr().err
    bad = write(tmp_path / "bad.json", model_run_doc(
        "sbc", 3, 300, 100, solve={"nrhs": 2, "bytes_measured_pairs": [[0]]}))
    assert main(["report", bad, "-o", str(tmp_path / "o")]) == 2
    assert "key 'solve.bytes_measured_pairs' must be 3 x 3" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o")


def test_single_run_has_no_comparison_figures(tmp_path):
    a = write(tmp_path / "r.json", model_run_doc("sbc", 3, 300, 100))
    out = str(tmp_path / "o")
    assert main(["report", a, "-o", out]) == 0
    assert_report(out, ["run1-r_pairs.png", "run1-r_per_node.png"])


# -- bad input -----------------------------------------------------------------------------
def _good(tmp_path):
    return write(tmp_path / "good.json", model_run_doc("sbc", 3, 300, 100))


@pytest.mark.parametrize("case, message", [
    (lambda t: ["report", str(t / "nope.json"), "-o", str(t / "o")], "nope.json: no such run"),
    (lambda t: ["report", write(t / "x.json", "{not json"), "-o", str(t / "o")],
     "x.json is not JSON"),
    (lambda t: ["report", write(t / "l.json", "[1, 2]"), "-o", str(t / "o")],
     "l.json: a run document is a JSON object"),
    (lambda t: ["report", write(t / "k.json", {"dist": "sbc", "nodes": 3, "n": 300}),
                "-o", str(t / "o")], "k.json: missing required key 'nb'"),
    (lambda t: ["report", write(t / "s.json", {**model_run_doc("sbc", 3, 300, 100),
                                               "bytes_measured_pairs": [[0, 1], [1, 0]]}),
                "-o", str(t / "o")], "s.json: key 'bytes_measured_pairs' must be 3 x 3"),
    (lambda t: ["report", write(t / "n.json", {**model_run_doc("sbc", 3, 300, 100),
                                               "nodes": "three"}),
                "-o", str(t / "o")], "n.json: key 'nodes' must be a positive integer"),
    (lambda t: ["report", write(t / "g.json", {**model_run_doc("sbc", 3, 300, 100),
                                               "gflops": "fast"}),
                "-o", str(t / "o")], "g.json: key 'gflops' must be a number"),
    (lambda t: ["report", "-o", str(t / "o")], "give one or more run JSON files"),
    (lambda t: ["report", _good(t), "--model", "-o", str(t / "o")], "not both"),
    (lambda t: ["report", _good(t), "--nt", "4", "-o", str(t / "o")],
     "--nt applies to --model reports only"),
    (lambda t: ["report", _good(t), "-o", write(t / "file", "x")], "is not a folder"),
    (lambda t: ["report", "--model", "--nt", "10", "-o", str(t / "o")],
     "--model needs --nodes-range"),
    (lambda t: ["report", "--model", "--nodes-range", "3-60", "--nt", "10", "-o", str(t / "o")],
     "--nodes-range must look like A..B"),
    (lambda t: ["report", "--model", "--nodes-range", "60..3", "--nt", "10", "-o", str(t / "o")],
     "is empty"),
    (lambda t: ["report", "--model", "--nodes-range", "1..5", "--nt", "10", "-o", str(t / "o")],
     "start at 2 or more"),
    (lambda t: ["report", "--model", "--nodes-range", "3..5", "-o", str(t / "o")],
     "give the matrix size"),
    (lambda t: ["report", "--model", "--nodes-range", "3..5", "--nt", "10", "--slices", "1",
                "-o", str(t / "o")], "--slices must be 'best' or a list"),
])
def test_bad_input(tmp_path, capsys, case, message):
    argv = case(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err
    assert not os.path.exists(tmp_path / "o")  # refused before any folder is made


def test_bad_input_exit_status_from_the_shell(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "starchol")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "starchol"]
    proc = subprocess.run(cmd + ["report", str(tmp_path / "missing.json"), "-o",
                                 str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "missing.json: no such run document" in proc.stderr


# -- the acceptance command and a real run -------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(120)       # fast: a slow one fails by this timeout
def test_acceptance_model_report_is_fast(tmp_path):
    out = str(tmp_path / "out")
    assert main(["report", "--model", "--nodes-range", "3..60", "--n", "100000", "--nb", "500",
                 "-o", out, "--quiet"]) == 0
    md = assert_report(out, ["model_volume.png", "model_gain.png"])
    assert "sbc is below 2dbc at every node count where both exist" in md


def _has_run_command():
    try:
        from starchol.jobs import run_cmd  # noqa: F401
        from starchol.runtime import _binding  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not found")
@pytest.mark.skipif(not _has_run_command(), reason="starchol run / the StarPU layer is not built")
def test_report_of_a_real_4_rank_run(tmp_path):
    cmd = _starchol_exe()
    run_json = str(tmp_path / "run4.json")
    home = tmp_path / "starpu_home"
    home.mkdir()
    env = dict(os.environ, STARPU_HOME=str(home), STARPU_SILENT="1")
    # Calibrate the bus in the fresh STARPU_HOME with one rank first: four ranks that
    # calibrate at once race on the same files and StarPU 1.3 aborts reading a partial one.
    warm = subprocess.run(cmd + ["run", "--dist", "2dbc", "--grid", "1x1", "--n", "200",
                                 "--nb", "100"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert warm.returncode == 0, warm.stderr
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4", *cmd, "run",
            "--dist", "2dbc", "--grid", "2x2", "--n", "400", "--nb", "100", "--nrhs", "3",
            "--check", "--json", run_json]
    proc = run_or_fail(argv, env, 120, "mpirun -np 4 starchol run")
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    folder = str(tmp_path / "report")
    assert main(["report", run_json, "-o", folder]) == 0
    md = assert_report(folder, ["run1-run4_pairs.png", "run1-run4_per_node.png",
                                "run1-run4_solve_pairs.png"])
    assert md.count("| yes |") == 2 and "## Solves" in md
    assert "| 3 | rhs |" in md           # K = 3: the solve kept L in place
    doc = json.load(open(run_json))
    pred = transfer_pairs_bytes(get_map("2dbc", 4, grid=(2, 2)), 400, 100)
    assert np.array_equal(np.array(doc["bytes_measured_pairs"]), pred)
    from starchol.model.rhs_volume import rhs_solve_transfer_pairs_bytes

    assert doc["solve"]["solve_variant"]["variant"] == "rhs"
    solve_pred = rhs_solve_transfer_pairs_bytes(get_map("2dbc", 4, grid=(2, 2)), 400, 100,
                                                3)
    assert np.array_equal(np.array(doc["solve"]["bytes_measured_pairs"]), solve_pred)
    assert 0 < doc["solve"]["residual"] < 1e-15
    # the same real document without its prediction: the report computes it from the
    # document's map, N, NB and cache setting, and it matches what StarPU-MPI measured
    from starchol.reports.runs import load_run
    from starchol.reports.settle import settle_bytes

    for key in ("bytes_predicted_pairs", "bytes_predicted_total", "match"):
        del doc[key]
        del doc["solve"][key]
    run = load_run(write(tmp_path / "nopred.json", doc))
    notes = settle_bytes(run)
    assert run["match"] is True and np.array_equal(run["bytes_predicted_pairs"], pred)
    assert run["solve"]["match"] is True
    assert np.array_equal(run["solve"]["bytes_predicted_pairs"], solve_pred)
    assert any("computed by this report with the exact model (2dbc 2x2 (4 nodes), N = 400, "
               "NB = 100, receive cache on, float64)" in n for n in notes), notes


def test_kernel_blas_column_of_ranks_that_chose_differently():
    from starchol.jobs.report_markdown import _kernel_blas_short

    both = ("OpenBLAS 0.3.21 (system: /usr/lib/libopenblasp-r0.3.21.so); "
            "OpenBLAS 0.3.30 (scipy: /venv/scipy.libs/libscipy_openblas.so)")
    assert _kernel_blas_short({"kernel_blas": both}) == \
        "OpenBLAS 0.3.21 (system); OpenBLAS 0.3.30 (scipy)"
    assert _kernel_blas_short({"runtime": {}}) == "-"


def test_gantt_warns_when_its_time_axis_cuts_transfers(tmp_path, capsys):
    """The chart's time axis spans the tasks; a transfer that ends after the last task
    (received on a clock ahead of the sender's) or starts before the first is cut by it:
    the report says so, on stderr and in report.md, instead of cutting it silently."""
    from starchol.reports.trace_records import summarize

    tasks = [{"kernel": "potrf", "rank": 0, "worker": 0, "start": 10.0, "end": 12.0},
             {"kernel": "trsm", "rank": 1, "worker": 0, "start": 13.0, "end": 20.0}]
    comms = [{"src": 0, "dst": 1, "start": 12.0, "end": 12.5, "bytes": 800},
             {"src": 0, "dst": 1, "start": 19.0, "end": 21.5, "bytes": 800},
             {"src": 1, "dst": 0, "start": 9.25, "end": 11.0, "bytes": 800}]
    workers = [{"rank": r, "worker": w, "name": f"CPU{w}"} for r in (0, 1) for w in (0, 1)]
    trace = summarize(tasks, comms, 2, {0: "a", 1: "b"}, workers)
    assert [(w["rank"], w["worker"], w["busy_ms"]) for w in trace["workers"]] == \
        [(0, 0, 2.0), (0, 1, 0.0), (1, 0, 7.0), (1, 1, 0.0)]     # idle workers listed
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "trace.json").write_text(json.dumps(trace))
    doc = model_run_doc("2dbc", 2, 256, 128, grid=(1, 2))
    doc["trace"] = {"dir": str(folder), "kernels": {"potrf": 1, "trsm": 1}, "span_ms": 10.0,
                    "comms": 3, "comm_bytes": 2400}
    (folder / "run.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    cut = ("the Gantt chart's time axis (0 to 10.000 ms, the tasks' extent) cuts 2 of 3 MPI "
           "transfers, which reach up to 0.750 ms before its start and 1.500 ms after its "
           "end; the tables count them in full")
    assert f"starchol report: warning: {folder}: {cut}" in err
    md = (out / "report.md").read_text()
    assert f"**Note: {cut}.**" in md and "| 1 | b | 1 | 0.0 | 10.0 | 100% |" in md
    # nothing cut: no warning, no note
    trace["comms"] = trace["comms"][:1]
    (folder / "trace.json").write_text(json.dumps(trace))
    assert main(["report", str(folder), "-o", str(tmp_path / "out2")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "Note:" not in (tmp_path / "out2" / "report.md").read_text()
