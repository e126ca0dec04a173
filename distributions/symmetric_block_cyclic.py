"""Symmetric Block Cyclic maps (SBC; Beaumont et al., SC22).

An r x r pattern repeats over the lower triangle: tile (i, j) falls in pattern cell
(i mod r, j mod r). Each node owns one unordered pair {x, y}, x != y, and sits in both
cells (x, y) and (y, x); the pair with x > y is node x(x-1)/2 + y. Row x and column x of
the pattern thus hold the same r-1 nodes, so a panel tile travels inside r-1 nodes.

Diagonal cells (x, x):

- basic SBC (r even, P = r^2/2): cells x and x + r/2 share one extra node
  r(r-1)/2 + (x mod r/2).
- extended SBC (r >= 3, P = r(r-1)/2): cell x gets the pair {x, (x + v + 1) mod r}, a node
  already in row x, so the diagonal costs no extra transfer; the variant v changes from
  pattern block to pattern block so that every node gets its share of diagonal tiles.
"""
import numpy as np

from .base import TileMap, nodes_text


def pair_node(a, b):
    """Node id of the unordered pair {a, b} (a != b): hi(hi-1)/2 + lo. Vectorised."""
    hi = np.maximum(a, b)
    lo = np.minimum(a, b)
    return hi * (hi - 1) // 2 + lo


def extended_diagonal_partner(x, bi, bj, r):
    """Partner y of the pair {x, y} that owns diagonal cell x of pattern block (bi, bj).

    Block (bi, bj) takes var = bi(bi+1)/2 + bj and h = ceil((r-1)/2). Odd r: variant
    v = var mod h. Even r: var' = var mod (2h-1); v = var' when var' < h-1, else
    v = var' mod h for x < r/2 and v = var' - (h-1) for x >= r/2 (the "bonus pack",
    pairs {x, x + r/2}). Then y = (x + v + 1) mod r. Vectorised over x, bi, bj.
    """
    h = r // 2  # == ceil((r-1)/2) for every r >= 2
    var = bi * (bi + 1) // 2 + bj
    if r % 2:
        v = var % h
    else:
        vp = var % (2 * h - 1)
        v = np.where(vp < h - 1, vp, np.where(x < r // 2, vp % h, vp - (h - 1)))
    return (x + v + 1) % r


class SymmetricBlockCyclic(TileMap):
    """SBC map of pattern size r, ``extended`` (P = r(r-1)/2) or basic (P = r^2/2).

    ``offset`` shifts every node id (used by 2.5D maps for their slices).
    """

    def __init__(self, r, extended=True, offset=0):
        r = int(r)
        self.r, self.extended, self.offset = r, bool(extended), int(offset)
        super().__init__(r * (r - 1) // 2 if extended else r * r // 2)

    @property
    def name(self):
        return "sbc" if self.extended else "sbc-basic"

    def _slice_owner_map(self, nt, s):
        r = self.r
        i = np.arange(nt)[:, None]
        j = np.arange(nt)[None, :]
        a, b = i % r, j % r
        diagonal = a == b
        off = pair_node(a, np.where(diagonal, (a + 1) % r, b))  # placeholder on diagonal
        if self.extended:
            y = extended_diagonal_partner(a, i // r, j // r, r)
            diag_nodes = pair_node(a, y)
        else:
            diag_nodes = r * (r - 1) // 2 + a % (r // 2)
        return self.offset + np.where(diagonal, diag_nodes, off)

    def period(self):
        """(r, r) for basic SBC. Extended SBC: its diagonal variants cycle with
        var = bi(bi+1)/2 + bj modulo m (m = h for odd r, 2h - 1 for even r, h = r // 2;
        :func:`extended_diagonal_partner`), which repeats every m block columns and every
        m block rows (2m when m is even: (bi + m)(bi + m + 1)/2 - bi(bi+1)/2 = m bi +
        m(m+1)/2, a multiple of m only for odd m): (r * rows, r * m) tiles."""
        r = self.r
        if not self.extended:
            return r, r
        h = r // 2
        m = h if r % 2 else 2 * h - 1
        return r * (m if m % 2 else 2 * m), r * m

    def leading_factor(self):
        """r - 2 (extended: the diagonal node is in the row) or r - 1 (basic)."""
        return self.r - (2 if self.extended else 1)

    def pattern_size(self):
        return self.r

    def summary(self):
        return {**super().summary(), "r": self.r}

    def __str__(self):
        kind = "extended" if self.extended else "basic"
        return f"{self.name} r={self.r} ({kind}, {nodes_text(self.nodes)})"
