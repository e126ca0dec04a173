"""The bytes of a run, settled: the match and totals follow from the pair matrices, and
a prediction missing from a document is computed with the exact model.

:func:`settle_bytes` makes the byte figures of a run (read by
:func:`starchol.reports.runs.load_run`) follow from its pair matrices: the totals are
their sums, ``match`` is whether they are equal (a stored ``match`` that disagrees is
flagged), and a missing prediction is computed with the exact model (:func:`model_pairs`
on the map :func:`document_map` rebuilds) when the document has what it needs; the same
for the solve's. Units: bytes.
"""
import numpy as np

from ..errors import UsageError
from ..integers import is_int
from ..linalg.record import PAIR_KEYS
from ..units import bytes_text
from .runs import grid_text


def document_map(run):
    """The tile map a run document describes.

    A document of ``starchol run`` holds the map's parameters (``map_params``, see
    :meth:`~starchol.distributions.base.TileMap.params`), and the map is
    ``get_map(**map_params)``. An older document is rebuilt from its ``dist, nodes,
    slices`` and (2dbc, 2dbc25d) its ``grid`` key or, without one, the grid whose map has
    the document's ``map`` description.

    Returns ``(map, None)``, or ``(None, reason)`` saying what is missing. When the
    document has a ``map`` description, the rebuilt map must have the same one.
    """
    from ..distributions import get_map

    dist, text = run["dist"], run.get("map")
    text = text.strip() if isinstance(text, str) else ""
    params = run.get("map_params")
    if isinstance(params, dict):
        build = dict(params)
    elif dist == "custom":
        return None, "its map is a custom map, whose file the document does not hold"
    else:
        build = {"dist": dist, "nodes": run["nodes"], "slices": run.get("slices", 1),
                 "nt": run["nt"]}
        if dist in ("2dbc", "2dbc25d"):
            build["grid"] = grid_text(run.get("grid")) or _named_grid(build, text)
            if not build["grid"]:
                return None, (f"its {dist} grid is unknown (no `grid` key, and no `map` "
                              f"description naming it)")
    try:
        tile_map = get_map(**build)
    except (UsageError, ValueError, TypeError) as exc:
        return None, f"its map cannot be rebuilt ({exc})"
    if text and str(tile_map) != text:
        return None, (f"the map rebuilt from its keys, '{tile_map}', is not the one it "
                      f"names, '{text}'")
    return tile_map, None


def _named_grid(build, text):
    """The grid ``"PxQ"`` of the 2dbc or 2dbc25d map of ``build`` whose description is
    ``text``, or None."""
    from ..distributions import get_map

    nodes, slices = build["nodes"], build["slices"]
    if not text or not isinstance(slices, int) or slices < 1 or nodes % slices:
        return None
    per = nodes // slices
    for p in range(1, per + 1):
        if per % p == 0:
            grid = f"{p}x{per // p}"
            if str(get_map(**{**build, "grid": grid})) == text:
                return grid
    return None


def model_pairs(run):
    """Bytes the exact model predicts between every pair of nodes for this run document:
    :func:`starchol.model.volume.transfer_pairs_bytes` (a factorization) or
    :func:`~starchol.model.volume.solve_transfer_pairs_bytes` or
    :func:`~starchol.model.rhs_volume.rhs_solve_transfer_pairs_bytes` (a solve, or one
    of its passes: ``forward_solve``, ``backward_solve``, by the variant its
    ``solve_variant`` names; ``"factor"`` without one), the functions
    ``starchol run`` records ``bytes_predicted_pairs`` with, on the document's map, N, NB,
    receive-cache setting and element size.

    Returns ``(pairs, what)`` with ``pairs`` an int64 (P, P) array (sender row) and
    ``what`` the inputs in words, or ``(None, reason)`` naming what the document lacks.
    """
    from ..model.operations import BYTES_PER_ENTRY, SOLVE_PASSES, predicted_pairs_bytes

    operation = run.get("operation", "cholesky")
    solve = operation in SOLVE_PASSES
    if operation == "solve_mixed":
        return _mixed_model_pairs(run)
    if operation != "cholesky" and not solve:
        return None, f"its operation {operation!r} has no volume model"
    cache = run.get("cache")
    if not isinstance(cache, bool):
        return None, ("it has no `cache` key (true/false), and the model needs the "
                      "receive-cache setting")
    dtype = run.get("dtype", "float64")
    if dtype not in BYTES_PER_ENTRY:
        return None, f"its dtype {dtype!r} is neither float64 nor float32"
    nrhs = run.get("nrhs", 0)
    if solve and (not is_int(nrhs) or nrhs < 1):
        return None, f"it is a solve without a valid `nrhs` (got {nrhs!r})"
    tile_map, reason = document_map(run)
    if tile_map is None:
        return None, reason
    variant = (run.get("solve_variant") or {}).get("variant", "factor") if solve else None
    pairs = predicted_pairs_bytes(operation, tile_map, run["n"], run["nb"], nrhs,
                                  cache=cache, itemsize=BYTES_PER_ENTRY[dtype],
                                  variant=variant or "factor")
    what = (f"{tile_map}, N = {run['n']}, NB = {run['nb']}, receive cache "
            f"{'on' if cache else 'off'}, {dtype}"
            + ("" if "dtype" in run else " (no `dtype` key: the default)")
            + (f", {variant} variant, {operation.replace('_', ' ')} of {nrhs} right-hand "
               f"sides" if solve else ""))
    return pairs, what


