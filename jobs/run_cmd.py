"""``starchol run``: a distributed tiled Cholesky on StarPU-MPI, under any map (2D, or
2.5D with ``--slices C``: :mod:`starchol.linalg.cholesky25d`).

    mpirun -np P starchol run --dist D [--grid PxQ] [--slices C] --n N --nb NB [--seed S]
        [--matrix spd|indefinite:J] [--check] [--sched NAME] [--workers K] [--gpus K]
        [--json FILE]

Without mpirun it is a 1-rank job. Every input is checked on every rank before any
work (same inputs, same verdict, so no rank waits for another). Rank 0 prints one
summary and writes the JSON document; the bytes StarPU-MPI measured are compared with
the exact model (:func:`starchol.linalg.volume.transfer_pairs_bytes`).
"""
import os
import sys
import traceback

import numpy as np

from ..distributions import MAP_NAMES as MAPS
from ..distributions import MAPS_25D
from ..errors import StarcholError, UsageError
from .options import build_map
from .output import dumps, write_atomic
from .progress import Progress


def register(sub):
    p = sub.add_parser(
        "run", help="factor a test matrix with StarPU-MPI (launch with mpirun -np P)",
        description="Distributed tiled Cholesky on StarPU-MPI: one MPI rank per node of the "
                    "map. Reports time, GFlop/s (N^3/3 flops), the residual with --check, and "
                    "the bytes sent between ranks, measured vs the exact model.")
    p.add_argument("--dist", required=True, choices=MAPS, metavar="D",
                   help=f"tile map: {', '.join(MAPS)}")
    p.add_argument("--grid", metavar="PxQ",
                   help="2dbc grid, or one slice's grid for 2dbc25d (default: most square)")
    p.add_argument("--slices", type=int, default=None, metavar="C",
                   help="2.5D maps (sbc25d, 2dbc25d): number of slices c (default 1); "
                        "c copies of the matrix, P/c ranks per slice")
    p.add_argument("--map-file", metavar="FILE", help="custom map file (Chameleon text or .npy)")
    p.add_argument("--n", type=int, metavar="N",
                   help="matrix order (required unless --input gives the matrix)")
    p.add_argument("--nb", type=int, required=True, metavar="NB", help="tile size")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="matrix seed (default 0)")
    p.add_argument("--matrix", default="spd", metavar="KIND",
                   help="spd (default) or indefinite:J (must fail at global column J)")
    p.add_argument("--check", action="store_true",
                   help="compute ||A - L L^T||_F / ||A||_F (distributed)")
    p.add_argument("--sched", default=None, metavar="NAME",
                   help="StarPU scheduler (default prio); with GPUs: dmdas or heteroprio "
                        "(docs/gpu.md)")
    p.add_argument("--workers", type=int, default=None, metavar="K",
                   help="CPU workers per rank (default: the node's cores / ranks on it)")
    p.add_argument("--gpus", type=int, default=None, metavar="K",
                   help="CUDA workers per rank (default: every GPU the rank sees; 0 for "
                        "none)")
    p.add_argument("--no-cache", action="store_true",
                   help="disable StarPU-MPI's receive cache (one transfer per task operand)")
    p.add_argument("--gather", metavar="FILE",
                   help="gather the factor L on rank 0 and save it (.npy)")
    p.add_argument("--json", metavar="FILE", help="write the result document (rank 0)")
    p.add_argument("--trace", metavar="DIR",
                   help="record FxT execution traces of every rank in DIR and convert them "
                        "(DIR/tasks.rec, paje.trace, trace.json; starchol report draws "
                        "them). Needs the StarPU scripts/setup.sh builds")
    io = p.add_argument_group("HDF5 files")
    io.add_argument("--input", metavar="FILE.h5:/DATASET",
                    help="factor this symmetric matrix (float64/float32; lower triangle used; "
                         "each rank reads its own tiles) instead of a generated one")
    io.add_argument("--output", metavar="FILE.h5:/DATASET",
                    help="write the factor L (lower, zeros above) with attributes; written "
                         "under a temporary name and renamed when complete")
    io.add_argument("--overwrite", action="store_true",
                    help="replace the --output dataset if it exists")
    io.add_argument("--symmetry-tol", type=float, default=None, metavar="TOL",
                    help="refuse an --input with max|A-A^T| > TOL max|A| (default 1e-10)")
    p.add_argument("--quiet", action="store_true", help="no progress line on rank 0")
    p.set_defaults(func=run)


