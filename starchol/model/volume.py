"""Exact count of the inter-node transfers of the tiled Cholesky under any map.

Right-looking, lower, NT x NT tiles, owner-computes (every task runs on the node that
owns the tile it writes). Iteration k (on slice it[k] for 2.5D maps) runs:

    POTRF(k, k)                          writes L[k][k]
    TRSM(m, k)     m > k                 reads L[k][k], writes L[m][k]
    SYRK(n, k)     n > k                 reads L[n][k], writes A[n][n]
    GEMM(m, n, k)  m > n > k             reads L[m][k] and L[n][k], writes A[m][n]

So only panel results cross the network:

- L[k][k] is read by the TRSMs of column k: the owners of tiles (m, k), m > k.
- L[i][k], i > k, is read by SYRK(i, k) and GEMM(i, n, k), k < n < i (the owners of row i,
  columns k+1 .. i) and by GEMM(m, i, k), m > i (the owners of column i below the diagonal).

With StarPU-MPI's receive cache on (the default), one tile version is sent at most once
to each node: one transfer per (tile version, destination node). With it off, one
transfer per (task, remote operand).

2.5D maps (c slices): iteration k uses slice it[k]'s owners
(:meth:`~starchol.distributions.base.TileMap.iteration_slices`: blocks of b iterations
per slice, visiting the slices back and forth). Tile (i, j) is factored on slice it[j]; before its POTRF/TRSM, every other slice
that applied at least one update to it (slice s != it[j] with it[k] == s for some k < j)
sends its partial sum once, from its owner of
(i, j) to the factoring slice's owner (nothing when both are the same node, which only
happens when slices share nodes).

Counts are in tiles, or in bytes with :func:`transfer_pairs_bytes` (float64 tiles; the last
tile row/column is smaller when N is not a multiple of NB). The count is exact and costs
O(NT^2 + NT u^2) numpy work (u = nodes met by one tile row and column), with one Python
iteration per tile row, never per task.
"""

import numpy as np

from ..distributions.base import iteration_slices, slice_updates
from ..integers import check_int

DOUBLE_BYTES = 8


