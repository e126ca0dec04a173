"""Symmetric maps from block designs: pplane, aplane, sym (any P) and sym25d.

The fast subset of the P = 2..200 sweep runs here; the full sweep is marked slow (and is
tabulated by benchmarks/symmetric_maps.py).
"""
import math

import numpy as np
import pytest

from starchol import UsageError
from starchol.distributions import get_map, square_grid, symmetric_map
from starchol.model.load import node_load
from starchol.distributions.cover import cover, pair_bounds
from starchol.distributions.designs import (affine_plane, field_tables, is_linear_space,
                                            prime_power, projective_plane)
from starchol.model.volume import stored_tiles, transfer_pairs_tiles
from volume_reference import as_matrix, reference_pairs


@pytest.mark.parametrize("q", [2, 3, 4, 5, 7, 8, 9])
def test_planes_are_linear_spaces(q):
    pg, ag = projective_plane(q), affine_plane(q)
    assert pg.shape == (q * q + q + 1, q + 1) and ag.shape == (q * q + q, q)
    assert is_linear_space(pg, q * q + q + 1) and is_linear_space(ag, q * q)


@pytest.mark.parametrize("q", [4, 8, 9, 16])
def test_prime_power_fields(q):
    add, mul = field_tables(q)
    nonzero = np.arange(1, q)
    # every nonzero element has one inverse; multiplication distributes over addition
    assert all(np.count_nonzero(mul[a, nonzero] == 1) == 1 for a in nonzero)
    a, b, c = np.meshgrid(np.arange(q), np.arange(q), np.arange(q), indexing="ij")
    assert np.array_equal(mul[a, add[b, c]], add[mul[a, b], mul[a, c]])
    assert prime_power(q) is not None and prime_power(12) is None


@pytest.mark.parametrize("name,nodes,q", [("pplane", 7, 2), ("pplane", 13, 3),
                                          ("aplane", 12, 3), ("aplane", 20, 4)])
def test_plane_map_cells_and_leading_factor(name, nodes, q):
    m = get_map(name, nodes)
    r = m.r
    assert r == (nodes if name == "pplane" else q * q)
    off = ~np.eye(r, dtype=bool)
    assert np.array_equal(m.cells[off], m.cells.T[off])
    sets = m.colrow_sets()
    assert all(len(c) == (q + 1 if name == "pplane" else q) for c in sets)
    for x in range(r):  # the diagonal goes to a node already in row x
        assert all(x in sets[p] for p in m.diagonal[:, x])
    assert m.leading_factor() == pytest.approx(q)
    assert m.pattern_units().max() / (r * r / nodes) == pytest.approx(1.0)


@pytest.mark.parametrize("name,nodes,kw", [
    ("pplane", 7, {}), ("aplane", 6, {}), ("sym", 5, {}), ("sym", 11, {}), ("sym", 2, {}),
    ("sym25d", 10, {"slices": 2}), ("sym25d", 14, {"slices": 2}),
])
@pytest.mark.parametrize("nt", [1, 5, 16])
def test_fast_model_equals_reference(name, nodes, kw, nt):
    m = get_map(name, nodes, nt=nt, **kw)
    for cache in (True, False):
        fast = transfer_pairs_tiles(m, nt, cache=cache)
        slow = as_matrix(reference_pairs(list(m.owner_maps(nt)), cache=cache), m.nodes)
        assert fast.tolist() == slow


@pytest.mark.parametrize("nodes,nt,ratio", [(31, 620, 5.05), (13, 260, 3.05)])
def test_pplane_acceptance(nodes, nt, ratio):
    m = get_map("pplane", nodes)
    d = transfer_pairs_tiles(m, nt).sum() / stored_tiles(nt)
    assert ratio - 0.1 < d <= ratio
    assert node_load(m, nt)["flops_max_over_avg"] <= 1.05


def test_sym_uses_the_plane_when_there_is_one():
    assert "PG(2,5)" in symmetric_map(31).label and symmetric_map(31).leading_factor() == 5
    assert "AG(2,4)" in symmetric_map(20).label and symmetric_map(20).leading_factor() == 4


# a spread of P: primes, squares, plane counts and P between planes
FAST_P = [10, 11, 16, 23, 29, 36, 47, 60, 64, 97]


@pytest.mark.parametrize("nodes", FAST_P)
def test_sym_beats_2dbc_with_balanced_load(nodes):
    nt = 600
    m = get_map("sym", nodes, nt=nt)
    assert m.nodes == nodes and m.r <= max(nt // 6, 2 + math.isqrt(2 * nodes))
    p, q = square_grid(nodes)
    lead = m.leading_factor()
    assert lead <= p + q - 2
    assert lead <= math.sqrt(2 * nodes)
    assert node_load(m, nt)["flops_max_over_avg"] <= 1.10
    owners = m.owner_map(nt)
    assert set(np.unique(owners[np.tril_indices(nt)])) == set(range(nodes))


@pytest.mark.slow
@pytest.mark.parametrize("nodes", range(10, 201))
def test_sym_sweep_exact_volume(nodes):
    nt = 600
    m = get_map("sym", nodes, nt=nt)
    p, q = square_grid(nodes)
    two_d = transfer_pairs_tiles(get_map("2dbc", nodes, grid=(p, q)), nt).sum()
    assert transfer_pairs_tiles(m, nt).sum() <= two_d
    assert node_load(m, nt)["flops_max_over_avg"] <= 1.10


def test_sym_is_deterministic():
    from starchol.distributions.symmetric import _symmetric_map

    a = _symmetric_map.__wrapped__(23, 100)
    b = _symmetric_map.__wrapped__(23, 100)
    assert np.array_equal(a.cells, b.cells) and np.array_equal(a.diagonal, b.diagonal)


def test_sym_small_nt_keeps_the_pattern_small():
    big = get_map("sym", 40)
    small = get_map("sym", 40, nt=60)
    assert small.r <= max(10, 60 // 6) < big.r


def test_cover_respects_pair_bounds():
    st = cover(13, 17, projective_plane(3))
    lo, hi = pair_bounds(13, 17)
    assert st.npairs.min() >= lo and st.npairs.max() <= hi
    assert np.all(st.owner >= 0) and st.npairs.sum() == 13 * 12 // 2


def test_owner_needs_nt_for_aligned_patterns():
    m = get_map("pplane", 7)
    with pytest.raises(ValueError, match="needs nt"):
        m.owner(3, 1)
    assert m.owner(3, 1, nt=20) == m.owner_map(20)[3, 1]


def test_sym_errors():
    with pytest.raises(UsageError, match="at least 2"):
        get_map("sym", 1)
    with pytest.raises(UsageError, match="divisible"):
        get_map("sym25d", 9, slices=2)


@pytest.mark.slow
@pytest.mark.timeout(120)       # seconds each on a quiet core; a search that runs away fails
@pytest.mark.parametrize("nodes", [400, 600, 993, 1000])
def test_sym_construction_for_a_thousand_nodes(nodes):
    from starchol.distributions.symmetric import _symmetric_map

    m = _symmetric_map.__wrapped__(nodes, None)
    assert m.nodes == nodes and m.leading_factor() <= math.sqrt(2 * nodes)
