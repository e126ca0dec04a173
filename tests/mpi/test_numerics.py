"""Numerics and edge shapes of the API under MPI (1, 2, 4 or 6 ranks), against
numpy/scipy: extreme scales, the failing column of a matrix that is not positive
definite, tiny and uneven shapes, and the input forms numpy users pass."""
import os

import numpy as np
import pytest
import scipy.linalg.lapack as lapack

from starchol import DistributedMatrix, NotPositiveDefiniteError, UsageError, cholesky
from starchol.distributions import get_map
from starchol.model.volume import factor_owners

P = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))


def _maps(p):
    """A 2D map (SBC on 6 ranks) and, where p allows one, a 2.5D map with two slices."""
    out = [("sbc", get_map("sbc", 6))] if p == 6 else [("2dbc", get_map("2dbc", p))]
    if p % 2 == 0:
        out.append(("2dbc25d-c2", get_map("2dbc25d", p, slices=2)))
    return out


MAPS = _maps(P)
IDS = [m[0] for m in MAPS]


def _spd(n, seed=3):
    m = np.random.default_rng(seed).standard_normal((n, n))
    return m @ m.T / n + np.eye(n)


def _same_everywhere(comm, value):
    values = comm.allgather(value)
    assert all(v == values[0] for v in values), values
    return values[0]


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_residual_and_logdet_at_extreme_scales(session, comm, scale):
    # ||A||_F^2 overflows (1e300) or underflows (1e-300): the residual must not be
    # NaN or 0, and logdet (a sum of logs) must match slogdet
    n, nb = 13, 5
    a0 = _spd(n)
    tile_map = get_map("2dbc", P)
    a = DistributedMatrix.from_numpy(a0 * scale, nb, tile_map)
    f = cholesky(a, tile_map)
    res = _same_everywhere(comm, f.residual(a))
    assert 1e-18 < res < 1e-14, res
    logdet = _same_everywhere(comm, f.logdet())
    assert logdet == pytest.approx(np.linalg.slogdet(a0)[1] + n * np.log(scale), rel=1e-13)
    # the solve's backward error: ||A||_F^2 over- or underflows, X scales by 1 / scale
    b0 = np.ones((n, 2))
    b = DistributedMatrix.from_numpy(b0, nb, tile_map, kind="rhs")
    x = f.solve(b)
    eta = _same_everywhere(comm, f.solve_residual(a, x, b))
    assert 0 <= eta < 1e-14, eta
    for t in x.tiles.values():          # X (1 + 1e-3): R = -1e-3 B, scale-free ratio
        t *= 1 + 1e-3
    eta = _same_everywhere(comm, f.solve_residual(a, x, b))
    x0 = np.linalg.solve(a0, b0) * (1 + 1e-3)
    ref = 1e-3 * np.linalg.norm(b0) / (np.linalg.norm(a0) * np.linalg.norm(x0) +
                                       np.linalg.norm(b0))
    assert eta == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("name,tile_map", MAPS, ids=IDS)
def test_failing_column_is_lapacks(session, comm, name, tile_map):
    # 23 = 4 tiles of 5 and a partial one of 3: failing in the first tile, in the last
    # partial tile (on a 2.5D map, column 17 is factored by slice 1, column 22 by
    # slice 0) and at the last column; float32 on the first map
    n, nb = 23, 5
    cases = [(np.float64, 0), (np.float64, 17), (np.float64, 22)]
    if name == IDS[0]:
        cases.append((np.float32, 13))
    for dtype, column in cases:
        a0 = _spd(n).astype(dtype)
        a0[column, column] = -0.5
        info = (lapack.dpotrf if dtype == np.float64 else lapack.spotrf)(a0, lower=1)[1]
        a = DistributedMatrix.from_numpy(a0, nb, tile_map)
        with pytest.raises(NotPositiveDefiniteError) as err:
            cholesky(a, tile_map)
        assert _same_everywhere(comm, (err.value.column, err.value.finite, str(err.value))) \
            == (info - 1, True, str(err.value))
        assert not a.factor             # untouched: the factorization ran on a copy
    with pytest.raises(NotPositiveDefiniteError):
        cholesky(a, tile_map, overwrite_a=True)
    assert a.factor                     # its tiles now hold a partial factor


