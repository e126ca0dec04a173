"""``starchol calibrate``'s parser: its options and their help (the command itself is
:mod:`.calibrate_cmd`)."""
from ..integers import int_type
from .options import DTYPE_NAMES


def register(sub, run):
    """Add ``calibrate``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
    p = sub.add_parser(
        "calibrate", help="measure this machine's kernels: a node description for simulate",
        description="Time POTRF, TRSM, SYRK, GEMM and ADD on NB x NB tiles: by default from "
                    "the FxT trace of a real factorization with the runtime's kernels and "
                    "W workers on each of R ranks (--method runtime), or with W processes "
                    "calling SciPy's BLAS at once (--method fork); write the node "
                    "description (JSON) that `starchol simulate --node` reads "
                    "(docs/simulation.md).")
    p.add_argument("--nb", type=int_type(1), nargs="+", required=True, metavar="NB",
                   help="tile sizes to measure (entries)")
    p.add_argument("--dtype", nargs="+", choices=DTYPE_NAMES, default=["float64"],
                   help="precisions to measure (default float64)")
    p.add_argument("--workers", type=int_type(1), default=None, metavar="W",
                   help="concurrent workers (default: the cores this process may use)")
    p.add_argument("--method", choices=("runtime", "fork"), default="runtime",
                   help="runtime: traced factorizations with the runtime's kernels "
                        "(needs a StarPU with FxT; the default); fork: SciPy's BLAS in "
                        "forked processes")
    p.add_argument("--ranks", type=int_type(1), default=1, metavar="R",
                   help="--method runtime: ranks sharing this machine in the calibration "
                        "run (mpirun -np R), as in the run to simulate (default 1)")
    p.add_argument("--repeats", type=int_type(1), default=None, metavar="K",
                   help="--method fork: calls per measurement (default: about 0.25 s of "
                        "GEMM, 3..200)")
    p.add_argument("--bandwidth", metavar="BW", help="link bandwidth to record (e.g. 10Gbit)")
    p.add_argument("--latency", metavar="T", help="link latency to record (e.g. 2us)")
    p.add_argument("--output", "-o", required=True, metavar="FILE.json",
                   help="where to write the node description (atomically)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the --output file if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)
    return p
