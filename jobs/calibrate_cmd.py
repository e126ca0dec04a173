"""``starchol calibrate``: measure this machine's tile kernels and write a node
description for ``starchol simulate --node FILE``."""
import json
import logging

from ..errors import UsageError
from ..files import check_folder_writable, write_atomic
from ..linalg.calibrate import calibrate
from ..model.platform import node_from_dict
from ..runtime.workers import affinity_cores
from .options import DTYPE_NAMES
from .progress import Progress
from .traced_run import runtime_calibration

log = logging.getLogger("starchol.calibrate")


def register(sub):
    p = sub.add_parser(
        "calibrate", help="measure this machine's kernels: a node description for simulate",
        description="Time POTRF, TRSM, SYRK, GEMM and ADD on NB x NB tiles: by default from "
                    "the FxT trace of a real factorization with the runtime's kernels and "
                    "W workers on each of R ranks (--method runtime), or with W processes "
                    "calling SciPy's BLAS at once (--method fork); write the node "
                    "description (JSON) that `starchol simulate --node` reads "
                    "(docs/simulation.md).")
    p.add_argument("--nb", type=int, nargs="+", required=True, metavar="NB",
                   help="tile sizes to measure (entries)")
    p.add_argument("--dtype", nargs="+", choices=DTYPE_NAMES, default=["float64"],
                   help="precisions to measure (default float64)")
    p.add_argument("--workers", type=int, default=None, metavar="W",
                   help="concurrent workers (default: the cores this process may use)")
    p.add_argument("--method", choices=("runtime", "fork"), default="runtime",
                   help="runtime: traced factorizations with the runtime's kernels "
                        "(needs a StarPU with FxT; the default); fork: SciPy's BLAS in "
                        "forked processes")
    p.add_argument("--ranks", type=int, default=1, metavar="R",
                   help="--method runtime: ranks sharing this machine in the calibration "
                        "run (mpirun -np R), as in the run to simulate (default 1)")
    p.add_argument("--repeats", type=int, default=None, metavar="K",
                   help="--method fork: calls per measurement (default: about 0.25 s of "
                        "GEMM, 3..200)")
    p.add_argument("--bandwidth", metavar="BW", help="link bandwidth to record (e.g. 10Gbit)")
    p.add_argument("--latency", metavar="T", help="link latency to record (e.g. 2us)")
    p.add_argument("--output", "-o", required=True, metavar="FILE.json",
                   help="where to write the node description (atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def run(args):
    if any(nb < 1 for nb in args.nb):
        raise UsageError(f"--nb must be >= 1, got {min(args.nb)}")
    workers = args.workers if args.workers is not None else len(affinity_cores())
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    if args.ranks < 1:
        raise UsageError(f"--ranks must be >= 1, got {args.ranks}")
    if args.method == "fork" and args.ranks != 1:
        raise UsageError("--ranks applies to --method runtime only")
    if args.method == "runtime":
        from ..runtime.traces import check_supported
        check_supported(".")                  # a StarPU with FxT, or a clear error
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
    check_folder_writable(args.output, "--output")
    extra = {k: getattr(args, k) for k in ("bandwidth", "latency") if getattr(args, k)}
    node_from_dict({"workers": 1, "gflops": {"float64": dict.fromkeys(
        ("potrf", "trsm", "syrk", "gemm", "add"), 1.0)}, **extra}, "calibrate")  # check
    nbs = sorted(set(args.nb))
    if args.method == "runtime":
        progress = None if args.quiet else Progress("calibrating", unit="runs", enabled=True)
        doc = runtime_calibration(nbs, args.dtype, workers, args.ranks, progress)
    else:
        progress = None if args.quiet else Progress("calibrating", unit="kernels",
                                                    enabled=True)
        doc = calibrate(nbs, args.dtype, workers, args.repeats, progress)
    doc.update(extra)
    node_from_dict(doc)                       # what simulate will read
    write_atomic(args.output, json.dumps(doc, indent=1) + "\n")
    for dtype, per_nb in doc["gflops_by_nb"].items():
        for nb, speeds in per_nb.items():
            print(f"{dtype} NB = {nb}: " + ", ".join(f"{k} {v:.2f}" for k, v in speeds.items())
                  + f" GFlop/s per worker ({workers} workers x {args.ranks} rank(s), "
                  f"{args.method})")
    print(f"wrote {args.output}")
    return 0
