"""``starchol map``'s parser: its options and their help (the command itself is
:mod:`.map_cmd`)."""
from ..integers import int_type
from .options import add_map_args
from .output import add_json_arg


def register(sub, run):
    """Add ``map``'s parser to the subparsers ``sub``; ``run`` is the function it calls."""
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
    return p
