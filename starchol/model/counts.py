"""Flop and task counts of the graphs the runtime runs (one home for every count).

Tiles are (i, j) = (tile row, tile column), lower triangle i >= j; NT tile rows, KT tile
columns of the right-hand sides. Flops are floating-point operations (a count, not a
rate); tasks are what StarPU creates, one per kernel call.

- :data:`KERNELS`, :data:`KERNEL_OF`: the kernels, and the kernel of each codelet the
  graphs insert (``gemm0`` is a GEMM, ``trsm_fwd`` a TRSM, ...).
- :func:`codelet_flops`: the flops of one task from its tiles' extents;
  :func:`kernel_flops` on NB x NB tiles.
- :func:`operation_flops`: the flops of a whole operation (N^3/3 for a factorization).
- :func:`task_count`, :func:`solve_task_count`: tasks of the graphs, all ranks;
  :func:`task_counts`, :func:`local_task_count`, :func:`slice_task_weights`: the
  Cholesky's tasks per node (2.5D partial sums' ADDs included).

The per-node load of a map in NB^3 flop units is
:func:`starchol.model.load.node_load`'s (the same weights: POTRF 1/3, TRSM 1,
SYRK 1, GEMM 2, :func:`kernel_flops` with NB = 1).
"""
import numpy as np

from ..distributions.base import iteration_slices, slice_updates

#: the kernels a node description gives speeds for
KERNELS = ("potrf", "trsm", "syrk", "gemm", "add")
#: the kernel of each codelet the graphs insert, for durations (2.5D's first updates
#: and the solve's passes run the same BLAS/LAPACK calls)
KERNEL_OF = {"potrf": "potrf", "trsm": "trsm", "syrk": "syrk", "syrk0": "syrk",
             "gemm": "gemm", "gemm0": "gemm", "add": "add", "tril": "add",
             "trsm_fwd": "trsm", "trsm_bwd": "trsm", "gemm_fwd": "gemm", "gemm_bwd": "gemm"}


def codelet_flops(codelet, rows, cols, inner_a, inner_b=None):
    """Flops of one task of ``codelet`` (a key of :data:`KERNEL_OF`), numpy-broadcast.

    ``rows`` x ``cols`` are the entries of the tile the task writes, ``inner_a`` the
    columns of its first operand (the Cholesky's panel tile), ``inner_b`` the rows of its
    second (the solve's GEMM: B[m] -= L[m][k] B[k]; default ``inner_a``).

    - potrf: rows^3 / 3
    - trsm (L[m][k] = A[m][k] L[k][k]^-T): rows cols^2
    - syrk (A[n][n] -= L[n][k] L[n][k]^T): rows^2 inner_a
    - gemm (A[m][n] -= L[m][k] L[n][k]^T): 2 rows cols inner_a
    - trsm_fwd/bwd (B[k] = L[k][k]^-1 B[k]): rows^2 cols
    - gemm_fwd/bwd (B[m] -= L[.][.] B[k]): 2 rows cols inner_b
    - add, tril: one flop per entry, rows cols
    """
    inner_b = inner_a if inner_b is None else inner_b
    if codelet == "potrf":
        return rows ** 3 / 3
    if codelet == "trsm":
        return rows * cols ** 2
    if codelet in ("syrk", "syrk0"):
        return rows ** 2 * inner_a
    if codelet in ("gemm", "gemm0"):
        return 2 * rows * cols * inner_a
    if codelet in ("trsm_fwd", "trsm_bwd"):
        return rows ** 2 * cols
    if codelet in ("gemm_fwd", "gemm_bwd"):
        return 2 * rows * cols * inner_b
    if codelet in ("add", "tril"):
        return rows * cols
    raise ValueError(f"unknown codelet {codelet!r}; one of {sorted(KERNEL_OF)}")


def kernel_flops(kernel, nb):
    """Flops of one call of ``kernel`` (one of :data:`KERNELS`) on NB x NB tiles:
    POTRF NB^3/3, TRSM and SYRK NB^3, GEMM 2 NB^3, ADD NB^2."""
    nb = float(nb)
    return codelet_flops(kernel, nb, nb, nb)


