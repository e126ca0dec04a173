"""The fault and bad-input suite of issue 9, under mpirun (small N, timeouts).

Each reproduction of the issue must give a clear error on every rank, promptly, with
rc 1 or 2 and no traceback; the inputs stay byte-identical (sha256) and no temporary file
or process is left. See docs/reliability.md for the guarantee each test checks.
"""
import os
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import (MPIRUN, SPD_PROGRAM, _starchol_exe, follow_progress, sha256_file,
                      signals_default)
from starchol.cli import main


def snapshot(folder):
    return {name: sha256_file(os.path.join(folder, name)) for name in sorted(os.listdir(folder))
            if os.path.isfile(os.path.join(folder, name))}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    path = folder / "in.h5"
    assert main(["generate", "--n", "300", "--output", f"{path}:/A"]) == 0
    trunc = folder / "t.h5"
    trunc.write_bytes(path.read_bytes()[:100000])
    huge = folder / "huge.h5"   # declares 1e5 x 1e5 in a tiny file
    with h5py.File(huge, "w") as fh:
        fh.create_dataset("A", shape=(100000, 100000), dtype="f8")
    return folder


def refused_everywhere(p, np_, words, rc=2):
    """Every rank printed one error containing ``words`` and exited with ``rc``."""
    assert p.rank_exits == [rc] * np_, p.stderr
    # each rank writes its error line in one write, so mpirun cannot run two together
    lines = [ln for ln in p.stderr.splitlines() if ": error: " in ln]
    assert len(lines) == np_ and all(ln.count(": error: ") == 1 for ln in lines), p.stderr
    assert sum(words in ln for ln in lines) == np_, p.stderr
    assert "Traceback" not in p.stderr


