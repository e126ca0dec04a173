"""The right-hand-side variant of the solve and of the residual B - A X on the runtime:
the partial sums' handles and the calls of the graphs ``solve_rhs`` and
``symm_residual_rhs`` (``starchol.runtime._graphs``). Its bytes:
:mod:`~starchol.model.rhs_volume`; the choice of a variant:
:func:`~starchol.model.rhs_volume.choose_variant`.

Every product runs on the owner of its tile of L (of A); each node sums its products
for one row block into a temporary NB x K block (one per (row block, node) pair, zero
at the start, as the 2.5D partial sums of the factorization are one per (tile, slice)),
which the row block's holder adds once (one transfer). The temporaries live for one
graph: about N K / sqrt(P) entries per node and pass on a 2D block-cyclic map, where B
itself holds N K / P.
"""
import numpy as np

from ..model.rhs_volume import (choose_variant, partial_rows, residual_bytes_by_variant,
                                solve_bytes_by_variant)
from .computations import submit_windowed


def partial_layout(owners, nodes, cols, which):
    """``(owners, cols, stored)`` of the partial sums of one graph (see
    :func:`partial_rows`): nt x (KT * P) tiles, tile (m, j * P + q) of rows(m) x
    cols(j) entries on node q; int64 owners and columns, uint8 stored mask."""
    nt, kt = len(owners), len(cols)
    mask = np.zeros((nt, nodes), dtype=bool)
    got = partial_rows(owners, which)
    mask[:, :got.shape[1]] = got
    stored = np.ascontiguousarray(np.tile(mask, (1, kt)), dtype=np.uint8)
    towners = np.ascontiguousarray(np.tile(np.arange(nodes, dtype=np.int64), (nt, kt)))
    return towners, np.repeat(np.asarray(cols, dtype=np.int64), nodes), stored


def register_partials(comp, owners, nodes, rows, cols, itemsize, which):
    """The TileHandles of the partial sums of one graph (:func:`partial_layout`),
    zero-filled on their nodes. Collective (a registration)."""
    towners, tcols, stored = partial_layout(owners, nodes, cols, which)
    mask = stored[:, :nodes].astype(bool)
    kt = len(cols)
    rank = comp.session.comm.Get_rank()
    dtype = np.float32 if itemsize == 4 else np.float64
    tiles = {(int(m), int(j) * nodes + rank): np.zeros((rows[m], cols[j]), dtype=dtype,
                                                       order="F")
             for m in np.flatnonzero(mask[:, rank]) for j in range(kt)} \
        if rank < nodes else {}
    return comp.register(towners, tiles, rows, tcols, stored=stored, elemsize=itemsize)


def solve_variant(session, tile_map, L, nrhs, which, variant):
    """``(name, summary, predicted)``: the variant of the solve (``which`` pass(es))
    to run, as :func:`~starchol.model.rhs_volume.choose_variant` picks it from the
    model under the session's cache setting, with the bytes it predicts (int64 (P, P))."""
    by = solve_bytes_by_variant(tile_map, L.n, L.nb, nrhs, cache=session.cache,
                                itemsize=L.itemsize, which=which)
    name, reason = choose_variant(by, variant)
    return name, _summary(name, reason, variant, by), by[name]


def residual_variant(session, tile_map, A, nrhs, variant):
    """``(name, summary, predicted)`` of the residual B - A X (see :func:`solve_variant`)."""
    by = residual_bytes_by_variant(tile_map, A.n, A.nb, nrhs, cache=session.cache,
                                   itemsize=A.itemsize)
    name, reason = choose_variant(by, variant)
    return name, _summary(name, reason, variant, by), by[name]


def _summary(name, reason, requested, by):
    return {"variant": name, "requested": requested, "reason": reason,
            "variants": {v: {"bytes": int(p.sum()), "busiest_link_bytes": int(p.max())}
                         for v, p in by.items()}}


def submit_solve_rhs(comp, graphs, hl, hx, L, X, nodes, which, window=0):
    """Register the partial sums and submit ``solve_rhs`` (the passes of ``which``) in
    a submission window of ``window`` steps (0: all at once; the 2 NT steps of the
    forward then the backward pass: :func:`~.computations.submit_windowed`). Returns
    this rank's task count. Collective."""
    forward, backward = which != "backward", which != "forward"
    tf = register_partials(comp, L.owners, nodes, X.rows, X.cols, X.itemsize,
                           "forward") if forward else None
    tb = register_partials(comp, L.owners, nodes, X.rows, X.cols, X.itemsize,
                           "backward") if backward else None

    def submit(k_begin, k_end, track):
        return graphs.solve_rhs(hl, hx, tf, tb, nodes, forward, backward, k_begin, k_end,
                                track)

    return submit_windowed(comp, submit, 2 * L.nt, window)


def submit_residual_rhs(comp, graphs, ha, hx, hr, A, X, nodes, window=0):
    """Register the partial sums and submit ``symm_residual_rhs`` in a submission
    window of ``window`` row tiles (0: all at once). Returns this rank's task count.
    Collective."""
    t = register_partials(comp, A.owners, nodes, X.rows, X.cols, X.itemsize, "residual")
    return submit_windowed(comp, lambda k_begin, k_end, track: graphs.symm_residual_rhs(
        ha, hx, hr, t, nodes, k_begin, k_end, track), A.nt, window)


__all__ = ["partial_layout", "register_partials", "residual_variant", "solve_variant",
           "submit_residual_rhs", "submit_solve_rhs"]
