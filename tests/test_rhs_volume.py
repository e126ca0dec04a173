"""The right-hand-side variant's byte model (solve and residual) against the one oracle
(volume_reference), and the choice of a variant."""
import numpy as np
import pytest
from volume_reference import (SOLVE_SIZES, over_solve_cases, rhs_residual_bytes,
                              rhs_solve_bytes)

from starchol.distributions import get_map
from starchol.model.rhs_volume import (check_variant, choose_variant,
                                        residual_bytes_by_variant,
                                        rhs_residual_transfer_pairs_bytes,
                                        rhs_solve_transfer_pairs_bytes,
                                        solve_bytes_by_variant, variant_summary)

@over_solve_cases()
def test_rhs_solve_model_equals_oracle(name, nodes, grid, c, cache, n, nb, k):
    m = get_map(name, nodes, grid=grid, slices=c)
    for itemsize in (8, 4):
        for which in ("both", "forward", "backward"):
            model = rhs_solve_transfer_pairs_bytes(m, n, nb, k, cache=cache,
                                                   itemsize=itemsize, which=which)
            assert model.tolist() == rhs_solve_bytes(m, n, nb, k, cache=cache,
                                                     itemsize=itemsize, which=which)


@over_solve_cases(SOLVE_SIZES[:2])
def test_rhs_residual_model_equals_oracle(name, nodes, grid, c, cache, n, nb, k):
    m = get_map(name, nodes, grid=grid, slices=c)
    for itemsize in (8, 4):
        model = rhs_residual_transfer_pairs_bytes(m, n, nb, k, cache=cache,
                                                  itemsize=itemsize)
        assert model.tolist() == rhs_residual_bytes(m, n, nb, k, cache=cache,
                                                    itemsize=itemsize)


@pytest.mark.parametrize("cache", [True, False])
def test_passes_add_up(cache):
    m = get_map("sbc", 6)
    parts = [rhs_solve_transfer_pairs_bytes(m, 1000, 50, 7, cache=cache, which=w)
             for w in ("forward", "backward")]
    assert np.array_equal(parts[0] + parts[1],
                          rhs_solve_transfer_pairs_bytes(m, 1000, 50, 7, cache=cache))


def test_hand_count_1x2():
    # 2dbc 1x2 (owner j % 2), N = 5, NB = 2: rows [2, 2, 1], d = [0, 1, 0], F[i][j] = j % 2.
    # K = 3: a block row k weighs rows[k] * 3 * 8 bytes: 48, 48, 24.
    # forward: Y0 -> owners of column 0 below (node 0): nothing; Y1 -> column 1 below
    #   (L21 on node 1 = d(1)): nothing; partial sums: row 1 from {L10: node 0} != d(1)
    #   = 1: 48 (0 -> 1); row 2 from {L20: 0, L21: 1} minus d(2) = 0: node 1, 24 (1 -> 0)
    # backward: X2 -> row 2 left (nodes 0, 1) minus d(2) = 0: 24 (0 -> 1); X1 -> row 1
    #   left (node 0) != d(1): 48 (1 -> 0); partial sums of row 1 from column 1 below
    #   (node 1 = d(1)): nothing; row 0 from column 0 below (nodes 0 = d(0)): nothing
    m = get_map("2dbc", 2, grid="1x2")
    for cache in (True, False):
        assert rhs_solve_transfer_pairs_bytes(m, 5, 2, 3, cache=cache,
                                              which="forward").tolist() == [[0, 48], [24, 0]]
        assert rhs_solve_transfer_pairs_bytes(m, 5, 2, 3, cache=cache,
                                              which="backward").tolist() == [[0, 24], [48, 0]]


def test_acceptance_sbc28_solve_is_100x_below():
    m = get_map("sbc", 28)
    both = solve_bytes_by_variant(m, 100_000, 500, 1)
    assert both["factor"].sum() > 65e9
    assert both["rhs"].sum() * 100 <= 65.7e9
    assert choose_variant(both)[0] == "rhs"


def test_choice_follows_k():
    """Few right-hand sides: the rhs variant; K far beyond NB on a small map: moving L
    is cheaper again."""
    m = get_map("2dbc", 6, grid="2x3")
    assert choose_variant(solve_bytes_by_variant(m, 1000, 100, 1))[0] == "rhs"
    assert choose_variant(solve_bytes_by_variant(m, 1000, 100, 1000))[0] == "factor"
    assert choose_variant(residual_bytes_by_variant(m, 1000, 100, 1))[0] == "rhs"
    assert choose_variant(residual_bytes_by_variant(m, 1000, 100, 1000))[0] == "factor"
    one = solve_bytes_by_variant(get_map("2dbc", 1), 500, 100, 3)
    assert choose_variant(one)[0] == "factor"       # a tie: the same tasks on one node
    name, reason = choose_variant(one, "rhs")
    assert name == "rhs" and reason.startswith("forced")
    doc = variant_summary(solve_bytes_by_variant(m, 1000, 100, 1))
    assert doc["variant"] == "rhs" and doc["requested"] == "auto"
    assert doc["variants"]["rhs"]["busiest_link_bytes"] < \
        doc["variants"]["factor"]["busiest_link_bytes"]


def test_bad_variant():
    with pytest.raises(ValueError, match="variant must be one of 'auto', 'factor', 'rhs', "
                                         "got 'fast'"):
        check_variant("fast")
    with pytest.raises(ValueError, match="nrhs must be an integer >= 1, got 0"):
        rhs_solve_transfer_pairs_bytes(get_map("sbc", 3), 100, 10, 0)
