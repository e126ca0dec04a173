"""The scaled Frobenius norm of a distributed matrix: the one home of its rule.

A norm is kept as two parts ``(scale, ssq)`` with ||M||_F = scale * sqrt(ssq), so that
entries near 1e300 or 1e-300 neither overflow nor underflow (a plain sum of squares is
inf beyond about 1e154 and 0 below 1e-162), and a ratio of two norms taken from their
parts stays exact where the norms themselves would not
(:func:`~starchol.linalg.cholesky.backward_error`, ``Factor.residual``). Each rank
gives the norms of the blocks of entries it holds (one BLAS ``nrm2`` per block, itself
scaled), each with its weight (2 for a block that stands for its mirror too in a
symmetric matrix); :func:`norm_parts` combines them over the ranks.
"""
import numpy as np

from ..collective import allreduce_max


def block_norm(block):
    """||block||_F of a numpy block of entries (float64 BLAS ``dnrm2``, scaled: no
    overflow or underflow; float32 entries are widened first). Local."""
    from scipy.linalg.blas import dnrm2

    return float(dnrm2(np.asarray(block, dtype=np.float64).ravel(order="K")))


def norm_parts(comm, norms):
    """``(scale, ssq)`` of a matrix with ||M||_F = scale * sqrt(ssq), from this rank's
    ``norms``: ``[(norm, weight)]`` of the blocks of M it holds (weight 2 for a block
    that stands for its mirror too). ``scale`` is the largest block norm over all ranks;
    a NaN or Inf norm gives ``(inf, inf)``, a zero matrix ``(0.0, 0.0)``. Collective
    (one or two reductions on ``comm``, the same number on every rank)."""
    local = 0.0
    for value, _ in norms:
        local = max(local, value if np.isfinite(value) else np.inf)
    scale = allreduce_max(comm, local)
    if not 0.0 < scale < np.inf:
        return scale, (0.0 if scale == 0.0 else np.inf)
    return scale, comm.allreduce(sum(w * (v / scale) ** 2 for v, w in norms))


__all__ = ["block_norm", "norm_parts"]
