"""``starchol slurm``: sbatch scripts that run ``starchol run`` on a Slurm cluster.

    starchol slurm --dist D --nodes P [--grid PxQ] [--slices C] --n N --nb NB
        [--time HH:MM:SS] [--partition NAME] [--cpus-per-node K] [--ranks-per-node R]
        [--launcher mpirun|srun] [--requeue] [--input F.h5:/A] [--output F.h5:/L] [--json-dir DIR]
        [--mem auto|SIZE|0|none] [--gpus-per-node G] [--perf-model-dir DIR] [-o FILE]
    starchol slurm --sweep --dist sbc,2dbc --nodes 28 --n 20000,40000 --nb 500 -o DIR

The ranks start with Open MPI's ``mpirun`` inside the allocation (default) or ``srun
--mpi=pmix`` (``--launcher srun``, with ``SLURM_PMIX_FENCE=tree``): under srun with
Slurm's default fences, Open MPI 4.1 lost a rank to SIGSEGV in MPI_Init in about 1 job in
4 on the emulated cluster (docs/slurm.md, "Launchers"). ``--requeue`` lets Slurm rerun
the job after a node failure; by default the script says ``--no-requeue``.

``--nodes P`` is the map's node count, i.e. the number of MPI ranks. The script puts R
ranks on each Slurm node (``--ranks-per-node``; by default derived from
``--cpus-per-node``, see :func:`plan_ranks`), so it asks Slurm for ceil(P / R) nodes.

``--gpus-per-node G`` asks Slurm for G GPUs on each node (``--gres=gpu:G``, for the job
and for the srun step that starts mpirun's daemons or the ranks) and runs ``starchol run --gpus G`` on every rank: the ranks of a
node share its GPUs, each GPU run by CUDA workers that each keep a core (docs/gpu.md).
Without it the run line says ``--gpus 0``, so a CPU job never uses GPUs it was not
given. GPU jobs default to the ``dmdas`` scheduler (``--sched`` otherwise);
``--perf-model-dir`` keeps StarPU's calibrated models across jobs.

``--mem auto`` asks Slurm for the memory the job's ranks need on one node: R times the
peak of the rank that needs the most under the model of ``starchol plan`` and ``starchol
run``'s pre-flight check (:func:`starchol.model.memory.node_memory`; N read from
``--input`` when ``--n`` is not given), plus :data:`MEM_HEADROOM`.

Everything is checked before anything is written: the map (so a node count the map
cannot use fails now, not in the queue), the sizes, the time limit, the files (no output
on an input, an input that exists here is inspected), and the ``starchol run`` command
line itself against this installation's ``run`` parser.
"""
import dataclasses
import math
import os
import re
import shlex
import sys
from dataclasses import dataclass

from ..distributions import MAP_NAMES, MAPS_25D
from ..errors import UsageError
from ..runtime.backend import DEFAULT_SCHEDULER
from ..runtime.workers import (DEFAULT_CUDA_WORKERS_PER_GPU, installed_max_cpus,
                                plan_ranks)
from .options import (GRID_MAPS, add_dtype_arg, add_seed_arg, build_map, check_input_order,
                      check_map_options, check_node_count, check_scheduler_name,
                      check_time_limit, matrix_sizes)
from ..files import OutputFolder, check_folder_writable
from .output import write_atomic
from .slurm_template import SCRIPT

DEFAULT_TIME = "01:00:00"
#: the scheduler of GPU jobs when --sched is not given (docs/gpu.md: the first choice)
GPU_SCHEDULER = "dmdas"
LAUNCHERS = ("srun", "mpirun")

#: --mem auto asks for the model's peak times this (the model was measured up to 1 % under
#: a rank's peak RSS; docs/volume-model.md, "Memory per node")
MEM_HEADROOM = 1.10
_MEM_RE = re.compile(r"^[0-9]+[KMGTkmgt]?$")
_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+):(\d{2}):(\d{2})$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")


