"""The tiles each node registers a StarPU handle for in the factorization, the solves
and the residuals: the one home of the rule (``linalg/cholesky.py`` and
``linalg/factor.py`` register them, :mod:`.memory` counts the factorization's).

A node registers a tile's handle only where it uses it (Chameleon registers on first
use): the tiles it owns, and the tiles that the tasks it runs read. A node that only
feeds a task (owns a tile the task reads, another node runs it) needs no handle of the
task's other tiles: the binding sends the tile itself, as ``starpu_mpi_task_insert``
would (the same sends and bytes; pyx/_binding.pyx, ``_feed``).

In the factorization over c slices (:func:`~starchol.linalg.cholesky.cholesky`; slice
s's owners ``so[s]``, iteration k on slice it[k], the factoring copy of tile (i, j) on
``so[it[j]][i, j]``), a node b registers

- of the factoring copies (``home``): its own tiles, L[k][k] for every column k where
  it owns a tile (m, k), m > k, of slice it[k] (its TRSM), and L[m][k], m > k, where it
  owns a tile (m, n), k < n <= m, or (n, m), n > m, of slice it[k] (its SYRK and GEMM
  read L[m][k]);
- of slice t's partial sums (c > 1; :func:`partial_mask`): those it owns (its updates
  write them) and those of the tiles whose factoring copy it owns (its ADD reads them).

A non-owned factoring copy of column k is unregistered once iteration k is submitted (no
later task reads it), a partial sum after its ADD; the peak is the count at the start.
Tiles are (i, j) = (tile row, tile column), i >= j; counts are in handles.
"""
import numpy as np

from ..distributions.base import iteration_slices, slice_updates


def partial_mask(nt, c, s, it=None):
    """uint8 (nt, nt): tiles (i, j), i >= j, of which slice ``s`` keeps a partial sum
    (it updates them, it[k] == s for some k < j, and does not factor them, it[j] != s).
    ``it``: the slice of each iteration (default: the maps' default rule)."""
    it = iteration_slices(nt, c) if it is None else np.asarray(it)
    cols = (slice_updates(it, c)[s] > 0) & (it != s)
    return np.ascontiguousarray(np.tril(np.ones((nt, nt), dtype=bool)) & cols[None, :],
                                dtype=np.uint8)


def reader_thresholds(o, p):
    """``(thr, col)`` for one slice's owners ``o`` (nt, nt) on ``p`` nodes: node b reads
    L[m][k] (m > k) in an iteration k of this slice iff k < thr[b, m] -- it owns a tile
    of column m below the diagonal (thr = m), or a tile (m, n) with k < n <= m (thr = the
    last such n); ``col`` (p, nt) bool: b owns a tile (m, n) with m > n (the TRSM readers
    of L[n][n]). int64 / bool arrays (p, nt)."""
    o = np.asarray(o, dtype=np.int64)
    nt = o.shape[0]
    last = np.full((p, nt), -1, dtype=np.int64)
    col = np.zeros((p, nt), dtype=bool)
    for m in range(nt):
        np.maximum.at(last[:, m], o[m, :m + 1], np.arange(m + 1))
        col[o[m + 1:, m], m] = True
    thr = np.where(col, np.arange(nt)[None, :], last)
    return thr, col


def _home_owners(so, it):
    # the owner of the factoring copy of (i, j): slice it[j]'s
    nt = so.shape[1]
    return so[it, :, np.arange(nt)].T if nt else np.zeros((0, 0), dtype=np.int64)


def cholesky_handles(so, it, rank, reads=None, masks=None):
    """The tiles node ``rank`` registers in the factorization (see the module doc).

    Parameters
    ----------
    so : int array (c, nt, nt)
        Every slice's owners (``TileMap.owner_maps(nt)``).
    it : int array (nt,)
        The slice of each iteration (``TileMap.iteration_slices(nt)``).
    rank : int
        The node.
    reads : list, optional
        :func:`reader_thresholds` of each slice (None for a slice with no iteration), if
        the caller has them (:func:`cholesky_handle_counts` computes them once).
    masks : list, optional
        :func:`partial_mask` of each slice as bool arrays (c > 1), likewise.

    Returns
    -------
    (home, partials)
        ``home``: uint8 (nt, nt), the factoring copies; ``partials``: c uint8 (nt, nt)
        arrays, slice t's partial sums (an empty list for c = 1).
    """
    so = np.asarray(so, dtype=np.int64)
    it = np.asarray(it, dtype=np.int64)
    c, nt = so.shape[0], so.shape[1]
    p = int(so.max()) + 1 if so.size else 1
    p = max(p, int(rank) + 1)
    if reads is None:
        reads = [reader_thresholds(so[s], p) if (it == s).any() else None
                 for s in range(c)]
    own = _home_owners(so, it)
    lower = np.tril(np.ones((nt, nt), dtype=bool))
    home = lower & (own == rank)
    k = np.arange(nt)
    if nt:
        # thr_k[m, k]: the threshold of node rank for row m in iteration k's slice
        thr_k = np.stack([reads[int(s)][0][rank] for s in it], axis=1)
        col_k = np.array([reads[int(s)][1][rank, j] for j, s in enumerate(it)], dtype=bool)
        home |= np.tril(k[None, :] < thr_k, -1)
        home[k, k] |= col_k
    partials = []
    if c > 1:
        if masks is None:
            masks = [partial_mask(nt, c, t, it).astype(bool) for t in range(c)]
        for t, mask in enumerate(masks):
            partials.append(np.ascontiguousarray(mask & ((so[t] == rank) | (own == rank)),
                                                 dtype=np.uint8))
    return np.ascontiguousarray(home, dtype=np.uint8), partials


