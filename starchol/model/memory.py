"""Peak memory of every node (MPI rank) of a factorization: the one home of the rule.

``starchol plan`` (memory per node of each map) and ``starchol run``'s pre-flight check
use :func:`node_memory`. A node's peak, in bytes:

- ``tiles``: its tiles, every 2.5D slice's copies included (:func:`node_load`);
- ``received tiles``: every tile version it receives. ``starchol run`` submits the whole
  task graph at once, and StarPU-MPI keeps each received copy until the end of the
  factorization: measured peak RSS minus the other parts equals the model's received
  bytes (cache on) for 2D maps. With the cache off a copy is received per task and most
  are freed early; the count of all of them is an upper bound. For 2.5D maps the partial
  sums are freed after their ADD, so the sum is an upper bound there too (how far above
  the peak RSS, measured: docs/volume-model.md, "Memory per node");
- ``tile handles``: :data:`HANDLE_BYTES` for each tile handle, which every rank registers
  for every stored tile of every copy (StarPU's handle structures);
- ``tasks``: :data:`TASK_BYTES` for each task the node runs (all are submitted before most
  have run);
- ``owner tables``: (c + 1) NT^2 int64, each slice's owners and the composite;
- ``process``: :data:`PROCESS_BASE_BYTES` for Python, numpy, MPI and StarPU;
- with ``check`` (``starchol run --check``): A's tiles twice more (the copy kept for the
  residual, and the residual's work copy);
- with ``gather`` on node 0: the dense N x N factor, twice (tiles and the assembled array);
- with ``nrhs`` K > 0 (a solve after the factorization, ``starchol run --rhs/--nrhs``): a
  bound on the right-hand sides, on every node: B and X (N x K each, solved in place, so
  one of them) plus a received copy of every row tile, and a handle per tile; with
  ``check`` too, as much again (the copy of B kept for the solve's residual, and the
  residual B - A X).
- with ``mixed`` (``starchol run --dtype mixed``, :func:`~starchol.linalg.mixed.solve_mixed`):
  the factorization's parts in float32 (``itemsize`` 4), plus the float64 A kept
  beside its float32 copy (its tiles on their holders), the right-hand sides in float64
  (B, X, the residual R and the float32 correction: 4 copies, 6 with ``check``), and a
  bound on the A tiles one residual B - A X receives (its model's received bytes; the
  graph frees them row by row). A fallback to float64 needs what a float64 run needs
  instead (the float32 factor is freed first): not counted here.

The constants were fitted on ``starchol run`` under mpirun (peak RSS per rank from
getrusage, 1 worker per rank; docs/volume-model.md, "Memory per node"): 20.5 kB per handle,
0.93 kB per task, 83 MB per process, within 16 % of the remainder over 28 ranks of 7 runs.
"""
import numpy as np

from ..distributions.base import iteration_slices, slice_updates
from .counts import slice_task_weights
from .load import node_load
from .mixed_volume import SINGLE_BYTES
from .volume import (DOUBLE_BYTES, factor_owners, stored_tiles, tile_bytes, tile_extents,
                     transfer_pairs)

#: bytes per registered tile handle (the measured figure: docs/volume-model.md, "Memory
#: per node")
HANDLE_BYTES = 20_000
#: bytes per task of the node (measured, as above; the whole graph is submitted at once)
TASK_BYTES = 1_000
#: memory of a rank before its matrix: interpreter, numpy, MPI, StarPU (measured, as
#: above, with 1, 4 and 8 workers)
PROCESS_BASE_BYTES = 100 * 10**6
#: owner tables up to this size are built for the exact per-node figures; above it
#: (NT above about 11,000) the parts are the balanced means (:func:`node_memory`)
EXACT_TABLE_BYTES = 2 * 10**9
INDEX_BYTES = 8

#: the parts of :func:`node_memory`, in the order the messages print them
PARTS = ("tiles", "received tiles", "tile handles", "tasks", "owner tables", "process",
         "copies of A (--check)", "gathered factor", "right-hand sides",
         "float64 A (mixed)", "residual's received A tiles (mixed)")


def handle_count(nt, c, block=None):
    """Tile handles every rank registers: the S = NT(NT+1)/2 factoring copies, and for a
    2.5D map (c > 1) each slice's partial sums, tiles (i, j) of the columns it updates
    and does not factor (``block``: b of :func:`~.base.iteration_slices`, default the
    maps' default)."""
    n = np.arange(int(nt))
    it = iteration_slices(nt, c, block)
    u = slice_updates(it, c)
    partial = sum(int(((u[s] > 0) & (it != s)) @ (nt - n)) for s in range(c)) if c > 1 else 0
    return stored_tiles(nt) + partial


def _total_tasks(nt, c, block=None):
    n = np.arange(int(nt))
    it = iteration_slices(nt, c, block)
    return sum(int(slice_task_weights(it, s, c) @ (nt - n)) for s in range(c))