def validate(args, nranks):
    """Every check that needs no StarPU start; identical on all ranks. Returns the map."""
    from ..linalg.matrices import parse_matrix_spec
    from ..linalg.tiled import check_sizes
    from ..runtime.session import DEFAULT_SCHEDULER, check_scheduler, check_workers

    check_sizes(args.n, args.nb)
    spec = parse_matrix_spec(args.matrix, args.n)
    args.sched = check_scheduler(args.sched or DEFAULT_SCHEDULER)
    if args.workers is not None:
        check_workers(args.workers)
    from ..runtime.gpu import check_gpus
    check_gpus(args.gpus)
    if args.dist == "custom" and not args.map_file:
        raise UsageError("--dist custom needs --map-file FILE")
    if args.map_file and args.dist != "custom":
        raise UsageError(f"--map-file applies to --dist custom, not {args.dist}")
    if args.grid and args.dist not in ("2dbc", "2dbc25d"):
        raise UsageError(f"--grid applies to 2dbc and 2dbc25d only, not {args.dist}")
    if args.slices is not None and args.dist not in MAPS_25D:
        raise UsageError(f"--slices applies to the 2.5D maps ({', '.join(MAPS_25D)}), "
                         f"not {args.dist}")
    try:
        tile_map = build_map(args.dist, nranks, grid=args.grid, path=args.map_file,
                             slices=args.slices or 1, nt=-(-args.n // args.nb))
    except UsageError as exc:
        raise UsageError(f"{exc} (the run has {nranks} MPI rank(s): one per map node; "
                         f"change mpirun -np or the map)") from None
    if tile_map.nodes != nranks:
        raise UsageError(f"the map {tile_map} has {tile_map.nodes} nodes but the run has "
                         f"{nranks} MPI rank(s); launch mpirun -np {tile_map.nodes}")
    return tile_map, spec


def prepare_files(args, comm):
    """Check --input (its order N becomes --n) and the --output syntax. Collective."""
    from ..linalg.hdf5_io import SYMMETRY_TOL, inspect_input, parse_target

    args.input_path = args.input_dataset = args.writer = None
    if args.symmetry_tol is None:
        args.symmetry_tol = SYMMETRY_TOL
    elif args.symmetry_tol < 0:
        raise UsageError(f"--symmetry-tol must be >= 0, got {args.symmetry_tol}")
    if args.output:
        parse_target(args.output, "--output")
    if args.overwrite and not args.output:
        raise UsageError("--overwrite applies to --output")
    if not args.input:
        if args.n is None:
            raise UsageError("give the matrix: --n N (generated test matrix) or "
                             "--input FILE.h5:/DATASET")
        return
    if args.matrix != "spd":
        raise UsageError("--matrix generates a test matrix; it cannot be combined with --input")
    args.input_path, args.input_dataset = parse_target(args.input, "--input")
    n, dtype = inspect_input(args.input_path, args.input_dataset, comm)
    if args.n is not None and args.n != n:
        raise UsageError(f"--n {args.n} does not match the input matrix, which is "
                         f"{n} x {n}; drop --n")
    args.n = n
    args.input_dtype = dtype


def run(args):
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise StarcholError(f"mpi4py is missing ({exc}); see the README") from exc
    comm = MPI.COMM_WORLD
    prepare_files(args, comm)
    tile_map, spec = validate(args, comm.Get_size())
    if args.output:
        from ..linalg.hdf5_io import FactorWriter, parse_target

        path, dataset = parse_target(args.output, "--output")
        args.writer = FactorWriter(path, dataset, args.n, comm, overwrite=args.overwrite,
                                   input_path=args.input_path)
    try:
        return _run(args, comm, tile_map, spec)
    except StarcholError:
        raise  # raised identically on every rank (agreed or validated)
    except BaseException:
        if comm.Get_size() > 1:
            # one rank failed alone: the others may wait forever, so stop the job
            traceback.print_exc()
            sys.stderr.flush()
            comm.Abort(1)
        raise


def _run(args, comm, tile_map, spec):
    from ..linalg.cholesky import factorize, gather, gather_bytes, residual
    from ..linalg.tiled import TiledMatrix
    from ..distributions import node_load
    from ..linalg.volume import tile_bytes, transfer_pairs_bytes
    from ..runtime import Session

    rank = comm.Get_rank()
    cache = not args.no_cache
    with Session(comm, workers=args.workers, scheduler=args.sched, stats=True,
                 cache=cache, trace=args.trace, gpus=args.gpus) as rt:
        nt = -(-args.n // args.nb)
        sliced = tile_map.slices > 1 or tile_map.name in MAPS_25D
        if sliced:
            from ..linalg.cholesky25d import composite_owners, factorize_sliced

            slice_owners = tile_map.owner_maps(nt)
            owners = composite_owners(slice_owners)   # where column j is factored
        else:
            owners = tile_map.owner_map(nt)
        if args.input:
            from ..linalg.hdf5_io import read_tiles

            a = TiledMatrix(args.n, args.nb, owners, rt.rank)
            input_info = read_tiles(args.input_path, args.input_dataset, a, comm,
                                    symmetry_tol=args.symmetry_tol)
        else:
            a = TiledMatrix.generate(spec, args.n, args.nb, owners, rt.rank, args.seed)
            input_info = None
        orig = a.copy() if args.check else None
        rt.pin_tiles(a.tiles.values())   # GPUs: page-locked host tiles (async copies)
        rt.kernel_counts()               # count the factorization's tasks only
        rt.device_bytes()
        progress = None
        if rank == 0 and not args.quiet:
            progress = Progress(f"rank 0 tasks ({rt.size} ranks)", unit="tasks")
        if sliced:
            fac = factorize_sliced(rt, a, slice_owners, keep=args.check, progress=progress)
        else:
            fac = factorize(rt, a, keep=args.check, progress=progress)
        peak_rss = comm.gather(_peak_rss_bytes(), root=0)
        kernels = comm.gather(rt.kernel_counts(), root=0)
        device_bytes = comm.gather(rt.device_bytes(), root=0)
        res = residual(rt, fac, orig) if args.check else None
        measured = gather_bytes(rt, fac.bytes_sent)
        full = gather(rt, a) if args.gather else None
        info = rt.describe()
    trace = None
    if args.trace:
        from ..runtime.traces import finish

        trace = finish(comm, args.trace)
    if args.writer is not None:
        from .. import __version__
        from ..linalg.hdf5_io import now_iso

        attrs = {"map": str(tile_map), "dist": tile_map.name, "n": args.n, "nb": args.nb,
                 "residual": np.nan if res is None else res,
                 "starchol_version": __version__, "date": now_iso(),
                 "source": args.input or f"generated {spec} seed {args.seed}"}
        args.writer.write(a, attrs)
    if rank != 0:
        return 0
    predicted = transfer_pairs_bytes(tile_map, args.n, args.nb, cache=cache)
    storage = node_load(tile_map, nt, tile_bytes=tile_bytes(args.n, args.nb))["bytes"]
    match = bool(np.array_equal(measured, predicted))
    doc = {
        "dist": tile_map.name, "map": str(tile_map), "nodes": int(tile_map.nodes),
        "n": args.n, "nb": args.nb, "nt": nt, "seed": args.seed,
        "matrix": args.input if args.input else str(spec),
        "input": input_info and {"file": args.input, **input_info},
        "output": args.output,
        "cache": cache,
        "time_s": fac.time_s, "submit_s": fac.submit_s, "tasks": fac.tasks,
        "gflops": fac.gflops(args.n), "residual": res,
        "bytes_measured_pairs": measured, "bytes_predicted_pairs": predicted,
        "bytes_measured_total": int(measured.sum()),
        "bytes_predicted_total": int(predicted.sum()), "match": match,
        "slices": int(tile_map.slices),
        "memory": {"tile_bytes_per_node": storage,
                   "tile_bytes_max": int(storage.max()),
                   "peak_rss_bytes_per_rank": peak_rss,
                   "note": "tile_bytes: model (every slice's copies held at once); "
                           "peak_rss: the process's peak resident memory (getrusage), "
                           "StarPU 1.3 has no cheap peak of its own allocations"},
        "runtime": {"scheduler": info["scheduler"],
                    "workers_per_rank": info["workers_per_rank"],
                    "gpus_per_rank": info.get("gpus_per_rank", 0),
                    "starpu_version": info["starpu_version"],
                    **({"heteroprio": info["heteroprio"]} if info.get("heteroprio") else {})},
        "kernels": _kernel_table(kernels),
        "kernels_per_rank": kernels,
        "device_bytes_per_rank": device_bytes,
        "device_bytes": {k: int(sum(d[k] for d in device_bytes)) for k in device_bytes[0]},
    }
    if trace is not None:
        doc["trace"] = {"dir": os.path.abspath(args.trace), "kernels": trace["kernels"],
                        "span_ms": trace["span_ms"], "comms": len(trace["comms"]),
                        "comm_bytes": trace["comm_bytes"]}
    if full is not None:
        np.save(args.gather, full)
    print(summary(doc))
    if args.output:
        print(f"  factor L written to {args.output}")
    if args.json:
        write_atomic(args.json, dumps(doc) + "\n")
    if trace is not None:  # the trace folder is a complete record for `starchol report DIR`
        write_atomic(os.path.join(args.trace, "run.json"), dumps(doc) + "\n")
    return 0


def summary(doc):
    res = "not checked (add --check)" if doc["residual"] is None else f"{doc['residual']:.3e}"
    return "\n".join([
        f"starchol run: {doc['map']}, {doc['nodes']} rank(s), "
        f"{doc['runtime']['workers_per_rank']} worker(s)/rank, scheduler "
        f"{doc['runtime']['scheduler']}, StarPU {doc['runtime']['starpu_version']}",
        f"  N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']}, matrix {doc['matrix']}, "
        f"seed {doc['seed']}",
        f"  time {doc['time_s']:.3f} s (submission {doc['submit_s']:.3f} s, "
        f"{doc['tasks']} tasks), {doc['gflops']:.2f} GFlop/s",
        f"  residual ||A - L L^T||_F / ||A||_F = {res}",
        f"  bytes sent between ranks (cache {'on' if doc['cache'] else 'off'}): measured "
        f"{doc['bytes_measured_total']}, predicted {doc['bytes_predicted_total']}, "
        f"per-pair match: {'yes' if doc['match'] else 'NO'}",
        *_memory_lines(doc),
        *_kernel_lines(doc),
    ])


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
    line = (f"  memory: tile storage per node (model, {doc.get('slices', 1)} "
            f"slice(s)) max {mem['tile_bytes_max'] / 2**20:.2f} MiB")
    if rss:
        line += f"; peak RSS per rank max {max(rss) / 2**20:.1f} MiB"
    return [line]
