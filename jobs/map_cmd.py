"""``starchol map``: show, save or export a tile map."""
import logging

import numpy as np

from ..distributions import chameleon_pattern, write_chameleon_text
from ..model.load import node_load
from ..errors import UsageError
from .options import add_map_args, map_from_args
from ..files import check_distinct
from ..integers import int_type
from .output import add_json_arg, check_command_outputs, emit, json_file
from .preflight import check_table_memory

log = logging.getLogger("starchol.map")

#: the text view prints tile owners up to this NT
TEXT_MAX_NT = 40


def register(sub):
    p = sub.add_parser(
        "map", help="show a tile map (text, JSON, PNG, Chameleon file)",
        description="Owner node of every tile (i, j), i >= j, of an NT x NT tiled matrix.")
    add_map_args(p)
    p.add_argument("--nt", type=int_type(1), required=True, metavar="NT", help="tile rows/columns")
    add_json_arg(p, '{"dist", "nodes", "slices", "nt", "owner", "map"} (owner: slices x '
                    'NT x NT global node ids, symmetric: (i, j) and (j, i) are one tile; map: the '
                    'description)')
    p.add_argument("--png", metavar="FILE", help="draw the map (one colour per node)")
    p.add_argument("--chameleon", metavar="FILE",
                   help="write the map file that Chameleon's --custom option reads: the "
                        "map's period, valid for any NT (2dbc, sbc, sbc-basic, custom), or "
                        "for pplane, aplane and sym, whose owners depend on NT, the period "
                        "of the owners at this --nt")
    p.set_defaults(func=run, one_process=True)


def run(args):
    tile_map = map_from_args(args)
    check_table_memory(args.nt, tile_map.slices)
    outputs = [("--png", args.png), ("--chameleon", args.chameleon)]
    check_command_outputs(args, outputs)             # the one output check
    check_distinct([*outputs, ("--json", json_file(args, outputs))])
    log.info("owners of %s, NT = %d", tile_map, args.nt)
    owners = tile_map.owner_maps(args.nt)
    if args.chameleon:
        chameleon = write_chameleon(tile_map, args.nt, args.chameleon)
    if args.png:
        from ..distributions.picture import draw_map

        draw_map(tile_map, args.nt, args.png)
    text = [text_view(tile_map, owners)]
    if args.png:
        text.append(f"picture written to {args.png}")
    if args.chameleon:
        text.append(f"Chameleon map written to {args.chameleon}: {chameleon}")
    emit(args, {"dist": tile_map.name, "nodes": tile_map.nodes, "slices": tile_map.slices,
                   "nt": args.nt, "owner": owners, "map": str(tile_map)}, "\n".join(text))
    return 0


def write_chameleon(tile_map, nt, path):
    """Write the Chameleon map file (:func:`starchol.distributions.chameleon_pattern`);
    return a phrase saying what it holds."""
    try:
        pattern, every_nt = chameleon_pattern(tile_map, nt)
    except UsageError:
        raise UsageError("Chameleon has no 2.5D maps; --chameleon needs a 2D map "
                         "(2dbc, sbc, sbc-basic, pplane, aplane, sym, custom)") from None
    write_chameleon_text(path, pattern)
    m, n = pattern.shape
    if every_nt:
        return f"the map's {m} x {n} period (any NT)"
    return (f"a {m} x {n} pattern, the period of its owners at NT = {nt} only (the map is "
            f"aligned to the last tile row: write the file again for another NT)")


def text_view(tile_map, owners):
    """The lower triangle of owners (small NT) and the load per node."""
    c, nt, _ = owners.shape
    lines = [f"{tile_map}, NT = {nt}"]
    if nt <= TEXT_MAX_NT:
        width = len(str(tile_map.nodes - 1))
        for s in range(c):
            if c > 1:
                lines.append(f"slice {s}:")
            for i in range(nt):
                lines.append(" ".join(f"{v:>{width}}" for v in owners[s, i, :i + 1]))
    load = node_load(tile_map, nt)
    lines.append(f"tiles per node: {int(np.min(load['tiles']))}..{int(np.max(load['tiles']))}; "
                 f"flops max/avg {load['flops_max_over_avg']:.3f}")
    return "\n".join(lines)
