"""Exact inter-node bytes of the right-hand-side variant of the solve and of the residual
B - A X, and the choice between the two variants of each.

Two graphs solve L L^T X = B (and compute R = B - A X) on a distributed factor:

- ``"factor"`` (:func:`~starchol.linalg.volume.solve_transfer_pairs_bytes`,
  :func:`~starchol.linalg.volume.residual_transfer_pairs_bytes`): every task runs where
  its block of B lives, so the tiles of L (of A) travel there;
- ``"rhs"`` (this module; the graphs ``solve_rhs`` and ``symm_residual_rhs`` of
  ``starchol.runtime._graphs``): L (A) stays in place and the blocks of B and NB x K
  partial sums travel, as in ScaLAPACK's ``pdpotrs`` and SLATE.

The right-hand-side variant, with F[i, j] the holder of L[i][j] (the factoring copy:
:func:`~starchol.linalg.volume.factor_owners`; for a 2.5D map the owner of (i, j) in the
slice that factored column j, the only copy left after the factorization) and
d(i) = F[i, i] the holder of row block i of B, X and R (as for the ``"factor"``
variant: a ``DistributedMatrix`` of kind ``"rhs"``):

Forward L Y = B, k = 0 .. NT-1 (on d(k): the partial sums of row k, then the TRSM):

    for every node q != d(k) that owns a tile L[k][j], j < k:   B[k] += T_q[k]   (ADD)
    B[k] = L[k][k]^-1 B[k]                                                     (TRSM)
    for m > k, on q = F[m, k]:   T_q[m] -= L[m][k] B[k]   (B[m] itself when q = d(m))

Backward L^T X = Y, k = NT-1 .. 0: the same with the column k of L in place of its row:
the partial sums of row k come from the owners of L[m][k], m > k, and X[k] goes to the
owners of L[k][m], m < k (``T_q[m] -= L[k][m]^T X[k]``).

Residual R = B - A X (R starts as a copy of B), row i on d(i): R[i] -= A[i][i] X[i]
on d(i) (the diagonal tile with both triangles), then each lower tile A[i][k], k < i,
on its holder q = F[i, k], gives T_q[i] -= A[i][k] X[k] (row i) and
T_q[k] -= A[i][k]^T X[i] (row k: the upper triangle read from the lower tile), and
each row i adds its partial sums, one per node q != d(i) in cross(i), the owners of
row i (L[i][k], k < i) and of column i (L[m][i], m > i).

T_q[i] is a temporary NB x K block on q (zero until its first update), one per
(row block, node) pair: every node sums its own products before anything leaves it,
and one transfer per (row block, node) reaches the holder. So only blocks of NB x K
entries move (rows(i) x K x itemsize bytes each):

- forward: Y[k] from d(k) to each node of column k below the diagonal (cache on: once
  per node; cache off: once per task, i.e. per tile L[m][k] whose owner is not d(k)),
  and one partial sum of row k from each other node of row k left of the diagonal;
- backward: the same with rows and columns exchanged;
- residual: X[k] to each node of cross(k) (cache off: per task, one for each tile of
  row k and of column k whose owner is not d(k)), one partial sum of row i from each
  other node of cross(i).

B's received copies are dropped between the passes (its values change), so the two
passes add up to the whole solve, with the cache on or off. A partial sum is read once
(by its ADD): the same with the cache on or off.

Work: every product runs where its tile of L (of A) lives, so the flops spread over
the nodes as the factor's tiles do; d(i) does the NT TRSMs and the ADDs only.

The choice (:func:`choose_variant`): the variant with fewer bytes on the busiest link
(the largest entry of the P x P matrix), then fewer bytes in all, ``"factor"`` on a tie
(one node: both graphs are the same tasks).
"""
import numpy as np

from ..integers import check_int
from .volume import (DOUBLE_BYTES, factor_owners, residual_transfer_pairs_bytes,
                     solve_transfer_pairs_bytes, tile_extents)

#: the variants of the solve and of the residual B - A X
SOLVE_VARIANTS = ("factor", "rhs")


def check_variant(variant, auto=True):
    """ValueError unless ``variant`` is one of :data:`SOLVE_VARIANTS` (or ``"auto"``)."""
    allowed = (("auto",) if auto else ()) + SOLVE_VARIANTS
    if not isinstance(variant, str) or variant not in allowed:
        raise ValueError(f"variant must be one of {', '.join(map(repr, allowed))}, got "
                         f"{variant!r}")
    return variant


