"""The right-hand-side variant under mpirun with the receive cache on and off (the API
suite under tests/mpi runs with it on only): every map family at 2, 4 and 6 ranks,
float64 and float32, K = 1 and K > NB; solve, each pass and the residual B - A X; bytes
measured == model == oracle per pair, answers as SciPy's."""
import os

import pytest


pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
pytestmark = pytest.mark.mpi

TESTS = os.path.dirname(os.path.abspath(__file__))

PROGRAM = r"""
import sys
sys.path.insert(0, {tests!r})
import numpy as np, scipy.linalg as sl
from mpi4py import MPI
from volume_reference import rhs_residual_bytes, rhs_solve_bytes
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map
from starchol.linalg.cholesky import rhs_residual, symmetric_tiles
from starchol.model.rhs_volume import (rhs_residual_transfer_pairs_bytes,
                                       rhs_solve_transfer_pairs_bytes)

comm = MPI.COMM_WORLD
P, rank = comm.Get_size(), comm.Get_rank()
MAPS = {{2: [get_map("2dbc", 2), get_map("2dbc25d", 2, slices=2)],
        4: [get_map("2dbc", 4, grid="2x2"), get_map("2dbc25d", 4, slices=2)],
        6: [get_map("sbc", 6), get_map("sbc25d", 6, slices=2)]}}[P]
n, nb = 230, 40
rng = np.random.default_rng(3)
M = rng.standard_normal((n, n))
A0 = M @ M.T / n + np.eye(n)
cache = {cache}
bad = []
with Session(comm, workers=1, stats=True, cache=cache) as s:
    for m in MAPS:
        for dtype in (np.float64, np.float32):
            item = np.dtype(dtype).itemsize
            A = DistributedMatrix.from_numpy(A0.astype(dtype) if rank == 0 else None, nb, m)
            F = cholesky(A, m)
            for k in (1, 50):
                B0 = rng.standard_normal((n, k))
                B = DistributedMatrix.from_numpy(B0.astype(dtype) if rank == 0 else None,
                                                 nb, m, kind="rhs")
                for which, call in (("both", lambda: F.solve(B, variant="rhs")),
                                    ("forward", lambda: F.solve_triangular(B, variant="rhs")),
                                    ("backward", lambda: F.solve_triangular(
                                        B, trans=True, variant="rhs"))):
                    X = call()
                    rec = F.solve_record
                    model = rhs_solve_transfer_pairs_bytes(m, n, nb, k, cache=cache,
                                                           itemsize=item, which=which)
                    oracle = rhs_solve_bytes(m, n, nb, k, cache=cache, itemsize=item,
                                             which=which)
                    if not (rec.bytes_measured_pairs == model.tolist() == oracle):
                        bad.append(f"{{m}} {{dtype.__name__}} K={{k}} {{which}}: measured "
                                   f"{{rec.bytes_measured_pairs}} model {{model.tolist()}}")
                    Xg = X.gather()
                    if rank == 0:
                        L = np.linalg.cholesky(A0.astype(dtype).astype(np.float64))
                        ref = {{"both": lambda: sl.cho_solve((L, True), B0.astype(dtype)),
                               "forward": lambda: sl.solve_triangular(L, B0.astype(dtype),
                                                                      lower=True),
                               "backward": lambda: sl.solve_triangular(
                                   L, B0.astype(dtype), lower=True, trans=1)}}[which]()
                        err = np.abs(Xg - ref).max() / np.abs(ref).max()
                        if err > (1e-10 if dtype == np.float64 else 1e-3):
                            bad.append(f"{{m}} {{dtype.__name__}} K={{k}} {{which}}: error {{err}}")
                X = F.solve(B, variant="rhs")
                before = s.bytes_sent()
                R = rhs_residual(s, A, X, B, symmetric_tiles(A), tile_map=m, variant="rhs")
                sent = comm.gather((s.bytes_sent() - before).tolist(), root=0)
                Rg, Xg = R.gather(), X.gather()
                if rank == 0:
                    A64 = A0.astype(dtype)
                    ref = B0.astype(dtype) - A64 @ Xg
                    scale = np.abs(A64).max() * np.abs(Xg).max() * n
                    if np.abs(Rg - ref).max() > (1e-13 if dtype == np.float64 else 1e-5) * scale:
                        bad.append(f"{{m}} {{dtype.__name__}} K={{k}} residual values")
                    model = rhs_residual_transfer_pairs_bytes(m, n, nb, k, cache=cache,
                                                              itemsize=item).tolist()
                    if not (sent == model == rhs_residual_bytes(m, n, nb, k, cache=cache,
                                                                itemsize=item)):
                        bad.append(f"{{m}} {{dtype.__name__}} K={{k}} residual: measured "
                                   f"{{sent}} model {{model}}")
bad = comm.bcast(bad, root=0) if rank == 0 else comm.bcast(None, root=0)
print("BAD" if bad else "OK", bad if rank == 0 else "", flush=True)
"""

@pytest.mark.parametrize("cache", [True, False], ids=["cache", "nocache"])
@pytest.mark.parametrize("np_", [2, 4, 6])
def test_rhs_variant_bytes_and_answers(mpi_python, np_, cache):
    proc = mpi_python(np_, PROGRAM.format(tests=TESTS, cache=cache), timeout=240,
                      what="the rhs variant's solves and residuals")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("OK") == np_, proc.stdout + proc.stderr
