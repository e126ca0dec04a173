"""The benchmark scripts (benchmarks/*.py) and what they share (benchmarks/common.py):
bad arguments end with argparse's one-line error (exit 2) before any work, ``--json`` is
written whole or not at all, Ctrl-C ends a run with exit status 130 and one line, and
engine_vs_debian.py builds its Debian copy without writing into the checkout."""
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import run_or_fail, sha256_file, signals_default

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)
import common  # noqa: E402
import engine_vs_debian  # noqa: E402

SCRIPTS = sorted(f for f in os.listdir(BENCH) if f.endswith(".py") and f != "common.py")


def _script(name, *args, timeout=120, env=None):
    return run_or_fail([sys.executable, os.path.join(BENCH, name), *map(str, args)],
                       env or dict(os.environ), timeout, f"{name} {' '.join(map(str, args))}")


def test_every_script_uses_common():
    for name in SCRIPTS:
        with open(os.path.join(BENCH, name)) as f:
            text = f.read()
        assert "from common import" in text and "run_main(main)" in text, name


@pytest.mark.parametrize("name, args, message", [
    ("symmetric_maps.py", ["--first", "1"],
     "argument --first: must be an integer >= 2, got '1'"),
    ("symmetric_maps.py", ["--first", "5", "--last", "3"], "--first 5 is above --last 3"),
    ("symmetric_maps.py", ["--nt", "0"], "argument --nt: must be an integer >= 1, got '0'"),
    ("symmetric_maps.py", ["--from-json", "{tmp}/none.json"],
     "--from-json {tmp}/none.json: cannot read it (No such file or directory)"),
    ("symmetric_maps.py", ["--from-json", "{tmp}/rows.json"],
     "--from-json {tmp}/rows.json: row 0 lacks sym, sym_r"),
    ("symmetric_maps.py", ["--docs", "README.md"],
     "--docs README.md has no <!-- symmetric-maps-table --> ... "
     "<!-- /symmetric-maps-table --> markers"),
    ("symmetric_maps.py", ["--json", "/dev/null"],
     "--json /dev/null is a character device, not a regular file"),
    ("symmetric_maps.py", ["--json", "{tmp}/fifo"], "--json {tmp}/fifo is a FIFO (named pipe), not a "
                                                     "regular file"),
    ("symmetric_maps.py", ["--json", "{tmp}/rows.json"],
     "--json {tmp}/rows.json exists; pass --overwrite to replace it"),
    ("starpu_mpi_insert.py", ["--json", os.path.join(BENCH, "starpu_mpi_insert.py")],
     f"--json {os.path.join(BENCH, 'starpu_mpi_insert.py')} exists; pass --overwrite"),
    ("symmetric_maps.py", ["--json", "{tmp}/no/x.json"],
     "argument --json: {tmp}/no/x.json: folder {tmp}/no does not exist"),
    ("plan_balance.py", ["--nodes", "2-x"], "argument --nodes: must be comma-separated "
     "integers >= 2 or ranges A-B with A <= B, got '2-x'"),
    ("plan_balance.py", ["--nodes", "9-3"], "argument --nodes: must be comma-separated "
     "integers >= 2 or ranges A-B with A <= B, got '9-3'"),
    ("volume_model.py", ["--repeat", "0"],
     "argument --repeat: must be an integer >= 1, got '0'"),
    ("small_sizes.py", ["--sizes", "1024,abc"],
     "argument --sizes: must be comma-separated integers >= 1, got '1024,abc'"),
    ("small_sizes.py", ["--sizes", "64"], "--sizes 64 below --nb 256"),
    ("small_sizes.py", ["--settle", "-1"], "argument --settle: must be a finite number >= 0"),
    ("small_sizes.py", ["--sched", "nope"], "unknown scheduler 'nope'"),
    ("starpu_example.py", ["--n", "500", "--nb", "128"],
     "--n 500 must be a multiple of --nb 128"),
    ("starpu_example.py", ["--n", "100", "--nb", "200"], "nb 200 is larger than n 100"),
    ("engine_vs_debian.py", ["--rounds", "0"], "argument --rounds: must be an integer >= 1"),
    ("gpu_vs_cusolver.py", ["--n", "4096", "--residual-n", "2048"],
     "--residual-n 2048 is not one of --n 4096 (no run would compute it)"),
    ("gpu_vs_cusolver.py", ["--n", "0"], "argument --n: must be an integer >= 1, got '0'"),
    ("comm_bound.py", ["--bandwidth", ","], "--bandwidth ',' names no rate"),
    ("comm_bound.py", ["--repeat", "-2"], "argument --repeat: must be an integer >= 1"),
    ("mixed.py", ["--n", "0"], "argument --n: must be an integer >= 1, got '0'"),
    ("mixed.py", ["--n", "100", "--nb", "200"], "nb 200 is larger than n 100"),
    ("starpu_mpi_messages.py", ["--rounds", "0"], "argument --rounds: must be an integer >= 1"),
    ("starpu_mpi_messages.py", ["--sizes", "0"],
     "argument --sizes: must be comma-separated integers >= 1, got '0'"),
    ("starpu_mpi_insert.py", ["--tiles", "2"], "argument --tiles: must be an integer >= 3"),
    ("patch_policy.py", ["--rounds", "0"], "argument --rounds: must be an integer >= 1"),
    ("patch_policy.py", ["--b2b-size", "128"],
     "--sizes and --b2b-size must be at least small_sizes.py's NB, 256"),
    ("patch_policy.py", ["--n", "100", "--nb", "200"], "nb 200 is larger than n 100"),
])
def test_bad_arguments_end_with_one_usage_error(tmp_path, name, args, message):
    (tmp_path / "rows.json").write_text(json.dumps([{"nodes": 2}]))
    os.mkfifo(tmp_path / "fifo")
    script = os.path.join(BENCH, name)
    before = (sha256_file(script), os.stat("/dev/null").st_mode)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = _script(name, *args)
    assert p.returncode == 2, p.stderr
    assert f"{name}: error: {message.replace('{tmp}', str(tmp_path))}" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    # nothing named was replaced: the script, /dev/null, the FIFO, an existing file
    assert (sha256_file(script), os.stat("/dev/null").st_mode) == before
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    assert json.loads((tmp_path / "rows.json").read_text()) == [{"nodes": 2}]


