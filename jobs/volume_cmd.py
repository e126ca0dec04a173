"""``starchol volume``: predicted inter-node traffic of a map, without running it."""
import logging
import time

from ..errors import UsageError
from ..linalg.volume_summary import solve_summary, volume_summary
from ..units import format_bytes
from .options import (add_cache_arg, add_dtype_arg, add_map_args, add_size_args,
                      itemsize_from_args, map_from_args, sizes_from_args)
from .output import add_json_arg, json_file, publish
from .preflight import check_table_memory
from .progress import Progress

log = logging.getLogger("starchol.volume")

#: show progress from this many tile rows on
PROGRESS_MIN_NT = 400
#: --dtype's help in the commands that count bytes without running
BYTES_DTYPE_HELP = ("entries of 8 bytes (float64, default) or 4 (float32) in the byte "
                    "counts; tile counts do not change")


def register(sub):
    p = sub.add_parser(
        "volume", help="exact predicted communication volume of a map (no run)",
        description="Count the tiles the right-looking tiled Cholesky sends between nodes "
                    "under a map (owner-computes, StarPU-MPI receive cache on by default).")
    add_map_args(p)
    add_size_args(p)
    add_cache_arg(p)
    add_dtype_arg(p, BYTES_DTYPE_HELP)
    add_json_arg(p, "the volume document (keys: docs/volume-model.md, \"starchol volume --json\")")
    p.add_argument("--nrhs", type=int, default=None, metavar="K",
                   help="also count the solve A X = B with K right-hand sides after the "
                        "factorization (starchol run --nrhs K): its bytes, forward and "
                        "backward passes")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def run(args):
    nt, n, nb = sizes_from_args(args)
    if args.nrhs is not None and args.nrhs < 1:
        raise UsageError(f"--nrhs must be >= 1, got {args.nrhs}")
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
    if args.nrhs:
        doc["solve"] = solve_summary(tile_map, n, nb, args.nrhs, cache=args.cache == "on",
                                     itemsize=itemsize_from_args(args))
    log.info("counted %d transfers in %.2f s", doc["transfers_tiles"],
             time.perf_counter() - t0)
    publish(args, doc, text_report(doc))
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
        lines.append(f"solve:      K = {solve['nrhs']}: {format_bytes(solve['bytes'])} "
                     f"(forward pass alone {format_bytes(solve['bytes_forward'])}, backward "
                     f"alone {format_bytes(solve['bytes_backward'])})")
    return "\n".join(lines)
