"""``starchol report``'s parser: its options and their help (the command itself is
:mod:`.report_cmd`)."""
from .options import add_cache_arg, add_dtype_arg, add_size_args
from .volume_args import BYTES_DTYPE_HELP


def register(sub, run):
    """Add ``report``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
    p = sub.add_parser(
        "report", help="Markdown + PNG report of run JSON documents, or of the volume model",
        description="Write DIR/report.md and PNG figures: from `starchol run --json` "
                    "documents (node-pair byte heat maps, bytes per node, GFlop/s and bytes "
                    "by map), or with --model the predicted volume against node count of "
                    "every map family with the leading terms.")
    p.add_argument("runs", nargs="*", metavar="RUN.json",
                   help="run documents to report (or trace folders of starchol run --trace)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="output folder (created if missing; one that holds files only "
                        "with --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into an -o folder that holds files (replacing those of "
                        "the same names)")
    g = p.add_argument_group("model report (--model)")
    g.add_argument("--model", action="store_true",
                   help="report the predicted volume against node count (no run documents)")
    g.add_argument("--nodes-range", metavar="A..B",
                   help="node counts A to B inclusive, e.g. 3..60 (A >= 2)")
    g.add_argument("--slices", default="best", metavar="best|C[,C...]",
                   help="2.5D slice counts: 'best' (the c >= 2 with the fewest bytes at "
                        "each P, default) or a list such as 2,3")
    add_cache_arg(g)
    add_dtype_arg(g, BYTES_DTYPE_HELP)
    add_size_args(p)
    s = p.add_argument_group("simulated report (--simulate; docs/simulation.md)")
    s.add_argument("--simulate", action="store_true",
                   help="simulate every map family on each node count of --nodes-range "
                        "(SimGrid) and plot time and GFlop/s against nodes")
    s.add_argument("--node", metavar="FILE",
                   help="--simulate: node description (`starchol calibrate`, examples/nodes/)")
    s.add_argument("--bandwidth", metavar="BW",
                   help="--simulate: each node's link (e.g. 100Gbit); default the node's")
    s.add_argument("--runtime", metavar="FILE",
                   help="--simulate: runtime description (examples/runtimes/); default: "
                        "no runtime costs, one send in flight")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run, one_process=True)
    return p
