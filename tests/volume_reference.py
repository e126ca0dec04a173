"""The one test oracle for transfer counts: slow, obviously correct, no numpy tricks.

It lists every task of a graph (the node that runs it, the tile versions it reads, the
tiles it writes, and the cache flushes between tasks) and replays StarPU-MPI's rules
one read at a time:

- a read of a tile held by another node is a transfer from that node;
- cache on: a node receives a given version of a tile at most once, until a flush;
- cache off: every (task, remote operand) is a transfer;
- a write makes a new version (the writer is the tile's owner).

Graphs: the right-looking tiled Cholesky over c slices (c = 1: 2D; 2.5D partial sums
added into the factoring copy), the solve L L^T X = B and the residual B - A X, each
in its two variants (the factor's tiles move, or the right-hand sides and partial sums). O(NT^3) Python loops: small
NT only. Used by the model tests (tiles) and by the runtime tests (bytes).
"""
from collections import Counter

import numpy as np

from starchol.distributions.base import DEFAULT_SLICE_BLOCK


def slice_of(k, c, block=DEFAULT_SLICE_BLOCK):
    """Slice of iteration k: b = ``block`` iterations in a row on one slice, the blocks
    visiting slices 0, 1, .., c-1, then c-1, .., 0, then 0, 1, .. again."""
    q = k // block
    up = (q // c) % 2 == 0
    return q % c if up else c - 1 - q % c


def cholesky_events(owners, block=DEFAULT_SLICE_BLOCK):
    """Events of the tiled Cholesky. ``owners``: (c, nt, nt) per-slice owners (or a list,
    or one (nt, nt) array); iteration k runs on slice slice_of(k, c, block). Tile keys:
    ("A", i, j) the factoring copy of (i, j), held by the owner of (i, j) in the slice
    of iteration j; ("P", s, i, j) slice s's partial sum."""
    so = _stack(owners)
    c, nt, _ = so.shape
    f = lambda i, j: int(so[slice_of(j, c, block)][i][j])  # noqa: E731 - where L[i][j] ends
    for k in range(nt):
        s = slice_of(k, c, block)
        updated = {slice_of(q, c, block) for q in range(k)}    # slices that updated column k
        for m in range(k, nt):
            for t in range(c):
                if t != s and t in updated:
                    yield ("task", f(m, k), [(("P", t, m, k), int(so[t][m][k]))], [("A", m, k)])
                    yield ("flush", ("P", t, m, k))
        yield ("task", f(k, k), [], [("A", k, k)])
        for m in range(k + 1, nt):
            yield ("task", f(m, k), [(("A", k, k), f(k, k))], [("A", m, k)])

        def target(i, j):
            return ("A", i, j) if slice_of(j, c, block) == s else ("P", s, i, j)

        for n in range(k + 1, nt):
            yield ("task", int(so[s][n][n]), [(("A", n, k), f(n, k))], [target(n, n)])
            for m in range(n + 1, nt):
                yield ("task", int(so[s][m][n]),
                       [(("A", m, k), f(m, k)), (("A", n, k), f(n, k))], [target(m, n)])
        for m in range(k, nt):
            yield ("flush", ("A", m, k))


def solve_events(owners, kt, which="both", block=DEFAULT_SLICE_BLOCK):
    """Events of the solve L L^T X = B with kt tile columns of B (``which``: "both", or
    one pass, "forward" or "backward"); row tile i of B is held by d(i), the holder of
    L[i][i]. Keys ("A", i, j) for L, ("B", i, j) for B."""
    nt, f = _final_owner(owners, block)
    d = [f(i, i) for i in range(nt)]
    for k in range(nt if which != "backward" else 0):
        for j in range(kt):
            yield ("task", d[k], [(("A", k, k), f(k, k))], [("B", k, j)])
        for m in range(k + 1, nt):
            for j in range(kt):
                yield ("task", d[m], [(("A", m, k), f(m, k)), (("B", k, j), d[k])],
                       [("B", m, j)])
    for k in range(nt):
        for j in range(kt):
            yield ("flush", ("B", k, j))
    for k in reversed(range(nt if which != "forward" else 0)):
        for j in range(kt):
            yield ("task", d[k], [(("A", k, k), f(k, k))], [("B", k, j)])
        for m in reversed(range(k)):
            for j in range(kt):
                yield ("task", d[m], [(("A", k, m), f(k, m)), (("B", k, j), d[k])],
                       [("B", m, j)])


def residual_events(owners, kt, block=DEFAULT_SLICE_BLOCK):
    """Events of the residual R = B - A X of a solve (the ``symm_residual`` graph): row
    tile i of R (held by d(i)) takes A[i][k] X[k] for k <= i and A[k][i]^T X[k] for
    k > i; A's received copies of row i are flushed after row i, X's at the end. Keys
    ("A", i, j) for A (held where L[i][j] ends), ("X", i, j), ("R", i, j)."""
    nt, f = _final_owner(owners, block)
    d = [f(i, i) for i in range(nt)]
    for i in range(nt):
        for j in range(kt):
            for k in range(nt):
                a = ("A", i, k) if k <= i else ("A", k, i)
                yield ("task", d[i], [(a, f(*a[1:])), (("X", k, j), d[k])], [("R", i, j)])
        for k in range(i + 1):
            yield ("flush", ("A", i, k))
    for k in range(nt):
        for j in range(kt):
            yield ("flush", ("X", k, j))


def rhs_solve_events(owners, kt, which="both", block=DEFAULT_SLICE_BLOCK):
    """Events of the right-hand-side variant of the solve (the ``solve_rhs`` graph): L
    stays in place. Forward, k = 0..nt-1: on d(k), B[k] += T[q][k] for every node q
    other than d(k) that owns a tile L[k][j], j < k (each partial sum read once, then
    dropped), then the TRSM; for m > k, on q = F(m, k): T[q][m] -= L[m][k] B[k], or
    B[m] itself when q = d(m). Backward, k = nt-1..0: the same with L[k][m], m < k, for
    the products and the owners of L[m][k], m > k, for the partial sums of row k. B's
    received copies are dropped after each pass. Keys ("A", i, j) for L, ("B", i, j),
    ("T", pass, q, i, j) for the partial sums."""
    nt, f = _final_owner(owners, block)
    d = [f(i, i) for i in range(nt)]
    passes = [p for p in ("forward", "backward") if which in ("both", p)]
    for p in passes:
        ks = range(nt) if p == "forward" else reversed(range(nt))
        for k in ks:
            # (tile, row written) of the products that feed row k, and that read B[k]
            feed = [(k, j) for j in range(k)] if p == "forward" else \
                [(m, k) for m in range(k + 1, nt)]
            for q in sorted({f(*t) for t in feed} - {d[k]}):
                for j in range(kt):
                    yield ("task", d[k], [(("T", p, q, k, j), q)], [("B", k, j)])
                    yield ("flush", ("T", p, q, k, j))
            for j in range(kt):
                yield ("task", d[k], [(("A", k, k), f(k, k))], [("B", k, j)])
            reads = [((m, k), m) for m in range(k + 1, nt)] if p == "forward" else \
                [((k, m), m) for m in reversed(range(k))]
            for tile, m in reads:
                q = f(*tile)
                for j in range(kt):
                    out = ("B", m, j) if q == d[m] else ("T", p, q, m, j)
                    yield ("task", q, [(("A",) + tile, q), (("B", k, j), d[k])], [out])
        for k in range(nt):
            for j in range(kt):
                yield ("flush", ("B", k, j))


def rhs_residual_events(owners, kt, block=DEFAULT_SLICE_BLOCK):
    """Events of the right-hand-side variant of the residual R = B - A X (the
    ``symm_residual_rhs`` graph): A stays in place. Row i: on d(i), R[i] -= A[i][i]
    X[i]; for k < i, on q = F(i, k): T[q][i] -= A[i][k] X[k]; for m > i, on
    q = F(m, i): T[q][i] -= A[m][i]^T X[m] (R[i] itself when q = d(i)); then on d(i),
    R[i] += T[q][i] for each such q other than d(i). X's received copies are dropped
    at the end. Keys ("A", i, j), ("X", i, j), ("R", i, j), ("T", q, i, j)."""
    nt, f = _final_owner(owners, block)
    d = [f(i, i) for i in range(nt)]
    for i in range(nt):
        for j in range(kt):
            yield ("task", d[i], [(("A", i, i), d[i]), (("X", i, j), d[i])], [("R", i, j)])
        feed = [((i, k), k) for k in range(i)] + [((m, i), m) for m in range(i + 1, nt)]
        for tile, k in feed:
            q = f(*tile)
            for j in range(kt):
                out = ("R", i, j) if q == d[i] else ("T", q, i, j)
                yield ("task", q, [(("A",) + tile, q), (("X", k, j), d[k])], [out])
        for q in sorted({f(*t) for t, _ in feed} - {d[i]}):
            for j in range(kt):
                yield ("task", d[i], [(("T", q, i, j), q)], [("R", i, j)])
                yield ("flush", ("T", q, i, j))
    for k in range(nt):
        for j in range(kt):
            yield ("flush", ("X", k, j))


def replay(events, cache=True, weight=None):
    """Counter {(sender, receiver): transfers (or weight(key) per transfer)}."""
    w = weight or (lambda key: 1)
    version = Counter()
    received = set()
    pairs = Counter()
    for event in events:
        if event[0] == "flush":
            received = {r for r in received if r[0] != event[1]}
            continue
        _, node, reads, writes = event
        for key, holder in reads:
            if holder == node:
                continue
            got = (key, version[key], node)
            if cache and got in received:
                continue
            received.add(got)
            pairs[(holder, node)] += w(key)
        for key in writes:
            version[key] += 1
    return pairs


def reference_pairs(owners, cache=True, weight=None, block=DEFAULT_SLICE_BLOCK):
    """Transfers of the tiled Cholesky per (sender, receiver); ``weight(i, j)`` per tile;
    ``block``: iterations per slice turn."""
    wk = None if weight is None else (lambda key: weight(key[-2], key[-1]))
    return replay(cholesky_events(owners, block), cache, wk)


def cholesky_bytes(tile_map, n, nb, cache=True, itemsize=8):
    """P x P list of the bytes of the tiled Cholesky of an n x n matrix under tile_map."""
    rows = _extents(n, nb)
    pairs = replay(cholesky_events(tile_map.owner_maps(len(rows)), tile_map.slice_block), cache,
                   lambda key: int(rows[key[-2]] * rows[key[-1]] * itemsize))
    return as_matrix(pairs, tile_map.nodes)


def solve_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=8, which="both"):
    """P x P list of the bytes of the solve with nrhs right-hand sides (or of one pass:
    ``which``, see :func:`solve_events`)."""
    rows, cols = _extents(n, nb), _extents(nrhs, nb)

    def w(key):
        size = cols[key[2]] if key[0] == "B" else rows[key[2]]
        return int(rows[key[1]] * size * itemsize)

    pairs = replay(solve_events(tile_map.owner_maps(len(rows)), len(cols), which,
                                tile_map.slice_block), cache, w)
    return as_matrix(pairs, tile_map.nodes)


