"""``starchol run``'s pre-flight: every path, file, size and setting checked on every rank
before anything is allocated, and the typed :class:`RunPlan` the run follows.

:func:`preflight` reads the parsed options and never changes them: what it settles (the
matrix order of an ``--input``, the scheduler's name, the ``--gather`` file with its
``.npy`` suffix, the files' fingerprints, ...) is in the plan. It runs under
:func:`starchol.collective.run_everywhere`, so that every rank raises the same error.
"""
import math
import os
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import UsageError
from .options import (build_map, cache_from_args, check_input_order, check_map_options,
                      is_mixed, itemsize_from_args)
from .output import INPUT_ROLES, check_json_file, json_path

#: how ``run`` names the map library's parameters that are not its flags: its node
#: count is mpirun's -np, one rank per map node
RUN_FLAGS = {"nodes": "mpirun -np"}


@dataclass(frozen=True)
class RunPlan:
    """What the pre-flight settled for one ``starchol run``; the same on every rank but
    ``memory`` (and ``gather_before``, rank 0's).

    Attributes
    ----------
    tile_map : TileMap
        The map, one node per MPI rank.
    spec : MatrixSpec
        The generated matrix's kind (``--matrix``; ``spd`` with ``--input``).
    n : int
        The matrix order (elements): ``--n``, or the ``--input`` dataset's.
    sched : str
        The StarPU scheduler's checked name.
    symmetry_tol : float
        ``--symmetry-tol``, or the default.
    nrhs : int
        Right-hand sides (``--rhs`` columns or ``--nrhs``); 0 without.
    memory : int
        Bytes this rank needs, estimated.
    gather : str or None
        The ``--gather`` file, with its ``.npy`` suffix.
    gather_before, json_before : fingerprint or None
        The ``--gather`` file (rank 0) and ``--json`` file as they were, for their
        atomic publication (:func:`starchol.files.publish`).
    input_path, input_dataset, input_dtype, input_key, rhs_path, rhs_dataset, rhs_key
        The ``--input`` and ``--rhs`` files and datasets (keys: what the ranks compare,
        so that they read the same data), or None.
    output_path, output_dataset, solution_path, solution_dataset : str or None
        The ``--output`` and ``--solution`` targets.
    """

    tile_map: Any
    spec: Any
    n: int
    sched: str
    symmetry_tol: float
    nrhs: int = 0
    memory: int = 0
    gather: Optional[str] = None
    gather_before: Any = None
    json_before: Any = None
    input_path: Optional[str] = None
    input_dataset: Optional[str] = None
    input_dtype: Any = None
    input_key: Any = None
    rhs_path: Optional[str] = None
    rhs_dataset: Optional[str] = None
    rhs_key: Any = None
    output_path: Optional[str] = None
    output_dataset: Optional[str] = None
    solution_path: Optional[str] = None
    solution_dataset: Optional[str] = None


