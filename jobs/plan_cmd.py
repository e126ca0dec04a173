"""``starchol plan``: choose a map (2D or 2.5D, and c) for P nodes and a memory budget.

Every map that fits P nodes or fewer (the candidates of ``starchol compare``) is scored
with the exact volume model and a simple time estimate, stated with its assumptions:

    compute_s = (flops of the busiest node) / node_gflops      (NB^3 units -> flops)
    comm_s    = (bytes sent + received by the busiest node) / node_bandwidth
    estimate  = compute_s + comm_s          (no overlap: a conservative bound)

Maps whose tile storage on the busiest node exceeds ``--memory-per-node`` are listed as
not fitting. A map whose pattern (r tile rows for the symmetric maps) appears fewer than
MIN_PERIODS times in NT cannot balance its load and is picked only if nothing else fits.
The pick is the fitting, balanced map with the smallest estimate. With ample memory,
the SC22 paper's rule of thumb for 2.5D SBC is r = 2c.
"""
import logging
import time

from ..errors import UsageError
from ..distributions import node_load
from ..distributions.base import MIN_PERIODS, nodes_text
from ..linalg.volume import tile_bytes
from ..linalg.volume_summary import format_bytes, format_seconds, volume_summary
from .options import candidates_for, check_positive_finite
from .output import add_json_arg, json_file, publish
from .progress import Progress

log = logging.getLogger("starchol.plan")


