"""The text of a ``starchol slurm`` job script: the ``#SBATCH`` lines, the launch line
(mpirun or srun) and the template's fields (:data:`starchol.jobs.slurm_template.SCRIPT`),
every word quoted for the shell."""
import re
import shlex

from ..runtime.workers import DEFAULT_CUDA_WORKERS_PER_GPU
from .slurm_plan import run_argv
from .slurm_template import SCRIPT

EXPANDABLE_RE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]*(\$\{?[A-Z_][A-Z0-9_]*\}?[A-Za-z0-9_@%+=:,./-]*)+$")


def quote_word(word):
    """Shell-quote a word; one built from our own $VAR references stays expandable."""
    if "$" in word and EXPANDABLE_RE.match(word):
        return word if word.startswith("-") else f'"{word}"'
    return shlex.quote(word)


def sbatch_lines(args, p):
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


def launch_lines(args):
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
    comment, launch = launch_lines(args)
    words = [quote_word(w) for w in launch] + ["bash", "-c", '"$RANK_HOME"', "rank-home",
                                       '"$STARCHOL"'] + [quote_word(w) for w in run_argv(args, p)]
    fields = dict(
        version=VERSION, map=p.map,
        n=p.n if p.n is not None else f"(from {p.options.input})", nb=args.nb,
        ranks=p.nodes, slurm_nodes=p.slurm_nodes, ranks_per_node=p.ranks_per_node,
        ranks_mismatch=q(f"the script runs {p.map} on {p.nodes} ranks (resized by sbatch "
                         f"--ntasks or --nodes?); for another count write a new script: "
                         f"starchol slurm --nodes P"),
        sbatch="\n".join(sbatch_lines(args, p)), starchol=q(starchol), cores=cores,
        workers=workers, json_dir=json_line, sched=q(p.options.sched), ncpu=ncpu, nobind=nobind,
        gpus=gpus, models=models,
        setup="\n".join(args.setup), launch_comment="\n".join(comment),
        launch=wrap_words(words, indent="    "))
    drop = "\0"  # an empty block leaves no blank line
    text = SCRIPT.substitute({k: (v if v != "" else drop) for k, v in fields.items()})
    return "".join(line for line in text.splitlines(True) if line.rstrip("\n") != drop)


def wrap_words(words, width=88, indent=""):
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
