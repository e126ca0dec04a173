"""HDF5 jobs under mpirun: round trip, bad files on every rank, a rank killed mid-run."""
import os
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import MPIRUN, _starchol_exe, follow_progress, held_open, sha256_file
from starchol.cli import main

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi


@pytest.fixture
def matrix(tmp_path):
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "300", "--output", f"{f}:/A", "--seed", "5"]) == 0
    return f


@pytest.mark.parametrize("np_,dist", [(4, ["--dist", "2dbc", "--grid", "2x2"]),
                                      (3, ["--dist", "sbc"])])
def test_round_trip_equals_numpy(mpirun, tmp_path, matrix, np_, dist):
    before = sha256_file(matrix)
    out = tmp_path / "l.h5"
    p = mpirun(np_, "run", *dist, "--input", f"{matrix}:/A", "--nb", "64",
               "--output", f"{out}:/L", "--check")
    assert p.rank_exits == [0] * np_, p.stderr
    assert "per-pair match: yes" in p.stdout
    with h5py.File(matrix) as fa, h5py.File(out) as fl:
        a, L = fa["A"][...], fl["L"][...]
        attrs = dict(fl["L"].attrs)
    np.testing.assert_allclose(L, np.linalg.cholesky(a), rtol=1e-12, atol=1e-12)
    assert np.linalg.norm(a - L @ L.T) / np.linalg.norm(a) < 1e-14
    assert attrs["n"] == 300 and attrs["nb"] == 64 and attrs["residual"] < 1e-14
    assert "starchol_version" in attrs and "date" in attrs and attrs["source"].endswith(":/A")
    assert sha256_file(matrix) == before
    assert sorted(os.listdir(tmp_path)) == ["a.h5", "l.h5"]


@pytest.mark.parametrize("make,args,msg", [
    (None, ["--input", "{d}/missing.h5:/A"], "not found"),
    ("good", ["--input", "{d}/a.h5:/B"], "dataset '/B' not found"),
    ("rect", ["--input", "{d}/r.h5:/A"], "square"),
    ("nonsym", ["--input", "{d}/s.h5:/A"], "not symmetric"),
    ("good", ["--input", "{d}/a.h5:/A", "--output", "{d}/a.h5:/L"], "never modifies"),
    ("good", ["--input", "{d}/a.h5:/A", "--n", "90"], "does not match"),
    ("good", ["--input", "{d}/a.h5:/A", "--output", "{d}/a.h5"], "FILE.h5:/DATASET"),
    ("outs", ["--input", "{d}/a.h5:/A", "--output", "{d}/o.h5:/D/L"],
     "o.h5:/D/L cannot be written: /D is a dataset in"),
    ("outs", ["--input", "{d}/a.h5:/A", "--output", "{d}/o.h5:/G", "--overwrite"],
     "o.h5:/G is a group in"),
    ("badattr", ["--input", "{d}/a.h5:/A"], "its attribute 'content' holds a number"),
])
def test_bad_files_fail_on_every_rank(mpirun, tmp_path, make, args, msg):
    d = str(tmp_path)
    if make in ("good", "outs", "badattr"):
        assert main(["generate", "--n", "100", "--output", f"{d}/a.h5:/A"]) == 0
    if make == "outs":
        with h5py.File(tmp_path / "o.h5", "w") as fh:
            fh["D"] = np.zeros(3)
            fh.create_group("G")["x"] = np.zeros(2)
    elif make == "badattr":
        with h5py.File(tmp_path / "a.h5", "a") as fh:
            fh["A"].attrs["content"] = 3
    elif make == "rect":
        with h5py.File(tmp_path / "r.h5", "w") as fh:
            fh["A"] = np.zeros((10, 12))
    elif make == "nonsym":
        m = np.eye(100) * 10
        m[70, 3] = 1.0
        m[90, 5] = m[5, 90] = 1.0     # not a lower triangle stored alone
        with h5py.File(tmp_path / "s.h5", "w") as fh:
            fh["A"] = m
    before = {f: sha256_file(tmp_path / f) for f in os.listdir(tmp_path)}
    p = mpirun(3, "run", "--dist", "sbc", "--nb", "32", *[a.format(d=d) for a in args],
               timeout=60)
    assert p.rank_exits == [2, 2, 2], p.stderr
    assert p.stderr.count(msg) == 3, p.stderr
    assert {f: sha256_file(tmp_path / f) for f in os.listdir(tmp_path)} == before