def validate(args, nranks, n=None):
    """The flags and the map; identical on all ranks. Local. ``n``: the matrix order
    (default ``args.n``). Returns ``(tile_map, spec, sched)``: the map, the matrix spec
    and the scheduler's checked name."""
    from ..linalg.matrices import parse_matrix_spec
    from ..linalg.tiled import check_sizes
    from ..runtime.backend import DEFAULT_SCHEDULER, check_scheduler
    from ..runtime.gpu import check_gpus
    from ..runtime.workers import check_workers

    n = args.n if n is None else n
    check_sizes(n, args.nb)
    cache_from_args(args)           # --cache on with --no-cache: refused
    spec = parse_matrix_spec(args.matrix, n)
    sched = check_scheduler(args.sched or DEFAULT_SCHEDULER)
    if args.workers is not None:
        check_workers(args.workers)
    check_gpus(args.gpus)
    check_map_options(args.dist, grid=args.grid, slices=args.slices, map_file=args.map_file)
    tile_map = build_map(args.dist, nranks, grid=args.grid, path=args.map_file,
                         slices=1 if args.slices is None else args.slices,
                         slice_block=args.slice_block, nt=-(-n // args.nb), flags=RUN_FLAGS,
                         context=f"the run has {_ranks(nranks)}: one per map node; change "
                                 f"mpirun -np or the map")
    if tile_map.nodes != nranks:
        from ..distributions.base import nodes_text

        raise UsageError(f"the map {tile_map} has {nodes_text(tile_map.nodes)} but the run "
                         f"has {_ranks(nranks)}; launch mpirun -np {tile_map.nodes}")
    return tile_map, spec, sched


def _ranks(nranks):
    from ..distributions.base import count_text

    return count_text(nranks, "MPI rank")


def gather_name(path):
    """The ``--gather`` file: ``path`` with the ``.npy`` suffix added when missing."""
    return path if path.endswith(".npy") else path + ".npy"


def preflight(args, rank, size, host_ranks):
    """Check every path, file, size and setting on this rank; return the
    :class:`RunPlan`. Local; ``args`` is not modified.

    Run under :func:`starchol.collective.run_everywhere` so that every rank raises the same
    error. Nothing is allocated here beyond the map tables of the memory estimate.
    """
    from ..files import (check_disk_space, check_distinct, check_folder_writable,
                         check_hdf5_output_space, fingerprint, parse_target)
    from ..linalg.hdf5_io import SYMMETRY_TOL, check_output, look
    from ..runtime import kernel_blas
    from ..runtime.backend import available_schedulers
    from ..runtime.starpu_env import check_environment
    from .preflight import check_rank_memory, dense_file_bytes

    check_environment(schedulers=available_schedulers())
    kernel_blas.activate()          # STARCHOL_KERNEL_BLAS: the library the kernels call
    found = {}                      # the plan's fields, as they are settled
    tol = SYMMETRY_TOL if args.symmetry_tol is None else args.symmetry_tol
    if not math.isfinite(tol) or tol < 0:
        raise UsageError(f"--symmetry-tol must be a finite number >= 0, got {tol}")
    if args.overwrite and not (args.output or args.gather or args.solution or
                               json_path(args) or args.trace):
        raise UsageError("--overwrite applies to --output, --solution, --gather, --json "
                         "and --trace")
    if args.output:
        found["output_path"], found["output_dataset"] = parse_target(args.output, "--output")
    if args.rhs and args.nrhs is not None:
        raise UsageError("give the right-hand sides once: --rhs FILE.h5:/DATASET or "
                         "--nrhs K")
    if args.solution and not (args.rhs or args.nrhs):
        raise UsageError("--solution writes X of A X = B: give the right-hand sides, "
                         "--rhs FILE.h5:/DATASET or --nrhs K")
    if is_mixed(args):
        if not (args.rhs or args.nrhs):
            raise UsageError("--dtype mixed solves A X = B to float64 accuracy from a "
                             "float32 factorization: give the right-hand sides, --rhs "
                             "FILE.h5:/DATASET or --nrhs K")
        for flag, given in (("--output", args.output), ("--gather", args.gather)):
            if given:
                raise UsageError(f"{flag} writes the factor L, and --dtype mixed gives a "
                                 f"solution (its factor is float32, or float64 after a "
                                 f"fallback): use --solution FILE.h5:/X, or --dtype "
                                 f"float64|float32 for the factor")
    if args.solution:
        found["solution_path"], found["solution_dataset"] = parse_target(args.solution,
                                                                         "--solution")
    gather = gather_name(args.gather) if args.gather else None
    n = args.n
    if not args.input:
        if n is None:
            raise UsageError("give the matrix: --n N (generated test matrix) or "
                             "--input FILE.h5:/DATASET")
    else:
        if args.matrix != "spd":
            raise UsageError("--matrix generates a test matrix; it cannot be combined with "
                             "--input")
        path, dataset = parse_target(args.input, "--input")
        _, (rows, _), dtype, key = look(path, dataset, "symmetric", "--input")
        check_input_order(args.n, rows)
        n = rows
        found.update(input_path=path, input_dataset=dataset, input_dtype=dtype,
                     input_key=key)
    if args.rhs:
        path, dataset = parse_target(args.rhs, "--rhs")
        _, (rows, found["nrhs"]), _, key = look(path, dataset, "rhs", "--rhs")
        if rows != n:
            raise UsageError(f"--rhs {args.rhs} has {rows} rows but the matrix has "
                             f"{n}: B must be N x K")
        found.update(rhs_path=path, rhs_dataset=dataset, rhs_key=key)
    elif args.nrhs:
        found["nrhs"] = args.nrhs
    nrhs = found.get("nrhs", 0)
    tile_map, spec, sched = validate(args, size, n=n)
    json_out = json_path(args)
    files = [("--input", found.get("input_path")), ("--map-file", args.map_file),
             ("--rhs", found.get("rhs_path")), ("--output", found.get("output_path")),
             ("--solution", found.get("solution_path")), ("--json", json_out),
             ("--gather", gather)]
    check_distinct(files + [("--trace", args.trace)], INPUT_ROLES)
    if gather:
        if gather != args.gather:    # the name as given too: --gather /dev/null is no file
            from ..files import check_output as check_output_file

            check_output_file(args.gather, "--gather", args.overwrite,
                              [f for f in files if f[0] in ("--input", "--rhs", "--map-file")])
        check_folder_writable(gather, "--gather")
    if json_out:
        found["json_before"] = check_json_file(json_out, args.overwrite)
    if args.trace:
        _check_trace_dir(args.trace, files, args.overwrite)
    for role, flag in (("--output", "output"), ("--solution", "solution")):
        if getattr(args, flag):
            problem = check_output(found[f"{flag}_path"], found[f"{flag}_dataset"],
                                   args.overwrite, found.get("input_path"), role=role)
            if problem:
                raise problem
    itemsize = itemsize_from_args(args)
    memory = check_rank_memory(tile_map, n, args.nb, rank, host_ranks,
                               check=args.check, gather=bool(gather),
                               cache=cache_from_args(args), itemsize=itemsize,
                               nrhs=nrhs, mixed=is_mixed(args),
                               window=None if is_mixed(args) else args.window)
    if rank == 0:
        for role, path, ncols in (("--output", found.get("output_path"), n),
                                  ("--solution", found.get("solution_path"), nrhs)):
            if path:
                check_hdf5_output_space(path, dense_file_bytes(
                    n, 8 if is_mixed(args) else itemsize, ncols), role)
        if gather:
            found["gather_before"] = fingerprint(gather)
            if found["gather_before"] is not None and not args.overwrite:
                raise UsageError(f"--gather {gather} exists; pass --overwrite to "
                                 f"replace it")
            check_disk_space(gather, dense_file_bytes(n, itemsize), "--gather")
        if args.trace:
            _check_trace_space(args.trace, tile_map, n, args.nb, check_disk_space)
    return RunPlan(tile_map=tile_map, spec=spec, n=n, sched=sched, symmetry_tol=tol,
                   memory=memory, gather=gather, **found)


def _check_trace_space(folder, tile_map, n, nb, check_disk_space):
    """--trace DIR: room for the traced factorization's files (``traces.trace_disk_bytes``
    of its tasks, 2.5D reductions included), refused before the work: a full disk would end the run
    in StarPU's trace writer without a word."""
    from ..model.counts import task_count
    from ..runtime.traces import trace_disk_bytes

    nt = -(-n // nb)
    slices = max(1, getattr(tile_map, "slices", 1) or 1)  # 2.5D: a reduction per tile
    need = trace_disk_bytes(task_count(nt) + (slices - 1) * nt * (nt + 1) // 2)
    target = os.path.abspath(folder)
    check_disk_space(os.path.join(target, "trace.json") if os.path.isdir(target) else target,
                     need, "--trace")


def _check_trace_dir(folder, files, overwrite=False):
    """--trace DIR: a folder (existing, or creatable in a writable parent) where none of
    the run's files has a name the trace writes (``traces.TRACE_FILES``); an existing
    one that holds files only with ``overwrite`` (the folder rule of
    :class:`starchol.files.OutputFolder`: ``--trace .`` would mix the trace's files
    with the user's)."""
    from ..files import OutputFolder, check_folder_writable, read_only, resolve
    from ..runtime.traces import is_trace_file

    if "\0" in folder:
        raise UsageError(f"--trace {folder!r} holds a NUL byte; no folder can have it")
    target = resolve(folder)
    if os.path.exists(target) and not os.path.isdir(target):
        raise UsageError(f"--trace {folder} exists and is not a folder")
    if not os.path.isdir(target):
        check_folder_writable(target, "--trace")
    elif read_only(target) or not os.access(target, os.W_OK | os.X_OK):
        raise UsageError(f"--trace {folder} is not writable")
    OutputFolder(folder, "--trace", overwrite,
                 [(role, path) for role, path in files if role in ("--input", "--rhs",
                                                                   "--map-file")])
    for role, path in files:
        if not path:
            continue
        where, name = os.path.split(resolve(path))
        if where == target and is_trace_file(name):
            raise UsageError(f"{role} {path}: the trace writes a file of that name in "
                             f"--trace {folder}; choose another name or folder")


__all__ = ["RUN_FLAGS", "RunPlan", "gather_name", "preflight", "validate"]
