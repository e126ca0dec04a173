"""2.5D runs (sbc25d, 2dbc25d) launched with mpirun: factor, residual, measured bytes ==
model == an independent brute-force recount; c = 1 gives the 2D traffic."""
import json
import os
import subprocess

import numpy as np
import pytest
from volume_reference import cholesky_bytes

from starchol.distributions import get_map
from starchol.linalg import matrices
from starchol.linalg.tiled import tile_sizes

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")

N, NB = 300, 64          # NT = 5, last tile 44 rows


# -- pure Python (no mpirun) ---------------------------------------------------------
def test_composite_owners_and_partial_masks():
    from starchol.linalg.cholesky import partial_mask
    from starchol.linalg.volume import factor_owners
    tile_map = get_map("sbc25d", 6, slices=2)
    so = tile_map.owner_maps(7)
    f = factor_owners(tile_map, 7)
    for i in range(7):
        for j in range(i + 1):
            assert f[i, j] == so[j % 2, i, j]
    for s in range(3):
        m = partial_mask(7, 3, s)
        for i in range(7):
            for j in range(7):
                assert m[i, j] == (i >= j and s < j and j % 3 != s)


@pytest.mark.parametrize("name,nodes,c", [("sbc25d", 6, 2), ("2dbc25d", 8, 2),
                                          ("2dbc25d", 12, 3), ("sbc25d", 3, 1)])
def test_local_task_count_brute_force(name, nodes, c):
    from starchol.linalg.cholesky import local_task_count
    nt = 7
    so = get_map(name, nodes, slices=c).owner_maps(nt)
    count = np.zeros(nodes, dtype=np.int64)
    for k in range(nt):
        s = k % c
        for m in range(k, nt):
            count[so[s][m, k]] += 1 + sum(1 for t in range(min(k, c)) if t != s)  # POTRF/TRSM, ADDs
        for n in range(k + 1, nt):
            for m in range(n, nt):
                count[so[s][m, n]] += 1                                          # SYRK/GEMM
    assert [local_task_count(so, r) for r in range(nodes)] == count.tolist()


def test_recount_matches_model():
    """The oracle (tests/volume_reference.py) agrees with the fast model (no MPI)."""
    from starchol.linalg.volume import transfer_pairs_bytes
    for name, nodes, c, grid in [("sbc25d", 6, 2, None), ("2dbc25d", 8, 2, "2x2"),
                                 ("sbc25d", 9, 3, None)]:
        tile_map = get_map(name, nodes, slices=c, grid=grid)
        nt = len(tile_sizes(N, NB))
        for cache in (True, False):
            got = cholesky_bytes(tile_map, N, NB, cache)
            assert got == transfer_pairs_bytes(tile_map, N, NB, cache=cache).tolist()


