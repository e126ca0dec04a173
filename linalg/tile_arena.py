"""One contiguous block of memory for a rank's tiles: :func:`packed`.

A tile kernel at NB = 256 reads three 512 KiB tiles that are mostly not in cache. With
each tile its own numpy array, every tile lies on 4 KiB pages (numpy asks the kernel for
transparent huge pages only for allocations of 4 MiB or more), and the cold kernels pay
for the TLB misses: a 256 x 256 dgemm on cold tiles took 0.82 ms on 4 KiB pages and
0.76 ms on 2 MiB pages on the 2-core test machine (OpenBLAS, one thread). So the
constructors of :class:`~starchol.linalg.distributed.DistributedMatrix` put all local
tiles in one arena aligned to 2 MiB, in which every tile is a Fortran-ordered view.

A tile of a page or more starts on a page boundary, so that no two such tiles share a
page: GPU runs page-lock every tile on its own (``starpu_memory_pin``, i.e.
``cudaHostRegister``), and a page cannot be registered twice. A tile whose size is a
multiple of the page size (NB = 256 in float64: 512 KiB) is followed at once by the
next one; other tiles of a page or more leave less than a page unused after them.
Tiles smaller than a page are packed on cache lines (:data:`TILE_ALIGN`) and are not
page-locked (:func:`starchol.runtime.gpu.pin_tiles` skips them).

The arena is a single numpy array: it lives as long as one of its tiles does.
"""
import mmap

import numpy as np

#: alignment of an arena of at least this size (bytes): the huge page size on x86-64
ARENA_ALIGN = 2 << 20
#: alignment of a tile of at least a page (bytes)
PAGE = mmap.PAGESIZE
#: alignment of a smaller tile (bytes): a cache line
TILE_ALIGN = 64


def _round_up(x, a):
    return -(-x // a) * a


def arena_views(shapes, dtype):
    """Fortran-ordered, uninitialised views, one per shape, into one new arena.

    Parameters
    ----------
    shapes : iterable of (int, int)
        Tile shapes (entries).
    dtype : numpy dtype

    Returns
    -------
    list of numpy.ndarray
        In the order of ``shapes``; a tile of a page or more starts on a page, a
        smaller one on a cache line.
    """
    dtype = np.dtype(dtype)
    shapes = [(int(r), int(c)) for r, c in shapes]
    item = dtype.itemsize
    offsets, total = [], 0
    for r, c in shapes:
        nbytes = r * c * item
        total = _round_up(total, PAGE if nbytes >= PAGE else TILE_ALIGN)
        offsets.append(total)
        total += nbytes
    align = ARENA_ALIGN if total >= ARENA_ALIGN else PAGE
    raw = np.empty(total + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    base = raw[start:start + total]
    return [base[o:o + r * c * item].view(dtype).reshape((r, c), order="F")
            for o, (r, c) in zip(offsets, shapes)]


def packed(tiles, dtype):
    """A copy of ``{key: tile}`` in one arena (see the module docstring), as ``dtype``.

    The keys keep their order; the input tiles are not modified.
    """
    keys = list(tiles)
    views = arena_views([np.shape(tiles[k]) for k in keys], dtype)
    for k, v in zip(keys, views):
        v[...] = tiles[k]
    return dict(zip(keys, views))


__all__ = ["arena_views", "packed", "ARENA_ALIGN", "PAGE", "TILE_ALIGN"]
