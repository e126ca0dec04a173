"""starchol on one GPU (+ CPU workers) against cuSOLVER's dpotrf on the same GPU.

    python benchmarks/gpu_vs_cusolver.py --n 32768 49152 --nb 1024 2048 --repeat 3 \
        --sched dmdas --json out.json [--cupy] [--residual-n 32768]

One rank, one process (StarPU starts once per process: run it again for another
scheduler). For each N:

- cuSOLVER (with ``--cupy``): ``cupy.linalg.cholesky`` on the matrix already on the GPU
  (no transfer counted), median of ``--repeat`` timed runs after one warm-up;
- starchol: the matrix starts in host memory (tiles page-locked once, before timing);
  each timed run copies the pristine tiles back, then times registration, the task
  graph and the unregistration that brings the factor back to host memory, so the
  host<->GPU copies count against starchol. Median of ``--repeat`` after one warm-up
  (which also calibrates the performance models). With several ``--nb``, the first N
  picks the fastest NB (one run each) and the others use it.

The ratio is cuSOLVER time / starchol time (>= 1: starchol faster). With
``--residual-n``, one more run at that N keeps the factor and computes
||A - L L^T||_F / ||A||_F. Also reported: tasks per kernel on CPU and GPU workers and
the host<->device bytes of the last run.

The matrix is A = 0.5 (all ones) + N I (diagonally dominant, so SPD), filled at memory
speed: ``starchol run``'s hashed generator makes about 2 M entries/s, far too slow for
N = 49152; Cholesky's time does not depend on the values.

Arguments are checked before StarPU starts (``--residual-n`` must be one of ``--n``),
``--json`` is rewritten whole after each N (a run cut short keeps what it did), Ctrl-C
stops with exit status 130 (benchmarks/common.py).
"""
import importlib
import json
import os
import statistics
import time

import numpy as np

from common import (ArgumentParser, nonnegative_int, positive_int, run_main,
                    write_json)


def _cupy_chol(n, repeat):
    import cupy as cp

    a = cp.full((n, n), 0.5)
    a[cp.arange(n), cp.arange(n)] += n
    times = []
    for r in range(repeat + 1):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        L = cp.linalg.cholesky(a)
        cp.cuda.Device().synchronize()
        if r:
            times.append(time.perf_counter() - t0)
        del L
    del a
    cp.get_default_memory_pool().free_all_blocks()
    return times


def _matrix(n, nb, comm):
    """A = 0.5 (all ones) + N I on one rank, as a DistributedMatrix (map 2dbc, 1 node)."""
    from starchol import DistributedMatrix
    from starchol.distributions import get_map

    def block(r0, r1, c0, c1):
        t = np.full((r1 - r0, c1 - c0), 0.5, order="F")
        lo, hi = max(r0, c0), min(r1, c1)
        if lo < hi:
            i = np.arange(lo, hi)
            t[i - r0, i - c0] += n
        return t

    return DistributedMatrix.from_function(block, (n, n), nb, get_map("2dbc", 1), comm=comm)


def _starchol_runs(rt, n, nb, repeat, residual=False, warmups=1):
    from starchol import cholesky

    a = _matrix(n, nb, rt.user_comm)
    pristine = a.copy()
    t0 = time.perf_counter()
    pinned = rt.pin_tiles(a.tiles.values())
    pin_s = time.perf_counter() - t0
    times, last = [], {}
    for r in range(warmups + repeat):
        for k, t in pristine.tiles.items():
            np.copyto(a.tiles[k], t)
        rt.kernel_counts()
        rt.device_bytes()
        t0 = time.perf_counter()
        fac = cholesky(a, a.tile_map, session=rt, overwrite_a=True)   # in the pinned tiles
        elapsed = time.perf_counter() - t0
        if r >= warmups:
            times.append(elapsed)
        last = {"kernels": rt.kernel_counts(), "device_bytes": rt.device_bytes()}
    res = fac.residual(pristine) if residual else None
    rt.unpin_tiles(a.tiles.values())
    return times, {"pinned_tiles": pinned, "pin_s": pin_s, "residual": res, **last}


