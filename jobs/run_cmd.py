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
- :func:`_run` goes through named phases: :func:`compute` (the session's part: the
  matrices made or read, factored or solved, checked), :func:`trace_summary`,
  :func:`write_outputs` (HDF5), then on rank 0 :func:`document` and its publication.
- rank 0 prints one summary (decimal units, :mod:`.run_summary`) and writes the JSON
  document; the bytes
  StarPU-MPI measured are compared with the exact model
  (:func:`starchol.model.volume.transfer_pairs_bytes`).
- with right-hand sides (``--rhs`` or ``--nrhs``), the factor then solves A X = B
  (:meth:`starchol.linalg.cholesky.Factor.solve`, in the variant with fewer bytes on
  the busiest link, named in the document's ``solve.solve_variant``), whose bytes are
  compared with that variant's model (:mod:`starchol.model.rhs_volume`); log det A is
  always given.
- ``--dtype mixed`` (with ``--rhs`` or ``--nrhs``) runs
  :func:`starchol.linalg.mixed.solve_mixed` instead: a float32 factorization, the
  refinement to float64 answers, the float64 fallback; its bytes are compared with
  :func:`starchol.model.mixed_volume.mixed_transfer_pairs_bytes`.
"""
import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..collective import run_everywhere
from ..distributions.base import count_text
from ..errors import StarcholError
from ..units import format_bytes
from .options import cache_from_args, is_mixed
from .output import dumps, publish_json, text_stream, write_atomic
from .progress import Progress
from .run_args import register as register_parser
from .run_plan import preflight
from .run_summary import summary

log = logging.getLogger("starchol.run")


#: options every rank must be given alike: they decide the collective steps (what is
#: made, read, factored, solved, checked, gathered, traced and written)
ALIKE_ON_EVERY_RANK = ("dist", "grid", "slices", "slice_block", "map_file", "n", "nb", "seed", "matrix",
                       "dtype", "check", "sched", "cache", "no_cache", "input", "output",
                       "overwrite", "symmetry_tol", "rhs", "nrhs", "solution", "gather", "trace")


def register(sub):
    """Add ``starchol run``'s parser (:mod:`.run_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


# -- pre-flight ---------------------------------------------------------------------------
def ranks_on_host(comm):
    """Ranks of ``comm`` on this host (shared memory). Collective; cannot fail alone."""
    from ..runtime.backend import mpi

    local = comm.Split_type(mpi().COMM_TYPE_SHARED)
    try:
        return local.Get_size()
    finally:
        local.Free()


# -- the command --------------------------------------------------------------------------
def run(args):
    from ..runtime.backend import mpi

    MPI = mpi()     # RuntimeUnavailableError, with the fix, where mpi4py is missing
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


@dataclass
class Computed:
    """What the session's part of a run leaves on every rank (:func:`compute`)."""

    #: the factor (:class:`~starchol.linalg.cholesky.Factor`; mixed: the float32 one)
    factor: Any
    #: the run's record (:class:`~starchol.linalg.record.RunRecord`)
    record: Any
    #: ``--dtype mixed``: the :class:`~starchol.linalg.mixed.MixedSolution`, else None
    mixed: Any
    #: the solution X (a distributed matrix), None without right-hand sides
    x: Any
    #: ``--check``: ||A - L L^T||_F / ||A||_F, else None
    residual: Optional[float]
    #: ``--check`` with right-hand sides: the solve's backward error, else None
    solve_residual: Optional[float]
    logdet: float
    #: ``--input``: what reading it found (``max_abs``, ``dtype``, ...), else None
    input_info: Optional[dict]
    #: ``--gather``: the factor as one array (rank 0), else None
    full: Any
    #: rank 0: each rank's ``{kernel: {"cpu": n, "cuda": m}}`` (None elsewhere)
    kernels: Any
    #: rank 0: each rank's host<->device bytes (None elsewhere)
    device_bytes: Any
    #: rank 0: each rank's peak resident memory, bytes (None elsewhere)
    peak_rss: Any
    #: the session's description (``Session.describe()``)
    info: dict


def _run(args, plan, comm, writer, solution_writer):
    """The run after its pre-flight, phase by phase. Collective."""
    done = compute(args, plan, comm)
    trace = trace_summary(comm, args.trace) if args.trace else None
    appeared, solution_appeared = write_outputs(args, plan, done, writer, solution_writer)
    if comm.Get_rank() != 0:
        for exc in (appeared, solution_appeared):
            if exc is not None:
                raise exc
        return 0
    doc = document(args, plan, done, trace, appeared, solution_appeared, writer,
                   solution_writer)
    _publish_rank0(args, plan, doc, done.full, appeared)
    if trace is not None:  # the trace folder is a complete record for `starchol report DIR`
        try:
            write_atomic(os.path.join(args.trace, "run.json"), dumps(doc) + "\n")
        except BaseException:
            from ..runtime.traces import discard
            discard(args.trace, 0, 0)  # rank 0, every rank's raw trace (all have ended)
            raise
    for exc in (appeared, solution_appeared):
        if exc is not None:
            raise exc
    return 0


def _matrix(args, plan, dtype, comm):
    """A: ``--input`` read (with what reading it found) or the generated test matrix
    (and None). Collective."""
    from ..linalg import DistributedMatrix, matrices

    if args.input:
        a = DistributedMatrix.from_hdf5(plan.input_path, plan.input_dataset, args.nb,
                                        plan.tile_map, dtype=dtype, comm=comm,
                                        symmetry_tol=plan.symmetry_tol)
        return a, a.input_info
    spec, n, seed = plan.spec, plan.n, args.seed
    a = DistributedMatrix.from_function(
        lambda r0, r1, c0, c1: matrices.block(spec, n, seed, r0, r1, c0, c1),
        (n, n), args.nb, plan.tile_map, dtype=dtype, comm=comm)
    return a, None


def _solve_mixed(a, rhs, tile_map, rt, rank):
    """``--dtype mixed``: :func:`~starchol.linalg.mixed.solve_mixed` (A and B stay
    float64 and unchanged; the backward error is always computed), its warnings logged
    with the rank. Collective."""
    import warnings

    from ..linalg import solve_mixed

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        sol = solve_mixed(a, rhs, tile_map, session=rt)
    for w in said:       # one line on every rank (the library warns on each)
        log.warning("rank %d: %s", rank, w.message)
    return sol


def compute(args, plan, comm):
    """The session's part of the run: A made or read, B made or read, the factorization
    (or the mixed-precision solve), then ``--check``'s residuals, the solve, log det and
    ``--gather``; the kernel counts, device copies and peak memory gathered to rank 0.
    Collective. Returns a :class:`Computed`."""
    from ..linalg import cholesky
    from ..runtime import Session

    rank = comm.Get_rank()
    mixed = is_mixed(args)
    dtype = np.dtype("float64" if mixed else args.dtype)   # mixed: A, B and X in float64
    sol = None
    with Session(comm, workers=args.workers, scheduler=plan.sched, stats=True,
                 cache=cache_from_args(args), trace=args.trace, gpus=args.gpus) as rt:
        a, input_info = _matrix(args, plan, dtype, comm)
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
            sol = _solve_mixed(a, rhs, plan.tile_map, rt, rank)
            rt.stop_trace()
            fac, x, res, solve_res = sol.factor, sol.X, None, sol.backward_error
        else:
            # in place (the pinned tiles become L); --check keeps the copy of A made above
            fac = cholesky(a, plan.tile_map, session=rt, overwrite_a=True, progress=progress,
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
    return Computed(factor=fac, record=sol.record if mixed else fac.record, mixed=sol, x=x,
                    residual=res, solve_residual=solve_res, logdet=logdet,
                    input_info=input_info, full=full, kernels=kernels,
                    device_bytes=device_bytes, peak_rss=peak_rss, info=info)


def write_outputs(args, plan, done, writer, solution_writer):
    """``--output`` (L) and ``--solution`` (X) written, each with the attributes the
    run's record gives (:meth:`~starchol.linalg.record.RunRecord.output_attrs`).
    Collective. Returns ``(appeared, solution_appeared)``: the
    :class:`~starchol.files.OutputAppeared` of an output kept aside (another run
    published that name meanwhile), else None."""
    from ..files import OutputAppeared

    source = args.input or f"generated {plan.spec} seed {args.seed}"
    appeared = solution_appeared = None
    if writer is not None:
        try:
            writer.write(done.factor.L, done.record.output_attrs(done.residual, source))
        except OutputAppeared as exc:  # raised on every rank: the factor is kept aside
            appeared = exc
    if solution_writer is not None:
        rhs = args.rhs or f"--nrhs {args.nrhs} seed {args.seed}"
        try:
            solution_writer.write(done.x, done.record.output_attrs(
                done.solve_residual, f"solve of {source} with {rhs}", nrhs=done.x.ncols))
        except OutputAppeared as exc:  # raised on every rank: X is kept aside
            solution_appeared = exc
    return appeared, solution_appeared


def document(args, plan, done, trace, appeared, solution_appeared, writer,
             solution_writer):
    """Rank 0: the run document, ``RunRecord.with_extra(...).to_dict()`` of the run's
    record with its typed parts (:mod:`starchol.linalg.run_parts`: solve, mixed,
    memory, trace, kernels) and the rest of the run (seed, matrix, files, residual, log
    det, runtime). Checked against the generated schema when
    ``STARCHOL_CHECK_RUN_DOCUMENTS`` is set (the test suite sets it)."""
    from ..linalg.run_parts import KernelCount, MemoryRecord, TraceRecord
    from ..model.load import node_load
    from ..model.memory import node_memory
    from ..model.volume import tile_bytes

    tile_map, n, nb = plan.tile_map, plan.n, args.nb
    mixed = is_mixed(args)
    dtype = np.dtype("float64" if mixed else args.dtype)
    record, info, x = done.record, done.info, done.x
    storage = node_load(tile_map, -(-n // nb), tile_bytes=tile_bytes(
        n, nb, 4 if mixed else dtype.itemsize))["bytes"]
    model_peak = node_memory(tile_map, n, nb, cache=cache_from_args(args),
                             check=args.check, gather=bool(plan.gather),
                             itemsize=dtype.itemsize,
                             nrhs=0 if x is None else x.ncols, mixed=mixed,
                             window=None if mixed else args.window)["total"]
    device_bytes = done.device_bytes
    parts = {
        "solve": None if mixed else _solve_doc(args, done.factor.solve_record,
                                               solution_appeared, done.solve_residual,
                                               solution_writer),
        "memory": MemoryRecord(
            tile_bytes_per_node=[int(b) for b in storage], tile_bytes_max=int(storage.max()),
            peak_rss_bytes_per_rank=[int(b) for b in done.peak_rss],
            model_peak_bytes_per_rank=[int(b) for b in model_peak],
            note="tile_bytes: model (every slice's copies held at once); peak_rss: the "
                 "process's peak resident memory over the run (getrusage); model_peak: "
                 "starchol.model.memory.node_memory, what the pre-flight check and "
                 "starchol plan use"),
        "kernels": {k: KernelCount(**v) for k, v in _kernel_table(done.kernels).items()},
    }
    if mixed:
        parts["mixed"] = dataclasses.replace(
            record.mixed, rhs=args.rhs or f"generated with seed {args.seed}",
            logdet_exact=done.mixed.logdet_exact,
            solution=(None if not args.solution else args.solution
                      if solution_appeared is None else
                      f"{solution_appeared.kept}:{solution_writer.dataset}"))
    if trace is not None:
        path = trace.get("critical_path")
        parts["trace"] = TraceRecord(
            dir=os.path.abspath(args.trace), kernels=trace["kernels"],
            span_ms=float(trace["span_ms"]), comms=len(trace["comms"]),
            comm_bytes=int(trace["comm_bytes"]),
            critical_path=None if not path else {k: path[k] for k in (
                "makespan_ms", "length_ms", "split_ms", "kernels", "transfers")})
    extra = {
        "seed": args.seed,
        "matrix": args.input if args.input else str(plan.spec),
        "input": done.input_info and {"file": args.input, **done.input_info},
        "output": args.output if appeared is None else f"{appeared.kept}:{writer.dataset}",
        "residual": done.residual,
        "logdet": done.logdet,
        # the runtime's keys beyond the record's own (scheduler, workers, StarPU)
        "runtime": {"gpus_per_rank": info.get("gpus_per_rank", 0),
                    "cuda_workers_per_gpu": info.get("cuda_workers_per_gpu", 0),
                    "kernel_blas": record.kernel_blas,
                    **({"heteroprio": info["heteroprio"]} if info.get("heteroprio") else {})},
        "kernels_per_rank": done.kernels,
        "device_bytes_per_rank": device_bytes,
        "device_bytes": {k: int(sum(d[k] for d in device_bytes)) for k in device_bytes[0]},
    }
    doc = record.with_extra(**parts, **extra).to_dict()
    if os.environ.get(CHECK_DOCUMENTS):
        _check_document(doc)
    return doc


#: set (to anything but empty) to check every run document against the schema generated
#: from its types before it is written (the test suite sets it: tests/conftest.py)
CHECK_DOCUMENTS = "STARCHOL_CHECK_RUN_DOCUMENTS"


def _check_document(doc):
    """Raise StarcholError when ``doc`` breaks the run document's schema
    (:func:`starchol.linalg.record.document_schema`), saying where."""
    from ..linalg.record import document_schema
    from ..linalg.run_parts import validate

    problem = validate(document_schema(), json.loads(dumps(doc)))
    if problem:
        raise StarcholError(f"the run document does not match its schema "
                            f"({CHECK_DOCUMENTS} is set): {problem}")


def trace_summary(comm, folder):
    """After StarPU has stopped: the ranks' FxT traces converted
    (:func:`starchol.runtime.traces.finish`) and ``trace.json`` written from the tool's
    outputs (:func:`starchol.reports.trace_records.write_summary`). Collective. The
    summary on rank 0, None elsewhere; an error on every rank."""
    from ..collective import agree
    from ..reports.trace_records import write_summary
    from ..runtime.traces import discard, finish

    try:
        hosts = finish(comm, folder)
        summary = error = None
        if comm.Get_rank() == 0:
            try:
                summary = write_summary(os.path.abspath(folder), comm.Get_size(), hosts)
            except Exception as exc:  # noqa: BLE001 - raised on every rank by agree
                error = exc
        agree(comm, error)
    except BaseException:  # a failed trace (a full disk) leaves no partial files
        discard(folder, comm.Get_rank(), comm.Get_size())
        raise
    return summary


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
                  else f"{appeared.kept}:{solution_writer.dataset}"))


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


def _kernel_table(per_rank):
    """Sum the ranks' ``{kernel: {"cpu": n, "cuda": m}}`` tables."""
    out = {}
    for table in per_rank:
        for name, row in table.items():
            acc = out.setdefault(name, {"cpu": 0, "cuda": 0})
            for kind, n in row.items():
                acc[kind] = acc.get(kind, 0) + int(n)
    return dict(sorted(out.items()))


def _peak_rss_bytes():
    """This process's peak resident memory in bytes (Linux getrusage: KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