def test_write_json_is_whole_or_nothing(tmp_path):
    path = tmp_path / "r.json"
    common.write_json(str(path), {"a": 1})
    with pytest.raises(TypeError):
        common.write_json(str(path), {"a": object()})     # fails half-way: old file kept
    assert json.loads(path.read_text()) == {"a": 1}
    import fractions

    import numpy as np

    common.write_json(str(path), {"x": np.float64(0.5), "v": np.arange(2),
                                  "f": fractions.Fraction(1, 4)})
    assert json.loads(path.read_text()) == {"x": 0.5, "v": [0, 1], "f": 0.25}
    assert os.listdir(tmp_path) == ["r.json"]


def test_script_json_output(tmp_path):
    out = tmp_path / "rows.json"
    p = _script("symmetric_maps.py", "--first", "2", "--last", "3", "--nt", "12",
                "--json", out)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [r["nodes"] for r in rows] == [2, 3] and all(r["nt"] == 12 for r in rows)
    assert os.listdir(tmp_path) == ["rows.json"]
    # the rows come back with --from-json (the same table, nothing recomputed)
    p2 = _script("symmetric_maps.py", "--from-json", out)
    assert p2.returncode == 0 and "2 node counts" in p2.stdout, p2.stderr
    # an existing --json file is replaced with --overwrite, whole
    p3 = _script("symmetric_maps.py", "--first", "2", "--last", "2", "--nt", "12",
                 "--json", out, "--overwrite")
    assert p3.returncode == 0, p3.stderr
    assert [r["nodes"] for r in json.loads(out.read_text())] == [2]
    assert os.listdir(tmp_path) == ["rows.json"]


