"""StarPU's own tiled Cholesky beside starchol and LAPACK, one rank, in the same run.

The reference the issue names (Chameleon's tiled potrf) is not packaged for Debian.
StarPU's example ``examples/cholesky/cholesky_implicit.c`` runs the same algorithm:
right-looking tiled Cholesky, POTRF/TRSM/GEMM tasks with Chameleon's priorities, the
diagonal updates as GEMM, plain ``?trsm``. This script takes that example from the
StarPU source package that ``scripts/build-starpu.sh`` fetched (its cache), makes a
float64 copy of it (the example is float32; names and literals are rewritten), builds
both against the project's StarPU and the system OpenBLAS (``-lopenblas``, as the
example's own build does), then runs, alternately:

- the example (``-size N -nblocks N/NB``, scheduler ``prio``, one CPU worker per core,
  one BLAS thread: its timing covers submission and execution, not registration);
- starchol's ``cholesky`` on the same size (whole call, as benchmarks/small_sizes.py);
- SciPy's LAPACK ``?potrf`` on every core.

It prints the medians and each one's ratio to LAPACK (LAPACK time / its time).

Usage: python benchmarks/starpu_example.py [--n 4096] [--nb 256] [--repeat 7]
                                           [--dtype float64|float32] [--keep DIR]
                                           [--json FILE]

Arguments are checked before the build, ``--json`` is written whole or not at all,
Ctrl-C stops with exit status 130 (benchmarks/common.py).
"""
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import build_flags  # noqa: E402  (the project's StarPU flags and source cache)
from common import (ArgumentParser, nonnegative_float, positive_int,  # noqa: E402
                    run_main, write_json)
from small_sizes import spd  # noqa: E402  (beside this file: the same test matrix)

MEMBERS = ("examples/cholesky/", "examples/common/", "examples/sched_ctx_utils/")
SOURCES = ("cholesky/cholesky_implicit.c", "cholesky/cholesky_kernels.c",
           "cholesky/cholesky_models.c", "common/blas.c", "sched_ctx_utils/sched_ctx_utils.c")
# double versions of the two BLAS wrappers the example's blas.c has only in float
EXTRA_C = """
void dsyr_(const char *, const int *, const double *, const double *, const int *,
           double *, const int *);
void dsyrk_(const char *, const char *, const int *, const int *, const double *,
            const double *, const int *, const double *, double *, const int *);
void STARPU_DSYR(const char *uplo, const int n, const double alpha, const double *x,
                 const int incx, double *A, const int lda)
{ dsyr_(uplo, &n, &alpha, x, &incx, A, &lda); }
void STARPU_DSYRK(const char *uplo, const char *trans, const int n, const int k,
                  const double alpha, const double *A, const int lda, const double beta,
                  double *C, const int ldc)
{ dsyrk_(uplo, trans, &n, &k, &alpha, A, &lda, &beta, C, &ldc); }
"""


def source_tarball():
    """The StarPU source tarball scripts/build-starpu.sh fetched, or None."""
    found = sorted(glob.glob(os.path.join(build_flags.starpu_source_dir(),
                                          "starpu_*.orig.tar.*")))
    return found[-1] if found else None


def to_double(text):
    """The float32 example as float64: types, BLAS names, float literals."""
    text = re.sub(r"\bfloat\b", "double", text)
    text = re.sub(r"\bSTARPU_S(GEMM|TRSM|POTRF|SCAL|SYR|SYRK)\b", r"STARPU_D\1", text)
    text = re.sub(r"\bcublasS", "cublasD", text)
    text = re.sub(r"\bfabsf\b", "fabs", text)
    return re.sub(r"(\d+\.\d*)f\b", r"\1", text)    # 1.0f -> 1.0 ("%.0f" untouched)


def build(work, dtype, tarball):
    """Extract, rewrite (float64) and compile the example; return the executable."""
    with tarfile.open(tarball) as tar:
        # <top>/examples/...: not sc_hypervisor/examples/, which has its own copies
        picked = [m for m in tar.getmembers() if m.isfile() and "/" in m.name
                  and m.name.split("/", 1)[1].startswith(MEMBERS)]
        for m in picked:
            m.name = m.name.split("/", 1)[1]
        tar.extractall(work, members=picked, filter="data")
    ex = os.path.join(work, "examples")
    sources = [os.path.join(ex, s) for s in SOURCES]
    if dtype == "float64":
        for path in glob.glob(os.path.join(ex, "cholesky", "*.[ch]")):
            with open(path) as fh:
                text = fh.read()
            with open(path, "w") as fh:
                fh.write(to_double(text))
        extra = os.path.join(ex, "cholesky", "blas_double_extra.c")
        with open(extra, "w") as fh:
            fh.write(EXTRA_C)
        sources.append(extra)
    inc, libdirs, libnames, ccx, lx = build_flags.flags()
    exe = os.path.join(work, f"cholesky_implicit_{dtype}")
    cmd = (["cc", "-O2", "-o", exe, *sources, f"-I{ex}", f"-I{os.path.join(ex, 'cholesky')}"]
           + [f"-I{d}" for d in inc] + [f"-L{d}" for d in libdirs]
           + [f"-Wl,-rpath,{d}" for d in libdirs] + [f"-l{n}" for n in libnames]
           + ["-lopenblas", "-lm", "-lpthread"] + list(lx))
    subprocess.run(cmd, check=True, cwd=os.path.join(ex, "cholesky"))
    return exe


