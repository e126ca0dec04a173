"""starchol's tuning patches to StarPU, each at its default against its other setting,
alternating in the same run.

``scripts/starpu-patches`` holds three tuning patches, each read through a variable of
starchol's (``starchol.runtime.starpu_env.PATCH_SWITCHES``, which also gives the value
measured here): the idle spin (default 0, an idle worker sleeps at once; measured with
``STARCHOL_IDLE_SPIN_US=200``, a 200 µs poll first), the last worker that sleeps
(measured with ``STARCHOL_IDLE_LAST_SLEEPS=0``: StarPU's rule, the last awake worker of
a context polls) and the MPI thread's yield (measured with ``STARCHOL_MPI_YIELD=0``:
StarPU-MPI's progress thread polls without pause). Every round runs each variant once
(the defaults, then each variable at its other value; the order turns by one variant
per round), and every variant runs three programs, each in fresh processes with the
variable in its environment (``--programs`` picks some):

- ``present``: ``benchmarks/small_sizes.py`` (``--sizes``, ``--repeat`` pairs, 1 rank):
  starchol/LAPACK ratio per size, measured inside that process, and starchol's median
  call in ms;
- ``b2b``: ``benchmarks/small_sizes.py --back-to-back`` (``--b2b-size``, ``--calls`` x
  ``--blocks``): the same two figures for calls in a row;
- ``main``: the README's main job, ``mpirun --oversubscribe -np NP starchol run --dist sbc --n N
  --nb NB --check``: the factorization's time (``time_s`` of its run document) and the
  wall time of the whole mpirun.

The table gives, per variant (a column), the median over the rounds of each figure (a
row); a default pays where the "defaults" column is better (higher ratio, shorter time)
than the variable's own column. Timings on a shared machine are noisy: compare columns of one
run only. On a loaded machine LAPACK's threads suffer more than starchol's workers, and
the ratios mean little: compare the times.

Usage: python benchmarks/patch_policy.py [--rounds R] [--programs present,b2b,main]
                                         [--sizes 1024,2048,4096]
                                         [--repeat K] [--b2b-size N] [--calls C]
                                         [--blocks B] [--np P] [--n N] [--nb NB]
                                         [--json FILE]

The loaded StarPU must be starchol's own build with the patches that read these
variables (checked before any run: ``starchol.runtime.starpu_build.variables_read``);
``--json`` is written whole or not at all, Ctrl-C stops with exit status 130
(benchmarks/common.py).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from common import (ArgumentParser, int_list, positive_int, run_main, temporary_folder,
                    write_json)

HERE = os.path.dirname(os.path.abspath(__file__))
#: the programs every variant runs: small_sizes.py's two modes and the main job
PROGRAMS = ("present", "b2b", "main")
#: seconds one program of one variant may take before the run is abandoned
TIMEOUT = 300


def program_list(text):
    """argparse type: comma-separated names of :data:`PROGRAMS`, at least one."""
    names = [part.strip() for part in str(text).split(",")]
    if not all(names) or set(names) - set(PROGRAMS):
        raise argparse.ArgumentTypeError(f"must be comma-separated names among "
                                         f"{','.join(PROGRAMS)}, got {text!r}")
    return tuple(names)


def variants():
    """``[(label, {variable: value})]``: every patch at its default, then each tuning
    patch's variable at the other value (:data:`PATCH_SWITCHES`), one at a time."""
    from starchol.runtime.starpu_env import PATCH_SWITCHES

    out = [("defaults", {})]
    for patch, (name, other) in PATCH_SWITCHES.items():
        out.append((f"{patch.split('-', 2)[2].rsplit('.', 1)[0]}={other}", {name: other}))
    return out


def starchol_exe():
    exe = os.path.join(os.path.dirname(sys.executable), "starchol")
    return exe if os.path.isfile(exe) else shutil.which("starchol")


def check_build():
    """None when the loaded StarPU is starchol's build and reads every patch variable,
    else the reason it does not (a system StarPU, or a build of older patches)."""
    code = ("import json; from starchol.runtime import starpu_build as b; "
            "from starchol.runtime.starpu_env import PATCH_SWITCHES as S; d = b.describe(); "
            "print(json.dumps([d['kind'], d['prefix'], "
            "b.variables_read([n for n, _ in S.values()], d)]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    if p.returncode:
        return f"cannot inspect the loaded StarPU: {p.stderr.strip()[-300:]}"
    kind, prefix, read = json.loads(p.stdout)
    from starchol.runtime.starpu_env import PATCH_SWITCHES

    missing = [name for name, _ in PATCH_SWITCHES.values() if name not in read]
    if kind != "starchol build":
        return f"starchol runs on a {kind or 'foreign'} StarPU ({prefix}), not its own build"
    if missing:
        return (f"the loaded StarPU ({prefix}) does not read {', '.join(missing)}: rebuild "
                f"it (bash scripts/setup.sh)")
    return None


def run(cmd, env, what):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"patch_policy.py: {what} failed (exit status {p.returncode}):\n"
                         f"{p.stderr.strip()[-2000:]}")
    return wall


