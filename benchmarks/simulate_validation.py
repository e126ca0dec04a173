"""The simulator against measured runs, each case simulated in the same run as its
measurement (medians of alternating rounds).

1. One node, 2 workers, N = 4096 and 8192 (NB = 512): ``starchol run`` (one rank) against
   ``simulate_cholesky`` with this machine's kernels calibrated in the same round, just
   before the measured run (``starchol calibrate``'s default: a traced factorization,
   N = 8192 for NB = 512, with the runtime's kernels and 2 workers). Bound: within 15%.
2. Six emulated nodes (``scripts/cluster.sh`` through ``scripts/emulated_cluster.py``),
   one rank and one worker each, ``benchmarks/comm_bound.py``'s sizes (N = 3072,
   NB = 128) and maps (sbc, the best 2dbc grid, sbc25d c = 2), at each ``--bandwidth``
   (10mbit, 100mbit). Kernels: calibrated at the start by a traced 2-rank 2.5D run with
   one worker per rank (its graph has ADD tasks; two ranks at once on the 2 cores: the
   emulated runs keep their workers idle most of the time, waiting for tiles). Network:
   measured on the shaped links after each shaping (``benchmarks/net_probe.py`` between
   two nodes: the bandwidth a burst of tiles gets, TCP/IP and MPI included, and half
   the ping-pong time as the one-way latency, split over the two links a transfer
   crosses). Sends: ``--sends-in-flight`` (default 1, what ``starchol run`` gives
   StarPU-MPI: a node's link moves one tile at a time, highest priority first; the
   tables also show StarPU-MPI's own default, 10 sends sharing the link). Bounds: each map within
   20%, time(2dbc)/time(sbc) within 10% of the measured ratio.

Prints every figure and the bounds met or not; ``--docs FILE`` writes the tables
(Markdown). Needs root for part 2 (network namespaces); ``--no-cluster`` skips it.

Usage: python benchmarks/simulate_validation.py [--repeat R] [--bandwidth 10mbit,100mbit]
                                                [--no-cluster] [--no-single] [--docs FILE]
                                                [--cluster-name NAME] [--subnet A.B.C]
                                                [--sends-in-flight K]
"""
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from comm_bound import NODES, candidates, run_once, starchol_exe  # noqa: E402
from common import (ArgumentParser, nonnegative_int, positive_int, run_main,  # noqa: E402
                    temporary_folder)
from emulated_cluster import ClusterUnavailable, EmulatedCluster  # noqa: E402

from starchol.distributions import get_map  # noqa: E402
from starchol.jobs.traced_run import runtime_calibration  # noqa: E402
from starchol.model.platform import Platform, node_from_dict  # noqa: E402
from starchol.linalg.simulate import (SENDS_IN_FLIGHT, STARPU_SENDS_IN_FLIGHT,  # noqa: E402
                                      simulate_cholesky)

SINGLE = ((4096, 512), (8192, 512))
CLUSTER_N, CLUSTER_NB = 3072, 128
#: the send model the bounds are checked with (the tables also show StarPU-MPI's default)
VALIDATION_SENDS = SENDS_IN_FLIGHT


def single_node(repeat, env):
    """Part 1: [(N, measured median, simulated)]."""
    rows = []
    for n, nb in SINGLE:
        measured, simulated = [], []
        with temporary_folder("simval-") as tmp:
            for rnd in range(repeat):
                node = node_from_dict(runtime_calibration([nb], ["float64"], workers=2))
                plat = Platform(node=node, nodes=1, bandwidth=1e12)
                out = Path(tmp) / f"run{rnd}.json"
                cmd = [*starchol_exe(), "run", "--dist", "2dbc", "--n", str(n), "--nb",
                       str(nb), "--workers", "2", "--quiet", "--json", str(out)]
                subprocess.run(cmd, check=True, env=env, timeout=900,
                               capture_output=True)
                measured.append(json.loads(out.read_text())["time_s"])
                simulated.append(simulate_cholesky(get_map("2dbc", 1), n, nb,
                                                   plat).makespan_s)
                print(f"  1 node N = {n}: measured {measured[-1]:.3f} s, simulated "
                      f"{simulated[-1]:.3f} s", flush=True)
        rows.append((n, statistics.median(measured), statistics.median(simulated)))
    return rows


