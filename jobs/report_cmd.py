"""``starchol report``: Markdown + PNG views of run documents, or of the volume model.

Two forms:

- ``starchol report RUN.json [RUN2.json ...] -o DIR``: per run, the measured node-pair
  byte matrix as a heat map beside the predicted one, and bytes sent/received per node;
  for several runs, GFlop/s and bytes by map.
- ``starchol report --model --nodes-range A..B (--n N --nb NB | --nt NT) -o DIR``: predicted
  bytes against node count for 2dbc, sbc, sbc-basic, 2dbc25d and sbc25d with the leading
  terms, the gain figure, ``model.json`` with every number.

Both write ``DIR/report.md`` listing every figure (relative links, captions, tables).
Every file is written atomically (temporary file in DIR, then rename).
"""
import os
import re
import shlex
import sys

from ..distributions.base import count_text
from ..errors import UsageError
from .options import sizes_from_args
from ..files import OutputFolder, write_atomic
from .output import command_inputs, dumps
from .progress import Progress
from ..units import format_bytes
from .report_args import register as register_parser

RANGE_RE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*$")


def register(sub):
    """Add ``starchol report``'s parser (:mod:`.report_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


def parse_range(text):
    """'3..60' -> (3, 60)."""
    if text is None:
        raise UsageError("--model needs --nodes-range A..B (e.g. 3..60)")
    m = RANGE_RE.match(str(text))
    if not m:
        raise UsageError(f"--nodes-range must look like A..B with integers A <= B "
                         f"(e.g. 3..60), got {text!r}")
    first, last = int(m.group(1)), int(m.group(2))
    if first > last:
        raise UsageError(f"--nodes-range {text} is empty ({first} > {last}); give A <= B, "
                         f"e.g. {last}..{first}")
    if first < 2:
        raise UsageError(f"--nodes-range starts at {first}: one node sends nothing; start at "
                         f"2 or more (e.g. {max(first, 2)}..{max(last, 3)})")
    return first, last


def parse_slices(text):
    """'best' -> 'best'; '2,3' -> [2, 3]."""
    if str(text).strip().lower() == "best":
        return "best"
    try:
        values = sorted({int(v) for v in str(text).split(",") if v.strip()})
    except ValueError:
        values = []
    if not values or min(values) < 2:
        raise UsageError(f"--slices must be 'best' or a list of slice counts >= 2 such as "
                         f"2,3; got {text!r}")
    return values


def _write_text(path, text):
    """Write a text file atomically, readable like any file the user makes."""
    write_atomic(path, text)


def command_line(argv=None):
    """The command as typed, for the report's provenance line."""
    argv = sys.argv[1:] if argv is None else argv
    return "starchol " + " ".join(shlex.quote(a) for a in argv)


def run(args):
    if args.simulate:
        if args.runs or args.model:
            raise UsageError("--simulate makes its own report: no run files, no --model")
        return run_simulate(args)
    if args.node or args.bandwidth:
        raise UsageError("--node and --bandwidth apply to --simulate")
    if args.model:
        if args.runs:
            raise UsageError("give run JSON files or --model, not both")
        return run_model(args)
    if not args.runs:
        raise UsageError("give one or more run JSON files (from `starchol run --json FILE`), "
                         "or --model --nodes-range A..B --n N --nb NB")
    for flag, value in (("--nodes-range", args.nodes_range), ("--nt", args.nt),
                        ("--n", args.n), ("--nb", args.nb)):
        if value is not None:
            raise UsageError(f"{flag} applies to --model reports only")
    return run_runs(args)


