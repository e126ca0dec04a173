"""PNG figures of simulations (``starchol simulate --gantt``, ``starchol report
--simulate``), matplotlib through :mod:`.report_figures`'s helpers, written atomically."""
import numpy as np

from ..model.counts import KERNELS
from .report_figures import FAMILY_STYLE, family_of, pyplot, save_png

#: colour of each kernel in Gantt charts
KERNEL_COLOURS = {"potrf": "tab:red", "trsm": "tab:orange", "syrk": "tab:green",
                  "gemm": "tab:blue", "add": "tab:purple"}
#: a Gantt chart shows at most this many nodes' workers
GANTT_MAX_ROWS = 96


def gantt_png(result, path, title):
    """One row per worker (node by node, the first nodes when there are many), one bar
    per task coloured by kernel; time in seconds. Returns ``path``."""
    plt = pyplot()
    workers = int(result.worker.max()) + 1 if result.tasks else 1
    nodes = int(result.node.max()) + 1 if result.tasks else 1
    shown = max(1, min(nodes, GANTT_MAX_ROWS // workers))
    fig, ax = plt.subplots(figsize=(11, 1.5 + 0.18 * shown * workers))
    row = result.node * workers + result.worker
    keep = result.node < shown
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    handles = []
    for k, name in enumerate(KERNELS):
        sel = keep & (result.kernel == k)
        if not sel.any():
            continue
        # one collection of rectangles per kernel: one bar artist per task (barh) took
        # 28 s to draw at NT = 60 (37,820 tasks)
        x0, x1, y = result.start[sel], result.end[sel], row[sel].astype(float)
        verts = np.stack([np.stack([x0, y - 0.4], 1), np.stack([x1, y - 0.4], 1),
                          np.stack([x1, y + 0.4], 1), np.stack([x0, y + 0.4], 1)], 1)
        ax.add_collection(PolyCollection(verts, facecolors=KERNEL_COLOURS[name],
                                         linewidths=0))
        handles.append(Patch(color=KERNEL_COLOURS[name], label=name))
    ax.set_ylim(shown * workers - 0.5, -0.5)
    ax.set_xlim(0, result.makespan_s)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("node.worker")
    if shown * workers <= 40:
        ax.set_yticks(range(shown * workers))
        ax.set_yticklabels([f"{r // workers}.{r % workers}" for r in range(shown * workers)],
                           fontsize=7)
    more = f" (first {shown} of {nodes} nodes)" if shown < nodes else ""
    ax.set_title(f"{title}: makespan {result.makespan_s:.4g} s{more}", fontsize=10)
    ax.legend(handles=handles, loc="upper right", fontsize=8, ncol=len(KERNELS))
    fig.tight_layout()
    return save_png(fig, path)


def sweep_png(rows, path, title):
    """Time and GFlop/s against nodes, one line per map family (``rows``: dicts with
    ``map``, ``family``, ``nodes``, ``makespan_s``, ``gflops``). Returns ``path``."""
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for fam in sorted({r["family"] for r in rows}):
        pts = sorted((r["nodes"], r["makespan_s"], r["gflops"]) for r in rows
                     if r["family"] == fam)
        colour, marker = FAMILY_STYLE.get(family_of(fam), ("black", "x"))
        # slice counts of one family: solid for c = 2, dashed for c = 3, dotted beyond
        dash = {"c=3": "--"}.get(fam.split(" ")[-1], ":" if " c=" in fam and
                                 not fam.endswith("c=2") else "-")
        p = np.array(pts)
        a.plot(p[:, 0], p[:, 1], marker=marker, color=colour, linestyle=dash, label=fam)
        b.plot(p[:, 0], p[:, 2], marker=marker, color=colour, linestyle=dash, label=fam)
    a.set_xlabel("nodes P")
    a.set_ylabel("simulated time (s)")
    a.set_yscale("log")
    b.set_xlabel("nodes P")
    b.set_ylabel("GFlop/s")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)
