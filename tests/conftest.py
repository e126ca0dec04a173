"""Shared test helpers: launching ``mpirun -np N`` with a timeout (a hang fails, never blocks)."""
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

from starchol.faults import die_with_parent

MPIRUN = shutil.which("mpirun")

# every run document a test makes `starchol run` write (in this process, or in the ranks
# it starts: they inherit the environment) is checked against the schema generated from
# its types first (jobs/run_cmd.document); a document that breaks it fails the run
os.environ["STARCHOL_CHECK_RUN_DOCUMENTS"] = "1"
MPI_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi")

#: the start of a program that ``mpi_python`` runs: ``comm`` (COMM_WORLD), ``tm`` (2dbc on
#: its ranks) and ``A``, a 200 x 200 SPD DistributedMatrix in 50 x 50 tiles (its entries
#: ``full`` on every rank); numpy, MPI, Session and cholesky imported
SPD_PROGRAM = """
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map
comm = MPI.COMM_WORLD
tm = get_map("2dbc", comm.Get_size())
m = np.random.default_rng(0).standard_normal((200, 200))
full = m @ m.T / 200 + np.eye(200)
A = DistributedMatrix.from_function(lambda r0, r1, c0, c1: full[r0:r1, c0:c1], (200, 200),
                                    50, tm)
"""


def pytest_ignore_collect(collection_path, config):
    """tests/mpi runs only under mpiexec, when named on the command line
    (``mpiexec -n 4 python -m pytest tests/mpi``); the default suite launches it from
    tests/test_mpi_suite.py."""
    path = str(collection_path)
    if not path.startswith(MPI_TESTS):
        return None
    named = [os.path.abspath(str(a).split("::")[0]) for a in config.args]
    return not any(a.startswith(MPI_TESTS) for a in named)


def signals_default():
    """``preexec_fn`` for a child a test signals: SIGINT and SIGHUP at their default
    action in the child and in what it starts. A shell that ignores SIGINT (a background
    job of a non-interactive shell, some CI runners) or SIGHUP (``nohup``) passes the
    ignored disposition on to every process it starts; a test that sends them must not
    depend on how it was started, so it sets the dispositions explicitly."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _starchol_exe():
    exe = os.path.join(os.path.dirname(sys.executable), "starchol")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "starchol"]


def sha256_file(path):
    """The sha256 hex digest of the file ``path``'s bytes."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def emulated_cluster():
    """``scripts/emulated_cluster.py``, the emulated cluster's Python front."""
    scripts = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import emulated_cluster as module

    return module


