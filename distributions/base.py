"""The common interface of tile maps.

A tile map sends tile (i, j) of the lower triangle (i >= j, tile row i, tile column j)
of an NT x NT tiled matrix to a node (an MPI rank), numbered 0 .. nodes-1.
2.5D maps hold ``slices`` copies of the matrix; slice s uses its own nodes.
"""
import numpy as np

#: b, the consecutive iterations a 2.5D slice runs before the next slice takes over
#: (:func:`iteration_slices`); the default of the 2.5D maps (measured on the emulated
#: cluster, where b = 2 and 4 were slower than 1: docs/cluster.md, issue 33)
DEFAULT_SLICE_BLOCK = 1

#: the parameters of :func:`~.factory.get_map`, which :meth:`TileMap.params` gives back
#: (a run document's ``map_params``); the command line's flag of each is
#: :func:`starchol.jobs.options.map_argv`'s
MAP_PARAMS = ("dist", "nodes", "grid", "slices", "slice_block", "path", "nt")

#: ``sym`` weighs patterns of at most NT / MIN_PERIODS rows (see
#: :func:`.symmetric.pattern_limit`); the planner uses the measured load instead
MIN_PERIODS = 6


def count_text(count, noun):
    """``'1 rank'`` or ``'6 ranks'``: a count with its noun, singular for one."""
    count = int(count)
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def nodes_text(nodes):
    """``'1 node'`` or ``'6 nodes'``: a node count as the maps' descriptions print it."""
    return count_text(nodes, "node")


def iteration_slices(nt, slices=1, block=None):
    """Slice that runs each iteration (panel) k = 0 .. nt-1, int64 array (nt,).

    The one home of the iteration -> slice rule of the 2.5D maps. The iterations go in
    blocks of b = ``block`` consecutive ones, block q = k // b; the blocks visit the c
    slices back and forth (boustrophedon): 0, 1, .., c-1, c-1, .., 1, 0, 0, 1, ..
    (round r = q // c goes up when r is even, down when odd). For c = 2, b = 2:
    0 0 1 1 1 1 0 0 0 0 1 1 ...

    Why: column k is factored on the slice of iteration k, and its last update is
    iteration k - 1's; when that ran on another slice, a partial-sum transfer and an
    ADD sit on the panel chain. Blocks put one there only where the slice changes;
    going back and forth (rather than cyclically, (k // b) mod c) gives each slice
    early (large) and late (small) iterations alike, so the flops stay balanced
    (sbc25d c=2 on 6 nodes, NT = 24: flops of the busiest node / mean 1.069 with b = 2,
    1.174 cyclically, 1.102 for sbc; docs/cluster.md). Column j is factored on the slice of iteration j.
    ``block`` defaults to :data:`DEFAULT_SLICE_BLOCK` (what a map's owner stack alone
    implies)."""
    block = DEFAULT_SLICE_BLOCK if block is None else block
    nt, slices, block = int(nt), int(slices), int(block)
    if slices < 1 or block < 1:
        raise ValueError(f"slices and block must be >= 1, got {slices} and {block}")
    q = np.arange(nt, dtype=np.int64) // block
    rnd, pos = q // slices, q % slices
    return np.where(rnd % 2 == 0, pos, slices - 1 - pos).astype(np.int64)


def slice_updates(it, slices=None):
    """U[s, n] = #{k < n : it[k] == s}: the updates slice s applies to each tile of
    column n (one per iteration k < n that it runs), int64 (c, nt). ``it`` is
    :func:`iteration_slices`'s array; ``slices`` (c) defaults to max(it) + 1.

    Slice s keeps a copy of column n when it factors it (it[n] == s) or updates it
    (U[s, n] > 0); a slice that updates column n without factoring it sends one partial
    sum per tile of it."""
    it = np.asarray(it, dtype=np.int64)
    c = int(it.max()) + 1 if slices is None and len(it) else int(slices or 1)
    onehot = (it[None, :] == np.arange(c)[:, None]).astype(np.int64)
    out = np.zeros((c, len(it)), dtype=np.int64)
    out[:, 1:] = np.cumsum(onehot, axis=1)[:, :-1]
    return out


