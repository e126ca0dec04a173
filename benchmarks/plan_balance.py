"""How well "NT holds at least 6 pattern periods" predicts a map's real load balance.

``starchol plan`` once ranked every map whose pattern appears fewer than
:data:`starchol.distributions.base.MIN_PERIODS` times in NT after all the others. This
sweep measures, for every P and NT given, every candidate of ``plan``
(:func:`starchol.distributions.candidate_maps`) with the exact model
(:func:`starchol.model.plan.score_map`: busiest node's flops and traffic) and reports

- flops max/avg of the maps that rule set aside and of those it kept (quartiles);
- how often the rule's pick differs from the least estimate, and by how much
  (estimate, total bytes and memory per node of the rule's pick over the least-estimate
  pick).

Usage:
    python benchmarks/plan_balance.py [--nodes 2-16,21,28,31,32,45,57] [--nb 500]
        [--json FILE]

NT runs over 3..200: a fixed list plus, for each map's pattern size r, r - 1, r, r + 1,
2r + 1, 3r, 5r + 2 and 6r - 1 .. 6r + 1 (below, at, and not a multiple of the period).
The default set takes about 4 minutes on one core. Arguments are checked before the
sweep, ``--json`` is written whole or not at all, Ctrl-C stops with exit status 130
(benchmarks/common.py).
"""
import statistics
import time

from common import ArgumentParser, int_ranges, positive_int, run_main, write_json

from starchol.distributions import candidate_maps
from starchol.distributions.base import MIN_PERIODS
from starchol.model.plan import rank_key, score_map

FIXED_NT = (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 17, 18, 20, 24, 25, 30, 36, 45, 60, 90)


def node_list(text):
    """argparse type of --nodes: node counts >= 2, ``2-16,21``."""
    return int_ranges(text, low=2)


def nt_values(maps):
    s = set(FIXED_NT)
    for m in maps:
        r = m.pattern_size()
        if r:
            s |= {r - 1, r, r + 1, 2 * r + 1, 3 * r, 5 * r + 2, 6 * r - 1, 6 * r, 6 * r + 1}
    return sorted(x for x in s if 3 <= x <= 200)


def old_rule_kept(row):
    return row["periods"] is None or row["periods"] >= MIN_PERIODS


def quartiles(values):
    v = sorted(values)
    return [v[0], *statistics.quantiles(v, n=4), v[-1]]


def main(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=node_list, default=node_list("2-16,21,28,31,32,45,57"),
                    help="node counts P >= 2: integers and ranges A-B, comma-separated "
                         "(default 2-16,21,28,31,32,45,57)")
    ap.add_argument("--nb", type=positive_int, default=500, help="tile size (default 500)")
    ap.add_json("every (P, NT) case")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = []
    for p in args.nodes:
        for nt in nt_values(candidate_maps(p)):
            rows = [score_map(m, nt * args.nb, args.nb, 1000.0, 12.5e9)
                    for m in candidate_maps(p, nt=nt)]
            best = min(rows, key=rank_key)
            old = min(rows, key=lambda r: (not old_rule_kept(r), rank_key(r)))
            cases.append({"nodes": p, "nt": nt, "best": best, "old": old,
                          "set_aside": [r["flops_max_over_avg"] for r in rows
                                        if not old_rule_kept(r)],
                          "kept": [r["flops_max_over_avg"] for r in rows if old_rule_kept(r)]})
    aside = [f for c in cases for f in c["set_aside"]]
    kept = [f for c in cases for f in c["kept"]]
    differ = [c for c in cases if c["old"]["map"] != c["best"]["map"]]
    print(f"{len(cases)} (P, NT) cases, {time.perf_counter() - t0:.0f} s")
    print("flops max/avg (min, q1, median, q3, max) of maps set aside: "
          + ", ".join(f"{x:.3f}" for x in quartiles(aside)))
    print("flops max/avg (min, q1, median, q3, max) of maps kept:      "
          + ", ".join(f"{x:.3f}" for x in quartiles(kept)))
    if differ:
        ratio = [c["old"]["estimate_s"] / c["best"]["estimate_s"] for c in differ]
        print(f"the rule changes the pick in {len(differ)} cases: estimate x"
              f"{statistics.median(ratio):.3f} median, x{max(ratio):.3f} at worst; more "
              f"total bytes in {sum(c['old']['bytes'] > c['best']['bytes'] for c in differ)}, "
              f"more memory per node in "
              f"{sum(c['old']['memory_per_node_bytes'] > c['best']['memory_per_node_bytes'] for c in differ)}")
        for c in sorted(differ, key=lambda c: c["best"]["estimate_s"] / c["old"]["estimate_s"])[:10]:
            o, b = c["old"], c["best"]
            print(f"  P={c['nodes']:3d} NT={c['nt']:3d}: rule {o['map']} (flops max/avg "
                  f"{o['flops_max_over_avg']:.3f}) vs {b['map']} (periods {b['periods']:.1f}, "
                  f"flops max/avg {b['flops_max_over_avg']:.3f}): estimate "
                  f"x{o['estimate_s'] / b['estimate_s']:.2f}")
    if args.json:
        write_json(args.json, cases)
    return 0


if __name__ == "__main__":
    run_main(main)
