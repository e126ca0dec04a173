"""Peak memory of every node (MPI rank) of a factorization: the one home of the rule.

``starchol plan`` (memory per node of each map), ``starchol run``'s pre-flight check and
``starchol slurm --mem auto`` use :func:`node_memory`. A node's peak, in bytes:

- ``tiles``: its tiles, every 2.5D slice's copies included (:func:`node_load`);
- ``received tiles``: the tile copies it holds at once. The factorization is submitted in
  a window of W panels (:func:`default_window`, ``starchol run --window``): a rank
  submits iteration k once its tasks of iteration k - W are done, a receive buffer is
  allocated when the task that needs it is submitted, and column j's received copies
  are flushed once iteration j's readers have run (no later iteration reads them). So a
  node holds the copies of at most W consecutive iterations: the most it receives in
  any W consecutive iterations (:func:`panel_received_bytes`). W = 0 (the whole graph at
  once) holds every copy to the end: the total it receives. With the cache off a copy
  is received per task and most are freed early; the count is an upper bound;
- ``tile handles``: :data:`HANDLE_BYTES` for each tile handle the node registers
  (StarPU's handle structures): only the tiles it owns or its tasks read
  (:func:`~.handles.cholesky_handle_counts`, the rule of :mod:`.handles`); all of them
  registered at the start, the other nodes' tiles of column k unregistered after
  iteration k. Without the owner tables, the bound of every tile of every copy
  (:func:`handle_count`);
- ``tasks``: :data:`TASK_BYTES` for each task of the node submitted and not yet run: the
  most in any W consecutive iterations (every task with W = 0);
- ``owner tables``: (c + 1) NT^2 int64, each slice's owners and the composite;
- ``process``: :data:`PROCESS_BASE_BYTES` for Python, numpy, MPI and StarPU;
- with ``check`` (``starchol run --check``): A's tiles twice more (the copy kept for the
  residual, and the residual's work copy), and the tiles of L the residual A - L L^T
  receives: those its tasks read and it does not own
  (:func:`~.handles.llt_residual_handles`), all held until the residual ends (without
  the owner tables: every tile of L but a node's share);
- with ``gather`` on node 0: the dense N x N factor, twice (tiles and the assembled array);
- with ``nrhs`` K > 0 (a solve after the factorization, ``starchol run --rhs/--nrhs``): a
  bound on the right-hand sides, on every node: B and X (N x K each, solved in place, so
  one of them) plus a received copy of every row tile, and a handle per tile; with
  ``check`` too, as much again (the copy of B kept for the solve's residual, and the
  residual B - A X); and when the solve (or the residual) runs the variant that keeps L
  (A) in place, its partial sums: rows(m) x K entries per (row block m, node) pair that
  writes one (:func:`~starchol.model.rhs_volume.partial_sum_bytes`; both passes of the
  solve are registered together).
- with ``mixed`` (``starchol run --dtype mixed``, :func:`~starchol.linalg.mixed.solve_mixed`):
  the factorization's parts in float32 (``itemsize`` 4), plus the float64 A kept
  beside its float32 copy (its tiles on their holders), the right-hand sides in float64
  (B, X, the residual R and the float32 correction: 4 copies, 6 with ``check``), and a
  bound on the tiles one residual B - A X receives (its model's received bytes, in the
  variant it runs: A's tiles, freed row by row, or X's blocks and partial sums). A fallback to float64 needs what a float64 run needs
  instead (the float32 factor is freed first): not counted here.

The constants were fitted on ``starchol run`` under mpirun in the default window (peak
RSS per rank from getrusage; docs/volume-model.md, "Memory per node"): 11-13 kB per
handle and 82-84 MB per process over 27 ranks of 6 runs, rounded up to 14 kB and 85 MB
(the model is then within -1 % .. +5 % of every rank's peak; the fit with the whole
graph at once had 20.5 kB per handle, 0.93 kB per task, 83 MB per process).
"""
import numpy as np

from ..distributions.base import iteration_slices, slice_updates
from ..integers import check_int
from .counts import slice_task_weights, task_count
from .handles import cholesky_handle_counts, llt_residual_handles, reader_thresholds
from .load import node_load
from .mixed_volume import SINGLE_BYTES
from .volume import (DOUBLE_BYTES, factor_owners, stored_tiles, tile_bytes, tile_extents,
                     transfer_pairs)

