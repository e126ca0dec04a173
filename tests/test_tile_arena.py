"""Local tiles in one arena (linalg/tile_arena.py), without mpirun (fast)."""
import numpy as np
import pytest

from starchol.linalg.tile_arena import ARENA_ALIGN, PAGE, TILE_ALIGN, arena_views, packed


def _base(a):
    while a.base is not None:
        a = a.base
    return a


def test_views_are_fortran_aligned_and_disjoint():
    shapes = [(256, 256), (256, 100), (37, 5), (1, 1), (100, 33), (256, 256)]
    views = arena_views(shapes, np.float32)
    assert [v.shape for v in views] == shapes
    assert all(v.flags.f_contiguous and v.flags.writeable for v in views)
    assert all(v.dtype == np.float32 for v in views)
    assert views[0].ctypes.data % PAGE == 0
    assert all(v.ctypes.data % TILE_ALIGN == 0 for v in views)
    assert len({id(_base(v)) for v in views}) == 1
    # no two tiles of a page or more share a page (GPU runs page-lock each on its own)
    big = [v for v in views if v.nbytes >= PAGE]
    assert all(v.ctypes.data % PAGE == 0 for v in big)
    pages = [(v.ctypes.data // PAGE, (v.ctypes.data + v.nbytes - 1) // PAGE) for v in big]
    assert len(big) == 4 and all(a[1] < b[0] for a, b in zip(pages, pages[1:]))
    for i, v in enumerate(views):
        v[...] = i
    assert [float(v.mean()) for v in views] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_large_arena_on_huge_page_boundary_small_tiles_packed():
    views = arena_views([(512, 512)] * 2, np.float64)          # 4 MiB
    assert views[0].ctypes.data % ARENA_ALIGN == 0
    small = arena_views([(4, 4)] * 10, np.float64)              # 128 B tiles
    assert small[1].ctypes.data - small[0].ctypes.data == 128


def test_tiles_of_one_row_are_adjacent():
    # 256 x 256 float64 tiles need no padding: a tile row is one 256 x (256 r) block
    views = arena_views([(256, 256)] * 3, np.float64)
    assert views[1].ctypes.data - views[0].ctypes.data == 256 * 256 * 8


def test_packed_copies_and_keeps_order():
    rng = np.random.default_rng(1)
    tiles = {(2, 1): rng.standard_normal((8, 8)), (0, 0): np.asfortranarray(rng.random((8, 3)))}
    before = {k: t.copy() for k, t in tiles.items()}
    out = packed(tiles, np.float64)
    assert list(out) == [(2, 1), (0, 0)]
    for k in tiles:
        np.testing.assert_array_equal(out[k], before[k])
        assert out[k].flags.f_contiguous and not np.shares_memory(out[k], tiles[k])
    out[(0, 0)][...] = -1                     # the inputs are never modified
    np.testing.assert_array_equal(tiles[(0, 0)], before[(0, 0)])


def test_packed_casts_and_empty():
    out = packed({(0, 0): np.ones((4, 4))}, np.float32)
    assert out[(0, 0)].dtype == np.float32
    assert packed({}, np.float64) == {}


def test_distributed_matrix_tiles_share_one_arena():
    pytest.importorskip("mpi4py")
    from mpi4py import MPI

    from starchol import DistributedMatrix
    from starchol.distributions import get_map

    tm = get_map("2dbc", 1)
    a = np.arange(70 * 70, dtype=np.float64).reshape(70, 70)
    a = a + a.T
    made = {
        "from_numpy": DistributedMatrix.from_numpy(a, 16, tm, comm=MPI.COMM_SELF),
        "from_function": DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: a[r0:r1, c0:c1], (70, 70), 16, tm, comm=MPI.COMM_SELF),
    }
    made["copy"] = made["from_numpy"].copy()
    for name, m in made.items():
        assert len({id(_base(t)) for t in m.tiles.values()}) == 1, name
        assert all(t.flags.f_contiguous for t in m.tiles.values()), name
        np.testing.assert_array_equal(m.gather(), np.tril(a), err_msg=name)
    assert not any(np.shares_memory(t, made["from_numpy"].tiles[k])
                   for k, t in made["copy"].tiles.items())


def test_copy_keeps_a_wrong_dtype_for_the_checks():
    from mpi4py import MPI

    from starchol import DistributedMatrix
    from starchol.distributions import get_map

    tm = get_map("2dbc", 1)
    m = DistributedMatrix.from_numpy(np.eye(32), 16, tm, comm=MPI.COMM_SELF)
    m.tiles[(1, 0)] = m.tiles[(1, 0)].astype(np.float32)
    err = m.copy().local_error(tm)
    assert err is not None and "dtype float32" in str(err)