CASES = {
    # issue 9.1: a result onto the input or onto another result
    "json onto input": (["--input", "{m}/in.h5:/A", "--json", "{m}/in.h5"],
                        "never modifies its input"),
    "json onto output": (["--n", "300", "--output", "{t}/same.h5:/L", "--json",
                          "{t}/same.h5"], "is also the --output file"),
    "gather onto output": (["--n", "300", "--output", "{t}/gs.npy:/L", "--gather",
                            "{t}/gs.npy"], "is also the --output file"),
    # issue 9.2: files HDF5 cannot open
    "truncated input": (["--input", "{m}/t.h5:/A"], "cannot be opened by HDF5"),
    "truncated output": (["--n", "300", "--output", "{m}/t.h5:/L"],
                         "cannot be opened by HDF5"),
    # issue 9.4: outputs checked before the work
    "json to missing folder": (["--n", "300", "--json", "{t}/no/r.json"], "does not exist"),
    "gather to missing folder": (["--n", "300", "--gather", "{t}/no/L.npy"],
                                 "does not exist"),
    "output under /proc": (["--n", "300", "--output", "/proc/x.h5:/L"], "--output"),
    # issue 9.5: sizes
    "n 1e7": (["--n", "10000000", "--nb", "500"], "not enough memory"),
    "input 1e5 x 1e5": (["--input", "{m}/huge.h5:/A", "--nb", "2000"], "not enough memory"),
    # issue 9.9
    "slices 0": (["--n", "300", "--dist", "sbc25d", "--slices", "0"],
                 "argument --slices: must be an integer >= 1"),
    "symmetry-tol nan": (["--input", "{m}/in.h5:/A", "--symmetry-tol", "nan"],
                         "--symmetry-tol must be a finite number"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_run_is_refused_on_every_rank(mpirun, matrix, tmp_path, case):
    args, words = CASES[case]
    args = [a.format(m=matrix, t=tmp_path) for a in args]
    if "--dist" not in args:
        args = ["--dist", "sbc", *args]
    if "--nb" not in args:
        args += ["--nb", "50"]
    before, t_before = snapshot(matrix), snapshot(tmp_path)
    t0 = time.monotonic()
    p = mpirun(3, "run", *args, timeout=90)
    elapsed = time.monotonic() - t0
    refused_everywhere(p, 3, words)
    assert snapshot(matrix) == before and snapshot(tmp_path) == t_before
    print(f"{case}: refused on every rank in {elapsed:.1f} s")


@pytest.mark.parametrize("env, words", [
    ({"STARPU_NCPU": "abc"}, "STARPU_NCPU='abc'"),
    ({"STARPU_NCPU": "-1"}, "must be >= 0"),
    ({"STARPU_HOME": "/nonexistent/x"}, "STARPU_HOME=/nonexistent/x does not exist"),
    ({"STARCHOL_KERNEL_BLAS": "/nonexistent/x.so"}, "STARCHOL_KERNEL_BLAS='/nonexistent/x.so'"),
    ({"STARCHOL_KERNEL_BLAS": "/etc/hostname"}, "cannot open /etc/hostname"),
])
def test_bad_starpu_environment_is_refused_before_start(mpirun, env, words):
    p = mpirun(2, "run", "--dist", "2dbc", "--n", "200", "--nb", "50", env=env, timeout=90)
    refused_everywhere(p, 2, words)
    assert not os.path.exists("/nonexistent")


def test_run_speaks_of_mpirun_np_not_nodes(mpirun):
    p = mpirun(4, "run", "--dist", "sbc", "--n", "200", "--nb", "50", timeout=90)
    refused_everywhere(p, 4, "mpirun -np")
    assert "--nodes" not in p.stderr


def test_sigint_to_one_rank_ends_the_job(matrix, tmp_path, starpu_home):
    """Issue 9.3: SIGINT to one rank used to hang in starpu_mpi_shutdown."""
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    before = sha256_file(matrix / "in.h5")
    out = tmp_path / "L.h5"
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    marker = f"{tmp_path}/L.h5:/L"
    cmd = [MPIRUN, "--oversubscribe", "-np", "3", *_starchol_exe(), "run", "--dist", "sbc",
           "--n", "4000", "--nb", "100", "--workers", "1", "--check", "--output", marker]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True, preexec_fn=signals_default)
    lines, started, reader = follow_progress(proc)
    try:
        assert started.wait(90), "the factorization did not start:\n" + "".join(lines)
        pids = subprocess.run(["pgrep", "-f", marker], capture_output=True,
                              text=True).stdout.split()
        victim = max(int(x) for x in pids if int(x) != proc.pid)
        os.kill(victim, signal.SIGINT)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the job hung after SIGINT to one rank")
    reader.join(10)
    err = "".join(lines)
    if proc.returncode == 0:
        pytest.skip("the run ended before the signal arrived")
    assert "interrupted by SIGINT; ending the job on every rank" in err, err
    assert "Traceback" not in err
    assert not out.exists() and os.listdir(tmp_path) == []
    assert sha256_file(matrix / "in.h5") == before
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left.strip() == ""


def test_concurrent_runs_never_lose_a_factor(matrix, tmp_path, starpu_home):
    """Issue 9.8: two runs to one --output: one publishes, the other says so and keeps
    its factor under a reported name (or is refused before it starts)."""
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = tmp_path / "L.h5"
    cmd = [MPIRUN, "--oversubscribe", "-np", "2", *_starchol_exe(), "run", "--dist", "2dbc",
           "--input", f"{matrix}/in.h5:/A", "--nb", "50", "--workers", "1", "--quiet",
           "--output", f"{out}:/L"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, start_new_session=True) for _ in range(2)]
    try:
        results = [(p.returncode, *p.communicate(timeout=120)) for p in procs]
        results = [(p.returncode, o, e) for p, (_, o, e) in zip(procs, results)]
    except subprocess.TimeoutExpired:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("concurrent runs hung")
    codes = sorted(r[0] for r in results)
    assert codes[0] == 0 and codes[1] in (1, 2), results
    loser = [r for r in results if r[0] != 0][0]
    assert "Traceback" not in loser[2]
    names = sorted(os.listdir(tmp_path))
    if loser[0] == 1:
        assert "appeared" in loser[2] and len(names) == 2, (names, loser[2])
        kept = [n for n in names if n != "L.h5"][0]
        assert kept in loser[2]
        with h5py.File(tmp_path / kept) as fh:
            assert fh["L"].shape == (300, 300)
    else:
        assert "already exists" in loser[2] and names == ["L.h5"]
    with h5py.File(out) as fh, h5py.File(matrix / "in.h5") as fa:
        low = fh["L"][:]
        a = fa["A"][:]
    assert np.allclose(low @ low.T, a, atol=1e-8 * np.abs(a).max())


