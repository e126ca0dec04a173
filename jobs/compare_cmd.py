"""``starchol compare``: every map that fits P nodes or fewer, by predicted bytes."""
import logging
import time

from ..distributions.base import nodes_text
from ..model.volume_summary import volume_summary
from ..units import format_bytes
from ..integers import int_type
from .options import (add_cache_arg, add_dtype_arg, add_size_args, candidates_for,
                      itemsize_from_args, sizes_from_args)
from .volume_cmd import BYTES_DTYPE_HELP
from .preflight import check_model_memory
from .output import add_json_arg, emit, json_file
from .progress import Progress

log = logging.getLogger("starchol.compare")


def register(sub):
    p = sub.add_parser(
        "compare", help="compare the predicted traffic of every map that fits P nodes",
        description="One table of the maps that fit P nodes or fewer: every 2dbc grid of P, "
                    "the largest sbc, sbc-basic, pplane and aplane, sym on P, and the 2.5D "
                    "maps (2dbc25d and sym25d for the slice counts that divide P, sbc25d for "
                    "every slice count with the largest SBC slice that fits; at most NT "
                    "slices, since a slice beyond NT would run nothing), sorted by "
                    "predicted bytes.")
    p.add_argument("--nodes", type=int_type(1), required=True, metavar="P", help="nodes available")
    add_size_args(p)
    add_cache_arg(p)
    add_dtype_arg(p, BYTES_DTYPE_HELP)
    add_json_arg(p, "the table as a JSON document (keys: docs/volume-model.md, "
                    "\"starchol compare --json\")")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run, one_process=True)


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
