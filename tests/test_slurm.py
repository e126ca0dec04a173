"""End to end on a real Slurm: start slurmctld + slurmd on localhost (scripts/slurm-local.sh),
submit scripts written by `starchol slurm` for 4 ranks on this small machine (--overcommit),
wait with a hard timeout, and check each job's JSON report; and one fault: kill -9 of one
rank of a running job must end the job promptly, FAILED, with nothing left behind.

Needs root (slurmd, munged's user switch) and Debian's Slurm packages, which the helper
installs with apt-get when missing; skipped, with the reason, when either is impossible.
The daemons are stopped at the end, whatever happens.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import sha256_file

ROOT = Path(__file__).resolve().parents[1]
SLURM_LOCAL = ROOT / "scripts" / "slurm-local.sh"
#: seconds a job may take from sbatch to its end before the test cancels it and fails
JOB_TIMEOUT = 90
#: seconds a job may take to end after one of its ranks was killed
KILL_END_TIMEOUT = 60
#: seconds for the helper to install the packages and start the daemons
START_TIMEOUT = 240

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(2 * START_TIMEOUT)]


@pytest.fixture(scope="module")
def slurm():
    """(environment with SLURM_CONF, base folder) of a Slurm running on localhost."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("a local Slurm needs root (slurmd runs as root, munged as user munge)")
    if shutil.which("bash") is None:
        pytest.skip("bash is missing")
    # under /tmp, not pytest's tmp_path: munged (user munge) must traverse the path
    base = tempfile.mkdtemp(prefix="starchol-slurm-")
    try:
        try:
            proc = subprocess.run(["bash", str(SLURM_LOCAL), "start", base],
                                  capture_output=True, text=True, timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"scripts/slurm-local.sh start took over {START_TIMEOUT}s:\n"
                        f"{exc.stderr}")
        if proc.returncode == 77:
            pytest.skip("no local Slurm: " + proc.stderr.strip().splitlines()[-1])
        assert proc.returncode == 0, f"slurm-local.sh start failed:\n{proc.stderr}"
        env = dict(os.environ, SLURM_CONF=os.path.join(base, "slurm.conf"))
        yield env, Path(base)
    finally:
        stop = subprocess.run(["bash", str(SLURM_LOCAL), "stop", base],
                              capture_output=True, text=True, timeout=120)
        if stop.returncode != 0:  # pragma: no cover - shown on failure only
            print(stop.stderr, file=sys.stderr)
        shutil.rmtree(base, ignore_errors=True)


def _cmd(env, *argv, timeout=30, check=True, cwd=None):
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}{proc.stderr}")
    return proc


def _job_field(env, job, field):
    out = _cmd(env, "scontrol", "show", "job", "-o", job, check=False).stdout
    for word in out.split():
        if word.startswith(field + "="):
            return word.split("=", 1)[1]
    return None


