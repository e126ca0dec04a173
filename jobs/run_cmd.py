"""``starchol run``: a distributed tiled Cholesky on StarPU-MPI, under any map (2D, or
2.5D with ``--slices C``), through :func:`starchol.linalg.cholesky.cholesky`.

    mpirun -np P starchol run --dist D [--grid PxQ] [--slices C] --n N --nb NB [--seed S]
        [--matrix spd|indefinite:J] [--dtype float64|float32|mixed] [--check] [--sched NAME]
        [--workers K] [--gpus K] [--cache on|off] [--window W] [--input F.h5:/A]
        [--output F.h5:/L [--overwrite]] [--rhs F.h5:/B | --nrhs K] [--solution F.h5:/X]
        [--gather L.npy] [--json FILE|-] [--trace DIR]

Without mpirun it is a 1-rank job. The command is parse -> pre-flight -> library ->
format:

- :func:`~starchol.jobs.run_plan.preflight` checks every path, file, size and setting
  on every rank before anything is allocated and returns the typed
  :class:`~starchol.jobs.run_plan.RunPlan` (the options are never modified) (outputs distinct from the input and from each other, folders
  writable, the input readable by HDF5, memory per rank, disk space, StarPU's
  environment); every rank raises the same error (:func:`starchol.collective.run_everywhere`).
- the work runs under :mod:`starchol.faults`: an error or a signal on one rank aborts
  the job instead of leaving the others waiting.
- rank 0 prints one summary (decimal units) and writes the JSON document; the bytes
  StarPU-MPI measured are compared with the exact model
  (:func:`starchol.model.volume.transfer_pairs_bytes`).
- with right-hand sides (``--rhs`` or ``--nrhs``), the factor then solves A X = B
  (:meth:`starchol.linalg.cholesky.Factor.solve`), whose bytes are compared with
  :func:`starchol.model.volume.solve_transfer_pairs_bytes`; log det A is always given.
- ``--dtype mixed`` (with ``--rhs`` or ``--nrhs``) runs
  :func:`starchol.linalg.mixed.solve_mixed` instead: a float32 factorization, the
  refinement to float64 answers, the float64 fallback; its bytes are compared with
  :func:`starchol.model.mixed_volume.mixed_transfer_pairs_bytes`.
"""
import logging
import os

import numpy as np

from ..collective import run_everywhere
from ..distributions import MAP_NAMES as MAPS
from ..distributions import MAPS_25D
from ..distributions.base import count_text
from ..errors import StarcholError
from ..units import format_bytes
from ..runtime.workers import DEFAULT_CUDA_WORKERS_PER_GPU
from .options import (SLICE_BLOCK_HELP, add_cache_arg, add_dtype_arg, add_seed_arg,
                      cache_from_args, is_mixed)
from .output import add_json_arg, bytes_text, dumps, publish_json, text_stream, write_atomic
from .progress import Progress
from .run_plan import preflight

log = logging.getLogger("starchol.run")


#: options every rank must be given alike: they decide the collective steps (what is
#: made, read, factored, solved, checked, gathered, traced and written)
ALIKE_ON_EVERY_RANK = ("dist", "grid", "slices", "slice_block", "map_file", "n", "nb", "seed", "matrix",
                       "dtype", "check", "sched", "cache", "no_cache", "input", "output",
                       "overwrite", "symmetry_tol", "rhs", "nrhs", "solution", "gather", "trace")


