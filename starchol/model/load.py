"""Load-balance figures of a map: tiles stored and flops run per node.

Flops are in units of NB^3 (one tile kernel of size NB, :func:`~.counts.kernel_flops` with
NB = 1): POTRF = 1/3, TRSM = 1, SYRK = 1, GEMM = 2. Tile (m, n) of the lower triangle (m >= n) receives one update per
iteration k < n (SYRK when m == n, GEMM otherwise), then one POTRF (m == n) or TRSM.
For a 2.5D map, iteration k (its POTRF/TRSM and its updates) runs on slice it[k]
(:meth:`~starchol.distributions.base.TileMap.iteration_slices`), so column n is factored on
slice it[n]; a slice stores its copy of tile (m, n) only if it factors it or updates it
(it[n] == s, or U[s, n] > 0 with U of
:func:`~starchol.distributions.base.slice_updates`).

Tasks (one per kernel call, what StarPU creates): each update is one SYRK/GEMM task, each
POTRF/TRSM one task, and before it the ADD tasks of the other slices' partial sums of
column n: one per other slice that updated it
(:func:`~starchol.model.counts.slice_task_weights`).
"""
import numpy as np

from ..distributions.base import slice_updates
from .counts import kernel_flops, slice_task_weights


def node_load(tile_map, nt, tile_bytes=None):
    """Tiles stored and flops (NB^3 units) per node for an nt x nt tiled Cholesky.

    Parameters
    ----------
    tile_map : TileMap
    nt : int
        Tile rows/columns NT.
    tile_bytes : int array (nt, nt), optional
        Each tile's bytes; adds ``bytes``, the tile storage per node (every slice's
        copies included).

    Returns
    -------
    dict
        ``tiles`` (int64 array, P), ``flops`` (float64 array, P, in NB^3 units),
        ``tasks`` (int64 array, P: the tasks each node runs, see :func:`~starchol.model.counts.task_counts`),
        ``tiles_max_over_avg`` and ``flops_max_over_avg`` (busiest node / average), and
        ``bytes`` (int64 array, P) when ``tile_bytes`` is given.
    """
    p, c = tile_map.nodes, tile_map.slices
    m = np.arange(nt)[:, None]
    n = np.arange(nt)[None, :]
    lower = m >= n
    diag = m == n
    tiles = np.zeros(p, dtype=np.int64)
    tasks = np.zeros(p, dtype=np.int64)
    flops = np.zeros(p, dtype=np.float64)
    nbytes = np.zeros(p, dtype=np.int64)
    it = tile_map.iteration_slices(nt)
    u = slice_updates(it, c)
    unit = {k: kernel_flops(k, 1) for k in ("potrf", "trsm", "syrk", "gemm")}
    for s in range(c):
        owner = tile_map.owner_map(nt, s)
        updates = u[s][None, :]                    # #{k < n : it[k] == s}
        factors = (it == s)[None, :]
        per_tile = (updates * np.where(diag, unit["syrk"], unit["gemm"])
                    + factors * np.where(diag, unit["potrf"], unit["trsm"]))
        stored = lower & (factors | (updates > 0))
        tiles += np.bincount(owner[stored], minlength=p)
        if tile_bytes is not None:
            nbytes += np.bincount(owner[stored], weights=tile_bytes[stored],
                                  minlength=p).astype(np.int64)
        flops += np.bincount(owner[lower], weights=np.broadcast_to(per_tile, owner.shape)[lower],
                             minlength=p)
        tasks += np.bincount(owner[lower], weights=np.broadcast_to(
            slice_task_weights(it, s, c), owner.shape)[lower], minlength=p).astype(np.int64)
    out = {
        "tiles": tiles,
        "flops": flops,
        "tasks": tasks,
        "tiles_max_over_avg": float(tiles.max() / tiles.mean()) if tiles.sum() else 1.0,
        "flops_max_over_avg": float(flops.max() / flops.mean()) if flops.sum() else 1.0,
    }
    if tile_bytes is not None:
        out["bytes"] = nbytes
    return out
