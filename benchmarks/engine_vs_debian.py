"""starchol on the project's StarPU against starchol on Debian's, in the same run.

    .venv/bin/python benchmarks/engine_vs_debian.py [--n 8192] [--nb 512] [--rounds 3]

Builds a second copy of starchol whose compiled layer links Debian's ``libstarpu-dev``
(``STARCHOL_STARPU=system pip install --target``, in a temporary folder), then runs
``starchol bench --n N --nb NB --repeat 1`` alternately with the two builds, in fresh
processes, ``--rounds`` times each. Prints the GFlop/s of every run, the medians, and
the ratio project / Debian of the medians (also of each run's ratio to LAPACK dpotrf,
which the same process times right after, so that load changes cancel out).
``--json FILE`` writes the numbers.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_debian_copy(folder):
    """Install starchol with Debian's StarPU into ``folder`` (its own compiled layer)."""
    env = dict(os.environ, STARCHOL_STARPU="system")
    env.pop("STARPU_PREFIX", None)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
           "--disable-pip-version-check", "--target", folder, ROOT]
    subprocess.run(cmd, check=True, env=env, cwd=folder)


def bench(n, nb, pythonpath, out):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = [sys.executable, "-m", "starchol", "bench", "--n", str(n), "--nb", str(nb),
           "--repeat", "1", "--json", out]
    subprocess.run(cmd, check=True, env=env, cwd=os.path.dirname(out),
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def library_of(pythonpath):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = ("from starchol.runtime import starpu_build as b; d = b.describe(); "
            "print(d['version'], d['kind'], d['config'].get('STARPU_MAXCPUS'), d['library'])")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, cwd="/").stdout.strip()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--nb", type=int, default=512)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="starchol-debian-") as tmp:
        debian = os.path.join(tmp, "site")
        os.makedirs(debian)
        print("building starchol against Debian's StarPU ...", flush=True)
        build_debian_copy(debian)
        builds = {"project": None, "debian": debian}
        for name, path in builds.items():
            print(f"  {name}: StarPU {library_of(path)}", flush=True)
        runs = {name: [] for name in builds}
        for r in range(args.rounds):
            for name, path in builds.items():
                doc = bench(args.n, args.nb, path, os.path.join(tmp, f"{name}-{r}.json"))
                runs[name].append({"gflops": doc["starchol_median_gflops"],
                                   "lapack_gflops": doc["lapack_median_gflops"],
                                   "workers": doc["runtime"]["workers_per_rank"]})
                print(f"  round {r + 1} {name:8s}: starchol {doc['starchol_median_gflops']:.1f}"
                      f" GFlop/s, LAPACK {doc['lapack_median_gflops']:.1f}", flush=True)
    med = {k: statistics.median(x["gflops"] for x in v) for k, v in runs.items()}
    rel = {k: statistics.median(x["gflops"] / x["lapack_gflops"] for x in v)
           for k, v in runs.items()}
    result = {"n": args.n, "nb": args.nb, "rounds": args.rounds, "runs": runs,
              "median_gflops": med, "ratio_project_over_debian": med["project"] / med["debian"],
              "ratio_vs_lapack": rel,
              "ratio_of_lapack_ratios": rel["project"] / rel["debian"]}
    print(f"median GFlop/s: project {med['project']:.1f}, Debian {med['debian']:.1f}; "
          f"ratio project/Debian {result['ratio_project_over_debian']:.3f} "
          f"(against LAPACK in the same process: {result['ratio_of_lapack_ratios']:.3f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
