"""``starchol slurm``'s options as checked: every job's :class:`JobOptions` (time, memory,
names, scheduler, files), the text that reaches the script, and the ``--run-arg`` words
that would contradict the script's own run line. Nothing here writes."""
import dataclasses
import os
import re
import sys
from dataclasses import dataclass

from ..errors import UsageError
from ..runtime.backend import DEFAULT_SCHEDULER
from ..runtime.workers import installed_max_cpus
from .options import (check_input_order, check_map_options, check_scheduler_name,
                      check_time_limit, matrix_sizes)

DEFAULT_TIME = "01:00:00"
#: the scheduler of GPU jobs when --sched is not given (docs/gpu.md: the first choice)
GPU_SCHEDULER = "dmdas"
LAUNCHERS = ("srun", "mpirun")

MEM_RE = re.compile(r"^[0-9]+[KMGTkmgt]?$")
TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+):(\d{2}):(\d{2})$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")

#: characters refused in an --sbatch-option: sbatch reads its lines itself, but a line
#: that looks like shell code is a mistake (or an attempt) either way
SBATCH_OPTION_REFUSED = set(";|&$`<>(){}\\")


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


def check_script_text(args):
    """Refuse, before anything is written, any option value or path of ``args`` that
    holds a newline, a NUL or another non-printable character
    (:func:`starchol.files.check_printable`): every value that reaches the script, its
    comments included, is then one line, quoted where it is a shell word."""
    from ..files import check_printable

    for dest, value in sorted(vars(args).items()):
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, str):
                check_printable(v, "--" + dest.replace("_", "-") if dest != "out" else "-o")


def parse_time(text):
    """'[D-]HH:MM:SS' -> seconds (UsageError with the expected form otherwise)."""
    m = TIME_RE.match(str(text).strip())
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


def int_list(text, flag):
    items = [t.strip() for t in str(text).split(",")]
    try:
        values = [int(t) for t in items]
    except ValueError:
        raise UsageError(f"{flag} must be an integer{' or a comma list' if ',' in text else ''}"
                         f", got {text!r}") from None
    return values


def check_name(value, flag):
    if value is not None and not NAME_RE.match(value):
        raise UsageError(f"{flag} {value!r}: use letters, digits and . _ + - only")
    return value


def h5_spec(value, flag):
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
        return args.max_workers
    limit = installed_max_cpus()
    if limit is None:
        raise UsageError("this starchol's StarPU layer is not built, so the CPU worker limit "
                         "of the cluster's StarPU is unknown: give --max-workers M "
                         "(STARPU_MAXCPUS; `starchol info` on the cluster prints it)")
    return limit


def check_mem(value):
    """``--mem``: 'auto', 'none', '0' or a size sbatch takes (digits, then K, M, G or T;
    no unit: MB). Returns it, lower-cased for the words."""
    text = str(value).strip()
    if text.lower() in ("auto", "none"):
        return text.lower()
    if not MEM_RE.match(text):
        raise UsageError(f"--mem must be auto, none, 0 or a size as sbatch takes it (e.g. "
                         f"64G or 64000 for MB), got {value!r}")
    return text


def check_options(args):
    """Check the options of every job; return their :class:`JobOptions` (without
    ``input_n``: :func:`check_files`). ``args`` is not modified."""
    parse_time(args.time)
    mem = check_mem(args.mem)
    check_name(args.partition, "--partition")
    check_name(args.account, "--account")
    check_name(args.job_name, "--job-name")
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
    if args.mpi_plugin and not NAME_RE.match(args.mpi_plugin):
        raise UsageError(f"--mpi-plugin {args.mpi_plugin!r}: e.g. pmix, pmix_v4")
    for opt in args.sbatch_option:
        bad = sorted(SBATCH_OPTION_REFUSED & set(opt))
        if not opt.startswith("-") or "\n" in opt or bad:
            raise UsageError(f"--sbatch-option takes one sbatch option such as --qos=debug, "
                             f"got {opt!r}" + (f" (it holds {' '.join(bad)}: no shell code)"
                                               if bad else ""))
    if args.launcher == "mpirun" and args.mpi_plugin != "pmix":
        raise UsageError("--mpi-plugin applies to --launcher srun (the default launcher is "
                         "mpirun)")
    options = JobOptions(mem=mem, sched=sched, input=h5_spec(args.input, "--input"),
                         output=h5_spec(args.output, "--output"), perf_model_dir=models)
    if args.map_file:
        check_map_options(args.dist, map_file=args.map_file)
    return options


def check_files(args, options):
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
    from .output import INPUT_ROLES

    def path_of(spec):
        return None if spec is None else spec.rpartition(":")[0]

    inp, out = path_of(options.input), path_of(options.output)
    if out is not None and "$" in out:
        out = None                                   # one file per job (${SLURM_JOB_ID})
    script = None if args.sweep else args.out
    check_distinct([("--input", inp), ("--map-file", args.map_file), ("--output", out),
                    ("-o", script)], INPUT_ROLES)
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
    from ..files import special_kind

    if special_kind(inp) == "a symbolic link loop":
        raise UsageError(f"--input {inp} is a symbolic link loop; give the file itself")
    if not os.path.exists(inp):
        print(f"warning: --input {inp} does not exist on this machine; the job will fail "
              f"unless it exists when the job starts", file=sys.stderr)
        return options
    n, _ = inspect_file(inp, options.input.rpartition(":")[2])
    for given in ([] if args.n is None else int_list(args.n, "--n")):
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