# -- model report --------------------------------------------------------------------------
def run_model(args):
    from . import report_figures as figs
    from .report_markdown import model_figure_captions, model_markdown, sbc_statement
    from ..reports.model import gains, model_document

    first, last = parse_range(args.nodes_range)
    nt, n, nb = sizes_from_args(args)
    slices = parse_slices(args.slices)
    check_model_memory(first, last)
    with OutputFolder(args.output, overwrite=args.overwrite,
                      inputs=command_inputs(args)) as out:
        progress = Progress("model report", unit="node counts",
                            enabled=not args.quiet)
        doc = model_document(first, last, n, nb, slices=slices, cache=args.cache == "on",
                             progress=progress, dtype=args.dtype)
        doc["command"] = command_line()
        _write_text(out.path("model.json"), dumps(doc) + "\n")
        vol_caption, gain_caption = model_figure_captions(doc)
        figures = [("model_volume.png", vol_caption)]
        figs.model_volume_figure(doc, out.path("model_volume.png"))
        g = gains(doc)
        if any(g.values()):
            figs.model_gain_figure(doc, g, out.path("model_gain.png"))
            figures.append(("model_gain.png", gain_caption))
        text = model_markdown(doc, figures, doc["command"], "model.json")
        _write_text(out.path("report.md"), text)
    folder = args.output
    print(f"wrote {os.path.join(folder, 'report.md')}, model.json and "
          f"{', '.join(name for name, _ in figures)} in {folder}")
    print(sbc_statement(doc).replace("**", ""))
    return 0


def run_simulate(args):
    """``report --simulate``: every map of :func:`~starchol.linalg.simulate.sweep_maps`
    on each node count, simulated; simulate.json, simulate.md, simulate.png."""
    from ..model.platform import Platform, load_node, parse_bandwidth
    from ..linalg.simulate import simulate_cholesky, sweep_maps
    from .simulate_figures import sweep_png

    first, last = parse_range(args.nodes_range)
    nt, n, nb = sizes_from_args(args)
    if not args.node:
        raise UsageError("--simulate needs --node FILE (a node description)")
    node = load_node(args.node, "--node")
    node.kernel_gflops(args.dtype, nb)
    bw = parse_bandwidth(args.bandwidth, "--bandwidth") if args.bandwidth else node.bandwidth
    if bw is None:
        raise UsageError("--simulate needs --bandwidth (the node description has none)")
    slices = [2, 3] if parse_slices(args.slices) == "best" else parse_slices(args.slices)
    from .preflight import check_model_memory as check_nodes, check_simulation_size

    check_nodes(last, f"--nodes-range {first}..{last}")
    check_sweep_size(first, last, nt)
    cases = []
    for p in range(first, last + 1):
        for label, m in sweep_maps(p, nt, slices):
            check_simulation_size(m, nt, node.workers, f"report --simulate ({m})")
            cases.append((p, label, m))
    from .simulate_cmd import runtime_from_args

    runtime = runtime_from_args(args)
    rows = []
    with OutputFolder(args.output, overwrite=args.overwrite,
                      inputs=command_inputs(args)) as out:
        progress = Progress("simulating", unit="maps", enabled=not args.quiet)
        for k, (p, label, m) in enumerate(cases):
            plat = Platform(node=node, nodes=p, bandwidth=bw, latency=node.latency or 0.0)
            r = simulate_cholesky(m, n, nb, plat, dtype=args.dtype,
                                  cache=args.cache == "on", runtime=runtime)
            rows.append({"nodes": p, "family": label, "map": str(m),
                         "makespan_s": r.makespan_s, "gflops": r.gflops, "bytes": r.bytes,
                         "busy_max": float(r.busy.max()),
                         "critical_path_s": r.critical_path_s})
            progress(k + 1, len(cases))
        doc = {"command": command_line(), "n": n, "nb": nb, "dtype": args.dtype,
               "node": node.to_dict(), "bandwidth_bytes_per_s": bw, "rows": rows}
        _write_text(out.path("simulate.json"), dumps(doc) + "\n")
        title = f"simulated, N = {n}, NB = {nb}, {node.name}, {bw * 8 / 1e9:g} Gbit/s links"
        sweep_png(rows, out.path("simulate.png"), title)
        lines = [f"# {title}", "", f"`{doc['command']}`", "", "![](simulate.png)", "",
                 "| P | map | time (s) | GFlop/s | bytes | busy max |",
                 "|---|---|---|---|---|---|"]
        lines += [f"| {r['nodes']} | {r['map']} | {r['makespan_s']:.4g} | "
                  f"{r['gflops']:.1f} | {format_bytes(r['bytes'])} | {r['busy_max']:.2f} |"
                  for r in rows]
        _write_text(out.path("simulate.md"), "\n".join(lines) + "\n")
    print(f"wrote simulate.md, simulate.json and simulate.png in {args.output}")
    return 0


