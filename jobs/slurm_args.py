"""``starchol slurm``'s parser: its options and their help (the command is
:mod:`.slurm_cmd`)."""
from ..distributions import MAP_NAMES, MAPS_25D
from ..runtime.backend import DEFAULT_SCHEDULER
from ..integers import int_type
from .options import add_dtype_arg, add_seed_arg
from .slurm_options import DEFAULT_TIME, GPU_SCHEDULER, LAUNCHERS


def register(sub, run):
    """Add ``starchol slurm``'s parser to the subparsers ``sub``; ``run`` is the
    function it calls."""
    p = sub.add_parser(
        "slurm", help="write sbatch scripts that run starchol run on a Slurm cluster",
        description="Print (or write with -o) a complete, commented sbatch script that runs "
                    "`starchol run` for one map and matrix size: nodes and ranks, StarPU "
                    "environment, the launch line and a JSON report named after the job id. "
                    "With --sweep, --dist/--nodes/--n take comma lists and -o names a folder "
                    "that receives one script per (map, P, N) and a submit_all.sh.",
        epilog="Example: starchol slurm --dist sbc --nodes 28 --n 100000 --nb 500 "
               "--cpus-per-node 5 --time 00:30:00 --partition compute -o sbc28.sbatch")
    g = p.add_argument_group("map and matrix (as for starchol run)")
    g.add_argument("--dist", required=True, metavar="D",
                   help=f"tile map: {', '.join(MAP_NAMES)} (with --sweep, a comma list)")
    g.add_argument("--nodes", metavar="P",
                   help="map nodes = MPI ranks (with --sweep, a comma list); "
                        "optional for --dist custom")
    g.add_argument("--grid", metavar="PxQ", help="2dbc grid (one slice's grid for 2dbc25d)")
    g.add_argument("--slices", type=int_type(1), default=None, metavar="C",
                   help=f"slices of a 2.5D map ({', '.join(MAPS_25D)})")
    g.add_argument("--map-file", metavar="FILE", help="custom map file (--dist custom)")
    g.add_argument("--n", metavar="N",
                   help="matrix order (with --sweep, a comma list); optional with --input")
    g.add_argument("--nb", type=int_type(1), required=True, metavar="NB", help="tile size")
    add_seed_arg(g, "matrix seed", default=None)
    g.add_argument("--check", action="store_true", help="compute the residual (run --check)")
    add_dtype_arg(g, "precision of the factorization (run --dtype; default float64; mixed: "
                     "a float32 factorization refined to float64 answers, with "
                     "--run-arg=--nrhs=K or --run-arg=--rhs=FILE)", default=None, mixed=True)
    g.add_argument("--input", metavar="FILE.h5:/DSET", help="read A from HDF5 (run --input)")
    g.add_argument("--output", metavar="FILE.h5:/DSET", help="write L to HDF5 (run --output)")
    g.add_argument("--run-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for starchol run, verbatim (repeat; "
                        "e.g. --run-arg=--no-cache)")

    g = p.add_argument_group("Slurm resources")
    g.add_argument("--time", default=DEFAULT_TIME, metavar="HH:MM:SS",
                   help=f"time limit, HH:MM:SS or D-HH:MM:SS (default {DEFAULT_TIME})")
    g.add_argument("--partition", metavar="NAME", help="partition (default: the cluster's)")
    g.add_argument("--account", metavar="NAME", help="account to charge")
    g.add_argument("--job-name", metavar="NAME",
                   help="job name (default starchol-MAP-PP-NN, e.g. starchol-sbc-P28-N100000)")
    g.add_argument("--cpus-per-node", type=int_type(1), metavar="K",
                   help="cores per Slurm node to use, all of them asked for; one rank per "
                        "node unless a rank cannot use K workers (--max-workers). Default: "
                        "whole nodes (--exclusive)")
    g.add_argument("--ranks-per-node", type=int_type(1), metavar="R",
                   help="MPI ranks per Slurm node (default: from --cpus-per-node, else 1)")
    g.add_argument("--mem", default="none", metavar="auto|SIZE|0|none",
                   help="memory per Slurm node: auto (the ranks' peak under starchol's "
                        "memory model, + 10 %%), SIZE as sbatch takes it (e.g. 64G, "
                        "64000 = MB), 0 (all of each node's memory) or none (no --mem "
                        "line: the cluster's default; the default)")
    g.add_argument("--overcommit", action="store_true",
                   help="allow more ranks than cores (sbatch --overcommit; small tests)")
    g.add_argument("--gpus-per-node", type=int_type(0), default=0, metavar="G",
                   help="GPUs per Slurm node (--gres=gpu:G), shared by the node's ranks: "
                        "starchol run --gpus G on each (default 0: a CPU job, --gpus 0)")
    g.add_argument("--requeue", action="store_true",
                   help="#SBATCH --requeue: Slurm reruns the job from the start when one of "
                        "its nodes fails (and scontrol requeue JOBID may rerun it after any "
                        "failure); nothing is published by a run that fails, so a rerun is "
                        "clean")
    g.add_argument("--sbatch-option", action="append", default=[], metavar="OPT",
                   help="extra #SBATCH line, verbatim (repeat; e.g. "
                        "--sbatch-option=--qos=debug)")

    g = p.add_argument_group("run time")
    g.add_argument("--launcher", choices=LAUNCHERS, default="mpirun",
                   help="Open MPI's mpirun inside the allocation (default; it reads the Slurm "
                        "allocation), or srun --mpi=PLUGIN (Open MPI 4.1 under Slurm's PMIx "
                        "lost a rank to SIGSEGV in MPI_Init in 1 job in 4 to 8 here: "
                        "docs/slurm.md, \"Launchers\")")
    g.add_argument("--mpi-plugin", default="pmix", metavar="NAME",
                   help="srun --mpi plugin (default pmix; Debian's Open MPI has no Slurm PMI2)")
    g.add_argument("--workers", type=int_type(1), metavar="W",
                   help="CPU workers per rank (default: every core Slurm gives the rank, "
                        "decided by starchol run in the job)")
    g.add_argument("--max-workers", type=int_type(1), default=None, metavar="M",
                   help="the StarPU build's CPU worker limit per process, STARPU_MAXCPUS "
                        "(default: this installation's, see starchol info)")
    g.add_argument("--sched", default=None, metavar="NAME",
                   help=f"StarPU scheduler (default {DEFAULT_SCHEDULER}, {GPU_SCHEDULER} with "
                        "--gpus-per-node; dmda/dmdas/heteroprio use calibrated performance "
                        "models: see --perf-model-dir)")
    g.add_argument("--perf-model-dir", metavar="DIR",
                   help="keep StarPU's performance models and bus calibration in DIR across "
                        "jobs (STARPU_PERF_MODEL_DIR, on a shared file system; one file per "
                        "host). Default: in the job's own STARPU_HOME, removed at its end, "
                        "so a model-based scheduler calibrates in every job")
    g.add_argument("--json-dir", metavar="DIR",
                   help="folder of the JSON reports starchol-JOBID.json (default: the "
                        "submission folder; DIR/results with --sweep)")
    g.add_argument("--starchol", metavar="CMD",
                   help="the starchol executable in the job (default: the one next to this "
                        "Python, else starchol from PATH)")
    g.add_argument("--setup", action="append", default=[], metavar="LINE",
                   help="shell line run before the launch (repeat; e.g. "
                        "--setup 'module load openmpi')")

    p.add_argument("--sweep", action="store_true",
                   help="one script per (map, P, N) from comma lists; -o DIR required")
    p.add_argument("-o", "--out", metavar="FILE",
                   help="write the script to FILE (with --sweep: a folder); default stdout")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing -o file (with --sweep: write into a folder "
                        "that holds files)")
    p.set_defaults(func=run, one_process=True)
