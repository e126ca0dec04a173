"""Distributed Cholesky, solve and log-determinant on the StarPU-MPI runtime.

    A = DistributedMatrix.from_function(fn, (n, n), nb, tile_map)
    F = cholesky(A, tile_map)          # any map: 2D, 2.5D (slices from the map), custom
    X = F.solve(B)                     # B: DistributedMatrix of kind "rhs"
    F.logdet(), F.record, F.solve_record

One Python path for every map: the checks (collective), then one compiled graph loop
(``starchol.runtime._graphs.cholesky``: the right-looking tiled Cholesky over c slices,
c = 1 for a 2D map), then the agreement on failures and the typed record
(:class:`~starchol.linalg.record.RunRecord`). The task graph, with Chameleon's
priorities (NT tiles per side), iteration k on slice s = it[k] (the map's
``iteration_slices``: blocks of b iterations, the slices visited back and forth):

    for m >= k, every other slice t that updated column k:  A[m][k] += P_t[m][k]  (ADD)
    L[k][k] = POTRF(A[k][k])                         priority 2NT-2k
    for m > k:  L[m][k] = A[m][k] L[k][k]^-T         priority 2NT-2k-m     (TRSM)
    for n > k:  A_s[n][n] -= L[n][k] L[n][k]^T       priority 2NT-2k-n     (SYRK)
        for m > n:  A_s[m][n] -= L[m][k] L[n][k]^T   priority 2NT-2k-n-m   (GEMM)

Each task runs on the owner of the tile it writes; StarPU-MPI moves the panel tiles
(and the 2.5D partial sums). A POTRF failure is recorded by the kernel; after the wait
the ranks agree on the first failing global column with one reduction and all raise the
same :class:`~starchol.linalg.errors.NotPositiveDefiniteError` (a
``numpy.linalg.LinAlgError``).
"""
import numpy as np

from ..collective import allreduce_min
from ..model.counts import local_task_count, task_count
from ..model.handles import cholesky_handles, partial_mask
from ..model.operations import predicted_pairs_bytes
from ..runtime.errors import agree_callback_error
from .computations import (computation_record, get_session, graphs, small_graph,
                           submit_windowed)
from .distributed import DistributedMatrix
from .errors import NotPositiveDefiniteError
from .factor import Factor, backward_error, rhs_residual, symmetric_tiles
from .operands import check_cholesky_input, check_operand


def cholesky(A, tile_map, session=None, overwrite_a=False, progress=None, flush=True,
             window=None):
    """Factor A = L L^T under any tile map. Collective.

    Parameters
    ----------
    A : DistributedMatrix
        Symmetric (lower triangle used), float64 or float32, laid out by ``tile_map``.
    tile_map : starchol.distributions.TileMap
        Any map of :func:`starchol.distributions.get_map`: 2D (2dbc, sbc, sbc-basic,
        pplane, aplane, sym) or 2.5D (2dbc25d, sbc25d, sym25d:
        :data:`~starchol.distributions.MAPS_25D`; the slices come from the map), or a
        :class:`~starchol.distributions.custom.CustomMap`; one node per MPI rank.
    session : Session, optional
        A running session. Default: the running session of this process, or a new one
        on A's communicator.
    overwrite_a : bool
        Factor in place in A's tiles (no copy; A then holds L); a read-only tile
        is a UsageError.
    progress : callable, optional
        ``progress(done, total)`` on this rank while its tasks run (every 0.25 s, and
        once at the end; it adds no wait). If it raises, it is not called again, the
        factorization goes on, and every rank then raises :class:`~starchol.runtime.errors.CallbackError`.
    flush : bool
        Drop StarPU-MPI's received copies once read (as the volume model assumes).
        The same on every rank (StarPU-MPI's cache is flushed on all ranks or none).
    window : int, optional
        The submission window W in iterations (panels): each rank submits iteration k
        once its own tasks of iteration k - W are done, which bounds the received tile
        copies and the tasks held at once (:mod:`starchol.model.memory`). Default
        :func:`~starchol.model.memory.default_window`; 0: the whole graph at once. The
        factor and the bytes moved are the same whatever W. The same on every rank. The
        factor's solves and residuals are submitted in the same window
        (:attr:`Factor.window`).

    Returns
    -------
    Factor

    Raises
    ------
    UsageError
        On every rank, when any rank's input is wrong: a bad ``window``, a map whose
        node count is not
        the rank count, A made on a communicator that is not the session's (other
        processes, or the same in another order), A not laid out by the map, a missing or misshapen tile, a wrong
        dtype, ranks given different sizes or maps, or a read-only tile with
        ``overwrite_a``.
    NotPositiveDefiniteError
        On every rank, with the first failing global column.
    CallbackError
        On every rank, after the factorization, when ``progress`` raised on some rank
        (naming it, the rank and the original exception, which is the ``__cause__`` on
        that rank); the session stays usable. A failed factorization takes precedence.
    SessionError
        ``session`` is not running (never started, or shut down).
    """
    session = get_session(A.comm if isinstance(A, DistributedMatrix) else None, session)
    so, window = check_cholesky_input(session.comm, A, tile_map, overwrite_a, flush, window)
    L = A if overwrite_a else A.copy()
    info = np.zeros(L.nt, dtype=np.int64)
    it = np.ascontiguousarray(tile_map.iteration_slices(L.nt), dtype=np.int64)
    tasks, failed, c = _factor(session, L, so, it, info, flush, progress, window)
    first, finite = _first_failure(L, info, session.comm, failed)
    if first < L.n:
        raise NotPositiveDefiniteError(first, L.n, finite=finite)
    predicted = None
    if session.stats:
        predicted = predicted_pairs_bytes("cholesky", tile_map, L.n, L.nb,
                                          cache=session.cache, itemsize=L.itemsize)
    return Factor(L, tile_map, session,
                  computation_record(session, "cholesky", tile_map, L, c, tasks, predicted),
                  window=window)


