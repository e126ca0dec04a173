"""API tests run under MPI: ``mpiexec -n {1,2,4,6} python -m pytest tests/mpi``.

Every rank runs the same tests in the same order with one session-scoped StarPU
Session (one worker per rank, byte statistics on). A test that fails on one rank while
the others wait is caught by the launcher's timeout (tests/test_mpi_suite.py).
Ranks other than 0 print only failures.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")


def pytest_configure(config):
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() != 0:
        config.option.verbose = -2


@pytest.fixture(scope="session")
def comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.fixture(scope="session")
def session(comm):
    from starchol import Session

    with Session(comm, workers=1, stats=True) as rt:
        yield rt


@pytest.fixture
def shared_tmp(comm):
    """A temporary folder that every rank sees (made by rank 0 on the one machine these
    tests run on), removed after the test, passed or failed. Collective."""
    import shutil
    import tempfile

    folder = comm.bcast(tempfile.mkdtemp(prefix="starchol-api-") if comm.Get_rank() == 0
                        else None)
    try:
        yield folder
    finally:
        comm.Barrier()
        if comm.Get_rank() == 0:
            shutil.rmtree(folder, ignore_errors=True)
