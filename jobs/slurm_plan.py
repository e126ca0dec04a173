"""The plan of each job of ``starchol slurm``: its map, size and Slurm resources
(:class:`JobPlan`), its ``starchol run`` line (:func:`run_argv`, checked with this
installation's ``run`` parser), and every plan the options describe
(:func:`plans_from_args`)."""
import dataclasses
import math
import os
import sys
from dataclasses import dataclass

from ..distributions import MAP_NAMES, MAPS_25D
from ..errors import UsageError
from ..runtime.workers import plan_ranks
from .options import (GRID_MAPS, build_map, check_map_options, check_node_count, map_argv,
                      matrix_sizes)
from .slurm_memory import memory_request, run_settings
from .slurm_options import (JobOptions, check_files, check_options, check_script_text,
                            int_list, max_workers_of, check_run_arg_conflicts)


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


def job_map(args, dist, nodes, nt=None):
    """The map of one job: ``--grid`` and ``--slices`` where they apply (a sweep drops
    them for its other maps; ``--slices 1`` of a 2D map is taken), checked by
    :func:`~starchol.jobs.options.check_map_options`; ``nt``: the matrix's tile rows
    (None: unknown yet), for which a ``sym`` map is chosen, as the job's run builds it."""
    grid = args.grid if dist in GRID_MAPS or not args.sweep else None
    slices = args.slices if dist in MAPS_25D or args.slices != 1 and not args.sweep \
        else None
    check_map_options(dist, grid=grid, slices=slices, map_file=args.map_file)
    return build_map(dist, nodes, grid=grid, slices=1 if slices is None else slices,
                     path=args.map_file, nt=nt)


def job_resources(args, nodes, max_workers):
    """Slurm node count, ranks per node, cores per rank (None: whole nodes), workers per
    rank (None: every core of the rank, decided in the job)."""
    k, r = args.cpus_per_node, args.ranks_per_node
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
    tile_map = job_map(args, dist, nodes,
                       nt=-(-n // args.nb) if n is not None and args.nb >= 1 else None)
    nodes = tile_map.nodes
    if options.input is None or n is not None:
        if n is None:
            raise UsageError("give the matrix order --n N (or --input FILE.h5:/DSET)")
        matrix_sizes(n=n, nb=args.nb)
    max_workers = max_workers_of(args)
    slurm_nodes, rpn, cores, workers = job_resources(args, nodes, max_workers)
    size = f"N{n}" if n is not None else "Nin"
    tag = f"{dist}" + (f"-c{tile_map.slices}" if tile_map.slices > 1 else "") + \
        f"-P{nodes}-{size}"
    plan = JobPlan(dist=dist, nodes=nodes, n=n, map=tile_map, slurm_nodes=slurm_nodes,
                   ranks_per_node=rpn, cores_per_rank=cores, workers=workers,
                   max_workers=max_workers, tag=tag, job_name=args.job_name or f"starchol-{tag}",
                   gpus_per_node=args.gpus_per_node, options=options)
    mem, comment = memory_request(args, plan)
    return dataclasses.replace(plan, mem=mem, mem_comment=comment)


def run_argv(args, plan, json_path="$JSON", run_args=None):
    """The ``starchol run`` arguments (without the program), as a list of words;
    ``run_args``: the verbatim words at the end (default ``--run-arg``'s)."""
    params = plan.map.params()
    if plan.dist == "custom":
        params["path"] = os.path.abspath(args.map_file)
    argv = ["run", *map_argv(params, nodes=False)]      # the one map -> flags rule
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

    return check_command_argv("run", parsable(argv)[1:])


def parsable(argv):
    """``argv`` with the script's ``$WORKERS``/``$JSON`` placeholders made parsable."""
    return [w if w not in ("$WORKERS", "$JSON") else ("1" if w == "$WORKERS" else "x.json")
            for w in argv]


def default_starchol():
    """The starchol script next to the running Python (a venv's bin/), else 'starchol'."""
    candidate = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "starchol")
    return candidate if os.access(candidate, os.X_OK) else "starchol"


def check_with_run(args, plan, strict=True):
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
    check_script_text(args)
    options = check_files(args, check_options(args))
    if not args.sweep:
        for flag, value in (("--dist", args.dist), ("--nodes", args.nodes), ("--n", args.n)):
            if value is not None and "," in str(value):
                raise UsageError(f"{flag} {value!r} is a list: lists need --sweep (and -o DIR)")
        nodes = None if args.nodes is None else check_node_count(int_list(args.nodes, "--nodes")[0])
        n = None if args.n is None else int_list(args.n, "--n")[0]
        plans = [plan_job(args, args.dist, nodes, n, options)]
    else:
        dists = [d.strip() for d in args.dist.split(",")]
        if not all(dists):
            raise UsageError(f"--dist {args.dist!r} has an empty item; give names "
                             f"separated by single commas, e.g. sbc,2dbc")
        if len(set(dists)) != len(dists):
            raise UsageError(f"--dist {args.dist!r} names a map twice")
        if args.nodes is None and any(d != "custom" for d in dists):
            raise UsageError("--sweep needs --nodes P (or a comma list)")
        nodes_list = ([None] if args.nodes is None
                      else [check_node_count(v) for v in int_list(args.nodes, "--nodes")])
        if args.n is None and options.input is None:
            raise UsageError("--sweep needs --n N1,N2,... (or --input)")
        ns = [None] if args.n is None else int_list(args.n, "--n")
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
        check_with_run(args, plans[0])
    return plans
