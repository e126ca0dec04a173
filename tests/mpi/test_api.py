"""The public API under MPI (1, 2, 4 or 6 ranks): cholesky for every map, solve, logdet,
float32, bytes measured == model == oracle per pair, collective errors, HDF5."""
import os

import numpy as np
import pytest
import scipy.linalg as sl
from volume_reference import cholesky_bytes, rhs_solve_bytes, solve_bytes

from starchol import (CallbackError, DistributedMatrix, NotPositiveDefiniteError, Session,
                      SessionError, UsageError, cholesky)
from starchol.distributions import get_map
from starchol.distributions.custom import CustomMap
from starchol.model.counts import local_task_count, solve_task_count, task_count

N, NB, K = 256, 64, 3          # NT = 4
P = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))


def _spd(n, seed=1):
    rng = np.random.default_rng(seed)        # the same matrix on every rank
    m = rng.standard_normal((n, n))
    return m @ m.T / n + np.eye(n)


A_FULL = _spd(N)
B_FULL = np.random.default_rng(2).standard_normal((N, K))


def maps_for(p):
    """(id, map) pairs that fit p ranks: 2D, 2.5D and custom."""
    out = {1: [("2dbc", get_map("2dbc", 1))],
           2: [("2dbc", get_map("2dbc", 2)), ("sbc-basic", get_map("sbc-basic", 2)),
               ("2dbc25d-c2", get_map("2dbc25d", 2, slices=2))],
           4: [("2dbc-2x2", get_map("2dbc", 4, grid="2x2")),
               ("2dbc25d-c2", get_map("2dbc25d", 4, slices=2))],
           6: [("sbc", get_map("sbc", 6)), ("sbc25d-c2", get_map("sbc25d", 6, slices=2)),
               ("2dbc-2x3", get_map("2dbc", 6, grid="2x3"))]}.get(p, [("2dbc", get_map("2dbc", p))])
    out.append(("custom", CustomMap(np.arange(p)[::-1].reshape(1, p) if p > 1
                                    else np.zeros((1, 1), dtype=int))))
    return out


MAPS = maps_for(P)


def block(full):
    return lambda r0, r1, c0, c1: full[r0:r1, c0:c1]


def make(tile_map, dtype=np.float64):
    a = DistributedMatrix.from_function(block(A_FULL), (N, N), NB, tile_map, dtype=dtype)
    b = DistributedMatrix.from_function(block(B_FULL), (N, K), NB, tile_map, kind="rhs",
                                        dtype=dtype)
    return a, b


def solve_oracle(rec):
    """The oracle of the solve graph a record says ran (``extra["solve_variant"]``)."""
    return rhs_solve_bytes if rec.extra["solve_variant"]["variant"] == "rhs" else solve_bytes


def raises_everywhere(comm, exc_type, match, fn):
    """fn() raises exc_type with the same message on every rank (a rank that hangs instead
    fails the suite by mpirun's timeout)."""
    with pytest.raises(exc_type) as info:
        fn()
    messages = comm.allgather(f"{type(info.value).__name__}: {info.value}")
    assert len(set(messages)) == 1, messages
    assert match in messages[0], messages[0]
    return info.value


