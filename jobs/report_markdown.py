"""The text of ``report.md``: figures with captions and tables of the numbers behind them.

``figures`` arguments are lists of (file name relative to report.md, caption).
"""
import numpy as np

from ..units import format_bytes
from ..reports.runs import map_label


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(head, rows):
    """A Markdown table."""
    lines = ["| " + " | ".join(_cell(h) for h in head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def figure_block(figures, first_number=1):
    """Markdown images with numbered captions."""
    out = []
    for k, (name, caption) in enumerate(figures, start=first_number):
        out += [f"![Figure {k}]({name})", "", f"*Figure {k}. {caption}*", ""]
    return out


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


# -- model report --------------------------------------------------------------------------
def _point_params(name, pt):
    parts = []
    if "slices" in pt and pt.get("slices", 1) > 1 and name.endswith("(best c)"):
        parts.append(f"c={pt['slices']}")
    if pt.get("grid"):
        parts.append(pt["grid"])
    if pt.get("r"):
        parts.append(f"r={pt['r']}")
    return ", ".join(parts)


def sbc_statement(doc):
    """One sentence: where sbc is below 2dbc (most square grid) at equal node count."""
    rows = doc["sbc_vs_2dbc"]
    lo, hi = doc["nodes_range"]
    if not rows:
        return (f"No sbc node count (P = r(r-1)/2: 3, 6, 10, 15, 21, ...) lies in {lo}..{hi}, "
                f"so sbc and 2dbc are not compared here.")
    below = [r["nodes"] for r in rows if r["sbc_below"]]
    above = [r["nodes"] for r in rows if not r["sbc_below"]]
    gains = [r["ratio_2dbc_over_sbc"] for r in rows]
    if not above:
        text = (f"**sbc is below 2dbc at every node count where both exist** "
                f"(P = {', '.join(map(str, below))}): 2dbc moves {min(gains):.3f} to "
                f"{max(gains):.3f} times the bytes of sbc.")
    else:
        text = (f"sbc is below 2dbc at P = {', '.join(map(str, below)) or 'none'}, and **not** "
                f"at P = {', '.join(map(str, above))}.")
    return text


def model_markdown(doc, figures, command, json_name):
    """report.md of ``starchol report --model``."""
    lo, hi = doc["nodes_range"]
    cache = "on" if doc["cache"] else "off"
    lines = [
        f"# Predicted communication volume, {lo} to {hi} nodes",
        "",
        f"Exact model of the right-looking tiled Cholesky (owner computes, StarPU-MPI receive "
        f"cache {cache}) for N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']}, "
        f"{doc.get('dtype', 'float64')}: "
        f"S = {doc['stored_tiles']} stored tiles ({format_bytes(doc['stored_bytes'])}). "
        f"Bytes are decimal (1 GB = 10^9 B). Made by `{command}`; the numbers are in "
        f"[{json_name}]({json_name}).",
        "",
        "## Where sbc is below 2dbc",
        "",
        sbc_statement(doc),
        "",
        "## Figures",
        "",
    ]
    lines += figure_block(figures)
    lines += ["## Numbers", "",
              "Exact predicted bytes per map and node count (map parameters in brackets); "
              "`-` where the map does not exist at that node count. The 2.5D maps keep c "
              "copies of the matrix (c times the memory per node).", ""]
    names = [n for n, pts in doc["series"].items()]
    by_name = {n: {pt["nodes"]: pt for pt in pts} for n, pts in doc["series"].items()}
    versus = {r["nodes"]: r for r in doc["sbc_vs_2dbc"]}
    rows = []
    for p in range(lo, hi + 1):
        row = [p]
        for name in names:
            pt = by_name[name].get(p)
            if pt is None:
                row.append("-")
                continue
            params = _point_params(name, pt)
            mark = " (1D)" if pt.get("degenerate") else ""
            row.append(f"{format_bytes(pt['bytes'])} ({params}){mark}" if params
                       else format_bytes(pt["bytes"]))
        v = versus.get(p)
        row.append("-" if v is None else f"{v['ratio_2dbc_over_sbc']:.3f}")
        rows.append(row)
    lines.append(table(["P"] + names + ["2dbc / sbc"], rows))
    lines += ["", "Transfers per stored tile (D/S) and the leading factor F (D ~ S F):", ""]
    rows = []
    for name in names:
        for pt in doc["series"][name]:
            rows.append([name, pt["nodes"], _point_params(name, pt) or "-",
                         pt["transfers_tiles"], f"{pt['ratio']:.3f}",
                         _num(pt["leading_factor"], ".3g")])
    lines.append(table(["map", "P", "parameters", "transfers (tiles)", "D/S", "F"], rows))
    lines.append("")
    return "\n".join(lines)


# -- run report ----------------------------------------------------------------------------
def _bytes_or_dash(value):
    return "-" if value is None else format_bytes(value)


def _match_cell(run):
    """'yes', '**NO**', or '-'; a stored ``match`` that the matrices contradict is named."""
    match = run.get("match")
    text = "-" if match is None else ("yes" if match else "**NO**")
    if run.get("match_conflict"):
        text += f" (document says {'yes' if run['match_stored'] else 'no'})"
    return text


def _kernel_blas_short(run):
    """'OpenBLAS 0.3.21 (system)' from the run's ``kernel_blas`` (files left out), or
    '-' for documents from before it was recorded."""
    from ..runtime.kernel_blas import short

    text = run.get("kernel_blas") or run.get("runtime", {}).get("kernel_blas") or ""
    return short(text) or "-"


def _starpu_cell(run):
    """'1.3.10 (system package)' from the run's ``starpu_build``; the bare version for
    documents from before it was recorded; '-' without either."""
    rt = run.get("runtime", {})
    text = run.get("starpu_build") or rt.get("starpu_build") or ""
    if text:
        return "; ".join(t[len("StarPU "):] if t.startswith("StarPU ") else t
                         for t in text.split("; "))
    return rt.get("starpu_version", "-")


def run_markdown(runs, sections, comparison, command):
    """report.md of ``starchol report RUN.json ...``.

    ``sections`` is one list of (figure, caption) per run, ``comparison`` the figures that
    compare runs, ``notes`` per run are in ``run["report_notes"]``.
    """
    lines = [f"# Run report: {len(runs)} run{'s' if len(runs) > 1 else ''}", "",
             f"Made by `{command}` from the run documents below (`starchol run --json`). "
             f"Bytes are decimal (1 MB = 10^6 B); predicted bytes come from the exact model "
             f"of the same map, N and NB.", "", "## Runs", ""]
    rows = []
    for k, run in enumerate(runs, start=1):
        rt = run["runtime"]
        rows.append([
            k, run["path"], map_label(run),
            run["nodes"], run["n"], run["nb"], run["nt"],
            _num(run.get("time_s"), ".3f"), _num(run.get("gflops"), ".2f"),
            _num(run.get("residual"), ".2e"),
            _bytes_or_dash(run.get("bytes_measured_total")),
            _bytes_or_dash(run.get("bytes_predicted_total")),
            _match_cell(run),
            rt.get("scheduler", "-"), rt.get("workers_per_rank", "-"),
            _starpu_cell(run), _kernel_blas_short(run),
        ])
    lines.append(table(["#", "file", "map", "nodes", "N", "NB", "NT", "time (s)", "GFlop/s",
                        "residual", "bytes measured", "bytes predicted", "match", "scheduler",
                        "workers/rank", "StarPU", "kernels' BLAS"], rows))
    lines.append("")
    mismatched = [k for k, r in enumerate(runs, start=1) if r.get("match") is False]
    if mismatched:
        lines += [f"**Measured bytes differ from the model in run(s) "
                  f"{', '.join(map(str, mismatched))}.**", ""]
    lines += solves_section(runs)
    lines += mixed_section(runs)
    conflicts = [k for k, r in enumerate(runs, start=1) if r.get("match_conflict")]
    if conflicts:
        lines += [f"**The stored `match` of run(s) {', '.join(map(str, conflicts))} "
                  f"disagrees with the run's own byte matrices; the match column shows what "
                  f"the matrices say.**", ""]
    number = 1
    for k, (run, figs) in enumerate(zip(runs, sections), start=1):
        lines += [f"## Run {k}: {run['label']}", ""]
        for note in run.get("report_notes", []):
            lines += [f"- {note}"]
        if run.get("report_notes"):
            lines.append("")
        lines += figure_block(figs, number)
        number += len(figs)
        lines += _per_node_table(run)
        lines += run.get("report_extra", [])
    lines += time_bytes_section(runs)
    if comparison:
        lines += ["## Comparison of the runs", ""]
        lines += figure_block(comparison, number)
    return "\n".join(lines)


def solves_section(runs):
    """'Solves': one row per run that solved A X = B after its factorization (the run
    document's ``solve``), its bytes beside the exact model of the solve; nothing when
    no run did."""
    rows = []
    for k, run in enumerate(runs, start=1):
        solve = run.get("solve")
        if solve is None:
            continue
        variant = (solve.get("solve_variant") or {}).get("variant", "factor")
        rows.append([k, map_label(run), run["n"], run["nb"], solve["nrhs"], variant,
                     _num(solve.get("time_s"), ".3f"), "-" if solve.get("tasks") is None else solve["tasks"],
                     _num(solve.get("residual"), ".2e"),
                     _bytes_or_dash(solve.get("bytes_measured_total")),
                     _bytes_or_dash(solve.get("bytes_predicted_total")),
                     _match_cell(solve)])
    if not rows:
        return []
    lines = ["## Solves", "",
             "The triangular solves of A X = B after the factorization (`starchol run "
             "--rhs/--nrhs`), in the variant that ran (`rhs`: L in place, blocks of B and "
             "partial sums move; `factor`: L's tiles move; `Factor.solve` takes the one "
             "with fewer bytes on the busiest link, the run document's `solve_variant` "
             "says why; `factor` for documents without it); predicted bytes from that "
             "variant's exact model, residual ||B - A X||_F / (||A||_F ||X||_F + "
             "||B||_F) with `--check`.", "",
             table(["run", "map", "N", "NB", "K", "variant", "time (s)", "tasks", "residual",
                    "bytes measured", "bytes predicted", "match"], rows), ""]
    mismatched = [row[0] for row in rows if runs[row[0] - 1]["solve"].get("match") is False]
    if mismatched:
        lines += [f"**Measured bytes of the solve differ from the model in run(s) "
                  f"{', '.join(map(str, mismatched))}.**", ""]
    return lines


def mixed_section(runs):
    """'Mixed precision': one row per mixed-precision run (``starchol run --dtype
    mixed``, the document's ``mixed``): iterations, fallback and why, backward error
    against its bound, the time split, and the bytes of each graph measured against
    the model; nothing when no run is one."""
    rows, reasons = [], []
    for k, run in enumerate(runs, start=1):
        mixed = run.get("mixed")
        if mixed is None:
            continue
        t = mixed.get("time_s") or {}
        meas = mixed.get("bytes_measured_phase_pairs") or {}
        pred = mixed.get("bytes_predicted_phase_pairs") or {}
        graphs = ", ".join(
            f"{kind} {_bytes_or_dash(int(sum(map(sum, meas[kind]))))}"
            + ("" if meas[kind] == pred.get(kind) else " (**differs from the model**)")
            for kind in meas if sum(map(sum, meas[kind])) or sum(map(sum, pred.get(kind, []))))
        rows.append([k, map_label(run), run["n"], run["nb"], run.get("nrhs", "-"),
                     mixed["iterations"], mixed.get("fallback") or "no",
                     _num(mixed.get("backward_error"), ".2e"),
                     _num(mixed.get("tolerance"), ".2e"),
                     _num(t.get("factor"), ".3f"), _num(t.get("refinement"), ".3f"),
                     _num(t.get("fallback"), ".3f"), graphs or "-"])
        if mixed.get("fallback"):
            reasons.append(f"- run {k}: {mixed.get('fallback_reason')}")
    if not rows:
        return []
    return ["## Mixed precision", "",
            "Runs of `starchol run --dtype mixed` (`solve_mixed`): a float32 factorization, "
            "iterative refinement in float64 to the backward error bound sqrt(N) 2^-53 "
            "(LAPACK's), and the float64 fallback when that fails. Times in seconds (the "
            "slowest rank): the float32 copy + factorization, the refinement, the fallback. "
            "Bytes of each graph measured by StarPU-MPI, each equal to its model per pair "
            "unless said (`starchol.model.mixed_volume`).", "",
            table(["run", "map", "N", "NB", "K", "iterations", "fallback",
                   "backward error", "bound", "factor (s)", "refinement (s)",
                   "fallback (s)", "bytes per graph"], rows), "", *reasons,
            *([""] if reasons else [])]


def time_bytes_section(runs):
    """'Time against bytes': runs of the same nodes, N and NB side by side, each one's time
    and busiest-link bytes relative to the run with the fewest such bytes (none when no
    group holds two runs with a time and a pair matrix)."""
    from ..model.link_load import busiest_link

    groups = {}
    for k, run in enumerate(runs, start=1):
        pairs = run["bytes_measured_pairs"]
        which = "measured"
        if pairs is None:
            pairs, which = run["bytes_predicted_pairs"], "predicted"
        if run.get("time_s") is None or pairs is None:
            continue
        groups.setdefault((run["nodes"], run["n"], run["nb"]), []).append(
            (k, run, busiest_link(pairs), which))
    groups = {key: items for key, items in groups.items() if len(items) > 1}
    if not groups:
        return []
    lines = ["## Time against bytes", "",
             "Runs of the same node count, N and NB. The busiest link is the largest, over "
             "nodes, of max(bytes sent, bytes received): with full-duplex links of equal "
             "bandwidth a communication-bound run cannot end sooner than that link needs, "
             "so where communication dominates the time ratio approaches the byte ratio. "
             "Both ratios are relative to the map with the fewest busiest-link bytes (its median "
             "time when it ran several times).", ""]
    rows = []
    for (nodes, n, nb), items in groups.items():
        ref = min(items, key=lambda item: item[2]["bytes"])
        ref_bytes = ref[2]["bytes"]
        ref_time = float(np.median([r["time_s"] for _, r, _, _ in items
                                    if map_label(r) == map_label(ref[1])]))
        for k, run, busy, which in items:
            rows.append([k, map_label(run), nodes, n, nb, f"{run['time_s']:.3f}",
                         f"{run['time_s'] / ref_time:.3f}" if ref_time > 0 else "-",
                         f"node {busy['node']}: {format_bytes(busy['sent'])} sent, "
                         f"{format_bytes(busy['received'])} received ({which})",
                         f"{busy['bytes'] / ref_bytes:.3f}" if ref_bytes > 0 else "-",
                         format_bytes(run.get("bytes_measured_total")
                                      or run.get("bytes_predicted_total") or 0)])
    lines.append(table(["#", "map", "nodes", "N", "NB", "time (s)", "time ratio",
                        "busiest link", "busiest-link bytes ratio", "total bytes"], rows))
    lines.append("")
    return lines


def _per_node_table(run):
    meas, pred = run["bytes_measured_pairs"], run["bytes_predicted_pairs"]
    if meas is None and pred is None:
        return []
    head = ["node"]
    cols = []
    for mat, lab in ((meas, "measured"), (pred, "predicted")):
        if mat is not None:
            head += [f"sent ({lab})", f"received ({lab})"]
            cols += [mat.sum(axis=1), mat.sum(axis=0)]
    rows = [[a] + [format_bytes(c[a]) for c in cols] for a in range(run["nodes"])]
    return ["Bytes per node:", "", table(head, rows), ""]


def model_figure_captions(doc):
    """Captions of the two model figures."""
    slices = ("with, at each P, the slice count 2 <= c <= P/c that moves the fewest bytes"
              if doc["slices"] == "best" else
              f"with c = {', '.join(map(str, doc['slices']))} slices")
    vol = (f"Predicted bytes sent between nodes against node count P (log scale): the "
           f"exact model as markers, the closed-form leading terms as lines in the same "
           f"colour: 2dbc S(p+q-2) on the most square p x q grid (hollow markers: prime "
           f"P, only 1 x P), sbc S(r-2) at P = r(r-1)/2, sbc-basic S(r-1) at P = r^2/2, 2.5D "
           f"maps + S(c-1) {slices}.")
    gain = ("Volume gain at equal node count: bytes of 2dbc divided by bytes of sbc and "
            "sbc-basic (tends to sqrt(2) for large P), and bytes of 2dbc25d divided by bytes "
            "of sbc25d (tends to cbrt(2) with the best c).")
    return vol, gain
