"""Execution traces end to end: `starchol run --trace` on 4 ranks, then `starchol report`."""
import json
import os

import pytest

from starchol.cli import main

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi


def _fxt_built():
    from starchol.runtime import starpu_build

    return "STARPU_USE_FXT" in starpu_build.describe()["config"]


needs_fxt = pytest.mark.skipif(not _fxt_built(), reason="this StarPU has no FxT "
                               "(STARCHOL_STARPU=system); scripts/setup.sh builds one")


def graph_counts(nt):
    """Tasks of the tiled right-looking Cholesky per kernel."""
    return {"potrf": nt, "trsm": nt * (nt - 1) // 2, "syrk": nt * (nt - 1) // 2,
            "gemm": nt * (nt - 1) * (nt - 2) // 6}


@needs_fxt
def test_four_rank_trace_and_gantt(mpirun, tmp_path, capsys):
    trace_dir = tmp_path / "t"
    trace_dir.mkdir()    # an earlier trace on 8 ranks: its raw files must not stay
    (trace_dir / "prof_file_starchol_7").write_bytes(b"stale")
    (trace_dir / "run.json").write_text("{}")
    p = mpirun(4, "run", "--dist", "2dbc", "--grid", "2x2", "--n", "1024", "--nb", "128",
               "--trace", trace_dir, "--overwrite", "--json", tmp_path / "r.json", "--quiet",
               "--check", timeout=240)     # a folder that holds files: only with --overwrite
    assert p.rank_exits == [0] * 4, p.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    trace = json.loads((trace_dir / "trace.json").read_text())
    nt = 8
    assert doc["residual"] < 1e-14
    # every task of the graph is in the trace, once, and nothing else (the residual
    # check's tasks come after Session.stop_trace)
    assert trace["kernels"] == graph_counts(nt) == doc["trace"]["kernels"]
    assert len(trace["tasks"]) == sum(graph_counts(nt).values())
    assert {w["rank"] for w in trace["workers"]} == {0, 1, 2, 3}
    assert all(0 <= t[3] <= t[4] <= trace["span_ms"] + 1e-3 for t in trace["tasks"])
    # the traced transfers are the measured bytes, which are still the model's
    assert doc["match"] is True
    assert trace["comm_bytes"] == doc["bytes_measured_total"] == doc["bytes_predicted_total"]
    pairs = [[0] * 4 for _ in range(4)]
    for src, dst, _, _, size in trace["comms"]:
        pairs[src][dst] += size
    assert pairs == doc["bytes_measured_pairs"]
    for w in trace["workers"]:
        assert w["busy_ms"] + w["idle_ms"] == pytest.approx(trace["span_ms"])
    for name in ("tasks.rec", "paje.trace", "run.json"):
        assert (trace_dir / name).is_file(), name
    assert sorted(x.name for x in trace_dir.glob("prof_file_*")) == \
        [f"prof_file_starchol_{r}" for r in range(4)]
    assert json.loads((trace_dir / "run.json").read_text())["nodes"] == 4
    # the report draws the Gantt chart from the trace folder
    out = tmp_path / "out"
    assert main(["report", str(trace_dir), "-o", str(out)]) == 0, capsys.readouterr().err
    png = next(out.glob("*_gantt.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
    md = (out / "report.md").read_text()
    assert png.name in md and "idle (ms)" in md and "MPI communications" in md
    assert "| gemm | 56 |" in md
    from starchol.units import format_bytes

    total = doc["bytes_measured_total"]
    assert f"{format_bytes(total)} ({total} B) in all" in md


@needs_fxt
def test_trace_lists_idle_workers_and_clears_an_earlier_trace(mpirun, tmp_path):
    """One tile on 4 workers: the three that run nothing are in the trace, idle for the
    whole span. Then a run that fails before its conversion leaves none of the earlier
    trace's files (a report of the folder would have shown that run as this one's);
    files the trace does not write stay."""
    trace_dir = tmp_path / "t"
    p = mpirun(1, "run", "--dist", "2dbc", "--n", "64", "--nb", "64", "--workers", "4",
               "--trace", trace_dir, "--quiet")
    assert p.rank_exits == [0], p.stderr
    trace = json.loads((trace_dir / "trace.json").read_text())
    assert trace["kernels"] == {"potrf": 1}
    workers = trace["workers"]
    assert [(w["rank"], w["worker"], w["name"]) for w in workers] == \
        [(0, k, f"CPU{k}") for k in range(4)]
    assert sorted(w["busy_ms"] == 0 for w in workers) == [False, True, True, True]
    for w in workers:
        assert w["busy_ms"] + w["idle_ms"] == pytest.approx(trace["span_ms"])
    (trace_dir / "prof_file_alice_3").write_bytes(b"stale")   # an earlier 4-rank run's
    (trace_dir / "notes.rec").write_text("mine")
    p = mpirun(1, "run", "--dist", "2dbc", "--n", "256", "--nb", "64", "--workers", "2",
               "--matrix", "indefinite:100", "--trace", trace_dir, "--overwrite", "--quiet")
    assert p.rank_exits == [1] and "not positive definite" in p.stderr, p.stderr
    assert sorted(x.name for x in trace_dir.iterdir()) == ["notes.rec",
                                                           "prof_file_starchol_0"]


def test_run_without_trace_records_nothing(mpirun, tmp_path):
    """A StarPU 1.3 built with FxT traces by default: a run without --trace must not."""
    prefix = tmp_path / "fxt"
    prefix.mkdir()
    os.environ["STARPU_FXT_PREFIX"] = str(prefix) + os.sep
    try:
        p = mpirun(2, "run", "--dist", "2dbc", "--n", "256", "--nb", "64", "--quiet")
    finally:
        del os.environ["STARPU_FXT_PREFIX"]
    assert p.rank_exits == [0, 0], p.stderr
    assert list(prefix.iterdir()) == []


@pytest.mark.parametrize("role,name", [("--json", "trace.json"), ("--json", "run.json"),
                                       ("--json", "tasks.rec"), ("--json", "paje.trace"),
                                       ("--output", "dag.dot")])
def test_outputs_cannot_take_a_trace_file_name(tmp_path, capsys, role, name):
    """The trace folder's files belong to the trace: an output there under one of their
    names is refused before the run (it would be overwritten, or overwrite the trace)."""
    trace_dir = tmp_path / "t"
    trace_dir.mkdir()
    target = str(trace_dir / name) + (":/L" if role == "--output" else "")
    rc = main(["run", "--dist", "2dbc", "--n", "64", "--nb", "32", "--trace",
               str(trace_dir), role, target, "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{role} {trace_dir / name}: the trace writes a file of that name in " \
           f"--trace {trace_dir}; choose another name or folder" in err
    assert list(trace_dir.iterdir()) == []


@needs_fxt
def test_critical_path_of_a_four_rank_sbc25d_trace(mpirun, tmp_path, capsys):
    """The critical path of a traced 4-rank sbc25d run (2 slices of SBC on 2 nodes) is a
    chain of dependent tasks of the graph: each task reads a tile its predecessor wrote,
    on the same rank or through the transfer of that tile between them; it ends with the
    last task, its times follow one another, and its length is at most the makespan."""
    trace_dir = tmp_path / "t"
    p = mpirun(4, "run", "--dist", "sbc25d", "--slices", "2", "--n", "768", "--nb", "128",
               "--trace", trace_dir, "--json", tmp_path / "r.json", "--quiet", timeout=240)
    assert p.rank_exits == [0] * 4, p.stderr
    trace = json.loads((trace_dir / "trace.json").read_text())
    path = trace["critical_path"]
    els = path["elements"]
    nt, span, tol = 6, trace["span_ms"], 1e-3
    assert path["makespan_ms"] == pytest.approx(span)
    assert path["unmatched_reads"] == 0
    assert els[0]["kind"] == els[-1]["kind"] == "task"
    assert els[-1]["end_ms"] == pytest.approx(max(t[4] for t in trace["tasks"]))
    tasks = [e for e in els if e["kind"] == "task"]
    # every task on it is a task of the trace, as the trace has it
    for e in tasks:
        kernel, rank, worker, start, end = trace["tasks"][e["task"]]
        assert (kernel, rank, worker) == (e["kernel"], e["rank"], e["worker"])
        assert (start, end) == pytest.approx((e["start_ms"], e["end_ms"]), abs=1e-3)
    # consecutive elements depend on each other
    k = 0
    while k + 1 < len(els):
        a, b = els[k], els[k + 1]
        assert a["kind"] == "task"
        if b["kind"] == "transfer":
            c = els[k + 2]
            assert b["tag"] in a["writes"] and b["tag"] in c["reads"]
            assert (b["src"], b["dst"]) == (a["rank"], c["rank"]) and a["rank"] != c["rank"]
            assert trace["comms"][b["comm"]][:2] == [a["rank"], c["rank"]]
            assert a["end_ms"] <= b["start_ms"] + tol and b["end_ms"] <= c["start_ms"] + tol
            assert b["reduction"] == (c["kernel"] == "add")
            k += 2
        else:
            assert a["rank"] == b["rank"]
            assert set(a["writes"]) & set(b["reads"]) or set(a["writes"]) & set(b["writes"])
            assert a["end_ms"] <= b["start_ms"] + tol
            k += 1
    # the panel chain: every POTRF of the factorization is on it, in order
    potrf = [divmod(e["writes"][0] & ((1 << 40) - 1), nt) for e in tasks
             if e["kernel"] == "potrf"]
    assert potrf[-1] == (nt - 1, nt - 1) and potrf == sorted(potrf)
    split = path["split_ms"]
    assert sum(split.values()) == pytest.approx(span)
    assert path["length_ms"] == pytest.approx(span - split["waiting"])
    assert 0 < path["length_ms"] <= span
    assert split["reductions"] > 0    # 2.5D: partial sums are added on the path
    assert sum(v["tasks"] for v in path["kernels"].values()) == len(tasks)
    # the run document has its summary; the report draws and tables it
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["trace"]["critical_path"]["length_ms"] == pytest.approx(path["length_ms"])
    out = tmp_path / "out"
    assert main(["report", str(trace_dir), "-o", str(out)]) == 0, capsys.readouterr().err
    md = (out / "report.md").read_text()
    assert "**Critical path**" in md and f"of the makespan {span:.2f} ms" in md
    assert f"potrf({nt - 1},{nt - 1})@{els[-1]['rank']}." in md
    assert "critical path" in md.split("_gantt.png")[1][:600]