@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_factor_solve_logdet(session, comm, name, tile_map):
    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    assert f.session is session and Session.current() is session
    x = f.solve(b)
    logdet = f.logdet()
    assert len(set(comm.allgather(logdet))) == 1
    L, X, A_back = f.L.gather(), x.gather(), a.gather()
    assert f.record.match is True and f.solve_record.match is True
    assert f.record.slices == tile_map.slices and f.record.ranks == P
    assert f.solve_record.operation == "solve" and f.solve_record.nrhs == K
    # each task counted once, on the rank that runs it (the graph's size, not insertions)
    so = tile_map.owner_maps(a.nt)
    assert f.record.tasks == sum(local_task_count(so, r) for r in range(P))
    if tile_map.slices == 1:
        assert f.record.tasks == task_count(a.nt) == 20
    if f.solve_record.extra["solve_variant"]["variant"] == "factor":
        assert f.solve_record.tasks == solve_task_count(a.nt, 1) == 20
    else:       # the same products and TRSMs, and one ADD per partial sum
        assert f.solve_record.tasks >= solve_task_count(a.nt, 1) == 20
    if comm.Get_rank() == 0:
        c = sl.cho_factor(A_FULL, lower=True)
        assert np.allclose(L, np.tril(c[0]), rtol=0, atol=1e-12)
        ref = sl.cho_solve(c, B_FULL)
        assert np.abs(X - ref).max() <= 1e-10 * np.abs(ref).max()
        assert abs(logdet - 2 * np.log(np.diag(c[0])).sum()) <= 1e-10 * abs(logdet)
        assert np.array_equal(A_back, np.tril(A_FULL))       # A untouched
        assert f.record.bytes_measured_pairs == cholesky_bytes(tile_map, N, NB)
        assert f.solve_record.bytes_measured_pairs == solve_oracle(f.solve_record)(
            tile_map, N, NB, K)


@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_solve_residual(session, comm, name, tile_map):
    """Factor.solve_residual: about 1e-16 for the solve's X; for X + E it is
    ||A E|| / (||A|| ||X + E|| + ||B||) as numpy computes it (both triangles of A and
    the transposed tiles used right); A and B untouched; the same on every rank."""
    a, b = make(tile_map)
    a0 = {k: t.copy() for k, t in a.tiles.items()}
    b0 = {k: t.copy() for k, t in b.tiles.items()}
    f = cholesky(a, tile_map)
    x = f.solve(b)
    eta = f.solve_residual(a, x, b)
    assert len(set(comm.allgather(eta))) == 1
    assert 0 <= eta < 1e-15
    e_full = np.random.default_rng(3).standard_normal((N, K)) * 1e-3
    xe = x.copy()
    for (i, j), t in xe.tiles.items():
        r0, r1, c0, c1 = xe.tile_bounds(i, j)
        t += e_full[r0:r1, c0:c1]
    eta_e = f.solve_residual(a, xe, b)
    assert len(set(comm.allgather(eta_e))) == 1
    assert all(np.array_equal(a.tiles[k], a0[k]) for k in a0)
    assert all(np.array_equal(b.tiles[k], b0[k]) for k in b0)
    X = xe.gather()
    if comm.Get_rank() == 0:
        ref = np.linalg.norm(B_FULL - A_FULL @ X) / (
            np.linalg.norm(A_FULL) * np.linalg.norm(X) + np.linalg.norm(B_FULL))
        assert ref > 1e-6 and abs(eta_e - ref) <= 1e-10 * ref, (eta_e, ref)


@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_solve_triangular(session, comm, name, tile_map):
    """One pass of the solve: L Y = B and L^T Y = B against SciPy, bytes measured ==
    model (which=forward/backward) == oracle per pair, half the solve's tasks; the two
    passes in turn give solve()'s X."""
    from starchol.model.rhs_volume import solve_bytes_by_variant

    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    y = f.solve_triangular(b)
    fwd = f.solve_record
    x = f.solve_triangular(y, trans=True)
    bwd = f.solve_record
    assert (fwd.operation, bwd.operation) == ("forward_solve", "backward_solve")
    assert fwd.match is True and bwd.match is True
    if fwd.extra["solve_variant"]["variant"] == "factor":
        assert fwd.tasks == bwd.tasks == solve_task_count(a.nt, 1, "forward") == 10
    assert fwd.flops == N * N * K
    Y, X, L = y.gather(), x.gather(), f.L.gather()
    if comm.Get_rank() == 0:
        Lt = np.tril(L)
        y_ref = sl.solve_triangular(Lt, B_FULL, lower=True)
        x_ref = sl.solve_triangular(Lt, y_ref, lower=True, trans=1)
        assert np.abs(Y - y_ref).max() <= 1e-12 * np.abs(y_ref).max()
        assert np.abs(X - x_ref).max() <= 1e-10 * np.abs(x_ref).max()
        assert np.abs(X - sl.cho_solve((Lt, True), B_FULL)).max() <= 1e-10 * np.abs(X).max()
        for which, rec in (("forward", fwd), ("backward", bwd)):
            model = solve_bytes_by_variant(tile_map, N, NB, K, which=which)
            assert rec.bytes_predicted_pairs == model[
                rec.extra["solve_variant"]["variant"]].tolist()
            assert rec.bytes_measured_pairs == solve_oracle(rec)(tile_map, N, NB, K,
                                                                 which=which)


