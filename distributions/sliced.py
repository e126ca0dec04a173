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

    def leading_factor(self):
        """The slice's factor + (c - 1): each tile's partial sums from the other slices."""
        base = self.base.leading_factor()
        return None if base is None else base + self.slices - 1

    def pattern_size(self):
        return self.base.pattern_size()

    @classmethod
    def candidates(cls, nodes, family="sbc25d", exact=False, max_c=None, nt=None, **options):
        """2.5D maps of ``family`` on ``nodes`` nodes, one per slice count c >= 2.

        c runs over 2 .. P/2 (or ``max_c``). ``2dbc25d`` and ``sym25d``: c divides P,
        slices of P/c nodes (the most square grid for 2dbc). ``sbc25d``: slices of the
        largest SBC that fits P/c nodes (exactly P/c, dividing P, if ``exact``).
        """
        from .factory import get_map, sbc_basic_r, sbc_extended_r

        out = []
        for c in range(2, nodes // 2 + 1):
            if max_c is not None and c > max_c:
                break
            per = nodes // c
            if family in ("2dbc25d", "sym25d"):
                if nodes % c == 0:
                    out.append(get_map(family, nodes, slices=c, nt=nt))
                continue
            if exact:
                fits = [per] if nodes % c == 0 and (sbc_extended_r(per) or sbc_basic_r(per)) \
                    else []
            else:
                fits = [v for v in range(3, per + 1) if sbc_extended_r(v) or sbc_basic_r(v)]
            if fits:
                out.append(get_map("sbc25d", max(fits) * c, slices=c))
        return out

    def params(self):
        p = self.base.params()
        p.update(dist=self.name, nodes=self.nodes, slices=self.slices, slice_dist=p["dist"])
        return p

    def __str__(self):
        return f"{self.name}: {self.slices} slices of {self.base}"