def register(sub):
    p = sub.add_parser(
        "run", help="factor a test matrix with StarPU-MPI (launch with mpirun -np P)",
        description="Distributed tiled Cholesky on StarPU-MPI: one MPI rank per node of the "
                    "map. Reports time, GFlop/s (N^3/3 flops), the residual with --check, and "
                    "the bytes sent between ranks, measured vs the exact model. Every path, "
                    "size and setting is checked on every rank before the work starts. "
                    "The computation is float64 unless --dtype float32 says otherwise; "
                    "--input is converted to it and --output / --gather are written in "
                    "it.",
        hints={"--nodes": "run has no --nodes: the node count is mpirun -np P, one rank "
                          "per map node"})
    p.add_argument("--dist", required=True, choices=MAPS, metavar="D",
                   help=f"tile map: {', '.join(MAPS)}")
    p.add_argument("--grid", metavar="PxQ",
                   help="2dbc grid, or one slice's grid for 2dbc25d (default: most square)")
    p.add_argument("--slices", type=int, default=None, metavar="C",
                   help=f"2.5D maps ({', '.join(MAPS_25D)}): number of slices c (default "
                        "1); c copies of the matrix, P/c ranks per slice")
    p.add_argument("--slice-block", type=int, default=None, metavar="B",
                   help=SLICE_BLOCK_HELP)
    p.add_argument("--map-file", metavar="FILE", help="custom map file (Chameleon text or .npy)")
    p.add_argument("--n", type=int, metavar="N",
                   help="matrix order (required unless --input gives the matrix)")
    p.add_argument("--nb", type=int, required=True, metavar="NB", help="tile size")
    add_seed_arg(p)
    p.add_argument("--matrix", default="spd", metavar="KIND",
                   help="spd (default) or indefinite:J (must fail at global column J)")
    add_dtype_arg(p, "precision of the factorization: float64 (default) or float32 "
                     "(single-precision kernels, half the memory and half the bytes "
                     "sent; --check's residual is then about 1e-7, not 1e-16); mixed "
                     "(needs --rhs or --nrhs): a float32 factorization of a float32 copy "
                     "of A, iterative refinement of the solve to float64 accuracy, float64 "
                     "if that fails (solve_mixed; A, B and X in float64)", mixed=True)
    p.add_argument("--check", action="store_true",
                   help="compute ||A - L L^T||_F / ||A||_F (distributed) and, with "
                        "--rhs/--nrhs, the solve's ||B - A X||_F / (||A||_F ||X||_F + "
                        "||B||_F)")
    p.add_argument("--sched", default=None, metavar="NAME",
                   help="StarPU scheduler (default prio); with GPUs: dmdas or heteroprio "
                        "(docs/gpu.md)")
    p.add_argument("--workers", type=int, default=None, metavar="K",
                   help="CPU workers per rank (default: the node's cores / ranks on it)")
    p.add_argument("--gpus", type=int, default=None, metavar="K",
                   help=f"GPUs per rank, {DEFAULT_CUDA_WORKERS_PER_GPU} CUDA workers (streams) "
                        "each unless "
                        "STARPU_NWORKER_PER_CUDA says otherwise (default: every GPU the "
                        "rank sees; 0 for none)")
    add_cache_arg(p, old_spelling=True)
    p.add_argument("--window", type=int, default=None, metavar="W",
                   help="submission window in iterations: a rank submits iteration k once "
                        "its tasks of iteration k - W are done, which bounds the tile "
                        "copies it receives and holds (default 3, docs/runtime.md; 0: the "
                        "whole task graph at once)")
    p.add_argument("--gather", metavar="FILE",
                   help="gather the factor L on rank 0 and save it (.npy; the suffix is "
                        "added when missing; an existing file is replaced only with "
                        "--overwrite)")
    add_json_arg(p, "the result document (rank 0)", overwrite=False)
    p.add_argument("--trace", metavar="DIR",
                   help="record FxT execution traces of every rank in DIR and convert them "
                        "(DIR/tasks.rec, paje.trace, trace.json; starchol report draws "
                        "them). Needs the StarPU scripts/setup.sh builds")
    io = p.add_argument_group("HDF5 files")
    io.add_argument("--input", metavar="FILE.h5:/DATASET",
                    help="factor this symmetric matrix (float64/float32, either byte order, "
                         "converted to --dtype; lower triangle used; each rank reads its "
                         "own tiles) instead of a generated one")
    io.add_argument("--output", metavar="FILE.h5:/DATASET",
                    help="write the factor L (in --dtype, lower triangle; the chunks above "
                         "the diagonal are not stored and read as zeros) with attributes (content, "
                         "map, n, nb, residual, ...; a factor file is refused as --input); "
                         "written "
                         "under a temporary name and published when complete (never over a "
                         "file that appeared meanwhile, unless --overwrite)")
    io.add_argument("--rhs", metavar="FILE.h5:/DATASET",
                    help="right-hand sides B (N x K, float64/float32, converted to "
                         "--dtype): after the factorization, solve A X = B with the tiled "
                         "triangular solves (their bytes measured against the model)")
    io.add_argument("--solution", metavar="FILE.h5:/DATASET",
                    help="write X of A X = B (N x K, in --dtype), atomically; needs --rhs "
                         "or --nrhs")
    io.add_argument("--overwrite", action="store_true",
                    help="replace the --output and --solution datasets and the --gather "
                         "and --json files if they exist")
    io.add_argument("--symmetry-tol", type=float, default=None, metavar="TOL",
                    help="refuse an --input with max|A-A^T| > TOL max|A| (default 1e-10)")
    p.add_argument("--nrhs", type=int, default=None, metavar="K",
                   help="solve for K generated right-hand sides (reproducible from --seed) "
                        "instead of --rhs")
    p.add_argument("--quiet", action="store_true", help="no progress line on rank 0")
    p.set_defaults(func=run)
    return p