def test_solve_triangular_checks_trans(session, comm):
    tile_map = MAPS[0][1]
    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    raises_everywhere(comm, UsageError, "trans must be True or False, got 'T'",
                      lambda: f.solve_triangular(b, trans="T"))
    if comm.Get_size() > 1:    # one rank asks for the other pass: refused, no hang
        raises_everywhere(comm, UsageError, "the ranks were given different inputs: trans",
                          lambda: f.solve_triangular(b, trans=comm.Get_rank() == 1))


def test_solve_residual_checks_its_operands(session, comm):
    tile_map = MAPS[0][1]
    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    x = f.solve(b)
    raises_everywhere(comm, UsageError, "X does not match the factor: expected a rhs "
                      "matrix", lambda: f.solve_residual(a, a, b))
    b2 = DistributedMatrix.from_function(block(np.ones((N, K + 1))), (N, K + 1), NB,
                                         tile_map, kind="rhs")
    raises_everywhere(comm, UsageError, f"B does not match the factor: the matrix has "
                      f"{K + 1} columns, expected {K}", lambda: f.solve_residual(a, x, b2))
    raises_everywhere(comm, UsageError, "A is the factor L itself",
                      lambda: f.solve_residual(f.L, x, b))


def test_eager_write_back(session, comm, monkeypatch):
    """The GPU runs' write-back of final tiles (starpu_data_wont_use after each panel),
    forced here on CPU workers: same factor, same bytes as the model, on a 2.5D map
    where one fits (its partial sums stay out of it)."""
    name, tile_map = next((m for m in MAPS if "25d" in m[0]), MAPS[0])
    monkeypatch.setattr(Session, "cuda_workers", property(lambda self: 1))
    a, _ = make(tile_map)
    f = cholesky(a, tile_map)
    L = f.L.gather()
    assert f.record.match is True
    if comm.Get_rank() == 0:
        assert np.allclose(L, np.tril(sl.cho_factor(A_FULL, lower=True)[0]), rtol=0, atol=1e-12)
        assert f.record.bytes_measured_pairs == cholesky_bytes(tile_map, N, NB)


def test_float32(session, comm):
    name, tile_map = MAPS[-1 if P > 1 else 0]
    a, b = make(tile_map, np.float32)
    f = cholesky(a, tile_map)
    x = f.solve(b)
    assert f.L.dtype == np.float32 and x.dtype == np.float32
    assert f.residual(a) < 1e-5
    assert f.solve_residual(a, x, b) < 1e-6
    X = x.gather()
    assert f.record.match and f.solve_record.match
    assert f.record.dtype == "float32"
    if comm.Get_rank() == 0:
        r = A_FULL @ X - B_FULL
        assert np.linalg.norm(r) / np.linalg.norm(B_FULL) < 1e-4
        assert f.record.bytes_measured_pairs == cholesky_bytes(tile_map, N, NB, itemsize=4)


def test_missing_tile_on_one_rank(session, comm):
    tile_map = MAPS[0][1]
    a, _ = make(tile_map)
    if comm.Get_rank() == 0:
        del a.tiles[sorted(a.tiles)[0]]
    raises_everywhere(comm, UsageError, "rank 0 lacks its tile",
                      lambda: cholesky(a, tile_map))


def test_wrong_dtype_on_one_rank(session, comm):
    tile_map = MAPS[0][1]
    a, _ = make(tile_map)
    if comm.Get_rank() == comm.Get_size() - 1:
        key = sorted(a.tiles)[-1]
        a.tiles[key] = a.tiles[key].astype(np.float32)
    raises_everywhere(comm, UsageError, "has dtype float32, the matrix is float64",
                      lambda: cholesky(a, tile_map))


