"""The symmetric pattern maps on the runtime: measured bytes equal the model, per pair.

pplane on 7 ranks, aplane on 6, sym on 5 and 11 (oversubscribed, small N); the bytes are
also recounted by brute force from the map's owner array.
"""
import json

import numpy as np
import pytest

from starchol.distributions import get_map
from starchol.linalg.tiled import tile_sizes
from volume_reference import as_matrix, reference_pairs

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi

N, NB = 300, 50  # NT = 6


@pytest.mark.parametrize("np_,dist", [(7, "pplane"), (6, "aplane"), (5, "sym"), (11, "sym")])
def test_symmetric_maps_run_and_match_the_model(mpirun, tmp_path, np_, dist):
    out = tmp_path / "r.json"
    p = mpirun(np_, "run", "--dist", dist, "--n", N, "--nb", NB, "--check", "--json", out,
               timeout=240)
    assert p.rank_exits == [0] * np_, p.stderr
    doc = json.loads(out.read_text())
    assert doc["residual"] < 1e-14 and doc["match"] is True and doc["dist"] == dist
    owners = get_map(dist, np_, nt=doc["nt"]).owner_map(doc["nt"])
    assert set(np.unique(owners[np.tril_indices(doc["nt"])])) == set(range(np_))
    rows = tile_sizes(N, NB)
    recount = reference_pairs(owners, weight=lambda i, j: int(rows[i] * rows[j] * 8))
    assert doc["bytes_measured_pairs"] == as_matrix(recount, np_)
    assert np.count_nonzero(doc["bytes_measured_pairs"]) > 0


@pytest.mark.slow
def test_sym25d_runs_and_matches_the_model(mpirun, tmp_path):
    out = tmp_path / "r.json"
    p = mpirun(10, "run", "--dist", "sym25d", "--slices", 2, "--n", N, "--nb", NB, "--check",
               "--json", out, timeout=300)
    assert p.rank_exits == [0] * 10, p.stderr
    doc = json.loads(out.read_text())
    assert doc["residual"] < 1e-14 and doc["match"] is True and doc["slices"] == 2
