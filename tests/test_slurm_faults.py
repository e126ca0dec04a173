"""Node faults in a Slurm job on the emulated cluster (``scripts/cluster.sh``): a node's
link brought down mid-job, and the slurmd of one node killed mid-job.

One 3-node cluster with Slurm serves both faults (links at 10 mbit/s, so that a small
job runs long enough to be hit; Slurm's SlurmdTimeout lowered to SLURMD_TIMEOUT s, so
that a silent node is declared DOWN quickly). The job is the default script of
``starchol slurm`` (sbc on 3 ranks, HDF5 input and output). For each fault the job must
end within a bound, its state and exit code must name the failure and its log the node,
no output may be published, the input must be unchanged and no job process may be left
on any node; then the documented rerun (a new ``sbatch``, or Slurm's own requeue of a
``--requeue`` script) must complete and write a correct factor.
Needs root and network namespaces; skipped, with the reason, otherwise.
"""
import json
import re
import subprocess
import time

import numpy as np
import pytest
from conftest import _starchol_exe, cluster_or_skip, sha256_file

#: slurm.conf's SlurmdTimeout on this cluster (s): a node silent for longer is DOWN
SLURMD_TIMEOUT = 4
#: seconds from the fault to the end of the job's run, after which a job still running
#: fails the test (mpirun's daemons notice a lost link by TCP keepalive in about 10 s;
#: Slurm a dead slurmd after SLURMD_TIMEOUT + pings)
FAULT_BOUND_S = 40
#: seconds a job may take from sbatch to its end
JOB_TIMEOUT = 150
N, NB = 2400, 200

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def slurm3():
    with cluster_or_skip(3, bandwidth="10mbit", slurm=True,
                          slurmd_timeout=SLURMD_TIMEOUT) as cl:
        yield cl, cl.env()


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """(input file, its sha256, A)."""
    h5py = pytest.importorskip("h5py")
    a_file = tmp_path_factory.mktemp("fault_input") / "a.h5"
    gen = subprocess.run([*_starchol_exe(), "generate", "--n", str(N), "--output", f"{a_file}:/A"],
                         capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    with h5py.File(a_file, "r") as f:
        a = f["A"][...]
    return a_file, sha256_file(a_file), a


def _script(work, a_file, *extra):
    script = work / "job.sbatch"
    made = subprocess.run([*_starchol_exe(), "slurm", "--dist", "sbc", "--nodes", "3", "--nb",
                           str(NB), "--workers", "1", "--input", f"{a_file}:/A", "--output",
                           f"{work}/l.h5:/L", "--time", "00:05:00", "--json-dir",
                           str(work / "results"), *extra, "-o", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return script


def _job(cl, env, job):
    """scontrol's fields of a job, as a dict."""
    out = cl.exec("node0", ["scontrol", "show", "job", "-o", job], env=env).stdout
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


def _submit(cl, env, work, script):
    res = cl.exec("node0", ["sh", "-c", f"cd {work} && exec sbatch --parsable {script}"],
                  env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().split(";")[0]


def _wait_state(cl, env, job, done, timeout):
    """Poll the job until ``done(fields)``; (fields, seconds waited). Cancels the job and
    fails the test after ``timeout`` s."""
    t0 = time.monotonic()
    while True:
        fields = _job(cl, env, job)
        if done(fields):
            return fields, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            cl.exec("node0", ["scancel", job], env=env)
            pytest.fail(f"job {job} still {fields.get('JobState')} after {timeout} s: {fields}")
        time.sleep(0.25)


def _wait_moving_tiles(cl, env, job, nbytes=1_000_000):
    """Wait until the job runs and node1's link has sent ``nbytes`` (the factorization
    moves tiles), so that the fault hits the work, not the start."""
    before = cl.counters()
    deadline = time.monotonic() + JOB_TIMEOUT
    while cl.counters()[1, 0] - before[1, 0] < nbytes:
        state = _job(cl, env, job).get("JobState")
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), \
            f"job {job} is {state} before the fault"
        assert time.monotonic() < deadline, f"job {job} moved no tiles in {JOB_TIMEOUT} s"
        time.sleep(0.2)


def _log(work, job):
    return "".join(p.read_text(errors="replace") for p in work.glob(f"*-{job}.out"))


def _check_nothing_published(work, matrix_):
    a_file, digest, _ = matrix_
    assert not (work / "l.h5").exists(), list(work.iterdir())
    assert not [p for p in work.iterdir() if p.name.startswith(("l.h5", ".l.h5"))]
    assert not list((work / "results").glob("*.json"))
    assert sha256_file(a_file) == digest


def _wait_idle(cl, env, timeout=60):
    """Every node idle again (after a fault: the node is back and the job's end done)."""
    deadline = time.monotonic() + timeout
    while True:
        out = cl.exec("node0", ["sinfo", "-h", "-N", "-o", "%N %T"], env=env).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if states and all(s == "idle" for s in states.values()):
            return
        assert time.monotonic() < deadline, f"nodes not idle after {timeout} s: {states}"
        time.sleep(0.5)


def _run_unshaped(cl, env, work, script):
    """Submit the script with the links unshaped and wait for the job's end; (job id,
    fields, seconds waited). The links go back to the cluster's 10 mbit/s."""
    cl.shape(bandwidth="none")
    try:
        job = _submit(cl, env, work, script)
        fields, took = _wait_state(cl, env, job, lambda f: f.get("JobState") not in (
            "PENDING", "CONFIGURING", "RUNNING", "COMPLETING"), JOB_TIMEOUT)
    finally:
        cl.shape(bandwidth="10mbit")
    return job, fields, took


def _check_factor(cl, env, work, job, a):
    h5py = pytest.importorskip("h5py")
    doc = json.loads((work / "results" / f"starchol-{job}.json").read_text())
    assert doc["nodes"] == 3 and doc["match"] is True
    with h5py.File(work / "l.h5", "r") as f:
        lower = f["L"][...]
    assert np.abs(lower @ lower.T - a).max() <= 1e-10 * np.abs(a).max()


def test_link_down_mid_job(slurm3, matrix, tmp_path):
    """node2's link goes down mid-job: mpirun's daemons notice (TCP keepalive) and the job
    ends FAILED with a non-zero exit code, its log naming node2; nothing published, input
    unchanged, no process left; once the link is back, a new sbatch of the same script
    completes with a correct factor."""
    cl, env = slurm3
    script = _script(tmp_path, matrix[0])
    job = _submit(cl, env, tmp_path, script)
    _wait_moving_tiles(cl, env, job)
    cl.link("node2", "down")
    t_down = time.monotonic()
    try:
        fields, took = _wait_state(cl, env, job,
                                   lambda f: f.get("JobState") not in ("RUNNING", "PENDING"),
                                   FAULT_BOUND_S)
        # even the isolated node ends its ranks (its daemon lost mpirun)
        left = cl.wait_no_processes(timeout=30)
        clean = time.monotonic() - t_down
    finally:
        cl.link("node2", "up")
    log = _log(tmp_path, job)
    print(f"link fault: job {job} {fields['JobState']} {fields['ExitCode']} {took:.1f} s "
          f"after the link went down; no process left after {clean:.1f} s\n{log}")
    assert fields["JobState"] in ("FAILED", "COMPLETING"), fields
    assert fields["ExitCode"] != "0:0", fields
    assert "lost communication with a remote daemon" in log and "node2" in log, log
    assert not left, f"processes left on the nodes: {left}"
    _check_nothing_published(tmp_path, matrix)
    # FAILED, or NODE_FAIL where node2 was silent longer than SlurmdTimeout meanwhile
    final, _ = _wait_state(cl, env, job,
                           lambda f: f.get("JobState") in ("FAILED", "NODE_FAIL"), 60)
    assert final["ExitCode"] == fields["ExitCode"], final
    _wait_idle(cl, env)
    # the rerun: the same script, submitted again (at full speed)
    again, fields, _ = _run_unshaped(cl, env, tmp_path, script)
    assert fields["JobState"] == "COMPLETED", (fields, _log(tmp_path, again))
    _check_factor(cl, env, tmp_path, again, matrix[2])
    assert sha256_file(matrix[0]) == matrix[1]


def test_slurmd_killed_mid_job(slurm3, matrix, tmp_path):
    """node2's slurmd is killed (SIGKILL) mid-job: after SlurmdTimeout Slurm declares node2
    DOWN and ends the job for NODE FAILURE, its log naming node2; nothing published, input
    unchanged, no process left. The script of ``starchol slurm --requeue`` is requeued by
    Slurm itself: once slurmd is back, the same job id runs again from the start and
    completes with a correct factor."""
    cl, env = slurm3
    script = _script(tmp_path, matrix[0], "--requeue")
    cl.shape(bandwidth="1mbit")     # the run must outlast Slurm's detection (~30 s)
    try:
        job = _submit(cl, env, tmp_path, script)
        _wait_moving_tiles(cl, env, job, 200_000)
        cl.slurmd("node2", "kill")
        try:
            fields, took = _wait_state(cl, env, job,
                                       lambda f: f.get("JobState") != "RUNNING",
                                       FAULT_BOUND_S)
            left = cl.wait_no_processes(timeout=30)
            published = sorted(p.name for p in tmp_path.iterdir())
            log = _log(tmp_path, job)
        finally:
            cl.slurmd("node2", "start")
    finally:
        cl.shape(bandwidth="none")  # the rerun at full speed
    print(f"slurmd fault: job {job} {fields['JobState']} (Reason {fields.get('Reason')}, "
          f"Restarts {fields.get('Restarts')}, ExitCode {fields.get('ExitCode')}) {took:.1f} s "
          f"after slurmd was killed\n{log}")
    assert "NODE FAILURE" in log and "node2" in log, log
    assert not left, f"processes left on the nodes: {left}"
    assert "l.h5" not in published, published
    _check_nothing_published(tmp_path, matrix)
    # requeued by Slurm; held a while (BeginTime): started as soon as node2 is back
    held = _job(cl, env, job)
    print(f"requeued: {held['JobState']} Reason {held['Reason']} Restarts {held['Restarts']}")
    # (once every node is idle: the first run's steps are gone and node2 is back)
    _wait_idle(cl, env)
    cl.exec("node0", ["scontrol", "update", f"JobId={job}", "StartTime=now"], env=env)
    fields, _ = _wait_state(cl, env, job, lambda f: f.get("JobState") == "COMPLETED" or (
        f.get("JobState") not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING",
                                  "REQUEUED", "NODE_FAIL")), JOB_TIMEOUT)
    rerun_log = _log(tmp_path, job)
    if not (fields["JobState"] == "COMPLETED" and fields["Restarts"] == "1"):
        pytest.fail(f"the rerun: {fields}\njob log:\n{rerun_log}")
    print(f"the rerun's log:\n{rerun_log}")
    # the log keeps the failed run's lines, then says that the job started again
    assert rerun_log.startswith(log), rerun_log
    assert (f"starchol: job {job} starts again from the beginning (requeued, restart 1)"
            in rerun_log[len(log):]), rerun_log
    _check_factor(cl, env, tmp_path, job, matrix[2])
    assert sha256_file(matrix[0]) == matrix[1]


def test_launch_whose_daemon_fails_is_tried_again(slurm3, matrix, tmp_path):
    """mpirun's first launch fails before any rank starts: its daemons on node1 and node2
    cannot start (the launch agent is a missing program, as a daemon that dies at once on
    a node whose slurmd has just come back). Open MPI reports the failed daemon; the
    script says that no rank started, launches again after STARCHOL_LAUNCH_RETRY_S, and
    the job completes with a correct factor."""
    cl, env = slurm3
    shim = tmp_path / "bin"
    shim.mkdir()
    mpirun = subprocess.run(["sh", "-c", "command -v mpirun"], capture_output=True,
                            text=True).stdout.strip()
    assert mpirun, "no mpirun on PATH"
    # a fault injector, not a stand-in: the real mpirun runs both times
    (shim / "mpirun").write_text(
        "#!/bin/bash\n"
        f"if [ ! -e {tmp_path}/first-launch ]; then\n"
        f"    touch {tmp_path}/first-launch\n"
        "    export OMPI_MCA_orte_launch_agent=/nonexistent/orted\n"
        "fi\n"
        f"exec {mpirun} \"$@\"\n")
    (shim / "mpirun").chmod(0o755)
    script = _script(tmp_path, matrix[0], "--setup", f"export PATH={shim}:$PATH",
                     "--setup", "export STARCHOL_LAUNCH_RETRY_S=2")
    job, fields, took = _run_unshaped(cl, env, tmp_path, script)
    log = _log(tmp_path, job)
    print(f"launch retry: job {job} {fields['JobState']} after {took:.1f} s\n{log}")
    assert (tmp_path / "first-launch").exists()
    assert fields["JobState"] == "COMPLETED", (fields, log)
    assert re.search(rf"starchol: job {job}: the launch failed \(status \d+\) before any rank "
                     r"started \(try 1 of 3\); trying again in 2 s", log), log
    assert "try 2 of 3" not in log, log
    _check_factor(cl, env, tmp_path, job, matrix[2])
    assert sha256_file(matrix[0]) == matrix[1]
    assert not cl.wait_no_processes(timeout=30)