#: bytes per registered tile handle (the measured figure: docs/volume-model.md, "Memory
#: per node")
HANDLE_BYTES = 14_000
#: bytes per task of the node submitted and not yet run (measured with the whole graph
#: at once, 2026-12-01)
TASK_BYTES = 1_000
#: memory of a rank before its matrix: interpreter, numpy, MPI, StarPU (measured, as
#: above)
PROCESS_BASE_BYTES = 85 * 10**6
#: owner tables up to this size are built for the exact per-node figures; above it
#: (NT above about 11,000) the parts are the balanced means (:func:`node_memory`)
EXACT_TABLE_BYTES = 2 * 10**9
INDEX_BYTES = 8

#: the submission window's iterations (:func:`default_window`): 6, not 3 (measured on 6
#: emulated nodes at 10 Mbit/s, docs/runtime.md)
WINDOW = 6
#: by default, a graph of at most this many tasks per node is submitted whole
WINDOW_MIN_TASKS = 256

#: the parts of :func:`node_memory`, in the order the messages print them
PARTS = ("tiles", "received tiles", "tile handles", "tasks", "owner tables", "process",
         "copies of A (--check)", "residual's received tiles (--check)", "gathered factor", "right-hand sides",
         "float64 A (mixed)", "residual's received tiles (mixed)",
         "partial sums (rhs solve)")


def default_window(nt, nodes=1):
    """The submission window W (iterations) of a factorization of ``nt`` tile columns:
    the one home of the rule (``starchol run --window`` overrides it).

    A rank submits iteration k once its own tasks of iteration k - W are done, so W - 1
    iterations stay submitted ahead of the one that runs. The critical path (POTRF(k),
    TRSM(k + 1, k), SYRK(k + 1, k + 1, k), POTRF(k + 1)) needs iteration k + 1
    submitted while k runs, and a tile is received only once the task that reads it is
    submitted: on a slow network the receives must be posted several iterations ahead
    or the busiest link idles. :data:`WINDOW` = 6: on 6 emulated nodes at 10 Mbit/s
    (N = 3072, NB = 128, NT = 24), 2dbc 2x3 took 1.11x the whole graph's time at W = 3,
    1.04x at W = 6 and 1.02x at W = 12 (sbc: no change); the simulator gives 1.22x,
    1.06x and 1.00x. 0 (no window: the whole graph at once) when nt <= W, and when the
    graph has at most :data:`WINDOW_MIN_TASKS` tasks per node (``nodes``): its copies
    are few, and the waits would cost more than they save (N = 1024, NB = 256, one
    rank, in the same run: 9.7 ms a factorization with W = 3 against 7.1 ms without)."""
    nt = int(nt)
    if nt <= WINDOW or task_count(nt) <= WINDOW_MIN_TASKS * max(1, int(nodes)):
        return 0
    return WINDOW


def check_window(window, nt, nodes=1):
    """The window to use for ``nt`` tile columns on ``nodes`` nodes: ``window``
    (iterations, an int >= 0; 0 or >= nt: the whole graph at once, returned as 0) or,
    when None, :func:`default_window`. ValueError for a negative or non-integer window."""
    if window is None:
        return default_window(nt, nodes)
    window = check_int(window, "window", 0, error=ValueError, exact=False)
    return 0 if window >= int(nt) else window


def _windowed(per_panel, window):
    """(P,): the most of ``per_panel`` (nt, P) in any ``window`` consecutive rows (all
    rows with window 0)."""
    per_panel = np.asarray(per_panel, dtype=np.int64)
    if window <= 0 or window >= per_panel.shape[0]:
        return per_panel.sum(axis=0)
    cum = np.vstack([np.zeros((1, per_panel.shape[1]), dtype=np.int64),
                     np.cumsum(per_panel, axis=0)])
    return (cum[window:] - cum[:-window]).max(axis=0)


