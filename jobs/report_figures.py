"""PNG figures of ``starchol report`` (matplotlib, Agg backend), each written atomically.

Every function takes the data (a run document from :mod:`starchol.reports.runs` or the
model document from :mod:`starchol.reports.model`) and the output path, and returns the
path written.
Bytes are shown in decimal units (kB, MB, GB, TB), as :func:`format_bytes` prints them.
"""
import os

import numpy as np

#: colour and marker of each map family, the same in every figure
FAMILY_STYLE = {
    "2dbc": ("tab:blue", "s"),
    "sbc": ("tab:red", "o"),
    "sbc-basic": ("tab:orange", "D"),
    "sym": ("tab:brown", "P"),
    "2dbc25d": ("tab:purple", "^"),
    "sbc25d": ("tab:green", "v"),
}
#: closed-form leading term of each family (S stored tiles)
LEADING_TEXT = {"2dbc": "S(p+q-2)", "sbc": "S(r-2)", "sbc-basic": "S(r-1)",
                "sym": "S(sum |C_p| / r - 1)",
                "2dbc25d": "S(p+q-2) + S(c-1)", "sbc25d": "S(r-2 or r-1) + S(c-1)"}
UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plt_colormap(name):
    """A copy of a matplotlib colormap (safe to modify)."""
    import matplotlib

    return matplotlib.colormaps[name].copy()


def byte_unit(max_bytes):
    """(scale, name) of the largest decimal unit not above ``max_bytes``."""
    for scale, name in UNITS:
        if max_bytes >= scale:
            return scale, name
    return 1.0, "B"


def save_png(fig, path, dpi=110):
    """Save ``fig`` to ``path`` atomically (:func:`starchol.files.atomic_path`)."""
    from ..files import atomic_path

    plt = pyplot()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return path


def family_of(series_name):
    """'sbc25d (best c)' -> 'sbc25d'."""
    return series_name.split(" ")[0]


# -- run reports ---------------------------------------------------------------------------
def _heat(ax, fig, mat, scale, unit, title, vmax, cmap="viridis", vmin=0.0, annotate=True):
    p = mat.shape[0]
    cm = plt_colormap(cmap).with_extremes(bad="white")
    im = ax.imshow(np.ma.masked_equal(mat / scale, 0), cmap=cm, vmin=vmin / scale,
                   vmax=vmax / scale, interpolation="nearest")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("receiver node")
    ax.set_ylabel("sender node")
    if p <= 16:
        ax.set_xticks(range(p))
        ax.set_yticks(range(p))
    if annotate and p <= 8:
        for a in range(p):
            for b in range(p):
                value = mat[a, b] / scale
                if value:
                    if vmin < 0:  # diverging: dark at both ends
                        dark = abs(mat[a, b]) > 0.6 * vmax
                    else:
                        dark = mat[a, b] < 0.6 * vmax
                    ax.text(b, a, f"{value:.3g}", ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")
    bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label(f"bytes sent ({unit})")
    return im


def pairs_figure(run, path):
    """Heat maps of the node-pair byte matrices: measured, predicted, and their difference."""
    plt = pyplot()
    meas, pred = run["bytes_measured_pairs"], run["bytes_predicted_pairs"]
    mats = [(m, t) for m, t in ((meas, "measured"), (pred, "predicted (exact model)"))
            if m is not None]
    both = meas is not None and pred is not None
    panels = len(mats) + (1 if both else 0)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.8), squeeze=False)
    vmax = max(float(m.max()) for m, _ in mats) or 1.0
    scale, unit = byte_unit(vmax)
    for ax, (mat, title) in zip(axes[0], mats):
        _heat(ax, fig, mat, scale, unit, f"{title}: {mat.sum() / scale:.4g} {unit}", vmax)
    if both:
        diff = meas - pred
        lim = float(np.abs(diff).max())
        ax = axes[0][-1]
        if lim == 0:
            ax.imshow(np.zeros_like(diff), cmap="Greys", vmin=0, vmax=1,
                      interpolation="nearest")
            ax.text((diff.shape[0] - 1) / 2, (diff.shape[0] - 1) / 2,
                    "measured = predicted\nfor every node pair", ha="center", va="center",
                    fontsize=11, color="tab:green", fontweight="bold")
            ax.set_title("measured - predicted: 0 everywhere", fontsize=10)
            ax.set_xlabel("receiver node")
            ax.set_ylabel("sender node")
            if diff.shape[0] <= 16:
                ax.set_xticks(range(diff.shape[0]))
                ax.set_yticks(range(diff.shape[0]))
        else:
            _heat(ax, fig, diff, scale, unit,
                  f"measured - predicted (max |diff| {lim / scale:.3g} {unit})",
                  vmax=lim, cmap="RdBu_r", vmin=-lim)
    match = run.get("match")
    suffix = "" if match is None else f"  -  match: {'yes' if match else 'NO'}"
    fig.suptitle(f"Bytes sent between node pairs (row = sender): {run['label']}{suffix}",
                 fontsize=11)
    fig.tight_layout()
    return save_png(fig, path)