def submit_and_wait(env, script, workdir, timeout=JOB_TIMEOUT):
    """sbatch SCRIPT, wait for the job to leave the queue; (job id, state, log text).

    Cancels the job and fails the test if it has not ended after ``timeout`` s.
    """
    # the job starts in the submission folder, where its log file goes
    job = _cmd(env, "sbatch", "--parsable", str(script), timeout=30, cwd=workdir).stdout.strip()
    job = job.split(";")[0]
    assert job.isdigit(), f"sbatch printed {job!r}"
    deadline = time.monotonic() + timeout
    while True:
        state = _cmd(env, "squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip()
        if not state:
            break
        if time.monotonic() > deadline:
            reason = _cmd(env, "squeue", "-h", "-j", job, "-o", "%T %r", check=False).stdout
            _cmd(env, "scancel", job, check=False)
            logs = "".join(p.read_text() for p in Path(workdir).glob(f"*-{job}.out"))
            pytest.fail(f"job {job} not finished after {timeout}s (state {reason.strip()}); "
                        f"cancelled. Job log:\n{logs}")
        time.sleep(0.3)
    final = _job_field(env, job, "JobState")
    logs = "".join(p.read_text() for p in Path(workdir).glob(f"*-{job}.out"))
    return job, final, logs


def write_script(workdir, *options):
    """`starchol slurm` for 2dbc 2x2 (4 ranks on this one node), N = 400, NB = 100."""
    script = Path(workdir) / "job.sbatch"
    argv = [sys.executable, "-m", "starchol", "slurm", "--dist", "2dbc", "--nodes", "4",
            "--grid", "2x2", "--n", "400", "--nb", "100", "--check", "--ranks-per-node", "4",
            "--overcommit", "--time", "00:05:00", "--json-dir", str(Path(workdir) / "results"),
            "-o", str(script), *options]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return script


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_generated_script_runs_on_slurm(slurm, tmp_path, launcher):
    env, _ = slurm
    script = write_script(tmp_path, "--launcher", launcher)
    job, state, logs = submit_and_wait(env, script, tmp_path)
    assert state == "COMPLETED", f"job {job} ended {state}; log:\n{logs}"
    report = tmp_path / "results" / f"starchol-{job}.json"
    assert report.is_file(), f"no report {report}; log:\n{logs}"
    doc = json.loads(report.read_text())
    assert doc["nodes"] == 4 and doc["n"] == 400 and doc["nb"] == 100
    assert doc["match"] is True, doc
    assert doc["residual"] is not None and doc["residual"] < 1e-12, doc["residual"]
    assert f"report: {report}" in logs


def test_mem_auto_job_runs_within_its_request(slurm, tmp_path):
    """--mem auto: Slurm accepts the request and the job's ranks peak within it."""
    env, _ = slurm
    script = write_script(tmp_path, "--mem", "auto")
    mem = [ln for ln in script.read_text().splitlines() if ln.startswith("#SBATCH --mem=")]
    assert len(mem) == 1 and mem[0].endswith("M"), mem
    request = int(mem[0][len("#SBATCH --mem="):-1]) * 2**20
    job, state, logs = submit_and_wait(env, script, tmp_path)
    assert state == "COMPLETED", f"job {job} ended {state}; log:\n{logs}"
    assert _job_field(env, job, "MinMemoryNode") == mem[0][len("#SBATCH --mem="):]
    doc = json.loads((tmp_path / "results" / f"starchol-{job}.json").read_text())
    rss = doc["memory"]["peak_rss_bytes_per_rank"]
    assert sum(rss) <= request, (rss, request)     # the 4 ranks share the one node
    assert max(doc["memory"]["model_peak_bytes_per_rank"]) * 4 * 1.1 <= request


def test_perf_model_dir_keeps_models_across_jobs(slurm, tmp_path):
    """--perf-model-dir: a model-based scheduler's history models and the bus calibration
    land in the folder and outlive the job (its own STARPU_HOME is removed); the next
    job runs with them there and writes them again."""
    env, _ = slurm
    models = tmp_path / "models"
    script = write_script(tmp_path, "--sched", "dmda", "--perf-model-dir", str(models))
    written = []
    for _ in range(2):
        job, state, logs = submit_and_wait(env, script, tmp_path)
        assert state == "COMPLETED", f"job {job} ended {state}; log:\n{logs}"
        doc = json.loads((tmp_path / "results" / f"starchol-{job}.json").read_text())
        assert doc["runtime"]["scheduler"] == "dmda" and doc["match"] is True
        assert list((models / "bus").glob("*.config")), sorted(models.rglob("*"))
        gemm = list((models / "codelets").rglob("starchol_gemm_d.*"))
        assert len(gemm) == 1, sorted(models.rglob("*"))
        # the history of the job's one tile size (StarPU decides which samples it keeps:
        # with 1 GEMM per rank it may keep none)
        assert _entries(gemm[0]) == 1, gemm[0].read_text()
        written.append(gemm[0].stat().st_mtime_ns)
    assert written[1] > written[0]


def _entries(model_file):
    """History entries (one per data size) of a StarPU 1.3 model file."""
    lines = model_file.read_text().splitlines()
    # an entry: footprint size flops mean dev sum sum2 n
    return sum(1 for line in lines if len(line.split()) == 8
               and all(c in "0123456789abcdef" for c in line.split()[0]))


def test_failing_run_fails_the_job(slurm, tmp_path):
    """A run that fails (matrix not positive definite) ends the job FAILED, with no report."""
    env, _ = slurm
    script = write_script(tmp_path, "--run-arg=--matrix=indefinite:150")
    job, state, logs = submit_and_wait(env, script, tmp_path)
    assert state == "FAILED", f"job {job} ended {state}; log:\n{logs}"
    assert not (tmp_path / "results" / f"starchol-{job}.json").exists()
    assert "positive definite" in logs.lower(), logs
    assert "trying again" not in logs, logs     # its ranks started: launched once


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_hdf5_input_and_output_through_slurm(slurm, tmp_path, dtype, tol):
    """--input / --output reach `starchol run` in the job: L written, L L^T = A; with
    --dtype float32, from a float32 file to a float32 factor."""
    h5py = pytest.importorskip("h5py")
    import numpy as np

    env, _ = slurm
    a_file = tmp_path / "a.h5"
    gen = subprocess.run([sys.executable, "-m", "starchol", "generate", "--n", "400",
                          "--output", f"{a_file}:/A", "--dtype", dtype],
                         capture_output=True, text=True, timeout=60)
    assert gen.returncode == 0, gen.stderr
    script = tmp_path / "job.sbatch"
    argv = [sys.executable, "-m", "starchol", "slurm", "--dist", "2dbc", "--nodes", "4",
            "--nb", "100", "--input", f"{a_file}:/A", "--output", f"{tmp_path / 'l.h5'}:/L",
            "--check", "--ranks-per-node", "4", "--overcommit", "--time", "00:05:00",
            "--json-dir", str(tmp_path / "results"), "-o", str(script)]
    if dtype != "float64":
        argv += ["--dtype", dtype]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    job, state, logs = submit_and_wait(env, script, tmp_path)
    assert state == "COMPLETED", f"job {job} ended {state}; log:\n{logs}"
    doc = json.loads((tmp_path / "results" / f"starchol-{job}.json").read_text())
    assert doc["n"] == 400 and doc["match"] is True and doc["dtype"] == dtype
    assert doc["residual"] < tol
    with h5py.File(a_file, "r") as fa, h5py.File(tmp_path / "l.h5", "r") as fl:
        a, lower = fa["A"][...], fl["L"][...]
    assert a.dtype == lower.dtype == np.dtype(dtype)
    a, lower = a.astype(np.float64), lower.astype(np.float64)
    assert np.allclose(lower @ lower.T, a, rtol=0, atol=tol * 100 * np.abs(a).max())


@pytest.mark.parametrize("options,reason", [
    (["--dist", "2dbc", "--nodes", "8", "--ranks-per-node", "1"], ("Node count", "processors")),
    (["--dist", "2dbc", "--nodes", "4", "--ranks-per-node", "4", "--cpus-per-node", "4096"],
     ("Node count", "processors")),
    (["--dist", "2dbc", "--nodes", "4", "--ranks-per-node", "4", "--overcommit", "--mem",
      "auto", "--n", "200000", "--nb", "1000"], ("Memory specification can not be satisfied",)),
], ids=["8-nodes", "4096-cores", "mem-auto-N-200000"])
def test_job_no_node_can_hold_is_refused_at_submission(slurm, tmp_path, options, reason):
    """More Slurm nodes, or more cores per node, than the cluster has: sbatch refuses the
    job at once (EnforcePartLimits=ALL in scripts/slurm-common.sh). Without it sbatch
    accepted the job, which then stayed PENDING (Reason=PartitionConfig) forever, and
    `sbatch --wait` never returned. Likewise a --mem auto request above the node's memory
    (N = 200,000 on 4 ranks of this node: the job would have started and been killed)."""
    env, _ = slurm
    script = tmp_path / "job.sbatch"
    size = [] if "--n" in options else ["--n", "400", "--nb", "100"]
    argv = [sys.executable, "-m", "starchol", "slurm", *options, *size,
            "--time", "00:05:00", "-o", str(script)]
    made = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    proc = _cmd(env, "sbatch", "--parsable", str(script), cwd=tmp_path, check=False)
    job = proc.stdout.strip().split(";")[0]
    if job.isdigit():
        _cmd(env, "scancel", job, check=False)
    assert proc.returncode != 0 and not job, f"sbatch accepted job {job!r}:\n{proc.stderr}"
    assert "Batch job submission failed" in proc.stderr, proc.stderr
    assert any(r in proc.stderr for r in reason), proc.stderr


def _job_ranks(marker):
    """{rank: pid} of the `starchol run` processes whose command line holds ``marker``.

    The launcher's own command line holds the marker too; it is told apart by its name.
    The rank is PMIx's (PMIX_RANK in the process environment), MPI's rank under srun and
    under Open MPI's mpirun.
    """
    pids = subprocess.run(["pgrep", "-f", marker], capture_output=True,
                          text=True).stdout.split()
    ranks = {}
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:   # ended meanwhile
            continue
        if comm in ("srun", "mpirun", "orterun", "bash", "pgrep"):
            continue
        for var in environ:
            if var.startswith(b"PMIX_RANK="):
                ranks[int(var.split(b"=", 1)[1])] = int(pid)
    return ranks


def _job_log(workdir, job):
    return "".join(p.read_text(errors="replace") for p in Path(workdir).glob(f"*-{job}.out"))


#: what the job log says after rank 3 of 4 was killed with SIGKILL, by launcher
KILLED_RANK_LOG = {
    # srun (--kill-on-bad-exit) names the task, then Slurm sends SIGTERM to the others,
    # which say so (starchol/faults.py)
    "srun": ["srun: error: localhost: task 3: Killed"] + [
        f"starchol run: rank {r}: stopped by SIGTERM (the job is being ended: a rank "
        "failed" for r in range(3)],
    # mpirun names the rank and ends the others itself (they print nothing)
    "mpirun": ["mpirun noticed that process rank 3 with PID",
               "exited on signal 9 (Killed)"],
}


@pytest.mark.parametrize("launcher", ["mpirun", pytest.param("srun", marks=pytest.mark.slow)])
def test_sigkill_of_one_rank_ends_the_slurm_job(slurm, tmp_path, launcher):
    """kill -9 of one rank of a running job: the job ends promptly and FAILED, the log
    says why, nothing is left (output, temporary files, StarPU folders, processes) and the
    input is unchanged.

    One rank is killed by pid (found with pgrep from a marker in its command line): Slurm
    has no way to signal one task of a step (``scancel --signal`` reaches every task).
    About 14 s on 2 busy cores, 2 to 3 s of it writing the 4000 x 4000 input; the srun
    launcher's case (not the default) is in the slow suite."""
    env, _ = slurm
    # a folder name found in no other process's command line: the marker
    work = tmp_path / f"sigkill-{os.getpid()}"
    work.mkdir()
    a_file = work / "a.h5"
    out = work / "l.h5"
    gen = subprocess.run([sys.executable, "-m", "starchol", "generate", "--n", "4000",
                          "--output", f"{a_file}:/A"], capture_output=True, text=True,
                         timeout=120)
    assert gen.returncode == 0, gen.stderr
    before = sha256_file(a_file)
    script = tmp_path / "job.sbatch"
    argv = [sys.executable, "-m", "starchol", "slurm", "--dist", "2dbc", "--nodes", "4",
            "--grid", "2x2", "--nb", "50", "--input", f"{a_file}:/A",
            "--output", f"{out}:/L", "--check", "--ranks-per-node", "4", "--overcommit",
            "--time", "00:05:00", "--json-dir", str(tmp_path / "results"),
            "--launcher", launcher, "-o", str(script)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    job = _cmd(env, "sbatch", "--parsable", str(script), cwd=tmp_path).stdout.strip()
    job = job.split(";")[0]
    assert job.isdigit(), f"sbatch printed {job!r}"
    try:
        # wait for the factorization to start (rank 0's first progress line) on 4 ranks
        deadline = time.monotonic() + JOB_TIMEOUT
        ranks = {}
        while time.monotonic() < deadline:
            ranks = _job_ranks(str(work))
            if len(ranks) == 4 and "rank 0 tasks" in _job_log(tmp_path, job):
                break
            state = _cmd(env, "squeue", "-h", "-j", job, "-o", "%T", check=False).stdout
            assert state.strip(), (f"job {job} ended before the kill:\n"
                                   f"{_job_log(tmp_path, job)}")
            time.sleep(0.3)
        else:
            pytest.fail(f"job {job}: the factorization did not start on 4 ranks within "
                        f"{JOB_TIMEOUT}s (ranks {ranks}):\n{_job_log(tmp_path, job)}")
        # inside the factorization: NB = 50 makes it about 1.7 s on 2 busy cores (NB =
        # 100 took 0.6 s since the last-worker patch), the first progress line comes at
        # about 25%, and the kill follows it at once
        assert "report:" not in _job_log(tmp_path, job), "the run ended before the kill"
        t0 = time.monotonic()
        os.kill(ranks[3], signal.SIGKILL)
        # the job must leave the queue promptly
        while _cmd(env, "squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip():
            if time.monotonic() - t0 > KILL_END_TIMEOUT:
                pytest.fail(f"job {job} still running {KILL_END_TIMEOUT}s after rank 3 was "
                            f"killed:\n{_job_log(tmp_path, job)}")
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
    finally:
        _cmd(env, "scancel", job, check=False)
    logs = _job_log(tmp_path, job)
    state, exit_code = _job_field(env, job, "JobState"), _job_field(env, job, "ExitCode")
    print(f"job {job} ended {state} (ExitCode={exit_code}) {elapsed:.1f} s after the kill;"
          f" log:\n{logs}")
    assert state == "FAILED", f"job {job} ended {state}; log:\n{logs}"
    # the batch script ends with the launcher's status, not 0
    assert exit_code.split(":")[0] != "0", exit_code
    for words in KILLED_RANK_LOG[launcher]:
        assert words in logs, logs
    assert "Traceback" not in logs
    assert list((tmp_path / "results").iterdir()) == [], "a report was written"
    assert "report:" not in logs
    # nothing left: no factor, no temporary output, the input unchanged
    assert sorted(p.name for p in work.iterdir()) == ["a.h5"], list(work.iterdir())
    assert sha256_file(a_file) == before
    assert not Path(os.environ.get("TMPDIR", "/tmp"), f"starpu-{job}").exists()
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-af", str(work)], capture_output=True, text=True).stdout
    assert left.strip() == "", f"processes of job {job} left:\n{left}"
