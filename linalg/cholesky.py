"""Distributed tiled Cholesky (right-looking, lower) on the StarPU-MPI runtime.

The task graph, with Chameleon's priorities (NT tiles per side):

    for k in 0..NT-1:
        L[k][k] = POTRF(A[k][k])                         priority 2NT-2k
        for m > k:  L[m][k] = A[m][k] L[k][k]^-T         priority 2NT-2k-m     (TRSM)
        for n > k:  A[n][n] -= L[n][k] L[n][k]^T         priority 2NT-2k-n     (SYRK)
            for m > n:  A[m][n] -= L[m][k] L[n][k]^T     priority 2NT-2k-n-m   (GEMM)

Each task runs on the owner of the tile it writes; StarPU-MPI moves the panel tiles.
The loop itself is compiled (``TileHandles.submit_cholesky`` in pyx/_starpu.pyx) and
runs without the GIL; each rank inserts only the tasks it runs or feeds.

A POTRF failure is recorded by the kernel; after the wait the ranks agree on the first
failing global column with one reduction and all raise the same
:class:`~starchol.runtime.NotPositiveDefiniteError`.
"""
import time
from dataclasses import dataclass, field

import numpy as np

from ..runtime.collective import allreduce_max, allreduce_min
from ..runtime.errors import NotPositiveDefiniteError, check
from .tiled import TiledMatrix


@dataclass
class Factorization:
    """What one factorization did (identical on every rank except the ``bytes_sent`` row)."""
    time_s: float
    submit_s: float
    tasks: int
    bytes_sent: object = None     # bytes this rank sent to each rank (None: stats off)
    handles: object = field(default=None, repr=False)

    def gflops(self, n):
        return n ** 3 / 3.0 / self.time_s / 1e9


def flops(n):
    """Flop count of the factorization, N^3 / 3."""
    return n ** 3 / 3.0


def local_task_count(owners, rank):
    """Tasks of the tiled Cholesky that run on ``rank``: tile (i, j), i >= j, gets j
    updates (SYRK/GEMM) and one POTRF/TRSM, all on its owner."""
    owners = np.asarray(owners)
    mine = np.tril(owners == rank)
    return int((mine * (np.arange(owners.shape[0])[None, :] + 1)).sum())


def factorize(session, a, flush=True, keep=False, progress=None):
    """Factor the distributed matrix ``a`` in place (its tiles become L). Collective.

    ``progress(done, total)`` is called on this rank as its tasks complete.

    The time covers registration, submission and execution, from a barrier to the last
    rank's end. With ``keep`` the tile handles stay registered (for :func:`residual`);
    release them with ``result.handles.unregister()``.

    Raises:
        NotPositiveDefiniteError: on every rank, with the first failing global column.
    """
    comm = session.comm
    before = session.bytes_sent()
    comm.Barrier()
    with session.running():
        t0 = time.perf_counter()
        handles = session.register_tiles(a.owners, a.tiles, a.rows)
        code, tasks = handles.submit_cholesky(flush)
        t_sub = time.perf_counter() - t0
        check(code, "starpu_mpi_task_insert")
        session.wait(progress, local_task_count(a.owners, a.rank) if progress else None)
        return conclude(session, a, handles, t0, t_sub, tasks, before, keep)


def conclude(session, a, handles, t0, t_sub, tasks, bytes_before, keep):
    """After the wait: times and task counts agreed over the ranks, the bytes this rank
    sent since ``bytes_before``, and the first failing column agreed with one reduction
    (every rank raises the same :class:`NotPositiveDefiniteError`). Collective."""
    comm = session.comm
    elapsed = allreduce_max(comm, time.perf_counter() - t0)
    after = session.bytes_sent()
    sent = None if after is None else after - bytes_before
    t_sub = allreduce_max(comm, t_sub)
    tasks = comm.allreduce(int(tasks))
    # the first failing global column (LAPACK info is 1-based inside tile k)
    info = np.asarray(handles.info)
    bad = np.nonzero(info > 0)[0]
    local = int(a.offsets[bad[0]] + info[bad[0]] - 1) if len(bad) else a.n
    first = allreduce_min(comm, local)
    if first < a.n:
        handles.unregister()
        raise NotPositiveDefiniteError(first, a.n)
    if not keep:
        handles.unregister()
        handles = None
    return Factorization(elapsed, t_sub, tasks, sent, handles)


def residual(session, factored, original):
    """||A - L L^T||_F / ||A||_F, computed where the tiles live. Collective.

    ``factored`` is the :class:`Factorization` of a ``factorize(..., keep=True)`` call;
    ``original`` is a fresh copy of A's local tiles (same layout), overwritten with the
    residual. The update R -= L L^T runs as StarPU tasks (SYRK/GEMM), the norms are
    summed with one reduction. Unregisters both matrices.
    """
    comm = session.comm
    norm_a = comm.allreduce(original.frobenius_sq_local())
    r = session.register_tiles(original.owners, original.tiles, original.rows)
    try:
        with session.running():
            code, _ = factored.handles.submit_llt_residual(r)
            check(code, "starpu_mpi_task_insert")
            session.wait()
    finally:
        r.unregister()
        factored.handles.unregister()
    norm_r = comm.allreduce(original.frobenius_sq_local())
    return float(np.sqrt(norm_r / norm_a)) if norm_a > 0 else float(np.sqrt(norm_r))


def gather(session, a, root=0):
    """The dense lower-triangular matrix of ``a``'s tiles on ``root`` (None elsewhere).
    The tiles must not be registered. Collective."""
    parts = session.comm.gather(a.tiles, root=root)
    if session.comm.Get_rank() != root:
        return None
    tiles = {}
    for p in parts:
        tiles.update(p)
    return a.to_dense_lower(tiles)


def gather_bytes(session, row, root=0):
    """The (P, P) matrix of bytes sent from rank (row) to rank (column), on ``root``. Collective."""
    rows = session.comm.gather(None if row is None else np.asarray(row, dtype=np.int64), root=root)
    if session.comm.Get_rank() != root or rows[0] is None:
        return None
    return np.vstack(rows)


__all__ = ["Factorization", "factorize", "residual", "gather", "gather_bytes", "flops",
           "TiledMatrix"]