def test_25d_map_with_wrong_rank_count_on_one_rank(session, comm):
    tile_map = MAPS[0][1]
    a, _ = make(tile_map)
    bad = get_map("2dbc25d", 2 * P + 2, grid=f"1x{P + 1}", slices=2)
    given = bad if comm.Get_rank() == 0 else tile_map
    raises_everywhere(comm, UsageError, "nodes but the communicator has",
                      lambda: cholesky(a, given))


def test_different_sizes_on_one_rank(session, comm):
    tile_map = MAPS[0][1]
    n = N - 1 if comm.Get_rank() == comm.Get_size() - 1 and P > 1 else N
    if P == 1:
        pytest.skip("needs two ranks")
    last = comm.Get_size() - 1
    err = raises_everywhere(
        comm, UsageError, f"the ranks were given different inputs: shape: rank 0 has "
                          f"({N}, {N}), rank {last} has ({N - 1}, {N - 1})",
        lambda: DistributedMatrix.from_function(block(A_FULL), (n, n), NB, tile_map))
    assert err.params == ("shape",)


def test_matrix_on_a_reordered_communicator_is_refused(session, comm):
    """A matrix made on the session's processes in another rank order (same size) would
    be registered on the wrong ranks (it hung, with a KeyError on some ranks)."""
    if P == 1:
        pytest.skip("needs two ranks")
    tile_map = MAPS[0][1]
    reordered = comm.Split(0, comm.Get_size() - comm.Get_rank())
    try:
        a = DistributedMatrix.from_function(block(A_FULL), (N, N), NB, tile_map,
                                            comm=reordered)
        b = DistributedMatrix.from_function(block(B_FULL), (N, K), NB, tile_map,
                                            kind="rhs", comm=reordered)
        err = raises_everywhere(comm, UsageError, "A lives on a communicator that is not "
                                "the session's", lambda: cholesky(a, tile_map))
        assert err.params == ("A",)
        f = cholesky(make(tile_map)[0], tile_map)
        err = raises_everywhere(comm, UsageError, "B lives on a communicator that is not "
                                "the session's", lambda: f.solve(b))
        assert err.params == ("B",)
    finally:
        reordered.Free()


def test_not_positive_definite_is_linalgerror(session, comm):
    tile_map = MAPS[-1][1]
    bad = A_FULL.copy()
    bad[150, 150] = -1.0
    a = DistributedMatrix.from_function(block(bad), (N, N), NB, tile_map)
    err = raises_everywhere(comm, np.linalg.LinAlgError, "global column 150",
                            lambda: cholesky(a, tile_map))
    assert isinstance(err, NotPositiveDefiniteError) and err.column == 150 and err.finite


@pytest.mark.parametrize("where,value,column", [((200, 70), np.nan, 200),
                                                ((70, 70), np.inf, 70),
                                                ((130, 3), -np.inf, 130)])
def test_nan_or_inf_in_a_is_reported(session, comm, where, value, column):
    """OpenBLAS's potrf passes a NaN pivot without an error: the first non-finite
    diagonal entry of L is reported instead, as reference LAPACK would."""
    tile_map = MAPS[-1][1]
    bad = A_FULL.copy()
    bad[where] = bad[where[::-1]] = value
    a = DistributedMatrix.from_function(block(bad), (N, N), NB, tile_map)
    err = raises_everywhere(comm, NotPositiveDefiniteError, f"global column {column} ",
                            lambda: cholesky(a, tile_map))
    assert err.column == column
    if value != -np.inf:          # -Inf meets the pivot as -Inf (<= 0) or as NaN
        assert not err.finite and "is not finite; the matrix holds NaN or Inf" in str(err)
    # the session is still usable
    f = cholesky(make(tile_map)[0], tile_map)
    assert f.record.match


