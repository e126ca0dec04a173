"""2D block-cyclic map (2DBC): a p x q grid of nodes repeated over the tiles."""
import numpy as np

from .base import TileMap, nodes_text


class BlockCyclic2D(TileMap):
    """Tile (i, j) goes to node (i mod p) * q + (j mod q); P = p * q nodes.

    ``offset`` shifts every node id (used by 2.5D maps for their slices).
    """

    name = "2dbc"

    def __init__(self, p, q, offset=0):
        super().__init__(p * q)
        self.p, self.q, self.offset = int(p), int(q), int(offset)

    def _slice_owner_map(self, nt, s):
        i = np.arange(nt)[:, None]
        j = np.arange(nt)[None, :]
        return self.offset + (i % self.p) * self.q + (j % self.q)

    def period(self):
        """Smallest (rows, cols) pattern that repeats: (p, q)."""
        return self.p, self.q

    def leading_factor(self):
        """p + q - 2: a panel tile goes to the q-1 other nodes of its row, p-1 of its column."""
        return self.p + self.q - 2

    def pattern_size(self):
        return max(self.p, self.q)

    def params(self):
        return {**super().params(), "grid": f"{self.p}x{self.q}"}

    def summary(self):
        return {**super().summary(), "grid": f"{self.p}x{self.q}"}

    def __str__(self):
        return f"2dbc {self.p}x{self.q} ({nodes_text(self.nodes)})"
