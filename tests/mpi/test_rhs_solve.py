"""The right-hand-side variant of the solve and of the residual under MPI (1, 2, 4 or 6
ranks), beside the factor variant: X against SciPy, backward error at float64 level,
bytes measured == model == oracle per pair, the variant named in the record."""
import numpy as np
import pytest
import scipy.linalg as sl
from test_api import A_FULL, B_FULL, MAPS, NB, N, K, make, raises_everywhere
from volume_reference import (residual_bytes, rhs_residual_bytes, rhs_solve_bytes,
                              solve_bytes)

from starchol import UsageError, cholesky
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
