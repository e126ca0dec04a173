"""Mixed precision: a float32 factorization, float64 answers (LAPACK's ``dsposv``).

    sol = solve_mixed(A, B, tile_map)     # A, B float64 DistributedMatrix; Collective
    sol.X                                 # float64 solution, as good as a float64 solve
    sol.iterations, sol.fallback, sol.reason, sol.backward_error, sol.record

Like :func:`scipy.linalg.solve` with ``assume_a="pos"`` (one call from A and B to X),
and like LAPACK's ``dsposv``:

1. A float32 copy of A is made tile by tile on the rank that holds each tile (no
   communication; A stays float64 and unchanged) and factored, A32 = L L^T, with
   the float32 kernels: the same transfers as float64, half the bytes.
2. X = (L L^T)^-1 B in float32, then iterative refinement in float64:
   R = B - A X (distributed: :func:`~starchol.linalg.cholesky.rhs_residual`, the graph
   of ``Factor.solve_residual``; it and the float32 solves run the variant with fewer
   bytes on the busiest link, for few right-hand sides the one that keeps A and L in
   place and moves NB x K blocks), stop when the backward error
   ||R||_F / (||A||_F ||X||_F + ||B||_F) is at most sqrt(N) eps (eps = 2^-53 =
   1.1e-16: LAPACK's ``dsposv`` stops at ||r||_inf <= sqrt(N) eps ||A||_inf ||x||_inf
   per column; starchol takes the normwise backward error of all columns at once),
   else D = (L L^T)^-1 R in float32 (R scaled by a power of two first, so that it
   neither overflows nor underflows in float32) and X += D; at most 30 iterations
   (``dsposv``'s ITERMAX).
3. Fallback to float64 (factor A itself, solve, check) when A has entries beyond
   float32's range, when A is not positive definite in float32, or when the
   refinement does not converge: after the iteration limit, or (starchol's addition,
   to fall back promptly) as soon as an iteration does not reduce the backward error
   or makes it NaN; each iteration multiplies the error by about cond(A) 2^-24, so a
   matrix with cond(A) beyond about 10^7 diverges. The result says so, and why, on
   every rank (and a :class:`PrecisionFallbackWarning` is issued on every rank); it
   is never a worse answer than float64's: the returned X always passed the check
   (converged) or is the float64 solve (with its own backward error).

The log-determinant of the float32 factor is approximate: its relative error is about
N 2^-24 cond(A) at worst; on the Gaussian-process matrix of examples/gp_loglik.py
(N = 2000, cond(A) = 4.4e3) starchol's float32 factor (NB = 100) gave it 2.9e-7
relative off (1.3e-3 absolute; LAPACK's spotrf: 1.3e-6), which moved that
log-likelihood by 1.9e-6 relative; a float64 factor's is about 1e-13.
:meth:`MixedSolution.logdet` therefore says which it is
(``exact=True`` factors A in float64 when no fallback did, for a log-determinant as
accurate as float64's; that costs a float64 factorization).

The bytes, exactly: :func:`~starchol.model.mixed_volume.mixed_transfer_pairs_bytes`
(``starchol volume --dtype mixed --nrhs K --iterations I``).
"""
import math
import time
import warnings

import numpy as np

from ..collective import agree, allreduce_max
from ..errors import UsageError
from ..integers import check_int
from .cholesky import cholesky
from .computations import get_session, run_record
from .factor import backward_error, rhs_residual, symmetric_tiles
from .operands import check_operand
from .distributed import DistributedMatrix, check_map, map_key
from .errors import NotPositiveDefiniteError
from .norms import block_norm, norm_parts
from ..model.mixed_volume import FALLBACKS, mixed_phase_bytes
from .rhs_solve import residual_variant
from .run_parts import MixedRecord, plain

#: LAPACK's unit roundoff for float64 (``dlamch('E')``): 2^-53
EPS64 = 2.0 ** -53
#: LAPACK's ``dsposv`` limit on refinement iterations (ITERMAX)
MAX_ITERATIONS = 30


class PrecisionFallbackWarning(UserWarning):
    """A mixed-precision solve fell back to float64 (the message says why)."""


