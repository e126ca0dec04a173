"""``starchol slurm --mem auto``: the memory a job's ranks need on one Slurm node, from
the model of ``starchol plan`` and ``starchol run``'s pre-flight check
(:func:`starchol.model.memory.node_memory`), and what the job's ``starchol run`` does
beyond its map and size (:class:`RunSettings`, read with ``run``'s own parser)."""
import math
import os
import sys
from dataclasses import dataclass

from ..errors import UsageError

#: --mem auto asks for the model's peak times this (the model was measured up to 1 % under
#: a rank's peak RSS; docs/volume-model.md, "Memory per node")
MEM_HEADROOM = 1.10


@dataclass(frozen=True)
class RunSettings:
    """What a job's ``starchol run`` does beyond its map and size, for ``--mem auto`` and
    the checks: slurm's own options, and what the ``--run-arg`` words add.

    ``check``, ``gather`` (a factor gathered on rank 0), ``cache`` (StarPU-MPI's receive
    cache), ``dtype`` (``--dtype``'s name), ``nrhs`` (``--nrhs K``, else 0) and ``rhs``
    (``--rhs FILE.h5:/B``, else None), ``window`` (``--window W``, else None: the
    default).
    """
    check: bool
    gather: bool
    cache: bool
    dtype: str
    nrhs: int
    rhs: object
    window: object = None


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
                       nrhs=extra.nrhs or 0, rhs=extra.rhs, window=extra.window)


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
    nrhs, unseen = right_hand_side_count(run)
    peak = node_memory(plan.map, int(n), args.nb, cache=run.cache,
                       check=run.check, gather=run.gather,
                       itemsize=itemsize_of(run.dtype), nrhs=nrhs,
                       mixed=run.dtype == MIXED,
                       window=None if run.dtype == MIXED else run.window)["total"]
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


def right_hand_side_count(run):
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
