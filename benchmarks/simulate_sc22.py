"""The SC22 SBC paper's measured runs against `starchol simulate`: paper vs simulated.

The paper (Beaumont, Duchon, Eyraud-Dubois, Langou, Verite, SC22, HAL hal-03768910)
measured Chameleon 1.1 over StarPU 1.3.8 on PlaFRIM "bora" nodes (34 CPU workers,
100 Gb/s Omni-Path), NB = 500. Its training points (``benchmarks/data/sc22_training.csv``:
Fig. 7, one node against NB; Fig. 10a, GFlop/s per node of 2DBC 5x3, 2DBC 4x4 and SBC
r = 6) are simulated with the platform ``examples/nodes/plafrim-bora.json`` and the
runtime ``examples/runtimes/chameleon-starpu-1.3.json`` (docs/simulation.md, "The SC22
runs"), and printed side by side: GFlop/s per node (flops N^3/3 over time x P), the
simulated over the measured, and SBC/2DBC (each 2DBC grid) measured and simulated.
``--held-out`` also simulates the paper's 28-node runs (2DBC 7x4, SBC r = 8) at
n = 50,000 and 100,000, whose measured values are not in the data file.

Usage: python benchmarks/simulate_sc22.py [--sizes 12500,25000,50000,75000,100000]
           [--node FILE] [--runtime FILE] [--held-out] [--json FILE]
"""
import csv
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ArgumentParser, int_list, run_main, write_json  # noqa: E402

from starchol.distributions import get_map  # noqa: E402
from starchol.model.platform import Platform, load_node  # noqa: E402
from starchol.linalg.runtime_costs import load_runtime  # noqa: E402
from starchol.linalg.simulate import simulate_cholesky  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "benchmarks", "data", "sc22_training.csv")
NODE = os.path.join(ROOT, "examples", "nodes", "plafrim-bora.json")
RUNTIME = os.path.join(ROOT, "examples", "runtimes", "chameleon-starpu-1.3.json")
NB = 500
#: the training series of Fig. 10a: (label in the data file, map name, nodes, options)
SERIES = [("2DBC P=15 5x3", "2dbc", 15, {"grid": "5x3"}),
          ("2DBC P=16 4x4", "2dbc", 16, {"grid": "4x4"}),
          ("SBC P=15 r=6", "sbc", 15, {})]
#: the held-out runs simulated by --held-out (the paper's Fig. 9, 28 nodes)
HELD_OUT = [("2DBC P=28 7x4", "2dbc", 28, {"grid": "7x4"}),
            ("SBC P=28 r=8", "sbc", 28, {})]
HELD_OUT_SIZES = (50000, 100000)
#: acceptance bounds (issue 44): GFlop/s per node within 15%, SBC/2DBC within 0.05
REL_BOUND, RATIO_BOUND = 0.15, 0.05


def read_training(path):
    """``{(figure, series, n): value}`` from the data file (``#`` lines are notes)."""
    with open(path) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {(r["figure"], r["series"], int(r["n"])): float(r["value"]) for r in rows}


def simulate_point(label, name, nodes, kw, n, node, runtime):
    tile_map = get_map(name, nodes, **kw)
    plat = Platform(node=node, nodes=nodes, bandwidth=node.bandwidth,
                    latency=node.latency or 0.0)
    t0 = time.perf_counter()
    res = simulate_cholesky(tile_map, n, NB, plat, runtime=runtime)
    return {"series": label, "map": str(tile_map), "nodes": nodes, "n": n,
            "makespan_s": res.makespan_s, "gflops_per_node": res.gflops / nodes,
            "tasks": res.tasks, "transfers": res.transfers,
            "wall_s": time.perf_counter() - t0}


def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=lambda t: int_list(t, low=NB),
                    default=[12500, 25000, 50000, 75000, 100000],
                    help="matrix orders n of Fig. 10a to simulate (default up to 100,000)")
    ap.add_argument("--node", default=NODE, help="node description (default plafrim-bora)")
    ap.add_argument("--runtime", default=RUNTIME,
                    help="runtime description (default chameleon-starpu-1.3)")
    ap.add_argument("--data", default=DATA, help="the training points (CSV)")
    ap.add_argument("--held-out", action="store_true",
                    help="also simulate the 28-node runs of Fig. 9 at n = 50,000, 100,000")
    ap.add_json("every simulated point and its measured value")
    args = ap.parse_args(argv)
    meas = read_training(args.data)
    node, runtime = load_node(args.node), load_runtime(args.runtime)
    t_start = time.perf_counter()
    print(f"platform: {args.node} ({node.name}; {node.source})")
    print(f"runtime:  {args.runtime} ({runtime.name}; {runtime.source})")
    rows = []
    # Fig. 7 at the run's NB: one node, n = 50,000
    one = simulate_point("one node", "2dbc", 1, {}, 50000, node, runtime)
    one["measured"] = meas.get(("fig7_gflops_one_node_vs_nb", "Chameleon", NB))
    rows.append(one)
    for n in args.sizes:
        for label, name, nodes, kw in SERIES:
            row = simulate_point(label, name, nodes, kw, n, node, runtime)
            row["measured"] = meas.get(("fig10a_gflops_per_node", label, n))
            rows.append(row)
            print(f"  {label:14s} n = {n:6d}: {row['gflops_per_node']:7.1f} GFlop/s per node "
                  f"(paper {row['measured']}), {row['tasks']} tasks in {row['wall_s']:.1f} s",
                  flush=True)
    if args.held_out:
        for n in HELD_OUT_SIZES:
            for label, name, nodes, kw in HELD_OUT:
                row = simulate_point(label, name, nodes, kw, n, node, runtime)
                row["measured"] = None
                row["held_out"] = True
                rows.append(row)
                print(f"  {label:14s} n = {n:6d}: {row['gflops_per_node']:7.1f} GFlop/s per "
                      f"node (held out)", flush=True)
    text, ok = tables(rows, one["gflops_per_node"])
    print(text)
    print(f"\n{time.perf_counter() - t_start:.0f} s; acceptance (within "
          f"{REL_BOUND:.0%} per point, SBC/2DBC within {RATIO_BOUND}): "
          f"{'met' if ok else 'NOT met'}")
    if args.json:
        write_json(args.json, rows)
    return 0


