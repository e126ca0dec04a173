"""Symmetric pattern maps: an r x r symmetric pattern of nodes, diagonal by a matching.

Pattern cell (x, y), x != y, and cell (y, x) belong to the same node, so row x and
column x of the pattern hold the same nodes: node p's *colrow set* C_p is the set of
pattern indices whose row (= column) it appears in. A panel tile of row i travels only
to the nodes whose colrow set holds i's pattern index, so the transfers per stored tile
tend to

    D / S = (sum_p |C_p|) / r - 1.

Diagonal cell (x, x) is given to a node already in C_p (no extra transfer). Several
*variants* of the diagonal may be used in turn over the pattern blocks (block (bi, bj),
bi >= bj, uses variant (bi(bi+1)/2 + bj) mod V, as extended SBC does), chosen by a
maximum flow so that every node's cells (off-diagonal cells plus its share of the
diagonal) weigh the same.

Index map: tile row i falls in pattern index g(i) = i mod r, reversed (r - 1 - i mod r)
in every other period, with the periods counted from the last tile row (see
:meth:`SymmetricPattern.index_map`). Any such g keeps each row's node set, hence the volume, and the
reversal evens out the positions of a node's cells inside the lower triangle, which
balances the flops (FACTS section 8).
"""
import numpy as np

from .base import TileMap, nodes_text


