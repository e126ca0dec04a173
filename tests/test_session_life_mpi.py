"""A Session embedded in a user's mpi4py program: MPI initialised by starchol is finalised
at exit, and Ctrl-C (SIGINT) during a computation acts at once (one rank: the
computation is abandoned and the session stays usable; several ranks: the job ends)."""
import json
import time

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
import json, os, signal, sys, time
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
        sent.append(time.time())
        print("SIGINT", json.dumps({{"at": sent[0], "done": done, "total": total}}),
              flush=True)
        os.kill(os.getpid(), signal.SIGINT)

sent = []
with Session(comm, workers=1):
    A = DistributedMatrix.from_function(kernel, (n, n), nb, tile_map)
    comm.Barrier()
    t0 = time.perf_counter()
    reference = cholesky(A, tile_map)
    ref_s = time.perf_counter() - t0
    if rank == 0:   # one line per write (mpirun interleaves the ranks' pieces)
        sys.stdout.write("REF " + json.dumps({{"ref_s": ref_s}}) + "\\n")
        sys.stdout.flush()
    comm.Barrier()
    t0 = time.perf_counter()
    try:
        cholesky(A, tile_map, progress=progress)
        print("NOT INTERRUPTED", flush=True)
    except KeyboardInterrupt:
        took = time.time() - sent[0]
        again = cholesky(A, tile_map)       # the session is still usable
        print("RESULT", json.dumps({{"after_sigint_s": took, "ref_s": ref_s,
              "same": again.logdet() == reference.logdet()}}), flush=True)
"""


def _skip_if_too_fast(out):
    """The first progress call comes 0.25 s into the wait: a machine that factors the
    matrix in well under a second leaves no time to interrupt it."""
    ref = _line(out, "REF")["ref_s"]
    if "NOT INTERRUPTED" in out and ref < 0.6:
        pytest.skip(f"the factorization took only {ref:.2f} s here: nothing to interrupt")


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
    # raised at once (the queued tasks skip their kernels), not after the factorization
    assert result["after_sigint_s"] < 0.3 * result["ref_s"], result
    assert result["same"] is True


def test_ctrl_c_on_one_of_two_ranks_ends_the_job_at_once(mpi_python):
    proc = mpi_python(2, INTERRUPT.format(n=4800), timeout=120,
                      what="Ctrl-C on one rank of a 2-rank factorization")
    t_end = time.time()
    _skip_if_too_fast(proc.stdout)
    assert "RESULT" not in proc.stdout and "NOT INTERRUPTED" not in proc.stdout
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "starchol:" in ln]
    assert lines == ["starchol: rank 1: interrupted; ending the job on every rank"], \
        proc.stderr
    ref, sigint = _line(proc.stdout, "REF"), _line(proc.stdout, "SIGINT")
    # the job ended well before the factorization could have (it ran ref_s)
    assert t_end - sigint["at"] < 0.5 * ref["ref_s"] + 1.0, (t_end - sigint["at"], ref)


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
    assert proc.stderr.count("NotPositiveDefiniteError: matrix is not positive "
                             "definite") == 2, proc.stderr
    assert "MPI_Abort" not in proc.stderr and "MPI_ABORT" not in proc.stderr


# Ctrl-C inside the submission window of a solve: rank `last` sends itself SIGINT when
# it first waits for the window (step 3 of 2 NT), the rest of the graph not yet
# submitted; argv[1]: the solve's variant
INTERRUPT_SOLVE = """
import json, os, signal, sys, time
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

sent = []
wait_iteration = Computation.wait_iteration

def interrupting(self, step, *args):
    if armed and rank == last and step >= 3 and not sent:
        sent.append(time.time())
        print("SIGINT", json.dumps({{"at": sent[0], "step": step}}), flush=True)
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
    t0 = time.perf_counter()
    reference = f.solve(B, variant=sys.argv[1]).gather()
    ref_s = time.perf_counter() - t0
    if rank == 0:
        sys.stdout.write("REF " + json.dumps({{"ref_s": ref_s}}) + "\\n")
        sys.stdout.flush()
    comm.Barrier()
    armed = True
    try:
        f.solve(B, variant=sys.argv[1])
        print("NOT INTERRUPTED", flush=True)
    except KeyboardInterrupt:
        took = time.time() - sent[0]
        armed = False
        again = f.solve(B, variant=sys.argv[1]).gather()      # the session is usable
        print("RESULT", json.dumps({{"after_sigint_s": took, "ref_s": ref_s,
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
    assert result["same"] is True
    if result["ref_s"] >= 0.6:     # else too fast to tell "at once" from "at the end"
        assert result["after_sigint_s"] < 0.5 * result["ref_s"], result


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
