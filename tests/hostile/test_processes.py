"""The hostile cases that need processes: a run that reaches StarPU (one per process),
two ranks under mpirun (the same line on every rank), signals to a rank and to mpirun,
a full disk, two runs on the same outputs, and the signal window at a command's end.
Small N, 1-2 ranks, each with a timeout (a hang fails the case)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from conftest import MPIRUN, _starchol_exe, follow_progress, run_or_fail, signals_default
from .conftest import snapshot
from .data import make_inputs, spd

RUN = ["run", "--dist", "2dbc", "--nb", "32", "--quiet"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile-inputs")
    make_inputs(str(d))
    return str(d)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("starpu-home")
    return {**os.environ, "STARPU_HOME": str(home), "STARPU_SILENT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def one_line(err, command="run"):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"starchol {command}: error: "), err
    return lines[0]


# -- one rank, as a process (the checks made while reading, inside the session) ---------
PROCESS_CASES = [
    ("run input NaN", ["--input", "{d}/nan.h5:/A"], 2, "non-finite value (NaN or Inf) at "
                                                       "row 3, column 5"),
    ("run input Inf", ["--input", "{d}/inf.h5:/A"], 2, "non-finite value"),
    ("run input not symmetric", ["--input", "{d}/asym.h5:/A"], 2, "is not symmetric"),
    ("run input lower only", ["--input", "{d}/lower.h5:/A"], 2, "lower triangle only"),
    ("run STARPU_HOME=/", ["--n", "64"], 2, "STARPU_HOME=/ is the file system root"),
]


@pytest.mark.parametrize("case", PROCESS_CASES, ids=[c[0] for c in PROCESS_CASES])
def test_one_rank_process_case(case, inputs, env, tmp_path):
    name, argv, rc, words = case
    env = dict(env)
    if "STARPU_HOME" in name:
        env["STARPU_HOME"] = "/"
    before = snapshot(inputs)
    p = run_or_fail([*_starchol_exe(), *RUN, *[a.format(d=inputs) for a in argv],
                     "--output", f"{tmp_path}/L.h5:/L", "--json", f"{tmp_path}/r.json"],
                    env, 60, name)
    assert p.returncode == rc, p.stderr
    assert words in one_line(p.stderr)
    assert snapshot(inputs) == before and os.listdir(tmp_path) == []
    assert not os.path.exists("/.starpu") or "STARPU_HOME" not in name


def test_compressed_input_is_factored(inputs, env, tmp_path):
    """A gzip-compressed input is read like any other: the factor matches numpy's."""
    p = run_or_fail([*_starchol_exe(), *RUN, "--input", f"{inputs}/gzip.h5:/A", "--check",
                     "--output", f"{tmp_path}/L.h5:/L"], env, 60, "compressed input")
    assert p.returncode == 0, p.stderr
    with h5py.File(f"{tmp_path}/L.h5") as fh:
        assert np.allclose(fh["L"][...], np.linalg.cholesky(spd()))


# -- two ranks under mpirun ---------------------------------------------------------------
def mpirun_each(np_, args, env, timeout=60, per_rank_dir=None):
    """``mpirun -np np_ starchol ARGS`` -> (CompletedProcess, [exit status per rank]).
    ``per_rank_dir``: a folder prefix; rank r runs in ``per_rank_dir + str(r)``."""
    cd = f'cd "{per_rank_dir}$OMPI_COMM_WORLD_RANK" && ' if per_rank_dir else ""
    cmd = [MPIRUN, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0",
           "-np", str(np_), "sh", "-c", cd + '"$@"; echo "starchol-exit=$?" >&2', "sh",
           *_starchol_exe(), *map(str, args)]
    p = run_or_fail(cmd, env, timeout, " ".join(map(str, args)))
    exits = [int(ln.split("=", 1)[1]) for ln in p.stderr.splitlines()
             if ln.startswith("starchol-exit=")]
    return p, exits


def every_rank(p, exits, np_, rc, words, command="run"):
    assert exits == [rc] * np_, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ": error: " in ln]
    assert len(lines) == np_, p.stderr
    assert all(ln.startswith(f"starchol {command}: error: ") and words in ln
               for ln in lines), p.stderr
    assert "Traceback" not in p.stderr


needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")


@needs_mpirun
def test_ranks_seeing_different_files_under_one_name_are_refused(env, tmp_path):
    """Point 5: two ranks started in two folders, each holding a different in.h5: refused
    on every rank before any work (the data are compared, not the names)."""
    for r in (0, 1):
        os.mkdir(tmp_path / f"d{r}")
        with h5py.File(tmp_path / f"d{r}" / "in.h5", "w") as fh:
            fh["A"] = spd(seed=r)
    before = snapshot(tmp_path)
    p, exits = mpirun_each(2, [*RUN, "--input", "in.h5:/A", "--output", "L.h5:/L"], env,
                           per_rank_dir=f"{tmp_path}/d")
    every_rank(p, exits, 2, 2, "rank 0 and rank 1 both have in.h5:/A, but with different "
                                "data")
    assert snapshot(tmp_path) == before


