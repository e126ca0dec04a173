"""Predicted volume against node count for every map family: the data of ``report --model``.

For each node count P of a range, the exact model (:mod:`starchol.model.volume`) counts
the bytes one tiled Cholesky of order N in NB x NB tiles moves under:

- ``2dbc``: the most square grid p x q of P (p <= q); prime P only has 1 x P and is
  marked ``degenerate`` (a 1 x P grid is a 1D map);
- ``sbc``: extended SBC, P = r(r-1)/2;
- ``sbc-basic``: basic SBC, P = r^2/2 (r even);
- ``sym``: the symmetric map for P nodes and this NT (:func:`starchol.distributions.symmetric_map`),
  which exists for every P >= 2;
- ``2dbc25d`` and ``sbc25d``: 2 <= c <= P/c slices of P/c nodes each (a 2dbc slice on the most
  square grid of P/c; an SBC slice when P/c is an SBC count), with c either the slice
  count that moves the fewest bytes at that P ("best c", counted exactly among the c whose
  leading factor is within 1 of the least), or each of a list of fixed c.

Each point carries its closed-form leading term S * F in bytes, where S is taken as the
bytes of the stored lower triangle (so a smaller last tile is accounted for).
No matplotlib here: this module only builds the JSON document the figures are drawn from.
"""
import math

import numpy as np

from ..distributions import get_map, sbc_basic_r, sbc_extended_r, square_grid
from ..distributions.factory import sliced_candidates
from ..model.volume import (DOUBLE_BYTES, stored_tiles, tile_extents, transfer_pairs_bytes,
                             transfer_pairs_tiles)

#: the map families of the model report, in legend order
FAMILIES = ("2dbc", "sbc", "sbc-basic", "sym", "2dbc25d", "sbc25d")

#: "best c": only slice counts whose leading factor is within this of the least are counted
BEST_C_MARGIN = 1.0


def stored_bytes(n, nb, itemsize=DOUBLE_BYTES):
    """Bytes of the stored lower triangle (tiles i >= j) of an n x n matrix of
    ``itemsize``-byte entries (8: float64)."""
    ext = tile_extents(n, nb)
    full = np.outer(ext, ext)
    return int(np.tril(full).sum()) * int(itemsize)


def _point(tile_map, n, nb, nt, cache, s_bytes, itemsize=DOUBLE_BYTES):
    """One point: exact transfers (tiles, bytes) and leading term of ``tile_map``."""
    tiles = int(transfer_pairs_tiles(tile_map, nt, cache=cache).sum())
    if n == nt * nb:
        nbytes = tiles * nb * nb * int(itemsize)
    else:
        nbytes = int(transfer_pairs_bytes(tile_map, n, nb, cache=cache,
                                          itemsize=itemsize).sum())
    factor = tile_map.leading_factor()
    return {
        "nodes": tile_map.nodes,
        "map": str(tile_map),
        **{k: v for k, v in tile_map.summary().items() if k in ("grid", "r", "slices")},
        "transfers_tiles": tiles,
        "bytes": nbytes,
        "ratio": tiles / stored_tiles(nt),
        "leading_factor": factor,
        "leading_bytes": None if factor is None else factor * s_bytes,
    }


def _sliced_candidates(family, nodes):
    """(c, map) for the slice counts 2 <= c <= sqrt(P) that divide P (see
    :func:`starchol.distributions.factory.sliced_candidates`): a slice has at least as many nodes
    as there are slices (more slices multiply the memory per node for no gain in these
    ranges; the best c grows like cbrt(P))."""
    maps = sliced_candidates(nodes, family, exact=True, max_c=math.isqrt(nodes))
    return [(m.slices, m) for m in maps]


def _near_best(cands, margin=BEST_C_MARGIN):
    """Maps among (c, map) ``cands`` whose leading factor is within ``margin`` of the least.

    The exact model then picks the best of these: the lower-order terms are far smaller
    than one S, so a c whose leading term is S * margin above the least cannot win, and
    the large c (costly to count) are skipped.
    """
    factors = [m.leading_factor() for _, m in cands]
    if not factors:
        return []
    least = min(factors)
    return [m for (_, m), f in zip(cands, factors) if f <= least + margin]


def series_names(slices):
    """Names of the series drawn for ``slices`` ("best" or a list of fixed c)."""
    names = ["2dbc", "sbc", "sbc-basic", "sym"]
    for fam in ("2dbc25d", "sbc25d"):
        if slices == "best":
            names.append(f"{fam} (best c)")
        else:
            names += [f"{fam} c={c}" for c in slices]
    return names


