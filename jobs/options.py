"""Command-line options shared by several subcommands: the map, the matrix size, the
receive cache; validators shared with ``starchol slurm``."""
import argparse
import math

from ..distributions import MAP_NAMES, MAPS_25D, candidate_maps, get_map
from ..distributions.base import DEFAULT_SLICE_BLOCK, MAP_PARAMS
from ..errors import UsageError
from ..integers import check_int, int_type
from ..linalg.layout import DTYPES
from ..model.operations import BYTES_PER_ENTRY

DEFAULT_NB = 500
#: ``--dtype`` choices: the precisions with kernels
DTYPE_NAMES = tuple(d.name for d in DTYPES)


#: ``--dtype mixed``: a float32 factorization refined to float64 answers
#: (:func:`starchol.linalg.mixed.solve_mixed`), in the commands that offer it
MIXED = "mixed"


def add_dtype_arg(parser, help_text, default="float64", mixed=False):
    """``--dtype float64|float32`` (:data:`DTYPE_NAMES`), and ``mixed`` when ``mixed``,
    with the command's own help."""
    parser.add_argument("--dtype", choices=DTYPE_NAMES + ((MIXED,) if mixed else ()),
                        default=default, help=help_text)


def is_mixed(args):
    """Whether ``--dtype mixed`` was given."""
    return getattr(args, "dtype", None) == MIXED


def itemsize_from_args(args):
    """:func:`itemsize_of` the command's ``--dtype`` (float64 when it has none)."""
    return itemsize_of(getattr(args, "dtype", None))


def itemsize_of(name):
    """Bytes per entry of the factorization for the ``--dtype`` ``name`` (8 for None:
    not given; 4 for ``mixed``, whose factor is float32)."""
    name = name or "float64"
    return BYTES_PER_ENTRY["float32" if name == MIXED else name]



def add_nrhs_arg(parser, help_text):
    """``--nrhs K``: right-hand sides, an integer >= 1 (default None: not given), with
    the command's own help; the one definition of ``run``, ``plan``, ``volume`` and
    ``simulate``'s option."""
    parser.add_argument("--nrhs", type=int_type(1), default=None, metavar="K", help=help_text)


def add_window_arg(parser, help_text):
    """``--window W``: the submission window in iterations, an integer >= 0 (default None:
    the library's rule), with the command's own help; the one definition of ``run``,
    ``bench`` and ``simulate``'s option."""
    parser.add_argument("--window", type=int_type(0), default=None, metavar="W",
                        help=help_text)


def add_cache_arg(parser, old_spelling=False):
    """``--cache on|off`` (StarPU-MPI's receive cache; default on), the one spelling of
    every command that counts or moves bytes. ``old_spelling``: also ``--no-cache``,
    ``starchol run``'s older option, as an alias of ``--cache off``."""
    parser.add_argument("--cache", choices=("on", "off"), default="on",
                        help="StarPU-MPI receive cache: one transfer per tile version and "
                             "node (on, default) or one per task operand (off)")
    if old_spelling:   # --cache's default is then None: given or not, for the conflict
        parser.set_defaults(cache=None)
        parser.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)


def cache_from_args(args):
    """True when the receive cache is on. ``--no-cache`` with ``--cache on`` is refused
    (a :class:`UsageError`): the two contradict each other."""
    cache = getattr(args, "cache", None) or "on"
    if getattr(args, "no_cache", False):
        if getattr(args, "cache", None) == "on":
            raise UsageError("--no-cache and --cache on contradict each other; give one "
                             "(--no-cache is --cache off)")
        return False
    return cache != "off"


#: seeds are 64-bit: the generator hashes (seed, row, column) in unsigned 64-bit words
SEED_MAX = 2**64 - 1