def cholesky_handle_counts(so, it, p):
    """Handles each node registers in the factorization: int64 (p,) (the sums of
    :func:`cholesky_handles`; at most NT(NT+1)/2 plus the partial sums)."""
    so = np.asarray(so, dtype=np.int64)
    it = np.asarray(it, dtype=np.int64)
    c = so.shape[0]
    reads = [reader_thresholds(so[s], p) if (it == s).any() else None for s in range(c)]
    nt = so.shape[1]
    masks = [partial_mask(nt, c, t, it).astype(bool) for t in range(c)] if c > 1 else None
    out = np.zeros(p, dtype=np.int64)
    for b in range(p):
        home, partials = cholesky_handles(so, it, b, reads, masks)
        out[b] = int(home.sum()) + sum(int(x.sum()) for x in partials)
    return out


# ---------------------------------------------------------------------------
# the solves and the residuals: L (A) on the factor's owners F, the right-hand sides'
# row tile i on d(i) = F[i, i]; the tiles of B, X and the partial sums are all
# registered (NT x K/NB of them, few beside L's)
# ---------------------------------------------------------------------------
def _lower_own(owners, rank):
    owners = np.asarray(owners, dtype=np.int64)
    return np.tril(np.ones(owners.shape, dtype=bool)) & (owners == rank)


def solve_handles(owners, rank, variant="factor", which="both"):
    """uint8 (nt, nt): the tiles of L node ``rank`` registers for a solve.

    ``owners``: L's owners F (nt, nt); ``variant``: ``"factor"`` (the ``solve`` graph:
    the products of row tile m run on d(m), so d(m) reads row m of L in the forward pass
    and column m in the backward pass) or ``"rhs"`` (``solve_rhs``: every product on
    the owner of its tile of L, which only reads its own tiles); ``which``:
    ``"both"``, ``"forward"`` or ``"backward"``."""
    owners = np.asarray(owners, dtype=np.int64)
    mask = _lower_own(owners, rank)
    if variant == "factor":
        mine = np.diagonal(owners) == rank           # the row tiles of B on this node
        lower = np.tril(np.ones(owners.shape, dtype=bool))
        if which in ("both", "forward"):
            mask |= lower & mine[:, None]
        if which in ("both", "backward"):
            mask |= lower & mine[None, :]
    elif variant != "rhs":
        raise ValueError(f"variant must be 'factor' or 'rhs', got {variant!r}")
    return np.ascontiguousarray(mask, dtype=np.uint8)


def llt_residual_handles(owners, rank):
    """``(L, R)`` uint8 (nt, nt): the tiles node ``rank`` registers for the residual
    A - L L^T (``llt_residual``): R[i][j] -= L[i][k] L[j][k]^T, k <= j, runs on the
    owner of (i, j), which reads L[i][k] for k <= j and all of row j of L; R's own
    tiles only (no other node reads them)."""
    owners = np.asarray(owners, dtype=np.int64)
    nt = owners.shape[0]
    own = _lower_own(owners, rank)
    mask = own.copy()
    k = np.arange(nt)
    if nt:
        last = np.where(own.any(axis=1), nt - 1 - np.argmax(own[:, ::-1], axis=1), -1)
        mask |= k[None, :] <= last[:, None]                 # L[i][k], k <= j
        mask |= own.any(axis=0)[:, None] & (k[None, :] <= k[:, None])   # row j of L
    mask &= np.tril(np.ones((nt, nt), dtype=bool))
    return (np.ascontiguousarray(mask, dtype=np.uint8),
            np.ascontiguousarray(own, dtype=np.uint8))


def symm_residual_handles(owners, rank, variant="factor"):
    """uint8 (nt, nt): the tiles of A node ``rank`` registers for the residual B - A X
    of a solve: ``"factor"`` (``symm_residual``: row tile i of R on d(i), which reads
    row i and column i of A's lower tiles) or ``"rhs"`` (``symm_residual_rhs``: each
    product on the owner of its tile of A: its own tiles)."""
    return solve_handles(owners, rank, variant, "both")
