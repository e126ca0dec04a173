"""Greedy cover and local search: a balanced symmetric pattern for any node count.

The problem. Pattern size r, P nodes. Every unordered pair {x, y} of pattern indices
(x != y) gets one owner node, which then holds cells (x, y) and (y, x). Node p's colrow
set C_p is the set of indices its pairs touch; the leading transfers per stored tile are
sum_p |C_p| / r - 1 (see :mod:`.symmetric_pattern`), so the search minimises sum_p |C_p|.
Balance: counting a pair as two cells, node p should hold T = r^2 / P cells once it has
its share of the r diagonal cells, which go to nodes already in their row; so every node
holds at most floor(T / 2) pairs (a little more only where the pair count forces it),
and at least ``lo`` pairs, so that the diagonal can fill the rest.

The steps (all deterministic):

1. start from a linear space (a plane, or SBC's pairs) restricted to the r indices: node
   p takes the pairs of block p; blocks beyond P are dissolved;
2. give every pair without an owner to the node it costs least (fewest new indices);
3. nodes below ``lo`` take pairs from nodes above it, cheapest first (a new node grows
   like an arc of the plane: pairs of distinct blocks among few indices);
4. nodes above ``hi`` hand pairs to nodes below it, cheapest first;
5. local search: move a pair to another node when that lowers sum |C_p|; sweeps until
   nothing improves.
"""
import numpy as np

_INF = np.iinfo(np.int64).max


class CoverState:
    """Pair owners and the per-node index counts that make a move's cost O(1).

    ``cnt[p, x]`` is the number of node p's pairs that touch index x.
    """

    def __init__(self, r, nodes):
        self.r, self.nodes = int(r), int(nodes)
        iu = np.triu_indices(self.r, 1)
        self.px, self.py = iu[0].astype(np.int64), iu[1].astype(np.int64)
        self.owner = np.full(len(self.px), -1, dtype=np.int64)
        self.cnt = np.zeros((self.nodes, self.r), dtype=np.int64)
        self.npairs = np.zeros(self.nodes, dtype=np.int64)
        self.pair_id = np.full((self.r, self.r), -1, dtype=np.int64)
        self.pair_id[self.px, self.py] = np.arange(len(self.px))
        self.pair_id[self.py, self.px] = np.arange(len(self.px))

    @property
    def pairs(self):
        return len(self.px)

    def recount(self):
        """Rebuild ``cnt`` and ``npairs`` from ``owner``."""
        self.cnt[:] = 0
        had = self.owner >= 0
        own = self.owner[had]
        np.add.at(self.cnt, (own, self.px[had]), 1)
        np.add.at(self.cnt, (own, self.py[had]), 1)
        self.npairs[:] = np.bincount(own, minlength=self.nodes)

    def assign(self, e, p):
        """Give pair e to node p (it must be unowned)."""
        x, y = self.px[e], self.py[e]
        self.owner[e] = p
        self.cnt[p, x] += 1
        self.cnt[p, y] += 1
        self.npairs[p] += 1

    def release(self, e):
        """Take pair e from its owner."""
        a = self.owner[e]
        x, y = self.px[e], self.py[e]
        self.cnt[a, x] -= 1
        self.cnt[a, y] -= 1
        self.npairs[a] -= 1
        self.owner[e] = -1

    def move(self, e, b):
        self.release(e)
        self.assign(e, b)

    def cost(self):
        """sum_p |C_p| (pairs only)."""
        return int(np.count_nonzero(self.cnt))

    def add_cost(self, e):
        """New indices each node would gain by taking pair e: int64 array (P)."""
        return (self.cnt[:, self.px[e]] == 0).astype(np.int64) + (self.cnt[:, self.py[e]] == 0)

    def removal_gain(self, e):
        """Indices the owner of pair e would lose by giving it away (0, 1 or 2)."""
        a = self.owner[e]
        return int(self.cnt[a, self.px[e]] == 1) + int(self.cnt[a, self.py[e]] == 1)

    def cells(self):
        """The r x r symmetric cell owners (diagonal 0, a placeholder)."""
        out = np.zeros((self.r, self.r), dtype=np.int64)
        out[self.px, self.py] = self.owner
        out[self.py, self.px] = self.owner
        return out


