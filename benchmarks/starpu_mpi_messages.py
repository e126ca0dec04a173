"""StarPU-MPI's cost per message and its throughput, one and several sends in flight.

Builds ``benchmarks/starpu_mpi_messages.c`` against the project's StarPU (the flags
``build_flags.flags()`` gives the extensions) and runs it under ``mpirun -np 2`` for each
message size and each ``STARPU_MPI_NDETACHED_SEND`` (sends StarPU-MPI keeps in flight):
rank 0 posts COUNT detached sends at once, rank 1 the matching detached receives, each
round timed on rank 1 from a barrier to its last message. Prints per setting the median
round, the time per message (round / COUNT) and the bytes per second.

What it measures is StarPU-MPI's own path (its one communication thread posting,
testing and completing each request, the envelope before the data) on whatever MPI
transport the two ranks use: on one machine Open MPI's shared memory, on the emulated
cluster (``--cluster RATE``: two nodes of ``scripts/cluster.sh``, links shaped to RATE
or ``none``, docs/cluster.md) TCP between network namespaces. The figures are what
docs/simulation.md compares the runtime description's per-message costs with.

Usage: python benchmarks/starpu_mpi_messages.py [--sizes 8,2000000] [--in-flight 1,10]
           [--count-bytes 200000000] [--max-count 1000] [--rounds 5] [--cluster RATE]
           [--json FILE]
"""
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import build_flags  # noqa: E402  (the project's StarPU flags)
from common import (ArgumentParser, int_list, positive_int, run_main,  # noqa: E402
                    temporary_folder, write_json)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
from emulated_cluster import ClusterError, ClusterUnavailable, EmulatedCluster  # noqa: E402
from starchol.jobs.traced_run import run_tracked  # noqa: E402

SOURCE = os.path.join(HERE, "starpu_mpi_messages.c")


def build(work, source=SOURCE, name="starpu_mpi_messages"):
    """Compile ``source`` (a C program on StarPU-MPI, with ``starpu_mpi_bench.h`` beside
    it) into ``work/name``; return its path."""
    inc, libdirs, libnames, _ccx, lx = build_flags.flags()
    exe = os.path.join(work, name)
    cmd = (["cc", "-O2", "-o", exe, source, f"-I{HERE}"] + [f"-I{d}" for d in inc]
           + [f"-L{d}" for d in libdirs] + [f"-Wl,-rpath,{d}" for d in libdirs]
           + [f"-l{n}" for n in libnames] + list(lx))
    subprocess.run(cmd, check=True)
    return exe


def bench_env(**more):
    """The environment of the two ranks: one StarPU worker each, nothing bound, no trace,
    quiet; ``more``: further variables."""
    env = dict(os.environ, STARPU_NCPU="1", STARPU_SILENT="1", STARPU_FXT_TRACE="0",
               STARPU_MPI_NOBIND="1", STARPU_WORKERS_NOBIND="1", **more)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run_two_ranks(argv, env, timeout, cluster=None):
    """``mpirun -np 2 ARGV`` -> its stdout; SystemExit with its stderr's end if it fails
    or outlives ``timeout``. ``cluster``: an up :class:`EmulatedCluster` (rank i on node
    i; it kills everything on timeout); None: two local ranks, whose mpirun ends with
    this process (:func:`starchol.jobs.traced_run.run_tracked`)."""
    name = os.path.basename(argv[0])
    try:
        if cluster is None:
            cmd = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "-np", "2", *argv]
            p = run_tracked(cmd, env, timeout)
        else:
            cmd = ["mpirun", "-np", "2", *argv]
            p = cluster.mpirun(2, argv, timeout=timeout, env=env)
    except (subprocess.TimeoutExpired, ClusterError):
        raise SystemExit(f"{name}: {' '.join(cmd)} took more than {timeout} s; "
                         f"stopped") from None
    if p.returncode != 0:
        raise SystemExit(f"{name}: {' '.join(cmd)} failed (exit {p.returncode}):\n"
                         f"{p.stderr[-2000:]}")
    return p.stdout


def run_setting(exe, size, count, rounds, in_flight, cluster, timeout):
    """The rounds' times (s) of one setting, from rank 1's lines (``cluster``: see
    :func:`run_two_ranks`)."""
    out = run_two_ranks([exe, str(size), str(count), str(rounds)],
                        bench_env(STARPU_MPI_NDETACHED_SEND=str(in_flight)), timeout, cluster)
    times = [float(ln.split()[3]) for ln in out.splitlines() if ln.startswith("round ")]
    if len(times) != rounds:
        raise SystemExit(f"starpu_mpi_messages: expected {rounds} rounds, got:\n{out}")
    return times


def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=lambda t: int_list(t, low=1), default=[8, 2000000],
                    help="message sizes in bytes (default 8 and 2,000,000: a tile of "
                         "NB = 500 in float64)")
    ap.add_argument("--in-flight", type=lambda t: int_list(t, low=1), default=[1, 10],
                    help="STARPU_MPI_NDETACHED_SEND values (default 1, starchol's, and "
                         "10, StarPU-MPI's default)")
    ap.add_argument("--count-bytes", type=positive_int, default=200_000_000,
                    help="bytes per round: COUNT = min(max-count, this / size) messages")
    ap.add_argument("--max-count", type=positive_int, default=1000,
                    help="most messages per round (default 1000)")
    ap.add_argument("--rounds", type=positive_int, default=5, help="rounds per setting")
    ap.add_argument("--cluster", metavar="RATE",
                    help="run on two nodes of the emulated cluster, links shaped to RATE "
                         "(tc's units, e.g. 10gbit; none: unshaped) instead of two local "
                         "ranks")
    ap.add_json("every setting's rounds")
    args = ap.parse_args(argv)
    rows = []
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(temporary_folder("starpu_mpi_messages."))
        os.chmod(work, 0o755)                # the nodes' ranks run the executable too
        exe = build(work)
        cluster = None
        if args.cluster:
            try:
                cluster = stack.enter_context(EmulatedCluster(2, bandwidth=args.cluster))
            except ClusterUnavailable as exc:
                sys.exit(f"starpu_mpi_messages: no emulated cluster here: {exc}")
        where = f"2 emulated nodes, links {args.cluster}" if cluster else "2 local ranks"
        print(f"StarPU-MPI, {where}:")
        print("| bytes | sends in flight | messages per round | median round (ms) | "
              "per message (us) | MB/s |")
        print("|---|---|---|---|---|---|")
        for size in args.sizes:
            count = max(1, min(args.max_count, int(args.count_bytes // size)))
            for k in args.in_flight:
                t0 = time.perf_counter()
                times = run_setting(exe, size, count, args.rounds, k, cluster,
                                    timeout=max(120, 60 * args.rounds))
                med = statistics.median(times)
                rows.append({"where": where, "bytes": size, "sends_in_flight": k, "count": count,
                             "rounds_s": times, "median_s": med,
                             "per_message_s": med / count,
                             "bytes_per_s": size * count / med,
                             "wall_s": time.perf_counter() - t0})
                print(f"| {size} | {k} | {count} | {med * 1e3:.2f} | "
                      f"{med / count * 1e6:.1f} | {size * count / med / 1e6:.1f} |",
                      flush=True)
    if args.json:
        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    run_main(main)