LONE_ERROR = """
from mpi4py import MPI
from starchol.runtime import Session
with Session(MPI.COMM_WORLD, workers=1) as rt:
    if rt.rank == 1:
        {}["missing tile"]          # a lone error: rank 1 only
    MPI.COMM_WORLD.Barrier()        # where the other rank waits
"""


def test_lone_exception_in_a_session_aborts_instead_of_hanging(mpi_python):
    """A non-starchol exception on one rank inside ``with Session`` used to reach the
    collective starpu_mpi_shutdown and hang; now the job is aborted at once."""
    proc = mpi_python(2, LONE_ERROR, what="a lone exception inside a Session")
    err = proc.stderr
    assert proc.returncode == 1, err
    assert "rank 1: error: KeyError: 'missing tile'; ending the job on every rank" in err


# a rank that fails while its solve waits for the submission window (rank 1, at step 3
# of 2 NT: the rest of its graph never submitted, rank 0 waiting for its part)
FAILS_IN_THE_WINDOW = """
import sys
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map
from starchol.runtime.computation import Computation

comm = MPI.COMM_WORLD
n, nb, k = 640, 32, 4
tile_map = get_map("2dbc", comm.Get_size())
rng = np.random.default_rng(0)
m = rng.standard_normal((n, n))
full = m @ m.T / n + np.eye(n)
rhs = rng.standard_normal((n, k))
wait_iteration = Computation.wait_iteration
armed = []

def failing(self, step, *args):
    if armed and comm.Get_rank() == 1 and step >= 3:
        raise RuntimeError(f"rank 1 fails inside the window at step {step}")
    return wait_iteration(self, step, *args)

Computation.wait_iteration = failing
with Session(comm, workers=1):
    A = DistributedMatrix.from_function(lambda r0, r1, c0, c1: full[r0:r1, c0:c1], (n, n),
                                        nb, tile_map)
    B = DistributedMatrix.from_function(lambda r0, r1, c0, c1: rhs[r0:r1, c0:c1], (n, k),
                                        nb, tile_map, kind="rhs")
    f = cholesky(A, tile_map, window=2)
    armed.append(1)
    f.solve(B, variant=sys.argv[1])
    print("NOT FAILED", flush=True)
"""


@pytest.mark.parametrize("variant", ["rhs", "factor"])
def test_a_rank_failing_inside_the_window_of_a_solve_ends_the_job(mpi_python, variant):
    """The other rank waits in its window for this rank's part of the graph, which never
    comes: the job ends at once with one line naming the rank and the error."""
    proc = mpi_python(2, FAILS_IN_THE_WINDOW, what="a rank failing inside a solve's window",
                      args=(variant,))
    assert proc.returncode == 1, proc.stderr
    assert "NOT FAILED" not in proc.stdout
    assert ("rank 1: error: RuntimeError: rank 1 fails inside the window at step 3; ending "
            "the job on every rank") in proc.stderr, proc.stderr