@needs_mpirun
def test_ranks_seeing_copies_of_one_file_are_accepted(env, tmp_path):
    """The same data under two node-local copies (other folders, other mtimes) is one
    input: the run factors it."""
    for r in (0, 1):
        os.mkdir(tmp_path / f"d{r}")
        with h5py.File(tmp_path / f"d{r}" / "in.h5", "w") as fh:
            fh["A"] = spd()
        time.sleep(0.01)
    p, exits = mpirun_each(2, [*RUN, "--input", "in.h5:/A", "--check", "--json", "r.json"],
                           env, per_rank_dir=f"{tmp_path}/d")
    assert exits == [0, 0], p.stderr
    assert json.load(open(tmp_path / "d0" / "r.json"))["residual"] < 1e-14


MPI_CASES = [
    ("json dev-null", [*RUN, "--n", "64", "--json", "/dev/null"], "is a character device",
     "run"),
    ("input NaN", [*RUN, "--input", "{d}/nan.h5:/A"], "non-finite value", "run"),
    ("input broken link", [*RUN, "--input", "{d}/links.h5:/missing_file"],
     "is an external link to no-such-file.h5:/A", "run"),
    ("generate under mpirun", ["generate", "--n", "8", "--output", "{t}/g.h5:/A"],
     "started as 2 processes", "generate"),
    ("map under mpirun", ["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--json",
                          "{t}/m.json"], "started as 2 processes", "map"),
]


@needs_mpirun
@pytest.mark.parametrize("case", MPI_CASES, ids=[c[0] for c in MPI_CASES])
def test_two_rank_case(case, inputs, env, tmp_path):
    name, argv, words, command = case
    before = snapshot(inputs)
    p, exits = mpirun_each(2, [a.format(d=inputs, t=tmp_path) for a in argv], env)
    every_rank(p, exits, 2, 2, words, command)
    assert snapshot(inputs) == before and os.listdir(tmp_path) == []
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


# -- signals ------------------------------------------------------------------------------
SIGNAL_CASES = [
    # (id, target, signal, exit statuses accepted, words on stderr)
    ("SIGKILL to one rank", "rank", signal.SIGKILL, None, None),
    ("SIGTERM to one rank", "rank", signal.SIGTERM, None, "stopped by SIGTERM"),
    ("SIGINT to one rank", "rank", signal.SIGINT, None, "interrupted by SIGINT"),
    ("SIGINT to mpirun", "mpirun", signal.SIGINT, None, None),
    ("SIGTERM to mpirun", "mpirun", signal.SIGTERM, None, None),
]


@needs_mpirun
@pytest.mark.parametrize("case", SIGNAL_CASES, ids=[c[0] for c in SIGNAL_CASES])
def test_signal_mid_run(case, inputs, env, tmp_path):
    """A signal to one rank or to mpirun while the factorization runs: the job ends
    promptly with a failure status, no temporary file is left (a result published before
    the signal reached the ranks is complete), the input is unchanged and no rank is
    left running."""
    name, target, signum, _, words = case
    marker = f"{tmp_path}/L.h5:/L"
    before = snapshot(inputs)
    cmd = [MPIRUN, "--oversubscribe", "-np", "2", *_starchol_exe(), "run", "--dist", "2dbc",
           "--n", "3000", "--nb", "100", "--workers", "1", "--check", "--output", marker,
           "--json", f"{tmp_path}/r.json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True, preexec_fn=signals_default)
    lines, started, reader = follow_progress(proc)
    try:
        assert started.wait(60), "the factorization did not start:\n" + "".join(lines)
        if target == "rank":
            pids = subprocess.run(["pgrep", "-f", marker], capture_output=True,
                                  text=True).stdout.split()
            os.kill(max(int(x) for x in pids if int(x) != proc.pid), signum)
        else:
            os.kill(proc.pid, signum)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the job hung after {name}")
    reader.join(10)
    err = "".join(lines)
    if proc.returncode == 0:
        pytest.skip("the run ended before the signal arrived")
    assert proc.returncode != 0, (proc.returncode, err)
    if words:
        assert words in err, err
    assert "Traceback" not in err
    time.sleep(0.5)
    # nothing left half-written: no temporary; a result published before the signal
    # reached the ranks (the window: faults.finish) is complete
    left = sorted(os.listdir(tmp_path))
    assert set(left) <= {"L.h5", "r.json"}, left
    if "L.h5" in left:
        with h5py.File(tmp_path / "L.h5") as fh:
            assert fh["L"].shape == (3000, 3000) and np.isfinite(fh["L"][-1, -1])
    if "r.json" in left:
        assert json.load(open(tmp_path / "r.json"))["n"] == 3000
    assert snapshot(inputs) == before
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left.strip() == ""


@pytest.mark.parametrize("when, rc", [("before", 130), ("after", 0)])
def test_signal_window_at_the_end_of_a_command(tmp_path, when, rc):
    """Point 5: a signal that reaches the process before the command's end
    (``faults.finish``) ends it with 128 + N and its line, never lost; one after it is
    ignored and the status stands."""
    script = tmp_path / "end.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from starchol import faults\n"
        "faults.install_signal_watcher('starchol test')\n"
        f"if {when!r} == 'before':\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    sys.exit(faults.finish(0))\n"
        "code = faults.finish(0)\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.2)\n"
        "sys.exit(code)\n")
    for _ in range(3):
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=30, preexec_fn=signals_default)
        assert p.returncode == rc, p.stderr
        assert ("interrupted by SIGINT" in p.stderr) == (when == "before"), p.stderr