def need_cluster_root():
    """Skip the test where no emulated cluster can be made (it needs root); remove the
    clusters of test runs killed before their teardown."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("an emulated cluster needs root (network namespaces, tc, slurmd)")
    emulated_cluster().EmulatedCluster.sweep_orphans()


@contextlib.contextmanager
def cluster_or_skip(nodes, **options):
    """An emulated cluster of ``nodes`` nodes that is up inside the block and down after
    it, whatever happens; the test is skipped, with the reason, where none can be made."""
    need_cluster_root()
    module = emulated_cluster()
    cl = module.EmulatedCluster(nodes, **options)
    try:
        try:
            cl.up()
        except module.ClusterUnavailable as exc:
            pytest.skip(f"no emulated cluster here: {exc}")
        yield cl
    finally:
        cl.down()


@contextlib.contextmanager
def held_open(path):
    """Another process holds the HDF5 file ``path`` open for writing (so HDF5's file
    lock refuses other opens) until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", "import h5py, sys; f = h5py.File("
                               f"{str(path)!r}, 'a'); print('open', flush=True); "
                               "sys.stdin.read()"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "open\n"
        yield
    finally:
        holder.communicate("", timeout=30)


def follow_progress(proc):
    """Read ``proc``'s stderr (text) on a thread, for a test that acts once a run's
    factorization is under way. Returns ``(lines, started, reader)``: the lines read so
    far, an Event set at rank 0's first progress line ("rank 0 tasks (P ranks): ...")
    and the thread (join it after the process ends)."""
    import threading

    lines, started = [], threading.Event()

    def read():
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("rank 0 tasks"):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, started, reader


def _child_of_the_test():
    """``preexec_fn`` of :func:`run_or_fail`: SIGINT and SIGHUP at their default action
    (:func:`signals_default`), and SIGTERM when the test process dies (pytest killed from
    outside: mpirun, in its own session, would otherwise run on with its ranks)."""
    signals_default()
    die_with_parent(signal.SIGTERM)


def run_or_fail(cmd, env, timeout, what, cwd=None):
    """Run ``cmd`` (in ``cwd``) in its own process group, SIGINT and SIGHUP at their default action,
    ended by SIGTERM if the test process dies (:func:`_child_of_the_test`) ->
    CompletedProcess; on timeout kill the whole group and fail
    the test, saying ``what`` hung (with its output)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd, start_new_session=True,
                            preexec_fn=_child_of_the_test)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{what} hung (killed after {timeout} s)\nstdout:\n{out}\n"
                    f"stderr:\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture(scope="session")
def starpu_home(tmp_path_factory):
    """A writable STARPU_HOME shared by the session's runs (bus calibration lands there)."""
    return str(tmp_path_factory.mktemp("starpu_home"))


@pytest.fixture
def mpirun(starpu_home):
    """``mpirun(np, *starchol_args, timeout=120, env=None)`` -> CompletedProcess with
    ``rank_exits`` (``env``: extra environment variables for the ranks).

    Each rank runs ``starchol ARGS`` under a small shell that prints its exit status
    (``starchol-exit=RC``) on stderr, so a test sees every rank's status. mpirun is told
    not to kill the other ranks when one fails. On timeout the whole process group is
    killed and the test fails.
    """
    if MPIRUN is None:
        pytest.skip("mpirun not found")

    def run(np_, *args, timeout=120, workers=None, env=None):
        env = {**os.environ, "STARPU_HOME": starpu_home, "STARPU_SILENT": "1",
               "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "OMPI_MCA_rmaps_base_oversubscribe": "1", **(env or {})}
        cmd = [MPIRUN, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0",
               "-np", str(np_), "sh", "-c", '"$@"; echo "starchol-exit=$?" >&2', "sh",
               *_starchol_exe(), *map(str, args)]
        res = run_or_fail(cmd, env, timeout,
                          f"mpirun -np {np_} starchol {' '.join(map(str, args))}")
        res.rank_exits = [int(line.split("=", 1)[1]) for line in res.stderr.splitlines()
                          if line.startswith("starchol-exit=")]
        return res

    return run


def _read_or_empty(path):
    """The text of ``path``, or "" if it does not exist (a rank that wrote nothing)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


@pytest.fixture
def mpi_python(starpu_home, tmp_path):
    """``mpi_python(np, source, timeout=60, what="...", args=())`` -> CompletedProcess, with
    ``rank_stderr`` (each rank's stderr, whole; list by rank): the
    Python program ``source`` run by ``mpirun -np np`` with ``args`` as its ``sys.argv[1:]``
    (a result a test must see is best written to a file there: mpirun may drop a rank's
    last stdout lines at exit); on timeout the whole process group is
    killed and the test fails, saying ``what`` hung."""
    if MPIRUN is None:
        pytest.skip("mpirun not found")

    def run(np_, source, timeout=60, what="the program", args=()):
        script = tmp_path / "program.py"
        script.write_text(source)
        env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        ranks_dir = tmp_path / "rank_output"
        shutil.rmtree(ranks_dir, ignore_errors=True)
        cmd = [MPIRUN, "--oversubscribe", "-np", str(np_), "--output-filename",
               str(ranks_dir), sys.executable, str(script), *map(str, args)]
        proc = run_or_fail(cmd, env, timeout, f"{what} (mpirun -np {np_})")
        # each rank's own stderr, whole (in proc.stderr, the ranks' writes interleave)
        proc.rank_stderr = [_read_or_empty(ranks_dir / "1" / f"rank.{r}" / "stderr")
                            for r in range(np_)]
        return proc

    return run
