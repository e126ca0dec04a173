"""``starchol map``: show, save or export a tile map."""
import logging

import numpy as np

from ..distributions import chameleon_pattern, write_chameleon_text
from ..model.load import node_load
from ..errors import UsageError
from .options import map_from_args
from ..files import check_distinct
from .output import check_command_outputs, emit, json_file
from .preflight import check_table_memory
from .map_args import register as register_parser

log = logging.getLogger("starchol.map")

#: the text view prints tile owners up to this NT
TEXT_MAX_NT = 40


def register(sub):
    """Add ``starchol map``'s parser (:mod:`.map_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


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