def probe_network(cl, env):
    """The shaped links as measured now (benchmarks/net_probe.py between node0 and
    node1): ``{"bandwidth_bytes_per_s", "latency_s", ...}``."""
    res = cl.mpirun(2, [sys.executable, str(ROOT / "benchmarks" / "net_probe.py"),
                        "--bytes", str(CLUSTER_NB * CLUSTER_NB * 8)], timeout=300, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"net_probe failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def cluster(repeat, bandwidths, env, name, subnet, sends):
    """Part 2: {bandwidth: [(label, measured median, simulated, simulated with
    StarPU-MPI's default sends)]}, and the network figures per bandwidth."""
    maps = candidates(CLUSTER_N, CLUSTER_NB)
    node = node_from_dict(runtime_calibration([CLUSTER_NB], ["float64"], workers=1, ranks=2))
    print(f"  kernels, GFlop/s per worker (NB = {CLUSTER_NB}): "
          + ", ".join(f"{k} {v:.2f}" for k, v in node.gflops["float64"].items()), flush=True)
    out, nets = {}, {}
    cl = EmulatedCluster(NODES, bandwidth=bandwidths[0], name=name, subnet=subnet)
    cl.up()
    try:
        with temporary_folder("simval-") as tmp:
            run_once(cl, ["--dist", "sbc"], 480, 96, env, Path(tmp) / "warmup.json")
            for bw in bandwidths:
                cl.shape(bandwidth=bw)
                net = nets[bw] = probe_network(cl, env)
                print(f"  {bw}: measured {net['bandwidth_bytes_per_s'] / 1e6:.3f} MB/s, "
                      f"latency {net['latency_s'] * 1e3:.2f} ms", flush=True)
                # a transfer crosses two node links (sender's up, receiver's down), each
                # with the platform's latency: half the measured one-way latency each
                plat = Platform(node=node, nodes=NODES, bandwidth=net["bandwidth_bytes_per_s"],
                                latency=net["latency_s"] / 2)
                times = {label: [] for label, *_ in maps}
                sims = {label: [] for label, *_ in maps}
                sims10 = {label: [] for label, *_ in maps}
                for rnd in range(repeat):
                    for label, args, m, _ in maps:
                        doc = run_once(cl, args, CLUSTER_N, CLUSTER_NB, env,
                                       Path(tmp) / f"{bw}-{rnd}-{label.replace(' ', '_').replace('=', '')}.json")
                        times[label].append(doc["time_s"])
                        sims[label].append(simulate_cholesky(
                            m, CLUSTER_N, CLUSTER_NB, plat, sends_in_flight=sends).makespan_s)
                        sims10[label].append(simulate_cholesky(
                            m, CLUSTER_N, CLUSTER_NB, plat,
                            sends_in_flight=STARPU_SENDS_IN_FLIGHT).makespan_s)
                        print(f"  {bw} round {rnd + 1}: {label:<11} measured "
                              f"{times[label][-1]:.2f} s, simulated {sims[label][-1]:.2f} s "
                              f"({STARPU_SENDS_IN_FLIGHT} sends in flight: {sims10[label][-1]:.2f} s)",
                              flush=True)
                out[bw] = [(label, statistics.median(times[label]),
                            statistics.median(sims[label]), statistics.median(sims10[label]))
                           for label, *_ in maps]
    finally:
        cl.down()
    return out, nets


def tables(single, clustered, nets=None, sends=VALIDATION_SENDS):
    lines = []
    if single:
        lines += ["| case | measured (s) | simulated (s) | simulated / measured | within 15% |",
                  "|---|---|---|---|---|"]
        for n, meas, sim in single:
            lines.append(f"| 1 node, 2 workers, N = {n}, NB = 512 | {meas:.3f} | {sim:.3f} | "
                         f"{sim / meas:.3f} | {'yes' if abs(sim / meas - 1) <= 0.15 else 'no'} |")
    for bw, rows in clustered.items():
        net = (nets or {}).get(bw)
        where = (f" (measured link: {net['bandwidth_bytes_per_s'] / 1e6:.3f} MB/s, latency "
                 f"{net['latency_s'] * 1e3:.2f} ms)") if net else ""
        lines += ["", f"6 emulated nodes at {bw}, N = {CLUSTER_N}, NB = {CLUSTER_NB}{where}, "
                  f"simulated with {sends} send(s) in flight per node:", "",
                  "| map | measured (s) | simulated (s) | simulated / measured | within 20% "
                  f"| simulated, {STARPU_SENDS_IN_FLIGHT} sends in flight (s) |",
                  "|---|---|---|---|---|---|"]
        for label, meas, sim, sim10 in rows:
            lines.append(f"| {label} | {meas:.2f} | {sim:.2f} | {sim / meas:.3f} | "
                         f"{'yes' if abs(sim / meas - 1) <= 0.20 else 'no'} | {sim10:.2f} |")
        (_, ms, ss, s10), (lbl, m2, s2, s210) = rows[0], rows[1]
        ratio_m, ratio_s = m2 / ms, s2 / ss
        lines.append(f"| time({lbl}) / time(sbc) | {ratio_m:.3f} | {ratio_s:.3f} | "
                     f"{ratio_s / ratio_m:.3f} | within 10%: "
                     f"{'yes' if abs(ratio_s / ratio_m - 1) <= 0.10 else 'no'} | "
                     f"{s210 / s10:.3f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--bandwidth", default="10mbit,100mbit")
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument("--no-single", action="store_true")
    ap.add_argument("--docs", metavar="FILE")
    ap.add_argument("--cluster-name", default="sim")
    ap.add_argument("--subnet", default="10.232.0")
    ap.add_argument("--sends-in-flight", type=nonnegative_int, default=VALIDATION_SENDS,
                    metavar="K", help=f"the simulated sends per node for the bounds "
                                      f"(default {VALIDATION_SENDS}; 0: no limit)")
    opts = ap.parse_args(argv)
    t0 = time.monotonic()
    with temporary_folder("simval-starpu-") as home:
        env = dict(os.environ, STARPU_HOME=home, STARPU_SILENT="1",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        single = [] if opts.no_single else single_node(opts.repeat, env)
        clustered, nets = {}, {}
        if not opts.no_cluster:
            try:
                clustered, nets = cluster(
                    opts.repeat, [b.strip() for b in opts.bandwidth.split(",")], env,
                    opts.cluster_name, opts.subnet, opts.sends_in_flight)
            except ClusterUnavailable as exc:
                print(f"simulate_validation: no emulated cluster here: {exc}")
    text = tables(single, clustered, nets, opts.sends_in_flight)
    print(text)
    print(f"({time.monotonic() - t0:.0f} s)")
    if opts.docs:
        Path(opts.docs).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
