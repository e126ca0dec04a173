"""Command-line options shared by several subcommands: the map and the matrix size."""
import math
import re

from ..distributions import MAP_NAMES, candidate_maps, get_map
from ..errors import UsageError

DEFAULT_NB = 500


def add_map_args(parser):
    """--dist, --nodes, --grid, --slices, --map-file (--nodes is optional for custom)."""
    g = parser.add_argument_group("map")
    g.add_argument("--dist", required=True, choices=MAP_NAMES, metavar="D",
                   help=f"tile map: {', '.join(MAP_NAMES)}")
    g.add_argument("--nodes", type=int, metavar="P",
                   help="number of nodes (MPI ranks), all slices together; required "
                        "except for custom maps (default: highest id in the file + 1)")
    g.add_argument("--grid", metavar="PxQ",
                   help="2dbc grid (one slice's grid for 2dbc25d); default: most square, P <= Q")
    g.add_argument("--slices", type=int, default=1, metavar="C",
                   help="slices c of a 2.5D map (2dbc25d, sbc25d, sym25d); default 1")
    g.add_argument("--map-file", metavar="FILE",
                   help="custom map: Chameleon text ('M N' then M rows) or .npy int array")


#: library parameter -> command-line flag, for :func:`cli_message`
PARAM_FLAGS = {"dist": "--dist", "nodes": "--nodes", "grid": "--grid", "slices": "--slices",
               "path": "--map-file", "nt": "--nt"}


def cli_message(exc):
    """A library :class:`UsageError` with its ``name=value`` parameters as flags.

    ``"use nodes=15 or dist=sym"`` becomes ``"use --nodes 15 or --dist sym"``.
    """
    text = re.sub(r"\b(" + "|".join(PARAM_FLAGS) + r")=(?=\S)",
                  lambda m: PARAM_FLAGS[m.group(1)] + " ", str(exc))
    text = re.sub(r"\b(" + "|".join(PARAM_FLAGS) + r")=",
                  lambda m: PARAM_FLAGS[m.group(1)], text)
    return UsageError(text)


def build_map(name, nodes=None, **kwargs):
    """:func:`starchol.distributions.get_map` with its errors in command-line terms."""
    try:
        return get_map(name, nodes, **kwargs)
    except UsageError as exc:
        raise cli_message(exc) from None


def candidates_for(nodes, nt=None):
    """:func:`starchol.distributions.candidate_maps` (P nodes or fewer) in command-line terms."""
    try:
        return candidate_maps(nodes, nt=nt)
    except UsageError as exc:
        raise cli_message(exc) from None


def map_from_args(args, nt=None):
    """Build the map the options describe (UsageError with a fix-it message if wrong).

    ``nt``: the matrix's tile rows, which the ``sym`` maps need (default ``args.nt``).
    """
    if args.dist == "custom" and not args.map_file:
        raise UsageError("--dist custom needs --map-file FILE")
    if args.map_file and args.dist != "custom":
        raise UsageError(f"--map-file applies to --dist custom, not {args.dist}")
    if nt is None:
        nt = getattr(args, "nt", None)
    return build_map(args.dist, args.nodes, grid=args.grid, slices=args.slices,
                     path=args.map_file, nt=nt)


def add_size_args(parser, nt_help="number of tile rows/columns NT"):
    """--nt NT, or --n N --nb NB."""
    g = parser.add_argument_group("matrix size (give --nt, or --n and --nb)")
    g.add_argument("--nt", type=int, metavar="NT", help=nt_help)
    g.add_argument("--n", type=int, metavar="N", help="matrix order N (elements)")
    g.add_argument("--nb", type=int, metavar="NB",
                   help=f"tile size NB (elements); default {DEFAULT_NB} with --nt")


def sizes_from_args(args):
    """Return (nt, n, nb): NT tiles of NB elements for a matrix of order N.

    With --nt only, NB defaults to 500 and N = NT * NB. With --n and --nb,
    NT = ceil(N / NB) (the last tile is smaller when NB does not divide N).
    """
    if args.nt is not None:
        if args.n is not None:
            raise UsageError("give either --nt NT or --n N --nb NB, not both")
        if args.nt < 1:
            raise UsageError(f"--nt must be >= 1, got {args.nt}")
        nb = DEFAULT_NB if args.nb is None else args.nb
        if nb < 1:
            raise UsageError(f"--nb must be >= 1, got {nb}")
        return args.nt, args.nt * nb, nb
    if args.n is None or args.nb is None:
        raise UsageError("give the matrix size: --nt NT, or --n N and --nb NB")
    if args.n < 1:
        raise UsageError(f"--n must be >= 1, got {args.n}")
    if args.nb < 1:
        raise UsageError(f"--nb must be >= 1, got {args.nb}")
    if args.nb > args.n:
        raise UsageError(f"--nb {args.nb} is larger than --n {args.n}; use --nb <= {args.n}")
    return math.ceil(args.n / args.nb), args.n, args.nb
