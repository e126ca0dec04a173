"""starchol against LAPACK dpotrf at small sizes, one rank, in the same process.

For N = 1024, 2048, 4096 with NB = 256 (the issue's targets: ratios of at least 0.85,
0.95 and 1.0), runs alternate: starchol (``cholesky(A, map, overwrite_a=True)`` on a
fresh copy, StarPU workers on every core, one BLAS thread per worker) and scipy's LAPACK
``dpotrf`` (overwrite, a Fortran-ordered copy, BLAS on every core, StarPU's workers
asleep). Times are wall clock around each call; the ratio is the median LAPACK time over
the median starchol time (= starchol GFlop/s / LAPACK GFlop/s). The copies are made
outside the timings, for both, and both calls start after the same ``--settle`` sleep
(0.2 s): OpenBLAS's threads keep spinning for about 0.1 s after a parallel call, and
without the pause they would take a core from the StarPU workers of the next call.

``--back-to-back`` measures what a likelihood optimiser sees, many calls in a row: for
each size, ``--blocks`` times, ``--calls`` consecutive starchol calls then ``--calls``
consecutive LAPACK calls, with no sleep between the calls of a block (the copies of A
are made before each block, outside the timings). Each block, of either side, starts
after the ``--settle`` sleep, so that it does not run beside the other library's idle
threads: after a LAPACK block, OpenBLAS's two threads spin for about 0.1 s and took the
cores from the first ten or so starchol calls of the next block (9-10 ms each instead of
5.5 at N = 1024: docs/engine.md, "Calls back to back"). ``--settle 0`` measures that
too. The medians are over every call of every block; the ratio
is the median LAPACK time over the median starchol time, as above. ``--awake S1,S2``
times starchol once per value in every block, with its workers kept awake S seconds
after each computation (``STARCHOL_AWAKE_S``, starchol/runtime/idle.py): the sleep
policies compared in the same run, alternating.

``--dtype float32`` times float32 matrices against LAPACK ``spotrf`` (no targets). The
header names the BLAS/LAPACK the tile kernels call (``STARCHOL_KERNEL_BLAS``, see
``starchol.runtime.kernel_blas``); run once with ``STARCHOL_KERNEL_BLAS=scipy`` to
compare with SciPy's OpenBLAS in the kernels (LAPACK's side is SciPy's in both).

The profile columns split starchol's median call: registration + submission (the
compiled loop), waiting for the tasks, and the rest of the Python call (checks, record:
agreement reductions, unregistration). Timings are noisy on a shared machine: compare
the ratio, measured in the same run.

Usage: python benchmarks/small_sizes.py [--repeat R] [--sizes 1024,2048,4096] [--nb 256]
                                        [--settle S] [--sched NAME]
                                        [--back-to-back [--calls C] [--blocks B]
                                         [--awake S1,S2]]
                                        [--workers W] [--dtype float64|float32]
                                        [--json FILE]

Arguments are checked before StarPU starts (every size at least NB), ``--json`` is
written whole or not at all, Ctrl-C stops with exit status 130 (benchmarks/common.py).
"""
import statistics
import time

import numpy as np

from common import (ArgumentParser, int_list, nonnegative_float, positive_int, run_main,
                    write_json)


def float_list(text):
    """argparse type: comma-separated finite numbers >= 0 (``0,0.05``)."""
    return [nonnegative_float(part.strip()) for part in str(text).split(",")]

TARGETS = {1024: 0.85, 2048: 0.95, 4096: 1.0}