def tile_extents(n, nb):
    """Sizes (in matrix rows) of the NT = ceil(n / nb) tile rows; the last may be smaller.

    ValueError unless n and nb are integers >= 1."""
    n = check_int(n, "n", 1, error=ValueError)
    nb = check_int(nb, "nb", 1, error=ValueError)
    nt = -(-n // nb)
    sizes = np.full(nt, nb, dtype=np.int64)
    sizes[-1] = n - (nt - 1) * nb
    return sizes


def stored_tiles(nt):
    """S = NT(NT+1)/2, the tiles of the lower triangle."""
    return nt * (nt + 1) // 2


def _as_owner_stack(owners, nodes=None):
    """owners as an int64 (slices, nt, nt) array, and P (``nodes``, default max + 1).

    ValueError unless every owner of the lower triangle is a node 0 .. P-1 (a negative
    id would otherwise index the pair matrix from its end and count silently wrong)."""
    owners = np.asarray(owners)
    if owners.dtype.kind not in "iu":
        raise ValueError(f"owners must hold integer node ids, got {owners.dtype}")
    owners = owners.astype(np.int64, copy=False)
    if owners.ndim == 2:
        owners = owners[None]
    if owners.ndim != 3 or owners.shape[1] != owners.shape[2] or owners.shape[1] == 0:
        raise ValueError(f"owners must be (nt, nt) or (slices, nt, nt), nt >= 1, got "
                         f"{owners.shape}")
    low = owners[:, np.tril(np.ones(owners.shape[1:], dtype=bool))]
    lo, hi = int(low.min()), int(low.max())
    p = hi + 1 if nodes is None else int(nodes)
    if lo < 0 or hi >= p:
        raise ValueError(f"owners must be node ids 0..{p - 1} (nodes={p}), got "
                         f"{lo if lo < 0 else hi}")
    return owners, p


def _broadcast_counts(row_lab, col_lab, u, ks, i):
    """Cache on: counts[a, b] of panel tiles L[i][k], k in ``ks``, sent from a to b.

    ``row_lab`` holds the labels of the owners of row i, columns 0..i; ``col_lab`` those
    of column i below the diagonal. b reads L[i][k] iff b owns a tile of column i below
    the diagonal, or a tile (i, n) with k < n <= i, i.e. iff k < thr[b] where thr[b] = i
    for column owners and the last column of row i that b owns otherwise.
    """
    last = np.full(u, -1, dtype=np.int64)
    rev_labels, rev_first = np.unique(row_lab[::-1], return_index=True)
    last[rev_labels] = i - rev_first
    thr = last
    thr[col_lab] = i
    senders = row_lab[ks]
    prefix = np.searchsorted(ks, thr, side="left")  # senders k < thr[b]: ks[:prefix[b]]
    sorted_prefix = np.sort(prefix)
    seg = np.searchsorted(sorted_prefix, np.arange(len(ks)), side="right")
    hist = np.bincount(seg * u + senders, minlength=(u + 1) * u).reshape(u + 1, u)
    cum = np.cumsum(hist, axis=0)
    rank = np.searchsorted(sorted_prefix, prefix, side="left")
    counts = cum[rank, :].T.copy()  # [a, b]
    np.fill_diagonal(counts, 0)
    return counts


def _task_operand_counts(row_lab, col_lab, u, ks, i):
    """Cache off: counts[a, b] of (task, remote operand) transfers of L[i][k], k in ``ks``.

    L[i][k] is read once by each task SYRK(i, k), GEMM(i, n, k) (k < n < i) and
    GEMM(m, i, k) (m > i): b receives it (#{n in (k, i] : row i, col n is b's} +
    #{m > i : tile (m, i) is b's}) times, unless b sent it.
    """
    onehot = np.zeros((len(row_lab) + 1, u), dtype=np.int64)
    onehot[np.arange(1, len(row_lab) + 1), row_lab] = 1
    prefix = np.cumsum(onehot, axis=0)  # prefix[x, b] = #{n < x : row_lab[n] == b}
    col_count = np.bincount(col_lab, minlength=u)
    senders = row_lab[ks]
    # per sender k: reads by b = prefix[i+1, b] - prefix[k+1, b] + col_count[b]
    per_sender = prefix[-1][None, :] + col_count[None, :] - prefix[ks + 1]
    counts = np.zeros((u, u), dtype=np.int64)
    order = np.argsort(senders, kind="stable")
    labels_sorted = senders[order]
    starts = np.flatnonzero(np.r_[True, labels_sorted[1:] != labels_sorted[:-1]])
    if len(order):
        counts[labels_sorted[starts]] = np.add.reduceat(per_sender[order], starts, axis=0)
    np.fill_diagonal(counts, 0)
    return counts


def transfer_pairs(owners, nodes=None, cache=True, row_weights=None, progress=None,
                   it=None):
    """Transfers between every pair of nodes, from owner arrays.

    Parameters
    ----------
    owners : int array (nt, nt) or (slices, nt, nt)
        A 2D map's owners, or a 2.5D map's per slice (global node ids; only the lower
        triangle i >= j is read).
    nodes : int, optional
        P; defaults to max owner + 1. ValueError if an owner of the lower triangle is
        not a node 0 .. P-1.
    cache : bool
        StarPU-MPI receive cache on (one transfer per tile version and destination
        node) or off (one per task and remote operand).
    row_weights : int array (nt, nt), optional
        ``w``: a transfer of tile (i, j) counts ``w[i, j]`` (e.g. its bytes); default 1
        (counts tiles).
    progress : callable(rows_done, nt), optional
        Called as tile rows are counted.
    it : int array (nt,), optional
        The slice of each iteration (the map's ``iteration_slices(nt)``); default
        :func:`~starchol.distributions.base.iteration_slices` with the default block.

    Returns
    -------
    int64 array (P, P)
        Entry [a, b] is what node a sends to node b (tiles, or the unit of
        ``row_weights``).
    """
    owners, p = _as_owner_stack(owners, nodes)
    c, nt, _ = owners.shape
    it = _check_iterations(it, nt, c)
    pairs = np.zeros((p, p), dtype=np.int64)
    weight = (lambda i, j: 1) if row_weights is None else (lambda i, j: int(row_weights[i, j]))
    counter = _broadcast_counts if cache else _task_operand_counts
    for i in range(nt):
        for s in range(c):
            o = owners[s]
            ks = np.flatnonzero(it[:i] == s)
            diag_here = it[i] == s
            if not len(ks) and not diag_here:
                continue
            labels, inv = np.unique(np.concatenate([o[i, :i + 1], o[i + 1:, i]]),
                                    return_inverse=True)
            u = len(labels)
            row_lab, col_lab = inv[:i + 1], inv[i + 1:]
            if len(ks):
                # panel tiles L[i][k], k < i, all of one size in row i
                counts = counter(row_lab, col_lab, u, ks, i)
                pairs[np.ix_(labels, labels)] += counts * weight(i, 0)
            if diag_here and len(col_lab):
                # L[i][i] goes to the TRSMs of column i
                src = row_lab[i]
                if cache:
                    dst = np.unique(col_lab)
                    dst = dst[dst != src]
                    pairs[labels[src], labels[dst]] += weight(i, i)
                else:
                    got = np.bincount(col_lab, minlength=u)
                    got[src] = 0
                    pairs[labels[src], labels] += got * weight(i, i)
        if progress is not None:
            progress(i + 1, nt)
    if c > 1:
        _add_reduction_pairs(owners, p, pairs, it, row_weights)
    return pairs


def _check_iterations(it, nt, c):
    """The slice of each of the nt iterations as int64 (nt,); ValueError unless each is
    a slice 0 .. c-1."""
    if it is None:
        return iteration_slices(nt, c)
    it = np.asarray(it)
    if it.shape != (nt,) or it.dtype.kind not in "iu" or (nt and (
            int(it.min()) < 0 or int(it.max()) >= c)):
        raise ValueError(f"it must hold the slice (0..{c - 1}) of each of the {nt} "
                         f"iterations, got {it!r}")
    return it.astype(np.int64, copy=False)


def _add_reduction_pairs(owners, p, out, it, row_weights=None):
    """2.5D: partial sums sent to the factoring slice, one per (tile, other updating slice),
    added into ``out`` (a C-contiguous int64 (p, p) array); ``it``: each iteration's
    slice."""
    c, nt, _ = owners.shape
    i, j = np.tril_indices(nt)
    home = it[j]
    updated = slice_updates(it, c) > 0
    target = owners[home, i, j]
    w = np.ones(len(i), dtype=np.int64) if row_weights is None else \
        np.asarray(row_weights[i, j], dtype=np.int64)
    keys, weights = [], []
    for s in range(c):
        sender = owners[s, i, j]
        # a partial sum already on the factoring node (slices that share nodes) is added
        # in place: nothing moves
        sends = updated[s, j] & (s != home) & (sender != target)
        keys.append(sender[sends].astype(np.int64) * p + target[sends])
        weights.append(w[sends])
    # at most c NT^2 / 2 (sender, receiver) keys: summed sparse, then placed, so that no
    # dense P x P temporary is made per slice (P = 10^4: 800 MB each)
    keys, weights = np.concatenate(keys), np.concatenate(weights)
    uniq, inv = np.unique(keys, return_inverse=True)
    sums = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(sums, inv, weights)
    out.reshape(-1)[uniq] += sums      # a view: out is C-contiguous


def transfer_pairs_tiles(tile_map, nt, cache=True, progress=None):
    """Tiles sent between every pair of nodes for an nt x nt tiled Cholesky under ``tile_map``.

    Returns an int64 array (P, P), sender row, receiver column.
    """
    return transfer_pairs(tile_map.owner_maps(nt), tile_map.nodes, cache=cache,
                          progress=progress, it=tile_map.iteration_slices(nt))


def tile_bytes(n, nb, itemsize=DOUBLE_BYTES):
    """Bytes of every tile (i, j) of an n x n matrix in nb x nb tiles: int64 (nt, nt).

    ``itemsize`` is the bytes of one entry: 8 (float64, the default) or 4 (float32)."""
    ext = tile_extents(n, nb)
    return np.outer(ext, ext) * int(itemsize)


def transfer_pairs_bytes(tile_map, n, nb, cache=True, progress=None, itemsize=DOUBLE_BYTES):
    """Bytes sent between every pair of nodes by the factorization of an n x n matrix in
    nb x nb tiles (``itemsize`` bytes per entry: 8 for float64, 4 for float32).

    Tile (i, j) weighs rows(i) * cols(j) * itemsize bytes; the last tile row/column holds
    n - (NT-1) * nb rows. Returns an int64 array (P, P), sender row, receiver column.
    """
    nt = len(tile_extents(n, nb))
    return transfer_pairs(tile_map.owner_maps(nt), tile_map.nodes, cache=cache,
                          row_weights=tile_bytes(n, nb, itemsize), progress=progress,
                          it=tile_map.iteration_slices(nt))


def factor_owners(tile_map, nt):
    """F[i, j]: the node that holds L[i][j] after the factorization, int64 (nt, nt).

    For a 2D map, the map's owner; for a 2.5D map, the owner of (i, j) in the slice that
    factors column j (that of iteration j, ``tile_map.iteration_slices(nt)[j]``).
    """
    so = np.asarray(tile_map.owner_maps(nt))
    cols = tile_map.iteration_slices(nt)
    return np.ascontiguousarray(so[cols[None, :], np.arange(nt)[:, None],
                                   np.arange(nt)[None, :]], dtype=np.int64)


def _rhs_graph(tile_map, n, nb, nrhs, itemsize):
    """What the solve and its residual share: tile extents of the n rows and nrhs
    columns, nodes P, d(i) = F[i, i] (where row tile i of B/X/R lives), and for every
    strictly lower tile (i, j) of the factor's owners F: its owner, d(i), d(j) and its
    size in bytes (``itemsize`` bytes per entry)."""
    rows = tile_extents(n, nb)
    cols = tile_extents(nrhs, nb)
    f = factor_owners(tile_map, len(rows))
    d = np.diag(f).copy()
    i, j = np.tril_indices(len(rows), -1)
    return (rows, cols, int(tile_map.nodes), d, f[i, j], d[i], d[j],
            rows[i] * rows[j] * int(itemsize))


def solve_transfer_pairs_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES,
                               which="both"):
    """Bytes sent between every pair of nodes by the solve L L^T X = B (int64 (P, P)),
    or by one of its passes: ``which`` is ``"both"``, ``"forward"`` (L Y = B alone) or
    ``"backward"`` (L^T X = B alone).

    B is n x nrhs in nb x nb tiles; its row tile i lives on d(i) = F[i, i], the holder of
    L's diagonal tile (:func:`factor_owners`), and every task runs on the owner of the B
    tile it writes. Forward, k = 0..NT-1: TRSM of B[k] (local), then for m > k,
    B[m] -= L[m][k] B[k] on d(m). Backward, k = NT-1..0: TRSM of B[k], then for m < k,
    B[m] -= L[k][m]^T B[k] on d(m). So L[i][j] (i > j) goes to d(i) (forward) and to
    d(j) (backward); B[k] goes, after its forward TRSM, to d(m) for m > k, and after its
    backward TRSM to d(m) for m < k.

    Cache on: one transfer per (tile version, destination): L[i][j] once to each of
    {d(i), d(j)} other than its holder (the solve keeps L's received copies through
    both passes and drops them at the end); B[k] once to each distinct d(m) other than
    d(k), per pass (B's copies are dropped between the passes: its value changes).
    Cache off: one transfer per (task, remote operand): L[i][j] KT times to d(i) and KT
    times to d(j), B[k] once per task m. KT = ceil(nrhs / nb) tile columns of B.
    One pass alone sends its half of each: L[i][j] to d(i) (forward) or to d(j)
    (backward), B[k] to its readers of that pass. Cache off, the two passes add up to
    ``"both"``; cache on, ``"both"`` sends L[i][j] once where d(i) = d(j).
    """
    check_int(nrhs, "nrhs", 1, error=ValueError)
    if which not in ("both", "forward", "backward"):
        raise ValueError(f"which must be 'both', 'forward' or 'backward', got {which!r}")
    forward, backward = which != "backward", which != "forward"
    rows, cols, p, d, src, to_i, to_j, tbytes = _rhs_graph(tile_map, n, nb, nrhs, itemsize)
    nt, kt = len(rows), len(cols)
    pairs = np.zeros(p * p, dtype=np.int64)
    lbytes = tbytes
    if cache:
        w_i = np.where(to_i != src, lbytes, 0)
        w_j = np.where((to_j != src) & ((to_j != to_i) | (not forward)), lbytes, 0)
    else:
        w_i = np.where(to_i != src, lbytes * kt, 0)
        w_j = np.where(to_j != src, lbytes * kt, 0)
    w_i, w_j = w_i * forward, w_j * backward
    pairs += np.bincount(src * p + to_i, weights=w_i, minlength=p * p).astype(np.int64)
    pairs += np.bincount(src * p + to_j, weights=w_j, minlength=p * p).astype(np.int64)
    bcols = int(cols.sum()) * int(itemsize)      # bytes of one B row tile per row
    for k in range(nt):
        for dests in (d[k + 1:] if forward else d[:0],     # forward readers
                      d[:k] if backward else d[:0]):       # backward readers
            if cache:
                dests = np.unique(dests)
            dests = dests[dests != d[k]]
            np.add.at(pairs, d[k] * p + dests, rows[k] * bcols)
    return pairs.reshape(p, p)