def test_calibration_lock(tmp_path):
    """The start lock is held while the bus is not calibrated, released once it is."""
    import fcntl

    from starchol.runtime.bus import bus_calibrated, bus_calibration_lock
    folder = tmp_path / "sampling"
    lockfile = folder / ".starchol-start.lock"

    def other_can_lock():
        fd = os.open(lockfile, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    assert not bus_calibrated(str(folder))
    with bus_calibration_lock(str(folder)) as lock:
        assert lock.held and not other_can_lock()   # flock: per open file description
    assert other_can_lock()
    # a second start waits for the first (here: gives up after its timeout)
    with bus_calibration_lock(str(folder)):
        with bus_calibration_lock(str(folder), timeout=0.2) as second:
            assert not second.held and second.fd is None
    import socket
    bus = folder / "bus"
    bus.mkdir()
    for ext in ("config", "affinity", "latency", "bandwidth"):
        (bus / f"{socket.gethostname()}.{ext}").write_text("x\n")
    assert bus_calibrated(str(folder))
    with bus_calibration_lock(str(folder)) as lock:
        assert not lock.held and other_can_lock()


# -- mpirun ------------------------------------------------------------------------------
def run_json(mpirun, tmp_path, np_, *args, check=True):
    out = tmp_path / "r.json"
    gathered = tmp_path / "L.npy"
    extra = ["--check", "--gather", gathered] if check else []
    p = mpirun(np_, "run", *args, "--workers", 1, "--quiet", *extra, "--json", out,
               timeout=120)
    assert p.rank_exits == [0] * np_, p.stderr
    doc = json.loads(out.read_text())
    return doc, (np.load(gathered) if check else None), p


CASES = [
    (6, ["--dist", "sbc25d", "--slices", "2"], True),
    (6, ["--dist", "sbc25d", "--slices", "2", "--no-cache"], False),
    (8, ["--dist", "2dbc25d", "--grid", "2x2", "--slices", "2"], True),
]


@pytest.mark.mpi
@pytest.mark.parametrize("np_,args,cache", CASES, ids=["6-sbc25d-c2", "6-sbc25d-c2-nocache",
                                                       "8-2dbc25d-2x2-c2"])
def test_25d_factor_and_bytes(mpirun, tmp_path, np_, args, cache):
    doc, L, p = run_json(mpirun, tmp_path, np_, *args, "--n", N, "--nb", NB, "--seed", 5)
    ref = np.linalg.cholesky(matrices.dense(matrices.MatrixSpec("spd"), N, 5))
    assert np.allclose(L, ref, rtol=0, atol=1e-12)
    assert doc["residual"] < 1e-14
    assert doc["match"] is True and doc["cache"] is cache
    assert doc["slices"] == 2 and doc["nodes"] == np_ and doc["nt"] == 5
    grid = args[args.index("--grid") + 1] if "--grid" in args else None
    tile_map = get_map(args[1], np_, grid=grid, slices=2)
    assert doc["bytes_measured_pairs"] == cholesky_bytes(tile_map, N, NB, cache)
    # reductions cross slices: some bytes go from slice 0's nodes to slice 1's and back
    m = np.array(doc["bytes_measured_pairs"])
    half = np_ // 2
    assert m[:half, half:].sum() > 0 and m[half:, :half].sum() > 0
    from starchol.distributions import node_load
    from starchol.linalg.volume import tile_bytes
    model = node_load(tile_map, 5, tile_bytes=tile_bytes(N, NB))["bytes"]
    assert doc["memory"]["tile_bytes_per_node"] == model.tolist()
    assert len(doc["memory"]["peak_rss_bytes_per_rank"]) == np_
    assert "memory: tile storage per node" in p.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("np_,d25,d2", [
    (3, ["--dist", "sbc25d", "--slices", "1"], ["--dist", "sbc"]),
    (4, ["--dist", "2dbc25d", "--grid", "2x2", "--slices", "1"], ["--dist", "2dbc", "--grid", "2x2"]),
], ids=["sbc", "2dbc"])
def test_one_slice_equals_2d(mpirun, tmp_path, np_, d25, d2):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _, _ = run_json(mpirun, tmp_path / "a", np_, *d25, "--n", N, "--nb", NB, check=False)
    b, _, _ = run_json(mpirun, tmp_path / "b", np_, *d2, "--n", N, "--nb", NB, check=False)
    assert a["match"] and b["match"]
    assert a["bytes_measured_pairs"] == b["bytes_measured_pairs"]
    assert a["bytes_measured_total"] > 0


@pytest.mark.mpi
def test_25d_not_positive_definite(mpirun):
    p = mpirun(6, "run", "--dist", "sbc25d", "--slices", "2", "--n", N, "--nb", NB,
               "--matrix", "indefinite:150", "--workers", 1, "--quiet", timeout=120)
    assert p.rank_exits == [1] * 6, p.stderr
    assert p.stderr.count("column 150") >= 6


@pytest.mark.mpi
def test_25d_bad_input(mpirun):
    p = mpirun(4, "run", "--dist", "sbc25d", "--slices", "3", "--n", N, "--nb", NB,
               timeout=60)
    assert p.rank_exits == [2] * 4, p.stderr
    assert "divisible by 3" in p.stderr
    p = mpirun(2, "run", "--dist", "sbc", "--slices", "2", "--n", N, "--nb", NB, timeout=60)
    assert p.rank_exits == [2] * 2 and "--slices applies to the 2.5D maps" in p.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_fresh_starpu_home_no_calibration_race(tmp_path):
    """Ranks sharing a fresh STARPU_HOME calibrate the bus one at a time (no abort)."""
    from conftest import MPIRUN, _starchol_exe
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    for attempt in range(3):
        home = tmp_path / f"home{attempt}"
        home.mkdir()
        env = dict(os.environ, STARPU_HOME=str(home), STARPU_SILENT="1",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run([MPIRUN, "--oversubscribe", "-np", "6", *_starchol_exe(), "run",
                            "--dist", "sbc", "--n", "128", "--nb", "64", "--workers", "1",
                            "--quiet"], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "check_bus_affinity_file" not in p.stderr
        # the calibration files this StarPU writes (.affinity only with CUDA/OpenCL)
        from starchol.runtime.bus import bus_calibrated
        assert bus_calibrated(str(home / ".starpu/sampling")), \
            os.listdir(home / ".starpu/sampling/bus")
