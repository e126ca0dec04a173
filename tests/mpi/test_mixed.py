"""solve_mixed under MPI (1, 2, 4 or 6 ranks), for every map of tests/mpi: against
scipy's float64 cho_solve, the fallback paths, bytes measured == model (per graph and
in total, per pair), A and B unchanged, collective input errors."""
import math
import warnings

import numpy as np
import pytest
import scipy.linalg as sl
from test_api import maps_for, raises_everywhere
from volume_reference import cholesky_bytes

from starchol import DistributedMatrix, MixedSolution, UsageError, solve_mixed
from starchol.linalg.mixed import EPS64, PrecisionFallbackWarning
from starchol.model.mixed_volume import mixed_phase_bytes

N, NB, K = 256, 64, 3
P = __import__("test_api").P
MAPS = maps_for(P)
IDS = [m[0] for m in MAPS]
BOUND = math.sqrt(N) * EPS64


def _spd(n, seed=11):
    m = np.random.default_rng(seed).standard_normal((n, n))
    return m @ m.T / n + np.eye(n)


def _conditioned(n, cond, seed=12):
    """A symmetric positive definite matrix with condition number ``cond`` (eigenvalues
    spread geometrically from 1 to 1/cond), the same on every rank."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    a = (q * np.logspace(0, -math.log10(cond), n)) @ q.T
    return (a + a.T) / 2


A_WELL = _spd(N)
A_ILL = _conditioned(N, 1e9)
B_FULL = np.random.default_rng(13).standard_normal((N, K))


def _make(tile_map, full, b=B_FULL):
    a = DistributedMatrix.from_function(lambda r0, r1, c0, c1: full[r0:r1, c0:c1], (N, N),
                                        NB, tile_map)
    bb = DistributedMatrix.from_function(lambda r0, r1, c0, c1: b[r0:r1, c0:c1],
                                         b.shape, NB, tile_map, kind="rhs")
    return a, bb


def _snapshot(m):
    return {k: t.copy() for k, t in m.tiles.items()}


def _unchanged(m, snap):
    return set(m.tiles) == set(snap) and all(np.array_equal(m.tiles[k], snap[k])
                                             for k in snap)


def _same(comm, value):
    values = comm.allgather(value)
    assert all(v == values[0] for v in values), values
    return values[0]


def _check_bytes(sol, tile_map, iterations, fallback):
    """Measured == model, in total and graph by graph, pair by pair."""
    rec = sol.record
    assert rec.match is True
    model = mixed_phase_bytes(tile_map, N, NB, K, iterations, fallback)
    for kind, pairs in sol.phase_bytes_pairs.items():
        assert pairs == model[kind].tolist(), kind


@pytest.mark.parametrize("name,tile_map", MAPS, ids=IDS)
def test_mixed_against_scipy(session, comm, name, tile_map):
    a, b = _make(tile_map, A_WELL)
    a0, b0 = _snapshot(a), _snapshot(b)
    sol = solve_mixed(a, b, tile_map)
    assert isinstance(sol, MixedSolution)
    assert _same(comm, (sol.fallback, sol.iterations, sol.backward_error)) == \
        (None, sol.iterations, sol.backward_error)
    assert 1 <= sol.iterations <= 5 and sol.converged
    assert sol.backward_error <= BOUND and sol.history[-1] == sol.backward_error
    assert sol.history[0] > 1e-9           # the float32 solve alone is not enough
    assert sol.X.dtype == np.float64 and sol.factor.L.dtype == np.float32
    assert _unchanged(a, a0) and _unchanged(b, b0)
    _check_bytes(sol, tile_map, sol.iterations, None)
    # the float32 factorization moves half of float64's bytes, pair by pair
    half = sol.phase_bytes_pairs["factor32"]
    assert (2 * np.array(half)).tolist() == cholesky_bytes(tile_map, N, NB)
    assert sol.record.operation == "solve_mixed" and sol.record.dtype == "mixed"
    assert sol.record.mixed.iterations == sol.iterations
    X = sol.X.gather()
    if comm.Get_rank() == 0:
        ref = sl.cho_solve(sl.cho_factor(A_WELL, lower=True), B_FULL)
        assert np.abs(X - ref).max() <= 1e-12 * np.abs(ref).max()
        eta = np.linalg.norm(B_FULL - A_WELL @ X) / (
            np.linalg.norm(A_WELL) * np.linalg.norm(X) + np.linalg.norm(B_FULL))
        assert eta <= BOUND and abs(eta - sol.backward_error) <= 0.1 * BOUND


@pytest.mark.parametrize("name,tile_map", MAPS, ids=IDS)
def test_ill_conditioned_falls_back(session, comm, name, tile_map):
    """cond(A) = 1e9: beyond a float32 factor; the answer is float64's, said so on every
    rank (the solution's fields and a warning), and it meets the float64 bound."""
    a, b = _make(tile_map, A_ILL)
    a0, b0 = _snapshot(a), _snapshot(b)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = solve_mixed(a, b, tile_map)
    assert sol.fallback in ("factorization", "refinement")
    _same(comm, (sol.fallback, sol.reason, sol.iterations, sol.backward_error))
    assert sol.reason and not sol.converged
    said = [str(w.message) for w in caught if w.category is PrecisionFallbackWarning]
    assert said == [f"solve_mixed fell back to float64: {sol.reason}"]
    assert sol.backward_error <= BOUND
    assert sol.factor.L.dtype == np.float64 and sol.logdet_exact
    assert _unchanged(a, a0) and _unchanged(b, b0)
    _check_bytes(sol, tile_map, sol.iterations, sol.fallback)
    X = sol.X.gather()
    if comm.Get_rank() == 0:
        eta = np.linalg.norm(B_FULL - A_ILL @ X) / (
            np.linalg.norm(A_ILL) * np.linalg.norm(X) + np.linalg.norm(B_FULL))
        assert eta <= BOUND


def test_refinement_limit_falls_back(session, comm):
    """max_iterations=0: the float32 solve alone misses the bound; the fallback is the
    refinement's, after one float32 solve and one check."""
    tile_map = MAPS[-1][1]
    a, b = _make(tile_map, A_WELL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionFallbackWarning)
        sol = solve_mixed(a, b, tile_map, max_iterations=0)
    assert _same(comm, sol.fallback) == "refinement" and sol.iterations == 0
    assert "no convergence in 0 iteration(s)" in sol.reason
    assert len(sol.history) == 1 and sol.backward_error <= BOUND
    _check_bytes(sol, tile_map, 0, "refinement")


def test_out_of_float32_range_falls_back(session, comm):
    tile_map = MAPS[0][1]
    a, b = _make(tile_map, A_WELL * 1e40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionFallbackWarning)
        sol = solve_mixed(a, b, tile_map)
    assert _same(comm, sol.fallback) == "range" and "float32's range" in sol.reason
    assert sol.backward_error <= BOUND
    _check_bytes(sol, tile_map, 0, "range")


def test_logdet(session, comm):
    """Without a fallback the float32 factor's log det is approximate (documented);
    exact=True gives float64's."""
    tile_map = MAPS[0][1]
    a, b = _make(tile_map, A_WELL)
    sol = solve_mixed(a, b, tile_map)
    ref = 2 * np.log(np.diag(sl.cho_factor(A_WELL, lower=True)[0])).sum()
    assert not sol.logdet_exact
    approx = _same(comm, sol.logdet())
    assert abs(approx - ref) <= N * 2.0 ** -24 * np.linalg.cond(A_WELL) * abs(ref)
    exact = _same(comm, sol.logdet(exact=True))
    assert sol.logdet_exact and abs(exact - ref) <= 1e-12 * abs(ref)


def test_bad_input_on_one_rank(session, comm):
    tile_map = MAPS[0][1]
    a, b = _make(tile_map, A_WELL)
    last = comm.Get_size() - 1
    b32 = b.astype(np.float32) if comm.Get_rank() == last else b
    raises_everywhere(comm, UsageError, "dtype is float32, expected float64",
                      lambda: solve_mixed(a, b32, tile_map))
    if P > 1:      # the ranks must agree on the refinement's limit
        raises_everywhere(comm, UsageError, "max_iterations",
                          lambda: solve_mixed(a, b, tile_map,
                                              max_iterations=5 if comm.Get_rank() == last
                                              else 30))
    raises_everywhere(comm, UsageError, "max_iterations must be an integer",
                      lambda: solve_mixed(a, b, tile_map, max_iterations=-1 if
                                          comm.Get_rank() == 0 else 30))
    raises_everywhere(comm, UsageError, "tolerance must be",
                      lambda: solve_mixed(a, b, tile_map, tolerance=2.0))
    a32 = a.astype(np.float32)
    raises_everywhere(comm, UsageError, "expected float64",
                      lambda: solve_mixed(a32, b, tile_map))
