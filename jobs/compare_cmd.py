"""``starchol compare``: every map that fits P nodes or fewer, by predicted bytes."""
import logging
import time

from ..distributions.base import nodes_text
from ..model.volume_summary import volume_summary
from ..units import format_bytes
from .options import candidates_for, itemsize_from_args, sizes_from_args
from .preflight import check_model_memory
from .output import emit, json_file
from .progress import Progress
from .compare_args import register as register_parser

log = logging.getLogger("starchol.compare")


def register(sub):
    """Add ``starchol compare``'s parser (:mod:`.compare_args`) to the subparsers
    ``sub``."""
    return register_parser(sub, run)


def run(args):
    nt, n, nb = sizes_from_args(args)
    if args.nodes > 0:
        check_model_memory(args.nodes)      # arithmetic, before any map is built
    maps = candidates_for(args.nodes, nt=nt)
    json_file(args)
    log.info("counting the transfers of %d maps for up to %s, N = %d, NB = %d, NT = %d, "
             "cache %s", len(maps), nodes_text(args.nodes), n, nb, nt, args.cache)
    t0 = time.perf_counter()
    progress = Progress("comparing maps", unit="maps", enabled=False if args.quiet else None)
    rows = []
    for k, tile_map in enumerate(maps):
        doc = volume_summary(tile_map, nt, nb, n=n, cache=args.cache == "on", with_pairs=False,
                             itemsize=itemsize_from_args(args))
        lead = doc["leading_term_tiles"]
        rows.append({
            "map": str(tile_map), **tile_map.summary(),
            "transfers_tiles": doc["transfers_tiles"], "bytes": doc["bytes"],
            "ratio": doc["ratio"],
            "leading_term_tiles": lead,
            "leading_ratio": None if lead is None else lead / doc["stored_tiles"],
            "flops_max_over_avg": doc["load"]["flops_max_over_avg"],
            "tiles_per_node_max": int(max(doc["load"]["tiles"])),
        })
        log.debug("%s: %d transfers", tile_map, doc["transfers_tiles"])
        progress(k + 1, len(maps))
    log.info("counted in %.2f s", time.perf_counter() - t0)
    rows.sort(key=lambda row: (row["bytes"], row["nodes"]))
    doc = {"nodes": args.nodes, "nt": nt, "n": n, "nb": nb, "dtype": args.dtype,
           "cache": args.cache == "on", "rows": rows}
    emit(args, doc, text_table(doc))
    return 0


def text_table(doc):
    """The human table of the ``compare`` document."""
    lines = [f"maps for up to {nodes_text(doc['nodes'])}, N = {doc['n']}, NB = {doc['nb']}, "
             f"NT = {doc['nt']}, {doc.get('dtype', 'float64')}, cache "
             f"{'on' if doc['cache'] else 'off'}; sorted by "
             f"predicted bytes"]
    head = (f"{'map':<52} {'nodes':>5} {'transfers':>12} {'bytes':>12} {'D/S':>7} "
            f"{'lead/S':>7} {'flops max/avg':>13}")
    lines += [head, "-" * len(head)]
    for row in doc["rows"]:
        lead = "-" if row["leading_ratio"] is None else f"{row['leading_ratio']:.2f}"
        lines.append(f"{row['map']:<52} {row['nodes']:>5} {row['transfers_tiles']:>12} "
                     f"{format_bytes(row['bytes']):>12} {row['ratio']:>7.3f} {lead:>7} "
                     f"{row['flops_max_over_avg']:>13.3f}")
    return "\n".join(lines)