def residual_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=8):
    """P x P list of the bytes of the residual R = B - A X with nrhs right-hand sides."""
    rows, cols = _extents(n, nb), _extents(nrhs, nb)

    def w(key):
        size = cols[key[2]] if key[0] == "X" else rows[key[2]]
        return int(rows[key[1]] * size * itemsize)

    pairs = replay(residual_events(tile_map.owner_maps(len(rows)), len(cols),
                                   tile_map.slice_block), cache, w)
    return as_matrix(pairs, tile_map.nodes)


def rhs_solve_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=8, which="both"):
    """P x P list of the bytes of the right-hand-side variant of the solve (or of one
    pass: ``which``); a read of L from another node fails the oracle (L stays)."""
    rows, cols = _extents(n, nb), _extents(nrhs, nb)

    def w(key):
        assert key[0] != "A", f"the rhs variant moved a tile of L: {key}"
        i, j = key[-2:]
        return int(rows[i] * cols[j] * itemsize)

    pairs = replay(rhs_solve_events(tile_map.owner_maps(len(rows)), len(cols), which,
                                    tile_map.slice_block), cache, w)
    return as_matrix(pairs, tile_map.nodes)


def rhs_residual_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=8):
    """P x P list of the bytes of the right-hand-side variant of the residual; a read
    of A from another node fails the oracle (A stays)."""
    rows, cols = _extents(n, nb), _extents(nrhs, nb)

    def w(key):
        assert key[0] != "A", f"the rhs variant moved a tile of A: {key}"
        i, j = key[-2:]
        return int(rows[i] * cols[j] * itemsize)

    pairs = replay(rhs_residual_events(tile_map.owner_maps(len(rows)), len(cols),
                                       tile_map.slice_block), cache, w)
    return as_matrix(pairs, tile_map.nodes)