def panel_received_bytes(tile_map, n, nb, itemsize=DOUBLE_BYTES):
    """Bytes each node receives in each iteration of the factorization, cache on:
    int64 (nt, P). Iteration k (on slice it[k], whose owners o run it) sends L[k][k] to
    the other owners of column k, each L[m][k] (m > k) to the other nodes that read it
    (rows and column m of the trailing matrix), and for a 2.5D map each other slice's
    partial sum of column k to o's owner of the tile. Summed over k, every node's total
    equals :func:`~.volume.transfer_pairs`' received bytes (cache on)."""
    p, c = tile_map.nodes, tile_map.slices
    ext = tile_extents(n, nb)
    nt = len(ext)
    so = np.asarray(tile_map.owner_maps(nt), dtype=np.int64).reshape(c, nt, nt)
    it = np.asarray(tile_map.iteration_slices(nt), dtype=np.int64)
    size = np.outer(ext, ext).astype(np.int64) * int(itemsize)
    first = np.full(c, nt, dtype=np.int64)
    for k in range(nt - 1, -1, -1):
        first[it[k]] = k
    out = np.zeros((nt, p), dtype=np.int64)
    nodes = np.arange(p)[:, None]
    reads = [reader_thresholds(so[s], p) if (it == s).any() else None for s in range(c)]
    for k in range(nt):
        s = int(it[k])
        o = so[s]
        thr, col = reads[s]
        # L[k][k]: the TRSM owners of column k
        out[k] += np.where(col[:, k] & (np.arange(p) != o[k, k]), size[k, k], 0)
        if k + 1 < nt:
            rd = (thr[:, k + 1:] > k) & (nodes != o[k + 1:, k][None, :])
            out[k] += rd.astype(np.int64) @ size[k + 1:, k]
        for t in range(c):
            if t == s or first[t] >= k:
                continue
            send, recv = so[t][k:, k], o[k:, k]
            moved = send != recv
            out[k] += np.bincount(recv[moved], weights=size[k:, k][moved],
                                  minlength=p).astype(np.int64)
    return out


def panel_tasks(tile_map, nt):
    """Tasks each node runs in each iteration of the factorization: int64 (nt, P) (the
    ADDs of the other slices' partial sums, POTRF, TRSM, SYRK and GEMM of iteration k on
    its slice's owners; summed over k: :func:`~starchol.distributions.load.task_counts`)."""
    p, c = tile_map.nodes, tile_map.slices
    so = np.asarray(tile_map.owner_maps(nt), dtype=np.int64).reshape(c, nt, nt)
    it = np.asarray(tile_map.iteration_slices(nt), dtype=np.int64)
    first = np.full(c, nt, dtype=np.int64)
    for k in range(nt - 1, -1, -1):
        first[it[k]] = k
    out = np.zeros((nt, p), dtype=np.int64)
    for s in range(c):
        o = so[s]
        # trailing[k, b]: tiles (m, n), m >= n > k, of b (the SYRK/GEMM targets)
        cols = np.zeros((nt + 1, p), dtype=np.int64)
        for j in range(nt):
            cols[j] = np.bincount(o[j:, j], minlength=p)
        trailing = np.cumsum(cols[::-1], axis=0)[::-1]      # rows n >= j
        for k in np.flatnonzero(it == s):
            out[k] += trailing[k + 1] + np.bincount(o[k:, k], minlength=p)
            adds = sum(1 for t in range(c) if t != s and first[t] < k)
            if adds:
                out[k] += adds * np.bincount(o[k:, k], minlength=p)
    return out


