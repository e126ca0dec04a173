"""Real runs of the sweep of tests/test_volume_sweep.py: ``mpirun -np P python
tests/volume_sweep_worker.py CASES.json OUT.json [--no-cache] [--workers=K]``. Collective.

One StarPU-MPI session (K CPU workers per rank, default 1; byte statistics on) runs
every case of CASES.json (a list of dicts: ``dist``, ``grid``, ``slices``, ``slice_block``,
``map_file``, ``n``, ``nb``, ``dtype``, ``nrhs`` (list of K, one solve each), ``flush``; ``dist``
``"stack"`` is a ``PeriodicStack`` of the case's ``stack``: a 2.5D map whose slices may
share nodes). For each factorization and each solve, rank 0 writes to OUT.json the bytes
StarPU-MPI measured per pair, the model's prediction (the record) and the oracle's count
(tests/volume_reference.py), plus the residual and the solve's error, so the test can
say which case disagreed.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from volume_reference import cholesky_bytes, rhs_solve_bytes, solve_bytes  # noqa: E402


def periodic_stack():
    """A TileMap subclass (defined once starchol is importable)."""
    from starchol.distributions import TileMap

    class PeriodicStack(TileMap):
        """c slices, slice s: tile (i, j) -> stack[s][i mod M][j mod N]; the slices may
        use the same nodes (what no built-in 2.5D map does)."""

        name = "stack"

        def __init__(self, stack, nodes):
            self.stack = np.asarray(stack, dtype=np.int64)
            self.slices = self.stack.shape[0]
            super().__init__(nodes)

        def _slice_owner_map(self, nt, s):
            _, m, n = self.stack.shape
            i = np.arange(nt)
            return self.stack[s][i[:, None] % m, i[None, :] % n]

    return PeriodicStack


def build(case, nodes):
    from starchol.distributions import get_map

    nt = -(-case["n"] // case["nb"])
    if case["dist"] == "stack":
        return periodic_stack()(case["stack"], nodes)
    if case["dist"] == "custom":
        return get_map("custom", nodes, path=case["map_file"])
    return get_map(case["dist"], nodes, grid=case.get("grid"),
                   slices=case.get("slices") or 1, nt=nt,
                   slice_block=case.get("slice_block"))


def spd_block(n, seed):
    from starchol.linalg import matrices

    spec = matrices.MatrixSpec("spd")
    return lambda r0, r1, c0, c1: matrices.block(spec, n, seed, r0, r1, c0, c1)


def rhs_block(n, k, seed):
    full = np.random.default_rng(seed).standard_normal((n, k))
    return lambda r0, r1, c0, c1: full[r0:r1, c0:c1]


def run_case(case, rt, comm):
    from starchol import DistributedMatrix, cholesky

    tile_map = build(case, comm.Get_size())
    n, nb = case["n"], case["nb"]
    dtype = np.dtype(case.get("dtype", "float64"))
    item = dtype.itemsize
    a = DistributedMatrix.from_function(spd_block(n, 3), (n, n), nb, tile_map, dtype=dtype,
                                        comm=comm)
    orig = a.copy()
    f = cholesky(a, tile_map, session=rt, flush=case.get("flush", True))
    out = {"case": case, "map": str(tile_map), "nt": f.L.nt,
           "factor": {"measured": f.record.bytes_measured_pairs,
                      "predicted": f.record.bytes_predicted_pairs,
                      "oracle": cholesky_bytes(tile_map, n, nb, rt.cache, itemsize=item)},
           "residual": f.residual(orig), "solves": []}
    for k in case.get("nrhs", []):
        b = DistributedMatrix.from_function(rhs_block(n, k, 5), (n, k), nb, tile_map,
                                            kind="rhs", dtype=dtype, comm=comm)
        x = f.solve(b).gather()
        rec = f.solve_record
        err = None
        if comm.Get_rank() == 0:
            dense = np.asarray(orig.gather(), dtype=np.float64)
            dense = np.tril(dense) + np.tril(dense, -1).T
            rhs = rhs_block(n, k, 5)(0, n, 0, k)
            err = float(np.linalg.norm(dense @ x - rhs) / np.linalg.norm(rhs))
        else:
            orig.gather()
        out["solves"].append({"nrhs": k, "measured": rec.bytes_measured_pairs,
                              "predicted": rec.bytes_predicted_pairs,
                              # the oracle of the variant that ran (auto: the model's)
                              "oracle": (rhs_solve_bytes if rec.extra["solve_variant"][
                                  "variant"] == "rhs" else solve_bytes)(
                                  tile_map, n, nb, k, rt.cache, itemsize=item),
                              "error": err})
    return out


def main(argv):
    from mpi4py import MPI

    from starchol import Session

    cases_path, out_path = argv[0], argv[1]
    cache = "--no-cache" not in argv
    workers = [int(a.split("=", 1)[1]) for a in argv if a.startswith("--workers=")] or [1]
    comm = MPI.COMM_WORLD
    with open(cases_path) as fh:
        cases = json.load(fh)
    results = []
    with Session(comm, workers=workers[-1], stats=True, cache=cache) as rt:
        for case in cases:
            results.append(run_case(case, rt, comm))
    if comm.Get_rank() == 0:
        tmp = out_path + ".part"
        with open(tmp, "w") as fh:
            json.dump({"nodes": comm.Get_size(), "cache": cache, "results": results}, fh)
        os.replace(tmp, out_path)


if __name__ == "__main__":
    main(sys.argv[1:])