def per_node_figure(run, path):
    """Bytes sent and received per node, measured beside predicted (grouped bars)."""
    plt = pyplot()
    meas, pred = run["bytes_measured_pairs"], run["bytes_predicted_pairs"]
    have = [(m, lab, col) for m, lab, col in ((meas, "measured", "tab:blue"),
                                               (pred, "predicted", "tab:gray")) if m is not None]
    p = run["nodes"]
    vmax = max(max(float(m.sum(axis=1).max()), float(m.sum(axis=0).max())) for m, _, _ in have)
    scale, unit = byte_unit(vmax or 1.0)
    if p <= 10:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    else:  # one panel above the other, at most 16 inches wide
        fig, axes = plt.subplots(2, 1, figsize=(min(16, max(9, 0.28 * p * len(have) + 3)), 7.5),
                                 sharey=True)
    x = np.arange(p)
    width = 0.8 / len(have)
    for ax, axis, what in ((axes[0], 1, "sent"), (axes[1], 0, "received")):
        for k, (mat, lab, col) in enumerate(have):
            ax.bar(x + (k - (len(have) - 1) / 2) * width, mat.sum(axis=axis) / scale, width,
                   label=lab, color=col)
        ax.set_title(f"bytes {what} per node")
        ax.set_xlabel("node (MPI rank)")
        if p <= 32:
            ax.set_xticks(x)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes:
        ax.set_ylabel(f"bytes ({unit})")
    axes[0].set_ylim(0, 1.2 * vmax / scale if vmax else 1)
    axes[0].legend(loc="upper right", ncol=len(have))
    fig.suptitle(run["label"], fontsize=11)
    fig.tight_layout()
    return save_png(fig, path)