def handle_count(nt, c, block=None):
    """The most tile handles a rank can register in the factorization (every tile of
    every copy): the S = NT(NT+1)/2 factoring copies, and for a 2.5D map (c > 1) each
    slice's partial sums, tiles (i, j) of the columns it updates and does not factor
    (``block``: b of :func:`~.base.iteration_slices`, default the maps' default). A
    rank registers only those it uses (:func:`~.handles.cholesky_handle_counts`); this
    bound is the model's figure without the owner tables."""
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
                mixed=False, window=None):
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
        the same ``cache``); counted here otherwise. Used for the whole graph (window 0)
        and with the cache off; a window with the cache on counts per iteration.
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
        sides and a residual's received tiles (see the module doc).
    window : int, optional
        The submission window in iterations (:func:`check_window`: None is
        :func:`default_window`, 0 the whole graph at once).

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
    window = check_window(window, nt, p)
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
        if window and cache:
            received_bytes = _windowed(panel_received_bytes(tile_map, n, nb, itemsize),
                                       window)
        elif received_bytes is None:
            received_bytes = transfer_pairs(tile_map.owner_maps(nt), p, cache=cache,
                                            row_weights=sizes,
                                            it=tile_map.iteration_slices(nt)).sum(axis=0)
        parts["received tiles"] = np.asarray(received_bytes, dtype=np.int64)
        tasks = _windowed(panel_tasks(tile_map, nt), window) if window else load["tasks"]
    else:
        lead = tile_map.leading_factor()
        lead = p - 1 if lead is None else lead
        parts["tiles"] = np.full(p, -(-c * lower // p), dtype=np.int64)
        if window:
            # the first W iterations, the largest: (nt - k) tiles of NB^2 each, sent to
            # one node more than the map's leading term (a node's share of one panel is
            # above the mean: measured up to 1.2x for sbc); (nt - k)^2 / 2 tasks each
            k = np.arange(window)
            panel = int(((nt - k) * int(nb) ** 2 * int(itemsize)).sum())
            parts["received tiles"] = np.full(p, int(np.ceil((lead + 1) * panel / p)),
                                              dtype=np.int64)
            tasks = np.full(p, -(-int(((nt - k) * (nt - k + 1) // 2 + (c - 1) * (nt - k))
                                      .sum()) // p), dtype=np.int64)
        else:
            parts["received tiles"] = np.full(p, int(np.ceil(lead * lower / p)),
                                              dtype=np.int64)
            tasks = np.full(p, -(-_total_tasks(nt, c, tile_map.slice_block) // p),
                            dtype=np.int64)
    if exact:
        handles = cholesky_handle_counts(tile_map.owner_maps(nt),
                                         tile_map.iteration_slices(nt), p)
    else:
        handles = np.full(p, handle_count(nt, c, tile_map.slice_block), dtype=np.int64)
    parts["tile handles"] = HANDLE_BYTES * handles
    parts["tasks"] = TASK_BYTES * np.asarray(tasks, dtype=np.int64)
    parts["owner tables"] = np.full(p, tables, dtype=np.int64)
    parts["process"] = np.full(p, PROCESS_BASE_BYTES, dtype=np.int64)
    if check:
        if exact:
            home = np.bincount(factor_owners(tile_map, nt)[np.tril_indices(nt)],
                               weights=sizes[np.tril_indices(nt)], minlength=p)
            home = home.astype(np.int64)
            f = factor_owners(tile_map, nt)
            got = np.zeros(p, dtype=np.int64)
            for b in range(p):
                used, own = llt_residual_handles(f, b)
                got[b] = int(sizes[used.astype(bool) & ~own.astype(bool)].sum())
        else:
            home = np.full(p, -(-lower // p), dtype=np.int64)
            got = np.full(p, lower - home[0], dtype=np.int64)
        parts["copies of A (--check)"] = 2 * home
        parts["residual's received tiles (--check)"] = got
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
        parts["partial sums (rhs solve)"] = _partial_sums(tile_map, n, nb, nrhs, itemsize,
                                                          mixed, check, cache, exact)
    if mixed:
        if exact:
            idx = np.tril_indices(nt)
            home = np.bincount(factor_owners(tile_map, nt)[idx],
                               weights=tile_bytes(n, nb, DOUBLE_BYTES)[idx], minlength=p)
            parts["float64 A (mixed)"] = home.astype(np.int64)
        else:
            parts["float64 A (mixed)"] = np.full(p, -(-2 * lower // p), dtype=np.int64)
        if exact and nrhs:
            from .rhs_volume import choose_variant, residual_bytes_by_variant

            by = residual_bytes_by_variant(tile_map, n, nb, nrhs, cache=cache)
            parts["residual's received tiles (mixed)"] = by[choose_variant(by)[0]].sum(
                axis=0).astype(np.int64)
        elif nrhs:
            parts["residual's received tiles (mixed)"] = np.full(
                p, -(-4 * lower // p), dtype=np.int64)
    parts["total"] = sum(parts.values())
    return parts


def _partial_sums(tile_map, n, nb, nrhs, itemsize, mixed, check, cache, exact):
    """Bytes per node (int64 (P,)) of the partial sums of the right-hand-side variant:
    those of the solve (both passes at once) when it runs that variant (the model's
    choice), and with ``mixed`` or ``check`` those of one residual B - A X in float64
    when it does. Without the tables (``exact`` False): the bound of every row block on
    every node, 2 N K entries for the solve and N K for a residual."""
    from .rhs_volume import (choose_variant, partial_sum_bytes, residual_bytes_by_variant,
                             solve_bytes_by_variant)

    p = tile_map.nodes
    solve_item = SINGLE_BYTES if mixed else itemsize
    residual = mixed or check
    if not exact:
        return np.full(p, 2 * n * int(nrhs) * solve_item
                       + (n * int(nrhs) * DOUBLE_BYTES if residual else 0), dtype=np.int64)
    out = np.zeros(p, dtype=np.int64)
    if choose_variant(solve_bytes_by_variant(tile_map, n, nb, nrhs, cache=cache,
                                             itemsize=solve_item))[0] == "rhs":
        out += partial_sum_bytes(tile_map, n, nb, nrhs, "both", solve_item)
    res_item = DOUBLE_BYTES if mixed else itemsize
    if residual and choose_variant(residual_bytes_by_variant(
            tile_map, n, nb, nrhs, cache=cache, itemsize=res_item))[0] == "rhs":
        out += partial_sum_bytes(tile_map, n, nb, nrhs, "residual", res_item)
    return out
