"""One summary of a map's predicted traffic and load: what ``starchol volume`` reports."""

from .load import node_load
from .volume import (DOUBLE_BYTES, leading_term_tiles, stored_tiles, transfer_pairs,
                     tile_bytes)

#: node-pair matrices are included in summaries up to this many nodes
PAIRS_MAX_NODES = 256


def volume_summary(tile_map, nt, nb, n=None, cache=True, with_pairs=None, progress=None,
                   itemsize=DOUBLE_BYTES):
    """Predicted transfers (tiles and bytes) and load of an nt x nt tiled Cholesky.

    Parameters
    ----------
    tile_map : TileMap
        A map from :mod:`starchol.distributions`.
    nt : int
        Tile rows/columns NT.
    nb : int
        Tile size NB (elements); a tile is NB*NB*itemsize bytes.
    n : int, optional
        Matrix order; if given and not NT*NB, the last tile row/column is smaller and
        ``bytes`` is counted exactly per tile size.
    cache : bool
        StarPU-MPI receive cache on or off.
    with_pairs : bool, optional
        Include the node-pair matrix (default: when P <= 256).
    progress : callable(rows_done, nt), optional
        Called as tile rows are counted.
    itemsize : int
        Bytes per entry (8: float64, the default; 4: float32).

    Returns
    -------
    dict
        ``dist, nodes, slices, nt, nb, n, cache, stored_tiles, transfers_tiles, bytes,
        ratio, leading_term_tiles, per_node{sent_tiles, received_tiles, sent_bytes,
        received_bytes}, load{tiles, flops, flops_max_over_avg, tiles_max_over_avg}`` and
        ``pairs_tiles`` (sender row). Per-node bytes count each tile's own size, as
        ``bytes`` does. ``leading_term_tiles`` is None with the cache off: the leading
        terms count one transfer per tile version and node, which only the cache gives.
    """
    n = nt * nb if n is None else int(n)
    owners = tile_map.owner_maps(nt)
    it = tile_map.iteration_slices(nt)
    pairs = transfer_pairs(owners, tile_map.nodes, cache=cache, progress=progress, it=it)
    total = int(pairs.sum())
    sent, received = pairs.sum(axis=1), pairs.sum(axis=0)
    if n == nt * nb:
        tile = nb * nb * int(itemsize)
        nbytes = total * tile
        sent_bytes, received_bytes = sent * tile, received * tile
    else:
        weighted = transfer_pairs(owners, tile_map.nodes, cache=cache,
                                  row_weights=tile_bytes(n, nb, itemsize), it=it)
        nbytes = int(weighted.sum())
        sent_bytes, received_bytes = weighted.sum(axis=1), weighted.sum(axis=0)
        del weighted
    s = stored_tiles(nt)
    lead = leading_term_tiles(tile_map, nt) if cache else None
    load = node_load(tile_map, nt)
    doc = {
        **tile_map.summary(),
        "map": str(tile_map),
        "nt": int(nt), "nb": int(nb), "n": int(n), "cache": bool(cache),
        "stored_tiles": s,
        "transfers_tiles": total,
        "bytes": nbytes,
        "ratio": total / s,
        "leading_term_tiles": lead,
        "per_node": {"sent_tiles": sent, "received_tiles": received,
                     "sent_bytes": sent_bytes, "received_bytes": received_bytes},
        "load": {
            "tiles": load["tiles"],
            "flops": load["flops"],
            "tiles_max_over_avg": load["tiles_max_over_avg"],
            "flops_max_over_avg": load["flops_max_over_avg"],
        },
    }
    if with_pairs is None:
        with_pairs = tile_map.nodes <= PAIRS_MAX_NODES
    if with_pairs:
        doc["pairs_tiles"] = pairs
    return doc


