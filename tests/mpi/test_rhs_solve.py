"""The right-hand-side variant of the solve and of the residual under MPI (1, 2, 4 or 6
ranks), beside the factor variant: X against SciPy, backward error at float64 level,
bytes measured == model == oracle per pair, the variant named in the record."""
import numpy as np
import pytest
import scipy.linalg as sl
from test_api import A_FULL, B_FULL, MAPS, NB, N, K, make, raises_everywhere
from volume_reference import (residual_bytes, rhs_residual_bytes, rhs_solve_bytes,
                              solve_bytes)

from starchol import DistributedMatrix, UsageError, cholesky
from starchol.linalg.cholesky import rhs_residual, symmetric_tiles
from starchol.model.rhs_volume import residual_bytes_by_variant, solve_bytes_by_variant

ORACLE = {"rhs": rhs_solve_bytes, "factor": solve_bytes}


@pytest.mark.parametrize("variant", ["rhs", "factor"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_solve_variant(session, comm, name, tile_map, dtype, variant):
    a, b = make(tile_map, dtype)
    f = cholesky(a, tile_map)
    x = f.solve(b, variant=variant)
    rec = f.solve_record
    assert rec.extra["solve_variant"]["variant"] == variant
    assert rec.extra["solve_variant"]["requested"] == variant
    assert rec.match is True
    eta = f.solve_residual(a, x, b)
    X = x.gather()
    itemsize = np.dtype(dtype).itemsize
    if comm.Get_rank() == 0:
        A, B = A_FULL.astype(dtype).astype(np.float64), B_FULL.astype(dtype)
        ref = sl.cho_solve(sl.cho_factor(A, lower=True), B)
        tol = 1e-10 if dtype == np.float64 else 1e-4
        assert np.abs(X - ref).max() <= tol * np.abs(ref).max()
        assert eta <= (1e-15 if dtype == np.float64 else 1e-6), eta
        model = solve_bytes_by_variant(tile_map, N, NB, K, itemsize=itemsize)[variant]
        assert rec.bytes_predicted_pairs == model.tolist()
        assert rec.bytes_measured_pairs == ORACLE[variant](tile_map, N, NB, K,
                                                          itemsize=itemsize)


@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_auto_takes_fewer_bytes_on_the_busiest_link(session, comm, name, tile_map):
    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    f.solve(b)
    by = solve_bytes_by_variant(tile_map, N, NB, K)
    chosen = f.solve_record.extra["solve_variant"]
    assert chosen["requested"] == "auto"
    other = "factor" if chosen["variant"] == "rhs" else "rhs"
    assert by[chosen["variant"]].max() <= by[other].max()
    if comm.Get_size() > 1:     # few right-hand sides on several nodes: L stays
        assert chosen["variant"] == "rhs"


@pytest.mark.parametrize("variant", ["rhs", "factor"])
@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_residual_variant(session, comm, name, tile_map, variant):
    """R = B - A X, with A in place (rhs) or moved (factor): R as numpy's, bytes as
    the model and the oracle."""
    a, b = make(tile_map)
    x = b.copy()
    for t in x.tiles.values():
        t *= 0.5
    before = session.bytes_sent()
    r = rhs_residual(session, a, x, b, symmetric_tiles(a), tile_map=tile_map,
                     variant=variant)
    sent = session.bytes_sent() - before
    pairs = comm.gather(sent.tolist(), root=0)
    R, X = r.gather(), x.gather()
    if comm.Get_rank() == 0:
        ref = B_FULL - A_FULL @ X
        assert np.abs(R - ref).max() <= 1e-12 * np.abs(ref).max()
        oracle = rhs_residual_bytes if variant == "rhs" else residual_bytes
        assert pairs == oracle(tile_map, N, NB, K)
        assert pairs == residual_bytes_by_variant(tile_map, N, NB, K)[variant].tolist()


def test_bad_variant_everywhere(session, comm):
    tile_map = MAPS[0][1]
    a, b = make(tile_map)
    f = cholesky(a, tile_map)
    raises_everywhere(comm, UsageError, "variant must be one of 'auto', 'factor', 'rhs', "
                      "got 'fast'", lambda: f.solve(b, variant="fast"))
    if comm.Get_size() > 1:
        raises_everywhere(comm, UsageError, "the ranks were given different inputs",
                          lambda: f.solve(b, variant="rhs" if comm.Get_rank() else
                                          "factor"))


@pytest.mark.parametrize("name,tile_map", MAPS, ids=[m[0] for m in MAPS])
def test_a_window_smaller_than_the_depth_changes_neither_solves_nor_residuals(
        session, comm, name, tile_map, monkeypatch):
    """The solves (both variants, both passes and each alone) and the residuals in a
    window of W = 1 and 2 steps (NT = 10: 20 steps of a solve, 10 rows of a residual):
    the same X and residuals, bit for bit, as the whole graph at once (W = 0) and as
    SciPy's; the same bytes per pair, which the model predicts."""
    from test_api import _spd, block

    from starchol.runtime.computation import Computation

    waits = []
    wait_iteration = Computation.wait_iteration
    monkeypatch.setattr(Computation, "wait_iteration",
                        lambda self, k, *args: waits.append(k) or wait_iteration(self, k,
                                                                                 *args))
    n, nb, k = 320, 32, 3
    full = _spd(n, 5)
    rhs = np.random.default_rng(6).standard_normal((n, k))
    got = {}
    for w in (0, 1, 2):
        a = DistributedMatrix.from_function(block(full), (n, n), nb, tile_map)
        b = DistributedMatrix.from_function(block(rhs), (n, k), nb, tile_map, kind="rhs")
        f = cholesky(a, tile_map, window=w)
        assert f.window == w
        out = {"llt": f.residual(a)}
        for variant in ("rhs", "factor"):
            x = f.solve(b, variant=variant)
            rec = f.solve_record
            assert rec.match is True and rec.extra["solve_variant"]["variant"] == variant
            y = f.solve_triangular(b, variant=variant)
            fwd = f.solve_record
            z = f.solve_triangular(y, trans=True, variant=variant)
            bwd = f.solve_record
            assert fwd.match is True and bwd.match is True
            before = session.bytes_sent()
            r = rhs_residual(session, a, x, b, tile_map=tile_map, variant=variant,
                             window=f.window)
            sent = (session.bytes_sent() - before).tolist()
            out[variant] = (x.gather(), z.gather(), r.gather(),
                            rec.bytes_measured_pairs, fwd.bytes_measured_pairs,
                            bwd.bytes_measured_pairs, comm.gather(sent, root=0))
        out["eta"] = f.solve_residual(a, x, b)
        got[w] = out
        # every graph waited in its window: the factorization (10 iterations) and 4
        # residuals (10 rows) NT - W times, the 6 solves (20 steps, a pass alone too:
        # the other pass's steps have no tasks) 2 NT - W times
        assert len(waits) == (0 if w == 0 else (10 - w) * 4 + (20 - w) * 6 + (10 - w)), \
            (w, len(waits))
        waits.clear()
    if comm.Get_rank() != 0:
        return
    ref = sl.cho_solve(sl.cho_factor(full, lower=True), rhs)
    for variant in ("rhs", "factor"):
        X, Z, R, solve_pairs, fwd_pairs, bwd_pairs, res_pairs = got[0][variant]
        assert np.abs(X - ref).max() <= 1e-10 * np.abs(ref).max()
        assert np.abs(R - (rhs - full @ X)).max() <= 1e-12 * np.abs(rhs).max()
        assert solve_pairs == solve_bytes_by_variant(tile_map, n, nb, k)[variant].tolist()
        assert res_pairs == residual_bytes_by_variant(tile_map, n, nb, k)[variant].tolist()
        for w in (1, 2):
            same = got[w][variant]
            assert all(np.array_equal(u, v) for u, v in zip(same[:3], (X, Z, R)))
            assert same[3:] == (solve_pairs, fwd_pairs, bwd_pairs, res_pairs)
    assert got[1]["llt"] == got[2]["llt"] == got[0]["llt"] < 1e-14
    assert got[1]["eta"] == got[2]["eta"] == got[0]["eta"] < 1e-15