#: ``report --simulate`` simulates at most this many node counts (each up to 9 maps)
MAX_SWEEP_NODE_COUNTS = 1000


def check_sweep_size(first, last, nt):
    """Refuse a simulated sweep of more than :data:`MAX_SWEEP_NODE_COUNTS` node counts
    before any work (each is up to 9 simulations: ``2..1000000`` ran for minutes)."""
    count = last - first + 1
    if count > MAX_SWEEP_NODE_COUNTS:
        raise UsageError(f"--nodes-range {first}..{last}: {count} node counts, each up to 9 "
                         f"simulations; the limit is {MAX_SWEEP_NODE_COUNTS} node counts: "
                         f"give a shorter range, e.g. {first}..{first + 59}")


def check_model_memory(first, last):
    """Refuse a node range whose largest count cannot fit in memory
    (:func:`starchol.jobs.preflight.check_model_memory`), before any work."""
    from .preflight import check_model_memory as check

    check(last, f"--nodes-range {first}..{last}")


# -- run report ----------------------------------------------------------------------------
def run_runs(args):
    from ..reports.runs import load_run

    from ..reports.trace import load_trace

    # a trace folder of `starchol run --trace DIR` holds its run document, DIR/run.json
    paths = [os.path.join(p, "run.json") if os.path.isdir(p) and
             os.path.isfile(os.path.join(p, "run.json")) else p for p in args.runs]
    runs = [load_run(path) for path in paths]
    traces = [_trace_folder(run) for run in runs]
    loaded = [load_trace(t) if t else None for t in traces]
    with OutputFolder(args.output, overwrite=args.overwrite,
                      inputs=command_inputs(args)) as folder:
        count = _write_run_report(runs, traces, loaded, folder)
    print(f"wrote {os.path.join(args.output, 'report.md')} and {count_text(count, 'figure')} "
          f"for {count_text(len(runs), 'run')}")
    return 0


def file_stem(path, index):
    """A safe, unique stem for the figures of run number ``index`` (1-based)."""
    base = os.path.splitext(os.path.basename(str(path)))[0]
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in base)[:40]
    return f"run{index}-{safe}" if safe else f"run{index}"


