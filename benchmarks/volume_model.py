"""Benchmark of the exact volume model (``starchol volume``) against its targets.

Each case runs in a fresh subprocess (so that its peak memory is its own) three times;
the median wall time and the peak resident memory are reported. Targets (issue 2, on the
2-core machine): NT=600 on 28 nodes (sbc r=8) under 1 s; NT=2000 on 4950 nodes (sbc,
r=100) under 20 s and 2 GiB.

Usage: python benchmarks/volume_model.py [--repeat R] [--json FILE]

Arguments are checked before the first case, ``--json`` is written whole or not at all,
Ctrl-C stops with exit status 130 (benchmarks/common.py).
"""
import json
import statistics
import subprocess
import sys

from common import ArgumentParser, positive_int, run_main, write_json

CASES = [
    # (dist, nodes, nt, target seconds, target bytes of memory)
    ("sbc", 28, 600, 1.0, None),
    ("2dbc", 28, 600, 1.0, None),
    ("sbc", 4950, 2000, 20.0, 2 * 2**30),
]

CHILD = r"""
import json, resource, sys, time
from starchol.distributions import get_map
from starchol.model.volume_summary import volume_summary
dist, nodes, nt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = get_map(dist, nodes)
t = time.perf_counter()
doc = volume_summary(m, nt, 500)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "ratio": doc["ratio"],
                  "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def main(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=positive_int, default=3,
                    help="runs per case, each in a fresh process (default 3)")
    ap.add_json("one row per case")
    args = ap.parse_args(argv)
    results, ok = [], True
    for dist, nodes, nt, t_target, m_target in CASES:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", CHILD, dist, str(nodes), str(nt)],
                                 check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out))
        sec = statistics.median(r["seconds"] for r in runs)
        peak = max(r["peak_bytes"] for r in runs)
        good = sec < t_target and (m_target is None or peak < m_target)
        ok &= good
        results.append({"dist": dist, "nodes": nodes, "nt": nt, "median_s": sec,
                        "runs_s": [r["seconds"] for r in runs], "peak_bytes": peak,
                        "ratio": runs[0]["ratio"], "target_s": t_target,
                        "target_bytes": m_target, "pass": good})
        mem = f"peak {peak / 2**20:.0f} MiB" + (f" (target < {m_target / 2**30:.0f} GiB)"
                                                 if m_target else "")
        print(f"{dist:>5} P={nodes:<5} NT={nt:<5} median {sec:6.2f} s (target < {t_target:g} s), "
              f"{mem}, D/S = {runs[0]['ratio']:.4f}: {'PASS' if good else 'FAIL'}")
    if args.json:
        write_json(args.json, results)
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
