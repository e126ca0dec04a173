"""Reliability guarantees that need no MPI job: one atomic-write home, distinct outputs,
safe publication, collective verdicts for any exception type, StarPU environment checks,
validators, small-file HDF5 layout, progress lines. See docs/reliability.md."""
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from conftest import sha256_file, signals_default

from starchol.cli import check_command_argv, main
from starchol.collective import describe, run_everywhere
from starchol.errors import StarcholError, UsageError
from starchol.files import atomic_path, check_distinct, parse_target, write_atomic
from starchol.jobs.output import INPUT_ROLES
from starchol.jobs.options import (check_node_count, check_positive_finite,
                                   check_scheduler_name, check_time_limit)
from starchol.jobs.progress import Progress
from starchol.files import OutputAppeared, publish
from starchol.linalg.hdf5_io import FactorWriter, write_matrix
from starchol.runtime.starpu_env import check_environment


class FakeComm:
    """Rank 0 of a 3-rank job whose ranks' verdicts are given."""

    def __init__(self, errors):
        self.errors = errors

    def Get_rank(self):
        return 0

    def Get_size(self):
        return len(self.errors)

    def allgather(self, obj):   # obj: this rank's error, or (error, what must be alike)
        if isinstance(obj, tuple):
            return [obj if k == 0 else (e, obj[1]) for k, e in enumerate(self.errors)]
        return [obj if k == 0 else e for k, e in enumerate(self.errors)]


# -- collective verdicts -------------------------------------------------------------
def test_any_exception_type_becomes_one_agreed_error():
    with pytest.raises(KeyError):   # another rank's KeyError reaches this rank too
        run_everywhere(FakeComm([None, KeyError("k"), None]), lambda: 1)
    with pytest.raises(FileNotFoundError):
        run_everywhere(FakeComm([None, None]), lambda: open("/nonexistent/x"))
    assert run_everywhere(None, lambda x: x + 1, 1) == 2
    assert "No such file" in describe(FileNotFoundError(2, "No such file", "x"))


# -- files ---------------------------------------------------------------------------
def test_outputs_must_differ_from_input_and_each_other(tmp_path):
    a = tmp_path / "a.h5"
    a.write_bytes(b"x")
    link = tmp_path / "link.h5"
    link.symlink_to(a)
    hard = tmp_path / "hard.h5"
    os.link(a, hard)
    for other in (a, link, hard, tmp_path / "." / "a.h5"):
        with pytest.raises(UsageError, match="never modifies its input"):
            check_distinct([("--input", str(a)), ("--json", str(other))], INPUT_ROLES)
    with pytest.raises(UsageError, match="--gather .* is also the --output file"):
        check_distinct([("--output", str(tmp_path / "o")), ("--gather", str(tmp_path / "o"))],
                       INPUT_ROLES)
    check_distinct([("--input", str(a)), ("--json", str(tmp_path / "b.json")),
                    ("--gather", None)], INPUT_ROLES)
    # a map file is an input too, whatever the order of the roles; two inputs may share
    with pytest.raises(UsageError, match=r"--png .* is the input file \(--map-file "):
        check_distinct([("--png", str(a)), ("--map-file", str(link))], INPUT_ROLES)
    check_distinct([("--input", str(a)), ("--map-file", str(hard))], INPUT_ROLES)
    # the library knows no flags: the caller says which roles are read (none here)
    with pytest.raises(UsageError, match=r"^out .* is also the path file"):
        check_distinct([("path", str(a)), ("out", str(hard))])
    with pytest.raises(UsageError, match=r"^out .* is the input file \(path "):
        check_distinct([("path", str(a)), ("out", str(hard))], inputs=("path",))


def test_map_and_run_never_write_over_the_map_file(tmp_path, capsys):
    import numpy as np

    from starchol.cli import main

    m = tmp_path / "m.npy"
    np.save(m, np.zeros((1, 1), dtype=int))
    before = m.read_bytes()
    for argv in (["map", "--dist", "custom", "--map-file", str(m), "--nt", "4", "--png",
                  str(m)],
                 ["run", "--dist", "custom", "--map-file", str(m), "--n", "64", "--nb",
                  "32", "--json", str(m)],
                 ["run", "--dist", "custom", "--map-file", str(m), "--n", "64", "--nb",
                  "32", "--gather", str(m)],
                 ["volume", "--dist", "custom", "--map-file", str(m), "--nt", "8", "--json",
                  str(m)]):
        assert main(argv) == 2
        assert f"is the input file (--map-file {m})" in capsys.readouterr().err
    assert m.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.npy"]


def test_parse_target_refuses_empty_dataset():
    assert parse_target("d/a.h5:g/A") == ("d/a.h5", "/g/A")
    for bad in ("a.h5", "a.h5:", ":/A", "a.h5:/"):
        with pytest.raises(UsageError, match="^target must look like FILE.h5:/DATASET"):
            parse_target(bad)           # the library's word; the command line's: its flag