def test_solve_checks_right_hand_sides(session, comm):
    tile_map = MAPS[0][1]
    a, _ = make(tile_map)
    f = cholesky(a, tile_map, overwrite_a=True)
    raises_everywhere(comm, UsageError, "expected a rhs matrix",
                      lambda: f.solve(make(tile_map)[0]))


def test_solve_takes_a_numpy_array_on_root(session, comm):
    """Issue 35.6: F.solve(array on root) as scipy users write it: scattered from root,
    X gathered back to root (None elsewhere), in B's shape; a DistributedMatrix on some
    ranks only is one error on every rank, fast; from_numpy of N x K says kind="rhs"."""
    tile_map = MAPS[0][1]
    rank, root = comm.Get_rank(), comm.Get_size() - 1
    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    c = sl.cho_factor(A_FULL, lower=True)
    x = f.solve(B_FULL if rank == root else None, root=root)
    x1 = f.solve(B_FULL[:, 0] if rank == 0 else None)            # one vector, root 0
    y = f.solve_triangular(B_FULL if rank == 0 else None)
    if rank == root:
        assert x.shape == B_FULL.shape
        assert np.abs(x - sl.cho_solve(c, B_FULL)).max() <= 1e-10
    else:
        assert x is None
    if rank == 0:
        assert x1.shape == (N,) and np.abs(x1 - sl.cho_solve(c, B_FULL[:, 0])).max() <= 1e-10
        assert np.abs(y - sl.solve_triangular(c[0], B_FULL, lower=True)).max() <= 1e-10
    if comm.Get_size() > 1:
        raises_everywhere(comm, UsageError, "a numpy array on the root rank",
                          lambda: f.solve(b if rank == 0 else B_FULL))
    raises_everywhere(comm, UsageError, "B must have N = 256 rows",
                      lambda: f.solve(B_FULL[:10] if rank == 0 else None))
    raises_everywhere(comm, UsageError, 'pass kind="rhs"',
                      lambda: DistributedMatrix.from_numpy(B_FULL, NB, tile_map))


def test_from_numpy_and_hdf5(session, comm, shared_tmp):
    h5py = pytest.importorskip("h5py")
    tile_map = MAPS[0][1]
    rank = comm.Get_rank()
    a = DistributedMatrix.from_numpy(A_FULL if rank == 0 else None, NB, tile_map)
    ref, _ = make(tile_map)
    assert sorted(a.tiles) == sorted(ref.tiles)
    assert all(np.array_equal(a.tiles[k], ref.tiles[k]) for k in a.tiles)
    folder = shared_tmp
    path = os.path.join(folder, "a.h5")
    if rank == 0:
        with h5py.File(path, "w") as fh:
            fh["A"] = A_FULL
    comm.Barrier()
    b = DistributedMatrix.from_hdf5(path, "/A", NB, tile_map)
    assert all(np.array_equal(b.tiles[k], ref.tiles[k]) for k in b.tiles)
    f = cholesky(b, tile_map)
    f.L.to_hdf5(os.path.join(folder, "l.h5"), "/L")
    if rank == 0:
        with h5py.File(os.path.join(folder, "l.h5"), "r") as fh:
            L = fh["L"][...]
        assert np.allclose(L @ L.T, A_FULL, atol=1e-12)
        assert sorted(os.listdir(folder)) == ["a.h5", "l.h5"]
    c = a.copy()
    assert c.tiles.keys() == a.tiles.keys()
    assert all(c.tiles[k] is not a.tiles[k] and np.array_equal(c.tiles[k], a.tiles[k])
               for k in a.tiles)


