"""2.5D maps: c slices, each a 2D map over its own P/c nodes.

Slice s holds nodes s*P/c .. (s+1)*P/c - 1 and a full copy of the lower triangle under its
2D map; iteration (panel) k runs on slice k mod c, and tile (i, j) is factored on slice
j mod c after the partial sums of the other slices are added into it.
"""
from .base import TileMap


class Sliced25D(TileMap):
    """c slices given as 2D maps with disjoint node ranges; ``name`` is e.g. ``sbc25d``."""

    def __init__(self, name, slice_maps):
        self.name = name
        self.slice_maps = list(slice_maps)
        self.slices = len(self.slice_maps)
        super().__init__(sum(m.nodes for m in self.slice_maps))

    @property
    def base(self):
        """Slice 0's 2D map (every slice has the same shape)."""
        return self.slice_maps[0]

    def _slice_owner_map(self, nt, s):
        return self.slice_maps[s].owner_map(nt)

    def params(self):
        p = self.base.params()
        p.update(dist=self.name, nodes=self.nodes, slices=self.slices, slice_dist=p["dist"])
        return p

    def __str__(self):
        return f"{self.name}: {self.slices} slices of {self.base}"

