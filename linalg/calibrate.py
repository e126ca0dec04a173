"""Kernel speeds of this machine, measured, for the simulator's node descriptions.

Two ways, both giving a node description (:mod:`.platform`) with ``gflops_by_nb``:

- :func:`calibrate_runtime` (``starchol calibrate``'s default): a real factorization
  with the runtime's own codelets and BLAS (``starchol run --trace``, one rank and W
  workers, or R ranks under ``mpirun``, run by the command line's
  :mod:`starchol.jobs.traced_run`), and each kernel's speed from the tasks of its
  FxT trace: the kernel's flops over the total time its tasks took (a flop-weighted mean
  of the task durations, so the slow calls count as much as the run spent in them).
- :func:`calibrate` (``--method fork``): the first way below, SciPy's BLAS called from
  forked processes; kept for a StarPU without FxT, and used for ADD when the traced run
  has no ADD tasks (a 2D graph on one rank).

``calibrate(nbs, dtypes, workers)`` times the tile kernels the task graphs run (POTRF,
TRSM, SYRK, GEMM of NB x NB tiles, and the 2.5D ADD) with ``workers`` processes calling
the same kernel at once, each with one BLAS thread, as the run's StarPU workers do: the
kernels share the caches and memory bandwidth as in a run. BLAS/LAPACK are SciPy's
(``scipy.linalg.blas``/``lapack``: the library the kernels call with
``STARCHOL_KERNEL_BLAS=scipy``). Each figure is the median over the workers of each
worker's median call time (:data:`QUANTILE`), after one warm-up call; calibrate on a
quiet machine (other programs' load slows the calls down); it is turned into GFlop/s with the
kernel's flop count (POTRF NB^3/3, TRSM and SYRK NB^3, GEMM 2 NB^3, ADD NB^2).

The result is a node description (:mod:`.platform`) with ``gflops_by_nb`` per dtype and
NB, and ``gflops`` per dtype at the largest NB measured (for other tile sizes).
"""
import multiprocessing
import os
import platform as _platform
import time

import numpy as np

from ..model.counts import KERNEL_OF, KERNELS, kernel_flops

#: each worker's figure: this quantile of its call times (the median: a low quantile
#: would pick the calls made while the other workers were descheduled, on a shared
#: machine, and lose the effect of the workers running together)
QUANTILE = 0.5
def _kernel_call(kernel, nb, dtype, rng):
    """A function that runs ``kernel`` once on fresh-enough NB x NB operands."""
    from scipy.linalg import blas, lapack

    prefix = "s" if dtype == "float32" else "d"
    a = np.asfortranarray(rng.standard_normal((nb, nb)).astype(dtype))
    b = np.asfortranarray(rng.standard_normal((nb, nb)).astype(dtype))
    c = np.asfortranarray(rng.standard_normal((nb, nb)).astype(dtype))
    spd = np.asfortranarray((a @ a.T + nb * np.eye(nb)).astype(dtype))
    low = np.asfortranarray(np.linalg.cholesky(spd.astype(np.float64)).astype(dtype))
    if kernel == "potrf":
        potrf = getattr(lapack, prefix + "potrf")
        work = np.empty_like(spd, order="F")

        def call():
            work[...] = spd
            potrf(work, lower=1, overwrite_a=1, clean=0)
        return call
    if kernel == "trsm":
        trsm = getattr(blas, prefix + "trsm")
        return lambda: trsm(1.0, low, b, side=1, lower=1, trans_a=1, overwrite_b=1)
    if kernel == "syrk":
        syrk = getattr(blas, prefix + "syrk")
        return lambda: syrk(-1.0, a, beta=1.0, c=c, lower=1, overwrite_c=1)
    if kernel == "gemm":
        gemm = getattr(blas, prefix + "gemm")
        return lambda: gemm(-1.0, a, b, beta=1.0, c=c, trans_b=1, overwrite_c=1)
    if kernel == "add":
        return lambda: np.add(c, b, out=c)
    raise ValueError(f"unknown kernel {kernel!r}")


