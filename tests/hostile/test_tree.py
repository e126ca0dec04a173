"""Signals end the whole tree (issue 47, High 1): SIGINT or SIGTERM sent to the parent
alone (``timeout``, ``kill PID``) ends ``simulate``'s SimGrid child and ``calibrate``'s
mpirun and ranks with it, promptly, and no temporary file or folder is left; the one
line never claims a removal that failed. Each case has a timeout (a hang fails it)."""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import MPIRUN, _starchol_exe
from starchol.faults import _descendants

EXAMPLE_NODE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "nodes",
                            "this-machine-2core.json")


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "STARPU_HOME": str(tmp_path / "home"), "STARPU_SILENT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1", "TMPDIR": str(tmp_path / "tmp")}


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def start_and_signal(cmd, env, cwd, signum, ready, limit=60):
    """Start ``cmd`` (a session of its own), wait until ``ready(descendants)`` holds,
    send ``signum`` to the parent alone; returns (status, stderr, descendants seen)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = []
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            seen = _descendants(proc.pid)
            if ready(seen) or proc.poll() is not None:
                break
            time.sleep(0.05)
        if proc.poll() is not None:
            pytest.fail(f"ended before the signal: {proc.returncode} {proc.stderr.read()} "
                        f"{[_cmdline(k) for k in seen]}")
        assert ready(seen), f"not ready after {limit} s"
        seen = _descendants(proc.pid)
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the parent did not end within 20 s of the signal")
    finally:
        for pid in _descendants(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return proc.returncode, err, seen


def no_survivor(pids, within=5.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_simulate_child_dies_with_the_parent(signum, env, tmp_path):
    """The SimGrid child (forked while the simulation runs, holding the graph) ends with
    the parent; nothing is written or left in the working folder."""
    os.makedirs(env["TMPDIR"])
    cmd = [*_starchol_exe(), "simulate", "--dist", "sbc", "--nodes", "6", "--nt", "110",
           "--nb", "128", "--node", EXAMPLE_NODE, "--quiet", "--json", "s.json",
           "--gantt", "g.png"]
    status, err, seen = start_and_signal(cmd, env, str(tmp_path), signum,
                                         lambda kids: len(kids) >= 1)
    assert status == 128 + signum, err
    assert f"{'interrupted by SIGINT' if signum == signal.SIGINT else 'stopped by SIGTERM'}" \
        in err, err
    assert "Traceback" not in err
    assert seen and no_survivor(seen) == [], "the SimGrid child outlived its parent"
    assert sorted(os.listdir(tmp_path)) == ["home", "tmp"] or \
        set(os.listdir(tmp_path)) <= {"home", "tmp"}, os.listdir(tmp_path)


def test_simulate_child_dies_when_the_parent_is_killed(env, tmp_path):
    """SIGKILL to the parent (nothing of it can act): the child is ended by the kernel
    (``prctl(PR_SET_PDEATHSIG)``), not reparented to block forever in a pipe write."""
    cmd = [*_starchol_exe(), "simulate", "--dist", "sbc", "--nodes", "6", "--nt", "110",
           "--nb", "128", "--node", EXAMPLE_NODE, "--quiet"]
    status, err, seen = start_and_signal(cmd, env, str(tmp_path), signal.SIGKILL,
                                         lambda kids: len(kids) >= 1)
    assert status == -signal.SIGKILL
    assert seen and no_survivor(seen) == []


def _has_traces_support():
    p = subprocess.run([sys.executable, "-c", "from starchol.runtime.traces import "
                        "check_supported; check_supported('.')"], capture_output=True)
    return p.returncode == 0


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_calibrate_mpirun_and_ranks_die_with_the_parent(signum, env, tmp_path):
    """calibrate's mpirun and both ranks end with the parent within 5 s, its temporary
    folder (STARPU_HOME and the trace, under TMPDIR) is gone, and the line says what
    was removed truthfully."""
    if not _has_traces_support():
        pytest.skip("this StarPU has no FxT (calibrate --method runtime)")
    os.makedirs(env["TMPDIR"])
    env = dict(env)
    env.pop("STARPU_HOME")
    cmd = [*_starchol_exe(), "calibrate", "--nb", "64", "--ranks", "2", "--workers", "1",
           "-o", "cal.json", "--quiet"]
    status, err, seen = start_and_signal(
        cmd, env, str(tmp_path), signum,
        lambda kids: sum("-m starchol run" in _cmdline(k) and not _cmdline(k).startswith("mpirun")
                         for k in kids) >= 2)
    assert status == 128 + signum, err
    assert "could not remove" not in err and "Traceback" not in err, err
    assert signum == signal.SIGINT or "temporary files removed" in err, err
    assert len(seen) >= 3 and no_survivor(seen) == [], "mpirun or a rank outlived calibrate"
    assert glob.glob(os.path.join(env["TMPDIR"], "starchol-calibrate-*")) == []
    assert not os.path.exists(tmp_path / "cal.json")


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
