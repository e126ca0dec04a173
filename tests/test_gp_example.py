"""examples/gp_loglik.py --mixed under mpirun: the log-likelihood is float64's (the
example checks it against SciPy's float64 to 1e-9 relative), alpha's backward error is
at most sqrt(N) 2^-53, and the float32 factorization moves half of float64's bytes."""
import os
import re
import sys

import pytest

from conftest import MPIRUN, run_or_fail

pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "gp_loglik.py")


def _run(np_, starpu_home, *args):
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [MPIRUN, "--oversubscribe", "-np", str(np_), sys.executable, EXAMPLE,
           "--workers", "1", *args]
    return run_or_fail(cmd, env, 120, f"gp_loglik.py {' '.join(args)}")


def test_mixed_log_likelihood_is_float64s(starpu_home):
    if MPIRUN is None:
        pytest.skip("mpirun not found")
    mixed = _run(6, starpu_home, "--dist", "sbc25d", "--slices", "2", "--n", "600",
                 "--nb", "60", "--mixed")
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
    assert "[FAIL]" not in mixed.stdout and mixed.stdout.count("[ok]") == 6, mixed.stdout
    rel = float(re.search(r"log-likelihood vs scipy float64: relative (\S+) <",
                          mixed.stdout).group(1))
    assert rel <= 1e-9
    assert "fallback: none" in mixed.stdout
    assert "[ok] float32 factor bytes measured == model == half of float64's" in mixed.stdout
