"""The task graphs of a run, recorded without running them (for the simulator).

The graphs come from the one place that defines them, the compiled loops of
``starchol.runtime._graphs`` (Cholesky 2D/2.5D, solve): the binding's recorder
(``_binding.record_start``) turns their task insertions and cache flushes into records
instead of StarPU calls, for every node at once, and no StarPU is started. This module
sets the loops up as :func:`~starchol.linalg.cholesky.cholesky` and
:meth:`~starchol.linalg.cholesky.Factor.solve` do (the same owners, stored tiles and
2.5D partial sums) and returns a :class:`TaskGraph`.

Tiles are (i, j) = (tile row, tile column), lower triangle i >= j. Sizes are in
entries (rows, cols), bytes, flops.
"""
from dataclasses import dataclass

import numpy as np

from .cholesky import partial_mask
from .distributed import layout
from .rhs_solve import partial_layout
from ..model.counts import KERNEL_OF, KERNELS, codelet_flops, operation_flops
from ..model.volume import DOUBLE_BYTES, tile_extents

#: a record's columns: see pyx/starchol_sim.h (key, priority, then 3 x (data, mode, owner),
#: then the task's iteration: the graphs are recorded with ``track``, for the simulated
#: submission window)
REC_WIDTH = 12


@dataclass
class TaskGraph:
    """A recorded task graph.

    Attributes
    ----------
    records : int64 (R, REC_WIDTH)
        Tasks and cache flushes in submission order (pyx/starchol_sim.h).
    codelet : int32 (T,)
        Per task (flushes skipped), its codelet: an index into ``codelet_names``
        (``gemm0``, ``trsm_fwd``, ...) and ``kernel_names`` (its kernel among
        :data:`KERNELS`).
    flops : float64 (T,)
        Per task, its flops.
    node : int64 (T,)
        Per task, the node that runs it (the owner of the tile it writes).
    data_bytes : int64 (D,)
        Per datum (a tile of one matrix or 2.5D partial copy), bytes of one transfer.
    nodes : int
        P.
    flops_total : float
        Flops of the operation (N^3/3 for the Cholesky), for GFlop/s.
    task_tile : int64 (T, 2), optional
        Per task, the tile (i, j) it writes, in its matrix (tile row, column).
    """
    records: np.ndarray
    codelet: np.ndarray
    codelet_names: list
    kernel_names: list
    flops: np.ndarray
    node: np.ndarray
    data_bytes: np.ndarray
    nodes: int
    flops_total: float
    task_tile: np.ndarray = None

    @property
    def tasks(self):
        return len(self.flops)

    def kernel_of_tasks(self):
        """Per task, its kernel's index in :data:`KERNELS` (int64 (T,))."""
        table = np.array([KERNELS.index(k) for k in self.kernel_names], dtype=np.int64)
        return table[self.codelet] if len(table) else np.zeros(0, dtype=np.int64)

    def chameleon_records(self):
        """The records with Chameleon's priorities (its ``compute/pzpotrf.c``) instead of
        starchol's, a new int64 array. The Cholesky's updates of step k: SYRK into tile
        (n, n) gets ``2 NT - 2k - n`` and GEMM into (m, n), m > n, ``2 NT - 2k - m - n``
        (Chameleon ranks them by anti-diagonal), where starchol's loops give both one
        priority per tile column, ``2 NT - 2k - 2n``: they move by n and by n - m. POTRF
        (``2 NT - 2k``), TRSM (``2 NT - 2k - m``) and the other graphs' tasks keep
        theirs."""
        if self.task_tile is None:
            raise ValueError("the graph has no tile indices (task_tile): record it with "
                             "record_cholesky")
        out = np.array(self.records, dtype=np.int64, copy=True)
        rows = np.flatnonzero(out[:, 0] != 0)           # the tasks' records, in order
        m, n = self.task_tile[:, 0], self.task_tile[:, 1]
        for names, move in ((("gemm", "gemm0"), n - m), (("syrk", "syrk0"), n)):
            sel = np.isin(self.codelet, [x for x, name in enumerate(self.codelet_names)
                                         if name in names])
            out[rows[sel], 1] += move[sel]
        return out


class _Data:
    """The data of the handles made during one recording: rows, cols per data id."""

    def __init__(self):
        self.rows, self.cols, self.tiles = [], [], []

    def add(self, handles, rows, cols):
        # ids count up from 0 over the handles of a recording: id = first + i * nt + j
        if handles.tiles["first_id"] != sum(len(r) for r in self.rows):
            raise RuntimeError("the recorder's data ids are not consecutive")
        self.rows.append(np.repeat(rows, len(cols)))
        self.cols.append(np.tile(cols, len(rows)))
        self.tiles.append(np.stack([np.repeat(np.arange(len(rows)), len(cols)),
                                    np.tile(np.arange(len(cols)), len(rows))], axis=1))

    def arrays(self):
        return np.concatenate(self.rows), np.concatenate(self.cols)

    def tile_indices(self):
        """int64 (D, 2): each datum's tile (i, j)."""
        return np.concatenate(self.tiles).astype(np.int64)


def _backend():
    from ..runtime import _binding, _graphs, _kernels

    return _binding, _graphs, _kernels


