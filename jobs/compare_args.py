"""``starchol compare``'s parser: its options and their help (the command itself is
:mod:`.compare_cmd`)."""
from ..integers import int_type
from .options import add_cache_arg, add_dtype_arg, add_size_args
from .output import add_json_arg
from .volume_args import BYTES_DTYPE_HELP


def register(sub, run):
    """Add ``compare``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
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
    return p