def measure(settings, args, tmp):
    """One variant once: ``{figure: value}``."""
    env = dict(os.environ, **settings)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("STARPU_SILENT", "1")
    out = {}
    small = os.path.join(HERE, "small_sizes.py")
    doc = os.path.join(tmp, "small.json")
    if "present" in args.programs:
        run([sys.executable, small, "--sizes", ",".join(map(str, args.sizes)), "--repeat",
             str(args.repeat), "--json", doc], env, "small_sizes.py")
        with open(doc) as f:
            for row in json.load(f)["results"]:
                out[f"present {row['n']} ratio"] = row["ratio"]
                out[f"present {row['n']} ms"] = 1e3 * row["starchol_median_s"]
    if "b2b" in args.programs:
        run([sys.executable, small, "--back-to-back", "--sizes", str(args.b2b_size),
             "--calls", str(args.calls), "--blocks", str(args.blocks), "--json", doc], env,
            "small_sizes.py --back-to-back")
        with open(doc) as f:
            row = json.load(f)["results"][0]
        out[f"b2b {args.b2b_size} ratio"] = row["ratio"]
        out[f"b2b {args.b2b_size} ms"] = 1e3 * row["starchol_median_s"]
    if "main" not in args.programs:
        return out
    doc = os.path.join(tmp, "run.json")
    forward = [w for name in settings for w in ("-x", name)]
    wall = run(["mpirun", "--oversubscribe", "-np", str(args.np), *forward, starchol_exe(),
                "run", "--dist", "sbc", "--n", str(args.n), "--nb", str(args.nb), "--check",
                "--json", doc, "--overwrite"], env, "the main job")
    with open(doc) as f:
        out["main factor s"] = json.load(f)["time_s"]
    out["main wall s"] = wall
    return out


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=positive_int, default=5,
                   help="rounds; each runs every variant once (default 5)")
    p.add_argument("--programs", type=program_list, default=PROGRAMS,
                   help="which of present,b2b,main to run, comma-separated (default all)")
    p.add_argument("--sizes", type=int_list, default=int_list("1024,2048,4096"),
                   help="small_sizes.py present mode: orders N (default 1024,2048,4096)")
    p.add_argument("--repeat", type=positive_int, default=3,
                   help="small_sizes.py --repeat: timed pairs per size (default 3)")
    p.add_argument("--b2b-size", type=positive_int, default=1024,
                   help="small_sizes.py --back-to-back: the order N (default 1024)")
    p.add_argument("--calls", type=positive_int, default=20,
                   help="small_sizes.py --back-to-back --calls (default 20)")
    p.add_argument("--blocks", type=positive_int, default=2,
                   help="small_sizes.py --back-to-back --blocks (default 2)")
    p.add_argument("--np", type=positive_int, default=6, help="main job: ranks (default 6)")
    p.add_argument("--n", type=positive_int, default=3000, help="main job: N (default 3000)")
    p.add_argument("--nb", type=positive_int, default=200, help="main job: NB (default 200)")
    p.add_json("every round's figures and the medians")
    args = p.parse_args(argv)
    if min(args.sizes + [args.b2b_size]) < 256:
        p.fail("--sizes and --b2b-size must be at least small_sizes.py's NB, 256")
    p.check_runtime(n=args.n, nb=args.nb)
    if shutil.which("mpirun") is None or starchol_exe() is None:
        p.fail("mpirun and starchol must be on PATH (or beside this Python)")
    reason = check_build()
    if reason:
        p.fail(reason)

    cases = variants()
    rows = {label: [] for label, _ in cases}
    print(f"patch policy: {args.rounds} rounds, {','.join(args.programs)}; small_sizes.py --sizes "
          f"{','.join(map(str, args.sizes))} --repeat {args.repeat}; --back-to-back "
          f"--sizes {args.b2b_size} --calls {args.calls} --blocks {args.blocks}; mpirun -np "
          f"{args.np} starchol run --dist sbc --n {args.n} --nb {args.nb} --check", flush=True)
    with temporary_folder("starchol-patch-policy-") as tmp:
        for r in range(args.rounds):
            for k in range(len(cases)):
                label, settings = cases[(k + r) % len(cases)]
                figures = measure(settings, args, tmp)
                rows[label].append(figures)
                print(f"round {r + 1} {label:>16}: " + ", ".join(
                    f"{key} {value:.3f}" for key, value in figures.items()), flush=True)
    keys = list(rows[cases[0][0]][0])
    medians = {label: {key: statistics.median(f[key] for f in rows[label]) for key in keys}
               for label, _ in cases}
    print(f"\nmedians of {args.rounds} (ratio: starchol/LAPACK, higher is better; ms: "
          f"starchol's median call; s: the main job's factorization and whole mpirun; "
          f"times: lower is better)")
    print(f"{'':>16} " + " ".join(f"{label:>16}" for label, _ in cases))
    for key in keys:
        print(f"{key:>16} " + " ".join(f"{medians[label][key]:>16.3f}" for label, _ in cases))
    if args.json:
        write_json(args.json, {"args": vars(args),
                               "variants": {label: s for label, s in cases},
                               "rounds": rows, "medians": medians})
    return 0


if __name__ == "__main__":
    run_main(main)
