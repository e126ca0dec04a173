"""Move tiles between one rank and their owners, tile by tile: :func:`gather_dense` and
:func:`scatter_dense`, the transport of
:meth:`~starchol.linalg.distributed.DistributedMatrix.gather` and
:meth:`~starchol.linalg.distributed.DistributedMatrix.from_numpy`.

Each tile travels as its own buffer message (``Send``/``Recv`` of the numpy array, no
pickling), cut into pieces of at most :data:`PIECE_BYTES`. A rank's part of the
matrix may therefore be any size: mpi4py's pickled ``gather``/``scatter`` send a rank's
whole part as one message, and Open MPI refuses one above 2 GiB (``MPI_ERR_ARG``; e.g.
``gather`` of N = 34000, NB = 2000 on 2 ranks, 2.15 GiB on rank 1). No rank holds more
than its tiles plus one tile in flight (the root: the dense matrix and one tile), where
the pickled path held about three copies of the root's part.

Order: the root walks the stored tiles in (i, j) order and exchanges each with its
owner; every owner walks its own tiles in the same order, so the messages pair up
without tags or any-source receives, and nothing can deadlock. The exchange runs on a
duplicate of the communicator, so no message of the caller's is ever matched. The
callers check before that every rank holds exactly the tiles the layout gives it.
"""
import numpy as np

#: largest piece of a tile sent as one message (bytes)
PIECE_BYTES = 1 << 30


def _pieces(tile):
    """Flat byte views of a contiguous tile, each at most :data:`PIECE_BYTES`."""
    flat = tile.reshape(-1, order="A").view(np.uint8)
    for start in range(0, flat.size, PIECE_BYTES):
        yield flat[start:start + PIECE_BYTES]


def _stored_keys(tiled):
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(tiled.stored))]


def gather_dense(tiled, root, out):
    """Fill ``out`` on ``root`` (a zeroed array of ``tiled.shape`` and ``tiled.dtype``,
    allocated by the caller before the ranks agreed to start; None elsewhere) with the
    dense matrix of ``tiled`` and return it (None elsewhere): every stored tile in
    place, zeros elsewhere; for a ``symmetric`` matrix the lower triangle (the strict
    upper part of the diagonal tiles is zeroed too). Collective over ``tiled.comm``;
    every rank must hold all its tiles (``tiled.dtype``)."""
    comm = tiled.comm.Dup()
    try:
        rank = comm.Get_rank()
        keys = _stored_keys(tiled)
        if rank != root:
            for key in keys:
                if tiled.owners[key] == rank:
                    tile = np.asarray(tiled.tiles[key], dtype=tiled.dtype, order="F")
                    for piece in _pieces(tile):
                        comm.Send(piece, dest=root)
            return None
        lower = tiled.kind == "symmetric"
        buf = None
        for key in keys:
            r0, r1, c0, c1 = tiled.tile_bounds(*key)
            owner = int(tiled.owners[key])
            if owner == root:
                tile = tiled.tiles[key]
            else:
                if buf is None or buf.shape != (r1 - r0, c1 - c0):
                    buf = np.empty((r1 - r0, c1 - c0), dtype=tiled.dtype, order="F")
                for piece in _pieces(buf):
                    comm.Recv(piece, source=owner)
                tile = buf
            out[r0:r1, c0:c1] = np.tril(tile) if lower and key[0] == key[1] else tile
        return out
    finally:
        comm.Free()


def scatter_dense(array, tiled, root):
    """Fill ``tiled.tiles`` (already allocated with every tile of this rank) from the
    dense ``array`` held by ``root`` (ignored elsewhere). Collective over
    ``tiled.comm``."""
    comm = tiled.comm.Dup()
    try:
        rank = comm.Get_rank()
        for key in _stored_keys(tiled):
            owner = int(tiled.owners[key])
            if rank == root:
                r0, r1, c0, c1 = tiled.tile_bounds(*key)
                block = array[r0:r1, c0:c1]
                if owner == root:
                    tiled.tiles[key][...] = block
                    continue
                for piece in _pieces(np.asarray(block, dtype=tiled.dtype, order="F")):
                    comm.Send(piece, dest=owner)
            elif owner == rank:
                for piece in _pieces(tiled.tiles[key]):
                    comm.Recv(piece, source=root)
    finally:
        comm.Free()