def default_tolerance(n):
    """The backward error at which the refinement stops: sqrt(N) eps, eps = 2^-53
    (LAPACK's ``dsposv``). About 3.5e-15 at N = 1000."""
    return math.sqrt(n) * EPS64


class MixedSolution:
    """The result of :func:`solve_mixed`; identical on every rank (but X's tiles).

    Attributes
    ----------
    X : DistributedMatrix
        The float64 solution (kind ``"rhs"``, laid out like B).
    iterations : int
        Refinement iterations (corrections X += D) of the float32 factor; 0 when the
        first float32 solve passed the check, and when the float32 factor failed.
    fallback : None or str
        None, or why the answer comes from a float64 factorization: ``"range"``,
        ``"factorization"`` or ``"refinement"``
        (:data:`~starchol.model.mixed_volume.FALLBACKS`).
    reason : str or None
        The fallback in words (what failed, with the figures), None without one.
    backward_error : float
        ||B - A X||_F / (||A||_F ||X||_F + ||B||_F) of the returned X (float64).
    tolerance : float
        The bound the refinement had to reach (default sqrt(N) 2^-53).
    history : list of float
        The backward error after the first float32 solve and after each iteration.
    factor : Factor
        The factor the answer comes from: the float32 one, or the float64 one after a
        fallback.
    factor32 : Factor or None
        The float32 factor (None when there was none: ``"range"``, ``"factorization"``).
    times : dict
        Seconds (the slowest rank's): ``factor`` (float32 copy + factorization),
        ``refinement`` (first solve and iterations, with their checks), ``fallback``
        (float64 factorization, solve and check; 0 without one), ``total``.
    phase_bytes_pairs : dict or None
        Bytes measured per graph kind (``factor32``, ``solve32``, ``residual64``,
        ``factor64``, ``solve64``), P x P lists (sender row, receiver column); None
        when the session counts no bytes.
    record : RunRecord
        Operation ``"solve_mixed"``, dtype ``"mixed"``, the whole solve's bytes
        measured and predicted per pair; :attr:`RunRecord.mixed` (a
        :class:`~starchol.linalg.run_parts.MixedRecord`) holds the fields above.
    """

    def __init__(self, X, factor, factor32, iterations, fallback, reason, eta, tolerance,
                 history, times, phase_bytes, record, A):
        self.X = X
        self.factor = factor
        self.factor32 = factor32
        self.iterations = iterations
        self.fallback = fallback
        self.reason = reason
        self.backward_error = eta
        self.tolerance = tolerance
        self.history = history
        self.times = times
        self.phase_bytes_pairs = phase_bytes
        self.record = record
        self._A = A
        self._logdet64 = None

    @property
    def converged(self):
        """True when the float32 factor's refinement reached the tolerance (no fallback)."""
        return self.fallback is None

    @property
    def logdet_exact(self):
        """Whether :meth:`logdet` comes from a float64 factor (after a fallback, or once
        ``logdet(exact=True)`` ran)."""
        return self.fallback is not None or self._logdet64 is not None

    def logdet(self, exact=False):
        """log det A. Collective.

        From the factor of the answer: float64 after a fallback (as accurate as
        ``Factor.logdet``); else the float32 factor's, approximate (relative error up
        to about N 2^-24 cond(A); see the module docstring). ``exact=True`` without a
        fallback factors A in float64 once (the cost of a float64 factorization; its
        bytes are not in :attr:`record`) and returns that factor's log-determinant.
        """
        if self.fallback is not None:
            return self.factor.logdet()
        if exact:
            if self._logdet64 is None:
                f64 = cholesky(self._A, self.factor.tile_map, session=self.factor.session)
                self._logdet64 = f64.logdet()
            return self._logdet64
        return self.factor.logdet()

    def summary(self):
        """The JSON-ready fields (:attr:`RunRecord.mixed` of :attr:`record`)."""
        return plain(self.record.mixed)


def _power_of_two_scale(amax):
    """2^-e with 2^e <= amax < 2^(e+1) (so amax times it is in [1, 2)); 1 for 0, NaN, Inf.
    The exponent is kept within float64's normal range."""
    if not 0.0 < amax < np.inf:
        return 1.0
    e = min(max(math.frexp(amax)[1] - 1, -1000), 1000)
    return math.ldexp(1.0, -e)