def register(sub):
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
    g.add_argument("--slices", type=int, default=None, metavar="C",
                   help=f"slices of a 2.5D map ({', '.join(MAPS_25D)})")
    g.add_argument("--map-file", metavar="FILE", help="custom map file (--dist custom)")
    g.add_argument("--n", metavar="N",
                   help="matrix order (with --sweep, a comma list); optional with --input")
    g.add_argument("--nb", type=int, required=True, metavar="NB", help="tile size")
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
    g.add_argument("--cpus-per-node", type=int, metavar="K",
                   help="cores per Slurm node to use, all of them asked for; one rank per "
                        "node unless a rank cannot use K workers (--max-workers). Default: "
                        "whole nodes (--exclusive)")
    g.add_argument("--ranks-per-node", type=int, metavar="R",
                   help="MPI ranks per Slurm node (default: from --cpus-per-node, else 1)")
    g.add_argument("--mem", default="none", metavar="auto|SIZE|0|none",
                   help="memory per Slurm node: auto (the ranks' peak under starchol's "
                        "memory model, + 10 %%), SIZE as sbatch takes it (e.g. 64G, "
                        "64000 = MB), 0 (all of each node's memory) or none (no --mem "
                        "line: the cluster's default; the default)")
    g.add_argument("--overcommit", action="store_true",
                   help="allow more ranks than cores (sbatch --overcommit; small tests)")
    g.add_argument("--gpus-per-node", type=int, default=0, metavar="G",
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
    g.add_argument("--workers", type=int, metavar="W",
                   help="CPU workers per rank (default: every core Slurm gives the rank, "
                        "decided by starchol run in the job)")
    g.add_argument("--max-workers", type=int, default=None, metavar="M",
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
    p.set_defaults(func=run, one_process=True)


# -- checks ------------------------------------------------------------------------------
def parse_time(text):
    """'[D-]HH:MM:SS' -> seconds (UsageError with the expected form otherwise)."""
    m = _TIME_RE.match(str(text).strip())
    if not m:
        raise UsageError(f"--time must be HH:MM:SS or D-HH:MM:SS (e.g. 01:30:00 or "
                         f"2-00:00:00), got {text!r}")
    days, hours, minutes, seconds = (int(v) if v else 0 for v in m.groups())
    if minutes > 59 or seconds > 59:
        raise UsageError(f"--time {text!r}: minutes and seconds must be 00..59")
    if m.group(1) and hours > 23:
        raise UsageError(f"--time {text!r}: with days, hours must be 00..23")
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total == 0:
        raise UsageError("--time must be longer than 00:00:00")
    return check_time_limit(total, text)


def _int_list(text, flag):
    items = [t.strip() for t in str(text).split(",")]
    try:
        values = [int(t) for t in items]
    except ValueError:
        raise UsageError(f"{flag} must be an integer{' or a comma list' if ',' in text else ''}"
                         f", got {text!r}") from None
    return values


def _name(value, flag):
    if value is not None and not _NAME_RE.match(value):
        raise UsageError(f"{flag} {value!r}: use letters, digits and . _ + - only")
    return value


def _h5_spec(value, flag):
    """'file.h5:/dset' with the file made absolute (the job may start elsewhere)."""
    if value is None:
        return None
    path, sep, dset = value.rpartition(":")
    if not sep or not path or not dset:
        raise UsageError(f"{flag} must look like FILE.h5:/DATASET (e.g. a.h5:/A), got {value!r}")
    return f"{os.path.abspath(os.path.expanduser(path))}:{dset}"


def max_workers_of(args):
    """--max-workers, else the STARPU_MAXCPUS of this installation's StarPU."""
    if args.max_workers is not None:
        if args.max_workers < 1:
            raise UsageError(f"--max-workers must be >= 1, got {args.max_workers}")
        return args.max_workers
    limit = installed_max_cpus()
    if limit is None:
        raise UsageError("this starchol's StarPU layer is not built, so the CPU worker limit "
                         "of the cluster's StarPU is unknown: give --max-workers M "
                         "(STARPU_MAXCPUS; `starchol info` on the cluster prints it)")
    return limit


# -- the plan of one job -------------------------------------------------------------------
@dataclass(frozen=True)
class JobOptions:
    """The options of every job, as checked (:func:`check_options`; the parsed options
    are not modified): ``mem`` (``--mem``, its words lower-cased), ``sched`` (``--sched``,
    or the default for CPU or GPU jobs), ``input`` and ``output`` (``FILE.h5:/DATASET``
    with the file made absolute, or None), ``perf_model_dir`` (absolute, or None) and
    ``input_n`` (the order of an ``--input`` this machine can read, else None)."""
    mem: str = "none"
    sched: str = DEFAULT_SCHEDULER
    input: object = None
    output: object = None
    perf_model_dir: object = None
    input_n: object = None


@dataclass(frozen=True)
class JobPlan:
    """One checked job: the map and size, and the Slurm resources.

    ``nodes`` is the map's node count (MPI ranks); ``slurm_nodes`` the Slurm nodes asked
    for; ``cores_per_rank`` None means whole nodes (the job splits each node's cores
    among its ranks); ``workers`` None means every core of the rank (decided by
    ``starchol run`` in the job, from Slurm's allocation); ``max_workers`` is the StarPU
    build's STARPU_MAXCPUS; ``mem`` the value of ``#SBATCH --mem`` (None: no such line)
    and ``mem_comment`` the lines that explain it.
    """
    dist: str
    nodes: int
    n: object
    map: object
    slurm_nodes: int
    ranks_per_node: int
    cores_per_rank: object
    workers: object
    max_workers: int
    tag: str
    job_name: str
    mem: object = None
    mem_comment: tuple = ()
    gpus_per_node: int = 0
    options: JobOptions = JobOptions()


def job_map(args, dist, nodes):
    """The map of one job: ``--grid`` and ``--slices`` where they apply (a sweep drops
    them for its other maps; ``--slices 1`` of a 2D map is taken), checked by
    :func:`~starchol.jobs.options.check_map_options`."""
    grid = args.grid if dist in GRID_MAPS or not args.sweep else None
    slices = args.slices if dist in MAPS_25D or args.slices != 1 and not args.sweep \
        else None
    check_map_options(dist, grid=grid, slices=slices, map_file=args.map_file)
    return build_map(dist, nodes, grid=grid, slices=1 if slices is None else slices,
                     path=args.map_file)


def _resources(args, nodes, max_workers):
    """Slurm node count, ranks per node, cores per rank (None: whole nodes), workers per
    rank (None: every core of the rank, decided in the job)."""
    k, r = args.cpus_per_node, args.ranks_per_node
    if k is not None and k < 1:
        raise UsageError(f"--cpus-per-node must be >= 1, got {k}")
    if r is not None and r < 1:
        raise UsageError(f"--ranks-per-node must be >= 1, got {r}")
    if args.workers is not None and not 1 <= args.workers <= max_workers:
        raise UsageError(f"--workers must be between 1 and {max_workers} (the StarPU "
                         f"build's limit STARPU_MAXCPUS; raise --max-workers if yours is "
                         f"higher), got {args.workers}")
    if k is not None and r is None:
        r = plan_ranks(k, max_workers)[0]
    r = min(r or 1, nodes)  # never more ranks per node than ranks
    cores = None
    if k is not None:
        if r > k and not args.overcommit:
            raise UsageError(f"--ranks-per-node {r} is more ranks than --cpus-per-node {k} "
                             f"cores; add --overcommit (tests only: ranks then share cores) "
                             f"or use --ranks-per-node {k} or fewer")
        cores = max(1, k // r)
    workers = args.workers
    if workers is None and args.overcommit and k is not None and r > k:
        workers = 1
    return math.ceil(nodes / r), r, cores, workers


def plan_job(args, dist, nodes, n, options):
    """Check one (map, P, N) and return its :class:`JobPlan` (UsageError if anything is
    off); ``options``: the :class:`JobOptions` of every job."""
    if dist not in MAP_NAMES:
        raise UsageError(f"unknown map {dist!r}; choose one of {', '.join(MAP_NAMES)}")
    tile_map = job_map(args, dist, nodes)
    nodes = tile_map.nodes
    if options.input is None or n is not None:
        if n is None:
            raise UsageError("give the matrix order --n N (or --input FILE.h5:/DSET)")
        matrix_sizes(n=n, nb=args.nb)
    elif args.nb < 1:
        raise UsageError(f"--nb must be >= 1, got {args.nb}")
    max_workers = max_workers_of(args)
    slurm_nodes, rpn, cores, workers = _resources(args, nodes, max_workers)
    size = f"N{n}" if n is not None else "Nin"
    tag = f"{dist}" + (f"-c{tile_map.slices}" if tile_map.slices > 1 else "") + \
        f"-P{nodes}-{size}"
    plan = JobPlan(dist=dist, nodes=nodes, n=n, map=tile_map, slurm_nodes=slurm_nodes,
                   ranks_per_node=rpn, cores_per_rank=cores, workers=workers,
                   max_workers=max_workers, tag=tag, job_name=args.job_name or f"starchol-{tag}",
                   gpus_per_node=args.gpus_per_node, options=options)
    mem, comment = memory_request(args, plan)
    return dataclasses.replace(plan, mem=mem, mem_comment=comment)


def check_mem(value):
    """``--mem``: 'auto', 'none', '0' or a size sbatch takes (digits, then K, M, G or T;
    no unit: MB). Returns it, lower-cased for the words."""
    text = str(value).strip()
    if text.lower() in ("auto", "none"):
        return text.lower()
    if not _MEM_RE.match(text):
        raise UsageError(f"--mem must be auto, none, 0 or a size as sbatch takes it (e.g. "
                         f"64G or 64000 for MB), got {value!r}")
    return text


@dataclass(frozen=True)
class RunSettings:
    """What a job's ``starchol run`` does beyond its map and size, for ``--mem auto`` and
    the checks: slurm's own options, and what the ``--run-arg`` words add.

    ``check``, ``gather`` (a factor gathered on rank 0), ``cache`` (StarPU-MPI's receive
    cache), ``dtype`` (``--dtype``'s name), ``nrhs`` (``--nrhs K``, else 0) and ``rhs``
    (``--rhs FILE.h5:/B``, else None).
    """
    check: bool
    gather: bool
    cache: bool
    dtype: str
    nrhs: int
    rhs: object


def run_settings(args, plan):
    """The :class:`RunSettings` of one job. The ``--run-arg`` words are ``starchol run``'s
    own flags: its parser reads them (with the line's required ``--dist`` and ``--nb``);
    the rest are slurm's typed options."""
    from ..cli import command_parser
    from .options import cache_from_args

    extra = command_parser("run").parse_args(["--dist", plan.dist, "--nb", str(args.nb),
                                              *args.run_arg])
    return RunSettings(check=bool(args.check or extra.check), gather=bool(extra.gather),
                       cache=cache_from_args(extra),
                       dtype=args.dtype if args.dtype is not None else extra.dtype,
                       nrhs=extra.nrhs or 0, rhs=extra.rhs)


def memory_request(args, plan):
    """(``--mem`` value or None, comment lines) for one job (see ``--mem``)."""
    mem = plan.options.mem
    if mem == "none":
        return None, ()
    if mem == "0":
        return "0", ("# all the memory of each node (--mem=0)",)
    if mem != "auto":
        return mem, ()
    from ..model.memory import node_memory
    from ..units import format_bytes
    from .options import MIXED, itemsize_of

    n = plan.n if plan.n is not None else plan.options.input_n
    if n is None:
        raise UsageError(f"--mem auto needs the matrix order: give --n N (--input "
                         f"{plan.options.input} is not on this machine to read it from)")
    run = run_settings(args, plan)
    nrhs, unseen = _right_hand_side_count(run)
    peak = node_memory(plan.map, int(n), args.nb, cache=run.cache,
                       check=run.check, gather=run.gather,
                       itemsize=itemsize_of(run.dtype), nrhs=nrhs,
                       mixed=run.dtype == MIXED)["total"]
    rank = int(peak.max())
    need = plan.ranks_per_node * rank * MEM_HEADROOM
    mib = -(-int(math.ceil(need)) // 2**20)
    extras = [w for w, on in (("--check", run.check), ("--gather", run.gather),
                              ("cache off", not run.cache),
                              (run.dtype, run.dtype != "float64"),
                              (f"K = {nrhs} right-hand sides", nrhs)) if on]
    return f"{mib}M", (
        f"# memory per node (--mem auto): {plan.ranks_per_node} rank(s) x "
        f"{format_bytes(rank)}, the peak of the rank",
        f"# that needs the most (N = {n}{', ' + ', '.join(extras) if extras else ''}; "
        f"tiles, received tile copies, runtime,",
        f"# process: starchol.model.memory, as in starchol plan), + "
        f"{round(100 * (MEM_HEADROOM - 1))} % = {mib} MiB", *unseen)


def _right_hand_side_count(run):
    """``(K, comment lines)``: the right-hand sides the job solves, for ``--mem auto``:
    ``--nrhs K``, or the columns of ``--rhs FILE.h5:/B`` read here (checked as
    ``starchol run`` reads it); 0 and a comment (and a warning) when that file is not on
    this machine."""
    if run.nrhs:
        return run.nrhs, ()
    if not run.rhs:
        return 0, ()
    from ..files import parse_target
    from ..linalg.hdf5_io import inspect_dataset

    path, dataset = parse_target(run.rhs, "--rhs")
    if not os.path.exists(path):
        print(f"warning: --rhs {path} does not exist on this machine: --mem auto leaves "
              f"its right-hand sides out", file=sys.stderr)
        return 0, (f"# (not counted: the right-hand sides of --rhs {run.rhs}, not on this "
                   f"machine)",)
    _, (_, k), _ = inspect_dataset(path, dataset, "rhs")
    return int(k), ()


def run_argv(args, plan, json_path="$JSON", run_args=None):
    """The ``starchol run`` arguments (without the program), as a list of words;
    ``run_args``: the verbatim words at the end (default ``--run-arg``'s)."""
    argv = ["run", "--dist", plan.dist]
    if plan.dist in ("2dbc", "2dbc25d") and args.grid:
        argv += ["--grid", args.grid]
    if plan.map.slices > 1 or (plan.dist in MAPS_25D and args.slices is not None):
        argv += ["--slices", str(plan.map.slices)]
    if plan.dist == "custom":
        argv += ["--map-file", os.path.abspath(args.map_file)]
    if plan.n is not None:
        argv += ["--n", str(plan.n)]
    argv += ["--nb", str(args.nb)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if plan.options.input:
        argv += ["--input", plan.options.input]
    if plan.options.output:
        argv += ["--output", plan.options.output]
    if args.check:
        argv.append("--check")
    if args.dtype is not None:
        argv += ["--dtype", args.dtype]
    argv += ["--sched", plan.options.sched, "--gpus", str(plan.gpus_per_node)]
    if plan.workers is not None:
        argv += ["--workers", "$WORKERS"]
    argv += list(args.run_arg if run_args is None else run_args)
    argv += ["--json", json_path]
    return argv


def check_run_argv(argv):
    """Parse ``argv`` (``starchol run ...``, with the script's ``$WORKERS``/``$JSON``
    placeholders) with this installation's ``starchol run`` parser.

    Returns None when it parses, the parser's message when it does not, and
    ``"no run command"`` when this installation has no ``run`` subcommand.
    """
    from ..cli import check_command_argv

    return check_command_argv("run", _parsable(argv)[1:])


def _parsable(argv):
    """``argv`` with the script's ``$WORKERS``/``$JSON`` placeholders made parsable."""
    return [w if w not in ("$WORKERS", "$JSON") else ("1" if w == "$WORKERS" else "x.json")
            for w in argv]


def default_starchol():
    """The starchol script next to the running Python (a venv's bin/), else 'starchol'."""
    candidate = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "starchol")
    return candidate if os.access(candidate, os.X_OK) else "starchol"


# -- the script ------------------------------------------------------------------------------
_EXPANDABLE_RE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]*(\$\{?[A-Z_][A-Z0-9_]*\}?[A-Za-z0-9_@%+=:,./-]*)+$")


def _q(word):
    """Shell-quote a word; one built from our own $VAR references stays expandable."""
    if "$" in word and _EXPANDABLE_RE.match(word):
        return word if word.startswith("-") else f'"{word}"'
    return shlex.quote(word)


def _sbatch_lines(args, p):
    add = []
    add.append(f"#SBATCH --job-name={p.job_name}")
    add.append(f"#SBATCH --nodes={p.slurm_nodes}")
    add.append(f"#SBATCH --ntasks={p.nodes}")
    if args.overcommit:
        add += ["# more ranks than cores (tests): --overcommit, and no --ntasks-per-node,",
                "# which Slurm rejects above a node's core count even with --overcommit",
                "#SBATCH --overcommit"]
    else:
        add.append(f"#SBATCH --ntasks-per-node={p.ranks_per_node}")
    if p.cores_per_rank is not None and not args.overcommit:
        add += [f"# every core of the node: {p.ranks_per_node} rank(s) x {p.cores_per_rank} "
                f"core(s)", f"#SBATCH --cpus-per-task={p.cores_per_rank}"]
    elif args.overcommit and args.cpus_per_node:
        add += ["# with --overcommit, --cpus-per-task is allocated once per node: the node's",
                "# cores, shared by its ranks",
                f"#SBATCH --cpus-per-task={args.cpus_per_node}"]
    else:
        add += ["# whole nodes: each rank uses its share of the node's cores",
                "#SBATCH --exclusive"]
    if p.gpus_per_node:
        add += [f"# {p.gpus_per_node} GPU(s) per node, shared by its {p.ranks_per_node} "
                f"rank(s)", f"#SBATCH --gres=gpu:{p.gpus_per_node}"]
    if p.mem is not None:
        add += list(p.mem_comment) + [f"#SBATCH --mem={p.mem}"]
    add.append(f"#SBATCH --time={args.time}")
    if args.partition:
        add.append(f"#SBATCH --partition={args.partition}")
    if args.account:
        add.append(f"#SBATCH --account={args.account}")
    add.append(f"#SBATCH --output={p.job_name}-%j.out")
    if args.requeue:
        add += ["# rerun from the start when a node fails (or after scontrol requeue JOBID):",
                "# a failed run publishes nothing, so the rerun starts clean; the rerun's",
                "# lines follow the failed run's in the job log",
                "#SBATCH --requeue", "#SBATCH --open-mode=append"]
    else:
        add += ["# a node failure ends the job (NODE_FAIL) instead of rerunning it from the "
                "start", "# later (starchol slurm --requeue for that)", "#SBATCH --no-requeue"]
    add += [f"#SBATCH {opt}" for opt in args.sbatch_option]
    return add


def _launch(args):
    """(comment lines, launcher words) for srun or mpirun."""
    if args.launcher == "srun":
        words = ["srun", f"--mpi={args.mpi_plugin}", "--kill-on-bad-exit=1"]
        words += ["--overcommit"] if args.overcommit else ["--cpus-per-task=$CORES_PER_RANK"]
        if args.gpus_per_node:
            # the step asks for the node's GPUs itself: recent Slurm versions do not pass
            # the job's GPUs on to srun's steps
            words.append(f"--gres=gpu:{args.gpus_per_node}")
        comment = [f"# srun --mpi={args.mpi_plugin} starts the ranks (Open MPI with PMIx); "
                   f"a failing rank",
                   "# ends the job (--kill-on-bad-exit)"
                   + ("; ranks share the cores (--overcommit)" if args.overcommit else
                      "; each rank is bound to its own CORES_PER_RANK cores"),
                   "# Slurm's PMIx fences over its tree algorithm only: MPI_Init's data fence "
                   "over the",
                   "# ring (Slurm's default for fences that collect data) lost a rank to "
                   "SIGSEGV in",
                   "# 1 job in 4 on the test cluster (docs/slurm.md, \"Launchers\"); a value "
                   "set at",
                   "# submission wins",
                   "export SLURM_PMIX_FENCE=${SLURM_PMIX_FENCE:-tree}"]
    else:
        words = ["mpirun", "-np", "$SLURM_NTASKS"]
        if args.overcommit:
            words += ["--oversubscribe", "--bind-to", "none"]
        else:
            words += ["--map-by", "ppr:$RANKS_PER_NODE:node:PE=$CORES_PER_RANK",
                      "--bind-to", "core"]
        comment = ["# Open MPI's mpirun reads the Slurm allocation and starts the ranks; "
                   + ("they share the cores (overcommit)" if args.overcommit else
                      "each rank is bound to its own CORES_PER_RANK cores"),
                   "# (not srun --mpi=pmix: Open MPI 4.1 under Slurm's PMIx lost a rank to "
                   "SIGSEGV in",
                   "# MPI_Init in 1 job in 4 to 8 on the test cluster; docs/slurm.md, "
                   "\"Launchers\")"]
        if args.gpus_per_node:
            # mpirun starts its daemons with an srun step, which gets the node's GPUs
            # only when it asks for them (as srun's own step does above)
            comment += ["# mpirun's daemons start in an srun step: it asks for the node's "
                        "GPUs itself",
                        f"export OMPI_MCA_plm_slurm_args=--gres=gpu:{args.gpus_per_node}"]
    return comment, words


def render_script(args, plan, json_dir, starchol):
    """The sbatch script text for one job (:data:`starchol.jobs.slurm_template.SCRIPT`)."""
    from ..version import VERSION

    q = shlex.quote
    p = plan
    if p.cores_per_rank is not None:
        cores = f"CORES_PER_RANK={p.cores_per_rank}"
    else:
        cores = ("# whole nodes: cores of this node shared by its ranks\n"
                 "CORES_PER_RANK=$(( ${SLURM_CPUS_ON_NODE:-1} / RANKS_PER_NODE ))\n"
                 "[ \"$CORES_PER_RANK\" -ge 1 ] || CORES_PER_RANK=1")
    if p.workers is not None:
        workers = (f"WORKERS={p.workers}   # StarPU CPU workers per rank (build limit "
                   f"{p.max_workers})")
        ncpu = 'export STARPU_NCPU="$WORKERS"'
    else:
        workers = ("# StarPU CPU workers: starchol run starts one on every core Slurm gives "
                   "its rank\n# (SLURM_CPUS_PER_TASK / the rank's CPU binding; at most "
                   f"{p.max_workers}, the build's\n# STARPU_MAXCPUS). The job log's report "
                   "says how many (workers_per_rank).")
        ncpu = "# (STARPU_NCPU unset: the worker count follows each rank's cores)"
    nobind = ""
    if p.ranks_per_node > 1 or args.overcommit:
        nobind = ("# several ranks per node: let each rank's core set (launcher binding) "
                  "place\n# its workers instead of every rank pinning to the node's first "
                  "cores\nexport STARPU_WORKERS_NOBIND=1")
    gpus = ""
    if p.gpus_per_node:
        gpus = (f"# GPUs: starchol run --gpus {p.gpus_per_node} on every rank; each GPU is "
                f"run by CUDA workers\n# ({DEFAULT_CUDA_WORKERS_PER_GPU} per GPU, fewer on "
                f"ranks with few cores; STARPU_NWORKER_PER_CUDA sets it), each\n# keeping a "
                f"core: the CPU workers are the rank's other cores (docs/gpu.md)")
    models = ("# StarPU's performance models and bus calibration: in the job's STARPU_HOME "
              "below,\n# removed at the end (a model-based scheduler calibrates again "
              "in the next job)")
    if p.options.perf_model_dir:
        models = ("# StarPU's performance models and bus calibration, kept across jobs (one "
                  "file per host)\n"
                  f"export STARPU_PERF_MODEL_DIR={q(p.options.perf_model_dir)}\n"
                  'mkdir -p "$STARPU_PERF_MODEL_DIR"')
    json_line = ('JSON_DIR=${JSON_DIR:-$SLURM_SUBMIT_DIR}' if json_dir is None else
                 f"JSON_DIR=${{JSON_DIR:-{q(json_dir)}}}")
    comment, launch = _launch(args)
    words = [_q(w) for w in launch] + ["bash", "-c", '"$RANK_HOME"', "rank-home",
                                       '"$STARCHOL"'] + [_q(w) for w in run_argv(args, p)]
    fields = dict(
        version=VERSION, map=p.map,
        n=p.n if p.n is not None else f"(from {p.options.input})", nb=args.nb,
        ranks=p.nodes, slurm_nodes=p.slurm_nodes, ranks_per_node=p.ranks_per_node,
        ranks_mismatch=q(f"the script runs {p.map} on {p.nodes} ranks (resized by sbatch "
                         f"--ntasks or --nodes?); for another count write a new script: "
                         f"starchol slurm --nodes P"),
        sbatch="\n".join(_sbatch_lines(args, p)), starchol=q(starchol), cores=cores,
        workers=workers, json_dir=json_line, sched=q(p.options.sched), ncpu=ncpu, nobind=nobind,
        gpus=gpus, models=models,
        setup="\n".join(args.setup), launch_comment="\n".join(comment),
        launch=_wrap(words, indent="    "))
    drop = "\0"  # an empty block leaves no blank line
    text = SCRIPT.substitute({k: (v if v != "" else drop) for k, v in fields.items()})
    return "".join(line for line in text.splitlines(True) if line.rstrip("\n") != drop)


def _wrap(words, width=88, indent=""):
    """Join shell words into continuation lines no wider than ``width``, keeping each
    option next to its value; lines after the first start with ``indent`` plus four
    spaces (the first line's indent is the template's)."""
    units, i = [], 0
    while i < len(words):
        w = words[i]
        if w.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("-") \
                and words[i + 1] not in ('"$STARCHOL"', '"$RANK_HOME"') and "=" not in w:
            w = f"{w} {words[i + 1]}"
            i += 1
        units.append(w)
        i += 1
    out, line = [], ""
    for w in units:
        if line and len(line) + 1 + len(w) > width - 2 - len(indent):
            out.append(line + " \\")
            line = indent + "    " + w
        else:
            line = f"{line} {w}" if line else w
    out.append(line)
    return "\n".join(out)


# -- the command ----------------------------------------------------------------------------
def check_options(args):
    """Check the options of every job; return their :class:`JobOptions` (without
    ``input_n``: :func:`_check_files`). ``args`` is not modified."""
    parse_time(args.time)
    mem = check_mem(args.mem)
    _name(args.partition, "--partition")
    _name(args.account, "--account")
    _name(args.job_name, "--job-name")
    if args.gpus_per_node < 0:
        raise UsageError(f"--gpus-per-node must be >= 0, got {args.gpus_per_node}")
    sched = args.sched
    if sched is None:
        sched = GPU_SCHEDULER if args.gpus_per_node else DEFAULT_SCHEDULER
    check_scheduler_name(sched)
    models = args.perf_model_dir
    if models is not None:
        if not models.strip() or "\n" in models:
            raise UsageError(f"--perf-model-dir must name a folder, got {models!r}")
        models = os.path.abspath(os.path.expanduser(models))
        if os.path.exists(models) and not os.path.isdir(models):
            raise UsageError(f"--perf-model-dir {models} exists and is not a "
                             f"folder")
    if args.mpi_plugin and not _NAME_RE.match(args.mpi_plugin):
        raise UsageError(f"--mpi-plugin {args.mpi_plugin!r}: e.g. pmix, pmix_v4")
    for opt in args.sbatch_option:
        if not opt.startswith("-") or "\n" in opt:
            raise UsageError(f"--sbatch-option takes one sbatch option such as --qos=debug, "
                             f"got {opt!r}")
    if args.launcher == "mpirun" and args.mpi_plugin != "pmix":
        raise UsageError("--mpi-plugin applies to --launcher srun (the default launcher is "
                         "mpirun)")
    if args.nb is not None and args.nb < 1:
        raise UsageError(f"--nb must be >= 1, got {args.nb}")
    options = JobOptions(mem=mem, sched=sched, input=_h5_spec(args.input, "--input"),
                         output=_h5_spec(args.output, "--output"), perf_model_dir=models)
    if args.map_file:
        check_map_options(args.dist, map_file=args.map_file)
    return options


def _check_files(args, options):
    """The job's files, as far as this machine can see them: no output on an input or on
    another output, and an input that exists here is inspected as ``starchol run`` would
    (HDF5, square, float, N >= NB, N = --n). An input that does not exist here, and an
    ``--output`` that ``starchol run`` would refuse here (its dataset exists without
    ``--run-arg=--overwrite``, its folder is missing), only warn: the job runs later, maybe
    on other file systems, and the file may change meanwhile. Returns ``options`` with
    ``input_n``, the order of an input read here (for ``--mem auto``)."""
    from ..cli import flag_message
    from ..files import check_distinct
    from ..linalg.hdf5_io import check_output, inspect_file

    def path_of(spec):
        return None if spec is None else spec.rpartition(":")[0]

    inp, out = path_of(options.input), path_of(options.output)
    if out is not None and "$" in out:
        out = None                                   # one file per job (${SLURM_JOB_ID})
    script = None if args.sweep else args.out
    check_distinct([("--input", inp), ("--map-file", args.map_file), ("--output", out),
                    ("-o", script)])
    if out is not None:
        problem = check_output(out, options.output.rpartition(":")[2],
                               "--overwrite" in args.run_arg, inp, role="--output")
        if problem is not None:
            hint = (" (here: --run-arg=--overwrite)" if "overwrite" in problem.params
                    else "")
            print(f"warning: the job's starchol run would refuse its output if it started "
                  f"now: {flag_message(problem)}{hint}; the job will fail unless this "
                  f"changes before it starts", file=sys.stderr)
    if inp is None:
        return options
    if not os.path.exists(inp):
        print(f"warning: --input {inp} does not exist on this machine; the job will fail "
              f"unless it exists when the job starts", file=sys.stderr)
        return options
    n, _ = inspect_file(inp, options.input.rpartition(":")[2])
    for given in ([] if args.n is None else _int_list(args.n, "--n")):
        check_input_order(given, n)
    if args.nb is not None:
        matrix_sizes(n=n, nb=args.nb)
    return dataclasses.replace(options, input_n=n)


def check_run_arg_conflicts(run_args, argv):
    """Refuse a ``--run-arg`` that sets an option the script's run line already sets
    from ``starchol slurm``'s own options (``argv``, :func:`run_argv` without
    ``run_args``): ``--dist sbc --run-arg=--dist=2dbc`` would write a script whose header
    says sbc while the job runs 2dbc. An abbreviation (``--di``) counts as the option."""
    own = [w for w in argv if w.startswith("--")]
    for word in run_args:
        if not word.startswith("--") or word == "--":
            continue
        flag = word.split("=", 1)[0]
        hit = [o for o in own if o == flag or o.startswith(flag)]
        if not hit:
            continue
        value = argv[argv.index(hit[0]) + 1] if argv.index(hit[0]) + 1 < len(argv) else ""
        shown = word.replace("=", " ", 1)   # not "dist=...": messages turn it into a flag
        raise UsageError(f"the run argument {shown} (from --run-arg) sets {hit[0]}, which "
                         f"the script already sets ({hit[0]} {value}) from starchol "
                         f"slurm's own options; give it once: as starchol slurm "
                         f"{hit[0]} (where slurm has it), not through --run-arg")


def _check_with_run(args, plan, strict=True):
    """The run line must parse with this installation's ``starchol run``, and
    ``--run-arg`` must not set what the line already sets."""
    check_run_arg_conflicts(args.run_arg, run_argv(args, plan, run_args=()))
    problem = check_run_argv(run_argv(args, plan))
    if problem is None:
        from .options import MIXED

        run = run_settings(args, plan)
        if run.dtype == MIXED and not (run.nrhs or run.rhs):
            raise UsageError("--dtype mixed solves A X = B to float64 accuracy: give the "
                             "run its right-hand sides, --run-arg=--nrhs=K or "
                             "--run-arg=--rhs=FILE.h5:/B")
        return
    if problem == "no run command":
        raise UsageError("this starchol has no `run` command; install a starchol with "
                         "`starchol run` to generate job scripts")
    raise UsageError(f"this starchol's `run` would reject the job's command line: {problem}")


def plans_from_args(args, validate_run=True):
    """Every :class:`JobPlan` the options describe (one without --sweep)."""
    options = _check_files(args, check_options(args))
    if not args.sweep:
        for flag, value in (("--dist", args.dist), ("--nodes", args.nodes), ("--n", args.n)):
            if value is not None and "," in str(value):
                raise UsageError(f"{flag} {value!r} is a list: lists need --sweep (and -o DIR)")
        nodes = None if args.nodes is None else check_node_count(_int_list(args.nodes, "--nodes")[0])
        n = None if args.n is None else _int_list(args.n, "--n")[0]
        plans = [plan_job(args, args.dist, nodes, n, options)]
    else:
        dists = [d.strip() for d in args.dist.split(",") if d.strip()]
        if len(set(dists)) != len(dists):
            raise UsageError(f"--dist {args.dist!r} names a map twice")
        if args.nodes is None and any(d != "custom" for d in dists):
            raise UsageError("--sweep needs --nodes P (or a comma list)")
        nodes_list = ([None] if args.nodes is None
                      else [check_node_count(v) for v in _int_list(args.nodes, "--nodes")])
        if args.n is None and options.input is None:
            raise UsageError("--sweep needs --n N1,N2,... (or --input)")
        ns = [None] if args.n is None else _int_list(args.n, "--n")
        plans, errors = [], []
        for dist in dists:
            for nodes in nodes_list:
                for n in ns:
                    try:
                        plans.append(plan_job(args, dist, nodes, n, options))
                    except UsageError as exc:
                        errors.append(f"  {dist} P={nodes} N={n}: {exc}")
        if errors:
            raise UsageError("some jobs of the sweep are not valid; fix or drop them:\n"
                             + "\n".join(errors))
        if options.output and "$SLURM_JOB_ID" not in options.output.replace("{", "") \
                and len(plans) > 1:
            raise UsageError("every job of the sweep would write the same --output file; put "
                             "${SLURM_JOB_ID} in its name, e.g. --output "
                             "'L-${SLURM_JOB_ID}.h5:/L'")
        tags = [p.tag for p in plans]
        if len(set(tags)) != len(tags):
            raise UsageError("the sweep names the same job twice; check the lists")
    if validate_run:
        _check_with_run(args, plans[0])
    return plans


def run(args):
    plans = plans_from_args(args)
    starchol = args.starchol or default_starchol()
    if not args.sweep:
        json_dir = None if args.json_dir is None else os.path.abspath(args.json_dir)
        text = render_script(args, plans[0], json_dir, starchol)
        if args.out in (None, "-"):
            sys.stdout.write(text)
            return 0
        if os.path.isdir(args.out):
            raise UsageError(f"-o {args.out} is a folder; give a file name (folders are "
                             f"for --sweep)")
        check_folder_writable(args.out, "-o", stdout=True)
        write_atomic(args.out, text, role="-o")
        os.chmod(args.out, 0o755)
        print(f"wrote {args.out}: {plans[0].slurm_nodes} node(s), {plans[0].nodes} rank(s); "
              f"submit with: sbatch {args.out}", file=sys.stderr)
        return 0
    if args.out is None:
        raise UsageError("--sweep writes one script per job: give the folder with -o DIR")
    with OutputFolder(args.out) as out:   # made at the first write, removed on failure
        folder = os.path.abspath(args.out)
        json_dir = os.path.abspath(args.json_dir) if args.json_dir else \
            os.path.join(folder, "results")
        names = []
        for plan in plans:
            name = f"{plan.tag}.sbatch"
            path = out.path(name)
            write_atomic(path, render_script(args, plan, json_dir, starchol), role="-o")
            os.chmod(path, 0o755)
            names.append(name)
        submit = ["#!/bin/bash",
                  f"# Submit the {len(names)} jobs of this sweep (written by `starchol "
                  f"slurm --sweep`).",
                  f"# Reports: {json_dir}/starchol-JOBID.json; compare them with "
                  f"`starchol report {json_dir}/*.json -o report`.",
                  "set -euo pipefail",
                  'cd "$(dirname "${BASH_SOURCE[0]}")"']
        submit += [f"sbatch {shlex.quote(n)}" for n in names]
        path = out.path("submit_all.sh")
        write_atomic(path, "\n".join(submit) + "\n", role="-o")
        os.chmod(path, 0o755)
    print(f"wrote {len(names)} scripts and submit_all.sh to {args.out}:", file=sys.stderr)
    for name in names:
        print(f"  {name}", file=sys.stderr)
    return 0
