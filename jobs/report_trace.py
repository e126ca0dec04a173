"""The execution-trace part of ``starchol report``: a Gantt chart and its tables.

From ``trace.json`` (written by ``starchol run --trace DIR``, read by
:mod:`starchol.reports.trace`) it draws one row per StarPU worker (idle ones too),
grouped by rank and host, tasks coloured by kernel, the MPI communications as lines from
the sending rank to the receiving one, and the idle time of each worker beside it. Times
are in milliseconds from the first task's start; the time axis spans the tasks, and
what it cuts (transfers that end after the last task, on another rank's clock) is
said (:func:`clipped_text`: a warning from ``starchol report`` and a note in report.md).

The critical path (:mod:`starchol.reports.critical_path`: the chain of tasks and
transfers that ends last) is drawn over the chart and tabled: its length against the
makespan, its time in kernels, transfers, reductions and waiting, its tasks per kernel.
"""
from ..distributions.base import count_text
from ..reports.trace import clipped_text, comm_pairs

#: kernel colours (others get the next colours of matplotlib's tab10)
KERNEL_COLORS = {"potrf": "#d62728", "trsm": "#1f77b4", "syrk": "#2ca02c", "gemm": "#ff7f0e",
                 "add": "#9467bd", "tril": "#8c564b",
                 # 2.5D's first updates of a partial copy (W mode): lighter than the others
                 "gemm0": "#ffbb78", "syrk0": "#98df8a"}


def _colors(kernels):
    import matplotlib

    used = {matplotlib.colors.to_hex(c) for c in KERNEL_COLORS.values()}
    extra = iter([c for c in matplotlib.colormaps["tab10"].colors
                  if matplotlib.colors.to_hex(c) not in used]
                 + list(matplotlib.colormaps["tab20b"].colors))
    out = {}
    for k in sorted(kernels):
        out[k] = KERNEL_COLORS.get(k) or next(extra)
    return out


#: the colour of the critical path on the Gantt chart
PATH_COLOR = "#e00090"


def _draw_path(ax, trace, path, row):
    """Outline the path's tasks and join its elements on the Gantt chart, at the places
    the chart draws them (the trace's own task and transfer times)."""
    points = []
    for el in path["elements"]:
        if el["kind"] == "task" and 0 <= el["task"] < len(trace["tasks"]):
            _, rank, worker, start, end = trace["tasks"][el["task"]]
            r = row.get((rank, worker))
            if r is None:
                continue
            ax.broken_barh([(start, end - start)], (r - 0.45, 0.9), facecolors="none",
                           edgecolor=PATH_COLOR, lw=1.6, zorder=5)
            points += [(start, r), (end, r)]
        elif el["kind"] == "transfer" and 0 <= el["comm"] < len(trace["comms"]):
            src, dst, start, end, _ = trace["comms"][el["comm"]]
            here = points[-1][1] if points else None
            rows_dst = [r for (rk, _), r in row.items() if rk == dst]
            if here is None or not rows_dst:
                continue
            points += [(start, here), (end, min(rows_dst))]
    if points:
        xs, ys = zip(*points)
        ax.plot(xs, ys, color=PATH_COLOR, lw=1.2, zorder=6)