def _factor(session, L, so, it, info, flush, progress, window=0):
    """The Cholesky graph of L in place, over the slices whose owners are ``so`` (c, nt,
    nt), iteration k on slice ``it[k]``, POTRF failures in ``info``, submitted in a
    window of ``window`` iterations (0: all at once). Returns the tasks this rank
    submitted, this rank's ``CallbackError`` or None (for the caller to agree on) and the
    :class:`~starchol.runtime.computation.Computation` (its times and bytes). Collective.

    The workers sleep while this thread registers the tiles and submits the first panel
    (the whole graph when it is small and not windowed), then run it while the rest is
    submitted: workers woken earlier only compete with this thread for the cores
    (benchmarks/small_sizes.py). With a window, iteration k is submitted once this
    rank's tasks of iteration k - W are done (:meth:`~.Computation.wait_iteration`:
    a Ctrl-C and the progress callback reach Python while it waits). With GPUs, final
    tiles are copied back while the factorization goes on (``c.writeback``)."""
    nt, c = L.nt, so.shape[0]
    split = nt if small_graph(task_count(nt), session.comm) else 1
    compiled = graphs()
    total = local_task_count(so, session.comm.Get_rank(), it) if progress else None
    # the handles this rank registers: the tiles it owns or its tasks read (model.handles)
    used, used_partials = cholesky_handles(so, it, session.comm.Get_rank())
    with session.computation(deferred=True, measured=True) as comp:
        home = comp.register(L.owners, L.tiles, L.rows, stored=used, elemsize=L.itemsize)
        partials = [comp.register(so[s], {}, L.rows, stored=used_partials[s], lazy=True,
                                  elemsize=L.itemsize)
                    for s in range(c)] if c > 1 else []
        # from here on, even when it fails or is interrupted, L holds a (partial) factor
        L.factor = True

        def submit(k_begin, k_end, track):
            return compiled.cholesky(home, partials, so, it, info, flush, k_begin, k_end,
                                     comp.writeback, track)

        tasks = submit_windowed(comp, submit, nt, window, split, progress, total)
        comp.submitted()
        failed = comp.wait(progress, total)
    return tasks, failed, comp


def _first_failure(L, info, comm, failed=None):
    """The first global column where the factorization failed, on every rank, and whether
    its pivot was finite: ``(L.n, True)`` when none did. Collective.

    ``failed``: this rank's :class:`~starchol.runtime.errors.CallbackError` (its
    ``progress`` callback raised), or None. When no column failed and some rank's
    callback raised, every rank raises that rank's error (the lowest one's): a failed
    factorization takes precedence.

    A failure is LAPACK's ``info`` of a POTRF (1-based inside tile k: a pivot <= 0), or
    a diagonal entry of a local factor tile that is NaN or Inf: OpenBLAS's ``?potrf``
    passes NaN pivots without an error (cuSOLVER's is not relied on either), and a NaN or Inf anywhere in A's
    lower triangle reaches the diagonal of a later tile through TRSM and SYRK. Costs
    one pass over NB entries per local diagonal tile.
    """
    local = 2 * L.n
    bad = np.nonzero(info > 0)[0]
    if len(bad):
        local = 2 * int(L.offsets[bad[0]] + info[bad[0]] - 1)
    for k in range(L.nt):
        tile = L.tiles.get((k, k))
        if tile is None:
            continue
        off = np.nonzero(~np.isfinite(np.diagonal(tile)))[0]
        if len(off):
            local = min(local, 2 * int(L.offsets[k] + off[0]) + 1)
            break
    # one reduction, in which a rank whose callback raised sends -1; then (rarely, on
    # every rank alike) the column again, and the callback's error if none failed
    first = allreduce_min(comm, -1 if failed is not None else local)
    if first < 0:
        first = allreduce_min(comm, local)
        if first >= 2 * L.n:
            agree_callback_error(comm, failed)
    return first // 2, not first % 2


__all__ = ["backward_error", "check_operand", "cholesky", "Factor", "get_session",
           "partial_mask", "rhs_residual", "symmetric_tiles"]