def test_locked_input_fails_on_every_rank_saying_what_to_do(mpirun, tmp_path, matrix):
    """A file another program writes (HDF5 locks it) was called damaged or truncated."""
    with held_open(matrix):
        p = mpirun(2, "run", "--dist", "2dbc", "--input", f"{matrix}:/A", "--nb", "100",
                   timeout=60)
    assert p.rank_exits == [2, 2], p.stderr
    assert p.stderr.count("a.h5 is open in another program (HDF5 locks") == 2, p.stderr
    assert p.stderr.count("HDF5_USE_FILE_LOCKING=FALSE") == 2


def test_not_positive_definite_file_leaves_no_output(mpirun, tmp_path):
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "200", "--output", f"{f}:/A", "--kind", "indefinite:77"]) == 0
    out = tmp_path / "l.h5"
    p = mpirun(2, "run", "--dist", "2dbc", "--input", f"{f}:/A", "--nb", "50",
               "--output", f"{out}:/L", timeout=60)
    assert p.rank_exits == [1, 1], p.stderr
    assert p.stderr.count("column 77") == 2
    assert sorted(os.listdir(tmp_path)) == ["a.h5"]


def test_existing_output_dataset_needs_overwrite(mpirun, tmp_path, matrix):
    out = tmp_path / "l.h5"
    with h5py.File(out, "w") as fh:
        fh["L"] = np.zeros(3)
    before = sha256_file(out)
    p = mpirun(2, "run", "--dist", "2dbc", "--input", f"{matrix}:/A", "--nb", "100",
               "--output", f"{out}:/L", timeout=60)
    assert p.rank_exits == [2, 2] and p.stderr.count("--overwrite") == 2
    assert sha256_file(out) == before
    p = mpirun(2, "run", "--dist", "2dbc", "--input", f"{matrix}:/A", "--nb", "100",
               "--output", f"{out}:/L", "--overwrite", timeout=60)
    assert p.rank_exits == [0, 0], p.stderr
    with h5py.File(out) as fh:
        assert fh["L"].shape == (300, 300)


def test_killed_rank_aborts_job_and_leaves_no_output(tmp_path, starpu_home):
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    f = tmp_path / "a.h5"
    assert main(["generate", "--n", "4000", "--output", f"{f}:/A"]) == 0
    before = sha256_file(f)
    out = tmp_path / "l.h5"
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # NB = 50: 88,560 tasks, about 1.7 s on 4 ranks sharing 2 cores (with NB = 100 the
    # factorization took 0.6 s and the job could end before a kill 2 s after the ranks
    # started); the rank is killed as soon as rank 0's first progress line (about 25%)
    # shows the factorization under way
    cmd = [MPIRUN, "--oversubscribe", "-np", "4", *_starchol_exe(), "run", "--dist", "2dbc",
           "--grid", "2x2", "--input", f"{f}:/A", "--nb", "50", "--output", f"{out}:/L",
           "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    lines, started, reader = follow_progress(proc)
    try:
        assert started.wait(60), "no progress line: " + "".join(lines)
        pids = subprocess.run(["pgrep", "-f", f"{f}:/A"], capture_output=True,
                              text=True).stdout.split()
        ranks = [int(x) for x in pids if int(x) != proc.pid]
        assert len(ranks) >= 4, pids
        os.kill(ranks[-1], signal.SIGKILL)
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("mpirun did not abort after a rank was killed")
    finally:
        if proc.poll() is None:         # a failed assertion above: leave nothing running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(10)
    assert proc.returncode != 0
    assert not out.exists()
    assert sha256_file(f) == before
    assert sorted(os.listdir(tmp_path)) == ["a.h5"]


def test_existing_gather_file_needs_overwrite(mpirun, tmp_path, matrix):
    out = tmp_path / "L.npy"
    np.save(out, np.zeros(3))
    before = sha256_file(out)
    args = ["run", "--dist", "2dbc", "--input", f"{matrix}:/A", "--nb", "100",
            "--gather", str(out)]
    p = mpirun(2, *args, timeout=60)
    assert p.rank_exits == [2, 2], p.stderr
    assert p.stderr.count(f"--gather {out} exists; pass --overwrite to replace it") == 2
    assert sha256_file(out) == before and sorted(os.listdir(tmp_path)) == ["L.npy", "a.h5"]
    p = mpirun(2, *args, "--overwrite", timeout=60)
    assert p.rank_exits == [0, 0], p.stderr
    with h5py.File(matrix) as fh:
        a = fh["A"][:]
    assert np.allclose(np.load(out), np.linalg.cholesky(a))
    assert sorted(os.listdir(tmp_path)) == ["L.npy", "a.h5"]
