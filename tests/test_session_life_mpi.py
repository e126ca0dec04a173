"""A Session embedded in a user's mpi4py program: MPI initialised by starchol is finalised
at exit, and Ctrl-C (SIGINT) during a computation acts at once (one rank: the
computation is abandoned and the session stays usable; several ranks: the job ends)."""
import json

import pytest

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi

NO_INIT = """
import sys
import mpi4py
mpi4py.rc.initialize = False          # the program leaves MPI to starchol
from mpi4py import MPI
import numpy as np
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map

with Session(workers=1):
    comm = MPI.COMM_WORLD
    tile_map = get_map("2dbc", comm.Get_size())
    a = DistributedMatrix.from_function(
        lambda r0, r1, c0, c1: 2.0 * np.eye(r1 - r0, c1 - c0) if r0 == c0
        else np.zeros((r1 - r0, c1 - c0)), (120, 120), 40, tile_map)
    logdet = cholesky(a, tile_map).logdet()
    line = f"RESULT {comm.Get_rank()} {MPI.Query_thread()} {logdet:.6f}\\n"
    sys.stdout.write(line)     # one write per line: mpirun interleaves the ranks' pieces
    sys.stdout.flush()
"""


def test_mpi_initialised_by_the_session_is_finalised_at_exit(mpi_python):
    proc = mpi_python(2, NO_INIT, timeout=90, what="a session that initialises MPI")
    results = sorted(ln.split()[1:] for ln in proc.stdout.splitlines()
                     if ln.startswith("RESULT "))
    # MPI_THREAD_MULTIPLE (3); log det of 2 I (120 x 120) = 120 log 2
    assert results == [["0", "3", "83.177662"], ["1", "3", "83.177662"]], proc.stdout
    # without MPI_Finalize mpirun calls the exit "improper" and fails the job
    assert "improperly" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr


# rank `last` sends itself SIGINT from the progress callback, once the tasks run
INTERRUPT = """
import json, os, signal, sys
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map

comm = MPI.COMM_WORLD
rank, last = comm.Get_rank(), comm.Get_size() - 1
n, nb = {n}, 200
tile_map = get_map("2dbc", comm.Get_size())

def kernel(r0, r1, c0, c1):
    x, y = np.arange(r0, r1)[:, None], np.arange(c0, c1)[None, :]
    return np.exp(-np.abs(x - y) / 50.0) + (x == y)

def progress(done, total):
    if rank == last and done < total and not sent:
        sent.append(done)
        print("SIGINT", json.dumps({{"done": done, "total": total}}),
              flush=True)
        os.kill(os.getpid(), signal.SIGINT)

sent = []
with Session(comm, workers=1):
    A = DistributedMatrix.from_function(kernel, (n, n), nb, tile_map)
    reference = cholesky(A, tile_map)
    work = A.copy()
    comm.Barrier()
    try:     # the whole graph submitted at once (window=0): all of it queued at the signal
        cholesky(work, tile_map, overwrite_a=True, progress=progress, window=0)
        print("NOT INTERRUPTED", flush=True)
    except KeyboardInterrupt:
        again = cholesky(A, tile_map)       # the session is still usable
        # (its wait came after the abandoned one's tasks were done) the potrf of the
        # last diagonal tile is the graph's last task: computed only if the tasks queued
        # at the signal ran their kernels
        last = (work.nt - 1, work.nt - 1)
        computed = np.array_equal(np.tril(work.tiles[last]),
                                  np.tril(reference.L.tiles[last]))
        print("RESULT", json.dumps({{"last_tile_computed": computed,
              "same": again.logdet() == reference.logdet()}}), flush=True)
"""


def _skip_if_too_fast(out):
    """The first progress call comes 0.25 s into the wait: a machine that factors the
    matrix before it leaves nothing to interrupt (no SIGINT was sent)."""
    if "NOT INTERRUPTED" in out and "SIGINT " not in out:
        pytest.skip("the factorization ended before the first progress call: nothing to "
                    "interrupt")


def _line(out, key):
    line = next((ln for ln in out.splitlines() if ln.startswith(key + " ")), None)
    assert line is not None, out
    return json.loads(line[len(key) + 1:])


