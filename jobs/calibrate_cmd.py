"""``starchol calibrate``: measure this machine's tile kernels and write a node
description for ``starchol simulate --node FILE``."""
import json
import logging

from ..errors import UsageError
from ..files import check_output, write_atomic
from ..linalg.calibrate import calibrate
from ..model.platform import node_from_dict
from ..runtime.workers import affinity_cores
from .progress import Progress
from .traced_run import runtime_calibration
from .calibrate_args import register as register_parser

log = logging.getLogger("starchol.calibrate")


def register(sub):
    """Add ``starchol calibrate``'s parser (:mod:`.calibrate_args`) to the subparsers
    ``sub``."""
    return register_parser(sub, run)


#: processes (ranks x workers) a calibration may start per core this process may use,
#: and at least this many in all: beyond, the measure says nothing of a real run
PROCESSES_PER_CORE, MIN_PROCESS_LIMIT = 8, 64


def check_calibration_size(nbs, dtype, workers, ranks, method, cores):
    """Refuse, before any process starts, a calibration that cannot fit this machine:
    more processes (``ranks`` x ``workers`` for ``--method runtime``, ``workers`` for
    fork) than :data:`PROCESSES_PER_CORE` per core (at least
    :data:`MIN_PROCESS_LIMIT`), or a calibration run whose ranks need more memory than
    is available (:func:`starchol.model.memory.node_memory` of the traced run, summed
    over its ranks). The message names the limit, the need and how to lower it."""
    from ..linalg.calibrate import runtime_n
    from ..units import format_bytes
    from .preflight import memory_available

    limit = max(MIN_PROCESS_LIMIT, PROCESSES_PER_CORE * cores)
    procs = workers * (ranks if method == "runtime" else 1)
    if procs > limit:
        what = (f"--ranks {ranks} x --workers {workers} = {procs} workers" if method ==
                "runtime" else f"--workers {workers} processes")
        raise UsageError(f"{what} on this machine's {cores} core(s): the limit is {limit} "
                         f"({PROCESSES_PER_CORE} per core, at least {MIN_PROCESS_LIMIT}); "
                         f"lower --ranks or --workers (a calibration measures the ranks "
                         f"and workers of one node of the run to simulate)")
    if method != "runtime":
        return
    from .traced_run import runtime_map_args as runtime_map
    from ..distributions import get_map
    from ..model.memory import PROCESS_BASE_BYTES, node_memory

    avail, source = memory_available()
    if avail is None:
        return
    words = runtime_map(ranks)
    slices = int(words[words.index("--slices") + 1]) if "--slices" in words else 1
    for nb in nbs:
        n = runtime_n(nb)
        nt = -(-n // nb)
        itemsize = 4 if dtype == "float32" else 8
        need = n * n * itemsize // 2 + ranks * PROCESS_BASE_BYTES   # arithmetic first
        if need <= avail:
            m = get_map(words[1], ranks, nt=nt, **({"slices": slices} if slices > 1 else {}))
            need = int(node_memory(m, n, nb, itemsize=itemsize, exact=False)["total"].sum())
        if need > avail:
            raise UsageError(f"--nb {nb}: the calibration run (N = {n}, {ranks} rank(s)) "
                             f"needs about {format_bytes(need)} of memory but "
                             f"{format_bytes(avail)} is available ({source}); use a "
                             f"smaller --nb or fewer --ranks")


def run(args):
    workers = args.workers if args.workers is not None else len(affinity_cores())
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    if args.method == "fork" and args.ranks != 1:
        raise UsageError("--ranks applies to --method runtime only")
    if args.method == "runtime":
        from ..runtime.traces import check_supported
        check_supported(".")                  # a StarPU with FxT, or a clear error
    check_output(args.output, "--output", args.overwrite)
    check_calibration_size(sorted(set(args.nb)), "float32" if args.dtype == ["float32"]
                           else "float64", workers, args.ranks, args.method,
                           len(affinity_cores()))
    extra = {k: getattr(args, k) for k in ("bandwidth", "latency") if getattr(args, k)}
    node_from_dict({"workers": 1, "gflops": {"float64": dict.fromkeys(
        ("potrf", "trsm", "syrk", "gemm", "add"), 1.0)}, **extra}, "calibrate")  # check
    nbs = sorted(set(args.nb))
    if args.method == "runtime":
        progress = None if args.quiet else Progress("calibrating", unit="runs", enabled=True)
        doc = runtime_calibration(nbs, args.dtype, workers, args.ranks, progress)
    else:
        progress = None if args.quiet else Progress("calibrating", unit="kernels",
                                                    enabled=True)
        doc = calibrate(nbs, args.dtype, workers, args.repeats, progress)
    doc.update(extra)
    node_from_dict(doc)                       # what simulate will read
    write_atomic(args.output, json.dumps(doc, indent=1) + "\n")
    for dtype, per_nb in doc["gflops_by_nb"].items():
        for nb, speeds in per_nb.items():
            print(f"{dtype} NB = {nb}: " + ", ".join(f"{k} {v:.2f}" for k, v in speeds.items())
                  + f" GFlop/s per worker ({workers} workers x {args.ranks} rank(s), "
                  f"{args.method})")
    print(f"wrote {args.output}")
    return 0