def _finish(records, itemsize, data, nodes, flops_total):
    _, _, k = _backend()
    names = {v: n for n, v in k.graph_codelet_addresses("s" if itemsize == 4 else "d").items()}
    tasks = records[records[:, 0] != 0]
    keys, which = np.unique(tasks[:, 0], return_inverse=True)
    key_names = [names[int(key)] for key in keys]
    rows, cols = data.arrays()
    modes, ids, owners = tasks[:, [3, 6, 9]], tasks[:, [2, 5, 8]], tasks[:, [4, 7, 10]]
    wcol = np.argmax((modes & 2) != 0, axis=1)       # the operand the task writes
    t = np.arange(len(tasks))
    w = ids[t, wcol]
    wr, wc = rows[w].astype(np.float64), cols[w].astype(np.float64)
    r0 = cols[np.maximum(ids[:, 0], 0)].astype(np.float64)   # columns of the first operand
    r1 = rows[np.maximum(ids[:, 1], 0)].astype(np.float64)   # rows of the second
    flops = np.zeros(len(tasks))
    for x, name in enumerate(key_names):
        sel = which == x
        flops[sel] = codelet_flops(name, wr, wc, r0, r1)[sel]
    return TaskGraph(records=np.ascontiguousarray(records),
                     codelet=which.astype(np.int32), codelet_names=key_names,
                     kernel_names=[KERNEL_OF[n] for n in key_names], flops=flops,
                     node=np.asarray(owners[t, wcol], dtype=np.int64),
                     data_bytes=(rows * cols * int(itemsize)).astype(np.int64),
                     nodes=int(nodes), flops_total=float(flops_total),
                     task_tile=data.tile_indices()[w])


def record_cholesky(tile_map, n, nb, itemsize=DOUBLE_BYTES, flush=True):
    """The task graph of ``cholesky(A, tile_map)`` on an n x n matrix in nb x nb tiles,
    as the runtime would run it (every node's tasks). ``flush``: drop received copies
    once read (the default of :func:`~starchol.linalg.cholesky.cholesky`)."""
    b, g, _ = _backend()
    rows = tile_extents(n, nb)
    nt = len(rows)
    so = np.ascontiguousarray(tile_map.owner_maps(nt), dtype=np.int64)
    c = so.shape[0]
    it = np.ascontiguousarray(tile_map.iteration_slices(nt), dtype=np.int64)
    owners, stored = layout(tile_map, n, nb, "symmetric")
    data = _Data()
    b.record_start()
    try:
        home = b.TileHandles.recording(np.ascontiguousarray(owners, dtype=np.int64), rows,
                                       rows, stored, itemsize)
        data.add(home, rows, rows)
        partials = []
        for s in range(c if c > 1 else 0):
            h = b.TileHandles.recording(so[s], rows, rows, partial_mask(nt, c, s, it),
                                        itemsize)
            data.add(h, rows, rows)
            partials.append(h)
        info = np.zeros(nt, dtype=np.int64)
        g.cholesky(home, partials, so, it, info, flush, 0, nt, False, True)
    finally:
        records, _ = b.record_stop()
    return _finish(records, itemsize, data, tile_map.nodes,
                   operation_flops("cholesky", n))


def record_solve(tile_map, n, nb, nrhs, itemsize=DOUBLE_BYTES, which="both",
                 variant="factor"):
    """The task graph of the solve L L^T X = B after ``cholesky`` (``which``: ``"both"``,
    ``"forward"`` or ``"backward"``), B n x nrhs, as :meth:`Factor.solve` runs it with
    ``variant`` ``"factor"`` (the ``solve`` graph) or ``"rhs"`` (``solve_rhs``, with its
    partial sums: :func:`~starchol.linalg.rhs_solve.partial_rows`)."""
    if which not in ("both", "forward", "backward"):
        raise ValueError(f"which must be 'both', 'forward' or 'backward', got {which!r}")
    b, g, _ = _backend()
    rows = tile_extents(n, nb)
    cols = tile_extents(nrhs, nb)
    lo, ls = layout(tile_map, n, nb, "symmetric")
    bo, bs = layout(tile_map, n, nb, "rhs", nrhs)
    data = _Data()
    b.record_start()
    try:
        hl = b.TileHandles.recording(np.ascontiguousarray(lo, dtype=np.int64), rows, rows,
                                     ls, itemsize)
        data.add(hl, rows, rows)
        hb = b.TileHandles.recording(np.ascontiguousarray(bo, dtype=np.int64), rows, cols,
                                     bs, itemsize)
        data.add(hb, rows, cols)
        if variant == "rhs":
            parts = {}
            for pass_ in ("forward", "backward"):
                if which in ("both", pass_):
                    po, pc, pm = partial_layout(lo, tile_map.nodes, cols, pass_)
                    parts[pass_] = b.TileHandles.recording(po, rows, pc, pm, itemsize)
                    data.add(parts[pass_], rows, pc)
            g.solve_rhs(hl, hb, parts.get("forward"), parts.get("backward"),
                        tile_map.nodes, forward=which != "backward",
                        backward=which != "forward", track=True)
        else:
            g.solve(hl, hb, forward=which != "backward", backward=which != "forward",
                    track=True)
    finally:
        records, _ = b.record_stop()
    operation = {"both": "solve", "forward": "forward_solve", "backward": "backward_solve"}
    return _finish(records, itemsize, data, tile_map.nodes,
                   operation_flops(operation[which], n, nrhs))