@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_a_window_smaller_than_the_graph_changes_neither_factor_nor_bytes(session, comm, name,
                                                                          tile_map):
    """Iteration k submitted once this rank's tasks of iteration k - W are done (W = 1
    and 2 of NT = 10 iterations): the same factor, bit for bit (every tile's updates
    still apply in iteration order), and the same bytes per pair as the whole graph at
    once (W = 0), which the model predicts."""
    n, nb = 320, 32
    full = _spd(n, 5)
    factors, pairs = {}, {}
    for w in (0, 1, 2):
        a = DistributedMatrix.from_function(block(full), (n, n), nb, tile_map)
        f = cholesky(a, tile_map, window=w)
        assert f.record.match is True
        factors[w], pairs[w] = f.L.gather(), f.record.bytes_measured_pairs
    assert pairs[1] == pairs[2] == pairs[0]
    if comm.Get_rank() == 0:
        assert np.array_equal(factors[1], factors[0])
        assert np.array_equal(factors[2], factors[0])
        assert np.allclose(factors[0], np.tril(sl.cho_factor(full, lower=True)[0]),
                           rtol=0, atol=1e-12)
        assert pairs[0] == cholesky_bytes(tile_map, n, nb)


def test_not_positive_definite_inside_the_window(session, comm):
    """A failing column while later iterations wait for the window: the same error on
    every rank, with LAPACK's column, and the session goes on."""
    tile_map = MAPS[0][1]
    n, nb = 320, 32
    bad = _spd(n, 5)
    bad[200, 200] = -1.0
    a = DistributedMatrix.from_function(block(bad), (n, n), nb, tile_map)
    err = raises_everywhere(comm, NotPositiveDefiniteError, "global column 200",
                            lambda: cholesky(a, tile_map, window=1))
    assert err.column == 200
    raises_everywhere(comm, UsageError, "window must be an integer >= 0",
                      lambda: cholesky(a, tile_map, window=-1))
    assert cholesky(make(tile_map)[0], tile_map, window=1).record.match is True


def _failing_progress(comm, tile_map, nt):
    """A progress callback that raises on the last rank that has tasks (the same rank
    everywhere), once; ``calls`` counts its calls on this rank."""
    so = tile_map.owner_maps(nt)
    bad = max(r for r in range(comm.Get_size()) if local_task_count(so, r) > 0)
    calls = []

    def progress(done, total):
        calls.append(done)
        if comm.Get_rank() == bad:
            raise KeyError(f"display gone at {done}/{total}")
    return progress, calls, bad


def test_progress_callback_error_on_one_rank(session, comm):
    """A progress callback raising on one rank: not called again there, the
    factorization finishes, every rank raises CallbackError; the session goes on."""
    tile_map = MAPS[0][1]
    a, b = make(tile_map)
    progress, calls, bad = _failing_progress(comm, tile_map, a.nt)
    err = raises_everywhere(comm, CallbackError,
                            f"the progress callback {progress.__qualname__} raised on rank "
                            f"{bad}: KeyError: 'display gone at ",
                            lambda: cholesky(a, tile_map, progress=progress))
    assert err.callback == "progress" and err.rank == bad
    if comm.Get_rank() == bad:
        assert len(calls) == 1                      # never called after it raised
        assert isinstance(err.__cause__, KeyError)  # the original, with its traceback
    # the session is still usable, and so is the public wait
    f = cholesky(a, tile_map, progress=lambda done, total: None)
    assert f.record.match is True and f.residual(a) < 1e-14
    progress, calls, _ = _failing_progress(comm, tile_map, a.nt)
    raises_everywhere(comm, CallbackError, "KeyError: 'display gone at 1/1'",
                      lambda: session.wait(progress, total=1))
    f.solve(b)
    assert f.solve_record.match is True


def test_failed_factorization_takes_precedence_over_the_callback(session, comm):
    tile_map = MAPS[0][1]
    bad = A_FULL.copy()
    bad[100, 100] = -1.0
    a = DistributedMatrix.from_function(block(bad), (N, N), NB, tile_map)
    progress, _, _ = _failing_progress(comm, tile_map, a.nt)
    raises_everywhere(comm, NotPositiveDefiniteError, "global column 100",
                      lambda: cholesky(a, tile_map, progress=progress))


def test_unstarted_session_given_to_cholesky(session, comm):
    tile_map = MAPS[0][1]
    a, _ = make(tile_map)
    raises_everywhere(comm, SessionError, "the session given to cholesky is not started: "
                      "use `with Session(comm) as session:`",
                      lambda: cholesky(a, tile_map, session=Session(comm, workers=1)))


