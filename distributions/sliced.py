"""2.5D maps: c slices, each a 2D map over its own P/c nodes.

Slice s holds nodes s*P/c .. (s+1)*P/c - 1 and a full copy of the lower triangle under its
2D map; iteration (panel) k runs on slice it[k] (blocks of b consecutive iterations per
slice, the slices visited back and forth: :func:`.base.iteration_slices`), and tile (i, j) is factored on the slice of
iteration j after the partial sums of the other slices are added into it.
"""
from ..errors import UsageError
from ..integers import check_int
from .base import DEFAULT_SLICE_BLOCK, TileMap


def _node_range(first, count):
    return f"nodes {first}..{first + count - 1}"


def check_slices(slice_maps):
    """The slice maps of a :class:`Sliced25D` as a list, checked (see its Raises)."""
    maps = list(slice_maps)
    if not maps:
        raise UsageError("slice_maps is empty: a 2.5D map needs at least one slice")
    for s, m in enumerate(maps):
        if not isinstance(m, TileMap):
            raise UsageError(f"slice_maps[{s}] is a {type(m).__name__}, not a tile map")
        if m.nodes < 1:
            raise UsageError(f"slice_maps[{s}] ({m}) has {m.nodes} nodes: a slice needs "
                             f"at least one node")
        if m.slices != 1:
            raise UsageError(f"slice_maps[{s}] ({m}) is itself a 2.5D map with {m.slices} "
                             f"slices: a slice must be a 2D map (nested slices are not "
                             f"supported)")
    per = maps[0].nodes
    for s, m in enumerate(maps):
        if m.nodes != per:
            raise UsageError(f"slice_maps[{s}] ({m}) has {m.nodes} nodes but slice_maps[0] "
                             f"has {per}: every slice must have the same node count")
    for s, m in enumerate(maps):
        first = m.offset
        if first == s * per:
            continue
        clash = [t for t, o in enumerate(maps) if t != s and o.offset < first + per
                 and first < o.offset + per]
        where = (f"overlaps slice_maps[{clash[0]}] ({_node_range(maps[clash[0]].offset, per)})"
                 if clash else "leaves a gap or is out of order")
        raise UsageError(f"slice_maps[{s}] uses {_node_range(first, per)}, which {where}; "
                         f"slice {s} of {len(maps)} slices of {per} nodes must use "
                         f"{_node_range(s * per, per)} (offset {s * per})")
    return maps


def check_block(block):
    """``block`` (b, iterations per slice turn, ``slice_block=``) as an int >= 1;
    UsageError otherwise."""
    return check_int(block, "slice_block= (iterations per slice turn)", 1, param=None)


class Sliced25D(TileMap):
    """c slices given as 2D maps; ``name`` is e.g. ``sbc25d``.

    Parameters
    ----------
    name : str
        The map's command-line name.
    slice_maps : sequence of TileMap
        One 2D map per slice, each on the same number of nodes P/c; slice s must use
        nodes s*P/c .. (s+1)*P/c - 1 (its ``offset`` is s*P/c), so the slices neither
        overlap nor leave a gap.
    slice_block : int
        b, the consecutive iterations (panels) one slice runs before the next takes
        over (:func:`.base.iteration_slices`). Where the slice changes, the last update
        of the column is on another slice than the one that factors it: a partial-sum
        transfer and an ADD on the panel chain; a larger b puts fewer there, but
        unbalances the flops more.

    Raises
    ------
    UsageError
        ``slice_maps`` is empty, or a slice is not a map, has no nodes, is itself a 2.5D
        map, has another node count than slice 0, or sits on other nodes than its own
        range (overlapping another slice, or leaving a gap); the message names
        ``slice_maps[s]``; or ``slice_block`` is not an integer >= 1. (A 2.5D map whose slices share nodes is a :class:`TileMap`
        subclass of its own; the volume model and the runtime accept it.)
    """

    def __init__(self, name, slice_maps, slice_block=DEFAULT_SLICE_BLOCK):
        self.name = name
        self.slice_maps = check_slices(slice_maps)
        self.slices = len(self.slice_maps)
        self.slice_block = check_block(slice_block)
        super().__init__(sum(m.nodes for m in self.slice_maps))

    @property
    def base(self):
        """Slice 0's 2D map (every slice has the same shape)."""
        return self.slice_maps[0]

    def _slice_owner_map(self, nt, s):
        owners = self.slice_maps[s].owner_map(nt)
        per, lo, hi = self.nodes_per_slice, int(owners.min()), int(owners.max())
        if lo < s * per or hi >= (s + 1) * per:   # a map whose ids ignore its offset
            raise UsageError(f"slice_maps[{s}] ({self.slice_maps[s]}) puts tiles on "
                             f"{_node_range(lo, hi - lo + 1)} at NT = {nt}, outside its "
                             f"{_node_range(s * per, per)}")
        return owners

    def leading_factor(self):
        """The slice's factor + (c - 1): each tile's partial sums from the other slices."""
        base = self.base.leading_factor()
        return None if base is None else base + self.slices - 1

    def pattern_size(self):
        return self.base.pattern_size()

    def params(self):
        """``dist``, ``nodes``, ``slices``, ``slice_block`` (b) and the slice's ``grid``
        or ``nt`` where it has one (see :meth:`TileMap.params`)."""
        return {**super().params(), **{k: v for k, v in self.base.params().items()
                                       if k in ("grid", "nt")},
                "slice_block": self.slice_block}

    def summary(self):
        p = self.base.summary()
        p.update(dist=self.name, nodes=self.nodes, slices=self.slices, slice_dist=p["dist"],
                 slice_block=self.slice_block)
        return p

    def __str__(self):
        turn = (f", {self.slice_block} iterations per slice turn"
                if self.slice_block != DEFAULT_SLICE_BLOCK else "")
        return f"{self.name}: {self.slices} slices of {self.base}{turn}"

