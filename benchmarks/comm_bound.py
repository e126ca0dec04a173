"""SBC against 2D block-cyclic where bytes cost time: a 6-node emulated cluster with
shaped links (``scripts/cluster.sh``), one rank and one StarPU worker per node.

For each bandwidth (a low one where communication dominates, a high one where it does
not), the maps run in turn, ``--repeat`` times, alternating (sbc, 2dbc, sbc25d, then
the next round); the median times are compared. The model's prediction of
time(2dbc) / time(sbc) is the ratio of the maps' busiest-link bytes: the largest, over
nodes, of max(bytes sent, bytes received) (full-duplex links of equal bandwidth; see
:mod:`starchol.model.link_load`). The best 2dbc grid on 6 nodes is the one with the
smaller busiest-link bytes (3x2 or 2x3).

Needs root (network namespaces, tc). Prints the chosen sizes, a table per bandwidth and
the agreement (measured / predicted). Every run's JSON document is kept
(``--keep DIR``, one folder per bandwidth) for ``starchol report DIR/10mbit/*.json -o report``,
whose "Time against bytes" table shows the same comparison.

``--slice-block B[,B...]`` runs sbc25d once per b (iterations per slice turn, see
``starchol run --slice-block``), each as its own map in the rounds (default: the maps'
default b).

Usage: python benchmarks/comm_bound.py [--n N] [--nb NB] [--bandwidth LOW,HIGH]
                                       [--repeat R] [--keep DIR] [--json FILE]
                                       [--slice-block B[,B...]] [--no-2dbc | --no-25d]
                                       [--cluster-name NAME] [--subnet A.B.C]

Arguments are checked before the cluster starts, ``--json`` is written whole or not at
all, Ctrl-C stops with exit status 130 and takes the cluster down (benchmarks/common.py).
"""
import json
import os
from argparse import ArgumentTypeError
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from emulated_cluster import ClusterUnavailable, EmulatedCluster  # noqa: E402

from common import (ArgumentParser, positive_int, run_main, temporary_folder,  # noqa: E402
                    write_json)

from starchol.distributions import get_map  # noqa: E402
from starchol.model.link_load import busiest_link  # noqa: E402
from starchol.model.volume import transfer_pairs_bytes  # noqa: E402

NODES = 6
#: N = 3072 in NB = 128 tiles (NT = 24): the 2dbc/sbc busiest-link ratio is 1.33 at this
#: NT (it grows with NT towards ~1.4), the flops (N^3/3 = 9.7 GFlop) take about 0.5 s
#: on 2 cores, and at 10 mbit/s the busiest link of sbc needs ~12 s, of 2dbc ~16 s
DEFAULT_N, DEFAULT_NB = 3072, 128
DEFAULT_BANDWIDTHS = "10mbit,1gbit"
#: seconds one run may take before the benchmark gives up
RUN_TIMEOUT = 600


def starchol_exe():
    exe = Path(sys.executable).with_name("starchol")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "starchol"]


def candidates(n, nb, blocks=(None,)):
    """[(label, run args, map, busiest link)] for sbc, the best 2dbc grid and sbc25d c=2
    (one per b in ``blocks``; None: the default b, labelled without it)."""
    out = []
    grids = []
    for grid in ("3x2", "2x3"):
        m = get_map("2dbc", NODES, grid=grid)
        grids.append((busiest_link(transfer_pairs_bytes(m, n, nb))["bytes"], grid, m))
    _, grid, m2d = min(grids)
    sliced = [("sbc25d c=2" + ("" if b is None else f" b={b}"),
               ["--dist", "sbc25d", "--slices", "2"]
               + ([] if b is None else ["--slice-block", str(b)]),
               get_map("sbc25d", NODES, slices=2, slice_block=b)) for b in blocks]
    for label, args, m in (
            ("sbc", ["--dist", "sbc"], get_map("sbc", NODES)),
            (f"2dbc {grid}", ["--dist", "2dbc", "--grid", grid], m2d), *sliced):
        out.append((label, args, m, busiest_link(transfer_pairs_bytes(m, n, nb))))
    return out


def block_list(text):
    """``--slice-block``'s ``B[,B...]``: distinct integers >= 1, in order."""
    try:
        blocks = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        blocks = []
    if not blocks or min(blocks) < 1 or len(set(blocks)) != len(blocks):
        raise ArgumentTypeError(f"{text!r} is not a list of distinct integers >= 1 "
                                f"(e.g. 1,4)")
    return tuple(blocks)