# -- every input of a collective call is agreed: a bad or different value on ONE rank ----
def _one(comm, bad, good):
    """``bad`` on the last rank, ``good`` elsewhere."""
    return bad if comm.Get_rank() == comm.Get_size() - 1 else good


def test_session_arguments_are_checked_collectively(session, comm):
    """A bad Session argument on one rank: the same UsageError on every rank from
    start(), before anything starts (the running session is left alone)."""
    last = comm.Get_size() - 1
    cases = [({"scheduler": "bogus"}, "unknown scheduler 'bogus'"),
             ({"workers": 0}, "workers must be between 1 and"),
             ({"gpus": -1}, "gpus must be an integer >= 0")]
    if P > 1:
        cases += [({"scheduler": "lws"}, f"scheduler: rank 0 has 'prio', rank {last} has 'lws'"),
                  ({"stats": False}, f"stats: rank 0 has True, rank {last} has False"),
                  ({"cache": False}, f"cache: rank 0 has True, rank {last} has False"),
                  ({"trace": "/nonexistent/starchol-trace"}, "trace")]
    for bad, words in cases:
        given = {"workers": 1, "stats": True, **_one(comm, bad, {})}
        raises_everywhere(comm, UsageError, words,
                          lambda: Session(comm, **given).start())
    assert Session.current() is session and session.started
    assert not os.path.exists("/nonexistent")
    # good arguments while a session runs: the same SessionError everywhere
    raises_everywhere(comm, SessionError, "already running",
                      lambda: Session(comm, workers=1).start())


def test_custom_maps_of_one_description_are_compared_by_owners(session, comm):
    if P == 1:
        pytest.skip("a 1-node custom map has one owner")
    last = comm.Get_size() - 1
    m1 = CustomMap(np.arange(P).reshape(1, P))
    m2 = CustomMap(np.roll(np.arange(P), 1).reshape(1, P))
    assert str(m1) == str(m2)
    mine = _one(comm, m2, m1)
    raises_everywhere(comm, UsageError,
                      f"tile_map: rank 0 and rank {last} both have {m1}, but with different "
                      f"owners", lambda: DistributedMatrix.from_function(
                          block(A_FULL), (N, N), NB, mine))
    a = DistributedMatrix.from_function(block(A_FULL), (N, N), NB, m1)
    raises_everywhere(comm, UsageError, f"(it was built for another map of the same "
                                        f"description, with different owners)",
                      lambda: cholesky(a, m2))
    raises_everywhere(comm, UsageError, "with different owners",
                      lambda: cholesky(a, mine))


def test_flush_is_agreed(session, comm):
    if P == 1:
        pytest.skip("needs two ranks")
    tile_map = MAPS[0][1]
    a, _ = make(tile_map)
    last = comm.Get_size() - 1
    raises_everywhere(comm, UsageError, f"flush: rank 0 has True, rank {last} has False",
                      lambda: cholesky(a, tile_map, flush=_one(comm, False, True)))


def test_root_is_checked_and_agreed(session, comm):
    tile_map = MAPS[0][1]
    rank, last = comm.Get_rank(), comm.Get_size() - 1
    err = raises_everywhere(comm, UsageError, f"root must be a rank of the communicator, "
                                              f"0 to {last}, got {P}",
                            lambda: DistributedMatrix.from_numpy(A_FULL, NB, tile_map, root=P))
    assert err.params == ("root",)
    raises_everywhere(comm, UsageError, "root must be an integer rank, got 'zero'",
                      lambda: DistributedMatrix.from_numpy(A_FULL, NB, tile_map,
                                                           root=_one(comm, "zero", 0)))
    a, _ = make(tile_map)
    raises_everywhere(comm, UsageError, "got -1", lambda: a.gather(root=_one(comm, -1, 0)))
    if P > 1:
        raises_everywhere(comm, UsageError, f"root: rank 0 has 0, rank {last} has {last}",
                          lambda: DistributedMatrix.from_numpy(
                              A_FULL, NB, tile_map, root=_one(comm, last, 0)))
        raises_everywhere(comm, UsageError, f"root: rank 0 has 0, rank {last} has 1",
                          lambda: a.gather(root=_one(comm, 1, 0)))
    dense = a.gather(root=last)          # still usable, any valid root
    assert (dense is not None) == (rank == last)


