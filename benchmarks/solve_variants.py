"""The two variants of the solve where bytes cost time: a 6-node emulated cluster with
shaped links (``scripts/cluster.sh``), one rank and one StarPU worker per node.

One factorization (sbc, 6 nodes), then ``--repeat`` alternating rounds of
``Factor.solve(B, variant="factor")`` (every task where its block of B lives: L's tiles
move) and ``variant="rhs"`` (L in place: blocks of B and partial sums move), each
round in the other order than the last; the median solve times (the records'
``time_s``, the slowest rank's) are compared, and every solve's measured bytes are
checked against its model per pair. ``--workers-only`` is the program the ranks run.

Needs root (network namespaces, tc). Prints the sizes, the model's bytes per variant,
the medians and their ratio.

Usage: python benchmarks/solve_variants.py [--n N] [--nb NB] [--nrhs K]
                                           [--bandwidth RATE] [--repeat R] [--json FILE]
"""
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

NODES = 6
RUN_TIMEOUT = 600


def ranks(n, nb, nrhs, repeat, out):
    """The program of each rank: factor, then alternating solves; rank 0 writes ``out``."""
    from mpi4py import MPI

    from starchol import DistributedMatrix, Session, cholesky
    from starchol.distributions import get_map
    from starchol.linalg import matrices

    comm = MPI.COMM_WORLD
    m = get_map("sbc", comm.Get_size())
    with Session(comm, workers=1, stats=True) as rt:
        spec = matrices.parse_matrix_spec("spd", n)
        a = DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: matrices.block(spec, n, 0, r0, r1, c0, c1), (n, n), nb, m)
        f = cholesky(a, m)
        b = DistributedMatrix.from_function(
            lambda r0, r1, c0, c1: matrices.rhs_block(0, r0, r1, c0, c1), (n, nrhs), nb, m,
            kind="rhs")
        times = {"factor": [], "rhs": []}
        match, solve_bytes = True, {}
        for r in range(repeat):
            for variant in (("factor", "rhs") if r % 2 == 0 else ("rhs", "factor")):
                comm.Barrier()
                f.solve(b, variant=variant)
                rec = f.solve_record
                times[variant].append(rec.time_s)
                solve_bytes[variant] = rec.bytes_measured_total
                match = match and rec.match is True
        if comm.Get_rank() == 0:
            Path(out).write_text(json.dumps({
                "times_s": times, "match": match, "factor_time_s": f.record.time_s,
                "factor_bytes": f.record.bytes_measured_total, "solve_bytes": solve_bytes}))


def main(argv=None):
    from emulated_cluster import ClusterUnavailable, EmulatedCluster

    from common import ArgumentParser, positive_int, temporary_folder, write_json

    from starchol.distributions import get_map
    from starchol.model.rhs_volume import solve_bytes_by_variant

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=positive_int, default=3000)
    ap.add_argument("--nb", type=positive_int, default=200)
    ap.add_argument("--nrhs", type=positive_int, default=1)
    ap.add_argument("--bandwidth", default="100mbit")
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_json()
    opts = ap.parse_args(argv)
    by = solve_bytes_by_variant(get_map("sbc", NODES), opts.n, opts.nb, opts.nrhs)
    print(f"solve_variants: {NODES} emulated nodes (sbc), 1 rank and 1 worker each, links "
          f"{opts.bandwidth} per node and direction; N = {opts.n}, NB = {opts.nb}, K = "
          f"{opts.nrhs}; {opts.repeat} alternating rounds, medians")
    for v, p in by.items():
        print(f"  model {v:<6}: {p.sum() / 1e6:.3f} MB in all, busiest link "
              f"{p.max() / 1e6:.3f} MB")
    with temporary_folder("solve_variants-") as tmp:
        env = dict(os.environ, STARPU_HOME=tmp, STARPU_SILENT="1")
        out = Path(tmp) / "out.json"
        try:
            cl = EmulatedCluster(NODES, bandwidth=opts.bandwidth)
            cl.up()
        except ClusterUnavailable as exc:
            sys.exit(f"solve_variants: no emulated cluster here: {exc}")
        try:
            res = cl.mpirun(NODES, [sys.executable, __file__, "--ranks", str(opts.n),
                                    str(opts.nb), str(opts.nrhs), str(opts.repeat), str(out)],
                            timeout=RUN_TIMEOUT, env=env)
            if res.returncode != 0:
                sys.exit(f"solve_variants: the run failed ({res.returncode}):\n{res.stderr}")
            doc = json.loads(out.read_text())
        finally:
            cl.down()
    med = {v: statistics.median(t) for v, t in doc["times_s"].items()}
    ratio = med["factor"] / med["rhs"]
    print(f"  factorization {doc['factor_time_s']:.2f} s")
    for v in ("factor", "rhs"):
        print(f"  solve {v:<6}: {doc['solve_bytes'][v] / 1e6:.3f} MB measured, median "
              f"{med[v] * 1e3:.1f} ms  (rounds: "
              + ", ".join(f"{t * 1e3:.1f}" for t in doc["times_s"][v]) + " ms)")
    print(f"  factor / rhs = {ratio:.2f}; bytes measured == model per pair in every solve: "
          f"{'yes' if doc['match'] else 'NO'}")
    if opts.json:
        write_json(opts.json, {"nodes": NODES, "n": opts.n, "nb": opts.nb,
                               "nrhs": opts.nrhs, "bandwidth": opts.bandwidth,
                               "times_s": doc["times_s"], "median_s": med, "ratio": ratio,
                               "match": doc["match"],
                               "model_bytes": {v: int(p.sum()) for v, p in by.items()}})
    return 0 if doc["match"] else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--ranks":
        n, nb, nrhs, repeat = map(int, sys.argv[2:6])
        ranks(n, nb, nrhs, repeat, sys.argv[6])
    else:
        from common import run_main

        run_main(main)