def run_once(cl, args, n, nb, env, json_path):
    cmd = [*starchol_exe(), "run", *args, "--n", str(n), "--nb", str(nb), "--workers", "1",
           "--quiet", "--json", str(json_path)]
    res = cl.mpirun(NODES, cmd, timeout=RUN_TIMEOUT, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"run failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr}")
    doc = json.loads(Path(json_path).read_text())
    if not doc["match"]:
        raise RuntimeError(f"measured bytes differ from the model: {' '.join(cmd)}")
    return doc


def fmt_mb(b):
    return f"{b / 1e6:.1f}"


def main(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=positive_int, default=DEFAULT_N,
                    help=f"matrix order (default {DEFAULT_N})")
    ap.add_argument("--nb", type=positive_int, default=DEFAULT_NB,
                    help=f"tile size (default {DEFAULT_NB})")
    ap.add_argument("--bandwidth", default=DEFAULT_BANDWIDTHS, metavar="LOW,HIGH",
                    help=f"tc rates per node and direction (default {DEFAULT_BANDWIDTHS})")
    ap.add_argument("--latency", default="none", help="one-way delay (needs sch_netem)")
    ap.add_argument("--repeat", type=positive_int, default=3,
                    help="rounds per bandwidth (default 3)")
    ap.add_argument("--no-25d", action="store_true", help="leave out sbc25d")
    ap.add_argument("--no-2dbc", action="store_true",
                    help="leave out the 2dbc grid (sbc against sbc25d only)")
    ap.add_argument("--slice-block", metavar="B[,B...]", type=block_list, default=(None,),
                    help="sbc25d's iterations per slice turn b, one sbc25d map per b "
                         "(default: the maps' default)")
    ap.add_argument("--keep", metavar="DIR", help="keep every run's JSON document in DIR")
    ap.add_argument("--cluster-name", metavar="NAME",
                    help="the emulated cluster's name (default: a unique one)")
    ap.add_argument("--subnet", metavar="A.B.C",
                    help="the emulated nodes' /24 (default: scripts/cluster.sh's)")
    ap.add_json("the results")
    opts = ap.parse_args(argv)
    ap.check_runtime(n=opts.n, nb=opts.nb)
    bandwidths = [b.strip() for b in opts.bandwidth.split(",") if b.strip()]
    if not bandwidths:
        ap.fail(f"--bandwidth {opts.bandwidth!r} names no rate (e.g. 10mbit,1gbit)")
    if opts.keep and os.path.exists(opts.keep) and not os.path.isdir(opts.keep):
        ap.fail(f"--keep {opts.keep} exists and is not a folder")
    if os.geteuid() != 0:
        sys.exit("comm_bound: needs root (network namespaces and tc); run it as root")
    if opts.keep:
        stale = sorted(Path(opts.keep).glob("*/*.json"))
        if stale:
            sys.exit(f"comm_bound: --keep {opts.keep} already holds run documents "
                     f"({stale[0]}, ...): `starchol report {opts.keep}/BANDWIDTH/*.json` "
                     f"would mix them with this run's; give a new or empty folder")
    maps = candidates(opts.n, opts.nb, opts.slice_block)
    if opts.no_25d and opts.no_2dbc:
        ap.fail("--no-25d and --no-2dbc leave sbc alone: nothing to compare it with")
    if opts.no_25d:
        maps = maps[:2]
    if opts.no_2dbc:
        maps = [maps[0], *maps[2:]]
    nt = -(-opts.n // opts.nb)
    print(f"comm_bound: {NODES} emulated nodes, 1 rank and 1 StarPU worker each; "
          f"N = {opts.n}, NB = {opts.nb} (NT = {nt}), links shaped per node and direction "
          f"at {', '.join(bandwidths)}, latency {opts.latency}, {opts.repeat} alternating "
          f"rounds, medians")
    print("model, busiest link per map (max over nodes of max(sent, received)):")
    for label, _, m, busy in maps:
        print(f"  {label:<15} node{busy['node']}: sent {fmt_mb(busy['sent'])} MB, received "
              f"{fmt_mb(busy['received'])} MB -> {fmt_mb(busy['bytes'])} MB")
    keep = Path(opts.keep) if opts.keep else Path(tempfile.mkdtemp(prefix="comm_bound-"))
    keep.mkdir(parents=True, exist_ok=True)
    results = {"nodes": NODES, "n": opts.n, "nb": opts.nb, "nt": nt, "repeat": opts.repeat,
               "latency": opts.latency, "bandwidths": {}}
    with temporary_folder("comm_bound-starpu-") as home:
        env = dict(os.environ, STARPU_HOME=home, STARPU_SILENT="1")
        try:
            cl = EmulatedCluster(NODES, bandwidth=bandwidths[0], latency=opts.latency,
                                 name=opts.cluster_name, subnet=opts.subnet)
            cl.up()
        except ClusterUnavailable as exc:
            sys.exit(f"comm_bound: no emulated cluster here: {exc}")
        try:
            # first starts calibrate StarPU's bus model per node: not timed
            run_once(cl, ["--dist", "sbc"], 480, 96, env, keep / "warmup.json")
            for bw in bandwidths:
                cl.shape(bandwidth=bw)
                times = {label: [] for label, *_ in maps}
                for rnd in range(opts.repeat):
                    for label, args, _, _ in maps:
                        name = f"{label.replace(' ', '_').replace('=', '')}-{rnd + 1}.json"
                        t0 = time.monotonic()
                        (keep / bw).mkdir(exist_ok=True)
                        doc = run_once(cl, args, opts.n, opts.nb, env, keep / bw / name)
                        times[label].append(doc["time_s"])
                        print(f"  {bw} round {rnd + 1}: {label:<15} {doc['time_s']:7.2f} s "
                              f"(wall {time.monotonic() - t0:.1f} s)", flush=True)
                results["bandwidths"][bw] = report(bw, maps, times)
        finally:
            cl.down()
    (keep / "warmup.json").unlink(missing_ok=True)
    print(f"run documents in {keep}/BANDWIDTH/ (compare, e.g.: starchol report "
          f"{keep}/{bandwidths[0]}/*.json -o report)")
    if opts.json:
        write_json(opts.json, results)
    return 0


def report(bw, maps, times):
    """Print the table of one bandwidth; its numbers as a dict."""
    sbc_label = maps[0][0]
    sbc_busy = maps[0][3]["bytes"]
    med = {label: statistics.median(ts) for label, ts in times.items()}
    print(f"\nbandwidth {bw}: median times, and time(other) / time(sbc) against the "
          f"model's busiest-link bytes ratio")
    head = f"  {'map':<15} {'median s':>9} {'runs (s)':<26} {'busiest MB':>10} " \
           f"{'measured':>9} {'predicted':>9} {'agreement':>9}"
    print(head)
    rows = {}
    for label, _, _, busy in maps:
        measured = med[label] / med[sbc_label]
        predicted = busy["bytes"] / sbc_busy
        runs = ", ".join(f"{t:.2f}" for t in times[label])
        if label == sbc_label:
            cells = f"{'1':>9} {'1':>9} {'':>9}"
        else:
            cells = f"{measured:9.3f} {predicted:9.3f} {measured / predicted:9.3f}"
        print(f"  {label:<15} {med[label]:9.2f} {runs:<26} {fmt_mb(busy['bytes']):>10} {cells}")
        rows[label] = {"median_s": med[label], "times_s": times[label],
                       "busiest_bytes": busy["bytes"], "measured_ratio": measured,
                       "predicted_ratio": predicted}
    for label in rows:
        if label.startswith("sbc25d"):
            r = rows[label]["measured_ratio"]
            print(f"  => time({label}) / time(sbc) = {r:.3f}, busiest-link model "
                  f"{rows[label]['predicted_ratio']:.3f}")
    two = [label for label, *_ in maps if label.startswith("2dbc")]
    if not two:
        return rows
    two = two[0]
    m, p = rows[two]["measured_ratio"], rows[two]["predicted_ratio"]
    print(f"  => time({two}) / time(sbc) = {m:.3f}, model {p:.3f}: measured/predicted "
          f"{m / p:.3f} ({'within' if abs(m / p - 1) <= 0.15 else 'more than'} 15%"
          f"{'' if abs(m / p - 1) <= 0.15 else ' apart: communication does not dominate'})")
    return rows


if __name__ == "__main__":
    run_main(main)