def spd(n, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return np.asfortranarray(m @ m.T / n + np.eye(n), dtype=dtype)


def bench(n, nb, repeat, session, cores, settle, dtype=np.float64):
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    from starchol import DistributedMatrix, cholesky
    from starchol.distributions import get_map

    tile_map = get_map("2dbc", 1)
    dense = spd(n, dtype=dtype)
    potrf = lapack.spotrf if dense.dtype == np.float32 else lapack.dpotrf
    pristine = DistributedMatrix.from_numpy(dense, nb, tile_map, comm=session.user_comm)
    ours, theirs, submit, inside = [], [], [], []
    for r in range(repeat + 1):                       # the first pair warms up
        a = pristine.copy()
        time.sleep(settle)
        t0 = time.perf_counter()
        f = cholesky(a, tile_map, session=session, overwrite_a=True)
        t = time.perf_counter() - t0
        c = np.array(dense, order="F", copy=True)
        with threadpool_limits(limits=cores, user_api="blas"):
            time.sleep(settle)
            t1 = time.perf_counter()
            # clean=0: the factorization alone (SciPy's default clean=1 then zeroes the
            # other triangle, which costs time: docs/engine.md, "Small sizes")
            _, info = potrf(c, lower=1, clean=0, overwrite_a=1)
            tl = time.perf_counter() - t1
        assert info == 0
        if r:
            ours.append(t)
            theirs.append(tl)
            submit.append(f.record.submit_s)
            inside.append(f.record.time_s)
    ratio = statistics.median(theirs) / statistics.median(ours)
    return {"n": n, "nb": nb, "nt": -(-n // nb), "tasks": f.record.tasks,
            "starchol_s": ours, "lapack_s": theirs,
            "starchol_median_s": statistics.median(ours),
            "lapack_median_s": statistics.median(theirs),
            "starchol_gflops": n ** 3 / 3 / statistics.median(ours) / 1e9,
            "lapack_gflops": n ** 3 / 3 / statistics.median(theirs) / 1e9,
            "ratio": ratio, "target": TARGETS.get(n) if dense.dtype == np.float64 else None,
            "profile_s": {"register_submit": statistics.median(submit),
                          "wait": statistics.median(inside) - statistics.median(submit),
                          "python_rest": statistics.median(ours) - statistics.median(inside)}}


def bench_back_to_back(n, nb, calls, blocks, session, cores, dtype=np.float64, awake=(None,),
                       settle=0.2):
    """``blocks`` times: ``calls`` starchol calls in a row (once per awake time of
    ``awake``; None: the session's), then ``calls`` LAPACK calls in a row, no sleep
    between calls, ``settle`` seconds of sleep before each block (a first, untimed block
    of each warms up). One row per awake time."""
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    from starchol import DistributedMatrix, cholesky
    from starchol.distributions import get_map

    tile_map = get_map("2dbc", 1)
    dense = spd(n, dtype=dtype)
    potrf = lapack.spotrf if dense.dtype == np.float32 else lapack.dpotrf
    pristine = DistributedMatrix.from_numpy(dense, nb, tile_map, comm=session.user_comm)
    default = session.idle.linger
    ours, theirs = {s: [] for s in awake}, []
    for block in range(blocks + 1):                    # the first blocks warm up
        for s in awake:
            session.idle.linger = default if s is None else s
            copies = [pristine.copy() for _ in range(calls)]
            times = []
            time.sleep(settle)
            for a in copies:
                t0 = time.perf_counter()
                cholesky(a, tile_map, session=session, overwrite_a=True)
                times.append(time.perf_counter() - t0)
            del copies
            if block:
                ours[s] += times
        session.idle.linger = default
        copies = [np.array(dense, order="F", copy=True) for _ in range(calls)]
        times = []
        time.sleep(settle)
        with threadpool_limits(limits=cores, user_api="blas"):
            for c in copies:
                t1 = time.perf_counter()
                _, info = potrf(c, lower=1, clean=0, overwrite_a=1)
                times.append(time.perf_counter() - t1)
                assert info == 0
        del copies
        if block:
            theirs += times
    return [{"n": n, "nb": nb, "mode": "back-to-back", "calls": calls, "blocks": blocks,
             "settle_s": settle,
             "awake_s": default if s is None else s,
             "starchol_s": ours[s], "lapack_s": theirs,
             "starchol_median_s": statistics.median(ours[s]),
             "lapack_median_s": statistics.median(theirs),
             "starchol_gflops": n ** 3 / 3 / statistics.median(ours[s]) / 1e9,
             "lapack_gflops": n ** 3 / 3 / statistics.median(theirs) / 1e9,
             "ratio": statistics.median(theirs) / statistics.median(ours[s])} for s in awake]


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=positive_int, default=7,
                   help="timed pairs per size, after one warm-up pair (default 7)")
    p.add_argument("--sizes", type=int_list, default=int_list("1024,2048,4096"),
                   help="matrix orders N, comma-separated (default 1024,2048,4096)")
    p.add_argument("--nb", type=positive_int, default=256, help="tile size (default 256)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="StarPU workers (default: every core)")
    p.add_argument("--sched", default=None, help="StarPU scheduler (default: starchol's)")
    p.add_argument("--settle", type=nonnegative_float, default=0.2,
                   help="seconds of sleep before every timed call, both sides; with "
                        "--back-to-back, before every block (default 0.2: longer than "
                        "OpenBLAS's threads spin after a parallel call)")
    p.add_argument("--back-to-back", action="store_true",
                   help="consecutive calls, no settle between them: --calls starchol calls, "
                        "then as many LAPACK calls, --blocks times")
    p.add_argument("--calls", type=positive_int, default=20,
                   help="consecutive calls per block in --back-to-back (default 20)")
    p.add_argument("--blocks", type=positive_int, default=3,
                   help="timed blocks of each side in --back-to-back, after one warm-up "
                        "block each (default 3)")
    p.add_argument("--awake", type=float_list, default=None,
                   help="--back-to-back: awake times (seconds after each computation) to "
                        "compare in the same run, comma-separated (default: the session's)")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                   help="float32: against LAPACK spotrf (no targets)")
    p.add_json("the rows and the core count")
    args = p.parse_args(argv)
    small = [n for n in args.sizes if n < args.nb]
    if small:
        p.fail(f"--sizes {','.join(map(str, small))} below --nb {args.nb}: every N must "
               f"hold at least one whole tile")
    from mpi4py import MPI

    from starchol import Session
    from starchol.runtime.workers import affinity_cores

    p.check_runtime(scheduler=args.sched, workers=args.workers)

    cores = len(affinity_cores())
    rows = []
    options = {} if args.sched is None else {"scheduler": args.sched}
    with Session(MPI.COMM_SELF, workers=args.workers, **options) as session:
        print(f"small sizes: 1 rank, {session.workers} StarPU worker(s), {cores} core(s), "
              f"scheduler {session.scheduler}, StarPU {session.version}, "
              + (f"back to back: {args.blocks} blocks of {args.calls} calls each side, "
                 f"{args.settle:g} s before each block, {args.dtype}\n"
                 if args.back_to_back else
                 f"median of {args.repeat}, {args.dtype}\n") +
              f"kernels' BLAS: {session.kernel_blas.describe()}")
        if args.back_to_back:
            print(f"{'N':>6} {'NB':>4} {'awake s':>8} {'starchol ms':>12} {'LAPACK ms':>10} "
                  f"{'GFlop/s':>14} {'ratio':>6}")
        for n in args.sizes if args.back_to_back else ():
            for r in bench_back_to_back(n, args.nb, args.calls, args.blocks, session, cores,
                                        np.dtype(args.dtype), args.awake or (None,),
                                        args.settle):
                rows.append(r)
                print(f"{n:>6} {args.nb:>4} {r['awake_s']:>8g} "
                      f"{1e3 * r['starchol_median_s']:>12.2f} "
                      f"{1e3 * r['lapack_median_s']:>10.2f} "
                      f"{r['starchol_gflops']:>6.1f} /{r['lapack_gflops']:>6.1f} "
                      f"{r['ratio']:>6.2f}")
        if not args.back_to_back:
            print(f"{'N':>6} {'NB':>4} {'tasks':>6} {'starchol ms':>12} {'LAPACK ms':>10} "
                  f"{'GFlop/s':>14} {'ratio':>6} {'target':>6}  profile ms (submit / wait / "
                  f"python)")
        for n in () if args.back_to_back else args.sizes:
            r = bench(n, args.nb, args.repeat, session, cores, args.settle,
                      np.dtype(args.dtype))
            rows.append(r)
            pr = r["profile_s"]
            tgt = r["target"]
            verdict = "" if tgt is None else ("ok" if r["ratio"] >= tgt else "BELOW")
            print(f"{n:>6} {args.nb:>4} {r['tasks']:>6} {1e3 * r['starchol_median_s']:>12.2f} "
                  f"{1e3 * r['lapack_median_s']:>10.2f} "
                  f"{r['starchol_gflops']:>6.1f} /{r['lapack_gflops']:>6.1f} "
                  f"{r['ratio']:>6.2f} {tgt if tgt else '':>6} {verdict:>5}  "
                  f"{1e3 * pr['register_submit']:.2f} / {1e3 * pr['wait']:.2f} / "
                  f"{1e3 * pr['python_rest']:.2f}")
    if args.json:
        write_json(args.json, {"cores": cores, "results": rows})
    return 0


if __name__ == "__main__":
    run_main(main)
