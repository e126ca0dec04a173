"""starchol on the project's StarPU against starchol on Debian's, in the same run.

    .venv/bin/python benchmarks/engine_vs_debian.py [--n 8192] [--nb 512] [--rounds 3]

Builds a second copy of starchol whose compiled layer links Debian's ``libstarpu-dev``
(``STARCHOL_STARPU=system pip install --target``, in a temporary folder, from a copy of
the checkout's sources: the build never writes into the checkout, whose ``build/``,
``build/starpu-flags`` and compiled modules stay those of its own StarPU), then runs
``starchol bench --n N --nb NB --repeat 1`` alternately with the two builds, in fresh
processes, ``--rounds`` times each. Prints the GFlop/s of every run, the medians, and
the ratio project / Debian of the medians (also of each run's ratio to LAPACK dpotrf,
which the same process times right after, so that load changes cancel out).
``--json FILE`` writes the numbers (whole or not at all); arguments are checked before
the build; Ctrl-C stops with exit status 130 (benchmarks/common.py).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

from common import ArgumentParser, positive_int, run_main, temporary_folder, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: what a copy of the sources leaves out when git cannot list them (.gitignore's build
#: outputs and environments)
NOT_SOURCES = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.so",
               "*.pyc", ".pytest_cache", ".starpu", ".gpu-deps", "*.h5")


def source_files(root=ROOT):
    """The checkout's source files, relative to ``root``: git's tracked files and the
    untracked ones it does not ignore, or None when ``root`` is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.stdout.decode().split("\0") if p]


def copy_sources(dest, root=ROOT):
    """Copy the sources of ``root`` into the new folder ``dest`` (no build outputs, no
    environment), so that a build there writes nothing into ``root``."""
    files = source_files(root)
    if files is None:
        shutil.copytree(root, dest, ignore=shutil.ignore_patterns(*NOT_SOURCES))
        return dest
    for rel in files:
        src = os.path.join(root, rel)
        if not os.path.isfile(src):     # deleted but still tracked
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))
    return dest


def build_debian_copy(folder, work):
    """Install starchol with Debian's StarPU into ``folder`` (its own compiled layer),
    building it in ``work`` from a copy of the checkout's sources."""
    src = copy_sources(os.path.join(work, "src"))
    env = dict(os.environ, STARCHOL_STARPU="system")
    env.pop("STARPU_PREFIX", None)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
           "--disable-pip-version-check", "--target", folder, src]
    subprocess.run(cmd, check=True, env=env, cwd=work)


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
            "print(b.label(d) + ', MAXCPUS', d['config'].get('STARPU_MAXCPUS'), 'in', "
            "d['library'])")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, cwd="/").stdout.strip()


def main(argv=None):
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=positive_int, default=8192, help="matrix order (default 8192)")
    p.add_argument("--nb", type=positive_int, default=512, help="tile size (default 512)")
    p.add_argument("--rounds", type=positive_int, default=3,
                   help="bench runs of each build, alternating (default 3)")
    p.add_json("every run, the medians and the ratios")
    args = p.parse_args(argv)
    p.check_runtime(n=args.n, nb=args.nb)
    with temporary_folder("starchol-debian-") as tmp:
        debian = os.path.join(tmp, "site")
        os.makedirs(debian)
        print("building starchol against Debian's StarPU (from a copy of the sources) ...",
              flush=True)
        build_debian_copy(debian, tmp)
        builds = {"project": None, "debian": debian}
        for name, path in builds.items():
            print(f"  {name}: {library_of(path)}", flush=True)
        runs = {name: [] for name in builds}
        for r in range(args.rounds):
            for name, path in builds.items():
                doc = bench(args.n, args.nb, path, os.path.join(tmp, f"{name}-{r}.json"))
                runs[name].append({"gflops": doc["starchol_median_gflops"],
                                   "lapack_gflops": doc["lapack_median_gflops"],
                                   "workers": doc["runtime"]["workers_per_rank"],
                                   "starpu_build": doc["runtime"].get("starpu_build")})
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
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    run_main(main)
