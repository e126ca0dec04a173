"""Launch the API tests (tests/mpi) under ``mpirun -np {1,2,4,6}`` with a timeout, so
that a hang fails; every rank must pass."""
import os
import sys

import pytest

from conftest import MPIRUN, run_or_fail

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("np_", [1, 2, 4, 6])
def test_api_under_mpi(np_, starpu_home):
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [MPIRUN, "--oversubscribe", "-np", str(np_), sys.executable, "-m", "pytest",
           "-q", "-x", "-p", "no:cacheprovider", "--color=no", os.path.join(HERE, "mpi")]
    proc = run_or_fail(cmd, env, 240, f"mpirun -np {np_} pytest tests/mpi",
                       cwd=os.path.dirname(HERE))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert " passed" in out and "failed" not in out, out
