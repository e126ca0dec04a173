"""2.5D runs (sbc25d, 2dbc25d) launched with mpirun: factor, residual, measured bytes ==
model == an independent brute-force recount; c = 1 gives the 2D traffic."""
import json
import os
import subprocess

import numpy as np
import pytest
from volume_reference import cholesky_bytes
from volume_reference import slice_of as ref_slice_of

from starchol.distributions import get_map
from starchol.linalg import matrices
from starchol.linalg.tiled import tile_sizes

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")

N, NB = 300, 64          # NT = 5, last tile 44 rows


# -- pure Python (no mpirun) ---------------------------------------------------------
def test_composite_owners_and_partial_masks():
    from starchol.linalg.cholesky import partial_mask
    from starchol.model.volume import factor_owners
    tile_map = get_map("sbc25d", 6, slices=2)
    so = tile_map.owner_maps(7)
    f = factor_owners(tile_map, 7)
    for i in range(7):
        for j in range(i + 1):
            assert f[i, j] == so[ref_slice_of(j, 2, tile_map.slice_block), i, j]
    for s in range(3):      # b = 1: iterations on slices 0 1 2 2 1 0 0
        m = partial_mask(7, 3, s, np.array([0, 1, 2, 2, 1, 0, 0]))
        for i in range(7):
            for j in range(7):
                assert m[i, j] == (i >= j and s < j and [0, 1, 2, 2, 1, 0, 0][j] != s)


def test_partial_masks_with_slice_blocks():
    from starchol.linalg.cholesky import partial_mask
    for b in (2, 3):
        slice_of = [ref_slice_of(k, 3, b) for k in range(9)]
        for s in range(3):
            m = partial_mask(9, 3, s, np.array(slice_of))
            for i in range(9):
                for j in range(9):
                    updates = s in slice_of[:j]
                    assert m[i, j] == (i >= j and updates and slice_of[j] != s)


@pytest.mark.parametrize("name,nodes,c,block", [("sbc25d", 6, 2, 1), ("2dbc25d", 8, 2, 1),
                                                ("2dbc25d", 12, 3, 1), ("sbc25d", 3, 1, 1),
                                                ("sbc25d", 6, 2, 2), ("2dbc25d", 12, 3, 2)])
def test_local_task_count_brute_force(name, nodes, c, block):
    from starchol.model.counts import local_task_count
    nt = 7
    tile_map = get_map(name, nodes, slices=c, slice_block=block)
    so = tile_map.owner_maps(nt)
    count = np.zeros(nodes, dtype=np.int64)
    for k in range(nt):
        s = ref_slice_of(k, c, block)
        updated = {ref_slice_of(q, c, block) for q in range(k)}
        for m in range(k, nt):
            count[so[s][m, k]] += 1 + len(updated - {s})     # POTRF/TRSM, ADDs
        for n in range(k + 1, nt):
            for m in range(n, nt):
                count[so[s][m, n]] += 1                       # SYRK/GEMM
    it = tile_map.iteration_slices(nt)
    assert [local_task_count(so, r, it) for r in range(nodes)] == count.tolist()


def test_recount_matches_model():
    """The oracle (tests/volume_reference.py) agrees with the fast model (no MPI)."""
    from starchol.model.volume import transfer_pairs_bytes
    for name, nodes, c, grid, b in [("sbc25d", 6, 2, None, 1), ("2dbc25d", 8, 2, "2x2", 1),
                                    ("sbc25d", 9, 3, None, 1), ("sbc25d", 6, 2, None, 2),
                                    ("sbc25d", 9, 3, None, 2)]:
        tile_map = get_map(name, nodes, slices=c, grid=grid, slice_block=b)
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
    (6, ["--dist", "sbc25d", "--slices", "2", "--slice-block", "1"], True),
]


@pytest.mark.mpi
@pytest.mark.parametrize("np_,args,cache", CASES, ids=["6-sbc25d-c2", "6-sbc25d-c2-nocache",
                                                       "8-2dbc25d-2x2-c2", "6-sbc25d-c2-b1"])
def test_25d_factor_and_bytes(mpirun, tmp_path, np_, args, cache):
    doc, L, p = run_json(mpirun, tmp_path, np_, *args, "--n", N, "--nb", NB, "--seed", 5)
    ref = np.linalg.cholesky(matrices.dense(matrices.MatrixSpec("spd"), N, 5))
    assert np.allclose(L, ref, rtol=0, atol=1e-12)
    assert doc["residual"] < 1e-14
    assert doc["match"] is True and doc["cache"] is cache
    assert doc["slices"] == 2 and doc["nodes"] == np_ and doc["nt"] == 5
    grid = args[args.index("--grid") + 1] if "--grid" in args else None
    block = int(args[args.index("--slice-block") + 1]) if "--slice-block" in args else None
    tile_map = get_map(args[1], np_, grid=grid, slices=2, slice_block=block)
    assert doc["bytes_measured_pairs"] == cholesky_bytes(tile_map, N, NB, cache)
    # only the partial sums cross slices: from slice 0's nodes to slice 1's, and back
    # when a column is factored on slice 0 after slice 1 ran an iteration
    m = np.array(doc["bytes_measured_pairs"])
    half = np_ // 2
    it = tile_map.iteration_slices(5).tolist()
    back = any(it[j] == 0 and 1 in it[:j] for j in range(5))
    assert m[:half, half:].sum() > 0 and (m[half:, :half].sum() > 0) == back
    from starchol.model.load import node_load
    from starchol.model.volume import tile_bytes
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