def test_ctrl_c_abandons_the_computation_of_one_rank_and_the_session_stays_usable(
        mpi_python):
    proc = mpi_python(1, INTERRUPT.format(n=4000), timeout=120,
                      what="Ctrl-C during a 1-rank factorization")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _skip_if_too_fast(proc.stdout)
    sigint, result = _line(proc.stdout, "SIGINT"), _line(proc.stdout, "RESULT")
    assert sigint["done"] < sigint["total"]
    # raised at once, not after the factorization: the queued tasks skipped their kernels
    assert result["last_tile_computed"] is False, result
    assert result["same"] is True


def test_ctrl_c_on_one_of_two_ranks_ends_the_job_at_once(mpi_python):
    proc = mpi_python(2, INTERRUPT.format(n=4800), timeout=120,
                      what="Ctrl-C on one rank of a 2-rank factorization")
    _skip_if_too_fast(proc.stdout)
    assert "RESULT" not in proc.stdout and "NOT INTERRUPTED" not in proc.stdout
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "starchol:" in ln]
    assert lines == ["starchol: rank 1: interrupted; ending the job on every rank"], \
        proc.stderr


LOW_LEVEL = """
import sys
import mpi4py
mpi4py.rc.thread_level = "funneled"
from mpi4py import MPI
from starchol import Session
from starchol.runtime.errors import RuntimeUnavailableError

try:
    Session(workers=1).start()
except RuntimeUnavailableError as exc:
    sys.stdout.write(f"REFUSED {MPI.COMM_WORLD.Get_rank()} {exc}\\n")
    sys.stdout.flush()
"""


def test_a_thread_level_below_serialized_is_refused_on_every_rank(mpi_python):
    proc = mpi_python(2, LOW_LEVEL, timeout=60, what="a session under MPI_THREAD_FUNNELED")
    assert proc.returncode == 0, proc.stderr
    refused = sorted(ln for ln in proc.stdout.splitlines() if ln.startswith("REFUSED "))
    assert [ln.split()[1] for ln in refused] == ["0", "1"], proc.stdout
    for ln in refused:
        assert ("StarPU-MPI needs MPI_THREAD_SERIALIZED or more (its communication thread "
                "calls MPI); MPI was initialised with MPI_THREAD_FUNNELED") in ln


# a session started with .start() (no `with`); the program ends with an exception that
# nobody caught: on rank 1 only, or (agreed) on every rank
UNCAUGHT = """
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map

comm = MPI.COMM_WORLD
session = Session(comm, workers=1).start()
if {agreed}:      # starchol raises it on every rank alike
    tile_map = get_map("2dbc", comm.Get_size())
    a = DistributedMatrix.from_function(
        lambda r0, r1, c0, c1: -np.eye(r1 - r0, c1 - c0), (80, 80), 40, tile_map)
    cholesky(a, tile_map)
if comm.Get_rank() == 1:
    raise ValueError("a bug on rank 1")
comm.Barrier()
"""


def test_an_uncaught_exception_on_one_rank_ends_the_job(mpi_python):
    # it hung: the exit handlers ran the collective shutdown on rank 1 alone
    proc = mpi_python(2, UNCAUGHT.format(agreed=False), timeout=60,
                      what="an uncaught exception on one rank of a started session")
    assert proc.returncode != 0
    assert "ValueError: a bug on rank 1" in proc.stderr          # the traceback
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("starchol:")]
    assert lines == ["starchol: rank 1: error: ValueError: a bug on rank 1; ending the job "
                     "on every rank (MPI_Abort)"], proc.stderr


def test_an_uncaught_agreed_error_ends_every_rank_normally(mpi_python):
    proc = mpi_python(2, UNCAUGHT.format(agreed=True), timeout=60,
                      what="an uncaught NotPositiveDefiniteError on every rank")
    assert proc.returncode == 1, proc.stderr
    for rank, err in enumerate(proc.rank_stderr):      # whole: proc.stderr interleaves
        assert err.count("NotPositiveDefiniteError: matrix is not positive "
                         "definite") == 1, (rank, err)
    assert "MPI_Abort" not in proc.stderr and "MPI_ABORT" not in proc.stderr