def _rhs32(M, amax):
    """A float32 copy of the right-hand sides M scaled by a power of two (M's largest
    entry ``amax`` becomes 1 to 2), and the scale."""
    scale = _power_of_two_scale(amax)
    return M.astype(np.float32, scale), scale


def _add_scaled(X, D, inv):
    """X += D * inv, tile by tile (local)."""
    for key, t in X.tiles.items():
        t += D.tiles[key].astype(np.float64) * inv


def _checked(comm, A, B, tile_map, max_iterations, tolerance):
    """The collective input checks of :func:`solve_mixed`: the same error on every rank."""
    error, so_key = None, None
    try:
        check_map(tile_map, comm.Get_size())
        check_int(max_iterations, "max_iterations", 0, 1000, exact=False)
        if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(
                tolerance, (int, float, np.floating)) or not 0 < tolerance < 1):
            raise UsageError(f"tolerance must be a number between 0 and 1 (a backward "
                             f"error), or None for sqrt(N) 2^-53; got {tolerance!r}",
                             param="tolerance")
        if isinstance(A, DistributedMatrix):
            so_key = map_key(tile_map, A.nt)
    except Exception as exc:  # noqa: BLE001
        error = exc
    agree(comm, error, same={"max_iterations": repr(max_iterations),
                             "tolerance": repr(tolerance), "tile_map": so_key})
    check_operand(comm, A, "A", tile_map, kind="symmetric", dtype=np.float64)
    check_operand(comm, B, "B", tile_map, kind="rhs", n=A.n, nb=A.nb, dtype=np.float64)


class _TileNorms:
    """``each`` of :meth:`DistributedMatrix.astype` for the float32 copy of a symmetric
    A: the Frobenius norm of each new tile (BLAS ``snrm2``, while the tile is in cache;
    a diagonal tile by both triangles of its lower one), so that making the copy and
    taking ||A|| is one pass over A. The keys of tiles whose norm is not finite are
    kept for :meth:`out_of_range`."""

    def __init__(self):
        self.norms, self.suspects = [], []

    def __call__(self, key, t):
        from scipy.linalg.blas import snrm2

        value = float(snrm2(t.reshape(-1, order="F")))
        if key[0] != key[1]:       # diagonal tiles: by both triangles, in parts()
            self.norms.append((value, 2.0))
        if not np.isfinite(value):
            self.suspects.append(key)

    def out_of_range(self, A, A32):
        """Whether a finite entry of A became infinite in its float32 copy (this rank)."""
        return any(not np.isfinite(A32.tiles[k]).all() and np.isfinite(A.tiles[k]).all()
                   for k in self.suspects)

    def parts(self, comm, tiles):
        """(scale, ssq) of ||A||_F: the off-diagonal tiles' norms of float32's rounding
        of A (a relative 6e-8, nothing for a stopping test), the diagonal ones from
        ``tiles``, A's :func:`~starchol.linalg.cholesky.symmetric_tiles`. Collective."""
        self.norms += [(block_norm(t), 1.0) for (i, j), t in tiles.items() if i == j and t.size]
        return norm_parts(comm, self.norms)


def _check_finite_rhs(comm, B):
    """Refuse, on every rank and before any factorization, right-hand sides holding NaN
    or Inf (the refinement could never converge: it reported "refinement diverged"
    after a float64 factorization, without naming B). Collective."""
    local = any(not np.isfinite(t).all() for t in B.tiles.values())
    if allreduce_max(comm, float(local)) > 0:
        raise UsageError("B holds a non-finite value (NaN or Inf); the right-hand sides "
                         "must be finite numbers")


