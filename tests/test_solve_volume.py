"""The solve's byte model (and float32 bytes) against the one oracle (volume_reference)."""
import numpy as np
import pytest
from volume_reference import cholesky_bytes, solve_bytes

from starchol.distributions import get_map
from starchol.linalg.volume import solve_transfer_pairs_bytes, transfer_pairs_bytes

MAPS = [("2dbc", 1, None, 1), ("2dbc", 4, "2x2", 1), ("sbc", 6, None, 1),
        ("sbc-basic", 8, None, 1), ("sbc25d", 6, None, 2), ("2dbc25d", 8, "2x2", 2),
        ("2dbc", 6, "2x3", 1)]


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "nocache"])
@pytest.mark.parametrize("name,nodes,grid,c", MAPS,
                         ids=[f"{m[0]}-{m[1]}" for m in MAPS])
@pytest.mark.parametrize("n,nb,k", [(300, 64, 1), (250, 50, 120), (97, 97, 3)])
def test_solve_model_equals_oracle(name, nodes, grid, c, cache, n, nb, k):
    m = get_map(name, nodes, grid=grid, slices=c)
    for itemsize in (8, 4):
        model = solve_transfer_pairs_bytes(m, n, nb, k, cache=cache, itemsize=itemsize)
        assert model.tolist() == solve_bytes(m, n, nb, k, cache=cache, itemsize=itemsize)


@pytest.mark.parametrize("name,nodes,grid,c", MAPS, ids=[f"{m[0]}-{m[1]}" for m in MAPS])
def test_float32_cholesky_bytes_are_half(name, nodes, grid, c):
    m = get_map(name, nodes, grid=grid, slices=c)
    b8 = transfer_pairs_bytes(m, 333, 50)
    b4 = transfer_pairs_bytes(m, 333, 50, itemsize=4)
    assert (b8 == 2 * b4).all()
    assert b4.tolist() == cholesky_bytes(m, 333, 50, itemsize=4)
    assert np.array_equal(b8, np.asarray(cholesky_bytes(m, 333, 50)))