def model_document(first, last, n, nb, slices="best", cache=True, progress=None,
                   dtype="float64"):
    """Predicted bytes of every map family for node counts ``first`` .. ``last``.

    Parameters
    ----------
    first, last : int
        Node count range, inclusive (2 <= first <= last).
    n, nb : int
        Matrix order and tile size (elements).
    slices : "best" or list of int
        ``"best"`` (per P, the c >= 2 with the fewest bytes) or a list of c.
    cache : bool
        StarPU-MPI receive cache on or off.
    progress : callable(done, total), optional
        Called over node counts.
    dtype : str
        The entries' precision, float64 (default, 8 bytes) or float32 (4).

    Returns
    -------
    dict
        With ``kind, n, nb, nt, dtype, cache, slices, nodes_range, stored_tiles,
        stored_bytes, series`` (name -> list of points, see :func:`_point`; 2dbc points
        have ``degenerate`` true for a 1 x P grid) and ``sbc_vs_2dbc`` (one row per node
        count where both exist: both byte counts, their ratio, ``sbc_below``).
    """
    nt = math.ceil(n / nb)
    dtype = np.dtype(dtype)
    itemsize = dtype.itemsize
    s_bytes = stored_bytes(n, nb, itemsize)

    def point(tile_map):
        return _point(tile_map, n, nb, nt, cache, s_bytes, itemsize)

    names = series_names(slices)
    series = {name: [] for name in names}
    counts = list(range(first, last + 1))
    if progress:
        progress(0, len(counts))
    for k, p in enumerate(counts):
        p_rows, q_cols = square_grid(p)
        pt = point(get_map("2dbc", p, grid=(p_rows, q_cols)))
        pt["degenerate"] = p_rows == 1
        series["2dbc"].append(pt)
        if sbc_extended_r(p):
            series["sbc"].append(point(get_map("sbc", p)))
        if sbc_basic_r(p):
            series["sbc-basic"].append(point(get_map("sbc-basic", p)))
        if p >= 2:
            series["sym"].append(point(get_map("sym", p, nt=nt)))
        for fam in ("2dbc25d", "sbc25d"):
            cands = _sliced_candidates(fam, p)
            if slices == "best":
                pts = [point(m) for m in _near_best(cands)]
                if pts:
                    series[f"{fam} (best c)"].append(min(pts, key=lambda q: q["bytes"]))
            else:
                for c, m in cands:
                    if c in slices:
                        series[f"{fam} c={c}"].append(point(m))
        if progress:
            progress(k + 1, len(counts))
    by_nodes = {pt["nodes"]: pt for pt in series["2dbc"]}
    versus = []
    for pt in series["sbc"]:
        ref = by_nodes[pt["nodes"]]
        versus.append({
            "nodes": pt["nodes"], "r": pt.get("r"), "grid": ref["grid"],
            "sbc_bytes": pt["bytes"], "2dbc_bytes": ref["bytes"],
            "ratio_2dbc_over_sbc": ref["bytes"] / pt["bytes"] if pt["bytes"] else None,
            "sbc_below": pt["bytes"] < ref["bytes"],
        })
    return {
        "kind": "starchol model report",
        "n": int(n), "nb": int(nb), "nt": nt,
        "dtype": dtype.name,
        "cache": bool(cache),
        "slices": slices if slices == "best" else list(slices),
        "nodes_range": [first, last],
        "stored_tiles": stored_tiles(nt), "stored_bytes": s_bytes,
        "series": series,
        "sbc_vs_2dbc": versus,
    }


def gains(doc):
    """Volume gains at equal node count, for the gain figure and the table.

    Returns a dict name -> list of (nodes, gain): ``sbc``, ``sbc-basic`` and ``sym`` as 2dbc bytes /
    their bytes; ``sbc25d`` vs ``2dbc25d`` (same c choice) as 2dbc25d bytes / sbc25d bytes.
    """
    ser = doc["series"]
    ref2d = {pt["nodes"]: pt["bytes"] for pt in ser["2dbc"]}
    out = {}
    for name in ("sbc", "sbc-basic", "sym"):
        out[f"{name} vs 2dbc"] = [(pt["nodes"], ref2d[pt["nodes"]] / pt["bytes"])
                                  for pt in ser[name] if pt["bytes"]]
    for name in ser:
        if not name.startswith("sbc25d"):
            continue
        other = name.replace("sbc25d", "2dbc25d")
        ref = {pt["nodes"]: pt["bytes"] for pt in ser.get(other, [])}
        out[f"{name} vs {other}"] = [(pt["nodes"], ref[pt["nodes"]] / pt["bytes"])
                                     for pt in ser[name] if pt["nodes"] in ref and pt["bytes"]]
    return out
