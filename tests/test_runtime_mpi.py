"""Distributed runs launched with mpirun (oversubscribed, 1 StarPU worker per rank)."""
import json
import re

import numpy as np
import pytest
from volume_reference import cholesky_bytes

from starchol.distributions import get_map
from starchol.linalg import matrices

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi

N, NB = 300, 64          # NT = 5, last tile 44 rows


def run_json(mpirun, tmp_path, np_, *args):
    out = tmp_path / "r.json"
    gathered = tmp_path / "L.npy"
    p = mpirun(np_, "run", *args, "--check", "--json", out, "--gather", gathered)
    assert p.rank_exits == [0] * np_, p.stderr
    doc = json.loads(out.read_text())
    return doc, np.load(gathered), p


CASES = [
    (1, ["--dist", "2dbc"]),
    (2, ["--dist", "2dbc"]),
    (2, ["--dist", "sbc-basic"]),
    (4, ["--dist", "2dbc", "--grid", "2x2"]),
    (6, ["--dist", "sbc"]),
    (6, ["--dist", "2dbc", "--grid", "2x3"]),
]


@pytest.mark.parametrize("np_,dist", CASES, ids=[f"{c[0]}-{'-'.join(c[1][1:])}" for c in CASES])
def test_factor_matches_numpy(mpirun, tmp_path, np_, dist):
    doc, L, p = run_json(mpirun, tmp_path, np_, *dist, "--n", N, "--nb", NB, "--seed", 7)
    ref = np.linalg.cholesky(matrices.dense(matrices.MatrixSpec("spd"), N, 7))
    assert np.allclose(L, ref, rtol=0, atol=1e-12)
    assert doc["residual"] < 1e-14
    assert doc["match"] is True
    assert doc["nodes"] == np_ and doc["nt"] == 5
    assert doc["bytes_measured_pairs"] == doc["bytes_predicted_pairs"]
    tile_map = get_map(dist[1], np_, grid=dist[3] if "--grid" in dist else None)
    assert doc["bytes_measured_pairs"] == cholesky_bytes(tile_map, N, NB)
    for key in ("dist", "nodes", "n", "nb", "nt", "time_s", "gflops", "residual",
                "bytes_measured_pairs", "bytes_predicted_pairs", "bytes_measured_total",
                "bytes_predicted_total", "match"):
        assert key in doc
    assert set(doc["runtime"]) >= {"scheduler", "workers_per_rank", "starpu_version"}
    assert doc["runtime"]["scheduler"] == "prio"
    assert "match: yes" in p.stdout


@pytest.mark.parametrize("np_,dist", [(4, ["--dist", "2dbc", "--grid", "2x2"]),
                                      (6, ["--dist", "sbc"])], ids=["2dbc-2x2", "sbc-6"])
def test_bytes_cache_off(mpirun, tmp_path, np_, dist):
    out = tmp_path / "r.json"
    p = mpirun(np_, "run", *dist, "--n", 333, "--nb", 50, "--no-cache", "--json", out)
    assert p.rank_exits == [0] * np_, p.stderr
    doc = json.loads(out.read_text())
    assert doc["match"] is True and doc["cache"] is False
    tile_map = get_map(dist[1], np_, grid=dist[3] if "--grid" in dist else None)
    expect = np.array(cholesky_bytes(tile_map, 333, 50, cache=False))
    assert doc["bytes_measured_pairs"] == expect.tolist()
    with_cache = np.array(cholesky_bytes(tile_map, 333, 50))
    assert expect.sum() > with_cache.sum()


def test_custom_map(mpirun, tmp_path):
    f = tmp_path / "map.txt"
    f.write_text("2 3\n0 1 2\n2 0 1\n")
    doc, L, _ = run_json(mpirun, tmp_path, 3, "--dist", "custom", "--map-file", f,
                         "--n", 250, "--nb", 48)
    assert doc["match"] is True and doc["residual"] < 1e-14


@pytest.mark.parametrize("np_,dist", [(1, ["--dist", "2dbc"]), (6, ["--dist", "sbc"])],
                         ids=["1", "6"])
def test_not_positive_definite_all_ranks(mpirun, np_, dist):
    j = 137
    p = mpirun(np_, "run", *dist, "--n", N, "--nb", NB, "--matrix", f"indefinite:{j}",
               timeout=90)
    assert p.rank_exits == [1] * np_, p.stderr
    # mpirun forwards each rank's stderr; lines of different ranks may run together
    cols = re.findall(r"not positive definite: the factorization failed at global column (\d+)",
                      p.stderr)
    assert cols == [str(j)] * np_, p.stderr


@pytest.mark.parametrize("np_,args,msg", [
    (4, ["--dist", "sbc", "--n", 300, "--nb", 64], "sbc needs"),
    (3, ["--dist", "2dbc", "--grid", "2x2", "--n", 300, "--nb", 64], "2x2"),
    (2, ["--dist", "2dbc", "--n", 100, "--nb", 200], "larger than --n"),
    (2, ["--dist", "2dbc", "--n", 0, "--nb", 10], "--n must be positive"),
    (2, ["--dist", "2dbc", "--n", 100, "--nb", -4], "--nb must be positive"),
    (2, ["--dist", "2dbc", "--n", 100, "--nb", 10, "--sched", "fastest"], "unknown --sched 'fastest'"),
], ids=["ranks-vs-sbc", "ranks-vs-grid", "nb>n", "n<=0", "nb<=0", "sched"])
def test_usage_errors_all_ranks(mpirun, np_, args, msg):
    p = mpirun(np_, "run", *args, timeout=60)
    assert p.rank_exits == [2] * np_, p.stderr
    # one whole line per rank (cli.say writes each line at once)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("starchol run: error:")]
    assert len(lines) == np_ and all(ln.count(": error:") == 1 for ln in lines), p.stderr
    assert all(msg in ln for ln in lines), p.stderr


@pytest.mark.slow
def test_sbc_basic_8_ranks(mpirun, tmp_path):
    doc, L, _ = run_json(mpirun, tmp_path, 8, "--dist", "sbc-basic", "--n", 1000, "--nb", 96)
    assert doc["match"] is True and doc["residual"] < 1e-14


@pytest.mark.slow
def test_acceptance_sbc_6(mpirun, tmp_path):
    doc, L, _ = run_json(mpirun, tmp_path, 6, "--dist", "sbc", "--n", 1000, "--nb", 96)
    assert doc["match"] is True and doc["residual"] < 1e-14
