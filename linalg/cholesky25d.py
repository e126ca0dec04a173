"""2.5D tiled Cholesky (``sbc25d``, ``2dbc25d``) on the StarPU-MPI runtime.

c slices, each a 2D map on its own nodes (slice s: nodes s*P/c .. (s+1)*P/c - 1), each
keeping its own copy of every lower tile. Tile (i, j) is *factored* on slice j mod c:
that copy starts with A's values and ends holding L[i][j]; the copies of the other
slices start at zero and exist only if the slice updates the tile (slice s < j).

    for k in 0..NT-1, on slice s = k mod c:
        for m >= k, for every slice t != s with t < k:
            A_s[m][k] += A_t[m][k]                       (ADD, one transfer t -> s)
        L[k][k] = POTRF(A_s[k][k])
        for m > k:  L[m][k] = A_s[m][k] L[k][k]^-T       (TRSM)
        for n > k:  A_s[n][n] -= L[n][k] L[n][k]^T       (SYRK, into slice s's copy)
            for m > n:  A_s[m][n] -= L[m][k] L[n][k]^T   (GEMM, into slice s's copy)

Priorities are Chameleon's (as in 2D); an ADD gets the priority of the POTRF/TRSM it
feeds. A zero copy is first written by a SYRK/GEMM in W mode (C = -A B^T), so StarPU
allocates it only then and never reads zeros; after its ADD it is unregistered, so
partial sums do not stay in memory. The panel broadcasts stay inside slice s.

The factor ends on the composite owner array ``F[i, j] = owners[j mod c][i, j]``
(:func:`composite_owners`): a :class:`TiledMatrix` with owners F holds the factoring
copies, so :func:`starchol.linalg.cholesky.residual` and ``gather`` work as in 2D.
The traffic equals :func:`starchol.linalg.volume.transfer_pairs_bytes` of the map.
"""
import time

import numpy as np

from ..runtime.errors import check
from .cholesky import conclude


def slice_owner_stack(tile_map, nt):
    """(c, nt, nt) int64 owners of every slice (a 2D map gives c = 1)."""
    return np.ascontiguousarray(tile_map.owner_maps(nt), dtype=np.int64)


def composite_owners(slice_owners):
    """F[i, j] = slice_owners[j mod c, i, j]: where column j is factored (and L stays)."""
    so = np.asarray(slice_owners)
    c, nt, _ = so.shape
    cols = np.arange(nt) % c
    return np.ascontiguousarray(so[cols[None, :], np.arange(nt)[:, None], np.arange(nt)[None, :]],
                                dtype=np.int64)


def partial_mask(nt, c, s):
    """uint8 (nt, nt): tiles (i, j), i >= j, of which slice ``s`` keeps a partial sum
    (it updates them, s < j, and does not factor them, j mod c != s)."""
    j = np.arange(nt)
    cols = (j > s) & (j % c != s)
    return np.ascontiguousarray(np.tril(np.ones((nt, nt), dtype=bool)) & cols[None, :],
                                dtype=np.uint8)


def local_task_count(slice_owners, rank):
    """Tasks of the 2.5D Cholesky that run on ``rank``: every slice's updates of its
    copies, the ADDs and POTRF/TRSM of the factoring copies."""
    so = np.asarray(slice_owners)
    c, nt, _ = so.shape
    low = np.tril(np.ones((nt, nt), dtype=bool))
    j = np.arange(nt)
    total = 0
    for s in range(c):
        # iterations k < j with k mod c == s
        upd = np.where(j > s, (j - s - 1) // c + 1, 0)
        total += int(((so[s] == rank) & low).sum(axis=0) @ upd)
    home = (composite_owners(so) == rank) & low
    total += int(home.sum(axis=0) @ (1 + np.minimum(j, c - 1)))
    return total


def factorize_sliced(session, a, slice_owners, flush=True, keep=False, progress=None):
    """Factor ``a`` in place with the 2.5D algorithm over the slices' owners. Collective.

    ``a`` is a :class:`~starchol.linalg.tiled.TiledMatrix` whose owners are
    ``composite_owners(slice_owners)`` (it holds the factoring copies with A's values);
    ``slice_owners`` is the (c, nt, nt) array of the map (``tile_map.owner_maps(nt)``).
    Same timing, ``keep`` and error agreement as :func:`~starchol.linalg.cholesky.factorize`.

    Raises:
        NotPositiveDefiniteError: on every rank, with the first failing global column.
    """
    so = np.ascontiguousarray(slice_owners, dtype=np.int64)
    if so.ndim != 3 or so.shape[1:] != (a.nt, a.nt):
        raise ValueError(f"slice owners must be (c, {a.nt}, {a.nt}), got {so.shape}")
    if not np.array_equal(np.tril(composite_owners(so)), np.tril(a.owners)):
        raise ValueError("the matrix's owners must be composite_owners(slice_owners)")
    c = so.shape[0]
    comm = session.comm
    before = session.bytes_sent()
    comm.Barrier()
    with session.running():
        t0 = time.perf_counter()
        handles = session.register_tiles(a.owners, a.tiles, a.rows)
        copies = [session.register_tiles(so[s], {}, a.rows, stored=partial_mask(a.nt, c, s),
                                         lazy=True) for s in range(c)]
        try:
            code, tasks = handles.submit_cholesky_sliced(copies, flush)
            t_sub = time.perf_counter() - t0
            check(code, "starpu_mpi_task_insert")
            session.wait(progress, local_task_count(so, a.rank) if progress else None)
        finally:
            for h in copies:
                h.unregister()
        return conclude(session, a, handles, t0, t_sub, tasks, before, keep)


__all__ = ["composite_owners", "partial_mask", "slice_owner_stack", "local_task_count",
           "factorize_sliced"]
