"""Gaussian-process log-likelihood with starchol, the matrix never leaving its ranks.

    mpirun -np 6 python examples/gp_loglik.py --dist sbc --n 2000 --nb 100
    mpirun -np 6 python examples/gp_loglik.py --dist sbc25d --slices 2 --n 2000 --nb 100
    mpirun -np 6 python examples/gp_loglik.py --dist sbc --n 2000 --nb 100 --float32
    mpirun -np 6 python examples/gp_loglik.py --dist sbc --n 2000 --nb 100 --mixed

With K = k(X, X) + noise^2 I (squared-exponential kernel on N points of the unit
square) and observations y:

    log p(y) = -1/2 y^T alpha - 1/2 log det K - N/2 log(2 pi),   K alpha = y

Each rank computes only its own tiles of K (``DistributedMatrix.from_function``), the
factor L stays distributed (it is never gathered), ``Factor.solve`` runs the triangular
solves as tasks, ``Factor.logdet`` sums the diagonal where it lives, and y^T alpha is
one reduction. With checks on (the default), rank 0 compares with
``scipy.linalg.cho_factor``/``cho_solve`` on the dense K and prints each check; the
exit status is 1 if one fails.

``--mixed`` computes alpha with ``solve_mixed`` (a float32 factorization refined to a
float64 answer, LAPACK's ``dsposv``; float64 when that fails, said on every rank). The
log-determinant of a float32 factor is not accurate enough for a log-likelihood (on
this N = 2000 matrix, NB = 100, it was 2.9e-7 relative off, which moved the
log-likelihood by 1.9e-6 relative; LAPACK's spotrf's, 1.3e-6 and 1.7e-5), so
``--mixed`` takes log det K from a float64 factorization
(``MixedSolution.logdet(exact=True)``, or the fallback's factor when there was one):
the log-likelihood is then float64's, at the cost of that factorization.
``--approx-logdet`` keeps the float32 factor's instead, and the check shows how far it
is.
"""
import argparse
import sys

import numpy as np
from mpi4py import MPI

from starchol import DistributedMatrix, Session, cholesky, solve_mixed
from starchol.distributions import get_map
from starchol.distributions.base import count_text


def points(n, seed):
    """N points in the unit square (the same on every rank)."""
    return np.random.default_rng(seed).random((n, 2))


def kernel_block(x, r0, r1, c0, c1, length, noise):
    """Rows r0..r1-1, columns c0..c1-1 of K = exp(-|xi - xj|^2 / (2 l^2)) + noise^2 I."""
    d2 = ((x[r0:r1, None, :] - x[None, c0:c1, :]) ** 2).sum(axis=2)
    k = np.exp(-d2 / (2.0 * length ** 2))
    lo, hi = max(r0, c0), min(r1, c1)
    if lo < hi:
        i = np.arange(lo, hi)
        k[i - r0, i - c0] += noise ** 2
    return k


def observations(x, seed):
    """y = a smooth function of the points plus noise (N x 1)."""
    rng = np.random.default_rng(seed + 1)
    y = np.sin(6 * x[:, 0]) * np.cos(4 * x[:, 1]) + 0.1 * rng.standard_normal(len(x))
    return y[:, None]


def _forbidden(*args, **kwargs):
    raise AssertionError("the example must never gather L")