def solve_mixed(A, B, tile_map, session=None, max_iterations=MAX_ITERATIONS,
                tolerance=None):
    """X with A X = B, A symmetric positive definite, to float64 accuracy from a float32
    factorization and iterative refinement in float64 (LAPACK's ``dsposv``; see the
    module docstring for the algorithm, the stopping rule and the fallback). Collective.

    Parameters
    ----------
    A : DistributedMatrix
        Symmetric (lower triangle used), float64, laid out by ``tile_map``. Not
        modified.
    B : DistributedMatrix
        Right-hand sides (kind ``"rhs"``, N x K), float64, laid out by ``tile_map``.
        Not modified.
    tile_map : starchol.distributions.TileMap
        Any map of :func:`starchol.distributions.get_map` (2D or 2.5D), one node per rank.
    session : Session, optional
        A running session (default: the process's, as for :func:`cholesky`).
    max_iterations : int
        Refinement iterations before the fallback (default 30, LAPACK's).
    tolerance : float, optional
        The backward error to reach (default sqrt(N) 2^-53).

    Returns
    -------
    MixedSolution
        ``X`` (float64), ``iterations``, ``fallback`` and ``reason``,
        ``backward_error``, the factor, times, bytes per graph and the
        :class:`~starchol.linalg.record.RunRecord` (bytes measured and predicted per
        pair for the whole solve).

    Raises
    ------
    UsageError
        On every rank, when any rank's input is wrong (as :func:`cholesky`; A and B
        must be float64).
    NotPositiveDefiniteError
        On every rank, when A is not positive definite in float64 either (after the
        fallback).
    """
    comm = A.comm if isinstance(A, DistributedMatrix) else None
    session = get_session(comm, session)
    comm = session.comm
    _checked(comm, A, B, tile_map, max_iterations, tolerance)
    _check_finite_rhs(comm, B)
    n = A.n
    tol = default_tolerance(n) if tolerance is None else float(tolerance)
    times = {"factor": 0.0, "refinement": 0.0, "fallback": 0.0}
    phase = {k: None for k in ("factor32", "solve32", "residual64", "factor64", "solve64")}

    def count(kind, since):
        """Add this rank's bytes sent since ``since`` to the phase ``kind``."""
        now = session.bytes_sent()
        if now is not None:
            phase[kind] = (now - since) + (0 if phase[kind] is None else phase[kind])
        return now

    first = session.bytes_sent()
    comm.Barrier()
    t_start = time.perf_counter()
    fallback, reason, f32, iterations, history = None, None, None, 0, []
    a_parts = b_parts = None

    # 1. the float32 copy, made where each tile lives, and its factorization
    t0 = time.perf_counter()
    norms = _TileNorms()
    A32 = A.astype(np.float32, each=norms)
    if allreduce_max(comm, float(norms.out_of_range(A, A32))) > 0:
        fallback = "range"
        reason = (f"A has entries beyond float32's range (largest magnitude "
                  f"{np.finfo(np.float32).max:.3e}): no float32 factorization")
        A32 = None
    else:
        mark = session.bytes_sent()
        try:
            f32 = cholesky(A32, tile_map, session=session, overwrite_a=True)
        except NotPositiveDefiniteError as exc:
            fallback = "factorization"
            reason = f"A is not positive definite in float32: {exc}"
            f32 = A32 = None
        count("factor32", mark)
    times["factor"] = time.perf_counter() - t0

    # 2. the float32 solve and the refinement in float64
    X = None
    residual_graph = None
    if f32 is not None:
        t0 = time.perf_counter()
        a_tiles = symmetric_tiles(A)
        a_parts, b_parts = norms.parts(comm, a_tiles), B.frobenius_parts()
        D, scale = _rhs32(B, b_parts[0])
        mark = session.bytes_sent()
        f32.solve(D, overwrite_b=True)
        count("solve32", mark)
        X = D.astype(np.float64, 1.0 / scale)
        while True:
            mark = session.bytes_sent()
            if residual_graph is None:     # the model's choice, counted once
                residual_graph = residual_variant(session, tile_map, A, B.ncols, "auto")[0]
            R = rhs_residual(session, A, X, B, a_tiles, tile_map=tile_map,
                             variant=residual_graph, window=f32.window)
            count("residual64", mark)
            r_parts = R.frobenius_parts()
            eta = backward_error(r_parts, a_parts, X.frobenius_parts(), b_parts)
            history.append(eta)
            if eta <= tol:
                break
            if not np.isfinite(eta):
                fallback, reason = "refinement", (
                    f"the refinement diverged: backward error {eta} after "
                    f"{iterations} iteration(s)")
            elif iterations >= max_iterations:
                fallback, reason = "refinement", (
                    f"no convergence in {max_iterations} iteration(s): backward error "
                    f"{eta:.3e} > {tol:.3e} (sqrt(N) eps); A is too ill-conditioned "
                    f"for a float32 factor")
            elif len(history) > 1 and eta >= history[-2]:
                fallback, reason = "refinement", (
                    f"the refinement stopped converging: backward error {eta:.3e} after "
                    f"{iterations} iteration(s), not below the previous "
                    f"{history[-2]:.3e} (tolerance {tol:.3e}); A is too ill-conditioned "
                    f"for a float32 factor")
            if fallback is not None:
                break
            D, scale = _rhs32(R, r_parts[0])
            del R
            mark = session.bytes_sent()
            f32.solve(D, overwrite_b=True)
            count("solve32", mark)
            _add_scaled(X, D, 1.0 / scale)
            iterations += 1
        times["refinement"] = time.perf_counter() - t0

    # 3. the fallback: float64 factorization, solve and check
    factor = f32
    if fallback is not None:
        warnings.warn(f"solve_mixed fell back to float64: {reason}",
                      PrecisionFallbackWarning, stacklevel=2)
        t0 = time.perf_counter()
        mark = session.bytes_sent()
        factor = cholesky(A, tile_map, session=session)
        mark = count("factor64", mark)
        X = factor.solve(B)
        mark = count("solve64", mark)
        R = rhs_residual(session, A, X, B, tile_map=tile_map, window=factor.window)
        count("residual64", mark)
        if a_parts is None or not np.isfinite(a_parts[0]):
            a_parts, b_parts = A.frobenius_parts(symmetric_tiles(A)), B.frobenius_parts()
        eta = backward_error(R.frobenius_parts(), a_parts, X.frobenius_parts(), b_parts)
        times["fallback"] = time.perf_counter() - t0
    elapsed = time.perf_counter() - t_start
    record, phase_pairs = _mixed_record(session, tile_map, A, B, first, phase, times,
                                        elapsed, iterations, fallback, reason, eta, tol,
                                        history, f32, factor)
    return MixedSolution(X, factor, f32, iterations, fallback, reason, eta, tol, history,
                         record.mixed.time_s, phase_pairs, record, A)


