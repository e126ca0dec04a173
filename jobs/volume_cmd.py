"""``starchol volume``: predicted inter-node traffic of a map, without running it."""
import logging
import time

from ..errors import UsageError
from ..model.volume_summary import mixed_summary, solve_summary, volume_summary
from ..units import format_bytes
from .options import is_mixed, itemsize_from_args, map_from_args, sizes_from_args
from .output import emit, json_file
from .preflight import check_model_memory, check_table_memory
from .progress import Progress
from .volume_args import DEFAULT_ITERATIONS
from .volume_args import register as register_parser

log = logging.getLogger("starchol.volume")

#: show progress from this many tile rows on
PROGRESS_MIN_NT = 400


def register(sub):
    """Add ``starchol volume``'s parser (:mod:`.volume_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


def run(args):
    nt, n, nb = sizes_from_args(args)
    mixed = is_mixed(args)
    if mixed and args.nrhs is None:
        raise UsageError("--dtype mixed counts a solve refined to float64: give --nrhs K "
                         "(right-hand sides)")
    if not mixed and (args.iterations is not None or args.fallback is not None):
        raise UsageError("--iterations and --fallback count a mixed-precision solve: "
                         "give --dtype mixed")
    if args.variant is not None and args.nrhs is None:
        raise UsageError("--variant chooses the graph of a solve: give --nrhs K "
                         "(right-hand sides)")
    if args.nodes is not None and args.nodes > 0:
        check_model_memory(args.nodes)      # arithmetic, before any map is built
    tile_map = map_from_args(args, nt=nt)
    check_table_memory(nt, tile_map.slices)
    json_file(args)
    log.info("counting the transfers of %s, N = %d, NB = %d, NT = %d, cache %s",
             tile_map, n, nb, nt, args.cache)
    progress = None
    if nt >= PROGRESS_MIN_NT and not args.quiet:
        progress = Progress("counting transfers", unit="tile rows")
    t0 = time.perf_counter()
    doc = volume_summary(tile_map, nt, nb, n=n, cache=args.cache == "on", progress=progress,
                         itemsize=itemsize_from_args(args))
    doc["dtype"] = args.dtype
    if args.nrhs and mixed:
        it = DEFAULT_ITERATIONS if args.iterations is None else args.iterations
        doc["mixed"] = mixed_summary(tile_map, n, nb, args.nrhs, it, args.fallback,
                                     cache=args.cache == "on",
                                     variant=args.variant or "auto")
    elif args.nrhs:
        doc["solve"] = solve_summary(tile_map, n, nb, args.nrhs, cache=args.cache == "on",
                                     itemsize=itemsize_from_args(args),
                                     variant=args.variant or "auto")
    log.info("counted %d transfers in %.2f s", doc["transfers_tiles"],
             time.perf_counter() - t0)
    emit(args, doc, text_report(doc))
    return 0


def text_report(doc):
    """The human summary of :func:`volume_summary`'s document."""
    lead = doc["leading_term_tiles"]
    lines = [
        f"map:        {doc['map']}",
        f"matrix:     N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']}, "
        f"{doc.get('dtype', 'float64')} ({doc['stored_tiles']} stored tiles S)",
        f"cache:      {'on' if doc['cache'] else 'off'}",
        f"transfers:  {doc['transfers_tiles']} tiles = {format_bytes(doc['bytes'])} "
        f"({doc['transfers_tiles'] / doc['stored_tiles']:.4f} x S)",
    ]
    if lead is not None:
        lines.append(f"leading:    {lead:.0f} tiles ({lead / doc['stored_tiles']:.4f} x S)")
    elif not doc["cache"]:
        lines.append("leading:    - (the leading terms hold with the cache on)")
    sent = doc["per_node"]["sent_tiles"]
    recv = doc["per_node"]["received_tiles"]
    lines += [
        f"per node:   sent {min(sent)}..{max(sent)} tiles, received {min(recv)}..{max(recv)} tiles",
        f"load:       tiles {min(doc['load']['tiles'])}..{max(doc['load']['tiles'])}, "
        f"flops max/avg {doc['load']['flops_max_over_avg']:.3f}",
    ]
    solve = doc.get("solve")
    if solve:
        lines.append(f"solve:      K = {solve['nrhs']}, variant {solve['variant']}: "
                     f"{format_bytes(solve['bytes'])} "
                     f"(forward pass alone {format_bytes(solve['bytes_forward'])}, backward "
                     f"alone {format_bytes(solve['bytes_backward'])})")
        v = solve["variants"]
        lines.append(f"            (rhs: L in place, {format_bytes(v['rhs']['bytes'])}, "
                     f"busiest link {format_bytes(v['rhs']['busiest_link_bytes'])}; "
                     f"factor: L's tiles move, {format_bytes(v['factor']['bytes'])}, "
                     f"busiest link {format_bytes(v['factor']['busiest_link_bytes'])})")
    mixed = doc.get("mixed")
    if mixed:
        ph, k = mixed["phases"], mixed["iterations"] + 1
        lines.append(f"mixed:      K = {mixed['nrhs']}, I = {mixed['iterations']} "
                     f"refinement iteration(s): {format_bytes(mixed['bytes'])} in all, "
                     f"{mixed['ratio_to_float64']:.3f} x float64's factorization + solve "
                     f"({format_bytes(mixed['bytes_float64'])})")
        var = mixed["variants"]
        lines.append(f"            float32 factorization {format_bytes(ph['factor32'])} "
                     f"(float64's halved); float32 solves {format_bytes(ph['solve32'])} "
                     f"(variant {var['solve32']}); float64 residuals B - A X "
                     f"{format_bytes(ph['residual64'])} (variant {var['residual64']})")
        if mixed["fallback"] is not None:
            lines.append(f"            fallback ({mixed['fallback']}): float64 "
                         f"factorization {format_bytes(ph['factor64'])}, solve "
                         f"{format_bytes(ph['solve64'])}, one more residual")
        elif k:
            lines.append(f"            ({k} float32 solve(s) and {k} residual(s): the first "
                         f"solve and each iteration's, each checked)")
    return "\n".join(lines)