def run_example(exe, n, nb, cores):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", STARPU_SCHED="prio",
               STARPU_NCPU=str(cores), STARPU_NCUDA="0", STARPU_NOPENCL="0",
               STARPU_FXT_TRACE="0", STARPU_SILENT="1")
    p = subprocess.run([exe, "-size", str(n), "-nblocks", str(n // nb)], env=env,
                       capture_output=True, text=True, timeout=600, check=True)
    size, ms, _ = p.stdout.strip().splitlines()[-1].split()
    assert int(size) == n, p.stdout
    return float(ms) / 1e3


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=positive_int, default=4096, help="matrix order (default 4096)")
    p.add_argument("--nb", type=positive_int, default=256, help="tile size (default 256)")
    p.add_argument("--repeat", type=positive_int, default=7,
                   help="timed rounds after one warm-up round (default 7)")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    p.add_argument("--settle", type=nonnegative_float, default=0.2,
                   help="seconds of sleep before each timed call (default 0.2)")
    p.add_argument("--keep", default=None, metavar="DIR", help="build in DIR and keep it")
    p.add_json("the times (s) of every round and their medians")
    args = p.parse_args(argv)
    p.check_runtime(n=args.n, nb=args.nb)
    if args.n % args.nb:
        p.fail(f"--n {args.n} must be a multiple of --nb {args.nb} (the example's blocks "
               f"are equal)")
    if args.keep and os.path.exists(args.keep) and not os.path.isdir(args.keep):
        p.fail(f"--keep {args.keep} exists and is not a folder")
    from mpi4py import MPI
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    from starchol import DistributedMatrix, Session, cholesky
    from starchol.distributions import get_map
    from starchol.runtime.workers import affinity_cores

    tarball = source_tarball()
    if tarball is None:
        p.fail(f"no StarPU source in {build_flags.starpu_source_dir()}: run "
               f"scripts/setup.sh (or scripts/build-starpu.sh) first")
    cores = len(affinity_cores())
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    work = args.keep or tempfile.mkdtemp(prefix="starpu-example-")
    try:
        exe = build(work, args.dtype, tarball)
        dt = np.dtype(args.dtype)
        dense = spd(args.n, dtype=dt)
        potrf = lapack.spotrf if dt == np.float32 else lapack.dpotrf
        tile_map = get_map("2dbc", 1)
        times = {"example": [], "starchol": [], "lapack": []}
        with Session(MPI.COMM_SELF) as session:
            print(f"N = {args.n}, NB = {args.nb}, {args.dtype}, {cores} core(s); starchol's "
                  f"kernels: {session.kernel_blas.describe()}; the example's: -lopenblas")
            pristine = DistributedMatrix.from_numpy(dense, args.nb, tile_map,
                                                    comm=session.user_comm)
            for r in range(args.repeat + 1):               # the first round warms up
                t_ex = run_example(exe, args.n, args.nb, cores)
                a = pristine.copy()
                time.sleep(args.settle)
                t0 = time.perf_counter()
                cholesky(a, tile_map, session=session, overwrite_a=True)
                t_us = time.perf_counter() - t0
                c = np.array(dense, order="F", copy=True)
                with threadpool_limits(limits=cores, user_api="blas"):
                    time.sleep(args.settle)
                    t0 = time.perf_counter()
                    _, info = potrf(c, lower=1, clean=0, overwrite_a=1)
                    t_la = time.perf_counter() - t0
                assert info == 0
                if r:
                    for k, v in (("example", t_ex), ("starchol", t_us), ("lapack", t_la)):
                        times[k].append(v)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{'':24} {'median ms':>10} {'LAPACK / it':>12}   all (ms)")
        for k, label in (("example", "StarPU cholesky_implicit"), ("starchol", "starchol"),
                         ("lapack", "LAPACK ?potrf")):
            print(f"{label:24} {1e3 * med[k]:>10.1f} {med['lapack'] / med[k]:>12.2f}   "
                  + " ".join(f"{1e3 * t:.0f}" for t in times[k]))
        if args.json:
            write_json(args.json, {
                "n": args.n, "nb": args.nb, "dtype": args.dtype, "cores": cores,
                "repeat": args.repeat, "times_s": times, "median_s": med,
                "ratio_lapack_over": {k: med["lapack"] / med[k] for k in med}})
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    run_main(main)