def _write_run_report(runs, traces, loaded, folder):
    """Figures and report.md of the run report in ``folder`` (an :class:`OutputFolder`);
    returns the number of figures."""
    from . import report_figures as figs
    from .report_markdown import run_markdown
    from ..reports.settle import settle_bytes
    from ..reports.trace import clipped_text, critical_path
    from .report_trace import gantt_figure, trace_markdown

    sections = []
    for k, run in enumerate(runs, start=1):
        stem = file_stem(run["path"], k)
        out = []
        notes = settle_bytes(run)
        for what, part in (("", run), ("the solve's ", run.get("solve") or {})):
            if part.get("match_conflict"):
                print(f"starchol report: warning: {run['path']}: the document says "
                      f"{what}match {str(part['match_stored']).lower()}, but its measured "
                      f"and predicted byte matrices "
                      f"{'are equal' if part['match'] else 'differ'}; the report shows what "
                      f"the matrices say", file=sys.stderr)
        if run["bytes_measured_pairs"] is not None or run["bytes_predicted_pairs"] is not None:
            name = f"{stem}_pairs.png"
            figs.pairs_figure(run, folder.path(name))
            out.append((name, _pairs_caption(run) + " White cells: no bytes."))
            name = f"{stem}_per_node.png"
            figs.per_node_figure(run, folder.path(name))
            out.append((name, f"Bytes sent (left) and received (right) by each node, "
                              f"measured by StarPU-MPI beside the exact model: {run['label']}."))
        solve = run.get("solve")
        if solve is not None and (solve["bytes_measured_pairs"] is not None
                                  or solve["bytes_predicted_pairs"] is not None):
            name = f"{stem}_solve_pairs.png"
            view = {**solve, "label": f"{run['label']}, solve of "
                                      f"{count_text(solve['nrhs'], 'right-hand side')}"}
            figs.pairs_figure(view, folder.path(name))
            out.append((name, _pairs_caption(view).replace(
                "Bytes sent", "The solve: bytes sent", 1) + " White cells: no bytes."))
        if loaded[k - 1] is not None:
            name = f"{stem}_gantt.png"
            path = critical_path(loaded[k - 1], traces[k - 1])
            gantt_figure(loaded[k - 1], folder.path(name), run["label"], path)
            cut = clipped_text(loaded[k - 1])
            if cut:
                print(f"starchol report: warning: {traces[k - 1]}: {cut}", file=sys.stderr)
            out.append((name, "Execution trace: one row per StarPU CPU worker, grouped by "
                              "rank (host), tasks coloured by kernel; grey lines are MPI "
                              "transfers from the sending rank to the receiving one; right: "
                              f"idle time of each worker"
                              + ("; outlined in magenta and joined: the critical path"
                                 if path and path["elements"] else "")
                              + f". {run['label']}."))
            run["report_extra"] = trace_markdown(loaded[k - 1], traces[k - 1], path,
                                                 run.get("nt"))
        run["report_notes"] = notes
        sections.append(out)
    comparison = []  # drawn when at least two runs have the numbers
    if len(runs) > 1:
        if sum(r.get("gflops") is not None for r in runs) >= 2:
            figs.runs_gflops_figure(runs, folder.path("runs_gflops.png"))
            comparison.append(("runs_gflops.png", "GFlop/s of each run (N^3/3 flops divided "
                                                  "by the factorization time), by map."))
        if sum(r.get("bytes_measured_total") is not None
               or r.get("bytes_predicted_total") is not None for r in runs) >= 2:
            figs.runs_bytes_figure(runs, folder.path("runs_bytes.png"))
            comparison.append(("runs_bytes.png", "Total bytes sent between nodes in each run, "
                                                 "measured beside predicted, by map."))
    text = run_markdown(runs, sections, comparison, command_line())
    _write_text(folder.path("report.md"), text)
    return sum(len(sec) for sec in sections) + len(comparison)


def _trace_folder(run):
    """The trace folder of a run document (its ``trace.dir``, else the document's own
    folder when the trace summary is there), or None for a run without --trace."""
    trace = run.get("trace")
    if not isinstance(trace, dict):
        return None
    for candidate in (trace.get("dir"), os.path.dirname(os.path.abspath(run["path"]))):
        if candidate and os.path.isfile(os.path.join(candidate, "trace.json")):
            return candidate
    raise UsageError(f"{run['path']}: its trace folder {trace.get('dir')} has no trace.json "
                     f"(moved or deleted?)")


def _pairs_caption(run):
    parts = ["Bytes sent from each node (row) to each node (column)"]
    if run["bytes_measured_pairs"] is not None and run["bytes_predicted_pairs"] is not None:
        parts.append(": measured by StarPU-MPI (left), predicted by the exact model (middle"
                     + (", computed by this report" if run.get("predicted_by_report") else "")
                     + "), and their difference (right)")
        if run.get("match") is True:
            parts.append("; they are equal byte for byte")
        elif run.get("match") is False:
            parts.append("; they DIFFER")
    parts.append(f". {run['label']}.")
    return "".join(parts)