def _positive_float(text):
    """An argparse ``type=``: a finite number > 0 (``--noise nan`` is refused)."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not np.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def main(argv=None):
    from starchol.errors import StarcholError
    from starchol.integers import int_type

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dist", default="sbc", help="tile map (default sbc)")
    p.add_argument("--slices", type=int_type(1), default=1, help="slices of a 2.5D map")
    p.add_argument("--grid", default=None, help="2dbc grid PxQ")
    p.add_argument("--n", type=int_type(1), default=2000, help="points N (default 2000)")
    p.add_argument("--nb", type=int_type(1), default=100, help="tile size NB (default 100)")
    p.add_argument("--float32", action="store_true", help="factor and solve in float32")
    p.add_argument("--mixed", action="store_true",
                   help="alpha from a float32 factorization refined to float64 (solve_mixed); "
                        "log det K from float64 (see --approx-logdet)")
    p.add_argument("--approx-logdet", action="store_true",
                   help="with --mixed: log det K from the float32 factor (approximate)")
    p.add_argument("--length-scale", type=_positive_float, default=0.2)
    p.add_argument("--noise", type=_positive_float, default=0.3)
    p.add_argument("--seed", type=int_type(0, 2 ** 32 - 1), default=0)
    p.add_argument("--workers", type=int_type(1), default=None, help="StarPU workers per rank")
    p.add_argument("--no-check", action="store_true", help="skip the scipy comparison")
    args = p.parse_args(argv)
    if args.mixed and args.float32:
        p.error("--mixed and --float32 exclude each other")
    if args.approx_logdet and not args.mixed:
        p.error("--approx-logdet applies to --mixed")
    try:        # a bad map is the same error on every rank: a usage error (status 2)
        tile_map = get_map(args.dist, MPI.COMM_WORLD.Get_size(), grid=args.grid,
                           slices=args.slices)
    except StarcholError as exc:
        p.error(str(exc))
    if args.mixed:
        return mixed_main(args)

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    dtype = np.float32 if args.float32 else np.float64
    x = points(args.n, args.seed)
    y = observations(x, args.seed)
    n, nb = args.n, args.nb

    with Session(comm, workers=args.workers, stats=True):
        K = DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: kernel_block(x, r0, r1, c0, c1, args.length_scale,
                                                args.noise),
            (n, n), nb, tile_map, dtype=dtype)
        Y = DistributedMatrix.from_function(lambda r0, r1, c0, c1: y[r0:r1, c0:c1],
                                            (n, 1), nb, tile_map, kind="rhs", dtype=dtype)
        F = cholesky(K, tile_map)
        F.L.gather = _forbidden               # L stays where it is
        alpha = F.solve(Y)
        logdet = F.logdet()
        yta = comm.allreduce(sum(float(np.vdot(y[r0:r1, 0], t[:, 0]))
                                 for (i, j), t in alpha.tiles.items()
                                 for r0, r1 in [alpha.tile_bounds(i, j)[:2]]))
        loglik = -0.5 * yta - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)
        residual = F.residual(K)               # ||K - L L^T||_F / ||K||_F, distributed
        backward = F.solve_residual(K, alpha, Y)   # the solve's backward error, distributed
        alpha_full = alpha.gather()            # N x 1: only for the comparison below
        chol, solve = F.record, F.solve_record

    if rank != 0:
        return 0
    print(f"gp_loglik: {tile_map}, {count_text(comm.Get_size(), 'rank')}, N = {n}, NB = {nb}, "
          f"{np.dtype(dtype).name}")
    print(f"  log-likelihood {loglik:.12g}, log det K {logdet:.12g}, y^T alpha {yta:.12g}")
    print(f"  cholesky {chol.time_s:.3f} s ({chol.tasks} tasks), solve {solve.time_s:.3f} s "
          f"({solve.tasks} tasks)")
    print(f"  bytes (factor): measured {chol.bytes_measured_total} B, model "
          f"{chol.bytes_predicted_total} B; (solve): measured {solve.bytes_measured_total} B, "
          f"model {solve.bytes_predicted_total} B")
    checks = [("factor bytes measured == model, every pair", chol.match),
              ("solve bytes measured == model, every pair", solve.match),
              ("L never gathered", True)]
    bound = 1e-5 if args.float32 else 1e-14
    prefix = "float32 " if args.float32 else ""
    checks += [(f"{prefix}||K - L L^T||_F / ||K||_F = {residual:.2e} < {bound:g}",
                residual < bound),
               (f"{prefix}||y - K alpha||_F / (||K||_F ||alpha||_F + ||y||_F) = "
                f"{backward:.2e} < {bound:g}", backward < bound)]
    if not args.no_check:
        from scipy.linalg import cho_factor, cho_solve

        Kd = kernel_block(x, 0, n, 0, n, args.length_scale, args.noise)
        c = cho_factor(Kd, lower=True)
        a_ref = cho_solve(c, y)
        ld_ref = 2.0 * np.log(np.diag(c[0])).sum()
        ll_ref = -0.5 * float(y[:, 0] @ a_ref[:, 0]) - 0.5 * ld_ref - 0.5 * n * np.log(2 * np.pi)
        tol = 1e-4 if args.float32 else 1e-10
        rel = lambda a, b: abs(a - b) / abs(b)  # noqa: E731
        e_a = np.linalg.norm(alpha_full - a_ref) / np.linalg.norm(a_ref)
        checks += [
            (f"log-likelihood vs scipy: relative {rel(loglik, ll_ref):.1e} < {tol:g}",
             rel(loglik, ll_ref) < tol),
            (f"alpha vs scipy cho_solve: relative {e_a:.1e} < {tol:g}", e_a < tol),
            (f"log det vs scipy cho_factor: relative {rel(logdet, ld_ref):.1e} < {tol:g}",
             rel(logdet, ld_ref) < tol),
        ]
        if args.float32:
            r = np.linalg.norm(Kd @ alpha_full - y) / np.linalg.norm(y)
            print(f"  (float32 solve: ||K alpha - y|| / ||y|| = {r:.1e})")
    for text, ok in checks:
        print(f"  [{'ok' if ok else 'FAIL'}] {text}")
    return 0 if all(ok for _, ok in checks) else 1


def mixed_main(args):
    """``--mixed``: alpha by solve_mixed, log det K from float64 (or the float32 factor's
    with ``--approx-logdet``), the checks of the mixed solve."""
    from starchol.model.volume import transfer_pairs_bytes

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    tile_map = get_map(args.dist, comm.Get_size(), grid=args.grid, slices=args.slices)
    x = points(args.n, args.seed)
    y = observations(x, args.seed)
    n, nb = args.n, args.nb
    with Session(comm, workers=args.workers, stats=True) as session:
        K = DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: kernel_block(x, r0, r1, c0, c1, args.length_scale,
                                                args.noise), (n, n), nb, tile_map)
        Y = DistributedMatrix.from_function(lambda r0, r1, c0, c1: y[r0:r1, c0:c1],
                                            (n, 1), nb, tile_map, kind="rhs")
        sol = solve_mixed(K, Y, tile_map)
        sol.factor.L.gather = _forbidden      # L stays where it is
        alpha = sol.X
        approx = sol.logdet()                 # the float32 factor's (or the fallback's)
        logdet = approx if args.approx_logdet else sol.logdet(exact=True)
        yta = comm.allreduce(sum(float(np.vdot(y[r0:r1, 0], t[:, 0]))
                                 for (i, j), t in alpha.tiles.items()
                                 for r0, r1 in [alpha.tile_bounds(i, j)[:2]]))
        loglik = -0.5 * yta - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)
        alpha_full = alpha.gather()
        cache = session.cache
    if rank != 0:
        return 0
    rec = sol.record
    half = np.array(sol.phase_bytes_pairs["factor32"])
    f32_model = transfer_pairs_bytes(tile_map, n, nb, cache=cache, itemsize=4)
    f64_model = transfer_pairs_bytes(tile_map, n, nb, cache=cache, itemsize=8)
    print(f"gp_loglik: {tile_map}, {count_text(comm.Get_size(), 'rank')}, N = {n}, NB = {nb}, "
          f"mixed precision (float32 factor, float64 refinement)")
    source = ("float32 factor: approximate" if args.approx_logdet and not sol.logdet_exact
              else "float64")
    print(f"  log-likelihood {loglik:.12g}, log det K {logdet:.12g} ({source}), "
          f"y^T alpha {yta:.12g}")
    print(f"  refinement: {sol.iterations} iteration(s), backward error history "
          + ", ".join(f"{h:.2e}" for h in sol.history)
          + f"; fallback: {sol.fallback or 'none'}" + (f" ({sol.reason})" if sol.reason else ""))
    t = sol.times
    print(f"  time: float32 copy + factor {t['factor']:.3f} s, refinement "
          f"{t['refinement']:.3f} s, fallback {t['fallback']:.3f} s")
    print(f"  bytes: float32 factor {int(half.sum())} B (model {int(f32_model.sum())} B, "
          f"float64's {int(f64_model.sum())} B); whole mixed solve measured "
          f"{rec.bytes_measured_total} B, model {rec.bytes_predicted_total} B")
    bound = np.sqrt(n) * 2.0 ** -53
    checks = [("mixed solve bytes measured == model, every pair", rec.match),
              ("float32 factor bytes measured == model == half of float64's, every pair",
               half.tolist() == f32_model.tolist() and (2 * half).tolist() == f64_model.tolist()),
              ("L never gathered", True),
              (f"alpha's backward error {sol.backward_error:.2e} <= sqrt(N) 2^-53 = "
               f"{bound:.2e}", sol.backward_error <= bound)]
    if not args.no_check:
        from scipy.linalg import cho_factor, cho_solve

        Kd = kernel_block(x, 0, n, 0, n, args.length_scale, args.noise)
        c = cho_factor(Kd, lower=True)
        a_ref = cho_solve(c, y)
        ld_ref = 2.0 * np.log(np.diag(c[0])).sum()
        ll_ref = -0.5 * float(y[:, 0] @ a_ref[:, 0]) - 0.5 * ld_ref - 0.5 * n * np.log(2 * np.pi)
        rel = lambda a, b: abs(a - b) / abs(b)  # noqa: E731
        # float64's log det: float64's log-likelihood; the float32 factor's: documented
        # accuracy about 1e-6 relative on this matrix
        tol = 1e-4 if args.approx_logdet and not sol.logdet_exact else 1e-9
        e_a = np.linalg.norm(alpha_full - a_ref) / np.linalg.norm(a_ref)
        ll_approx = -0.5 * yta - 0.5 * approx - 0.5 * n * np.log(2 * np.pi)
        print(f"  (the float32 factor's log det: {approx:.12g}, relative "
              f"{rel(approx, ld_ref):.1e} from float64's; it would move the "
              f"log-likelihood by {rel(ll_approx, ll_ref):.1e})")
        checks += [
            (f"log-likelihood vs scipy float64: relative {rel(loglik, ll_ref):.1e} < {tol:g}",
             rel(loglik, ll_ref) < tol),
            (f"alpha vs scipy cho_solve: relative {e_a:.1e} < 1e-10", e_a < 1e-10),
        ]
    for text, ok in checks:
        print(f"  [{'ok' if ok else 'FAIL'}] {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