def residual_transfer_pairs_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES):
    """Bytes sent between every pair of nodes by the residual R = B - A X of a solve
    (``Factor.solve_residual``, the ``symm_residual`` graph), int64 (P, P).

    A is n x n by its lower tiles on the factor's owners F (:func:`factor_owners`); X,
    B and R are n x nrhs, row tile i on d(i) = F[i, i]. Row tile i of R takes A[i][k]
    X[k] (k <= i) and A[k][i]^T X[k] (k > i) on d(i). So A[i][j] (i > j) goes to d(i)
    and d(j), the diagonal tiles stay, and X[k] goes to every d(i).

    Cache on: A[i][j] once to each of {d(i), d(j)} other than F[i, j]; X[k] once to each
    distinct d(i) other than d(k). Cache off: one transfer per (task, remote operand):
    A[i][j] KT times to d(i) and KT times to d(j) (KT tile columns of X), X[k]'s tiles
    once per row tile i with d(i) != d(k). ``itemsize``: bytes per entry of A and X.
    """
    check_int(nrhs, "nrhs", 1, error=ValueError)
    rows, cols, p, d, src, to_i, to_j, tbytes = _rhs_graph(tile_map, n, nb, nrhs, itemsize)
    nt, kt = len(rows), len(cols)
    pairs = np.zeros(p * p, dtype=np.int64)
    abytes = tbytes * (1 if cache else kt)
    w_i = np.where(to_i != src, abytes, 0)
    w_j = np.where((to_j != src) & ((to_j != to_i) | (not cache)), abytes, 0)
    pairs += np.bincount(src * p + to_i, weights=w_i, minlength=p * p).astype(np.int64)
    pairs += np.bincount(src * p + to_j, weights=w_j, minlength=p * p).astype(np.int64)
    bcols = int(cols.sum()) * int(itemsize)      # bytes of X's row tile k per row
    for k in range(nt):
        dests = np.unique(d) if cache else d
        dests = dests[dests != d[k]]
        np.add.at(pairs, d[k] * p + dests, rows[k] * bcols)
    return pairs.reshape(p, p)


# -- closed forms --------------------------------------------------------------------------
def leading_factor(tile_map):
    """The constant F of the leading term D ~ S * F (transfers per stored tile), or None.

    The rule lives with each map: :meth:`starchol.distributions.TileMap.leading_factor`.
    """
    return tile_map.leading_factor()


def leading_term_tiles(tile_map, nt):
    """Closed-form leading term of the transfers, in tiles: S * :func:`leading_factor`."""
    f = leading_factor(tile_map)
    return None if f is None else stored_tiles(nt) * f