AFTER_SHUTDOWN = SPD_PROGRAM + """
from starchol import SessionError
from starchol.collective import run_everywhere
B = DistributedMatrix.from_function(lambda r0, r1, c0, c1: full[r0:r1, c0:c1], (200, 2),
                                    50, tm, kind="rhs")
def fails():
    raise ValueError("the same error on every rank")
try:
    with Session(comm, workers=1) as s:
        F = cholesky(A, tm)
        before = F.logdet()
        run_everywhere(comm, fails)   # agreed: leaves the block without MPI_Abort
except ValueError as exc:
    print(f"left the session with {exc!r}", flush=True)
print(f"logdet {F.logdet() == before}", flush=True)
for name, call in (("solve", lambda: F.solve(B)), ("residual", lambda: F.residual(A)),
                   ("cholesky", lambda: cholesky(A, tm, session=s))):
    try:
        call()
        print(f"{name}: no error", flush=True)
    except SessionError as exc:
        print(f"{name}: SessionError: {exc}", flush=True)
"""


def test_factor_after_shutdown_raises_session_error(mpi_python):
    """An exception raised through run_everywhere leaves ``with Session`` normally on
    every rank (docs/api.md). After the session: logdet works (L's communicator, no
    StarPU), solve, residual and cholesky(session=closed) raise SessionError on every
    rank, no hang."""
    proc = mpi_python(2, AFTER_SHUTDOWN, what="using a factor after its session")
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, err
    assert out.count("left the session with ValueError('the same error on every rank')") \
        == 2, out
    assert out.count("logdet True") == 2, out
    for method in ("solve", "residual"):
        assert out.count(f"{method}: SessionError: Factor.{method} runs tasks on the StarPU "
                         "session that computed the factor, and that session was shut "
                         "down") == 2, out
    assert out.count("cholesky: SessionError: the session given to cholesky was shut "
                     "down") == 2, out


BAD_SESSION_ARGUMENT = """
import sys
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, UsageError, cholesky
from starchol.distributions import get_map
comm = MPI.COMM_WORLD
try:
    Session("world")
except UsageError as exc:
    print(f"rank {comm.rank}: refused: {exc}", flush=True)
for bad in ({"scheduler": "bogus"}, {"workers": 0}, {"gpus": -1}, {"cache": False},
            {"scheduler": "lws"}):
    try:                             # the bad value on rank 1 only
        Session(comm, **{"workers": 1, **(bad if comm.rank == 1 else {})}).start()
    except UsageError as exc:
        print(f"rank {comm.rank}: refused: {exc}", flush=True)
    else:
        sys.exit(f"rank {comm.rank}: started with {bad}")
with Session(comm, workers=1) as rt:   # the refusals started nothing
    tm = get_map("2dbc", comm.size)
    a = DistributedMatrix.from_function(
        lambda r0, r1, c0, c1: 2 * np.eye(100)[r0:r1, c0:c1], (100, 100), 25, tm)
    print(f"rank {comm.rank}: logdet {cholesky(a, tm).logdet():.6f}", flush=True)
"""


def test_bad_session_argument_on_one_rank_is_refused_everywhere(mpi_python):
    """A Session argument bad (or different) on rank 1 only used to hang the job in
    start (rank 1 raised alone) or abort it later; now start refuses it on every rank,
    before anything starts, and a good session can start afterwards."""
    proc = mpi_python(3, BAD_SESSION_ARGUMENT, what="a bad Session argument on one rank")
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, out + err
    for words in ("comm must be an mpi4py communicator, got str",
                  "unknown scheduler 'bogus'", "workers must be between 1 and",
                  "gpus must be an integer >= 0", "cache: rank 0 has True, rank 1 has False",
                  "scheduler: rank 0 has 'prio', rank 1 has 'lws'"):
        assert out.count(words) == 3, out
    assert out.count(f"logdet {100 * np.log(2):.6f}") == 3, out