# Ctrl-C inside the submission window of a solve: rank `last` sends itself SIGINT when
# it first waits for the window (step 3 of 2 NT), the rest of the graph not yet
# submitted; argv[1]: the solve's variant
INTERRUPT_SOLVE = """
import json, os, signal, sys
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map
from starchol.runtime.computation import Computation

comm = MPI.COMM_WORLD
rank, last = comm.Get_rank(), comm.Get_size() - 1
n, nb, k = {n}, 120, {k}
tile_map = get_map("2dbc", comm.Get_size())
rng = np.random.default_rng(0)
rhs = rng.standard_normal((n, k))

def kernel(r0, r1, c0, c1):
    x, y = np.arange(r0, r1)[:, None], np.arange(c0, c1)[None, :]
    return np.exp(-np.abs(x - y) / 50.0) + (x == y)

sent, late = [], []
wait_iteration = Computation.wait_iteration

def interrupting(self, step, *args):
    if armed and rank == last and sent:
        late.append(step)       # a window waited for after the signal
    if armed and rank == last and step >= 3 and not sent:
        sent.append(step)
        print("SIGINT", json.dumps({{"step": step}}), flush=True)
        os.kill(os.getpid(), signal.SIGINT)
    return wait_iteration(self, step, *args)

Computation.wait_iteration = interrupting
armed = False
with Session(comm, workers=1):
    A = DistributedMatrix.from_function(kernel, (n, n), nb, tile_map)
    B = DistributedMatrix.from_function(lambda r0, r1, c0, c1: rhs[r0:r1, c0:c1],
                                        (n, k), nb, tile_map, kind="rhs")
    f = cholesky(A, tile_map, window=2)
    comm.Barrier()
    reference = f.solve(B, variant=sys.argv[1]).gather()
    comm.Barrier()
    armed = True
    try:
        f.solve(B, variant=sys.argv[1])
        print("NOT INTERRUPTED", flush=True)
    except KeyboardInterrupt:
        armed = False
        again = f.solve(B, variant=sys.argv[1]).gather()      # the session is usable
        print("RESULT", json.dumps({{"windows_after_sigint": late,
              "same": bool(np.array_equal(again, reference))}}), flush=True)
"""


@pytest.mark.parametrize("variant", ["rhs", "factor"])
def test_ctrl_c_inside_the_window_of_a_solve_on_one_rank(mpi_python, variant):
    """One rank: the windowed solve is abandoned at once (its queued tasks skip their
    kernels, the rest is never submitted) and the session solves again, bit for bit."""
    proc = mpi_python(1, INTERRUPT_SOLVE.format(n=2400, k=400), timeout=120,
                      what="Ctrl-C inside the window of a 1-rank solve", args=(variant,))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT INTERRUPTED" not in proc.stdout
    sigint, result = _line(proc.stdout, "SIGINT"), _line(proc.stdout, "RESULT")
    assert sigint["step"] == 3
    # abandoned at once: no window waited for after the signal (the rest of the graph,
    # steps 4 to 2 NT - 1, never submitted)
    assert result["windows_after_sigint"] == [], result
    assert result["same"] is True


@pytest.mark.parametrize("variant", ["rhs", "factor"])
def test_ctrl_c_inside_the_window_of_a_solve_on_one_of_two_ranks(mpi_python, variant):
    """Two ranks: the other rank waits for this one's part of the graph; the job ends
    with one line, not a hang."""
    proc = mpi_python(2, INTERRUPT_SOLVE.format(n=1200, k=40), timeout=120,
                      what="Ctrl-C inside the window of a 2-rank solve", args=(variant,))
    assert "RESULT" not in proc.stdout and "NOT INTERRUPTED" not in proc.stdout
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "starchol:" in ln]
    assert lines == ["starchol: rank 1: interrupted; ending the job on every rank"], \
        proc.stderr
    assert _line(proc.stdout, "SIGINT")["step"] == 3