def _rhs_frame(tile_map, n, nb, nrhs, itemsize):
    """(F, d, P, bytes of the NB x K block of each row tile)."""
    check_int(nrhs, "nrhs", 1, error=ValueError)
    rows = tile_extents(n, nb)
    f = factor_owners(tile_map, len(rows))
    return f, np.diag(f).copy(), int(tile_map.nodes), rows * int(nrhs) * int(itemsize)


def _send(pairs, p, src, dests, nbytes):
    """Add ``nbytes`` to pairs[src, dest] for each dest in ``dests`` (repeats count)."""
    np.add.at(pairs, src * p + np.asarray(dests, dtype=np.int64), nbytes)


def _pass_bytes(f, d, p, block, readers_of, writers_of, cache):
    """One triangular pass: block k goes from d(k) to its readers (``readers_of(k)``:
    the owners of the tiles that read it, one per task), then one partial sum of row k
    from each distinct writer (``writers_of(k)``) other than d(k)."""
    nt = len(d)
    pairs = np.zeros(p * p, dtype=np.int64)
    for k in range(nt):
        readers = readers_of(k)
        readers = np.unique(readers) if cache else readers
        _send(pairs, p, d[k], readers[readers != d[k]], block[k])
        writers = np.unique(writers_of(k))
        writers = writers[writers != d[k]]
        np.add.at(pairs, writers * p + d[k], block[k])
    return pairs


def partial_rows(owners, which):
    """bool (nt, P'): whether node q writes a partial sum of row block m in one graph:
    ``which`` ``"forward"`` (q owns some L[m][k], k < m), ``"backward"`` (some L[k][m],
    k > m) or ``"residual"`` (either), and q is not d(m) = owners[m, m]. ``owners``: the
    factor's owners F, int (nt, nt); P' = max owner + 1."""
    f = np.asarray(owners, dtype=np.int64)
    nt, p = f.shape[0], int(f.max()) + 1 if f.size else 1
    out = np.zeros((nt, p), dtype=bool)
    for m in range(nt):
        parts = []
        if which in ("forward", "residual"):
            parts.append(f[m, :m])
        if which in ("backward", "residual"):
            parts.append(f[m + 1:, m])
        out[m, np.concatenate(parts)] = True
        out[m, f[m, m]] = False
    return out


def partial_sum_bytes(tile_map, n, nb, nrhs, which="both", itemsize=DOUBLE_BYTES):
    """Bytes of the partial sums each node holds during one right-hand-side graph
    (``which``: ``"both"`` passes of the solve, registered together, ``"forward"``,
    ``"backward"`` or ``"residual"``), int64 (P,): rows(m) x K x ``itemsize`` per
    (row block m, node) pair of :func:`partial_rows`."""
    f, d, p, block = _rhs_frame(tile_map, n, nb, nrhs, itemsize)
    out = np.zeros(p, dtype=np.int64)
    for w in (("forward", "backward") if which == "both" else (which,)):
        rows = partial_rows(f, w)
        out[:rows.shape[1]] += (rows * block[:, None]).sum(axis=0)
    return out


def rhs_solve_transfer_pairs_bytes(tile_map, n, nb, nrhs, cache=True,
                                   itemsize=DOUBLE_BYTES, which="both"):
    """Bytes sent between every pair of nodes by the right-hand-side variant of the
    solve L L^T X = B (int64 (P, P), sender row, receiver column), or of one pass
    (``which``: ``"both"``, ``"forward"`` or ``"backward"``). See the module docstring.

    Forward: Y[k] (rows(k) x K x ``itemsize`` bytes) from d(k) to the owners of
    L[m][k], m > k (cache on: each distinct node once; off: once per tile), and from
    each distinct owner of L[k][j], j < k, other than d(k), one partial sum to d(k).
    Backward: X[k] to the owners of L[k][m], m < k, partial sums of row k from the
    owners of L[m][k], m > k.
    """
    if which not in ("both", "forward", "backward"):
        raise ValueError(f"which must be 'both', 'forward' or 'backward', got {which!r}")
    f, d, p, block = _rhs_frame(tile_map, n, nb, nrhs, itemsize)
    pairs = np.zeros(p * p, dtype=np.int64)
    if which != "backward":
        pairs += _pass_bytes(f, d, p, block, lambda k: f[k + 1:, k], lambda k: f[k, :k],
                             cache)
    if which != "forward":
        pairs += _pass_bytes(f, d, p, block, lambda k: f[k, :k], lambda k: f[k + 1:, k],
                             cache)
    return pairs.reshape(p, p)