def operation_flops(operation, n, nrhs=0):
    """Flops of a run's operation (``RunRecord.operation``) on an N x N matrix with
    ``nrhs`` right-hand sides: 2 N^2 K for ``solve`` (forward and backward), N^2 K for
    one of its passes (``forward_solve``, ``backward_solve``), else the factorization's
    N^3 / 3 (``cholesky``, and ``solve_mixed``'s GFlop/s figure)."""
    if operation == "solve":
        return 2.0 * n * n * nrhs
    if operation in ("forward_solve", "backward_solve"):
        return 1.0 * n * n * nrhs
    return n ** 3 / 3.0


def flops(n):
    """Flop count of the factorization, N^3 / 3."""
    return operation_flops("cholesky", n)


def task_count(nt):
    """Tasks of the 2D Cholesky graph on nt x nt tiles, all ranks: nt POTRF, nt(nt-1)/2
    TRSM and SYRK, nt(nt-1)(nt-2)/6 GEMM (= nt(nt+1)(nt+2)/6); the residual graph's
    SYRK/GEMM count is of the same order."""
    return nt * (nt + 1) * (nt + 2) // 6


def solve_task_count(nt, kt, which="both"):
    """Tasks of the two triangular solves on nt x nt tiles of L and nt x kt tiles of B,
    all ranks: nt(nt+1)/2 TRSM or GEMM per tile column of B and per direction (``which``
    "forward" or "backward": one direction)."""
    return nt * (nt + 1) * kt // (2 if which in ("forward", "backward") else 1)


def slice_task_weights(it, s, c=None):
    """Tasks that write slice ``s``'s copy of each tile of column n, int64 (nt,): the
    updates of iterations k < n with it[k] == s (SYRK/GEMM), plus, on the slice that
    factors column n (it[n] == s), its POTRF/TRSM and the ADDs of the partial sums of
    the other slices that updated column n. The same for every tile (m, n), m >= n, of
    the column. ``it``: the slice of each iteration
    (:func:`~starchol.distributions.base.iteration_slices`),
    ``c`` the slice count (default max(it) + 1)."""
    it = np.asarray(it, dtype=np.int64)
    u = slice_updates(it, c)
    factors = it == s
    others = (u > 0).sum(axis=0) - (u[it, np.arange(len(it))] > 0)
    return (u[s] + factors * (1 + others)).astype(np.int64)


def task_counts(owners, nodes=None, it=None):
    """Tasks of the Cholesky graph that run on each node, int64 array (P,).

    ``owners`` is a (c, nt, nt) stack of the slices' owners (or one (nt, nt) map);
    ``nodes`` defaults to the highest owner + 1; ``it`` is the slice of each iteration
    (default :func:`~starchol.distributions.base.iteration_slices` with the default
    block)."""
    so = np.asarray(owners)
    if so.ndim == 2:
        so = so[None]
    c, nt, _ = so.shape
    it = iteration_slices(nt, c) if it is None else it
    p = int(so.max()) + 1 if nodes is None else int(nodes)
    rows, cols = np.tril_indices(nt)
    out = np.zeros(p, dtype=np.int64)
    for s in range(c):
        out += np.bincount(so[s][rows, cols], weights=slice_task_weights(it, s, c)[cols],
                           minlength=p).astype(np.int64)
    return out


def local_task_count(slice_owners, rank, it=None):
    """Tasks of the Cholesky graph that run on ``rank`` (for progress displays): every
    slice's updates of its copies, the ADDs and POTRF/TRSM of the factoring copies.
    ``slice_owners`` is (c, nt, nt) (c = 1 for a 2D map), ``it`` the slice of each
    iteration; the count is :func:`task_counts`'s."""
    counts = task_counts(np.asarray(slice_owners), it=it)
    return int(counts[rank]) if 0 <= rank < len(counts) else 0


__all__ = ["KERNELS", "KERNEL_OF", "codelet_flops", "kernel_flops", "operation_flops",
           "flops", "task_count", "solve_task_count", "slice_task_weights", "task_counts",
           "local_task_count"]