def _worker(conn, kernel, nb, dtype, repeats, seed, barrier):
    from threadpoolctl import threadpool_limits

    try:
        with threadpool_limits(1):
            call = _kernel_call(kernel, nb, dtype, np.random.default_rng(seed))
            call()                                   # warm-up
            barrier.wait()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
        conn.send(float(np.quantile(times, QUANTILE)))
    except BaseException as exc:  # noqa: BLE001  reported to the parent
        conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def time_kernel(kernel, nb, dtype, workers, repeats):
    """Seconds of one ``kernel`` call on NB x NB ``dtype`` tiles while
    ``workers`` processes call it at once (see the module docstring)."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers)
    pipes, procs = [], []
    for w in range(workers):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(child, kernel, nb, dtype, repeats, w, barrier),
                        daemon=True)
        p.start()
        child.close()
        pipes.append(parent)
        procs.append(p)
    out = []
    for parent, p in zip(pipes, procs):
        try:
            out.append(parent.recv())
        except EOFError:
            out.append("the worker process died")
        p.join()
    bad = [o for o in out if isinstance(o, str)]
    if bad:
        raise RuntimeError(f"timing {kernel} (NB = {nb}, {dtype}) failed: {bad[0]}")
    return float(np.median(out))


def repeats_for(nb, budget_s=0.25, guess_gflops=10.0):
    """Calls per measurement: about ``budget_s`` of GEMM at ``guess_gflops``, 3..200."""
    return int(min(200, max(3, budget_s * guess_gflops * 1e9 / (2.0 * nb ** 3))))


def _node_document(by_nb, nbs, dtypes, workers, how, calibration):
    """The node description (JSON-ready dict) of a calibration.

    ``by_nb[dtype][str(nb)]`` holds GFlop/s per kernel; the largest NB's speeds are the
    node's ``gflops``. ``how`` says how they were measured (in ``source``), and
    ``calibration`` gets this machine's CPU count and processor added.
    """
    top = str(max(nbs))
    return {
        "name": f"{_platform.node()} (calibrated)",
        "workers": int(workers),
        "gflops": {dt: dict(by_nb[dt][top]) for dt in dtypes},
        "gflops_by_nb": by_nb,
        "source": (f"starchol calibrate on {_platform.node()}: {how}, "
                   f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}"),
        "calibration": dict(calibration, cpus=os.cpu_count(),
                            processor=_platform.processor() or _platform.machine()),
    }


def calibrate(nbs, dtypes=("float64",), workers=1, repeats=None, progress=None):
    """Measure every kernel of :data:`~starchol.model.counts.KERNELS` for each NB in
    ``nbs`` and dtype in ``dtypes`` with ``workers`` concurrent workers; returns the
    node description (a dict for :func:`~starchol.model.platform.node_from_dict`),
    with the seconds measured under ``calibration``. ``progress(done, total)`` after
    each measurement."""
    nbs = [int(nb) for nb in nbs]
    total, done = len(nbs) * len(dtypes) * len(KERNELS), 0
    by_nb, seconds = {}, {}
    for dtype in dtypes:
        by_nb[dtype], seconds[dtype] = {}, {}
        for nb in nbs:
            reps = repeats or repeats_for(nb)
            speeds, secs = {}, {}
            for kernel in KERNELS:
                t = time_kernel(kernel, nb, dtype, workers, reps)
                secs[kernel] = t
                speeds[kernel] = round(kernel_flops(kernel, nb) / t / 1e9, 4)
                done += 1
                if progress is not None:
                    progress(done, total)
            by_nb[dtype][str(nb)] = speeds
            seconds[dtype][str(nb)] = secs
    return _node_document(
        by_nb, nbs, dtypes, workers,
        f"{workers} concurrent worker(s), SciPy BLAS/LAPACK, one thread each",
        {"seconds": seconds})


#: tiles per side of a calibration run (N = NT x NB): at least RUNTIME_MIN_NT, more for
#: small NB so that N reaches RUNTIME_MIN_N, at most RUNTIME_MAX_NT (5,984 tasks)
RUNTIME_MIN_NT, RUNTIME_MAX_NT = 16, 32
RUNTIME_MIN_N = 4096


def runtime_n(nb):
    """Matrix order of the calibration run for tile size ``nb`` (entries): a whole
    number of tiles (see :data:`RUNTIME_MIN_NT`)."""
    return nb * max(RUNTIME_MIN_NT, min(RUNTIME_MAX_NT, -(-RUNTIME_MIN_N // nb)))


def speeds_from_trace(summary, nb):
    """``{kernel: GFlop/s of one worker}`` from a trace summary (``trace.json`` of
    ``starchol run --trace``) of a run on whole NB x NB tiles: for each kernel of
    :data:`~starchol.model.counts.KERNELS`, its tasks' flops over their total
    duration (codelets mapped to kernels as the simulator does: ``gemm0`` is GEMM, ...).
    Kernels without tasks are left out. ValueError on a summary without tasks."""
    fields = summary.get("task_fields", ["kernel", "rank", "worker", "start_ms", "end_ms"])
    k_i, s_i, e_i = fields.index("kernel"), fields.index("start_ms"), fields.index("end_ms")
    seconds, count = {}, {}
    for row in summary.get("tasks", []):
        kernel = KERNEL_OF.get(row[k_i])
        if kernel is None:
            continue
        seconds[kernel] = seconds.get(kernel, 0.0) + (row[e_i] - row[s_i]) / 1e3
        count[kernel] = count.get(kernel, 0) + 1
    if not count:
        raise ValueError("the trace has no tasks of the Cholesky's kernels")
    return {k: float(f"{count[k] * kernel_flops(k, nb) / seconds[k] / 1e9:.6g}")
            for k in KERNELS if k in count and seconds[k] > 0}


def calibrate_runtime(nbs, traced_run, dtypes=("float64",), workers=1, ranks=1,
                      progress=None):
    """Kernel speeds from traced factorizations with the runtime's codelets and BLAS,
    one per NB and dtype, ``workers`` workers on each of ``ranks`` ranks sharing this
    machine (as the run to be simulated has them); returns the node description
    (``workers`` = W). ``traced_run(n, nb, dtype)`` runs the factorization of order
    ``n`` (:func:`runtime_n`) and returns its trace summary: the command line's
    ``starchol.jobs.traced_run.traced_run`` (the library builds no command line). ADD,
    which only 2.5D graphs run, is timed as :func:`calibrate` does when the run had none.
    ``progress(done, total)`` after each run."""
    nbs = [int(nb) for nb in nbs]
    total, done = len(nbs) * len(dtypes), 0
    by_nb, spans = {}, {}
    for dtype in dtypes:
        by_nb[dtype], spans[dtype] = {}, {}
        for nb in nbs:
            summary = traced_run(runtime_n(nb), nb, dtype)
            speeds = speeds_from_trace(summary, nb)
            if "add" not in speeds:
                t = time_kernel("add", nb, dtype, max(1, workers * ranks), repeats_for(nb))
                speeds["add"] = round(kernel_flops("add", nb) / t / 1e9, 4)
            missing = [k for k in KERNELS if k not in speeds]
            if missing:
                raise RuntimeError(f"the calibration run (NB = {nb}) has no "
                                   f"{', '.join(missing)} tasks")
            by_nb[dtype][str(nb)] = {k: speeds[k] for k in KERNELS}
            spans[dtype][str(nb)] = round(summary.get("span_ms", 0.0) / 1e3, 4)
            done += 1
            if progress is not None:
                progress(done, total)
    return _node_document(
        by_nb, nbs, dtypes, workers,
        f"traced factorizations (N = NT x NB, NT >= {RUNTIME_MIN_NT}) with the runtime's "
        f"kernels, {ranks} rank(s) x {workers} worker(s) on this machine",
        {"method": "runtime", "ranks": int(ranks), "run_seconds": spans})
