"""A randomized sweep of REAL runs: the bytes StarPU-MPI measures per pair of ranks equal
the exact model (the run's record) and the oracle (tests/volume_reference.py), byte for
byte, for the factorization and the solve.

Every map family (2dbc on every grid, sbc extended and basic, pplane, aplane, sym,
sbc25d / 2dbc25d / sym25d with every slice count that fits, custom maps read from a
Chameleon text file and from a .npy file, a random 2.5D map whose slices share nodes),
P = 1..10, 12 and 13 ranks (oversubscribed), NT from 1 to 9 (NT = 1, NT < P, NT not a
multiple of the pattern), N a multiple of NB or not (the last tile smaller), float64 and
float32, the solve with K = 1 and K > NB right-hand sides, StarPU-MPI's cache on and
off, the cache flush on and off; and NT = 10..16 with 3 CPU workers per rank. The cases
are drawn from a fixed seed (``STARCHOL_SWEEP_SEED`` draws others); one ``mpirun`` per
(P, cache) runs all of that P's cases in one session (tests/volume_sweep_worker.py).

The sweep is slow (about 18 minutes on 2 busy cores: ``scripts/test.sh -m slow -k
measured_bytes``); one quick real run of a 2.5D map whose slices share nodes is in the
default suite.
"""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import MPIRUN
from starchol.distributions import sbc_basic_r, sbc_extended_r, write_chameleon_text

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = [pytest.mark.mpi, pytest.mark.timeout(900)]

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = int(os.environ.get("STARCHOL_SWEEP_SEED", "2026"))
RANKS = list(range(1, 11)) + [12, 13]


def _grids(p):
    return [f"{a}x{p // a}" for a in range(1, p + 1) if p % a == 0]


def maps_for(p, rng, tmp):
    """Every map family that fits p ranks, as case fragments (a custom map file is
    written under ``tmp``)."""
    out = [{"dist": "2dbc", "grid": g} for g in _grids(p)]
    if sbc_extended_r(p):
        out.append({"dist": "sbc"})
    if sbc_basic_r(p):
        out.append({"dist": "sbc-basic"})
    if p in (7, 13):
        out.append({"dist": "pplane"})
    if p in (6, 12):
        out.append({"dist": "aplane"})
    if p >= 2:
        out.append({"dist": "sym"})
    for c in range(2, p + 1):
        if p % c:
            continue
        per = p // c
        out.append({"dist": "2dbc25d", "slices": c,
                    "grid": _grids(per)[int(rng.integers(len(_grids(per))))]})
        if sbc_extended_r(per) or sbc_basic_r(per):
            # b = 1, 2, 3 in turn (no draw: the other cases stay those of the seed)
            out.append({"dist": "sbc25d", "slices": c, "slice_block": (p + c) % 3 + 1})
        if per >= 2:
            out.append({"dist": "sym25d", "slices": c})
    for t in range(2):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
        pattern = rng.integers(0, p, size=shape)
        pattern.flat[int(rng.integers(pattern.size))] = p - 1    # the map has p nodes
        path = os.path.join(tmp, f"map-{p}-{t}" + (".txt" if t == 0 else ".npy"))
        if t == 0:
            write_chameleon_text(path, pattern)
        else:
            np.save(path, pattern)
        out.append({"dist": "custom", "map_file": path})
    c = int(rng.integers(2, 4))                     # 2.5D, slices that share nodes
    stack = rng.integers(0, p, size=(c, int(rng.integers(1, 4)), int(rng.integers(1, 4))))
    out.append({"dist": "stack", "stack": stack.tolist()})
    return out


def sweep_cases(p, rng, tmp):
    """The cases of one P: every map, each with a drawn size, precision and solves;
    plus NT = 1 and NT < P where P > 1."""
    cases = []
    for m in maps_for(p, rng, tmp):
        nb = int(rng.choice([16, 24, 32, 40]))
        nt = int(rng.integers(1, 10))
        last = int(rng.integers(1, nb + 1))          # nb: N a multiple of NB
        if nt == 1:
            nb = last                                # NB <= N
        k = int(rng.choice([1, nb + int(rng.integers(1, nb + 1))]))
        cases.append({**m, "n": (nt - 1) * nb + last, "nb": nb,
                      "dtype": str(rng.choice(["float64", "float32"])),
                      "nrhs": [1, k] if k > 1 else [1],
                      "flush": bool(rng.random() < 0.8)})
    if p > 1:
        m = maps_for(p, rng, tmp)[0]
        cases.append({**m, "n": 20, "nb": 20, "dtype": "float64", "nrhs": [1, 40],
                      "flush": True})                                    # NT = 1
        cases.append({**m, "n": 33 * max(1, p - 2), "nb": 32, "dtype": "float32",
                      "nrhs": [3], "flush": True})                       # NT < P
    return cases