def diagonal_by_flow(cells, nodes, variants):
    """Owners of the diagonal cells, ``variants`` times over: int64 array (V, r).

    Cell x may go to any node of row x of ``cells`` (r x r, symmetric; its diagonal is
    ignored). Counting an off-diagonal cell as one unit and a diagonal cell as one unit
    per variant used, node p should hold r^2 / P units; a maximum flow gives each point x
    ``variants`` diagonal slots spread over its row's nodes so that no node exceeds
    ceil(V r^2 / P - V * offdiag_p) slots (raised step by step if infeasible).
    Raises ValueError if a point has no node in its row.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    cells = np.asarray(cells, dtype=np.int64)
    r = cells.shape[0]
    V = int(variants)
    off = ~np.eye(r, dtype=bool)
    offdiag = np.bincount(cells[off], minlength=nodes)
    rows = [np.unique(cells[x][off[x]]) for x in range(r)]
    if r == 1:
        rows = [np.array([0])]
    if any(len(c) == 0 for c in rows):
        raise ValueError("a pattern index has no node in its row")
    target = V * r * r / nodes - V * offdiag
    # graph: source 0, points 1..r, nodes r+1..r+P, sink r+P+1
    src, sink = 0, r + nodes + 1
    edges_x = np.concatenate([np.full(len(c), x) for x, c in enumerate(rows)])
    edges_p = np.concatenate(rows)
    n_vert = r + nodes + 2
    extra = 0
    while True:
        cap = np.maximum(0, np.ceil(target - 1e-9).astype(np.int64) + extra)
        tails = np.concatenate([np.full(r, src), 1 + edges_x, r + 1 + np.arange(nodes)])
        heads = np.concatenate([1 + np.arange(r), r + 1 + edges_p, np.full(nodes, sink)])
        caps = np.concatenate([np.full(r, V), np.full(len(edges_x), V), cap])
        graph = csr_matrix((caps.astype(np.int32), (tails, heads)), shape=(n_vert, n_vert))
        flow = maximum_flow(graph, src, sink)
        if flow.flow_value == V * r:
            break
        extra += 1
    f = flow.flow.tocsr()
    amounts = np.asarray(f[1 + edges_x, r + 1 + edges_p]).ravel()
    # spread each point's V slots over the variants, nodes in turn
    out = np.empty((V, r), dtype=np.int64)
    order = np.argsort(edges_x, kind="stable")
    slot = np.zeros(r, dtype=np.int64)
    for e in order:
        x, p, a = edges_x[e], edges_p[e], int(amounts[e])
        out[slot[x]:slot[x] + a, x] = p
        slot[x] += a
    # rotate the slots of point x by x so a node's diagonal cells spread over variants
    for x in range(r):
        out[:, x] = np.roll(out[:, x], x % V)
    return out


class SymmetricPattern(TileMap):
    """A symmetric r x r pattern with its diagonal variants (see the module docstring).

    Parameters
    ----------
    cells : int array (r, r)
        Node of every off-diagonal pattern cell; symmetric; the diagonal is ignored.
    diagonal : int array (V, r)
        Node of diagonal cell x in variant v.
    nodes : int, optional
        Node count P (default: highest id + 1).
    name : str
        Map name (``pplane``, ``aplane``, ``sym``).
    label : str
        What the pattern is, for ``str(map)``.
    reverse : bool
        Reverse the pattern indices in every other period (default True).
    offset : int
        Added to every node id (2.5D slices).
    nt : int, optional
        Tile rows of the matrix the pattern was chosen for (``sym``; None: any), kept
        for :meth:`params`.
    """

    def __init__(self, cells, diagonal, nodes=None, name="sym", label="", reverse=True,
                 offset=0, nt=None):
        cells = np.asarray(cells, dtype=np.int64)
        diagonal = np.atleast_2d(np.asarray(diagonal, dtype=np.int64))
        r = cells.shape[0]
        if cells.shape != (r, r) or diagonal.shape[1] != r:
            raise ValueError(f"cells must be r x r and diagonal V x r, got {cells.shape} "
                             f"and {diagonal.shape}")
        off = ~np.eye(r, dtype=bool)
        if not np.array_equal(cells[off], cells.T[off]):
            raise ValueError("pattern cells must be symmetric")
        highest = max(int(cells[off].max(initial=0)), int(diagonal.max()))
        super().__init__(highest + 1 if nodes is None else nodes)
        self.cells = np.where(off, cells, -1)
        self.diagonal = diagonal
        self.r = r
        self.name = name
        self.label = label
        self.reverse = bool(reverse)
        self.offset = int(offset)
        self.nt = None if nt is None else int(nt)

    # -- structure ---------------------------------------------------------------------
    @property
    def variants(self):
        """V, the number of diagonal variants used in turn."""
        return self.diagonal.shape[0]

    def colrow_sets(self):
        """C_p for every node: list of sorted int arrays of pattern indices."""
        sets = [set() for _ in range(self.nodes)]
        r = self.r
        for x in range(r):
            for p in np.unique(np.r_[self.cells[x][self.cells[x] >= 0], self.diagonal[:, x]]):
                sets[p].add(x)
        return [np.array(sorted(s), dtype=np.int64) for s in sets]

    def pattern_units(self):
        """Cells per node in the long-run limit: off-diagonal cells + mean diagonal cells.

        float64 array (P); the average is r^2 / P. Its max / mean is the flop
        imbalance the map tends to when NT holds many periods.
        """
        off = self.cells[self.cells >= 0]
        units = np.bincount(off, minlength=self.nodes).astype(np.float64)
        units += np.bincount(self.diagonal.ravel(), minlength=self.nodes) / self.variants
        return units

    def index_map(self, nt):
        """Pattern index g(i) and pattern block of tile rows 0 .. nt-1: two int64 arrays.

        The periods are counted from the last tile row up (row nt-1 closes a period, and
        an even number of periods), so that a partial period, if any, falls on the first
        rows, which carry the fewest flops. Hence the owner of a tile depends on NT.
        """
        span = 2 * self.r if self.reverse else self.r
        i = np.arange(nt) + (-nt) % span
        block = i // self.r
        pos = i % self.r
        if self.reverse:
            pos = np.where(block % 2 == 1, self.r - 1 - pos, pos)
        return pos, block

    def _slice_owner_map(self, nt, s):
        g, b = self.index_map(nt)
        out = self.cells[g[:, None], g[None, :]]
        hi = np.maximum(b[:, None], b[None, :])
        lo = np.minimum(b[:, None], b[None, :])
        var = (hi * (hi + 1) // 2 + lo) % self.variants
        diag = g[:, None] == g[None, :]
        gi = np.broadcast_to(g[:, None], diag.shape)
        out = np.where(diag, self.diagonal[var, gi], out)
        return self.offset + out

    def owner(self, i, j, s=0, nt=None):
        """Owner of tile (i, j) in an nt x nt matrix (``nt`` is needed: see index_map)."""
        if nt is None:
            raise ValueError(f"{self.name} aligns its pattern to the last tile row: "
                             f"owner() needs nt")
        return int(self.owner_map(nt, s)[int(i), int(j)])

    # -- map rules ---------------------------------------------------------------------
    def pattern_size(self):
        return self.r

    def period(self):
        """None: the pattern is aligned to the last tile row, so no fixed block repeats."""
        return None

    def leading_factor(self):
        """(sum_p |C_p|) / r - 1: mean over pattern indices x of the nodes in row x, minus 1."""
        return float(sum(len(c) for c in self.colrow_sets())) / self.r - 1.0

    def with_offset(self, offset):
        """The same pattern on node ids shifted by ``offset`` (a 2.5D slice)."""
        return SymmetricPattern(self.cells, self.diagonal, nodes=self.nodes, name=self.name,
                                label=self.label, reverse=self.reverse, offset=offset,
                                nt=self.nt)

    def params(self):
        """``dist`` and ``nodes``, and for ``sym`` the tile rows ``nt`` it was chosen for
        (None: no limit; see :func:`.symmetric.symmetric_map`)."""
        return {**super().params(), **({"nt": self.nt} if self.name == "sym" else {})}

    def summary(self):
        return {**super().summary(), "r": self.r, "pattern": self.label}

    def __str__(self):
        what = f"{self.label}, " if self.label else ""
        return f"{self.name} r={self.r} ({what}{nodes_text(self.nodes)})"


def pattern_from_blocks(blocks, r, nodes=None, variants=None, **kw):
    """A :class:`SymmetricPattern` in which node p owns every pair inside ``blocks[p]``.

    The blocks must cover each pair of the r points exactly once (a linear space). The
    diagonal is balanced by :func:`diagonal_by_flow` with ``variants`` variants (default:
    the smallest V <= 12 whose long-run imbalance is the least).
    """
    nodes = len(blocks) if nodes is None else nodes
    cells = np.full((r, r), -1, dtype=np.int64)
    for p, block in enumerate(blocks):
        b = np.asarray(block, dtype=np.int64)
        cells[np.ix_(b, b)] = p
    np.fill_diagonal(cells, 0)
    if np.any(cells < 0):
        raise ValueError("blocks leave a pair of points uncovered")
    return pattern_from_cells(cells, nodes, variants=variants, **kw)


def pattern_from_cells(cells, nodes, variants=None, **kw):
    """A :class:`SymmetricPattern` from its off-diagonal cells, diagonal by flow.

    ``variants`` None tries V = 1 .. 12 and keeps the smallest V within 0.2% of the best
    long-run balance.
    """
    r = cells.shape[0]
    if variants is not None:
        return SymmetricPattern(cells, diagonal_by_flow(cells, nodes, variants), nodes=nodes,
                                **kw)
    best = None
    for v in range(1, 13):
        m = SymmetricPattern(cells, diagonal_by_flow(cells, nodes, v), nodes=nodes, **kw)
        units = m.pattern_units()
        imb = units.max() / (r * r / nodes)
        if best is None or imb < best[0] - 2e-3:
            best = (imb, m)
        if imb <= 1 + 1e-9:
            break
    return best[1]