def as_matrix(pairs, nodes):
    """Counter -> nodes x nodes list of lists."""
    out = [[0] * nodes for _ in range(nodes)]
    for (a, b), v in pairs.items():
        out[a][b] += v
    return out


def _final_owner(owners, block):
    """``(NT, f)``: ``f(i, j)`` is the node that holds L[i][j] once factored (its owner
    on the slice of column j), for the graphs that read the factor."""
    so = _stack(owners)
    c, nt, _ = so.shape
    return nt, lambda i, j: int(so[slice_of(j, c, block)][i][j])


def _stack(owners):
    if isinstance(owners, list):
        return np.asarray(owners)
    owners = np.asarray(owners)
    return owners[None] if owners.ndim == 2 else owners


def _extents(n, nb):
    nt = -(-n // nb)
    return [nb] * (nt - 1) + [n - (nt - 1) * nb]


# -- the cases that the solve, residual and mixed model tests share --------------------
#: small maps of every kind, ``(name, nodes, grid, slices)``, and their test ids
SOLVE_MAPS = [("2dbc", 1, None, 1), ("2dbc", 4, "2x2", 1), ("sbc", 6, None, 1),
              ("sbc-basic", 8, None, 1), ("sbc25d", 6, None, 2), ("2dbc25d", 8, "2x2", 2),
              ("2dbc", 6, "2x3", 1)]
SOLVE_MAP_IDS = [f"{m[0]}-{m[1]}" for m in SOLVE_MAPS]
#: ``(n, nb, right-hand sides)``: several tiles and one vector, a wide B, one tile
SOLVE_SIZES = [(300, 64, 1), (250, 50, 120), (97, 97, 3)]


def over_solve_cases(sizes=SOLVE_SIZES):
    """Parametrize a model test over the receive cache on and off (``cache``), the maps
    of :data:`SOLVE_MAPS` (``name, nodes, grid, c``) and ``sizes`` (``n, nb, k``)."""
    import pytest

    def mark(test):
        test = pytest.mark.parametrize("n,nb,k", sizes)(test)
        test = pytest.mark.parametrize("name,nodes,grid,c", SOLVE_MAPS, ids=SOLVE_MAP_IDS)(test)
        return pytest.mark.parametrize("cache", [True, False], ids=["cache", "nocache"])(test)

    return mark
