"""`starchol slurm` without a Slurm: script content, rank planning, sweeps and bad input.

Some tests also execute a generated script with stand-ins for srun, mpirun and starchol,
to check its shell logic (workers from the cores, per-rank STARPU_HOME, report check,
cleanup, the launch tried again when no rank started).
"""
import argparse
import json
import os
import re
import stat
import subprocess
import sys

import pytest

from starchol.cli import main
from starchol.jobs import slurm_cmd
from starchol.jobs.slurm_cmd import parse_time
from starchol.runtime.workers import plan_ranks, rank_cores, workers_per_rank

# --max-workers 4: Debian's StarPU limit, so that the plans do not depend on the build
BASE = ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "20000", "--nb", "500",
        "--max-workers", "4"]


def generate(capsys, *extra, base=BASE):
    """Run `starchol slurm` and return the script it prints."""
    assert main(list(base) + list(extra)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def usage_error(capsys, *argv):
    """Run `starchol slurm` expecting exit status 2 (``main``'s, or the parser's for a
    value its argparse type refuses); return its message."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    return capsys.readouterr().err


def sbatch_lines(script):
    return [ln[len("#SBATCH "):] for ln in script.splitlines() if ln.startswith("#SBATCH ")]


def launch_line(script):
    """The launch command, continuation lines joined."""
    text = re.sub(r"\s*\\\n\s*", " ", script)
    return next(ln.strip() for ln in text.splitlines()
                if ln.strip().startswith(("srun --mpi", "mpirun ")))


def bash_syntax_ok(path):
    return subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def run_accepts(option):
    """Whether this installation's `starchol run` has ``option`` (issues 4 and 5 add some)."""
    from starchol.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices.get("run")
    return run is not None and any(option in a.option_strings for a in run._actions)


# -- rank planning (the rule itself is tested in test_engine.py) ---------------------------
@pytest.mark.parametrize("k, expected", [
    (1, (1, 1, 1)), (2, (1, 2, 2)), (4, (1, 4, 4)), (5, (2, 2, 2)), (8, (2, 4, 4)),
    (10, (3, 3, 3)), (64, (16, 4, 4)), (128, (32, 4, 4)),
])
def test_plan_ranks_debian_starpu(k, expected):
    r, cores, workers = plan_ranks(k, 4, {})
    assert (r, cores, workers) == expected
    assert r * cores <= k and workers <= 4


def test_128_core_node_takes_every_core(capsys, tmp_path):
    """A 128-core node with a 256-CPU StarPU: one rank per node asks for all 128 cores,
    and the rank's workers come from Slurm's allocation (SLURM_CPUS_PER_TASK)."""
    script = generate(capsys, "--cpus-per-node", "128", base=[
        "slurm", "--dist", "2dbc", "--nodes", "4", "--grid", "2x2", "--n", "200000",
        "--nb", "500", "--max-workers", "256"])
    opts = sbatch_lines(script)
    assert {"--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "--cpus-per-task=128"} <= set(opts)
    line = launch_line(script)
    assert "PE=$CORES_PER_RANK" in line and "CORES_PER_RANK=128" in script
    assert "--workers" not in line and "WORKERS=" not in script  # decided in the job
    # in the job: srun sets SLURM_CPUS_PER_TASK=128; the rank may see more cores
    job_env = {"SLURM_CPUS_PER_TASK": "128"}
    assert workers_per_rank(rank_cores(range(256), 1, job_env), 256, job_env) == 128
    assert workers_per_rank(rank_cores(range(128), 1, job_env), 256, job_env) == 128
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert bash_syntax_ok(path)


# -- script content ----------------------------------------------------------------------
def test_default_script(capsys, tmp_path):
    script = generate(capsys, "--time", "00:30:00", "--partition", "compute",
                      "--cpus-per-node", "5", "--json-dir", str(tmp_path / "out"))
    assert script.startswith("#!/bin/bash\n")
    opts = sbatch_lines(script)
    # 5 cores, at most 4 workers per rank: 2 ranks of 2 cores -> 6 ranks on 3 nodes
    for opt in ("--nodes=3", "--ntasks=6", "--ntasks-per-node=2", "--cpus-per-task=2",
                "--time=00:30:00", "--partition=compute", "--job-name=starchol-sbc-P6-N20000"):
        assert opt in opts, (opt, opts)
    assert "--overcommit" not in opts and "--exclusive" not in opts
    assert "WORKERS=" not in script and "CORES_PER_RANK=2" in script
    for env in ("OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "STARPU_SCHED=prio",
                "STARPU_SILENT=1", "STARPU_COMM_STATS=1",
                'STARPU_HOME="${TMPDIR:-/tmp}/starpu-${SLURM_JOB_ID}"'):
        assert f"export {env}" in script, env
    assert f"JSON_DIR=${{JSON_DIR:-{tmp_path / 'out'}}}" in script
    assert 'JSON="$JSON_DIR/starchol-${SLURM_JOB_ID}.json"' in script
    line = launch_line(script)
    # mpirun inside the allocation by default (srun --mpi=pmix crashed in MPI_Init 1 job
    # in 4 on the emulated cluster: docs/slurm.md, "Launchers")
    assert line.startswith('mpirun -np "$SLURM_NTASKS" --map-by '
                           '"ppr:$RANKS_PER_NODE:node:PE=$CORES_PER_RANK" --bind-to core ')
    srun = launch_line(generate(capsys, "--time", "00:30:00", "--cpus-per-node", "5",
                                "--launcher", "srun"))
    assert srun.startswith("srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=$CORES_PER_RANK")
    # srun with Slurm's tree fences (MPI_Init's data fence over the ring crashed 1 job in 4)
    tree = "\nexport SLURM_PMIX_FENCE=${SLURM_PMIX_FENCE:-tree}\n"
    assert tree in generate(capsys, "--launcher", "srun") and tree not in script
    # a node failure ends the job unless --requeue says to rerun it
    assert "--no-requeue" in opts and "--requeue" not in opts
    requeue = sbatch_lines(generate(capsys, "--requeue"))
    assert "--requeue" in requeue and "--no-requeue" not in requeue
    assert "--open-mode=append" in requeue and "--open-mode=append" not in opts
    assert '"$STARCHOL" run --dist sbc --n 20000 --nb 500 --sched prio' in line
    # a CPU job says --gpus 0: it never takes GPUs Slurm did not give it
    assert '--sched prio --gpus 0 --json "$JSON"' in line and "--workers" not in line
    assert "--gres" not in script and "STARPU_PERF_MODEL_DIR" not in script
    assert "--grid" not in line and "--slices" not in line
    assert "export STARPU_WORKERS_NOBIND=1" in script  # 2 ranks per node
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert bash_syntax_ok(path)


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_gpu_job(capsys, tmp_path, launcher):
    models = tmp_path / "models"
    script = generate(capsys, "--cpus-per-node", "4", "--gpus-per-node", "2",
                      "--perf-model-dir", str(models), "--launcher", launcher)
    opts = sbatch_lines(script)
    assert "--gres=gpu:2" in opts and "--cpus-per-task=4" in opts
    line = launch_line(script)
    # srun's step asks for the GPUs itself, and so does the srun step that starts
    # mpirun's daemons (Slurm 22.05+ steps get no GPUs they do not ask for)
    assert ("--gres=gpu:2" in line) == (launcher == "srun")
    assert ("export OMPI_MCA_plm_slurm_args=--gres=gpu:2" in script) == (launcher == "mpirun")
    # every rank runs the node's GPUs; GPU jobs default to dmdas
    assert '--sched dmdas --gpus 2 --json "$JSON"' in line
    assert "export STARPU_SCHED=dmdas" in script
    assert "CUDA workers" in script
    assert f"export STARPU_PERF_MODEL_DIR={models}\n" in script
    assert 'mkdir -p "$STARPU_PERF_MODEL_DIR"' in script
    assert not models.exists()                      # made by the job, not here
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert bash_syntax_ok(path)


def test_gpu_job_keeps_a_named_scheduler(capsys):
    line = launch_line(generate(capsys, "--gpus-per-node", "1", "--sched", "heteroprio"))
    assert "--sched heteroprio --gpus 1" in line


def test_gpu_and_model_options_checked(capsys, tmp_path):
    assert "argument --gpus-per-node: must be an integer >= 0, got '-1'" in usage_error(
        capsys, *BASE, "--gpus-per-node", "-1")
    afile = tmp_path / "f"
    afile.write_text("x")
    assert "exists and is not a folder" in usage_error(
        capsys, *BASE, "--perf-model-dir", str(afile))
    assert "--perf-model-dir must name a folder" in usage_error(
        capsys, *BASE, "--perf-model-dir", " ")


def test_one_rank_per_node_keeps_starpu_binding(capsys):
    script = generate(capsys, "--cpus-per-node", "4")
    opts = sbatch_lines(script)
    assert {"--nodes=6", "--ntasks=6", "--ntasks-per-node=1", "--cpus-per-task=4"} <= set(opts)
    assert "STARPU_WORKERS_NOBIND" not in script


def test_fewer_ranks_than_planned_per_node(capsys):
    script = generate(capsys, "--cpus-per-node", "10", base=[
        "slurm", "--dist", "2dbc", "--nodes", "1", "--n", "1000", "--nb", "100",
        "--max-workers", "4"])
    opts = sbatch_lines(script)
    assert {"--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--cpus-per-task=10"} <= set(opts)


def test_ranks_per_node_given_and_uneven_last_node(capsys):
    script = generate(capsys, "--cpus-per-node", "8", "--ranks-per-node", "4", base=[
        "slurm", "--dist", "2dbc", "--nodes", "10", "--grid", "2x5", "--n", "1000", "--nb",
        "100", "--max-workers", "4"])
    opts = sbatch_lines(script)
    assert {"--nodes=3", "--ntasks=10", "--ntasks-per-node=4", "--cpus-per-task=2"} <= set(opts)
    assert "--grid 2x5" in launch_line(script)


def test_whole_nodes_when_cores_unknown(capsys, tmp_path):
    script = generate(capsys)
    opts = sbatch_lines(script)
    assert "--exclusive" in opts and not any(o.startswith("--cpus-per-task") for o in opts)
    assert "CORES_PER_RANK=$(( ${SLURM_CPUS_ON_NODE:-1} / RANKS_PER_NODE ))" in script
    assert 'JSON_DIR=${JSON_DIR:-$SLURM_SUBMIT_DIR}' in script


def test_overcommit_for_small_tests(capsys):
    script = generate(capsys, "--ranks-per-node", "4", "--overcommit", "--launcher", "mpirun",
                      base=["slurm", "--dist", "2dbc", "--nodes", "4", "--grid", "2x2",
                            "--n", "400", "--nb", "100", "--check", "--max-workers", "4"])
    opts = sbatch_lines(script)
    assert {"--nodes=1", "--ntasks=4", "--overcommit"} <= set(opts)
    # Slurm rejects --ntasks-per-node above the cores even with --overcommit
    assert not any(o.startswith("--ntasks-per-node") for o in opts)
    line = launch_line(script)
    assert line.startswith('mpirun -np "$SLURM_NTASKS" --oversubscribe --bind-to none')
    assert "--check" in line


def test_mpirun_binding(capsys):
    line = launch_line(generate(capsys, "--cpus-per-node", "10", "--launcher", "mpirun"))
    assert '--map-by "ppr:$RANKS_PER_NODE:node:PE=$CORES_PER_RANK" --bind-to core' in line


def test_options_passed_to_run(capsys, tmp_path):
    script = generate(capsys, "--seed", "7", "--sched", "lws", "--workers", "2",
                      "--run-arg=--no-cache", "--setup", "module load openmpi/4.1",
                      "--sbatch-option=--qos=debug", "--account", "proj42",
                      "--starchol", "/opt/starchol/bin/starchol", "--launcher", "srun",
                      "--mpi-plugin", "pmix_v4")
    line = launch_line(script)
    assert "--seed 7" in line and "--sched lws" in line and "--no-cache" in line
    assert line.startswith("srun --mpi=pmix_v4 ")
    assert "WORKERS=2" in script and "export STARPU_SCHED=lws" in script
    assert "\nmodule load openmpi/4.1\n" in script
    assert {"--qos=debug", "--account=proj42"} <= set(sbatch_lines(script))
    assert "STARCHOL=${STARCHOL:-/opt/starchol/bin/starchol}" in script


def test_default_starchol_is_next_to_python(capsys, tmp_path, monkeypatch):
    """The script's default starchol is the executable beside this Python (its
    environment's), else ``starchol`` from the job's PATH."""
    bin_dir = tmp_path / "env" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    assert "STARCHOL=${STARCHOL:-starchol}" in generate(capsys)
    exe = bin_dir / "starchol"
    exe.write_text("#!/bin/sh\n")
    assert "STARCHOL=${STARCHOL:-starchol}" in generate(capsys)     # not executable
    exe.chmod(0o755)
    assert f"STARCHOL=${{STARCHOL:-{exe}}}" in generate(capsys)


def test_custom_map_file_made_absolute(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.txt").write_text("2 2\n0 1\n2 0\n")
    script = generate(capsys, base=["slurm", "--dist", "custom", "--map-file", "m.txt",
                                    "--n", "400", "--nb", "100", "--max-workers", "4"])
    assert "--ntasks=3" in sbatch_lines(script)
    assert f"--map-file {tmp_path / 'm.txt'}" in launch_line(script)


def test_2p5d_and_hdf5_options_on_the_run_line():
    """--slices and --input/--output reach the run line (checked without the run parser)."""
    ns = _namespace(["--dist", "sbc25d", "--nodes", "12", "--slices", "2", "--nb", "100",
                     "--input", "a.h5:/A", "--output", "l.h5:/L", "--max-workers", "4"])
    plan = slurm_cmd.plans_from_args(ns, validate_run=False)[0]
    argv = slurm_cmd.run_argv(ns, plan)
    assert argv[argv.index("--slices") + 1] == "2"
    assert argv[argv.index("--input") + 1] == os.path.abspath("a.h5") + ":/A"
    assert argv[argv.index("--output") + 1] == os.path.abspath("l.h5") + ":/L"
    assert "--n" not in argv  # N comes from the file
    assert plan.tag == "sbc25d-c2-P12-Nin"
    ns = _namespace(["--dist", "2dbc25d", "--nodes", "8", "--slices", "2", "--grid", "2x2",
                     "--n", "1000", "--nb", "100", "--max-workers", "4"])
    argv = slurm_cmd.run_argv(ns, slurm_cmd.plans_from_args(ns, validate_run=False)[0])
    assert argv[argv.index("--grid") + 1] == "2x2" and argv[argv.index("--slices") + 1] == "2"


def test_2p5d_and_hdf5_through_the_cli(capsys):
    """--slices and --input reach the run line through the CLI (this installation's
    `run` takes both; a run line it would reject is refused: test_bad_options)."""
    assert run_accepts("--slices") and run_accepts("--input")
    argv = ["slurm", "--dist", "sbc25d", "--nodes", "12", "--slices", "2", "--n", "1000",
            "--nb", "100", "--max-workers", "4"]
    line = launch_line(generate(capsys, base=argv))
    assert "--dist sbc25d" in line and "--slices 2" in line
    argv = BASE + ["--input", "a.h5:/A"]
    assert f"--input {os.path.abspath('a.h5')}:/A" in launch_line(generate(capsys, base=argv))


def test_job_files_checked_when_the_script_is_written(capsys, tmp_path, monkeypatch):
    """No output on an input (the matrix, the map file) or on the script; an input that
    exists here is inspected like `starchol run` would; a missing one only warns."""
    import h5py
    import numpy as np

    monkeypatch.chdir(tmp_path)
    with h5py.File("a.h5", "w") as f:
        f["A"] = np.eye(400)
    before = (tmp_path / "a.h5").read_bytes()
    (tmp_path / "m.txt").write_text("2 2\n0 1\n2 0\n")
    base = ["slurm", "--dist", "sbc", "--nodes", "6", "--nb", "100", "--max-workers", "4",
            "--input", "a.h5:/A"]
    a = tmp_path / "a.h5"
    assert f"-o a.h5 is the input file (--input {a})" in usage_error(capsys, *base, "-o",
                                                                         "a.h5")
    assert f"--output {a} is the input file (--input {a})" in usage_error(
        capsys, *base, "--output", "a.h5:/L", "-o", "job.sbatch")
    assert "--n 300 does not match the input matrix, which is 400 x 400" in usage_error(
        capsys, *base, "--n", "300", "-o", "job.sbatch")
    assert "--nb 500 is larger than" in usage_error(
        capsys, *base[:6], "500", *base[7:], "-o", "job.sbatch")
    assert "-o m.txt is the input file (--map-file m.txt)" in usage_error(
        capsys, "slurm", "--dist", "custom", "--map-file", "m.txt", "--n", "400", "--nb",
        "100", "--max-workers", "4", "-o", "m.txt")
    assert a.read_bytes() == before and (tmp_path / "m.txt").read_text() == "2 2\n0 1\n2 0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5", "m.txt"]
    missing = ["slurm", "--dist", "sbc", "--nodes", "6", "--nb", "100", "--max-workers",
               "4", "--input", "later.h5:/A", "-o", "job.sbatch"]
    assert main(missing) == 0
    assert f"warning: --input {tmp_path / 'later.h5'} does not exist on this machine" in \
        capsys.readouterr().err


def _mem_lines(script):
    return [ln for ln in script.splitlines() if "--mem" in ln]


def test_mem_auto_asks_for_the_model_peak_of_a_node(capsys, tmp_path, monkeypatch):
    """--mem auto: R ranks x the peak of the rank that needs the most (node_memory, the
    rule of plan and run's pre-flight check) + 10 %, in MiB; N read from --input."""
    import h5py
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import node_memory

    def mib(peak, ranks):
        return -(-int(np.ceil(ranks * peak * 1.10)) // 2**20)

    # 5 cores and 4 workers per rank: 2 ranks per node
    script = generate(capsys, "--cpus-per-node", "5", "--mem", "auto")
    peak = int(node_memory(get_map("sbc", 6), 20000, 500)["total"].max())
    assert f"--mem={mib(peak, 2)}M" in sbatch_lines(script)
    assert "# memory per node (--mem auto): 2 rank(s) x " in script
    assert f"{mib(peak, 2)} MiB" in script and "(N = 20000;" in script
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert bash_syntax_ok(path)
    # --check, --gather and the cache off are part of the peak
    script = generate(capsys, "--mem", "auto", "--check", "--run-arg=--no-cache",
                      "--run-arg=--gather=f.npy")
    peak = int(node_memory(get_map("sbc", 6), 20000, 500, cache=False, check=True,
                           gather=True)["total"].max())
    assert f"#SBATCH --mem={mib(peak, 1)}M" in script
    assert "(N = 20000, --check, --gather, cache off;" in script
    # a 2.5D map holds c copies
    script = generate(capsys, "--mem", "auto", base=["slurm", "--dist", "sbc25d", "--nodes",
                                                     "12", "--slices", "2", "--n", "20000",
                                                     "--nb", "500", "--max-workers", "4"])
    peak = int(node_memory(get_map("sbc25d", 12, slices=2), 20000, 500)["total"].max())
    assert f"#SBATCH --mem={mib(peak, 1)}M" in script
    # N from the input file
    monkeypatch.chdir(tmp_path)
    with h5py.File("a.h5", "w") as f:
        f["A"] = np.eye(4000)
    script = generate(capsys, "--mem", "auto", base=["slurm", "--dist", "sbc", "--nodes",
                                                     "6", "--nb", "100", "--max-workers",
                                                     "4", "--input", "a.h5:/A"])
    peak = int(node_memory(get_map("sbc", 6), 4000, 100)["total"].max())
    assert f"#SBATCH --mem={mib(peak, 1)}M" in script and "(N = 4000;" in script
    capsys.readouterr()
    # an input that is not here: --n is needed
    assert "--mem auto needs the matrix order: give --n N (--input " in usage_error(
        capsys, "slurm", "--dist", "sbc", "--nodes", "6", "--nb", "100", "--max-workers",
        "4", "--input", "later.h5:/A", "--mem", "auto")


@pytest.mark.parametrize("value,lines", [
    ("64G", ["#SBATCH --mem=64G"]), ("64000", ["#SBATCH --mem=64000"]),
    ("0", ["# all the memory of each node (--mem=0)", "#SBATCH --mem=0"]),
    ("none", []), (None, [])])
def test_mem_size_zero_and_none(capsys, value, lines):
    script = generate(capsys, *(["--mem", value] if value else []))
    assert _mem_lines(script) == lines


@pytest.mark.parametrize("value", ["64GB", "-1", "lots", "1.5G", ""])
def test_bad_mem(capsys, value):
    assert ("--mem must be auto, none, 0 or a size as sbatch takes it (e.g. 64G or 64000 "
            f"for MB), got {value!r}") in usage_error(capsys, *BASE, "--mem", value)


def test_output_run_would_refuse_warns_when_the_script_is_written(capsys, tmp_path,
                                                                  monkeypatch):
    """Rerunning a job into its own output: the dataset exists, so the job's `starchol
    run` would fail at once after the queue wait; `starchol slurm` says so (a warning:
    the file may go before the job starts), unless --run-arg=--overwrite is given. So
    does a missing output folder. Nothing is warned for a new dataset in an existing
    file, and the output file is not touched."""
    import h5py
    import numpy as np

    monkeypatch.chdir(tmp_path)
    with h5py.File("l.h5", "w") as f:
        f["L"] = np.eye(4)
    before = (tmp_path / "l.h5").read_bytes()
    base = ["slurm", "--dist", "sbc", "--nodes", "6", "--n", "400", "--nb", "100",
            "--max-workers", "4", "-o", "job.sbatch", "--overwrite"]   # (written again)
    assert main(base + ["--output", "l.h5:/L"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: the job's starchol run would refuse its output if it started now: "
            f"{tmp_path / 'l.h5'}:/L already exists; pass --overwrite to replace it") in err
    assert "(here: --run-arg=--overwrite)" in err and "wrote job.sbatch" in err
    for fine in (["--output", "l.h5:/L", "--run-arg=--overwrite"], ["--output", "l.h5:/L2"]):
        assert main(base + fine) == 0
        assert "warning" not in capsys.readouterr().err, fine
    assert main(base + ["--output", "gone/l.h5:/L"]) == 0
    err = capsys.readouterr().err
    assert f"folder {tmp_path / 'gone'} does not exist" in err and "overwrite" not in err
    assert (tmp_path / "l.h5").read_bytes() == before


def _namespace(argv):
    parser = argparse.ArgumentParser()
    slurm_cmd.register(parser.add_subparsers())
    return parser.parse_args(["slurm"] + argv)


# -- writing files ------------------------------------------------------------------------
def test_write_file(capsys, tmp_path):
    out = tmp_path / "job.sbatch"
    assert main(BASE + ["-o", str(out)]) == 0
    assert "sbatch " in capsys.readouterr().err
    assert out.read_text().startswith("#!/bin/bash")
    assert os.stat(out).st_mode & stat.S_IXUSR
    assert [p.name for p in tmp_path.iterdir()] == ["job.sbatch"]  # no temporary left
    assert bash_syntax_ok(out)


def test_sweep(capsys, tmp_path):
    out = tmp_path / "campaign"
    assert main(["slurm", "--sweep", "--dist", "sbc,2dbc", "--nodes", "6,10", "--n",
                 "20000,40000", "--nb", "500", "--cpus-per-node", "5", "--max-workers", "4",
                 "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    expected = sorted(f"{d}-P{p}-N{n}.sbatch" for d in ("sbc", "2dbc") for p in (6, 10)
                      for n in (20000, 40000)) + ["submit_all.sh"]
    assert names == expected
    for name in names:
        assert bash_syntax_ok(out / name)
    s = (out / "sbc-P10-N40000.sbatch").read_text()
    assert "--ntasks=10" in sbatch_lines(s) and "--n 40000" in launch_line(s)
    assert f"JSON_DIR=${{JSON_DIR:-{out / 'results'}}}" in s
    submit = (out / "submit_all.sh").read_text()
    assert submit.count("\nsbatch ") == 8 and "sbatch sbc-P6-N20000.sbatch" in submit


def test_sweep_rejects_bad_combinations_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "campaign"
    err = usage_error(capsys, "slurm", "--sweep", "--dist", "sbc,2dbc", "--nodes", "6,8",
                      "--n", "1000", "--nb", "100", "--max-workers", "4", "-o", str(out))
    assert "sbc P=8" in err and "r(r-1)/2" in err and "2dbc P=8" not in err
    assert not out.exists()


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["90", "1:30", "1:2:3", "00:61:00", "00:00:75", "00:00:00",
                                  "1-25:00:00", "abc", "-01:00:00"])
def test_bad_time(capsys, text):
    err = usage_error(capsys, *BASE, f"--time={text}")
    assert "--time" in err


@pytest.mark.parametrize("text, seconds", [("01:30:00", 5400), ("2-00:00:00", 172800),
                                           ("0:05:00", 300), ("100:00:00", 360000)])
def test_good_time(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("argv, message", [
    (["--dist", "sbc", "--nodes", "20"], "sbc needs P = r(r-1)/2"),
    (["--dist", "2dbc", "--nodes", "6", "--grid", "4x2"], "--grid 4x2 has 8 nodes"),
    (["--dist", "sbc", "--nodes", "6", "--grid", "2x3"], "--grid applies to 2dbc"),
    # the map-option checks of run, in their one home (options.check_map_options)
    (["--dist", "sbc", "--nodes", "6", "--slices", "2"],
     "--slices applies to the 2.5D maps (2dbc25d, sbc25d, sym25d), not sbc"),
    (["--dist", "sbc25d", "--nodes", "6", "--slices", "0"], "argument --slices: must be an integer >= 1, got '0'"),
    (["--dist", "custom", "--nodes", "6"], "--dist custom needs --map-file FILE"),
    (["--dist", "sbc25d", "--nodes", "10", "--slices", "3"], "divisible by 3"),
    (["--dist", "nope", "--nodes", "6"], "unknown map"),
    (["--dist", "2dbc"], "2dbc needs --nodes"),
    (["--dist", "2dbc", "--nodes", "100000000"], "--nodes must be an integer from 1 to"),
])
def test_bad_map(capsys, argv, message):
    err = usage_error(capsys, "slurm", *argv, "--n", "1000", "--nb", "100", "--max-workers", "4")
    assert message in err, err


@pytest.mark.parametrize("extra, message", [
    (["--workers", "5"], "--workers must be between 1 and 4"),
    (["--cpus-per-node", "2", "--ranks-per-node", "4"], "add --overcommit"),
    (["--cpus-per-node", "0"], "argument --cpus-per-node: must be an integer >= 1"),
    (["--ranks-per-node", "0"], "argument --ranks-per-node: must be an integer >= 1"),
    (["--partition", "a b"], "--partition"),
    (["--sched", "Bad Name"], "--sched"),
    (["--sched", "bogus"], "--sched 'bogus' is not a StarPU scheduler"),
    (["--time", "1000000-00:00:00"], "longer than 365 days"),
    (["--input", "a.h5"], "FILE.h5:/DATASET"),
    (["--sbatch-option", "qos=debug"], "--sbatch-option"),
    (["--launcher", "mpirun", "--mpi-plugin", "pmi2"], "--mpi-plugin applies to --launcher srun"),
    (["--mpi-plugin", "pmix_v4"], "--mpi-plugin applies to --launcher srun (the default "
                                  "launcher is mpirun)"),
    (["--run-arg=--no-such-option"], "would reject"),
])
def test_bad_options(capsys, extra, message):
    err = usage_error(capsys, *BASE, *extra)
    assert message in err, err


def test_bad_sizes(capsys):
    assert "--nb 500 is larger than --n 100" in usage_error(
        capsys, "slurm", "--dist", "sbc", "--nodes", "6", "--n", "100", "--nb", "500",
        "--max-workers", "4")
    assert "give the matrix order --n" in usage_error(
        capsys, "slurm", "--dist", "sbc", "--nodes", "6", "--nb", "500", "--max-workers", "4")


def test_lists_need_sweep_and_sweep_needs_folder(capsys, tmp_path):
    assert "lists need --sweep" in usage_error(capsys, "slurm", "--dist", "sbc,2dbc", "--nodes",
                                               "6", "--n", "1000", "--nb", "100")
    assert "-o DIR" in usage_error(capsys, "slurm", "--sweep", "--dist", "sbc", "--nodes", "6",
                                   "--n", "1000", "--nb", "100")
    assert "does not exist" in usage_error(capsys, *BASE, "-o", str(tmp_path / "no" / "x.sh"))
    assert "is a folder" in usage_error(capsys, *BASE, "-o", str(tmp_path))


# -- the script's own logic, with stand-ins for srun and starchol ---------------------------
def test_script_logic_with_stand_ins(capsys, tmp_path):
    """Run a generated script outside Slurm: fake mpirun, srun, sinfo and starchol,
    SLURM_* variables set."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls.txt"
    (bin_dir / "srun").write_text(
        "#!/bin/bash\n"
        "# stand-in: drop srun's options, run the command once per task\n"
        "while [[ $# -gt 0 && $1 == -* ]]; do shift; done\n"
        "for ((i = 0; i < ${SLURM_NTASKS:-1}; i++)); do SLURM_PROCID=$i \"$@\" || exit $?; done\n")
    (bin_dir / "mpirun").write_text(
        "#!/bin/bash\n"
        "# stand-in: drop mpirun's options, run the command once per rank\n"
        "while [[ $# -gt 0 && $1 == -* ]]; do\n"
        "    case $1 in -np|--map-by|--bind-to) shift 2 ;; *) shift ;; esac\n"
        "done\n"
        "for ((i = 0; i < ${SLURM_NTASKS:-1}; i++)); do OMPI_COMM_WORLD_RANK=$i \"$@\" || exit $?; done\n")
    # Slurm marks node7 down (a failed job names it)
    (bin_dir / "sinfo").write_text("#!/bin/bash\necho 'node7 (down*, Not responding)'\n")
    (bin_dir / "fake-starchol").write_text(
        "#!/bin/bash\n"
        f"echo \"STARPU_HOME=$STARPU_HOME NCPU=$STARPU_NCPU ARGS=$*\" >> {record}\n"
        "[ -d \"$STARPU_HOME\" ] || exit 3\n"
        "while [[ $# -gt 0 ]]; do if [[ $1 == --json ]]; then echo '{}' > \"$2\"; fi; shift; done\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    script = tmp_path / "job.sh"
    assert main(["slurm", "--dist", "2dbc", "--nodes", "2", "--n", "400", "--nb", "100",
                 "--ranks-per-node", "2", "--json-dir", str(tmp_path / "res"), "--workers", "2",
                 "--max-workers", "4",
                 "--starchol", str(bin_dir / "fake-starchol"), "-o", str(script)]) == 0
    capsys.readouterr()
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_JOB_ID="4242",
               SLURM_NTASKS="2", SLURM_CPUS_ON_NODE="7", SLURM_JOB_NUM_NODES="1",
               SLURM_SUBMIT_DIR=str(tmp_path), TMPDIR=str(tmp_path / "node-tmp"))
    env.pop("JSON_DIR", None)
    (tmp_path / "node-tmp").mkdir()
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"report: {tmp_path / 'res' / 'starchol-4242.json'}" in proc.stdout
    calls = record.read_text().splitlines()
    assert len(calls) == 2
    homes = sorted(re.search(r"STARPU_HOME=(\S+)", c).group(1) for c in calls)
    assert homes == [str(tmp_path / "node-tmp" / "starpu-4242" / f"rank-{i}") for i in (0, 1)]
    assert all("NCPU=2" in c and "--workers 2" in c for c in calls)
    assert not (tmp_path / "node-tmp" / "starpu-4242").exists()  # cleaned up
    json.loads((tmp_path / "res" / "starchol-4242.json").read_text())

    # a run that writes no report fails the job
    (bin_dir / "fake-starchol").write_text("#!/bin/bash\nexit 0\n")
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env=dict(env, SLURM_JOB_ID="4243"), timeout=60)
    assert proc.returncode == 1 and "no report written" in proc.stderr
    assert ("starchol: job 4243 failed (status 1); its nodes that Slurm marks down or not "
            "responding: node7 (down*, Not responding)") in proc.stderr, proc.stderr

    # a job resized at submission (sbatch --ntasks=3 for this 2-rank map) stops before
    # any work: starchol run would have made a map of 3 nodes, another experiment
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env=dict(env, SLURM_JOB_ID="4244", SLURM_NTASKS="3"), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert ("starchol: this job has 3 tasks, but the script runs 2dbc 1x2 (2 nodes) on 2 "
            "ranks") in proc.stderr, proc.stderr
    assert not (tmp_path / "node-tmp" / "starpu-4244").exists()


def _retry_script(capsys, tmp_path, mpirun_body, starchol_body):
    """A 2-rank script whose stand-in mpirun runs ``mpirun_body`` (bash; ``$CALLS`` counts
    its calls, ``run_ranks`` starts the ranks), and its environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text(
        "#!/bin/bash\n"
        f"echo call >> {tmp_path}/mpirun-calls\n"
        f"CALLS=$(wc -l < {tmp_path}/mpirun-calls)\n"
        "while [[ $# -gt 0 && $1 == -* ]]; do\n"
        "    case $1 in -np|--map-by|--bind-to) shift 2 ;; *) shift ;; esac\n"
        "done\n"
        "run_ranks() { for ((i = 0; i < ${SLURM_NTASKS:-1}; i++)); do\n"
        "    OMPI_COMM_WORLD_RANK=$i \"$@\" || return $?; done; }\n"
        + mpirun_body + "\n")
    (bin_dir / "sinfo").write_text("#!/bin/bash\n")
    (bin_dir / "fake-starchol").write_text("#!/bin/bash\n" + starchol_body + "\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    script = tmp_path / "job.sh"
    assert main(["slurm", "--dist", "2dbc", "--nodes", "2", "--n", "400", "--nb", "100",
                 "--ranks-per-node", "2", "--json-dir", str(tmp_path / "res"), "--workers", "1",
                 "--starchol", str(bin_dir / "fake-starchol"), "-o", str(script)]) == 0
    capsys.readouterr()
    (tmp_path / "node-tmp").mkdir()
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_JOB_ID="77",
               SLURM_NTASKS="2", SLURM_CPUS_ON_NODE="2", SLURM_JOB_NUM_NODES="1",
               SLURM_SUBMIT_DIR=str(tmp_path), TMPDIR=str(tmp_path / "node-tmp"),
               STARCHOL_LAUNCH_RETRY_S="0")
    env.pop("JSON_DIR", None)
    env.pop("STARCHOL_LAUNCH_TRIES", None)
    return script, env


def _calls(tmp_path):
    return len((tmp_path / "mpirun-calls").read_text().splitlines())


WRITE_REPORT = ("while [[ $# -gt 0 ]]; do if [[ $1 == --json ]]; then echo '{}' > \"$2\"; fi; "
                "shift; done")


def test_launch_that_fails_before_the_ranks_start_is_tried_again(capsys, tmp_path):
    """mpirun fails at its first call without starting a rank (a daemon that could not
    start): the script says so and launches again; the second launch runs the job."""
    script, env = _retry_script(capsys, tmp_path,
                                '[ "$CALLS" -ge 2 ] || exit 1\nrun_ranks "$@"', WRITE_REPORT)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _calls(tmp_path) == 2
    assert ("starchol: job 77: the launch failed (status 1) before any rank started (try 1 "
            "of 3); trying again in 0 s") in proc.stderr, proc.stderr
    assert "report: " in proc.stdout
    assert not (tmp_path / "node-tmp" / "starpu-77").exists()


def test_launch_tries_are_bounded(capsys, tmp_path):
    """A launch that never starts a rank is tried STARCHOL_LAUNCH_TRIES times (default 3);
    the job then fails with the launcher's status."""
    script, env = _retry_script(capsys, tmp_path, "exit 5", WRITE_REPORT)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 5, proc.stderr
    assert _calls(tmp_path) == 3
    assert proc.stderr.count("before any rank started") == 2, proc.stderr
    assert "(try 2 of 3)" in proc.stderr and "try 3" not in proc.stderr
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env=dict(env, STARCHOL_LAUNCH_TRIES="1"), timeout=60)
    assert proc.returncode == 5 and _calls(tmp_path) == 4
    assert "trying again" not in proc.stderr


@pytest.mark.parametrize("mpirun_body", ['run_ranks "$@"',          # every rank fails
                                         'run_ranks "$@"; exit 1',  # ranks ran; mpirun fails
                                         "exit 127"])               # no launcher at all
def test_a_run_whose_ranks_started_is_not_launched_again(capsys, tmp_path, mpirun_body):
    """A failure after a rank started is the job's: one launch, the run's status. So is a
    launcher that cannot be run (status 127)."""
    script, env = _retry_script(capsys, tmp_path, mpirun_body, "exit 1")
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode in (1, 127), proc.stderr
    assert _calls(tmp_path) == 1
    assert "trying again" not in proc.stderr, proc.stderr


def test_stale_rank_folders_of_a_requeued_run_do_not_stop_a_retry(capsys, tmp_path):
    """A requeued job has the same id: rank folders its first run left on the node must
    not count as ranks of this launch."""
    script, env = _retry_script(capsys, tmp_path,
                                '[ "$CALLS" -ge 2 ] || exit 1\nrun_ranks "$@"', WRITE_REPORT)
    (tmp_path / "node-tmp" / "starpu-77" / "rank-1").mkdir(parents=True)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env=dict(env, SLURM_RESTART_COUNT="1"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _calls(tmp_path) == 2


def test_float32_job(capsys):
    """--dtype float32 goes to the run line, and --mem auto counts 4-byte entries."""
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import node_memory

    script = generate(capsys, "--dtype", "float32", "--mem", "auto")
    assert "--dtype float32" in launch_line(script)
    peak = int(node_memory(get_map("sbc", 6), 20000, 500, itemsize=4)["total"].max())
    assert f"#SBATCH --mem={-(-int(np.ceil(peak * 1.10)) // 2**20)}M" in script
    assert "(N = 20000, float32;" in script
    assert "--dtype" not in launch_line(generate(capsys))       # float64: run's default
    with pytest.raises(SystemExit) as exc:
        main([*BASE, "--dtype", "float16"])
    assert exc.value.code == 2
    assert "--dtype: invalid choice: 'float16'" in capsys.readouterr().err


def test_mem_auto_counts_generated_right_hand_sides(capsys):
    """--run-arg=--nrhs=K: --mem auto adds the model's bound for B (node_memory nrhs)."""
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import node_memory

    script = generate(capsys, "--mem", "auto", "--run-arg=--nrhs=64")
    peak = int(node_memory(get_map("sbc", 6), 20000, 500, nrhs=64)["total"].max())
    assert f"#SBATCH --mem={-(-int(np.ceil(peak * 1.10)) // 2**20)}M" in script
    assert "--nrhs=64" in launch_line(script)


def test_mem_auto_counts_right_hand_sides_of_a_file(capsys, tmp_path):
    """--run-arg=--rhs=FILE: --mem auto reads K from the file when it is here; else it
    says (comment and warning) that B is left out."""
    import h5py
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import node_memory

    with h5py.File(tmp_path / "b.h5", "w") as f:
        f["B"] = np.zeros((20000, 48))
    script = generate(capsys, "--mem", "auto", f"--run-arg=--rhs={tmp_path / 'b.h5'}:/B")
    peak = int(node_memory(get_map("sbc", 6), 20000, 500, nrhs=48)["total"].max())
    assert f"#SBATCH --mem={-(-int(np.ceil(peak * 1.10)) // 2**20)}M" in script
    assert "K = 48 right-hand sides" in script
    missing = tmp_path / "gone.h5"
    script = generate(capsys, "--mem", "auto", f"--run-arg=--rhs={missing}:/B")
    peak = int(node_memory(get_map("sbc", 6), 20000, 500)["total"].max())
    assert f"#SBATCH --mem={-(-int(np.ceil(peak * 1.10)) // 2**20)}M" in script
    assert f"# (not counted: the right-hand sides of --rhs {missing}:/B, not on this" in script


def test_mem_auto_counts_mixed_precision(capsys):
    """--dtype mixed with --run-arg=--nrhs=K: --mem auto asks for the mixed model (float32
    tiles plus the float64 A and right-hand sides); without right-hand sides the job is
    refused before any script is written."""
    import numpy as np

    from starchol.distributions import get_map
    from starchol.model.memory import node_memory

    script = generate(capsys, "--mem", "auto", "--dtype", "mixed", "--run-arg=--nrhs=2")
    peak = int(node_memory(get_map("sbc", 6), 20000, 500, nrhs=2, mixed=True)["total"].max())
    assert f"#SBATCH --mem={-(-int(np.ceil(peak * 1.10)) // 2**20)}M" in script
    assert "--dtype mixed" in launch_line(script) and "--nrhs=2" in launch_line(script)
    assert "give the run its right-hand sides" in usage_error(capsys, *BASE, "--dtype",
                                                              "mixed")
