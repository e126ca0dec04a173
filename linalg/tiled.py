"""Sizes of a tiled matrix: the checks of N and NB, and the tile extents.

All tiles are NB x NB except the last tile row/column when N is not a multiple of NB.
The distributed matrix itself is :class:`starchol.linalg.distributed.DistributedMatrix`.
"""
from ..errors import UsageError
from ..integers import exact_int
from ..model.volume import tile_extents


def check_sizes(n, nb):
    """Raise :class:`UsageError` unless 0 < nb <= n (integers). Returns ``(n, nb)``."""
    try:
        n, nb = exact_int(n), exact_int(nb)
    except (TypeError, ValueError):
        raise UsageError(f"n and nb must be integers, got {n!r}, {nb!r}",
                         params=("n", "nb")) from None
    if n <= 0:
        raise UsageError(f"n must be positive, got {n}", param="n")
    if nb <= 0:
        raise UsageError(f"nb must be positive, got {nb}", param="nb")
    if nb > n:
        raise UsageError(f"nb {nb} is larger than n {n}; use a tile size nb <= n "
                         f"(e.g. nb {max(1, min(n, 512))})", params=("n", "nb"))
    return n, nb


def check_shape(shape, kind="symmetric"):
    """``(n, ncols)`` of a matrix of ``kind``: ``shape`` must be a pair of integers,
    square for ``symmetric``, with at least one column for ``rhs`` (a vector of right-hand
    sides is ``(n, 1)``). Raises :class:`UsageError` naming ``shape`` otherwise; ``n``
    itself is checked by :func:`check_sizes`."""
    try:
        if isinstance(shape, (str, bytes)) or len(shape) != 2:
            raise TypeError(shape)
        n, ncols = exact_int(shape[0]), exact_int(shape[1])
    except (TypeError, ValueError):
        raise UsageError(f"shape must be a pair of integers (n, n) for a symmetric matrix, "
                         f"(n, k) for right-hand sides, got {shape!r}",
                         param="shape") from None
    if kind == "symmetric" and n != ncols:
        raise UsageError(f"a symmetric matrix is square, got shape {(n, ncols)}",
                         param="shape")
    if kind != "symmetric" and ncols < 1:
        raise UsageError(f"the right-hand sides need at least one column, got {ncols}",
                         param="shape")
    return n, ncols


def tile_sizes(n, nb):
    """Rows of each of the NT = ceil(N/NB) tile rows (int64 array)."""
    return tile_extents(n, nb)