def test_atomic_write_leaves_nothing_on_error_and_writes_through_links(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(str(link), "new")
    assert link.is_symlink() and target.read_text() == "new"
    with pytest.raises(RuntimeError):
        with atomic_path(str(tmp_path / "x.txt")) as tmp:
            open(tmp, "w").write("partial")
            raise RuntimeError("boom")
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


def test_replaced_files_keep_their_mode_and_read_only_ones_are_refused(tmp_path):
    """A replaced file came back 0666 & ~umask whatever its mode was."""
    import stat

    from starchol.files import check_folder_writable

    target = tmp_path / "run.json"
    target.write_text("old")
    target.chmod(0o600)
    write_atomic(str(target), "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o444)
    with pytest.raises(UsageError, match=r"^--json .*run\.json is read-only"):
        check_folder_writable(str(target), "--json")
    target.chmod(0o644)
    check_folder_writable(str(target), "--json")


def test_publish_never_replaces_a_file_that_appeared(tmp_path):
    out = tmp_path / "L.h5"
    tmp = tmp_path / ".L.h5.tmp"
    tmp.write_bytes(b"ours")
    out.write_bytes(b"theirs")            # appeared during the run (it was absent before)
    with pytest.raises(OutputAppeared) as info:
        publish(str(tmp), str(out), None)
    assert out.read_bytes() == b"theirs"
    assert open(info.value.kept, "rb").read() == b"ours"
    assert info.value.kept in str(info.value) and not tmp.exists()
    tmp.write_bytes(b"ours")
    publish(str(tmp), str(out), None, overwrite=True)
    assert out.read_bytes() == b"ours"


def test_factor_file_is_small_and_a_changed_output_is_kept_aside(tmp_path):
    from mpi4py import MPI

    from starchol.distributions import get_map
    from starchol.linalg.distributed import DistributedMatrix

    n, nb = 600, 100
    a = DistributedMatrix((n, n), nb, get_map("2dbc", 1), comm=MPI.COMM_SELF)
    for key in a.local_keys():
        a.tiles[key] = np.ones((nb, nb), order="F")
    path = tmp_path / "L.h5"
    FactorWriter(str(path), "/L", n, nb=nb).write(a)
    assert os.path.getsize(path) < 4.0e6  # 8.4 MB with 512 x 512 chunks before
    with h5py.File(path) as fh:
        assert np.allclose(fh["L"][:], np.tril(np.ones((n, n))))
    w = FactorWriter(str(path), "/M", n, nb=nb)
    with h5py.File(path, "a") as fh:   # another program changes the file meanwhile
        fh["other"] = np.zeros(3)
    before = sha256_file(path)
    with pytest.raises(OutputAppeared, match="changed while this run was working"):
        w.write(a)
    assert sha256_file(path) == before
    kept = [f for f in os.listdir(tmp_path) if ".starchol-" in f]
    assert len(kept) == 1 and sorted(os.listdir(tmp_path)) == sorted(["L.h5", kept[0]])


def test_generate_refusals_leave_inputs_and_folder_untouched(tmp_path, capsys):
    good = tmp_path / "a.h5"
    assert main(["generate", "--n", "200", "--output", f"{good}:/A"]) == 0
    trunc = tmp_path / "t.h5"
    trunc.write_bytes(good.read_bytes()[:4000])
    before = {p: sha256_file(tmp_path / p) for p in os.listdir(tmp_path)}
    assert main(["generate", "--n", "50", "--output", f"{trunc}:/B"]) == 2
    assert "cannot be opened by HDF5" in capsys.readouterr().err
    assert main(["generate", "--n", "10000000", "--output", f"{tmp_path}/big.h5:/A"]) == 2
    assert "of disk" in capsys.readouterr().err
    assert main(["generate", "--n", "50", "--output", f"{tmp_path}/no/x.h5:/A"]) == 2
    assert "does not exist" in capsys.readouterr().err
    for kind, words in (("foo", "unknown --kind 'foo'; use spd or indefinite:J"),
                        ("indefinite:200", "--kind indefinite:200: J must be a global "
                                           "column in 0..49")):
        assert main(["generate", "--n", "50", "--output", f"{tmp_path}/k.h5:/A",
                     "--kind", kind]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"starchol generate: error: {words}") and "--matrix" not in err
    assert {p: sha256_file(tmp_path / p) for p in os.listdir(tmp_path)} == before


def test_generate_through_a_symlink_writes_the_target(tmp_path):
    real = tmp_path / "real.h5"
    link = tmp_path / "link.h5"
    link.symlink_to(real)
    assert main(["generate", "--n", "20", "--output", f"{link}:/A"]) == 0
    assert link.is_symlink()
    with h5py.File(real) as fh:
        assert fh["A"].shape == (20, 20)


def test_big_endian_input_is_accepted(tmp_path):
    from starchol.linalg.hdf5_io import inspect_file

    path = tmp_path / "be.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("A", data=np.eye(4), dtype=">f8")
    assert inspect_file(str(path), "/A") == (4, "float64 (big-endian)")


def test_map_refusals(tmp_path, capsys):
    assert main(["map", "--dist", "sbc", "--nodes", "3", "--nt", "100000"]) == 2
    assert "owner table" in capsys.readouterr().err
    assert main(["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--png",
                 f"{tmp_path}/no/m.png"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["map", "--dist", "sbc", "--nodes", "3", "--nt", "6", "--chameleon",
                 f"{tmp_path}/no/m.txt"]) == 2
    assert main(["map", "--dist", "custom", "--map-file", str(tmp_path), "--nt", "6"]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


# -- settings ------------------------------------------------------------------------
@pytest.mark.parametrize("env, words", [
    ({"STARPU_NCPU": "-1"}, "STARPU_NCPU='-1' must be >= 0"),
    ({"STARPU_NCPU": "abc"}, "must be a non-negative integer"),
    ({"STARCHOL_IDLE_SPIN_US": "2e2"}, "STARCHOL_IDLE_SPIN_US='2e2' must be a non-negative"),
    ({"STARCHOL_IDLE_LAST_SLEEPS": "yes"}, "STARCHOL_IDLE_LAST_SLEEPS='yes' must be a non-neg"),
    ({"STARCHOL_MPI_YIELD": "-1"}, "STARCHOL_MPI_YIELD='-1' must be >= 0"),
    # the patch variables' former names, in StarPU's name space, are no longer read
    ({"STARPU_IDLE_SPIN_US": "0"}, "STARPU_IDLE_SPIN_US is now called STARCHOL_IDLE_SPIN_US"),
    ({"STARPU_IDLE_LAST_SLEEPS": "0"}, "set STARCHOL_IDLE_LAST_SLEEPS=0 instead"),
    # 0 sends in flight: StarPU-MPI would never send (the job would hang)
    ({"STARPU_MPI_NDETACHED_SEND": "0"}, "STARPU_MPI_NDETACHED_SEND='0' must be >= 1"),
    ({"STARPU_MPI_NREADY_PROCESS": "x"}, "STARPU_MPI_NREADY_PROCESS='x' must be a positive"),
    # 0 CUDA workers per GPU: StarPU aborts on an assertion
    ({"STARPU_NWORKER_PER_CUDA": "0"}, "STARPU_NWORKER_PER_CUDA='0' must be >= 1"),
    ({"STARPU_HOME": "/nonexistent/x"}, "does not exist"),
    ({"STARPU_HOME": "/proc/x"}, "does not exist"),
    ({"HOME": "/proc"}, "not writable"),
    ({"STARPU_SCHED": "bogus"}, "not a StarPU scheduling policy"),
])
def test_starpu_environment_is_refused_before_start(env, words, tmp_path):
    full = {"HOME": str(tmp_path), **env}
    with pytest.raises(UsageError, match=words):
        check_environment(full, schedulers=["prio", "lws"])
    check_environment({"HOME": str(tmp_path), "STARPU_NCPU": "2",
                       "STARPU_MPI_NDETACHED_SEND": "2"}, schedulers=["prio"])
    # StarPU makes a missing home below an existing writable folder (Slurm scripts do so)
    check_environment({"STARPU_HOME": str(tmp_path / "job-1" / "rank-0")})


def test_validators():
    with pytest.raises(UsageError, match="--sched 'bogus'"):
        check_scheduler_name("bogus")
    assert check_scheduler_name("prio") == "prio"
    with pytest.raises(UsageError, match="--nodes must be an integer from 1 to"):
        check_node_count(100000000)
    with pytest.raises(UsageError, match="longer than 365 days"):
        check_time_limit(1000000 * 86400, "1000000-00:00:00")
    with pytest.raises(UsageError, match="positive finite"):
        check_positive_finite(float("nan"), "--memory-per-node")
    assert main(["plan", "--nodes", "6", "--n", "1000", "--nb", "100",
                 "--memory-per-node", "nan"]) == 2


def test_run_names_the_slice_count_that_fits():
    from starchol.cli import build_parser, flag_message
    from starchol.jobs.run_plan import validate

    args = build_parser().parse_args(["run", "--dist", "sbc25d", "--n", "400", "--nb", "100"])
    with pytest.raises(UsageError) as exc:
        validate(args, 4)      # 4 ranks, 1 slice by default: 2 slices of SBC(2) fit
    text = flag_message(exc.value)
    assert "with --slices 1 use mpirun -np 2 or mpirun -np 3 or mpirun -np 6 or " \
           "mpirun -np 8, --slices 2, or --dist sym25d" in text and "--nodes" not in text


def test_command_argv_check_uses_public_parsers():
    assert check_command_argv("run", ["--dist", "sbc", "--n", "10", "--nb", "5"]) is None
    assert "--bogus" in check_command_argv("run", ["--dist", "sbc", "--nb", "5", "--bogus"])
    assert check_command_argv("nothing", []) == "no nothing command"
    assert check_command_argv("run", ["--dist", "sbc", "--nb", "5", "--no-cache"]) is None


# -- progress ------------------------------------------------------------------------
class Pipe:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def isatty(self):
        return False


def test_progress_prints_lines_every_few_percent_off_a_terminal():
    out = Pipe()
    p = Progress("rank 0 tasks", unit="tasks", enabled=True, stream=out, step_s=1e9)
    for done in range(0, 1001):
        p(done, 1000)
    lines = out.text.splitlines()
    assert 9 <= len(lines) <= 12 and "\r" not in out.text
    assert lines[-1].startswith("rank 0 tasks: 1000/1000 tasks (100%)")
    assert Progress("x", stream=Pipe()).enabled is False  # model commands: terminal only


# -- signals -------------------------------------------------------------------------
SLOW_WRITE = """
import sys, time
import numpy as np
from starchol.linalg.hdf5_io import write_matrix

def rows(r0, r1):
    time.sleep(0.2)
    return np.ones((r1 - r0, 300))

write_matrix(sys.argv[1], "/B", 300, rows, rows_per_chunk=10)   # 30 blocks: 6 s
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_default_action_signal_during_a_library_write_leaves_no_temporary(tmp_path,
                                                                          signum):
    """Without the command line's watcher (the library in a program of one's own),
    SIGTERM or SIGHUP at their default action ended the process and left
    .a.h5.tmp-PID-XXXX/ behind. They still end it, by the same signal."""
    out = tmp_path / "a.h5"
    assert main(["generate", "--n", "20", "--output", f"{out}:/A"]) == 0
    before = sha256_file(out)
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITE, str(out)],
                            preexec_fn=signals_default)    # as if not under nohup
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(n.startswith(".") for n in os.listdir(tmp_path)):
            break       # the temporary file exists: the write has begun
        time.sleep(0.01)
    time.sleep(0.5)     # into the copy of a.h5 and the rows
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == -signum
    assert sorted(os.listdir(tmp_path)) == ["a.h5"] and sha256_file(out) == before
    # and in this process, a finished write gives the signals back as they were
    dispositions = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)]
    write_matrix(str(out), "/C", 3, lambda r0, r1: np.eye(3)[r0:r1])
    assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)] == dispositions


def test_sigterm_during_generate_leaves_no_temporary_file(tmp_path):
    """Issue 9.6: SIGTERM while the output is being written (the copy of the existing
    file included) leaves the output as it was and no hidden temporary file."""
    out = tmp_path / "a.h5"
    assert main(["generate", "--n", "100", "--output", f"{out}:/small"]) == 0
    before = sha256_file(out)
    proc = subprocess.Popen([sys.executable, "-m", "starchol", "generate", "--n", "4000",
                             "--output", f"{out}:/B"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(n.startswith(".") for n in os.listdir(tmp_path)):
            break       # the temporary file exists: the write has begun
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("generate finished before the signal")
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "SIGTERM" in err
    assert sorted(os.listdir(tmp_path)) == ["a.h5"] and sha256_file(out) == before


def test_run_preflight_returns_a_plan_and_leaves_the_options_alone(tmp_path):
    """``run``'s pre-flight settles the --gather name, the scheduler, the symmetry
    tolerance and the --json file's fingerprint in its typed RunPlan; the parsed options
    are not modified."""
    import copy

    from starchol.cli import build_parser
    from starchol.jobs.run_plan import RunPlan, preflight
    from starchol.runtime.backend import DEFAULT_SCHEDULER

    args = build_parser().parse_args(
        ["run", "--dist", "2dbc", "--n", "64", "--nb", "16", "--gather",
         str(tmp_path / "L"), "--json", str(tmp_path / "r.json")])
    before = copy.deepcopy(vars(args))
    plan = preflight(args, 0, 1, 1)
    assert vars(args) == before
    assert isinstance(plan, RunPlan) and plan.n == 64 and plan.tile_map.nodes == 1
    assert plan.gather == str(tmp_path / "L.npy") and plan.gather_before is None
    assert plan.sched == DEFAULT_SCHEDULER and plan.symmetry_tol > 0 and plan.nrhs == 0