def solve_summary(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES, variant="auto"):
    """Predicted bytes of the solve A X = B after the factorization (K = ``nrhs``
    right-hand sides) in the variant ``Factor.solve(variant=...)`` runs
    (:func:`~starchol.model.rhs_volume.choose_variant`; ``"auto"``: fewer bytes on the
    busiest link).

    Returns a dict: ``nrhs``, ``variant`` (the one that runs), ``variant_reason``,
    ``variants`` (``bytes`` and ``busiest_link_bytes`` of each variant), ``bytes`` (the
    whole solve), ``bytes_forward`` and ``bytes_backward`` (each pass on its own, as
    ``Factor.solve_triangular`` runs it, in the variant it picks for that pass), and
    ``per_node{sent_bytes, received_bytes}`` of the whole solve (int64 arrays).
    """
    from .rhs_volume import choose_variant, solve_bytes_by_variant, variant_summary

    def chosen(which):
        by = solve_bytes_by_variant(tile_map, n, nb, nrhs, cache=cache, itemsize=itemsize,
                                    which=which)
        return by, by[choose_variant(by, variant)[0]]

    by, both = chosen("both")
    choice = variant_summary(by, variant)
    return {"nrhs": int(nrhs), "variant": choice["variant"],
            "variant_reason": choice["reason"], "variants": choice["variants"],
            "bytes": int(both.sum()),
            "bytes_forward": int(chosen("forward")[1].sum()),
            "bytes_backward": int(chosen("backward")[1].sum()),
            "per_node": {"sent_bytes": both.sum(axis=1), "received_bytes": both.sum(axis=0)}}


def mixed_summary(tile_map, n, nb, nrhs, iterations, fallback=None, cache=True,
                  variant="auto"):
    """Predicted bytes of a mixed-precision solve (``solve_mixed``: float32
    factorization, I = ``iterations`` refinement iterations with K = ``nrhs``
    right-hand sides, ``fallback`` None or one of
    :data:`~starchol.model.mixed_volume.FALLBACKS`), beside the float64 factorization
    and solve it replaces (:mod:`~starchol.model.mixed_volume`).

    Returns a dict: ``nrhs``, ``iterations``, ``fallback``, ``bytes`` (the whole mixed
    solve), ``phases`` (bytes per graph kind: ``factor32``, ``solve32``, ``residual64``,
    ``factor64``, ``solve64``), ``bytes_float64`` (float64 factorization + solve),
    ``ratio_to_float64``, ``variants`` (the variant of the float32 solves, the float64
    residuals and the float64 solve: each the one with fewer bytes on the busiest link)
    and ``per_node{sent_bytes, received_bytes}`` (int64 arrays).
    """
    from .mixed_volume import SINGLE_BYTES, chosen_solve_bytes, mixed_phase_bytes
    from .rhs_volume import (choose_variant, residual_bytes_by_variant,
                             solve_bytes_by_variant)
    from .volume import transfer_pairs_bytes

    phases = mixed_phase_bytes(tile_map, n, nb, nrhs, iterations, fallback, cache, variant)
    total = sum(phases.values())
    f64 = int(transfer_pairs_bytes(tile_map, n, nb, cache=cache).sum()) + int(
        chosen_solve_bytes(tile_map, n, nb, nrhs, cache=cache, variant=variant).sum())
    variants = {
        "solve32": choose_variant(solve_bytes_by_variant(
            tile_map, n, nb, nrhs, cache=cache, itemsize=SINGLE_BYTES), variant)[0],
        "residual64": choose_variant(residual_bytes_by_variant(
            tile_map, n, nb, nrhs, cache=cache), variant)[0],
        "solve64": choose_variant(solve_bytes_by_variant(
            tile_map, n, nb, nrhs, cache=cache), variant)[0]}
    return {"nrhs": int(nrhs), "iterations": int(iterations), "fallback": fallback,
            "variants": variants,
            "bytes": int(total.sum()), "phases": {k: int(v.sum()) for k, v in phases.items()},
            "bytes_float64": f64,
            "ratio_to_float64": float(total.sum()) / f64 if f64 else None,
            "per_node": {"sent_bytes": total.sum(axis=1),
                         "received_bytes": total.sum(axis=0)}}