def pair_bounds(r, nodes):
    """(lo, hi): the pair count bounds of the search (see the module docstring)."""
    pairs = r * (r - 1) // 2
    target = r * r / nodes
    hi = int(target // 2)
    while hi * nodes < pairs:  # the pair count forces a few nodes above T / 2
        hi += 1
    diag_share = r / nodes
    lo = max(0, int(np.floor((target - 2 * diag_share - 2) / 2)))
    lo = max(1, min(lo, pairs // nodes))  # a node without pairs has no row
    return lo, hi


def _fill_unowned(st, hi):
    for e in np.flatnonzero(st.owner < 0):
        add = st.add_cost(e) * (4 * st.pairs) + st.npairs
        add[st.npairs >= hi] = _INF
        st.assign(e, int(np.argmin(add)))


def _grow(st, lo):
    """Nodes below ``lo`` pairs take pairs from nodes above ``lo``, cheapest first.

    A node's next pair is looked for among the pairs that touch its indices (at most
    one new index), or anywhere when it has none or none of those can be taken.
    """
    big = 4 * st.pairs
    while True:
        low = np.flatnonzero(st.npairs < lo)
        if not len(low):
            return
        b = int(low[np.argmin(st.npairs[low])])
        touch = st.cnt[b] > 0
        cand = np.flatnonzero(touch[st.px] | touch[st.py]) if touch.any() else \
            np.arange(st.pairs)
        e = _cheapest_take(st, b, cand, lo, big)
        if e is None and len(cand) < st.pairs:
            e = _cheapest_take(st, b, np.arange(st.pairs), lo, big)
        if e is None:
            return
        st.move(e, b)


def _cheapest_take(st, b, cand, lo, big):
    own = st.owner[cand]
    px, py = st.px[cand], st.py[cand]
    add = (st.cnt[b, px] == 0).astype(np.int64) + (st.cnt[b, py] == 0)
    rem = (st.cnt[own, px] == 1).astype(np.int64) + (st.cnt[own, py] == 1)
    score = (add - rem) * big - st.npairs[own]
    score[(st.npairs[own] <= lo) | (own == b)] = _INF
    k = int(np.argmin(score))
    return None if score[k] == _INF else int(cand[k])


def _shed(st, hi):
    """Nodes above ``hi`` pairs give pairs to nodes below it, cheapest first."""
    big = 4 * st.pairs
    while True:
        high = np.flatnonzero(st.npairs > hi)
        if not len(high):
            return
        a = int(high[0])
        mine = np.flatnonzero(st.owner == a)
        px, py = st.px[mine], st.py[mine]
        add = (st.cnt[:, px] == 0).astype(np.int64) + (st.cnt[:, py] == 0)  # (P, k)
        score = add * big + st.npairs[:, None]
        score[st.npairs >= hi] = _INF
        best_b = np.argmin(score, axis=0)
        gain = (st.cnt[a, px] == 1).astype(np.int64) + (st.cnt[a, py] == 1)
        total = score[best_b, np.arange(len(mine))] - gain * big
        k = int(np.argmin(total))
        st.move(int(mine[k]), int(best_b[k]))


def _local_search(st, lo, hi, sweeps, rng):
    """Moves that lower sum |C_p|: a pair whose owner would drop an index goes to a node
    that gains fewer indices (among those, the one with the fewest pairs)."""
    for _ in range(sweeps):
        own = st.owner
        gain = (st.cnt[own, st.px] == 1).astype(np.int64) + (st.cnt[own, st.py] == 1)
        todo = np.flatnonzero((gain > 0) & (st.npairs[own] > lo))
        improved = False
        for e in rng.permutation(todo):
            a = st.owner[e]
            if st.npairs[a] <= lo:
                continue
            x, y = st.px[e], st.py[e]
            g = int(st.cnt[a, x] == 1) + int(st.cnt[a, y] == 1)
            if g == 0:
                continue
            add = 2 - (st.cnt[:, x] > 0).astype(np.int64) - (st.cnt[:, y] > 0)
            add[st.npairs >= hi] = 3
            add[a] = 3
            least = int(add.min())
            if least >= g:
                continue
            bs = np.flatnonzero(add == least)
            st.move(e, int(bs[np.argmin(st.npairs[bs])]))
            improved = True
        if not improved:
            return


def cover(r, nodes, blocks=(), sweeps=20, seed=0):
    """Pair owners of a balanced symmetric pattern: a :class:`CoverState`.

    Parameters
    ----------
    r : int
        Pattern size (indices 0 .. r-1).
    nodes : int
        Node count P.
    blocks : sequence of int arrays
        Starting blocks (point sets over 0 .. r-1, pairwise sharing at most one point);
        node p starts with the pairs of blocks[p], blocks beyond P are dissolved.
    sweeps : int
        Local search sweeps at most.
    seed : int
        Seed of the sweep order (the result is deterministic for a given seed).
    """
    st = CoverState(r, nodes)
    for p, block in enumerate(list(blocks)[:nodes]):
        b = np.asarray(block, dtype=np.int64)
        if len(b) < 2:
            continue
        ids = st.pair_id[np.ix_(b, b)][np.triu_indices(len(b), 1)]
        ids = ids[st.owner[ids] < 0]
        st.owner[ids] = p
    st.recount()
    lo, hi = pair_bounds(r, nodes)
    _fill_unowned(st, hi)
    _grow(st, lo)
    _shed(st, hi)
    _local_search(st, lo, hi, sweeps, np.random.default_rng(seed))
    _grow(st, lo)
    return st