def excess_per_step_ms(gflops_per_node, n, nodes, node_gflops):
    """Milliseconds per panel step (NT = n / NB of them) that a run of ``nodes`` nodes at
    ``gflops_per_node`` takes beyond the compute alone at ``node_gflops`` (one node's
    rate): (time - flops / (P node_gflops)) / NT."""
    flops = n ** 3 / 3.0 / nodes
    return 1e3 * (flops / (gflops_per_node * 1e9) - flops / (node_gflops * 1e9)) / (n / NB)


def tables(rows, node_gflops):
    """The comparison tables (Markdown) and whether every bound is met. ``node_gflops``:
    the simulated one-node rate, for the time beyond compute per panel step."""
    ok = True
    out = ["| series | n | paper GFlop/s per node | simulated | simulated / paper | "
           f"within {REL_BOUND:.0%} | beyond compute per step, paper / simulated (ms) |",
           "|---|---|---|---|---|---|---|"]
    logs, good_count = [], 0
    for r in rows:
        if r["measured"] is None:
            continue
        rel = r["gflops_per_node"] / r["measured"]
        good = abs(rel - 1) <= REL_BOUND
        ok = ok and (good or r["nodes"] == 1)
        step = ""
        if r["nodes"] > 1:
            logs.append(abs(math.log(rel)))
            good_count += good
            step = (f"{excess_per_step_ms(r['measured'], r['n'], r['nodes'], node_gflops):.1f}"
                    f" / {excess_per_step_ms(r['gflops_per_node'], r['n'], r['nodes'], node_gflops):.1f}")
        out.append(f"| {r['series']} | {r['n']} | {r['measured']:.1f} | "
                   f"{r['gflops_per_node']:.1f} | {rel:.3f} | {'yes' if good else 'no'} | "
                   f"{step} |")
    if logs:
        out += ["", f"{good_count} of {len(logs)} multi-node points within "
                    f"{REL_BOUND:.0%}; mean |log(simulated / paper)| "
                    f"{sum(logs) / len(logs):.3f}, largest {max(logs):.3f}"]
    out += ["", "| n | SBC / 2DBC | paper | simulated | simulated - paper | within "
            f"{RATIO_BOUND} |", "|---|---|---|---|---|---|"]
    by = {(r["series"], r["n"]): r for r in rows if r["measured"] is not None}
    ratios = []
    for n in sorted({r["n"] for r in rows if r["nodes"] > 1}):
        sbc = by.get(("SBC P=15 r=6", n))
        for two in ("2DBC P=15 5x3", "2DBC P=16 4x4"):
            ref = by.get((two, n))
            if sbc is None or ref is None:
                continue
            paper = sbc["measured"] / ref["measured"]
            sim = sbc["gflops_per_node"] / ref["gflops_per_node"]
            good = abs(sim - paper) <= RATIO_BOUND
            ok = ok and good
            ratios.append(good)
            out.append(f"| {n} | SBC r=6 / {two} | {paper:.3f} | {sim:.3f} | "
                       f"{sim - paper:+.3f} | {'yes' if good else 'no'} |")
    if ratios:
        out += ["", f"{sum(ratios)} of {len(ratios)} ratios within {RATIO_BOUND}"]
    held = [r for r in rows if r.get("held_out")]
    if held:
        out += ["", "Held out (the paper's Fig. 9, 28 nodes; not fitted on):", "",
                "| series | n | simulated GFlop/s per node | time (s) |", "|---|---|---|---|"]
        out += [f"| {r['series']} | {r['n']} | {r['gflops_per_node']:.1f} | "
                f"{r['makespan_s']:.2f} |" for r in held]
    return "\n".join(out), ok


if __name__ == "__main__":
    run_main(main)