def gantt_figure(trace, path, title, critical=None):
    """Draw the Gantt chart with the idle time per worker beside it, the critical path
    ``critical`` (:func:`critical_path`) marked on it when given; save a PNG."""
    from .report_figures import pyplot, save_png

    plt = pyplot()
    workers = [(w["rank"], w["worker"]) for w in trace["workers"]]
    row = {w: i for i, w in enumerate(workers)}
    hosts = {int(r): h for r, h in trace.get("hosts", {}).items()}
    n = max(1, len(workers))
    height = min(14.0, 2.0 + 0.32 * n)
    fig, (ax, axi) = plt.subplots(1, 2, figsize=(12.5, height), sharey=True,
                                  gridspec_kw={"width_ratios": [5, 1]})
    colors = _colors(trace["kernels"])
    by_row_kernel = {}
    for kernel, rank, worker, start, end in trace["tasks"]:
        by_row_kernel.setdefault((row[(rank, worker)], kernel), []).append((start, end - start))
    for (r, kernel), bars in by_row_kernel.items():
        ax.broken_barh(bars, (r - 0.4, 0.8), facecolors=colors[kernel], edgecolor="none")
    # ranks: a band per rank, its rows together
    first_row = {}
    for i, (rank, _) in enumerate(workers):
        first_row.setdefault(rank, []).append(i)
    for k, (rank, rows) in enumerate(sorted(first_row.items())):
        if k % 2:
            ax.axhspan(min(rows) - 0.5, max(rows) + 0.5, color="0.93", zorder=0)
    centre = {rank: (min(rows) + max(rows)) / 2 for rank, rows in first_row.items()}
    # nodes: a line between hosts, the host's name at its first row
    for i in range(1, n):
        if hosts.get(workers[i][0]) != hosts.get(workers[i - 1][0]):
            ax.axhline(i - 0.5, color="black", lw=1.2)
    for src, dst, start, end, _ in trace["comms"]:
        if src in centre and dst in centre:
            ax.plot([start, end], [centre[src], centre[dst]], color="black", lw=0.6,
                    alpha=0.35, zorder=3)
    if critical and critical["elements"]:
        _draw_path(ax, trace, critical, row)
    labels = [f"{hosts.get(r, '')}: rank {r} w{w}" if hosts.get(r) else f"rank {r} w{w}"
              for r, w in workers]
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels, fontsize=8 if n < 40 else 5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, max(trace["span_ms"], 1e-3))
    ax.set_xlabel("time (ms from the first task)")
    ax.set_title(title, fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[k]) for k in sorted(colors)]
    names = [f"{k} ({trace['kernels'][k]})" for k in sorted(colors)]
    if trace["comms"]:
        handles.append(plt.Line2D([0], [0], color="black", lw=0.8, alpha=0.5))
        names.append(f"MPI transfer ({len(trace['comms'])})")
    if critical and critical["elements"]:
        handles.append(plt.Line2D([0], [0], color=PATH_COLOR, lw=1.6))
        names.append(f"critical path ({len(critical['elements'])})")
    ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, -0.08 * 8 / height),
              ncol=min(6, len(names)), fontsize=8, frameon=False)
    span = max(trace["span_ms"], 1e-9)
    idle = [100.0 * w["idle_ms"] / span for w in trace["workers"]]
    axi.barh(range(n), idle, color="0.55")
    axi.set_xlim(0, 100)
    axi.set_xlabel("idle (% of span)")
    for i, v in enumerate(idle):
        if n <= 40:
            axi.text(min(v + 2, 70), i, f"{v:.0f}%", va="center", fontsize=7)
    fig.tight_layout()
    return save_png(fig, path)


def critical_path_markdown(path, nt=None):
    """Markdown lines of a critical path: its length against the makespan, its time split,
    its tasks per kernel, and the chain (tiles (i, j) when the tile count ``nt`` is
    known)."""
    from .report_markdown import table

    span = path["makespan_ms"]
    if not path["elements"]:
        return ["No critical path: the trace has no tasks.", ""]
    pct = (lambda v: f"{100 * v / span:.0f}%") if span > 0 else (lambda v: "-")
    split = path["split_ms"]
    lines = [f"**Critical path** (the chain of dependent tasks and transfers that ends "
             f"last): {len(path['elements'])} elements, {path['transfers']} of them "
             f"transfers; length {path['length_ms']:.2f} ms (kernels, transfers and "
             f"reductions on it) of the makespan {span:.2f} ms ({pct(path['length_ms'])}); "
             f"the rest is waiting (ready, not yet started). Reductions are 2.5D's ADD "
             f"tasks and the transfers of the partial sums they add.", ""]
    lines.append(table(["on the path", "time (ms)", "of the makespan"],
                       [[k, f"{split[k]:.2f}", pct(split[k])]
                        for k in ("kernels", "transfers", "reductions", "waiting")]))
    lines.append("")
    lines.append(table(["kernel on the path", "tasks", "time (ms)"],
                       [[k, v["tasks"], f"{v['ms']:.2f}"] for k, v in path["kernels"].items()]))
    lines.append("")
    steps = [_step_text(el, nt) for el in path["elements"]]
    if len(steps) > 40:
        steps = steps[:20] + [f"... {len(steps) - 40} more ..."] + steps[-20:]
    lines += ["The chain, first to last: " + " -> ".join(steps) + ".", ""]
    if path.get("unmatched_reads"):
        lines += [f"Note: {path['unmatched_reads']} remote tile read(s) had no transfer "
                  f"in the trace; the path stops at such a read.", ""]
    return lines