class TileMap:
    """Base class: subclasses implement :meth:`_slice_owner_map`.

    Attributes
    ----------
    name : str
        The map's command-line name (``2dbc``, ``sbc``, ...).
    nodes : int
        Total number of nodes P (all slices).
    slices : int
        Number of slices c (1 for 2D maps).
    """

    name = "map"
    slices = 1
    #: b: consecutive iterations per slice (no effect on 2D maps), see
    #: :func:`iteration_slices`
    slice_block = DEFAULT_SLICE_BLOCK
    #: the first node id of a 2D map (2.5D slices shift theirs: slice s starts at s*P/c)
    offset = 0

    def __init__(self, nodes):
        self.nodes = int(nodes)

    @property
    def nodes_per_slice(self):
        """Nodes of one slice: P / c."""
        return self.nodes // self.slices

    # -- what subclasses provide ------------------------------------------------------
    def _slice_owner_map(self, nt, s):
        """Global node ids of slice ``s`` for tiles (i, j), 0 <= i, j < nt, int64 (nt, nt)."""
        raise NotImplementedError

    # -- public interface -------------------------------------------------------------
    def owner_map(self, nt, s=0):
        """Owner of every tile of an nt x nt tiled matrix under slice ``s``.

        Returns an int64 array ``o`` of shape (nt, nt) with global node ids; every entry
        is filled, but only the lower triangle (i >= j) is used by the algorithms.
        """
        nt = int(nt)
        if nt < 1:
            raise ValueError(f"nt must be >= 1, got {nt}")
        if not 0 <= s < self.slices:
            raise ValueError(f"slice {s} out of range 0..{self.slices - 1}")
        return np.ascontiguousarray(self._slice_owner_map(nt, s), dtype=np.int64)

    def owner_maps(self, nt):
        """All slices' maps stacked: int64 array (slices, nt, nt)."""
        return np.stack([self.owner_map(nt, s) for s in range(self.slices)])

    def owner(self, i, j, s=0, nt=None):
        """Global node that owns tile (i, j) in slice ``s`` (i >= j expected).

        ``nt`` (tile rows of the matrix) is needed by maps whose pattern is aligned to
        the last tile row (the symmetric pattern maps); others ignore it.
        """
        i, j = int(i), int(j)
        if i < 0 or j < 0:
            raise ValueError(f"tile ({i}, {j}) has a negative index")
        return int(self.owner_map(max(i, j) + 1 if nt is None else nt, s)[i, j])

    def slice_of_node(self, node):
        """Slice that node ``node`` belongs to (0 for 2D maps)."""
        return int(node) // self.nodes_per_slice

    def slice_of_iteration(self, k):
        """Slice that runs iteration (panel) ``k`` (:func:`iteration_slices` with this
        map's c and b = ``slice_block``); column k is factored there."""
        return int(iteration_slices(int(k) + 1, self.slices, self.slice_block)[-1])

    def iteration_slices(self, nt):
        """Slice of every iteration k = 0 .. nt-1, int64 (nt,) (:func:`iteration_slices`
        with this map's c and b)."""
        return iteration_slices(nt, self.slices, self.slice_block)

    # -- map rules (one home each; subclasses override) --------------------------------
    def leading_factor(self):
        """F in the leading term of the transfers, D ~ S F (tiles per stored tile), or None."""
        return None

    def period(self):
        """(rows, cols) of the block of owners that repeats from tile (0, 0), or None."""
        return None

    def pattern_size(self):
        """Tile rows of one pattern block (r for symmetric maps), or None.

        The load tends to balance as NT holds more such blocks, but how far it is from
        balance at a given NT is measured by :func:`starchol.model.load.node_load` (the planner uses
        that figure, not the count of blocks).
        """
        return None

    def periods(self, nt):
        """NT / pattern size: how many pattern blocks NT holds (None if unknown)."""
        size = self.pattern_size()
        return None if not size else nt / size

    def params(self):
        """The parameters of :func:`.factory.get_map` that build this map again.

        ``get_map(**m.params())`` gives a map equal to ``m`` (same class, description
        and owners) for every map of the catalogue: ``dist`` and ``nodes`` always,
        ``slices`` (c), and where they apply ``grid`` (``"PxQ"``, 2dbc and 2dbc25d),
        ``path`` (custom) and ``nt`` (tile rows sym and sym25d were chosen for).
        """
        return {"dist": self.name, "nodes": self.nodes, "slices": self.slices}

    def summary(self):
        """What the map is, as a dict for reports: :meth:`params` plus the family's
        shape (``r``, ``pattern``, ``slice_dist``, ``file``)."""
        return {"dist": self.name, "nodes": self.nodes, "slices": self.slices}

    def __str__(self):
        """``'NAME (P nodes)'``; the families print their parameters too."""
        return f"{self.name} ({nodes_text(self.nodes)})"

    def __repr__(self):
        return f"<{type(self).__name__} {self}>"
