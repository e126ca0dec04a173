"""The SC22 paper's experiment in simulation: SBC, 2.5D and 2DBC on 28 to 210 nodes.

36-core CPU nodes (``examples/nodes/cpu-36core.json``: 35 workers, GEMM 62 GFlop/s per
worker), one link per node at ``--bandwidth`` (100 Gbit/s and 25 Gbit/s by default), a
fixed number of tiles per node (N grows with P: NT = round(sqrt(2 P T)), T tiles of the
2D matrix per node), NB = 500. Maps per P (``starchol.linalg.simulate.sweep_maps``): the
most square 2DBC grid, SBC, sym, aplane and pplane, sbc25d and sym25d with c = 2 and 3,
where they exist for P
(2.5D maps hold c copies: memory per node c times the 2D one, assumed to fit).

Prints one table per bandwidth (time, GFlop/s, time / time(2dbc), bytes, busiest busy
fraction) and, with ``--docs DIR``, writes ``DIR/simulation_paper.md`` (the tables) and
``DIR/simulation_paper.png`` (time and GFlop/s against P). ``--json FILE`` keeps every row.

Usage: python benchmarks/simulate_paper.py [--nodes 28,66,120,210] [--tiles-per-node T]
                                           [--bandwidth 100Gbit,25Gbit] [--sends-in-flight K]
                                           [--docs DIR] [--json FILE]
"""
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (ArgumentParser, int_list, nonnegative_int, positive_int,  # noqa: E402
                    run_main, write_json)

from starchol.errors import UsageError  # noqa: E402
from starchol.model.platform import Platform, load_node, parse_bandwidth
from starchol.linalg.simulate import (SENDS_IN_FLIGHT, STARPU_SENDS_IN_FLIGHT,
                                      simulate_cholesky, sweep_maps)
from starchol.units import format_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = os.path.join(ROOT, "examples", "nodes", "cpu-36core.json")
NB = 500


def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=lambda t: int_list(t, low=2), default=[28, 66, 120, 210],
                    help="node counts P, comma-separated (default 28,66,120,210)")
    ap.add_argument("--tiles-per-node", type=positive_int, default=30,
                    help="tiles of the 2D matrix per node (default 30)")
    ap.add_argument("--bandwidth", default="100Gbit,25Gbit",
                    help="link bandwidths, comma-separated (default 100Gbit,25Gbit)")
    ap.add_argument("--sends-in-flight", type=nonnegative_int, default=SENDS_IN_FLIGHT,
                    metavar="K", help=f"sends a node keeps in flight (default "
                                      f"{SENDS_IN_FLIGHT}, as starchol run; docs/simulation.md's "
                                      f"tables used StarPU's {STARPU_SENDS_IN_FLIGHT}; 0: no limit)")
    ap.add_argument("--docs", metavar="DIR", help="write the tables and figures into DIR")
    ap.add_json("every simulated row")
    args = ap.parse_args(argv)
    if args.docs and not os.path.isdir(args.docs):
        ap.fail(f"--docs {args.docs}: folder does not exist")
    try:
        bandwidths = [(text, parse_bandwidth(text)) for text in args.bandwidth.split(",")]
    except UsageError as exc:
        ap.fail(f"--bandwidth {args.bandwidth}: {exc}")
    node = load_node(NODE)
    rows = []
    for bw_text, bw in bandwidths:
        for p in args.nodes:
            nt = round(math.sqrt(2 * p * args.tiles_per_node))
            plat = Platform(node=node, nodes=p, bandwidth=bw, latency=node.latency or 0.0)
            for label, m in sweep_maps(p, nt):
                t0 = time.perf_counter()
                r = simulate_cholesky(m, nt * NB, NB, plat,
                                      sends_in_flight=args.sends_in_flight)
                rows.append({"bandwidth": bw_text, "nodes": p, "nt": nt, "n": nt * NB,
                             "map": str(m), "family": label, "makespan_s": r.makespan_s,
                             "gflops": r.gflops, "bytes": r.bytes,
                             "busy_max": float(r.busy.max()),
                             "busy_mean": float(r.busy.mean()),
                             "critical_path_s": r.critical_path_s, "tasks": r.tasks,
                             "wall_s": time.perf_counter() - t0})
                print(json.dumps(rows[-1]), flush=True)
    text = tables(rows)
    print(text)
    if args.json:
        write_json(args.json, rows)
    if args.docs:
        from starchol.jobs.simulate_figures import sweep_png

        with open(os.path.join(args.docs, "simulation_paper.md"), "w") as f:
            f.write(text + "\n")
        for bw_text, _ in bandwidths:
            sweep_png([r for r in rows if r["bandwidth"] == bw_text],
                      os.path.join(args.docs, f"simulation_paper_{bw_text}.png"),
                      f"simulated Cholesky, 36-core nodes, {bw_text} links, "
                      f"{args.tiles_per_node} tiles of 500 x 500 per node")
    return 0


def tables(rows):
    out = []
    for bw in dict.fromkeys(r["bandwidth"] for r in rows):
        out += [f"\n{bw} links:\n",
                "| P | N | map | time (s) | GFlop/s | time / time(2dbc) | bytes | busy max / mean |",
                "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r["bandwidth"] != bw:
                continue
            ref = next(x for x in rows if x["bandwidth"] == bw and x["nodes"] == r["nodes"]
                       and x["family"] == "2dbc")
            out.append(f"| {r['nodes']} | {r['n']} | {r['map']} | {r['makespan_s']:.2f} | "
                       f"{r['gflops']:.0f} | {r['makespan_s'] / ref['makespan_s']:.3f} | "
                       f"{format_bytes(r['bytes'])} | {r['busy_max']:.2f} / "
                       f"{r['busy_mean']:.2f} |")
    return "\n".join(out)


if __name__ == "__main__":
    run_main(main)