def _tile_text(tag, nt):
    if nt is None or tag is None:
        return ""
    i, j = divmod(int(tag) & ((1 << 40) - 1), nt)
    return f"({i},{j})" + ("" if int(tag) >> 40 == 1 else "'")


def _step_text(el, nt):
    if el["kind"] == "task":
        tile = _tile_text(el["writes"][0], nt) if el.get("writes") else ""
        return f"{el['kernel']}{tile}@{el['rank']}"
    what = "partial" if el.get("reduction") else "tile"
    return f"[{what}{_tile_text(el.get('tag'), nt)} {el['src']}>{el['dst']} " \
           f"{el['end_ms'] - el['start_ms']:.2f} ms]"


def trace_markdown(trace, folder, critical=None, nt=None):
    """Markdown lines: tasks per kernel, idle time per worker, communications, and the
    critical path when given (``nt``: tiles per side, to name the tiles)."""
    from ..units import bytes_text
    from .report_markdown import table

    lines = [f"Execution trace from `{folder}` (StarPU FxT, converted by starpu_fxt_tool): "
             f"{len(trace['tasks'])} tasks on {len(trace['workers'])} worker(s) of "
             f"{trace.get('ranks', '?')} rank(s) in {trace['span_ms']:.1f} ms.", ""]
    cut = clipped_text(trace)
    if cut:
        lines += [f"**Note: {cut}.**", ""]
    lines.append(table(["kernel", "tasks"], [[k, v] for k, v in sorted(trace["kernels"].items())]))
    lines.append("")
    span = max(trace["span_ms"], 1e-9)
    rows = [[w["rank"], w.get("host", ""), w["worker"], f"{w['busy_ms']:.1f}",
             f"{w['idle_ms']:.1f}", f"{100 * w['idle_ms'] / span:.0f}%"]
            for w in trace["workers"]]
    lines.append(table(["rank", "host", "worker", "busy (ms)", "idle (ms)", "idle"], rows))
    lines.append("")
    if trace["comms"]:
        rows = [[s, d, c, bytes_text(b)] for (s, d), (c, b) in comm_pairs(trace).items()]
        lines.append(f"MPI communications: {count_text(len(trace['comms']), 'transfer')}, "
                     f"{bytes_text(trace.get('comm_bytes', 0))} in all. A transfer starts on the "
                     f"sender's clock and ends on the receiver's; StarPU aligns the ranks' "
                     f"clocks at one barrier, so on oversubscribed cores the lines in the "
                     f"chart can be off by milliseconds.")
        lines.append("")
        lines.append(table(["from rank", "to rank", "transfers", "bytes"], rows))
        lines.append("")
    else:
        lines += ["No MPI communications in the trace.", ""]
    if trace.get("clock_offsets_ms") and any(trace["clock_offsets_ms"]):
        offs = ", ".join(f"rank {r}: {o:+.3f} ms" for r, o in
                         enumerate(trace["clock_offsets_ms"]))
        lines += [f"Clocks: each rank's times were corrected by the offset estimated from "
                  f"the quickest transfer each way between ranks ({offs}).", ""]
    if critical is not None:
        lines += critical_path_markdown(critical, nt)
    return lines