@pytest.mark.parametrize("name,tile_map", MAPS, ids=IDS)
def test_edge_shapes_against_numpy(session, comm, name, tile_map):
    # N = NB = 1; N not a multiple of NB, with fewer tiles than ranks; K = 1,
    # K > N and K not a multiple of NB; fn called only for this rank's tiles, with the
    # tile's bounds
    for n, nb, k in ((1, 1, 1), (11, 4, 25), (9, 2, 3)):
        a0, b0 = _spd(n, seed=n), np.random.default_rng(n).standard_normal((n, k))
        calls = []

        def block(r0, r1, c0, c1):
            calls.append((r0, r1, c0, c1))
            return a0[r0:r1, c0:c1]

        a = DistributedMatrix.from_function(block, (n, n), nb, tile_map)
        nt, owners = a.nt, factor_owners(tile_map, a.nt)
        ends = np.minimum(np.arange(1, nt + 1) * nb, n)
        expected = [(i * nb, int(ends[i]), j * nb, int(ends[j]))
                    for i in range(nt) for j in range(i + 1) if owners[i, j] == comm.rank]
        assert sorted(calls) == sorted(expected)
        b = DistributedMatrix.from_function(lambda r0, r1, c0, c1: b0[r0:r1, c0:c1],
                                            (n, k), nb, tile_map, kind="rhs")
        f = cholesky(a, tile_map)
        x, lower = f.solve(b).gather(), f.L.gather()
        logdet = _same_everywhere(comm, f.logdet())
        if comm.rank == 0:
            assert x.shape == (n, k)
            np.testing.assert_allclose(x, np.linalg.solve(a0, b0), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(lower, np.linalg.cholesky(a0), rtol=1e-12, atol=1e-14)
            assert logdet == pytest.approx(np.linalg.slogdet(a0)[1], rel=1e-12, abs=1e-12)


def test_numpy_input_forms(session, comm):
    # big-endian, strided and transposed views are converted; the result is the same
    n, nb = 11, 4
    tile_map = get_map("2dbc", P)
    a0 = _spd(n)
    wide = np.zeros((2 * n, 3 * n))
    wide[::2, ::3] = a0
    b0 = np.random.default_rng(1).standard_normal((n, 2))
    ref = np.linalg.solve(a0, b0)
    for form in (a0.astype(">f8"), wide[::2, ::3], a0.T):
        a = DistributedMatrix.from_numpy(form, nb, tile_map)
        assert a.dtype == np.float64 and a.dtype.isnative
        if comm.rank == 0:
            np.testing.assert_array_equal(a.gather(), np.tril(a0))
        else:
            a.gather()
    b = DistributedMatrix.from_numpy(b0.astype(">f8"), nb, tile_map, kind="rhs")
    x = cholesky(a, tile_map).solve(b).gather()
    if comm.rank == 0:
        np.testing.assert_allclose(x, ref, rtol=1e-12)


def test_input_errors_name_what_is_wrong(session, comm):
    from test_api import raises_everywhere

    n, nb = 11, 4
    tile_map = get_map("2dbc", P)
    a0 = _spd(n)
    blk = lambda r0, r1, c0, c1: a0[r0:r1, c0:c1]      # noqa: E731
    for shape in ((n,), n, (n, n, 1), "ab"):
        err = raises_everywhere(comm, UsageError, "shape must be a pair of integers",
                                lambda: DistributedMatrix.from_function(blk, shape, nb,
                                                                        tile_map))
        assert err.params == ("shape",)
    raises_everywhere(comm, UsageError, "returned complex128 values, expected real numbers",
                      lambda: DistributedMatrix.from_function(
                          lambda *r: blk(*r) + 1j, (n, n), nb, tile_map))
    raises_everywhere(comm, UsageError, "dtype must be float64 or float32, got int64",
                      lambda: DistributedMatrix.from_numpy(np.eye(n, dtype=int), nb,
                                                           tile_map))
    a = DistributedMatrix.from_function(blk, (n, n), nb, tile_map)
    f = cholesky(a, tile_map)
    b32 = DistributedMatrix.from_numpy(np.ones((n, 1), np.float32), nb, tile_map, kind="rhs")
    err = raises_everywhere(comm, UsageError, "B does not match the factor: dtype is "
                            "float32, expected float64", lambda: f.solve(b32))
    assert err.params == ("B", "dtype")
    raises_everywhere(comm, UsageError, "A must be a DistributedMatrix, got ndarray",
                      lambda: f.residual(a0))


def test_hdf5_round_trips_on_uneven_tiles(session, comm):
    # L written on a 2.5D map (where there is one) with a partial last tile is exactly
    # L (lower, zeros above); a symmetric matrix written by to_hdf5 is whole and reads
    # back equal; a factor file is refused as an input for what it is
    import shutil
    import tempfile

    from test_api import raises_everywhere

    h5py = pytest.importorskip("h5py")
    n, nb = 13, 5
    tile_map = MAPS[-1][1]
    a0 = _spd(n)
    folder = comm.bcast(tempfile.mkdtemp(prefix="starchol-num-") if comm.rank == 0 else None)
    try:
        a = DistributedMatrix.from_numpy(a0, nb, tile_map)
        f = cholesky(a, tile_map)
        f.L.to_hdf5(os.path.join(folder, "l.h5"), "/L")
        a.to_hdf5(os.path.join(folder, "a.h5"), "/A")
        lower = f.L.gather()
        if comm.rank == 0:
            with h5py.File(os.path.join(folder, "l.h5"), "r") as fh:
                np.testing.assert_array_equal(fh["L"][...], lower)
            np.testing.assert_allclose(lower, np.linalg.cholesky(a0), rtol=1e-12)
        if comm.rank == 0:
            with h5py.File(os.path.join(folder, "a.h5"), "r") as fh:
                np.testing.assert_array_equal(fh["A"][...], a0)
                assert fh["A"].attrs["content"] == "symmetric matrix (both triangles)"
        back = DistributedMatrix.from_hdf5(os.path.join(folder, "a.h5"), "/A", nb, tile_map)
        for key, t in a.tiles.items():
            np.testing.assert_array_equal(back.tiles[key], t)
        raises_everywhere(comm, UsageError, "l.h5:/L holds a Cholesky factor L (its "
                          "'content' attribute", lambda: DistributedMatrix.from_hdf5(
                              os.path.join(folder, "l.h5"), "/L", nb, tile_map))
        # a solution (kind "rhs", N x K) is written as it is and read back as "rhs"
        b0 = np.arange(2.0 * n).reshape(n, 2)
        x = f.solve(DistributedMatrix.from_numpy(b0, nb, tile_map, kind="rhs"))
        x.to_hdf5(os.path.join(folder, "x.h5"), "/X")
        back = DistributedMatrix.from_hdf5(os.path.join(folder, "x.h5"), "/X", nb, tile_map)
        assert back.kind == "rhs" and back.shape == (n, 2)
        xs, xb = x.gather(), back.gather()
        if comm.rank == 0:
            np.testing.assert_array_equal(xb, xs)
            np.testing.assert_allclose(xs, np.linalg.solve(a0, b0), rtol=1e-10)
    finally:
        comm.Barrier()
        if comm.rank == 0:
            shutil.rmtree(folder)


def test_read_only_tiles_are_not_overwritten(session, comm):
    # overwrite_a/overwrite_b write into the tiles: a read-only tile (a read-only memory
    # map, a broadcast view) on the last rank is refused on every rank, not written
    from test_api import raises_everywhere

    n, nb = 8, 4
    tile_map = get_map("2dbc", P)
    a0 = _spd(n)
    a = DistributedMatrix.from_numpy(a0, nb, tile_map)
    b = DistributedMatrix.from_numpy(np.ones((n, 1)), nb, tile_map, kind="rhs")
    last = max(int(a.owners[i, j]) for i, j in zip(*np.nonzero(a.stored)))
    if comm.rank == last:
        for t in list(a.tiles.values()) + list(b.tiles.values()):
            t.flags.writeable = False
    raises_everywhere(comm, UsageError, "is read-only (its numpy writeable flag is off) and "
                      "overwrite_a=True would write", lambda: cholesky(a, tile_map,
                                                                       overwrite_a=True))
    f = cholesky(a, tile_map)
    raises_everywhere(comm, UsageError, "overwrite_b=True would write",
                      lambda: f.solve(b, overwrite_b=True))
    x, lower = f.solve(b).gather(), a.gather()
    if comm.rank == 0:
        np.testing.assert_array_equal(lower, np.tril(a0))
        np.testing.assert_allclose(x, np.linalg.solve(a0, np.ones((n, 1))), rtol=1e-12)


def test_residual_refuses_the_factor_itself(session, comm):
    # after cholesky(A, overwrite_a=True) A holds L: residual(A) was a silent 0.49
    from test_api import raises_everywhere

    tile_map = get_map("2dbc", P)
    a = DistributedMatrix.from_numpy(_spd(8), 4, tile_map)
    f = cholesky(a, tile_map, overwrite_a=True)
    err = raises_everywhere(comm, UsageError, "A is the factor L itself (cholesky with "
                            "overwrite_a=True wrote L into its tiles)", lambda: f.residual(a))
    assert err.params == ("A",)


@pytest.mark.parametrize("name,tile_map", MAPS, ids=IDS)
def test_tiles_travel_in_pieces(comm, name, tile_map, monkeypatch):
    # from_numpy and gather move each tile as buffer messages of at most PIECE_BYTES
    # (1 GiB: a rank's part may exceed MPI's 2 GiB message limit); with 100-byte pieces,
    # uneven tiles of both kinds and dtypes arrive exactly, on every rank
    from starchol.linalg import tile_transfer

    monkeypatch.setattr(tile_transfer, "PIECE_BYTES", 100)
    # tiles of 20 to 512 bytes: 1 to 6 pieces each, most with a shorter last piece (with
    # 1000-byte pieces, as before, no tile was cut and the piece loop went untested)
    n, nb = 29, 8
    for kind, shape in (("symmetric", (n, n)), ("rhs", (n, 3))):
        for dtype in (np.float64, np.float32):
            a0 = np.arange(shape[0] * shape[1], dtype=dtype).reshape(shape) + 1
            if kind == "symmetric":  # from_numpy refuses a whole non-symmetric array
                a0 = a0 + a0.T
            a = DistributedMatrix.from_numpy(a0 if comm.rank == 0 else None, nb, tile_map,
                                             kind=kind)
            for (i, j), t in a.tiles.items():
                r0, r1, c0, c1 = a.tile_bounds(i, j)
                np.testing.assert_array_equal(t, a0[r0:r1, c0:c1])
            g = a.gather(root=comm.size - 1)
            if comm.rank == comm.size - 1:
                want = np.tril(a0) if kind == "symmetric" else a0
                np.testing.assert_array_equal(g, want)
                assert g.dtype == dtype
            else:
                assert g is None


def test_gather_with_a_missing_tile_fails_everywhere(comm):
    # the tile-by-tile transfer pairs tiles up: a rank lacking one must not leave the
    # root waiting for it
    from test_api import raises_everywhere

    tile_map = get_map("2dbc", P)
    a = DistributedMatrix.from_numpy(_spd(12), 4, tile_map)
    if comm.rank == a.owners[2, 0]:
        del a.tiles[(2, 0)]
    raises_everywhere(comm, UsageError, f"rank {a.owners[2, 0]} lacks its tile (2, 0)",
                      a.gather)


def test_to_hdf5_with_a_missing_or_misshapen_tile_fails_everywhere(comm):
    # a missing tile was written as zeros (a wrong file, published); a misshapen one
    # failed on its rank alone while the others waited in the write turns' Barrier
    import shutil
    import tempfile

    from test_api import raises_everywhere

    tile_map = get_map("2dbc", P)
    folder = comm.bcast(tempfile.mkdtemp(prefix="starchol-num-") if comm.rank == 0 else None)
    try:
        for change, words in ((lambda t: None, "lacks its tile (2, 0)"),
                              (lambda t: t[:3], "has shape (3, 4), expected (4, 4)")):
            a = DistributedMatrix.from_numpy(_spd(12), 4, tile_map)
            if comm.rank == a.owners[2, 0]:
                t = change(a.tiles.pop((2, 0)))
                if t is not None:
                    a.tiles[(2, 0)] = t
            raises_everywhere(comm, UsageError, words,
                              lambda: a.to_hdf5(os.path.join(folder, "a.h5"), "/A"))
            assert os.listdir(folder) == []
    finally:
        comm.Barrier()
        if comm.rank == 0:
            shutil.rmtree(folder)


def test_from_function_refuses_values_beyond_float32(comm):
    # finite float64 values that become Inf in a float32 tile: a UsageError naming dtype
    # on every rank (as from_hdf5 does), not Inf found later by the factorization
    from test_api import raises_everywhere

    tile_map = get_map("2dbc", P)
    big = lambda r0, r1, c0, c1: np.full((r1 - r0, c1 - c0), 1e39)  # noqa: E731
    err = raises_everywhere(comm, UsageError, "beyond float32's largest (3.403e+38)",
                            lambda: DistributedMatrix.from_function(
                                big, (10, 10), 4, tile_map, dtype=np.float32))
    assert err.params == ("dtype",)