def register(sub):
    p = sub.add_parser(
        "plan", help="pick a 2D or 2.5D map for P nodes and a memory budget",
        description="List the 2D and 2.5D maps that fit P nodes and the memory per node, "
                    "with predicted bytes and tile storage per node, best first, and explain "
                    "the pick.")
    p.add_argument("--nodes", type=int, required=True, metavar="P")
    p.add_argument("--n", type=int, required=True, metavar="N", help="matrix order")
    p.add_argument("--nb", type=int, required=True, metavar="NB", help="tile size")
    p.add_argument("--memory-per-node", type=float, required=True, metavar="BYTES",
                   help="memory available for tiles on each node, bytes (e.g. 64e9)")
    p.add_argument("--node-gflops", type=float, default=1000.0, metavar="GF",
                   help="sustained DGEMM GFlop/s of one node for the estimate (default 1000)")
    p.add_argument("--node-bandwidth", type=float, default=12.5e9, metavar="B/S",
                   help="network bytes/s of one node for the estimate (default 12.5e9, 100 Gb/s)")
    add_json_arg(p, "the plan as a JSON document (keys: docs/volume-model.md, "
                    "\"starchol plan --json\")")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def score_map(tile_map, n, nb, gflops, bandwidth):
    """Predicted traffic, storage and time estimate of one map (see the module doc)."""
    nt = -(-n // nb)
    doc = volume_summary(tile_map, nt, nb, n=n, with_pairs=False)
    load = node_load(tile_map, nt, tile_bytes=tile_bytes(n, nb))
    per_tile = nb * nb * 8
    node_traffic = (doc["per_node"]["sent_tiles"] + doc["per_node"]["received_tiles"]) * per_tile
    compute_s = float(load["flops"].max()) * nb ** 3 / (gflops * 1e9)
    comm_s = float(node_traffic.max()) / bandwidth
    periods = tile_map.periods(nt)
    return {
        "map": str(tile_map), **tile_map.params(),
        "pattern_size": tile_map.pattern_size(), "periods": periods,
        "balanced": periods is None or periods >= MIN_PERIODS,
        "bytes": doc["bytes"], "ratio": doc["ratio"],
        "memory_per_node_bytes": int(load["bytes"].max()),
        "busiest_node_traffic_bytes": int(node_traffic.max()),
        "flops_max_over_avg": load["flops_max_over_avg"],
        "compute_s": compute_s, "comm_s": comm_s, "estimate_s": compute_s + comm_s,
    }


def run(args):
    for name in ("nodes", "n", "nb"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.nb > args.n:
        raise UsageError(f"--nb {args.nb} is larger than --n {args.n}")
    check_positive_finite(args.memory_per_node, "--memory-per-node (bytes, e.g. 64e9)")
    check_positive_finite(args.node_gflops, "--node-gflops")
    check_positive_finite(args.node_bandwidth, "--node-bandwidth")
    maps = candidates_for(args.nodes, nt=-(-args.n // args.nb))
    json_file(args)
    log.info("scoring %d maps for up to %s, N = %d, NB = %d", len(maps),
             nodes_text(args.nodes), args.n, args.nb)
    t0 = time.perf_counter()
    progress = Progress("scoring maps", unit="maps", enabled=False if args.quiet else None)
    rows = []
    for k, tile_map in enumerate(maps):
        row = score_map(tile_map, args.n, args.nb, args.node_gflops, args.node_bandwidth)
        row["fits"] = row["memory_per_node_bytes"] <= args.memory_per_node
        rows.append(row)
        log.debug("%s: estimate %s, %s per node, fits %s", tile_map,
                  format_seconds(row["estimate_s"]), format_bytes(row["memory_per_node_bytes"]),
                  row["fits"])
        progress(k + 1, len(maps))
    log.info("scored in %.2f s; %d of %d fit the memory", time.perf_counter() - t0,
             sum(r["fits"] for r in rows), len(rows))
    rows.sort(key=lambda r: (not r["fits"], not r["balanced"], r["estimate_s"], r["bytes"]))
    fitting = [r for r in rows if r["fits"]]
    pick = fitting[0] if fitting else None
    why = explain(pick, rows, args)
    doc = {"nodes": args.nodes, "n": args.n, "nb": args.nb,
           "memory_per_node": args.memory_per_node, "node_gflops": args.node_gflops,
           "node_bandwidth": args.node_bandwidth, "rows": rows,
           "pick": pick, "explanation": why}
    publish(args, doc, text_table(doc))
    return 0 if pick else 1


def text_table(doc):
    """The human table of the ``plan`` document, and the explanation under it."""
    lines = [f"maps for up to {nodes_text(doc['nodes'])}, N = {doc['n']}, NB = {doc['nb']}, "
             f"memory {format_bytes(doc['memory_per_node'])} per node; estimate = compute + "
             f"comm with {doc['node_gflops']:g} GFlop/s and "
             f"{format_bytes(doc['node_bandwidth'])}/s per node"]
    head = (f"{'map':<56} {'nodes':>5} {'bytes':>11} {'mem/node':>10} {'fits':>4} "
            f"{'periods':>7} {'compute':>10} {'comm':>10} {'estimate':>10}")
    lines += [head, "-" * len(head)]
    for r in doc["rows"]:
        periods = "-" if r["periods"] is None else f"{r['periods']:.1f}"
        if not r["balanced"]:
            periods += "!"
        lines.append(f"{r['map']:<56} {r['nodes']:>5} {format_bytes(r['bytes']):>11} "
                     f"{format_bytes(r['memory_per_node_bytes']):>10} "
                     f"{'yes' if r['fits'] else 'no':>4} {periods:>7} "
                     f"{format_seconds(r['compute_s']):>10} {format_seconds(r['comm_s']):>10} "
                     f"{format_seconds(r['estimate_s']):>10}")
    return "\n".join(lines + ["", doc["explanation"]])


def explain(pick, rows, args):
    """One paragraph on why the pick was made (or why nothing fits)."""
    if pick is None:
        least = min(rows, key=lambda r: r["memory_per_node_bytes"])
        return (f"no map fits {format_bytes(args.memory_per_node)} per node: the smallest "
                f"need is {least['map']} with {format_bytes(least['memory_per_node_bytes'])} "
                f"per node; use more nodes or a larger --memory-per-node")
    best2d = min((r for r in rows if r["slices"] == 1 and r["dist"] == "2dbc"),
                 key=lambda r: r["bytes"], default=None)
    parts = [f"pick: {pick['map']}: fits memory ({format_bytes(pick['memory_per_node_bytes'])} "
             f"of {format_bytes(args.memory_per_node)} per node) and has the smallest "
             f"estimate ({format_seconds(pick['estimate_s'])}: "
             f"{format_seconds(pick['compute_s'])} compute on the busiest node + "
             f"{format_seconds(pick['comm_s'])} of its transfers)"]
    if best2d is not None and best2d is not pick and best2d["bytes"] > pick["bytes"]:
        parts.append(f"it moves {format_bytes(pick['bytes'])}, "
                     f"{best2d['bytes'] / pick['bytes']:.2f}x less than the best 2dbc "
                     f"({best2d['map']}, {format_bytes(best2d['bytes'])})")
    if pick["slices"] > 1:
        parts.append(f"2.5D keeps {pick['slices']} copies of the matrix, so it needs "
                     f"about {pick['slices']}x the tile storage per node of a 2D map on the same nodes; "
                     f"with ample memory the "
                     f"SC22 rule of thumb is r = 2c")
    nt = -(-args.n // args.nb)
    coarse = [r for r in rows if not r["balanced"] and r["fits"]]
    if coarse:
        worst = ", ".join(f"{r['map']} (r = {r['pattern_size']}: {r['periods']:.1f} periods, "
                          f"flops max/avg {r['flops_max_over_avg']:.2f})" for r in coarse[:3])
        parts.append(f"{len(coarse)} map(s) have a pattern too large for NT = {nt} (fewer "
                     f"than {MIN_PERIODS} periods, so the load cannot balance) and were "
                     f"ranked after the balanced ones: {worst}"
                     + (", ..." if len(coarse) > 3 else ""))
        if not pick["balanced"]:
            parts.append("no balanced map fits, so the pick is one of them")
    unfit = [r for r in rows if not r["fits"] and r["estimate_s"] < pick["estimate_s"]]
    if unfit:
        parts.append(f"{len(unfit)} map(s) with a smaller estimate do not fit in memory "
                     f"(best: {unfit[0]['map']}, needs "
                     f"{format_bytes(unfit[0]['memory_per_node_bytes'])} per node)")
    return "; ".join(parts) + "."