def _interrupt_after_first_line(cmd, timeout=120):
    """Start ``cmd``, send SIGINT once it printed a line, -> (status, stdout, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=signals_default)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        assert ready, "no output"
        first = proc.stdout.readline()
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, first + out, err


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    out = tmp_path / "rows.json"
    rc, stdout, err = _interrupt_after_first_line(
        [sys.executable, os.path.join(BENCH, "symmetric_maps.py"), "--first", "2",
         "--last", "200", "--nt", "600", "--json", str(out)])
    assert rc == common.INTERRUPTED, err
    assert err == "symmetric_maps.py: interrupted\n"
    assert stdout.startswith("P=   2") and not out.exists()
    assert os.listdir(tmp_path) == []


def test_ctrl_c_inside_a_starpu_session(tmp_path, starpu_home):
    """small_sizes.py interrupted while StarPU runs: the session abandons the
    computation and shuts down, and the script ends like the others."""
    pytest.importorskip("starchol.runtime._binding")
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1")
    cmd = [sys.executable, os.path.join(BENCH, "small_sizes.py"), "--sizes", "1024",
           "--nb", "64", "--repeat", "1000", "--settle", "0", "--json",
           str(tmp_path / "r.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env, preexec_fn=signals_default)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready
        proc.stdout.readline()                 # the header: the session runs
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == common.INTERRUPTED, err
    assert err == "small_sizes.py: interrupted\n"
    assert os.listdir(tmp_path) == []


def test_engine_vs_debian_copies_only_sources(tmp_path):
    dest = engine_vs_debian.copy_sources(str(tmp_path / "src"))
    got = {os.path.relpath(os.path.join(d, f), dest)
           for d, _, files in os.walk(dest) for f in files}
    assert {"setup.py", "build_flags.py", "pyx/_binding.pyx", "benchmarks/common.py",
            "runtime/session.py"} <= got
    assert not [g for g in got if g.startswith((".venv/", "build/", ".git/"))
                or g.endswith((".so", ".pyc"))]


def _snapshot(root):
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs
                   if x not in (".git", ".venv", "__pycache__", ".pytest_cache")]
        for f in files:
            st = os.stat(os.path.join(d, f))
            out[os.path.relpath(os.path.join(d, f), root)] = (st.st_mtime_ns, st.st_size)
    return out


@pytest.mark.slow
def test_engine_vs_debian_build_leaves_the_checkout_alone(tmp_path):
    """The Debian build (pip install --target, STARCHOL_STARPU=system) wrote build/,
    build/starpu-flags and the egg-info into the checkout; from a copy it writes none."""
    pytest.importorskip("starchol.runtime._binding")
    if subprocess.run(["pkg-config", "--exists", "starpumpi-1.3"],
                      env={k: v for k, v in os.environ.items()
                           if k != "PKG_CONFIG_PATH"}).returncode:
        pytest.skip("no system StarPU (libstarpu-dev)")
    before = _snapshot(ROOT)
    site = tmp_path / "site"
    site.mkdir()
    engine_vs_debian.build_debian_copy(str(site), str(tmp_path))
    assert _snapshot(ROOT) == before
    assert "(system package)" in engine_vs_debian.library_of(str(site))


def test_mixed_benchmark_runs_small(tmp_path):
    """benchmarks/mixed.py end to end at a small size (no timing asserted): both answers
    meet sqrt(N) 2^-53, the JSON holds every timing and the ratio of the medians."""
    pytest.importorskip("starchol.runtime._binding", reason="runtime layer not built")
    out = tmp_path / "m.json"
    p = _script("mixed.py", "--n", "512", "--nb", "128", "--repeat", "1", "--settle", "0",
                "--workers", "1", "--json", out)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    assert d["backward_error_mixed"] <= d["bound"] and d["backward_error_float64"] <= d["bound"]
    assert len(d["mixed_s"]) == len(d["float64_s"]) == 1 and d["iterations"][0] >= 1
    assert d["ratio"] == d["median_mixed_s"] / d["median_float64_s"]
    assert "ratio mixed / float64" in p.stdout


@pytest.mark.timeout(120)
def test_net_probe_measures_two_ranks():
    """benchmarks/net_probe.py (simulate_validation's link measurement) on 2 ranks: one
    JSON line with a bandwidth and a latency > 0, the message size asked for."""
    import json
    import subprocess

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", sys.executable,
                           os.path.join(BENCH, "net_probe.py"), "--bytes", "4096",
                           "--messages", "4", "--pings", "3"],
                          capture_output=True, text=True, timeout=100, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["message_bytes"] == 4096 and doc["messages"] == 4
    assert doc["bandwidth_bytes_per_s"] > 0 and doc["latency_s"] > 0


def test_starpu_mpi_messages_times_every_setting(tmp_path):
    # two local ranks through StarPU-MPI: 8 B (eager) and 5,000 B (above Open MPI's 4 kB
    # shared-memory eager limit: rendezvous, where starpu_mpi_wait_for_all hung), one and
    # two sends in flight; every setting gives its rounds and a positive time per message
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found")
    out = tmp_path / "m.json"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = _script("starpu_mpi_messages.py", "--sizes", "8,5000", "--in-flight", "1,2",
                "--max-count", "20", "--rounds", "2", "--json", out, env=env, timeout=240)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [(r["bytes"], r["sends_in_flight"], r["count"]) for r in rows] == [
        (8, 1, 20), (8, 2, 20), (5000, 1, 20), (5000, 2, 20)]
    for r in rows:
        assert len(r["rounds_s"]) == 2 and all(t > 0 for t in r["rounds_s"])
        assert r["per_message_s"] == pytest.approx(r["median_s"] / 20)
        assert r["bytes_per_s"] == pytest.approx(r["bytes"] * 20 / r["median_s"])
    assert p.stdout.count("| 5000 |") == 2


def test_starpu_mpi_insert_times_both_ranks(tmp_path):
    # rank 1 runs the tasks, rank 0 only walks them: both time every round, and StarPU-MPI's
    # start is timed on both
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found")
    out = tmp_path / "i.json"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = _script("starpu_mpi_insert.py", "--tasks", "300", "--tiles", "10", "--rounds", "2",
                "--json", out, env=env, timeout=240)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["tasks"] == 300 and sorted(doc["init_s"]) == ["0", "1"]
    assert all(t > 0 for t in doc["init_s"].values())
    assert [len(doc["rounds_s"][r]) for r in ("0", "1")] == [2, 2]
    assert doc["walk_s_per_task"] > 0 and doc["insert_s_per_task"] > 0
    assert "walk, a task it takes no part in" in p.stdout


def test_temporary_folder_is_removed_when_sigterm_ends_the_script(tmp_path):
    # SIGTERM at its default action ends a benchmark at once: its private folder must go
    # with it (it stayed behind with tempfile.TemporaryDirectory)
    said = tmp_path / "folder.txt"
    program = (f"import sys, time\nsys.path.insert(0, {BENCH!r})\n"
               "from common import temporary_folder\n"
               "with temporary_folder('bench-test-') as path:\n"
               "    open(path + '/x', 'w').write('x')\n"
               f"    open({str(said)!r}, 'w').write(path)\n"
               "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", program], preexec_fn=signals_default)
    try:
        deadline = time.monotonic() + 30
        while not (said.exists() and said.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, "the program ended before making its folder"
            time.sleep(0.05)
        folder = said.read_text()
        assert os.path.isdir(folder)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert not os.path.exists(folder)