def main(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=positive_int, nargs="+", required=True,
                    help="matrix orders N")
    ap.add_argument("--nb", type=positive_int, nargs="+", default=[1024],
                    help="tile sizes (several: the first N picks the fastest)")
    ap.add_argument("--repeat", type=positive_int, default=3,
                    help="timed runs per N after one warm-up (default 3)")
    ap.add_argument("--sched", default="dmdas", help="StarPU scheduler (default dmdas)")
    ap.add_argument("--gpus", type=nonnegative_int, default=1,
                    help="CUDA workers (default 1)")
    ap.add_argument("--workers", type=positive_int, default=None,
                    help="CPU workers (default: cores - CUDA workers - 1)")
    ap.add_argument("--cupy", action="store_true", help="also time cupy.linalg.cholesky")
    ap.add_argument("--residual-n", type=positive_int, default=None,
                    help="one more run at this N (one of --n) computes the residual")
    ap.add_json("the settings and one row per N")
    ap.add_argument("--no-writeback", action="store_true",
                    help="final tiles come back to host memory only at the unregistration "
                         "(to measure the eager write-back)")
    args = ap.parse_args(argv)
    if args.residual_n is not None and args.residual_n not in args.n:
        ap.fail(f"--residual-n {args.residual_n} is not one of --n "
                f"{' '.join(map(str, args.n))} (no run would compute it)")
    for n in args.n:
        for nb in args.nb:
            ap.check_runtime(n=n, nb=nb)
    ap.check_runtime(scheduler=args.sched, workers=args.workers)
    if args.no_writeback:
        importlib.import_module("starchol.runtime.computation").EAGER_WRITEBACK = False

    from mpi4py import MPI

    from starchol.runtime import Session
    from starchol.runtime.workers import affinity_cores, cuda_workers_per_gpu

    def _cores():
        return len(affinity_cores())

    # one core per CUDA worker (STARPU_NWORKER_PER_CUDA, or starchol's default, per GPU)
    # and one for StarPU-MPI
    per_gpu = cuda_workers_per_gpu(cores=_cores(), gpus=args.gpus) if args.gpus else 0
    workers = args.workers or max(1, _cores() - args.gpus * per_gpu - 1)
    doc = {"sched": args.sched, "gpus": args.gpus, "workers": workers, "repeat": args.repeat,
           "writeback": not args.no_writeback, "nworker_per_cuda": per_gpu, "results": []}
    with Session(MPI.COMM_WORLD, workers=workers, scheduler=args.sched, gpus=args.gpus) as rt:
        doc["runtime"] = rt.describe()
        nb = args.nb[0]
        if len(args.nb) > 1:
            # a tile size's first runs calibrate its models, and dmdas then sends tasks to
            # the CPU workers on purpose: one warm-up is not enough to choose (docs/gpu.md,
            # "NB matters most"). Each candidate gets 2 warm-ups, then the best of 2 timed
            # runs.
            trial = {}
            for cand in args.nb:
                t, _ = _starchol_runs(rt, args.n[0], cand, 2, warmups=2)
                trial[cand] = min(t)
                print(f"tuning: N={args.n[0]} NB={cand}: {trial[cand]:.3f} s (best of "
                      f"{len(t)} after 2 warm-ups)", flush=True)
            nb = min(trial, key=trial.get)
            doc["nb_trials"] = trial
        doc["nb"] = nb
        for n in args.n:
            res_here = args.residual_n == n
            t_sc, info = _starchol_runs(rt, n, nb, args.repeat, residual=res_here)
            row = {"n": n, "nb": nb, "starchol_s": t_sc, "starchol_median_s":
                   statistics.median(t_sc), **info}
            row["starchol_tflops"] = n ** 3 / 3 / row["starchol_median_s"] / 1e12
            if args.cupy:
                # with CUDA workers the session never pauses StarPU by itself (its
                # workers poll between factorizations): pause it so that cuSOLVER's
                # host thread has the cores to itself (docs/gpu.md says which figures
                # were taken before this pause)
                rt.pause()
                try:
                    t_cu = _cupy_chol(n, args.repeat)
                finally:
                    rt.resume()
                row["cusolver_s"] = t_cu
                row["cusolver_median_s"] = statistics.median(t_cu)
                row["ratio_cusolver_over_starchol"] = row["cusolver_median_s"] / row["starchol_median_s"]
            doc["results"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "kernels"}), flush=True)
            print(f"  kernels (cpu/gpu): {row['kernels']}", flush=True)
            _write(args.json, doc)       # after each N: a run cut short keeps what it did
    _write(args.json, doc)
    return 0


def _write(path, doc):
    if path:
        write_json(path, doc)


if __name__ == "__main__":
    run_main(main)