def _run(p, cache, cases, tmp, starpu_home, workers=1):
    cpath = os.path.join(tmp, f"cases-{p}-{cache}-{workers}.json")
    opath = os.path.join(tmp, f"out-{p}-{cache}-{workers}.json")
    with open(cpath, "w") as fh:
        json.dump(cases, fh)
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [MPIRUN, "--oversubscribe", "-np", str(p), sys.executable,
           os.path.join(HERE, "volume_sweep_worker.py"), cpath, opath]
    if not cache:
        cmd.append("--no-cache")
    cmd.append(f"--workers={workers}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=240 + 40 * p)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpirun -np {p} sweep hung (killed)\n{out[-4000:]}")
    assert proc.returncode == 0, out[-4000:]
    with open(opath) as fh:
        return json.load(fh)


def _problems(doc):
    bad = []
    for r in doc["results"]:
        what = f"{r['map']} N={r['case']['n']} NB={r['case']['nb']} {r['case']['dtype']} " \
               f"flush={r['case']['flush']} cache={doc['cache']}"
        f = r["factor"]
        if not f["measured"] == f["predicted"] == f["oracle"]:
            bad.append(f"factor {what}: measured {f['measured']} model {f['predicted']} "
                       f"oracle {f['oracle']}")
        tol = 1e-4 if r["case"]["dtype"] == "float32" else 1e-12
        if not r["residual"] < tol:
            bad.append(f"residual {r['residual']} {what}")
        for s in r["solves"]:
            if not s["measured"] == s["predicted"] == s["oracle"]:
                bad.append(f"solve K={s['nrhs']} {what}: measured {s['measured']} model "
                           f"{s['predicted']} oracle {s['oracle']}")
            if not s["error"] < 100 * tol:
                bad.append(f"solve K={s['nrhs']} error {s['error']} {what}")
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "nocache"])
@pytest.mark.parametrize("p", RANKS)
def test_measured_bytes_equal_model_sweep(p, cache, tmp_path, starpu_home):
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    rng = np.random.default_rng([SEED, p, int(cache)])
    cases = sweep_cases(p, rng, str(tmp_path))
    doc = _run(p, cache, cases, str(tmp_path), starpu_home)
    assert len(doc["results"]) == len(cases)
    assert any(np.any(r["factor"]["measured"]) for r in doc["results"]) or p == 1
    bad = _problems(doc)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "nocache"])
@pytest.mark.parametrize("p", [4, 6])
def test_measured_bytes_equal_model_larger_nt_several_workers(p, cache, tmp_path,
                                                               starpu_home):
    """NT = 10..16 (several pattern periods) with 3 CPU workers per rank, so that tasks
    run out of submission order: the cache still sends each tile version once."""
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    rng = np.random.default_rng([SEED, p, int(cache), 3])
    cases = []
    for m in maps_for(p, rng, str(tmp_path)):
        nb = int(rng.choice([8, 12, 16]))
        nt = int(rng.integers(10, 17))
        cases.append({**m, "n": (nt - 1) * nb + int(rng.integers(1, nb + 1)), "nb": nb,
                      "dtype": str(rng.choice(["float64", "float32"])),
                      "nrhs": [2 * nb + 1], "flush": bool(rng.random() < 0.8)})
    doc = _run(p, cache, cases, str(tmp_path), starpu_home, workers=3)
    bad = _problems(doc)
    assert not bad, "\n".join(bad)


def test_slices_sharing_nodes_measured_equal_model(tmp_path, starpu_home):
    """2 ranks, a 2.5D map whose 2 slices both use nodes 0 and 1: a partial sum already
    on the factoring node is added in place, so the model counts nothing for it (it once
    counted it as a transfer from the node to itself)."""
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    stack = [[[0, 1], [1, 0]], [[1, 0], [0, 1]]]
    cases = [{"dist": "stack", "stack": stack, "n": 100, "nb": 16, "dtype": "float64",
              "nrhs": [20], "flush": True},
             {"dist": "stack", "stack": [[[0, 0]], [[0, 1]]], "n": 75, "nb": 16,
              "dtype": "float32", "nrhs": [1], "flush": True}]
    doc = _run(2, True, cases, str(tmp_path), starpu_home)
    assert not _problems(doc), "\n".join(_problems(doc))
    assert all(r["factor"]["measured"][0][1] > 0 for r in doc["results"])