# -- a full disk, and two runs on the same outputs ----------------------------------------
@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 256 kB tmpfs at tmp_path/disk (root only; skipped elsewhere)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
                       capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk):
    """Fill ``disk`` to the last byte with one file, ``filler``."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_full_disk_names_the_file(tiny_tmpfs, env):
    """Point 5: a full disk says which file could not be written, and leaves no
    temporary file; a disk too small for the matrix is refused before the work."""
    p = run_or_fail([*_starchol_exe(), "generate", "--n", "1000", "--output",
                     f"{tiny_tmpfs}/a.h5:/A"], env, 60, "generate on a small disk")
    assert p.returncode == 2 and "of disk" in one_line(p.stderr, "generate"), p.stderr
    fill(tiny_tmpfs)
    p = run_or_fail([*_starchol_exe(), "volume", "--dist", "sbc", "--nodes", "3", "--nt",
                     "6", "--json", f"{tiny_tmpfs}/v.json"], env, 60, "volume on a full disk")
    line = one_line(p.stderr, "volume")
    assert p.returncode == 1 and f"--json {tiny_tmpfs}/v.json: the disk is full" in line
    p = run_or_fail([*_starchol_exe(), *RUN, "--n", "64", "--json", f"{tiny_tmpfs}/r.json"],
                    env, 60, "run on a full disk")
    assert p.returncode == 1 and f"--json {tiny_tmpfs}/r.json: the disk is full" in \
        p.stderr.splitlines()[-1], p.stderr
    assert sorted(os.listdir(tiny_tmpfs)) == ["filler"]


def test_trace_on_a_full_disk_names_it_and_leaves_nothing(tiny_tmpfs, env):
    """Issue 47: ``run --trace DIR`` onto a full disk is refused before the work, with
    the room it needs (it gave rc 1 with no message: StarPU's trace writer exits
    silently), and leaves neither the folder nor 0-byte files."""
    fill(tiny_tmpfs)
    p = run_or_fail([*_starchol_exe(), *RUN, "--n", "256", "--nb", "64", "--trace",
                     f"{tiny_tmpfs}/tr"], env, 120, "run --trace on a full disk")
    assert p.returncode == 2, p.stderr
    line = one_line(p.stderr, "run")
    assert f"--trace {tiny_tmpfs}/tr needs about" in line and "of disk" in line, line
    assert sorted(os.listdir(tiny_tmpfs)) == ["filler"]


def test_two_runs_on_the_same_outputs_keep_both_documents(env, tmp_path):
    """Point 5: two runs started at once on one --output and one --json: one publishes
    both; the other is refused at its pre-flight (the names exist) or keeps its factor
    and its run document aside under its own names, and says so."""
    args = [*_starchol_exe(), *RUN, "--n", "600", "--nb", "100", "--output",
            f"{tmp_path}/L.h5:/L", "--json", f"{tmp_path}/r.json"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, start_new_session=True) for _ in range(2)]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            for q in procs:
                os.killpg(q.pid, signal.SIGKILL)
            pytest.fail("a run hung")
        results.append((p.returncode, err))
    assert sorted(rc for rc, _ in results)[0] == 0, results
    winner = json.load(open(tmp_path / "r.json"))
    assert winner["output"] == f"{tmp_path}/L.h5:/L"
    for rc, err in results:
        if rc == 0:
            continue
        line = [ln for ln in err.splitlines() if ln.strip()][-1]
        assert rc in (1, 2), err
        if rc == 1:   # it worked while the other published: both results kept aside
            kept = sorted(f for f in os.listdir(tmp_path) if ".starchol-" in f)
            assert len(kept) == 2 and all(k in line for k in kept), (line, kept)
            doc = json.load(open(tmp_path / [k for k in kept if k.endswith(".json")][0]))
            assert doc["output"].endswith(".h5:/L") and ".starchol-" in doc["output"]
        else:
            assert "exists" in line
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