ONE_RANK_OUT_OF_MEMORY = """
import os, resource, sys
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix
from starchol.distributions import get_map
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
tm = get_map("2dbc", 2)
a = np.eye(4000) * 2.0 if rank == 0 else None
held = DistributedMatrix.from_numpy(a, 500, tm)
def say(line):       # one write per line: two ranks' prints could run together
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()
def out_of_memory_on(victim, call):
    # a real MemoryError on one rank: its address space capped 16 MiB above its use
    limit = resource.getrlimit(resource.RLIMIT_AS)
    if rank == victim:
        pages = int(open(f"/proc/{os.getpid()}/statm").read().split()[0])
        resource.setrlimit(resource.RLIMIT_AS,
                           (pages * os.sysconf("SC_PAGE_SIZE") + (16 << 20), limit[1]))
    try:
        call()
        return "no error"
    except MemoryError as exc:
        return f"MemoryError {str(exc).split()[0]}"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limit)
# from_numpy: rank 1 cannot hold its tiles (32 MB) while rank 0 would send them
say("from_numpy " + out_of_memory_on(1, lambda: DistributedMatrix.from_numpy(a, 500, tm)))
# gather: the root cannot hold the dense matrix (128 MB) while rank 1 would send its tiles
say("gather " + out_of_memory_on(0, held.gather))
# from_hdf5: rank 1 cannot hold its tiles while rank 0 reads and checks its own
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "a.h5")
if rank == 0:
    import h5py
    with h5py.File(path, "w") as fh:
        fh["A"] = a
comm.Barrier()
say("from_hdf5 " + out_of_memory_on(1, lambda: DistributedMatrix.from_hdf5(path, "/A", 500,
                                                                           tm)))
"""


def test_memory_error_on_one_rank_reaches_every_rank_in_the_tile_transfer(mpi_python):
    """from_numpy and gather allocate before the ranks agree to start the tile-by-tile
    transfer: a MemoryError on one rank (its tiles; the root's dense matrix) was raised
    there alone while the others waited in Send/Recv for ever."""
    proc = mpi_python(2, ONE_RANK_OUT_OF_MEMORY, timeout=60,
                      what="a MemoryError on one rank in from_numpy/gather/from_hdf5")
    assert proc.returncode == 0, proc.stderr
    lines = sorted(proc.stdout.splitlines())
    assert lines == (["from_hdf5 MemoryError Unable"] * 2
                     + ["from_numpy MemoryError Unable"] * 2
                     + ["gather MemoryError Unable"] * 2), proc.stdout


@pytest.mark.parametrize("extra, words", [
    (["--nrhs", "2"], "--nrhs: rank 0 has None, rank 1 has 2"),     # hung before
    (["--check"], "--check: rank 0 has False, rank 1 has True"),
    (["--output", "{t}/o.h5:/L"], "--output: rank 0 has None, rank 1 has '{t}/o.h5:/L'"),
    (["--dtype", "float32"], "--dtype: rank 0 has 'float64', rank 1 has 'float32'"),
])
def test_option_on_one_rank_only_is_refused_everywhere(starpu_home, tmp_path, extra, words):
    """An option that decides a collective step, given to rank 1 only: the same one-line
    error on both ranks, at once, and nothing written."""
    from conftest import run_or_fail

    if MPIRUN is None:
        pytest.skip("mpirun not found")
    extra = [w.format(t=tmp_path) for w in extra]
    env = {**os.environ, "STARPU_HOME": starpu_home, "STARPU_SILENT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    script = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then "$@" ' + " ".join(extra)
              + '; else "$@"; fi; echo "starchol-exit=$?" >&2')
    cmd = [MPIRUN, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0",
           "-np", "2", "sh", "-c", script, "sh", *_starchol_exe(), "run", "--dist", "2dbc",
           "--n", "200", "--nb", "50", "--workers", "1", "--quiet"]
    p = run_or_fail(cmd, env, 60, f"run with {' '.join(extra)} on rank 1 only")
    p.rank_exits = [int(ln.split("=", 1)[1]) for ln in p.stderr.splitlines()
                    if ln.startswith("starchol-exit=")]
    refused_everywhere(p, 2, "the ranks were given different inputs: "
                       + words.format(t=tmp_path))
    assert os.listdir(tmp_path) == []
