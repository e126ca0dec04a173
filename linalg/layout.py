"""Where a distributed matrix's tiles live and what it may hold: the owners and stored
tiles of each kind under a map (:func:`layout`), the dtypes with kernels, one node per
rank, a root rank; the checks raise :class:`UsageError` naming the parameter."""
import math
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


#: default tolerance of the symmetry check: max |A - A^T| <= tol * max |A|
SYMMETRY_TOL = 1e-10


def check_symmetry_tol(symmetry_tol):
    """The tolerance of the symmetry check (:data:`SYMMETRY_TOL` for None), if it is a
    finite number >= 0; else UsageError naming ``symmetry_tol``."""
    if symmetry_tol is None:
        return SYMMETRY_TOL
    try:
        if isinstance(symmetry_tol, bool):
            raise TypeError
        tol = float(symmetry_tol)
    except (TypeError, ValueError):
        tol = None
    if tol is None or not math.isfinite(tol) or tol < 0:
        raise UsageError(f"symmetry_tol must be a finite number >= 0, got {symmetry_tol!r}",
                         param="symmetry_tol")
    return tol


def check_symmetric(a, symmetry_tol=None, name="array", block=2048):
    """Refuse a square ``a`` whose upper triangle differs from its lower one by more than
    ``symmetry_tol`` (:data:`SYMMETRY_TOL` for None): max |A - A^T| > tol * max |A|,
    the rule of ``from_hdf5``; the lower triangle alone would be factored, silently. An
    array whose strict upper triangle is all zeros is a lower triangle (what
    ``from_numpy`` documents it reads) and is accepted. Compared by blocks of ``block``
    rows, so no temporary of the array's size is made. UsageError naming ``name``."""
    tol = check_symmetry_tol(symmetry_tol)
    n = a.shape[0]
    max_abs = max_asym = max_upper = 0.0
    for r0 in range(0, n, block):
        rows = np.asarray(a[r0:r0 + block], dtype=np.float64)
        cols = np.asarray(a[:, r0:r0 + block], dtype=np.float64).T
        max_abs = max(max_abs, float(np.abs(rows).max(initial=0.0)))
        upper = np.triu(rows, r0 + 1)
        max_upper = max(max_upper, float(np.abs(upper).max(initial=0.0)))
        max_asym = max(max_asym, float(np.abs(rows - cols).max(initial=0.0)))
    if not math.isfinite(max_abs) or max_upper == 0.0:
        return  # non-finite values are the kernels' to report; a lower triangle is read
    rel = max_asym / max_abs if max_abs > 0 else 0.0
    if rel > tol:
        raise UsageError(f"{name} is not symmetric: max |A - A^T| / max |A| = {rel:.3e} > "
                         f"tolerance {tol:.1e} (only the lower triangle would be used; "
                         f"symmetrize it, pass its lower triangle alone (np.tril), or raise "
                         f"symmetry_tol)", param="symmetry_tol")
