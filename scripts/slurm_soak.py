#!/usr/bin/env python3
"""Soak test of the default Slurm script: consecutive 6-node jobs on the emulated cluster.

    scripts/slurm_soak.py [--jobs 30] [--name slm] [--subnet 10.233.0] [--keep-up]
                          [--slurm-arg=--launcher=srun] [--env KEY=VALUE] [--n 600]

Brings up a 6-node emulated cluster with Slurm (``scripts/cluster.sh``; an identical one
that is up is reused), writes ONE script with ``starchol slurm --dist sbc --nodes 6`` (the
default launcher and settings, plus any ``--slurm-arg``), and submits it ``--jobs`` times
in a row, each with ``sbatch --wait``, never resubmitting. Each job must end COMPLETED
(exit 0:0), write its report (``match`` true, residual below 1e-12) and a factor L with
L L^T = A (checked here with h5py against the input); the factor is removed before the
next job. One line per job, then ``K/N jobs succeeded``; exit status 0 only when every
job did. A failed job's log tail is printed. The cluster is brought down at the end
unless ``--keep-up``.

``--env KEY=VALUE`` (repeat) adds to the jobs' environment (``sbatch`` passes it on), to
measure a candidate setting; ``--slurm-arg`` adds a ``starchol slurm`` option (e.g.
``--slurm-arg=--launcher=srun`` to measure the srun launcher). Needs root; exit status 77
where no emulated cluster can be made.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from emulated_cluster import ClusterError, ClusterUnavailable, EmulatedCluster  # noqa: E402

#: seconds one job may take from sbatch to its end (about 10 s on 2 idle cores)
JOB_TIMEOUT = 180


def _starchol():
    exe = Path(sys.executable).with_name("starchol")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "starchol"]


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=30, help="consecutive jobs (default 30)")
    p.add_argument("--n", type=int, default=600, help="matrix size (default 600, NB 100)")
    p.add_argument("--name", default=None,
                   help="cluster name (default: a unique one; an identical cluster of that "
                        "name that is up is reused)")
    p.add_argument("--subnet", default=None, help="cluster subnet A.B.C (cluster.sh default)")
    p.add_argument("--keep-up", action="store_true", help="leave the cluster up at the end")
    p.add_argument("--slurm-arg", action="append", default=[], metavar="ARG",
                   help="extra starchol slurm option (repeat)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra variable in the jobs' environment (repeat)")
    p.add_argument("--stop-on-failure", action="store_true",
                   help="stop at the first failed job")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    for item in args.env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", item):
            p.error(f"--env takes KEY=VALUE, got {item!r}")
    return args


def _job_info(cl, env, job):
    """JobState and ExitCode of a finished job (scontrol)."""
    out = cl.exec("node0", ["scontrol", "show", "job", "-o", job], env=env).stdout
    fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
    return fields.get("JobState", "?"), fields.get("ExitCode", "?")


def _check_job(cl, env, work, script, a):
    """Submit the script once and check everything; (ok, job id, message)."""
    import h5py

    l_file = work / "l.h5"
    l_file.unlink(missing_ok=True)
    for old in work.glob("*.out"):
        old.unlink()
    res = cl.exec("node0", ["sh", "-c", f"cd {work} && exec sbatch --parsable --wait {script}"],
                  timeout=JOB_TIMEOUT, env=env)
    job = res.stdout.strip().split(";")[0]
    log = "".join(p.read_text(errors="replace") for p in work.glob("*.out"))
    if not job.isdigit():
        return False, "?", f"sbatch failed ({res.returncode}): {res.stderr.strip()}"
    state, code = _job_info(cl, env, job)
    if state != "COMPLETED" or code != "0:0":
        why = "SIGSEGV in a rank" if "Segmentation fault" in log else "failed"
        tail = "\n".join("    | " + line for line in log.splitlines()[-15:])
        return False, job, f"{why}: sbatch rc {res.returncode}, {state} {code}\n{tail}"
    # the job is judged by Slurm's record and its files; sbatch --wait's own status
    # is shown when it disagrees (a client-side poll error)
    note = (f" (sbatch --wait exit {res.returncode}: {res.stderr.strip()!r})"
            if res.returncode != 0 else "")
    doc = json.loads((work / "results" / f"starchol-{job}.json").read_text())
    if not (doc["nodes"] == 6 and doc["match"] is True and doc["residual"] < 1e-12):
        return False, job, f"report wrong: nodes {doc['nodes']} match {doc['match']} " \
                           f"residual {doc['residual']}"
    with h5py.File(l_file, "r") as fl:
        lower = fl["L"][...]
    err = np.abs(lower @ lower.T - a).max() / np.abs(a).max()
    if not err < 1e-10:
        return False, job, f"factor wrong: max |L L^T - A| / max |A| = {err:.2e}"
    retries = log.count("before any rank started")
    if retries:   # the script launched again: the job succeeded, the first launch did not
        note += f"; launched {retries + 1} times (the script's launch retry)"
    return True, job, f"residual {doc['residual']:.1e}, |LL^T-A| {err:.1e}{note}"


def soak(args):
    import h5py

    cl = EmulatedCluster(6, bandwidth="1gbit", slurm=True, name=args.name,
                         subnet=args.subnet)
    work = Path(tempfile.mkdtemp(prefix="starchol-soak-"))
    ok = 0
    try:
        cl.up()
        env = cl.env()
        env.update(item.split("=", 1) for item in args.env)
        a_file, script = work / "a.h5", work / "job.sbatch"
        subprocess.run([*_starchol(), "generate", "--n", str(args.n), "--output",
                        f"{a_file}:/A"], check=True, capture_output=True, timeout=120)
        with h5py.File(a_file, "r") as fa:
            a = fa["A"][...]
        made = subprocess.run([*_starchol(), "slurm", "--dist", "sbc", "--nodes", "6", "--nb",
                               "100", "--workers", "1", "--input", f"{a_file}:/A", "--output",
                               f"{work}/l.h5:/L", "--check", "--time", "00:05:00",
                               "--json-dir", str(work / "results"), *args.slurm_arg,
                               "-o", str(script)], capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            print(made.stderr, file=sys.stderr, end="")
            return 2
        launch = next(line.strip() for line in script.read_text().splitlines()
                      if line.strip().startswith(("srun ", "mpirun "))).rstrip(" \\")
        print(f"soak: {args.jobs} jobs of {script} (launch: {launch} ...)"
              + (f"; job environment {' '.join(args.env)}" if args.env else ""), flush=True)
        t_all = time.monotonic()
        for k in range(1, args.jobs + 1):
            t0 = time.monotonic()
            good, job, msg = _check_job(cl, env, work, script, a)
            ok += good
            print(f"job {k:2d}/{args.jobs} (id {job}): {'ok' if good else 'FAILED'} "
                  f"in {time.monotonic() - t0:.1f} s; {msg}", flush=True)
            left = cl.wait_no_processes(timeout=10)
            if left:
                print(f"  processes left on the nodes after the job: {left}", flush=True)
            if not good and args.stop_on_failure:
                break
        print(f"{ok}/{args.jobs} jobs succeeded ({time.monotonic() - t_all:.0f} s)", flush=True)
        return 0 if ok == args.jobs else 1
    finally:
        if not args.keep_up:
            cl.down()
        subprocess.run(["rm", "-rf", str(work)], check=False)


def main(argv=None):
    args = _parse(argv)
    if os.geteuid() != 0:
        print("slurm_soak: needs root (an emulated cluster)", file=sys.stderr)
        return 77
    try:
        return soak(args)
    except ClusterUnavailable as exc:
        print(f"slurm_soak: no emulated cluster here: {exc}", file=sys.stderr)
        return 77
    except ClusterError as exc:
        print(f"slurm_soak: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
