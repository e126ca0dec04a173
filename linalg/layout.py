"""Where a distributed matrix's tiles live and what it may hold: the owners and stored
tiles of each kind under a map (:func:`layout`), the dtypes with kernels, one node per
rank, a root rank; the checks raise :class:`UsageError` naming the parameter."""
import operator

import numpy as np

from ..distributions.base import TileMap, nodes_text
from ..errors import UsageError
from ..model.operations import BYTES_PER_ENTRY
from ..model.volume import factor_owners, tile_extents

#: dtypes with kernels
DTYPES = tuple(np.dtype(name) for name in BYTES_PER_ENTRY)
KINDS = ("symmetric", "rhs")


def check_dtype(dtype):
    """The native numpy dtype, if it is float64 or float32 of either byte order; else
    UsageError naming ``dtype``."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and dt.kind == "f":
        dt = dt.newbyteorder("=")          # big-endian data is converted, not refused
    if dt is None or dt not in DTYPES:     # (numpy's dtype == None is True for float64)
        raise UsageError(f"dtype must be float64 or float32, got "
                         f"{dt if dt is not None else repr(dtype)}: the kernels "
                         f"have these two precisions and starchol converts no other "
                         f"type (convert the data, e.g. with .astype(numpy.float64))",
                         param="dtype")
    return dt


def layout(tile_map, n, nb, kind="symmetric", ncols=None):
    """Owners (int64 (NT, KT)) and stored mask (bool (NT, KT)) of a matrix under a map.

    See the module docstring for the rules; KT = NT for ``symmetric``, ceil(K / NB)
    for ``rhs``.
    """
    nt = len(tile_extents(n, nb))
    f = factor_owners(tile_map, nt)
    if kind == "symmetric":
        return f, np.tril(np.ones((nt, nt), dtype=bool))
    kt = len(tile_extents(ncols, nb))
    return (np.ascontiguousarray(np.repeat(np.diag(f)[:, None], kt, axis=1)),
            np.ones((nt, kt), dtype=bool))


def check_map(tile_map, nranks):
    """UsageError unless ``tile_map`` is a map with one node per MPI rank."""
    if not isinstance(tile_map, TileMap):
        raise UsageError(f"tile_map must be a starchol.distributions map, got "
                         f"{type(tile_map).__name__}", param="tile_map")
    if tile_map.nodes != nranks:
        raise UsageError(f"tile_map {tile_map} has {nodes_text(tile_map.nodes)} but the "
                         f"communicator has {nranks} rank(s); a map needs one MPI rank "
                         f"per node", param="tile_map")


def check_root(root, comm):
    """``root`` as an int, if it is a rank of ``comm``; else UsageError naming ``root``."""
    size = comm.Get_size()
    try:
        if isinstance(root, bool):
            raise TypeError
        r = operator.index(root)
    except TypeError:
        raise UsageError(f"root must be an integer rank, got {root!r}", param="root") from None
    if not 0 <= r < size:
        raise UsageError(f"root must be a rank of the communicator, 0 to {size - 1}, "
                         f"got {r}", param="root")
    return r


def map_error(tile_map, comm):
    """The UsageError of :func:`check_map` for ``comm``'s size, or None. Local."""
    try:
        check_map(tile_map, comm.Get_size())
    except UsageError as exc:
        return exc
    return None


def plain_int(value):
    """An int as an int (so numpy and Python integers compare alike), else its repr."""
    try:
        return operator.index(value)
    except TypeError:
        return repr(value)