def rhs_residual_transfer_pairs_bytes(tile_map, n, nb, nrhs, cache=True,
                                      itemsize=DOUBLE_BYTES):
    """Bytes sent between every pair of nodes by the right-hand-side variant of the
    residual R = B - A X (the ``symm_residual_rhs`` graph), int64 (P, P).

    X[k] goes from d(k) to the owners of cross(k) = row k left of the diagonal and
    column k below it (cache on: each distinct node once; off: once per tile, each tile
    of A reads X twice, once per triangle), and each row i receives one partial sum from
    each distinct node of cross(i) other than d(i). ``itemsize``: bytes per entry.
    """
    f, d, p, block = _rhs_frame(tile_map, n, nb, nrhs, itemsize)

    def cross(k):
        return np.concatenate([f[k, :k], f[k + 1:, k]])

    return _pass_bytes(f, d, p, block, cross, cross, cache).reshape(p, p)


#: the exact model of the solve's bytes under each variant (the one home of this choice:
#: :func:`solve_bytes_by_variant`, :func:`~starchol.model.operations.predicted_pairs_bytes`)
SOLVE_MODELS = {"factor": solve_transfer_pairs_bytes, "rhs": rhs_solve_transfer_pairs_bytes}


def solve_bytes_by_variant(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES,
                           which="both"):
    """``{"factor": pairs, "rhs": pairs}``: the bytes of the solve (or of one pass,
    ``which``) under each variant (:data:`SOLVE_MODELS`), int64 (P, P) arrays."""
    return {v: SOLVE_MODELS[v](tile_map, n, nb, nrhs, cache=cache, itemsize=itemsize,
                               which=which) for v in SOLVE_VARIANTS}


def residual_bytes_by_variant(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES):
    """``{"factor": pairs, "rhs": pairs}``: the bytes of the residual B - A X under
    each variant, int64 (P, P) arrays."""
    return {"factor": residual_transfer_pairs_bytes(tile_map, n, nb, nrhs, cache=cache,
                                                    itemsize=itemsize),
            "rhs": rhs_residual_transfer_pairs_bytes(tile_map, n, nb, nrhs, cache=cache,
                                                     itemsize=itemsize)}


def busiest_link_bytes(pairs):
    """The bytes on the busiest link: the largest entry of a (P, P) pair matrix."""
    pairs = np.asarray(pairs)
    return int(pairs.max()) if pairs.size else 0


def choose_variant(by_variant, variant="auto"):
    """The variant to run and why: ``(name, reason)``.

    ``by_variant``: ``{"factor": pairs, "rhs": pairs}`` (bytes). ``"auto"`` takes the
    variant with fewer bytes on the busiest link, then fewer bytes in all, and
    ``"factor"`` on a tie; a forced ``variant`` is kept (the reason says so)."""
    check_variant(variant)
    keys = {v: (busiest_link_bytes(p), int(np.asarray(p).sum()))
            for v, p in by_variant.items()}
    figures = ", ".join(f"{v} {keys[v][0]} bytes on the busiest link ({keys[v][1]} in all)"
                        for v in SOLVE_VARIANTS)
    if variant != "auto":
        return variant, f"forced (variant={variant!r}); model: {figures}"
    best = min(SOLVE_VARIANTS, key=lambda v: (keys[v], SOLVE_VARIANTS.index(v)))
    return best, f"auto: fewer bytes on the busiest link; model: {figures}"


def variant_summary(by_variant, variant="auto"):
    """The JSON-ready description of a choice: ``variant``, ``reason``, and per variant
    ``bytes`` (all pairs) and ``busiest_link_bytes``."""
    name, reason = choose_variant(by_variant, variant)
    return {"variant": name, "requested": variant, "reason": reason,
            "variants": {v: {"bytes": int(np.asarray(p).sum()),
                             "busiest_link_bytes": busiest_link_bytes(p)}
                         for v, p in by_variant.items()}}


__all__ = ["SOLVE_VARIANTS", "busiest_link_bytes", "check_variant", "choose_variant",
           "partial_rows", "partial_sum_bytes",
           "residual_bytes_by_variant", "rhs_residual_transfer_pairs_bytes",
           "rhs_solve_transfer_pairs_bytes", "solve_bytes_by_variant", "variant_summary"]
