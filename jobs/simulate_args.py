"""``starchol simulate``'s parser: its options and their help (the command itself is
:mod:`.simulate_cmd`)."""
from ..integers import int_type
from ..model.counts import KERNELS
from ..model.platform import MAX_WORKERS
from ..model.rhs_volume import SOLVE_VARIANTS
from ..runtime.starpu_env import SENDS_IN_FLIGHT, STARPU_SENDS_IN_FLIGHT
from .options import (add_cache_arg, add_dtype_arg, add_map_args, add_nrhs_arg, add_size_args,
                      add_window_arg)
from .output import add_json_arg

#: a link when neither the node description nor the command line gives one
DEFAULT_BANDWIDTH, DEFAULT_LATENCY = "10Gbit", "1us"


def add_platform_args(parser):
    """The node and network options (simulate, plan --simulate, report --simulate)."""
    g = parser.add_argument_group("platform (a node description, or its figures)")
    g.add_argument("--node", metavar="FILE",
                   help="node description (JSON: workers, GFlop/s per worker per kernel; "
                        "`starchol calibrate` writes this machine's; examples/nodes/)")
    g.add_argument("--cores", type=int_type(1, MAX_WORKERS), metavar="W",
                   help="workers per node (with --node-gflops, or to override --node's)")
    g.add_argument("--node-gflops", metavar="G|k=G,...",
                   help="GFlop/s of one worker: one number for every kernel, or per kernel "
                        f"({','.join(k + '=G' for k in KERNELS)})")
    g.add_argument("--bandwidth", metavar="BW",
                   help="each node's link, each direction (e.g. 10mbit, 100Gbit, 1.2GB/s); "
                        f"default: the node description's, else {DEFAULT_BANDWIDTH}")
    g.add_argument("--latency", metavar="T",
                   help=f"each node's link latency (e.g. 2us, 0.1ms); default: the node "
                        f"description's, else {DEFAULT_LATENCY}")
    g.add_argument("--backbone", metavar="BW[,T]",
                   help="a shared link every transfer crosses (bandwidth, latency)")
    g.add_argument("--sends-in-flight", type=int_type(0, 2 ** 31 - 1), default=None,
                   metavar="K",
                   help=f"sends a node keeps in flight, the others queued by priority "
                        f"(STARPU_MPI_NDETACHED_SEND; default {SENDS_IN_FLIGHT}, as starchol "
                        f"run sets it; StarPU's own is {STARPU_SENDS_IN_FLIGHT}; 0: no limit)")
    g.add_argument("--pair-serial", action="store_true",
                   help="one send at a time from a node to each other node")
    add_runtime_arg(g)


def add_runtime_arg(group):
    """``--runtime FILE`` (simulate, plan --simulate, report --simulate)."""
    group.add_argument("--runtime", metavar="FILE",
                       help="runtime description (JSON: sends in flight, submission, "
                            "seconds per task and per message; examples/runtimes/, "
                            "docs/simulation.md); default: no runtime costs, one send in "
                            "flight")


def register(sub, run):
    """Add ``simulate``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
    p = sub.add_parser(
        "simulate", help="simulated time of a run on a described platform (SimGrid)",
        description="Replay the Cholesky task graph the runtime would run (the same "
                    "loops, priorities and transfers) on SimGrid: one host per node with "
                    "its workers, each node's link, prio list scheduling. Prints the "
                    "makespan, GFlop/s, each node's busy fraction, the bytes (= starchol "
                    "volume) and the critical path (docs/simulation.md).")
    add_map_args(p)
    add_size_args(p)
    add_cache_arg(p)
    add_dtype_arg(p, "entries of 8 bytes (float64, default) or 4 (float32); picks the "
                     "node's kernel speeds for that dtype")
    add_platform_args(p)
    add_json_arg(p, "the simulation document (makespan_s, gflops, busy_fraction, bytes, "
                    "pair_bytes, critical_path_s, ...)")
    add_nrhs_arg(p, "also simulate the solve L L^T X = B with K right-hand sides after "
                 "the factorization (as `starchol run --nrhs K`), in the variant "
                 "Factor.solve picks (see --variant)")
    p.add_argument("--variant", choices=("auto",) + SOLVE_VARIANTS, default=None,
                   help="with --nrhs: the solve's graph (rhs: L in place, blocks of B and "
                        "partial sums move; factor: L's tiles move; auto, the default: "
                        "fewer bytes on the busiest link)")
    add_window_arg(p, "submission window in iterations, as `starchol run --window`: a node "
                      "submits iteration k once its tasks of iteration k - W are done "
                      "(default: the --runtime description's, else run's rule, "
                      "docs/runtime.md; 0: the whole task graph at once); the solve's too")
    p.add_argument("--gantt", metavar="FILE.png",
                   help="draw the simulated schedule (one row per worker, first nodes)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run, one_process=True)
    return p