def seed_value(text):
    """The one seed rule (``generate``, ``run``, ``bench``, ``slurm``): an integer in
    0 .. 2^64 - 1; argparse ``type=``."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: give an integer in "
                                         f"0..{SEED_MAX}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"seed {text} is out of range: give an integer in "
                                         f"0..{SEED_MAX} (64 bits)")
    return value


def add_seed_arg(parser, help_text="matrix seed (default 0)", default=0):
    """``--seed S`` under :func:`seed_value`."""
    parser.add_argument("--seed", type=seed_value, default=default, metavar="S",
                        help=help_text)


#: the help of ``--slice-block`` (``run`` and the commands of :func:`add_map_args`)
SLICE_BLOCK_HELP = (f"2.5D maps: consecutive iterations (panels) per slice, b: blocks of b "
                    f"iterations visit the slices back and forth, 0..c-1, c-1..0, ... "
                    f"(default {DEFAULT_SLICE_BLOCK}); a partial-sum transfer sits on the "
                    f"panel chain only where the slice changes")


def add_map_args(parser):
    """--dist, --nodes, --grid, --slices, --slice-block, --map-file (--nodes is optional
    for custom)."""
    g = parser.add_argument_group("map")
    g.add_argument("--dist", required=True, choices=MAP_NAMES, metavar="D",
                   help=f"tile map: {', '.join(MAP_NAMES)}")
    g.add_argument("--nodes", type=int_type(1), metavar="P",
                   help="number of nodes (MPI ranks), all slices together; required "
                        "except for custom maps (default: highest id in the file + 1)")
    g.add_argument("--grid", metavar="PxQ",
                   help="2dbc grid (one slice's grid for 2dbc25d); default: most square, P <= Q")
    g.add_argument("--slices", type=int_type(1), default=1, metavar="C",
                   help="slices c of a 2.5D map (2dbc25d, sbc25d, sym25d); default 1")
    g.add_argument("--slice-block", type=int_type(1), default=None, metavar="B",
                   help=SLICE_BLOCK_HELP)
    g.add_argument("--map-file", metavar="FILE",
                   help="custom map: Chameleon text ('M N' then M rows) or .npy int array")


def cli_message(exc, flags=None):
    """A library :class:`UsageError` with its parameters written as flags
    (``"use nodes=15 or dist=sym"`` -> ``"use --nodes 15 or --dist sym"``; ``flags``:
    the command's own names, ``{"nodes": "mpirun -np"}``); the one translation is
    :func:`starchol.cli.flag_text`."""
    from ..cli import flag_message

    return UsageError(flag_message(exc, flags))


#: the maps that take ``--grid``
GRID_MAPS = ("2dbc", "2dbc25d")


def check_map_options(dist, grid=None, slices=None, map_file=None):
    """The map options that do not fit ``--dist`` (a :class:`UsageError` naming the
    flags): a custom map without ``--map-file`` or a ``--map-file`` of another map,
    ``--grid`` of a map without a grid, ``--slices`` (None: not given) of a 2D map (its
    range is the parsers', :func:`~starchol.integers.int_type`). Local; the one home of
    these checks (``run``, ``slurm`` and the commands of :func:`add_map_args`)."""
    if dist == "custom" and not map_file:
        raise UsageError("--dist custom needs --map-file FILE")
    if map_file and dist != "custom":
        raise UsageError(f"--map-file applies to --dist custom, not {dist}")
    if grid and dist not in GRID_MAPS:
        raise UsageError(f"--grid applies to 2dbc and 2dbc25d only, not {dist}")
    if slices is not None and dist not in MAPS_25D:
        raise UsageError(f"--slices applies to the 2.5D maps ({', '.join(MAPS_25D)}), "
                         f"not {dist}")


def build_map(name, nodes=None, flags=None, context=None, **kwargs):
    """:func:`starchol.distributions.get_map` with its errors in command-line terms.

    ``flags``: the command's own names of parameters that are not ``--name`` flags
    (:func:`starchol.cli.flag_text`); ``context``: a sentence added to a message, in
    parentheses."""
    try:
        return get_map(name, nodes, **kwargs)
    except UsageError as exc:
        error = cli_message(exc, flags)
        raise (UsageError(f"{error} ({context})") if context else error) from None


def candidates_for(nodes, nt=None):
    """:func:`starchol.distributions.candidate_maps` (P nodes or fewer) in command-line terms."""
    try:
        return candidate_maps(nodes, nt=nt)
    except UsageError as exc:
        raise cli_message(exc) from None


def map_argv(params, nodes=True):
    """The command-line words of a map: ``params`` is :meth:`TileMap.params` (a run
    document's ``map_params``, a plan row's fields), and the words are
    ``--dist D [--nodes P] [--grid PxQ] [--slices C] [--slice-block B] [--map-file F]``,
    which :func:`map_params_from_args` reads back into the same parameters (the map's
    ``nt`` is the matrix's size, given by the size options). ``nodes``: False for
    ``starchol run``, whose node count is mpirun's. ``--slices`` and ``--slice-block``
    only for a 2.5D map, ``--slice-block`` only when not the default. The one
    conversion from map parameters to flags (``plan``'s commands, ``slurm``'s run line);
    tested on every map of the catalogue."""
    from ..cli import flag_of

    words = []
    for key in MAP_PARAMS:
        value = params.get(key)
        if value is None or key == "nt" or (key == "nodes" and not nodes) or (
                key in ("slices", "slice_block") and params["dist"] not in MAPS_25D) or (
                key == "slice_block" and value == DEFAULT_SLICE_BLOCK):
            continue
        words += [flag_of(key), str(value)]
    return words


def map_params_from_args(args, nt=None):
    """:func:`~starchol.distributions.get_map`'s parameters from parsed map options
    (:func:`add_map_args`; the inverse of :func:`map_argv`). ``nt``: the matrix's tile
    rows, which the ``sym`` maps need (default ``args.nt``)."""
    return {"dist": args.dist, "nodes": getattr(args, "nodes", None), "grid": args.grid,
            "slices": args.slices, "slice_block": getattr(args, "slice_block", None),
            "path": args.map_file, "nt": getattr(args, "nt", None) if nt is None else nt}


def map_from_args(args, nt=None):
    """Build the map the options describe (UsageError with a fix-it message if wrong).

    ``nt``: the matrix's tile rows, which the ``sym`` maps need (default ``args.nt``).
    """
    check_map_options(args.dist, map_file=args.map_file)
    params = map_params_from_args(args, nt)
    return build_map(params.pop("dist"), params.pop("nodes"), **params)


def add_size_args(parser, nt_help="number of tile rows/columns NT"):
    """--nt NT, or --n N --nb NB."""
    g = parser.add_argument_group("matrix size (give --nt, or --n and --nb)")
    g.add_argument("--nt", type=int_type(1), metavar="NT", help=nt_help)
    g.add_argument("--n", type=int_type(1), metavar="N", help="matrix order N (elements)")
    g.add_argument("--nb", type=int_type(1), metavar="NB",
                   help=f"tile size NB (elements); default {DEFAULT_NB} with --nt")


def sizes_from_args(args):
    """:func:`matrix_sizes` of ``--nt``, ``--n`` and ``--nb``."""
    return matrix_sizes(nt=args.nt, n=args.n, nb=args.nb)


def matrix_sizes(nt=None, n=None, nb=None):
    """Return (nt, n, nb): NT tiles of NB elements for a matrix of order N (elements).

    With NT only, NB defaults to 500 and N = NT * NB. With N and NB,
    NT = ceil(N / NB) (the last tile is smaller when NB does not divide N). Messages name
    the flags ``--nt``, ``--n`` and ``--nb``.
    """
    if nt is not None:
        if n is not None:
            raise UsageError("give either --nt NT or --n N --nb NB, not both")
        nt = check_int(nt, "--nt", 1, param=None)
        nb = check_int(DEFAULT_NB if nb is None else nb, "--nb", 1, param=None)
        return nt, nt * nb, nb
    if n is None or nb is None:
        raise UsageError("give the matrix size: --nt NT, or --n N and --nb NB")
    n = check_int(n, "--n", 1, param=None)
    nb = check_int(nb, "--nb", 1, param=None)
    if nb > n:
        raise UsageError(f"--nb {nb} is larger than --n {n}; use --nb <= {n}")
    return math.ceil(n / nb), n, nb


# -- validators shared with `starchol slurm` (its parser calls them) ----------------------
#: Slurm's longest time limit we accept: one year (Slurm itself caps it lower, per site)
MAX_TIME_S = 365 * 24 * 3600
#: the most map nodes (MPI ranks) any cluster job can have; beyond it the map tables
#: alone would not fit
MAX_NODES = 1_000_000
#: StarPU 1.3's scheduling policies, for checks that cannot load StarPU
STARPU_SCHEDULERS = ("eager", "prio", "random", "ws", "lws", "dm", "dmda", "dmdap",
                     "dmdar", "dmdas", "dmdasd", "heft", "pheft", "peager", "graph_test",
                     "modular-eager", "modular-eager-prefetching", "modular-prio",
                     "modular-prio-prefetching", "modular-random", "modular-random-prio",
                     "modular-random-prefetching", "modular-random-prio-prefetching",
                     "modular-ws", "modular-heft", "modular-heft-prio", "modular-heft2",
                     "modular-heteroprio", "modular-heteroprio-heft", "modular-parallel-heft",
                     "modular-gemm", "heteroprio", "parallel_eager", "eager-prefetching")


def check_time_limit(seconds, text=None, limit=MAX_TIME_S):
    """Refuse a time limit above ``limit`` seconds (default one year)."""
    if seconds > limit:
        raise UsageError(f"--time {text or seconds}: longer than {limit // 86400} days; "
                         f"give a real limit such as 02:00:00 or 1-00:00:00")
    return seconds


def check_node_count(nodes, flag="--nodes", limit=MAX_NODES):
    """Refuse a node count that is not an integer in 1..``limit``."""
    return check_int(nodes, flag, 1, limit, param=None)


def check_scheduler_name(name, flag="--sched"):
    """Refuse a name that is not a StarPU scheduling policy: the installed StarPU's list
    when it loads, else StarPU 1.3's (:data:`STARPU_SCHEDULERS`)."""
    try:
        from ..runtime.backend import available_schedulers

        names = available_schedulers()
    except Exception:  # noqa: BLE001 - no StarPU here (a login node): the known list
        names = list(STARPU_SCHEDULERS)
    if name not in names:
        raise UsageError(f"{flag} {name!r} is not a StarPU scheduler; known: "
                         f"{', '.join(names)}")
    return name


def check_input_order(given, n):
    """``--n``, when given (not None), must be the order of the ``--input`` matrix,
    ``n`` x ``n``."""
    if given is not None and given != n:
        raise UsageError(f"--n {given} does not match the input matrix, which is {n} x "
                         f"{n}; drop --n")


def check_positive_finite(value, flag):
    """Refuse NaN, infinities, zero and negative numbers."""
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be a positive finite number, got {value}")
    return value