def runs_gflops_figure(runs, path):
    """GFlop/s of each run (horizontal bars, coloured by map family)."""
    plt = pyplot()
    rows = [r for r in runs if r.get("gflops") is not None]
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.45 * len(rows)))
    y = np.arange(len(rows))
    colors = [FAMILY_STYLE.get(r["dist"], ("tab:gray", None))[0] for r in rows]
    vals = [r["gflops"] for r in rows]
    ax.barh(y, vals, color=colors)
    for k, v in enumerate(vals):
        ax.text(v, k, f" {v:.3g}", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels([r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GFlop/s (N^3/3 flops / time)")
    ax.set_xlim(0, max(vals) * 1.15 if vals else 1)
    ax.set_title("Factorization speed by map")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save_png(fig, path)


def runs_bytes_figure(runs, path):
    """Total bytes sent of each run, measured beside predicted (horizontal grouped bars)."""
    plt = pyplot()
    rows = [r for r in runs if r.get("bytes_measured_total") is not None
            or r.get("bytes_predicted_total") is not None]
    vmax = max(max(r.get("bytes_measured_total") or 0, r.get("bytes_predicted_total") or 0)
               for r in rows)
    scale, unit = byte_unit(vmax or 1.0)
    fig, ax = plt.subplots(figsize=(9.5, 1.4 + 0.6 * len(rows)))
    y = np.arange(len(rows))
    from ..units import format_bytes

    positive = [v for r in rows for v in (r.get("bytes_measured_total"),
                                          r.get("bytes_predicted_total")) if v]
    log = bool(positive) and max(positive) / min(positive) > 50
    for k, (key, lab, col) in enumerate((("bytes_measured_total", "measured", "tab:blue"),
                                         ("bytes_predicted_total", "predicted", "tab:gray"))):
        vals = [(r.get(key) or 0) / scale for r in rows]
        ax.barh(y + (k - 0.5) * 0.38, vals, 0.38, label=lab, color=col)
        for j, r in enumerate(rows):
            if r.get(key):
                ax.text(r[key] / scale, j + (k - 0.5) * 0.38, " " + format_bytes(r[key]),
                        va="center", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels([r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / scale / 2, max(positive) / scale * 10)
    else:
        ax.set_xlim(0, vmax / scale * 1.25)
    ax.set_xlabel(f"bytes sent between nodes, all pairs ({unit}{', log scale' if log else ''})")
    ax.set_title("Communication volume by map")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)


# -- model report --------------------------------------------------------------------------
def _styled_series(series):
    """``(name, points, family, colour, marker)`` of each series with points, in order:
    the colour of its map family, the family's marker for its first series and another
    marker for each further one."""
    seen = {}
    for name, pts in series.items():
        if not pts:
            continue
        fam = family_of(name)
        color, marker = FAMILY_STYLE[fam]
        if seen.get(fam, 0):
            marker = ("x", "+", "*", "P")[(seen[fam] - 1) % 4]
        seen[fam] = seen.get(fam, 0) + 1
        yield name, pts, fam, color, marker


def model_volume_figure(doc, path):
    """Predicted bytes against node count: exact model as markers, leading terms dashed."""
    plt = pyplot()
    ser = doc["series"]
    vmax = max(pt["bytes"] for pts in ser.values() for pt in pts)
    scale, unit = byte_unit(vmax)
    fig, ax = plt.subplots(figsize=(13, 6.5))
    for name, pts, fam, color, marker in _styled_series(ser):
        regular = [pt for pt in pts if not pt.get("degenerate")]
        odd = [pt for pt in pts if pt.get("degenerate")]
        x = [pt["nodes"] for pt in regular]
        ax.plot(x, [pt["bytes"] / scale for pt in regular], marker=marker, color=color,
                linestyle="none", ms=6, label=f"{name}: exact", zorder=3)
        lead = [(pt["nodes"], pt["leading_bytes"]) for pt in regular
                if pt["leading_bytes"] is not None]
        if lead:
            ax.plot([a for a, _ in lead], [b / scale for _, b in lead], color=color,
                    linestyle="-", lw=1.2, alpha=0.75,
                    label=f"{name}: leading term {LEADING_TEXT[fam]}")
        if odd:
            ax.plot([pt["nodes"] for pt in odd], [pt["bytes"] / scale for pt in odd],
                    marker=marker, color=color, mfc="none", linestyle="none", ms=6,
                    label=f"{name}: 1 x P grid (prime P, a 1D map)")
    ax.set_xlabel("nodes P")
    ax.set_ylabel(f"predicted bytes sent between nodes ({unit})")
    ax.set_yscale("log")
    cache = "on" if doc["cache"] else "off"
    ax.set_title(f"Predicted communication volume of one Cholesky, N = {doc['n']}, "
                 f"NB = {doc['nb']} (NT = {doc['nt']}), receive cache {cache}", fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return save_png(fig, path)


def model_gain_figure(doc, gains, path):
    """Volume gain at equal node count: 2dbc / sbc, and 2.5D 2dbc / 2.5D sbc."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(13, 5.5))
    for name, pts, _, color, marker in _styled_series(gains):
        mine, ref = name.split(" vs ")
        ax.plot([a for a, _ in pts], [g for _, g in pts], marker=marker, color=color, lw=1,
                label=f"bytes of {ref} / bytes of {mine}")
    ax.axhline(np.sqrt(2), color="tab:red", linestyle=":", lw=1.2,
               label="sqrt(2) = 1.414: SBC over 2DBC, large P")
    ax.axhline(2 ** (1 / 3), color="tab:green", linestyle=":", lw=1.2,
               label="cbrt(2) = 1.260: 2.5D SBC over 2.5D 2DBC,\nbest c, large P")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel("nodes P")
    ax.set_ylabel("volume gain at equal node count (x)")
    ax.set_title(f"Bytes saved by the symmetric maps (exact model, N = {doc['n']}, "
                 f"NB = {doc['nb']})", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return save_png(fig, path)