# -- pre-flight ---------------------------------------------------------------------------
def ranks_on_host(comm):
    """Ranks of ``comm`` on this host (shared memory). Collective; cannot fail alone."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return local.Get_size()
    finally:
        local.Free()


# -- the command --------------------------------------------------------------------------
def run(args):
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise StarcholError(f"mpi4py is missing ({exc}); see the README") from exc
    from ..faults import end_diverged

    from ..collective import agree

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    # every step below is collective: ranks given other options would wait for each other
    agree(comm, None, same={name: getattr(args, name) for name in ALIKE_ON_EVERY_RANK})
    plan = run_everywhere(comm, preflight, args, rank, size, ranks_on_host(comm))
    # the ranks must read the same data, whatever the file is called on each
    agree(comm, None, same={"input": plan.input_key, "rhs": plan.rhs_key})
    log.info("pre-flight passed on %d rank(s): %s, N = %d, NB = %d; rank %d needs about %s",
             size, plan.tile_map, plan.n, args.nb, rank, format_bytes(plan.memory))
    try:
        from ..linalg.hdf5_io import FactorWriter

        writer = solution_writer = None
        if args.output:
            writer = FactorWriter(plan.output_path, plan.output_dataset, plan.n, comm,
                                  overwrite=args.overwrite, input_path=plan.input_path,
                                  nb=args.nb, role="--output", dtype=args.dtype)
        if args.solution:
            solution_writer = FactorWriter(
                plan.solution_path, plan.solution_dataset, plan.n, comm,
                overwrite=args.overwrite, input_path=plan.input_path, nb=args.nb,
                role="--solution", dtype="float64" if is_mixed(args) else args.dtype,
                ncols=plan.nrhs)
        return _run(args, plan, comm, writer, solution_writer)
    except StarcholError:
        raise  # raised identically on every rank (agreed or validated)
    except BaseException as exc:
        end_diverged(exc, comm)  # several ranks: one line, MPI_Abort; never returns
        raise


def _run(args, plan, comm, writer, solution_writer):
    from ..model.load import node_load
    from ..linalg import DistributedMatrix, cholesky, matrices, solve_mixed
    from ..model.memory import node_memory
    from ..model.volume import tile_bytes
    from ..runtime import Session

    rank = comm.Get_rank()
    tile_map, spec, n = plan.tile_map, plan.spec, plan.n
    cache = cache_from_args(args)
    mixed = is_mixed(args)
    dtype = np.dtype("float64" if mixed else args.dtype)   # mixed: A, B and X in float64
    sol = None
    with Session(comm, workers=args.workers, scheduler=plan.sched, stats=True,
                 cache=cache, trace=args.trace, gpus=args.gpus) as rt:
        nt = -(-n // args.nb)
        if args.input:
            a = DistributedMatrix.from_hdf5(plan.input_path, plan.input_dataset, args.nb,
                                            tile_map, dtype=dtype, comm=comm,
                                            symmetry_tol=plan.symmetry_tol)
            input_info = a.input_info
        else:
            seed = args.seed
            a = DistributedMatrix.from_function(
                lambda r0, r1, c0, c1: matrices.block(spec, n, seed, r0, r1, c0, c1),
                (n, n), args.nb, tile_map, dtype=dtype, comm=comm)
            input_info = None
        rhs = _right_hand_sides(args, plan, dtype, comm)
        orig = a.copy() if args.check and not mixed else None
        orig_b = rhs.copy() if args.check and rhs is not None else None
        rt.pin_tiles(a.tiles.values())   # GPUs: page-locked host tiles (async copies)
        rt.kernel_counts()               # count the factorization's tasks only
        rt.device_bytes()
        progress = None
        if rank == 0 and not args.quiet:
            progress = Progress(f"rank 0 tasks ({count_text(rt.size, 'rank')})",
                                unit="tasks", enabled=True)
        if mixed:
            # A and B stay float64 and unchanged; the backward error is always computed
            import warnings

            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                sol = solve_mixed(a, rhs, tile_map, session=rt)
            for w in said:       # one line on every rank (the library warns on each)
                log.warning("rank %d: %s", rank, w.message)
            rt.stop_trace()
            fac, x, res, solve_res = sol.factor, sol.X, None, sol.backward_error
        else:
            # in place (the pinned tiles become L); --check keeps the copy of A made above
            fac = cholesky(a, tile_map, session=rt, overwrite_a=True, progress=progress,
                           window=args.window)
            rt.stop_trace()              # --trace: the factorization only, not the check
        kernels = comm.gather(rt.kernel_counts(), root=0)
        device_bytes = comm.gather(rt.device_bytes(), root=0)
        if not mixed:
            res = fac.residual(orig) if args.check else None
            x = fac.solve(rhs, overwrite_b=True) if rhs is not None else None
            solve_res = fac.solve_residual(orig, x, orig_b) if orig_b is not None else None
        logdet = fac.logdet()
        full = fac.L.gather() if plan.gather else None
        peak_rss = comm.gather(_peak_rss_bytes(), root=0)   # the whole run's, as modelled
        info = rt.describe()
    record = sol.record if mixed else fac.record
    a = fac.L
    trace = None
    if args.trace:
        from ..runtime.traces import finish

        trace = finish(comm, args.trace)
    appeared = None
    if writer is not None:
        from ..version import VERSION
        from ..linalg.hdf5_io import OutputAppeared
        from ..units import now_utc

        attrs = {"map": str(tile_map), "dist": tile_map.name, "n": n, "nb": args.nb,
                 "residual": np.nan if res is None else res,
                 "starchol_version": VERSION, "date": now_utc(),
                 "source": args.input or f"generated {spec} seed {args.seed}"}
        try:
            writer.write(a, attrs)
        except OutputAppeared as exc:  # raised on every rank: the factor is kept aside
            appeared = exc
    solution_appeared = None
    if solution_writer is not None:
        from ..version import VERSION
        from ..linalg.hdf5_io import OutputAppeared
        from ..units import now_utc

        try:
            solution_writer.write(x, {
                "map": str(tile_map), "dist": tile_map.name, "n": n, "nb": args.nb,
                "nrhs": x.ncols, "residual": np.nan if solve_res is None else solve_res,
                "starchol_version": VERSION, "date": now_utc(),
                "source": f"solve of {args.input or f'generated {spec} seed {args.seed}'}"
                          f" with {args.rhs or f'--nrhs {args.nrhs} seed {args.seed}'}"})
        except OutputAppeared as exc:  # raised on every rank: X is kept aside
            solution_appeared = exc
    if rank != 0:
        for exc in (appeared, solution_appeared):
            if exc is not None:
                raise exc
        return 0
    storage = node_load(tile_map, nt, tile_bytes=tile_bytes(
        n, args.nb, 4 if mixed else dtype.itemsize))["bytes"]
    model_peak = node_memory(tile_map, n, args.nb, cache=cache_from_args(args),
                             check=args.check, gather=bool(plan.gather),
                             itemsize=dtype.itemsize,
                             nrhs=0 if x is None else x.ncols, mixed=mixed,
                             window=None if mixed else args.window)["total"]
    # the document is the record's (RunRecord.to_dict), with the rest of the run as extra
    extra = {
        "seed": args.seed,
        "matrix": args.input if args.input else str(spec),
        "input": input_info and {"file": args.input, **input_info},
        "output": args.output if appeared is None else f"{appeared.kept}:{writer.dataset}",
        "residual": res,
        "logdet": logdet,
        "solve": None if mixed else _solve_doc(args, fac.solve_record, solution_appeared,
                                               solve_res, solution_writer),
        "memory": {"tile_bytes_per_node": storage,
                   "tile_bytes_max": int(storage.max()),
                   "peak_rss_bytes_per_rank": peak_rss,
                   "model_peak_bytes_per_rank": model_peak,
                   "note": "tile_bytes: model (every slice's copies held at once); "
                           "peak_rss: the process's peak resident memory over the run "
                           "(getrusage); model_peak: starchol.model.memory.node_memory, "
                           "what the pre-flight check and starchol plan use"},
        # the runtime's keys beyond the record's own (scheduler, workers, StarPU)
        "runtime": {"gpus_per_rank": info.get("gpus_per_rank", 0),
                    "cuda_workers_per_gpu": info.get("cuda_workers_per_gpu", 0),
                    "kernel_blas": record.kernel_blas,
                    **({"heteroprio": info["heteroprio"]} if info.get("heteroprio") else {})},
        "kernels": _kernel_table(kernels),
        "kernels_per_rank": kernels,
        "device_bytes_per_rank": device_bytes,
        "device_bytes": {k: int(sum(d[k] for d in device_bytes)) for k in device_bytes[0]},
    }
    if mixed:
        extra["mixed"] = {**record.extra["mixed"],
                          "rhs": args.rhs or f"generated with seed {args.seed}",
                          "logdet_exact": sol.logdet_exact,
                          "solution": (None if not args.solution else args.solution
                                       if solution_appeared is None else
                                       f"{solution_appeared.kept}:"
                                       f"{solution_writer.dataset}")}
    if trace is not None:
        extra["trace"] = {"dir": os.path.abspath(args.trace), "kernels": trace["kernels"],
                          "span_ms": trace["span_ms"], "comms": len(trace["comms"]),
                          "comm_bytes": trace["comm_bytes"]}
        path = trace.get("critical_path")
        if path:
            extra["trace"]["critical_path"] = {k: path[k] for k in (
                "makespan_ms", "length_ms", "split_ms", "kernels", "transfers")}
    doc = record.with_extra(**extra).to_dict()
    _publish_rank0(args, plan, doc, full, appeared)
    if trace is not None:  # the trace folder is a complete record for `starchol report DIR`
        write_atomic(os.path.join(args.trace, "run.json"), dumps(doc) + "\n")
    for exc in (appeared, solution_appeared):
        if exc is not None:
            raise exc
    return 0


def _right_hand_sides(args, plan, dtype, comm):
    """B of ``--rhs`` (read, converted to ``dtype``) or ``--nrhs`` (generated), laid out
    by the map (row tile i with L's diagonal tile (i, i)); None without either.
    Collective."""
    from ..linalg import DistributedMatrix, matrices

    tile_map = plan.tile_map
    if args.rhs:
        return DistributedMatrix.from_hdf5(plan.rhs_path, plan.rhs_dataset, args.nb,
                                           tile_map, dtype=dtype, comm=comm, kind="rhs")
    if args.nrhs:
        seed = args.seed
        return DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: matrices.rhs_block(seed, r0, r1, c0, c1),
            (plan.n, args.nrhs), args.nb, tile_map, kind="rhs", dtype=dtype, comm=comm)
    return None


def _solve_doc(args, record, appeared, residual=None, solution_writer=None):
    """The ``solve`` object of the run document (None without right-hand sides): the
    solve's record (time, tasks, bytes measured and predicted per pair), its right-hand
    sides, where X went and (``--check``) the backward error ``residual`` =
    ||B - A X||_F / (||A||_F ||X||_F + ||B||_F), else None."""
    if record is None:
        return None
    return record.with_extra(
        rhs=args.rhs or f"generated with seed {args.seed}", residual=residual,
        solution=(None if not args.solution else args.solution if appeared is None
                  else f"{appeared.kept}:{solution_writer.dataset}")).to_dict()


def _publish_rank0(args, plan, doc, full, appeared):
    """Rank 0 after the collective part: the JSON first (so a later failure keeps it),
    then the gathered factor, then the summary. Failures here are rank 0's alone but no
    rank waits any more, so they are plain errors (rc 1)."""
    from ..files import OutputAppeared, drop_temporary, new_temporary, publish

    errors = []
    if args.json:
        try:
            # a run whose factor was kept aside keeps its document aside too: the
            # other run, which published the factor, owns the names
            publish_json(args.json, doc, plan.json_before, args.overwrite,
                         aside=appeared and "this run's --output was kept aside (another "
                                            "run published it)")
        except OSError as exc:
            errors.append(f"cannot write --json {args.json}: {exc.strerror or exc}")
        except StarcholError as exc:    # kept aside (OutputAppeared), or a full disk
            errors.append(str(exc))
    if full is not None:
        tmp = None
        try:
            tmp = new_temporary(plan.gather)
            with open(tmp, "wb") as fh:
                np.save(fh, full)
            publish(tmp, plan.gather, plan.gather_before, args.overwrite, what="--gather",
                    suffix=".npy")
        except OSError as exc:
            errors.append(f"cannot write --gather {plan.gather}: {exc.strerror or exc}")
        except OutputAppeared as exc:
            errors.append(str(exc))
        finally:
            drop_temporary(tmp)
    out = text_stream(args)  # stderr when stdout holds the JSON
    print(summary(doc), file=out)
    if args.output and appeared is None:
        print(f"  factor L written to {args.output}", file=out)
    if plan.gather and full is not None and not errors:
        print(f"  factor L gathered to {plan.gather}", file=out)
    if errors:   # with the factor's own "kept aside" first: one line names every file
        raise StarcholError("; ".join([str(appeared)] * (appeared is not None) + errors))


def summary(doc):
    res = "not checked (add --check)" if doc["residual"] is None else f"{doc['residual']:.3e}"
    return "\n".join([
        f"starchol run: {doc['map']}, {count_text(doc['nodes'], 'rank')}, "
        f"{count_text(doc['runtime']['workers_per_rank'], 'worker')}/rank, scheduler "
        f"{doc['runtime']['scheduler']}, StarPU {doc['runtime']['starpu_version']}",
        f"  StarPU build: {doc['runtime'].get('starpu_build') or 'not recorded'}",
        f"  kernels' BLAS: {doc['runtime'].get('kernel_blas') or 'not recorded'}",
        f"  N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']} (elements, tiles), "
        f"{doc.get('dtype', 'float64')}, matrix {doc['matrix']}, seed {doc['seed']}",
        f"  time {doc['time_s']:.3f} s (submission {doc['submit_s']:.3f} s, "
        f"{doc['tasks']} tasks), {doc['gflops']:.2f} GFlop/s",
        *([] if doc.get("mixed") else
          [f"  residual ||A - L L^T||_F / ||A||_F = {res}"]),
        f"  log det A = {doc['logdet']:.10g}" + _logdet_note(doc),
        f"  bytes sent between ranks (cache {'on' if doc['cache'] else 'off'}): measured "
        f"{bytes_text(doc['bytes_measured_total'])}, predicted "
        f"{bytes_text(doc['bytes_predicted_total'])}, per-pair match: "
        f"{'yes' if doc['match'] else 'NO'}",
        *_solve_lines(doc),
        *_mixed_lines(doc),
        *_memory_lines(doc),
        *_kernel_lines(doc),
    ])


def _solve_lines(doc):
    sol = doc.get("solve")
    if not sol:
        return []
    lines = [f"  solve A X = B: {count_text(sol['nrhs'], 'right-hand side')} ({sol['rhs']}), "
             f"time {sol['time_s']:.3f} s ({sol['tasks']} tasks); bytes sent measured "
             f"{bytes_text(sol['bytes_measured_total'])}, predicted "
             f"{bytes_text(sol['bytes_predicted_total'])}, per-pair match: "
             f"{'yes' if sol['match'] else 'NO'}"]
    res = sol.get("residual")
    lines.append("  solve residual ||B - A X||_F / (||A||_F ||X||_F + ||B||_F) = " +
                 ("not checked (add --check)" if res is None else f"{res:.3e}"))
    if sol.get("solution"):
        lines.append(f"  solution X written to {sol['solution']}")
    return lines


def _logdet_note(doc):
    mixed = doc.get("mixed")
    if not mixed:
        return ""
    return (" (from the float64 factor)" if mixed.get("logdet_exact") else
            " (from the float32 factor: approximate, docs/api.md solve_mixed)")


def _mixed_lines(doc):
    """The mixed-precision solve's lines of the summary (``--dtype mixed``)."""
    mixed = doc.get("mixed")
    if not mixed:
        return []
    t = mixed["time_s"]
    fallback = ("no (float32 factor refined to float64 accuracy)" if mixed["fallback"]
                is None else f"YES, {mixed['fallback']}: {mixed['fallback_reason']}")
    lines = [f"  mixed precision: {count_text(doc['nrhs'], 'right-hand side')} "
             f"({mixed['rhs']}), {count_text(mixed['iterations'], 'refinement iteration')}"
             f", fallback to float64: {fallback}",
             f"  backward error ||B - A X||_F / (||A||_F ||X||_F + ||B||_F) = "
             f"{mixed['backward_error']:.3e} (bound sqrt(N) 2^-53 = "
             f"{mixed['tolerance']:.3e}); history "
             + (", ".join(f"{h:.2e}" for h in mixed["history"]) or "- (no float32 factor)"),
             f"  time split: float32 copy + factorization {t['factor']:.3f} s, refinement "
             f"{t['refinement']:.3f} s, fallback {t['fallback']:.3f} s"]
    measured, predicted = (mixed.get("bytes_measured_phase_pairs"),
                           mixed.get("bytes_predicted_phase_pairs"))
    if measured and predicted:
        parts = ", ".join(f"{k} {bytes_text(int(np.sum(measured[k])))}"
                          + ("" if np.array_equal(measured[k], predicted[k]) else " (NO match)")
                          for k in measured if np.sum(predicted[k]) or np.sum(measured[k]))
        lines.append(f"  bytes per graph (measured; each equal to the model per pair unless "
                     f"said): {parts}")
    if mixed.get("solution"):
        lines.append(f"  solution X written to {mixed['solution']}")
    return lines


def _kernel_table(per_rank):
    """Sum the ranks' ``{kernel: {"cpu": n, "cuda": m}}`` tables."""
    out = {}
    for table in per_rank:
        for name, row in table.items():
            acc = out.setdefault(name, {"cpu": 0, "cuda": 0})
            for kind, n in row.items():
                acc[kind] = acc.get(kind, 0) + int(n)
    return dict(sorted(out.items()))


def _kernel_lines(doc):
    table = doc.get("kernels") or {}
    if not table:
        return []
    parts = ", ".join(f"{k} {v['cpu']}/{v['cuda']}" for k, v in table.items())
    dev = doc.get("device_bytes") or {}
    lines = [f"  tasks per kernel (CPU/GPU workers): {parts}"]
    if doc["runtime"].get("gpus_per_rank"):
        lines.append(f"  host<->GPU copies (not network bytes): host->device "
                     f"{dev.get('host_to_device', 0)}, device->host "
                     f"{dev.get('device_to_host', 0)} bytes")
    return lines


def _peak_rss_bytes():
    """This process's peak resident memory in bytes (Linux getrusage: KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _memory_lines(doc):
    mem = doc.get("memory")
    if not mem:
        return []
    rss = mem.get("peak_rss_bytes_per_rank") or []
    line = (f"  memory: tile storage per node (model, "
            f"{count_text(doc.get('slices', 1), 'slice')}) max "
            f"{format_bytes(mem['tile_bytes_max'])}")
    if rss:
        line += f"; peak RSS per rank max {format_bytes(max(rss))}"
        model = mem.get("model_peak_bytes_per_rank")
        if model is not None and len(model):
            line += f" (model {format_bytes(max(model))})"
    return [line]
