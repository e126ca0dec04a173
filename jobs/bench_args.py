"""``starchol bench``'s parser: its options and their help (the command itself is
:mod:`.bench_cmd`)."""
from ..integers import int_type
from ..model.memory import WINDOW
from .options import add_dtype_arg, add_seed_arg, add_window_arg
from .output import add_json_arg


def register(sub, run):
    """Add ``bench``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
    p = sub.add_parser(
        "bench", help="time starchol (1 rank) against LAPACK ?potrf",
        description="Factor the same SPD matrix with starchol (one rank, StarPU workers on "
                    "all cores) and with scipy's LAPACK dpotrf or spotrf (BLAS on all "
                    "cores), "
                    "alternating; report GFlop/s and the median ratio.")
    p.add_argument("--n", type=int, required=True, metavar="N", help="matrix order")
    p.add_argument("--nb", type=int, required=True, metavar="NB", help="tile size")
    add_dtype_arg(p, "precision: float64 (default, against dpotrf) or float32 (the "
                     "float32 kernels, against spotrf)")
    p.add_argument("--repeat", type=int_type(1), default=3, metavar="R", help="runs of each (default 3)")
    add_seed_arg(p)
    p.add_argument("--sched", default=None, metavar="NAME", help="StarPU scheduler (default prio)")
    p.add_argument("--workers", type=int, default=None, metavar="K",
                   help="StarPU workers (default: all cores)")
    add_window_arg(p, f"submission window in iterations (default {WINDOW}; 0: the whole "
                      "task graph at once; starchol run --window)")
    p.add_argument("--no-lapack", action="store_true", help="time starchol only")
    add_json_arg(p, "the result document (keys: docs/engine.md, \"starchol bench --json\")")
    p.set_defaults(func=run)
    return p
