"""``starchol plan``'s parser: its options and their help (the command itself is
:mod:`.plan_cmd`)."""
from ..integers import int_type
from ..model.plan import MEASURED_STEP_LATENCY_S, STEP_LATENCY_S
from .options import add_dtype_arg, add_nrhs_arg
from .output import add_json_arg


def register(sub, run):
    """Add ``plan``'s parser to the subparsers ``sub``; ``run`` is the function it calls."""
    p = sub.add_parser(
        "plan", help="pick a 2D or 2.5D map for P nodes and a memory budget",
        description="List the 2D and 2.5D maps that fit P nodes and the memory per node, "
                    "with predicted bytes and tile storage per node, best first, and explain "
                    "the pick.")
    p.add_argument("--nodes", type=int_type(1), required=True, metavar="P",
                   help="nodes available (maps on fewer nodes are listed too)")
    p.add_argument("--n", type=int_type(1), required=True, metavar="N", help="matrix order")
    p.add_argument("--nb", type=int_type(1), required=True, metavar="NB", help="tile size")
    add_dtype_arg(p, "precision of the run: float64 (default, 8-byte entries) or float32 "
                     "(4 bytes: half the bytes and tile memory; give --node-gflops at "
                     "single-precision speed); mixed: a float32 factorization refined to "
                     "float64 answers (run --dtype mixed): float32 tiles plus the float64 A "
                     "and right-hand sides in memory (see --nrhs)", mixed=True)
    add_nrhs_arg(p, "--dtype mixed: right-hand sides of the solve (default 1), in the "
                 "memory and the run command")
    p.add_argument("--memory-per-node", type=float, required=True, metavar="BYTES",
                   help="memory of each node for its rank, bytes (e.g. 64e9); a map fits "
                        "when its peak per node (tiles, received tile copies, runtime) "
                        "does")
    p.add_argument("--node-gflops", type=float, default=1000.0, metavar="GF",
                   help="sustained DGEMM GFlop/s of one node for the estimate (default 1000)")
    p.add_argument("--node-bandwidth", type=float, default=12.5e9, metavar="B/S",
                   help="network bytes/s of one node for the estimate (default 12.5e9, 100 Gb/s)")
    p.add_argument("--step-latency", type=float, default=STEP_LATENCY_S, metavar="S",
                   help=f"seconds each reduction step of a 2.5D map (a panel step where the "
                        f"slice changes) adds to the critical path "
                        f"(the other slices' partial sums sent into the factoring copy and "
                        f"added; their bytes are in the transfer time): default {STEP_LATENCY_S:g} (one small "
                        f"MPI message and task on a cluster); measured "
                        f"{MEASURED_STEP_LATENCY_S:g} on the emulated cluster "
                        f"(docs/cluster.md)")
    p.add_argument("--simulate", action="store_true",
                   help="rank the fitting maps by simulated makespan on SimGrid "
                        "(docs/simulation.md): needs --node FILE; the link is "
                        "--node-bandwidth")
    p.add_argument("--node", metavar="FILE",
                   help="--simulate: node description (workers, GFlop/s per kernel; "
                        "`starchol calibrate` writes one, examples/nodes/)")
    p.add_argument("--runtime", metavar="FILE",
                   help="runtime description (examples/runtimes/): its costs enter the "
                        "estimate (per-message time, submission clock; with --node, the "
                        "node's comm_throughput too) and the simulation, one time model "
                        "for both (docs/simulation.md); default: no runtime costs, one "
                        "send in flight")
    p.add_argument("--simulate-top", type=int_type(1), default=8, metavar="K",
                   help="--simulate: simulate the K best fitting maps by the estimate "
                        "(default 8)")
    add_json_arg(p, "the plan as a JSON document (keys: docs/volume-model.md, "
                    "\"starchol plan --json\")")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run, one_process=True)
    return p
