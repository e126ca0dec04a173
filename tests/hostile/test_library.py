"""Library calls a careless program makes (issue 47, Medium): ``solve_mixed`` with NaN
or Inf in B is refused before any factorization, naming B (it reported "refinement
diverged" after a float64 factorization). One process, with a timeout."""
import os
import subprocess
import sys

import pytest

PROGRAM = """
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, UsageError, solve_mixed
from starchol.distributions import get_map
tm = get_map("2dbc", 1)
m = np.random.default_rng(0).standard_normal((64, 64))
a = m @ m.T + 64 * np.eye(64)
b = np.ones((64, 2))
b[5, 1] = {bad}
with Session(MPI.COMM_WORLD, workers=1):
    A = DistributedMatrix.from_numpy(a, 32, tm)
    B = DistributedMatrix.from_numpy(b, 32, tm, kind="rhs")
    try:
        solve_mixed(A, B, tm)
        print("no error")
    except UsageError as exc:
        print("UsageError:", exc)
"""


@pytest.mark.parametrize("bad", ["np.nan", "np.inf", "-np.inf"])
def test_solve_mixed_refuses_non_finite_b(bad, tmp_path):
    env = dict(os.environ, STARPU_HOME=str(tmp_path), STARPU_SILENT="1")
    p = subprocess.run([sys.executable, "-c", PROGRAM.format(bad=bad)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "UsageError: B holds a non-finite value (NaN or Inf)" in p.stdout, p.stdout