def _mixed_record(session, tile_map, A, B, first, phase, times, elapsed, iterations,
                  fallback, reason, eta, tol, history, f32, factor):
    """The RunRecord of a whole mixed solve (same on every rank; the one builder,
    :func:`~starchol.linalg.computations.run_record`) and the bytes per phase.
    Collective."""
    comm = session.comm
    last = session.bytes_sent()
    local = {k: (None if v is None else v.tolist()) for k, v in phase.items()}
    row = None if last is None else (last - first).tolist()
    model = predicted = None
    if row is not None:
        model = mixed_phase_bytes(tile_map, A.n, A.nb, B.ncols, iterations, fallback,
                                  cache=session.cache)
        predicted = sum(model.values())
    tasks = (f32.record.tasks if f32 is not None else 0) + \
        (factor.record.tasks if factor is not f32 else 0)
    record, more = run_record(session, "solve_mixed", tile_map, A, nrhs=B.ncols,
                              dtype="mixed", bytes_row=row, tasks=0, total_tasks=tasks,
                              elapsed=elapsed, submit_s=0.0, predicted=predicted,
                              more=(local, dict(times)))
    slowest = {k: max(m[1][k] for m in more) for k in times}
    slowest["total"] = record.time_s
    phase_pairs = None
    if row is not None:
        zeros = [0] * comm.Get_size()
        phase_pairs = {k: [m[0][k] if m[0][k] is not None else list(zeros) for m in more]
                       for k in phase}
    record.mixed = MixedRecord(
        iterations=int(iterations), fallback=fallback, fallback_reason=reason,
        converged=fallback is None, backward_error=float(eta), tolerance=float(tol),
        history=[float(h) for h in history], time_s=slowest,
        bytes_measured_phase_pairs=phase_pairs,
        bytes_predicted_phase_pairs=None if model is None else
        {k: v.tolist() for k, v in model.items()},
        factor_dtype="float64" if fallback is not None else "float32")
    return record, phase_pairs


__all__ = ["EPS64", "FALLBACKS", "MAX_ITERATIONS", "MixedSolution",
           "PrecisionFallbackWarning", "default_tolerance", "solve_mixed"]
