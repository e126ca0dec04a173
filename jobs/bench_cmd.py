"""``starchol bench``: starchol's factorization vs LAPACK dpotrf on one rank, all cores.

    starchol bench --n N --nb NB [--dtype float64|float32] [--repeat R] [--seed S]
                   [--sched NAME] [--json FILE]

Both factor the same SPD matrix; runs alternate (starchol, LAPACK, starchol, ...).
starchol runs with one single-threaded BLAS per StarPU worker (as many workers as
cores); LAPACK is scipy.linalg.lapack.dpotrf (spotrf with ``--dtype float32``) on a
Fortran-ordered copy, overwritten in place, with BLAS on all cores (StarPU's workers
paused meanwhile). Flops N^3/3.
"""
import statistics
import time

import numpy as np

from ..errors import StarcholError, UsageError
from .output import emit, json_file
from .bench_args import register as register_parser


def register(sub):
    """Add ``starchol bench``'s parser (:mod:`.bench_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


def run(args):
    from ..distributions import get_map
    from ..linalg import DistributedMatrix, cholesky, matrices
    from ..model.counts import flops
    from ..linalg.tiled import check_sizes
    from ..runtime.backend import DEFAULT_SCHEDULER, check_scheduler, mpi
    from ..runtime.session import Session
    from ..runtime.workers import affinity_cores, check_workers

    check_sizes(args.n, args.nb)
    json_file(args)
    from .preflight import check_rank_memory

    dtype = np.dtype(args.dtype)
    # the dense LAPACK copies count like a gathered factor (two N x N arrays)
    check_rank_memory(get_map("2dbc", 1, grid=(1, 1)), args.n, args.nb, 0, 1,
                      gather=not args.no_lapack, itemsize=dtype.itemsize,
                      fix="use a smaller --n" + ("" if args.no_lapack else
                                                 " or time starchol alone (--no-lapack)"))
    sched = check_scheduler(args.sched or DEFAULT_SCHEDULER)
    workers = None if args.workers is None else check_workers(args.workers)
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    MPI = mpi()
    if MPI.COMM_WORLD.Get_size() != 1:
        raise UsageError("starchol bench runs on one rank; launch it without mpirun")
    cores = len(affinity_cores())
    n, nb = args.n, args.nb
    nt = -(-n // nb)
    spec = matrices.MatrixSpec("spd")
    fl = flops(n)
    ours, theirs, submit, tasks = [], [], [], 0
    potrf_name = "spotrf" if dtype == np.float32 else "dpotrf"
    potrf = getattr(lapack, potrf_name)
    tile_map = get_map("2dbc", 1)
    with Session(MPI.COMM_SELF, workers=workers, scheduler=sched, stats=False) as rt:
        pristine = DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: matrices.block(spec, n, args.seed, r0, r1, c0, c1),
            (n, n), nb, tile_map, dtype=dtype, comm=MPI.COMM_SELF)
        dense = None if args.no_lapack else pristine.gather()
        if dense is not None:
            dense = np.asfortranarray(dense + np.tril(dense, -1).T)
        for _ in range(args.repeat):
            a = pristine.copy()
            with threadpool_limits(limits=1, user_api="blas"):
                fac = cholesky(a, tile_map, session=rt, overwrite_a=True,
                               window=args.window)
            ours.append(fl / fac.record.time_s / 1e9)
            submit.append(fac.record.submit_s)
            tasks = fac.record.tasks
            del a, fac
            if dense is None:
                continue
            c = np.array(dense, order="F", copy=True)
            with threadpool_limits(limits=cores, user_api="blas"):  # StarPU workers asleep
                t0 = time.perf_counter()
                _, info = potrf(c, lower=1, clean=0, overwrite_a=1)
                dt = time.perf_counter() - t0
            if info != 0:
                raise StarcholError(f"LAPACK {potrf_name} failed with info={info}")
            theirs.append(fl / dt / 1e9)
        info = rt.describe()
    med_ours = statistics.median(ours)
    doc = {"n": n, "nb": nb, "nt": nt, "dtype": dtype.name, "lapack": potrf_name,
           "repeat": args.repeat, "cores": cores,
           "starchol_gflops": ours, "lapack_gflops": theirs,
           "starchol_median_gflops": med_ours,
           "lapack_median_gflops": statistics.median(theirs) if theirs else None,
           "ratio_median": (statistics.median([a / b for a, b in zip(ours, theirs)])
                            if theirs else None),
           "submit_s": submit, "tasks": tasks,
           "runtime": {"scheduler": info["scheduler"], "workers_per_rank": info["workers_per_rank"],
                       "starpu_version": info["starpu_version"],
                       "starpu_build": info["starpu_build"],
                       "kernel_blas": info.get("kernel_blas")}}
    lines = [f"starchol bench: N = {n}, NB = {nb} (NT = {nt}, {tasks} tasks), {dtype.name}, "
             f"{cores} cores, "
             f"{info['workers_per_rank']} StarPU workers, scheduler {info['scheduler']}",
             f"  StarPU build: {info['starpu_build']}",
             f"  kernels' BLAS: {info.get('kernel_blas') or 'not recorded'}",
             "  starchol GFlop/s: " + ", ".join(f"{g:.1f}" for g in ours)
             + f"  (median {med_ours:.1f}; submission "
             + ", ".join(f"{s:.3f}" for s in submit) + " s)"]
    if theirs:
        lines.append(f"  LAPACK {potrf_name} GFlop/s: " + ", ".join(f"{g:.1f}" for g in theirs)
                     + f"  (median {doc['lapack_median_gflops']:.1f})")
        lines.append(f"  median ratio starchol / LAPACK: {doc['ratio_median']:.3f}")
    emit(args, doc, "\n".join(lines))
    return 0