def test_from_numpy_refuses_a_non_symmetric_array(session, comm):
    """Issue 47: a whole array that is not symmetric is refused on every rank (it passed
    silently and the lower triangle was factored); its lower triangle alone (upper all
    zeros) is read as documented, and symmetry_tol loosens the check."""
    tile_map = MAPS[0][1]
    bad = A_FULL.copy()
    bad[0, -1] += 1e-3 * np.abs(A_FULL).max()
    err = raises_everywhere(comm, UsageError, "array is not symmetric: max |A - A^T| / "
                                              "max |A| = 1.000e-03 > tolerance 1.0e-10",
                            lambda: DistributedMatrix.from_numpy(bad, NB, tile_map))
    assert err.params == ("symmetry_tol",)
    for array, tol in ((np.tril(A_FULL), None), (bad, 2e-3)):
        dense = DistributedMatrix.from_numpy(array, NB, tile_map, symmetry_tol=tol).gather()
        if comm.Get_rank() == 0:
            assert np.array_equal(np.tril(dense), np.tril(A_FULL))


def test_from_hdf5_inputs_are_agreed(session, comm, shared_tmp):
    h5py = pytest.importorskip("h5py")
    tile_map = MAPS[0][1]
    rank, last = comm.Get_rank(), comm.Get_size() - 1
    folder = shared_tmp
    path = os.path.join(folder, "a.h5")
    if rank == 0:
        with h5py.File(path, "w") as fh:
            fh["A"] = A_FULL
            fh["A2"] = 2 * A_FULL
    comm.Barrier()
    raises_everywhere(comm, UsageError, "symmetry_tol must be a finite number >= 0",
                      lambda: DistributedMatrix.from_hdf5(
                          path, "/A", NB, tile_map, symmetry_tol=_one(comm, float("nan"), None)))
    if P > 1:
        err = raises_everywhere(comm, UsageError,
                                f"dataset: rank 0 has '/A', rank {last} has '/A2'",
                                lambda: DistributedMatrix.from_hdf5(
                                    path, _one(comm, "A2", "/A"), NB, tile_map))
        assert err.params == ("dataset",)
        raises_everywhere(comm, UsageError, f"nb: rank 0 has {NB}, rank {last} has 32",
                          lambda: DistributedMatrix.from_hdf5(path, "/A", _one(comm, 32, NB),
                                                              tile_map))
    b = DistributedMatrix.from_hdf5(path, _one(comm, "A", "/A"), NB, tile_map)  # one dataset
    ref, _ = make(tile_map)
    assert all(np.array_equal(b.tiles[k], ref.tiles[k]) for k in b.tiles)
    # issue 35.5: one name, different data on some rank (a rank started elsewhere, a
    # node-local file): the data are compared, not the names
    if P > 1:
        mine = os.path.join(folder, f"rank{rank}")
        os.mkdir(mine)
        with h5py.File(os.path.join(mine, "a.h5"), "w") as fh:
            fh["A"] = A_FULL if rank != last else 2 * A_FULL
        here = os.getcwd()
        os.chdir(mine)
        try:
            raises_everywhere(comm, UsageError, f"rank 0 and rank {last} both have a.h5:/A, "
                                                f"but with different data",
                              lambda: DistributedMatrix.from_hdf5("a.h5", "/A", NB, tile_map))
        finally:
            os.chdir(here)
    if P > 1:   # the output too: rank 0 publishes, every rank writes its tiles
        out = os.path.join(folder, "l.h5")
        raises_everywhere(comm, UsageError, f"dataset: rank 0 has '/L', rank {last} has "
                                            f"'/M'", lambda: b.to_hdf5(out, _one(comm, "M", "/L")))
        assert not os.path.exists(out)
        b.to_hdf5(out, _one(comm, "L", "/L"))