def node_memory(tile_map, n, nb, cache=True, check=False, gather=False,
                itemsize=DOUBLE_BYTES, received_bytes=None, load=None, exact=None, nrhs=0,
                mixed=False):
    """Peak bytes of every node of ``starchol run`` for an n x n matrix, by part.

    Parameters
    ----------
    tile_map : TileMap
        The map (built for NT = ceil(n / nb) where it depends on NT).
    n, nb : int
        Matrix order and tile size (elements).
    cache : bool
        StarPU-MPI's receive cache on (one copy per tile version and node) or off.
    check : bool
        ``starchol run --check``: A's tiles are kept, and copied once more for the residual.
    gather : bool
        ``starchol run --gather``: node 0 assembles the dense factor.
    itemsize : int
        Bytes per entry (8: float64).
    received_bytes : int array (P,), optional
        Bytes each node receives, if the caller has counted them (the volume model with
        the same ``cache``); counted here otherwise.
    load : dict, optional
        :func:`starchol.model.load.node_load` of the map at NT with ``tile_bytes`` of
        this ``itemsize``, if the caller has it; computed here otherwise.
    exact : bool, optional
        Count per node from the owner tables (default: when they take at most
        :data:`EXACT_TABLE_BYTES`); False gives every node the mean of the balanced
        parts, with the received tiles of the map's leading term (P - 1 per stored tile
        for maps without one): a bound that needs no table.
    nrhs : int
        Right-hand sides K solved after the factorization (0: none).
    mixed : bool
        A mixed-precision solve (``--dtype mixed``): the factorization's parts in
        float32 whatever ``itemsize`` says, plus the float64 A, the float64 right-hand
        sides and a residual's received A tiles (see the module doc).

    Returns
    -------
    dict
        ``{part: int64 array (P,)}`` for the parts of :data:`PARTS` that apply (see the
        module doc), and ``total`` (their sum), all in bytes.
    """
    if mixed:
        # the factorization's parts: float32 (received_bytes and load given by the
        # caller must be float32's too)
        itemsize = SINGLE_BYTES
    p, c = tile_map.nodes, tile_map.slices
    ext = tile_extents(n, nb)
    nt = len(ext)
    tables = (c + 1) * nt * nt * INDEX_BYTES
    if exact is None:
        exact = tables <= EXACT_TABLE_BYTES
    ext = ext.astype(np.int64)
    lower = int((int(ext.sum()) ** 2 + int(ext @ ext)) // 2) * int(itemsize)  # A's tiles
    parts = {}
    if exact:
        sizes = tile_bytes(n, nb, itemsize)
        if load is None:
            load = node_load(tile_map, nt, tile_bytes=sizes)
        parts["tiles"] = load["bytes"]
        if received_bytes is None:
            received_bytes = transfer_pairs(tile_map.owner_maps(nt), p, cache=cache,
                                            row_weights=sizes,
                                            it=tile_map.iteration_slices(nt)).sum(axis=0)
        parts["received tiles"] = np.asarray(received_bytes, dtype=np.int64)
        tasks = load["tasks"]
    else:
        lead = tile_map.leading_factor()
        lead = p - 1 if lead is None else lead
        parts["tiles"] = np.full(p, -(-c * lower // p), dtype=np.int64)
        parts["received tiles"] = np.full(p, int(np.ceil(lead * lower / p)), dtype=np.int64)
        tasks = np.full(p, -(-_total_tasks(nt, c, tile_map.slice_block) // p),
                        dtype=np.int64)
    parts["tile handles"] = np.full(p, HANDLE_BYTES * handle_count(nt, c, tile_map.slice_block),
                                    dtype=np.int64)
    parts["tasks"] = TASK_BYTES * np.asarray(tasks, dtype=np.int64)
    parts["owner tables"] = np.full(p, tables, dtype=np.int64)
    parts["process"] = np.full(p, PROCESS_BASE_BYTES, dtype=np.int64)
    if check:
        if exact:
            home = np.bincount(factor_owners(tile_map, nt)[np.tril_indices(nt)],
                               weights=sizes[np.tril_indices(nt)], minlength=p)
            home = home.astype(np.int64)
        else:
            home = np.full(p, -(-lower // p), dtype=np.int64)
        parts["copies of A (--check)"] = 2 * home
    if gather:
        dense = np.zeros(p, dtype=np.int64)
        dense[0] = 2 * n * n * itemsize
        parts["gathered factor"] = dense
    if nrhs:
        kt = -(-int(nrhs) // nb)
        copies = (6 if check else 4) if mixed else (4 if check else 2)
        parts["right-hand sides"] = np.full(
            p, copies * n * int(nrhs) * (DOUBLE_BYTES if mixed else itemsize)
            + HANDLE_BYTES * nt * kt, dtype=np.int64)
    if mixed:
        if exact:
            idx = np.tril_indices(nt)
            home = np.bincount(factor_owners(tile_map, nt)[idx],
                               weights=tile_bytes(n, nb, DOUBLE_BYTES)[idx], minlength=p)
            parts["float64 A (mixed)"] = home.astype(np.int64)
        else:
            parts["float64 A (mixed)"] = np.full(p, -(-2 * lower // p), dtype=np.int64)
        if exact and nrhs:
            from .volume import residual_transfer_pairs_bytes

            parts["residual's received A tiles (mixed)"] = residual_transfer_pairs_bytes(
                tile_map, n, nb, nrhs, cache=cache).sum(axis=0).astype(np.int64)
        elif nrhs:
            parts["residual's received A tiles (mixed)"] = np.full(
                p, -(-4 * lower // p), dtype=np.int64)
    parts["total"] = sum(parts.values())
    return parts
