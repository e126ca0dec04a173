"""A tiled symmetric matrix distributed over MPI ranks: each rank holds its own tiles.

Tile (i, j), i >= j, covers rows offsets[i]:offsets[i+1] and columns
offsets[j]:offsets[j+1]; all tiles are NB x NB except the last tile row/column when N
is not a multiple of NB. Tiles are float64 numpy arrays in Fortran order, stored on
their owner only (``owners[i, j]``, the map's owner-computes rule).
"""
import numpy as np

from ..errors import UsageError
from . import matrices
from .volume import tile_extents


def check_sizes(n, nb):
    """Raise :class:`UsageError` unless 0 < nb <= n (integers). Returns ``(n, nb)``."""
    try:
        n, nb = _int(n), _int(nb)
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


def _int(v):
    if isinstance(v, bool) or int(v) != v:
        raise TypeError(v)
    return int(v)


def tile_sizes(n, nb):
    """Rows of each of the NT = ceil(N/NB) tile rows (int64 array)."""
    return tile_extents(n, nb)


class TiledMatrix:
    """The local part (this rank's tiles) of an N x N symmetric tiled matrix.

    Args:
        n, nb: matrix and tile size.
        owners: (nt, nt) int array, owner rank of tile (i, j) (only i >= j is used).
        rank: this process's rank.
    """

    def __init__(self, n, nb, owners, rank):
        self.n, self.nb = check_sizes(n, nb)
        self.rows = tile_sizes(self.n, self.nb)
        self.nt = len(self.rows)
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)])
        self.owners = np.ascontiguousarray(owners, dtype=np.int64)
        if self.owners.shape != (self.nt, self.nt):
            raise ValueError(f"owners must be {self.nt} x {self.nt}, got {self.owners.shape}")
        self.rank = int(rank)
        self.tiles = {}

    def local_keys(self):
        """(i, j), i >= j, of the tiles this rank owns."""
        ii, jj = np.nonzero(np.tril(self.owners == self.rank))
        return list(zip(ii.tolist(), jj.tolist()))

    @classmethod
    def generate(cls, spec, n, nb, owners, rank, seed=0):
        """This rank's tiles of the test matrix ``spec`` (see :mod:`.matrices`)."""
        a = cls(n, nb, owners, rank)
        o = a.offsets
        for i, j in a.local_keys():
            a.tiles[(i, j)] = matrices.block(spec, a.n, seed, o[i], o[i + 1], o[j], o[j + 1])
        return a

    def copy(self):
        b = TiledMatrix(self.n, self.nb, self.owners, self.rank)
        b.tiles = {k: np.array(t, order="F", copy=True) for k, t in self.tiles.items()}
        return b

    def frobenius_sq_local(self):
        """Sum of squares of the symmetric matrix's entries held here (the lower triangle
        of diagonal tiles, the strictly lower entries and off-diagonal tiles counted twice)."""
        total = 0.0
        for (i, j), t in self.tiles.items():
            if i == j:
                low = np.tril(t, -1)
                total += 2.0 * float(np.vdot(low, low)) + float(np.vdot(np.diag(t), np.diag(t)))
            else:
                total += 2.0 * float(np.vdot(t, t))
        return total

    def to_dense_lower(self, tiles=None):
        """Assemble ``tiles`` (default: the local ones) into a dense lower-triangular array."""
        tiles = self.tiles if tiles is None else tiles
        out = np.zeros((self.n, self.n), order="F")
        o = self.offsets
        for (i, j), t in tiles.items():
            out[o[i]:o[i + 1], o[j]:o[j + 1]] = t
        return np.tril(out)