def _mixed_model_pairs(run):
    """:func:`model_pairs` of a mixed-precision solve: the whole solve's bytes
    (:func:`~starchol.model.mixed_volume.mixed_transfer_pairs_bytes`) from its
    ``nrhs``, ``mixed.iterations`` and ``mixed.fallback``."""
    from ..model.mixed_volume import mixed_transfer_pairs_bytes

    cache, mixed, nrhs = run.get("cache"), run.get("mixed"), run.get("nrhs")
    if not isinstance(cache, bool):
        return None, ("it has no `cache` key (true/false), and the model needs the "
                      "receive-cache setting")
    if not isinstance(mixed, dict) or not is_int(nrhs) or nrhs < 1:
        return None, "it is a mixed-precision solve without its `mixed` object or `nrhs`"
    tile_map, reason = document_map(run)
    if tile_map is None:
        return None, reason
    pairs = mixed_transfer_pairs_bytes(tile_map, run["n"], run["nb"], nrhs,
                                       mixed["iterations"], mixed.get("fallback"), cache)
    return pairs, (f"{tile_map}, N = {run['n']}, NB = {run['nb']}, receive cache "
                   f"{'on' if cache else 'off'}, a mixed-precision solve of {nrhs} "
                   f"right-hand sides with {mixed['iterations']} iteration(s), fallback "
                   f"{mixed.get('fallback') or 'none'}")


#: What :func:`settle_bytes` sets, for the run and for its solve.
SETTLED_KEYS = PAIR_KEYS + ("bytes_measured_total", "bytes_predicted_total", "match",
                            "match_stored", "match_conflict", "predicted_by_report")


def settle_bytes(run):
    """Make a run's byte figures follow from its pair matrices; return notes (Markdown).

    - No ``bytes_predicted_pairs``: computed with the exact model (:func:`model_pairs`)
      when the document has what it needs, else a note says precisely why not.
    - ``bytes_*_total``: the sums of the matrices; a stored total that differs is noted.
    - ``match``: whether the two matrices are equal entry by entry; a stored ``match``
      that says otherwise is kept in ``match_stored`` and flagged (``match_conflict``).

    The same for ``run["solve"]`` (its model: :func:`model_pairs` of a solve of its
    ``nrhs`` right-hand sides on the run's map), with notes that start "the solve:".
    """
    notes = _settle(run)
    solve = run.get("solve")
    if solve is not None:
        # the solve's own keys over the run's (map, N, NB, cache, dtype): none of the
        # run's byte figures may stand in for a missing one of the solve
        merged = {**run, **solve, **{k: solve.get(k) for k in SETTLED_KEYS},
                  "operation": "solve"}
        notes += [f"the solve: {note}" for note in _settle(merged)]
        solve.update({k: merged.get(k) for k in SETTLED_KEYS})
    return notes


def _settle(run):
    """:func:`settle_bytes` for one set of byte keys (the run's, or its solve's merged
    with the run's map keys)."""
    notes = []
    if run["bytes_measured_pairs"] is None:
        notes.append("no `bytes_measured_pairs` in the document: measured bytes not shown")
    if run["bytes_predicted_pairs"] is None:
        pairs, what = model_pairs(run)
        if pairs is None:
            notes.append(f"no `bytes_predicted_pairs` in the document, and the report cannot "
                         f"compute them: {what}; predicted bytes not shown")
        else:
            run["bytes_predicted_pairs"] = pairs.astype(float)
            run["predicted_by_report"] = True
            notes.append(f"no `bytes_predicted_pairs` in the document: the predicted bytes "
                         f"were computed by this report with the exact model ({what})")
    for key, pairs_key, word in (("bytes_measured_total", "bytes_measured_pairs", "measured"),
                                 ("bytes_predicted_total", "bytes_predicted_pairs",
                                  "predicted")):
        arr = run[pairs_key]
        if arr is None:
            continue
        total = int(arr.sum())
        stored = run.get(key)
        if stored is not None and stored != total:
            source = (f"what the model gives, {bytes_text(total)}"
                      if run.get("predicted_by_report") and word == "predicted"
                      else f"the sum of its `{pairs_key}`, {bytes_text(total)}")
            notes.append(f"**the document's `{key}`, {bytes_text(stored)}, is not {source}; "
                         f"the report uses the matrix**")
        run[key] = total
    meas, pred = run["bytes_measured_pairs"], run["bytes_predicted_pairs"]
    stored = run.get("match")
    if meas is not None and pred is not None:
        derived = bool(np.array_equal(meas, pred))
        if stored is not None and stored != derived:
            run["match_stored"], run["match_conflict"] = stored, True
            notes.append(f"**the document says `match: {str(stored).lower()}` but its "
                         f"measured and predicted byte matrices "
                         f"{'are equal' if derived else 'differ'}; the report shows what the "
                         f"matrices say**")
        run["match"] = derived
    elif stored is not None:
        run["match_stored"] = stored
        run["match"] = None
        notes.append(f"the document says `match: {str(stored).lower()}`, but without both "
                     f"byte matrices the report cannot check it: match not shown")
    return notes
