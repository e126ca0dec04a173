"""The engine: which StarPU is built and loaded, ``starchol info``, the workers rule."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import build_flags  # noqa: E402
import starpu_plan  # noqa: E402  (the StarPU build plan; build_flags re-exports it)

from starchol.runtime import workers  # noqa: E402


def _starchol(*args, env=None, timeout=120):
    exe = os.path.join(os.path.dirname(sys.executable), "starchol")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "starchol"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout,
                          env=env)


# -- the workers-per-rank rule -----------------------------------------------------------
def test_every_core_of_the_rank_is_a_worker():
    env = {}
    assert workers.rank_cores(range(128), 1, env) == 128
    assert workers.workers_per_rank(128, 256, env) == 128
    assert workers.workers_per_rank(128, 4, env) == 4       # Debian's StarPU
    assert workers.workers_per_rank(1, 256, env) == 1
    # unbound ranks share their node's cores; bound ranks each have their own
    assert workers.rank_cores(range(64), 4, env) == 16
    assert workers.rank_cores(range(8), 16, env) == 1


def test_slurm_allocation_caps_the_cores():
    env = {"SLURM_CPUS_PER_TASK": "32"}
    assert workers.rank_cores(range(128), 1, env) == 32
    assert workers.workers_per_rank(workers.rank_cores(range(128), 1, env), 256, env) == 32


def test_reserve_mpi_core_switch():
    env = {"STARCHOL_RESERVE_MPI_CORE": "1"}
    assert workers.workers_per_rank(128, 256, env) == 127
    assert workers.workers_per_rank(2, 256, env) == 2    # too few cores to keep one
    assert workers.workers_per_rank(128, 256, {"STARCHOL_RESERVE_MPI_CORE": "0"}) == 128


@pytest.mark.parametrize("k, max_cpus, plan", [
    (128, 256, (1, 128, 128)),   # one rank uses the whole node
    (64, 4, (16, 4, 4)),         # Debian's StarPU: enough ranks to cover the cores
    (5, 4, (2, 2, 2)),
    (2, 256, (1, 2, 2)),
])
def test_plan_ranks(k, max_cpus, plan):
    assert workers.plan_ranks(k, max_cpus, {}) == plan


# -- choosing and building StarPU (build_flags.py, the one home of the flags) --------------
def test_configure_args_for_real_nodes():
    args = build_flags.starpu_configure_args("/p", cuda=False)
    assert "--prefix=/p" in args and "--enable-mpi" in args and "--with-fxt" in args
    assert int(next(a for a in args if a.startswith("--enable-maxcpus=")).split("=")[1]) >= 256
    assert any(a.startswith("--enable-maxnumanodes=") for a in args)
    assert any(a.startswith("--enable-maxnodes=") for a in args)
    assert "--disable-cuda" in args and "--disable-build-doc" in args
    assert "--disable-static" in args and "--disable-opengl-render" in args
    # idle workers sleep (at once by default) instead of polling
    assert "--enable-blocking-drivers" in args
    cuda = build_flags.starpu_configure_args("/p", cuda="/usr/local/cuda")
    assert "--enable-cuda" in cuda and "--with-cuda-dir=/usr/local/cuda" in cuda
    assert "--enable-blocking-drivers" not in cuda


def test_build_key_follows_flags_and_cache_env(monkeypatch, tmp_path):
    a = build_flags.starpu_build_key(["--x"])
    assert a == build_flags.starpu_build_key(["--x"]) != build_flags.starpu_build_key(["--y"])
    monkeypatch.setenv(build_flags.CACHE_ENV, str(tmp_path))
    assert build_flags.starpu_build_prefix().startswith(str(tmp_path) + os.sep + "starpu-1.3.10-")


def test_build_key_follows_the_patches(monkeypatch, tmp_path):
    names = [os.path.basename(p) for p in build_flags.starpu_patches()]
    assert {"starpu-1.3.10-idle-spin.patch", "starpu-1.3.10-mpi-yield.patch"} <= set(names)
    assert names == sorted(names)
    patch = tmp_path / "x.patch"
    patch.write_text("one")
    monkeypatch.setattr(starpu_plan, "starpu_patches", lambda: [str(patch)])
    a = build_flags.starpu_build_key(["--x"])
    patch.write_text("two")
    assert build_flags.starpu_build_key(["--x"]) != a


def test_patch_variables_are_starchols_and_read_by_their_patch():
    """Each tuning patch reads its switch (starpu_env.PATCH_SWITCHES, the one home of the
    names) in starchol's name space, and no patch reads a new variable in StarPU's."""
    import re

    from starchol.runtime.starpu_env import INTEGER_VARIABLES, PATCH_SWITCHES

    texts = {os.path.basename(p): open(p).read() for p in build_flags.starpu_patches()}
    for patch, (name, other) in PATCH_SWITCHES.items():
        assert name.startswith("STARCHOL_")
        default = re.search(rf'starpu_get_env_number_default\("{name}", (\d+)\)',
                            texts[patch])
        assert default, patch
        # the value patch_policy.py measures is not the default
        assert default.group(1) != other, patch
    read = {m for t in texts.values() for m in re.findall(r'env_number\w*\("(\w+)"', t)}
    assert read == {name for name, _ in PATCH_SWITCHES.values()}
    assert not read & set(INTEGER_VARIABLES)


def test_loaded_build_reads_the_patch_variables():
    """starchol's own build of the current patches reads every patch variable (a stale
    build, made from older patches, is skipped: rebuild it with scripts/setup.sh)."""
    from starchol.runtime.starpu_build import describe, variables_read
    from starchol.runtime.starpu_env import PATCH_SWITCHES

    names = [name for name, _ in PATCH_SWITCHES.values()]
    d = describe()
    if d["kind"] != "starchol build":
        pytest.skip(f"starchol uses a {d['kind']}, not its own build")
    if os.path.basename(d["prefix"]) != os.path.basename(build_flags.starpu_build_prefix()):
        pytest.skip(f"the loaded build {d['prefix']} is not of the current patches")
    assert variables_read(names, d) == names
    assert variables_read(["STARPU_IDLE_SPIN_US", "STARCHOL_NO_SUCH"], d) == []


def test_project_starpu_has_the_patches():
    """The loaded StarPU, when it is starchol's own build, was built with every patch of
    scripts/starpu-patches (its stamp lists them; `starchol info` prints them), among
    them the MPI progress thread's yield (starpu-1.3.10-mpi-yield.patch)."""
    r = _starchol("info", "--json")
    assert r.returncode == 0, r.stderr
    starpu = json.loads(r.stdout)["starpu"]
    if starpu["kind"] != "starchol build":
        pytest.skip(f"starchol uses a {starpu['kind']}, not its own build")
    applied = starpu["build"].get("patches", "").split()
    names = [os.path.basename(p) for p in build_flags.starpu_patches()]
    assert applied == names and "starpu-1.3.10-mpi-yield.patch" in applied
    from starchol.jobs.info_cmd import format_text

    text = format_text(json.loads(r.stdout))
    assert "patches     " + " ".join(names) in text
    assert "\0" not in text     # (Open MPI's version string ends with one)


def test_choice_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("STARPU_PREFIX", raising=False)
    monkeypatch.setenv("STARCHOL_STARPU", "system")
    assert build_flags.starpu_choice() == ("system", [])
    pc = tmp_path / "lib" / "pkgconfig"
    pc.mkdir(parents=True)
    (pc / "starpumpi-1.3.pc").write_text("prefix=/x\n")
    monkeypatch.delenv("STARCHOL_STARPU")
    monkeypatch.setenv("STARPU_PREFIX", str(tmp_path))
    assert build_flags.starpu_choice() == ("user", [str(pc)])
    monkeypatch.setenv("STARPU_PREFIX", str(tmp_path / "nope"))
    with pytest.raises(build_flags.BuildConfigError, match="no starpumpi-1.3.pc under"):
        build_flags.starpu_choice()


def test_source_dir_is_beside_the_recorded_build(monkeypatch, tmp_path):
    """benchmarks/starpu_example.py finds the source of a build made with
    STARCHOL_STARPU_CACHE after the variable is gone (it looked in build/starpu only)."""
    (tmp_path / "cache" / "source").mkdir(parents=True)
    choice = tmp_path / "starpu-choice"
    choice.write_text(f"build {tmp_path / 'cache' / 'starpu-1.3.10-abc'}\n")
    monkeypatch.setattr(starpu_plan, "CHOICE_FILE", str(choice))
    monkeypatch.delenv(build_flags.CACHE_ENV, raising=False)
    assert build_flags.starpu_source_dir() == str(tmp_path / "cache" / "source")
    choice.write_text("system\n")
    monkeypatch.setenv(build_flags.CACHE_ENV, str(tmp_path / "other"))
    assert build_flags.starpu_source_dir() == str(tmp_path / "other" / "source")


def _system_starpu():
    """pkg-config finds Debian's StarPU-MPI on its default path."""
    env = {k: v for k, v in os.environ.items() if k != "PKG_CONFIG_PATH"}
    return subprocess.run(["pkg-config", "--exists", build_flags.STARPU_PKG],
                          env=env).returncode == 0


def test_flags_stamp_follows_the_starpu(monkeypatch, tmp_path):
    """Every compiled module depends on build/starpu-flags (what setuptools compares with
    the module's date), which names the StarPU and the flags: another StarPU rewrites it,
    so the next build recompiles instead of keeping a module linked to the old one; the
    same StarPU leaves it untouched (no rebuild)."""
    pytest.importorskip("Cython")
    if not _system_starpu():
        pytest.skip("no system StarPU (libstarpu-dev) to switch to")
    stamp = tmp_path / "build" / "starpu-flags"
    monkeypatch.setattr(build_flags, "FLAGS_STAMP", str(stamp))
    monkeypatch.delenv("STARPU_PREFIX", raising=False)
    monkeypatch.setenv("STARCHOL_STARPU", "system")
    exts = build_flags.runtime_extensions()
    assert [e.name.rpartition(".")[2] for e in exts] == build_flags.module_names()
    assert all(str(stamp) in e.depends for e in exts)
    system = stamp.read_text()
    version = build_flags.run_tool(["pkg-config", "--modversion", build_flags.STARPU_PKG])[0]
    assert f"starpu: system {version} /usr\n" in system
    assert "pkgconfig: (the system default)" in system and "-rpath" not in system
    before = stamp.stat().st_mtime_ns
    build_flags.runtime_extensions()
    assert stamp.stat().st_mtime_ns == before and stamp.read_text() == system

    # the same library named as a user's prefix: another kind, an rpath to its folder
    monkeypatch.delenv("STARCHOL_STARPU")
    monkeypatch.setenv("STARPU_PREFIX", "/usr")
    build_flags.runtime_extensions()
    user = stamp.read_text()
    assert f"starpu: user {version} /usr\n" in user and "-Wl,-rpath," in user
    assert stamp.stat().st_mtime_ns > before
    assert list(tmp_path.joinpath("build").iterdir()) == [stamp]   # no temporary left


# -- the loaded StarPU and starchol info ---------------------------------------------------
def test_info_json_describes_the_loaded_starpu():
    pytest.importorskip("starchol.runtime._binding")
    proc = _starchol("info", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    s = info["starpu"]
    assert s["version"].startswith("1.3.") and s["library"].startswith(s["prefix"])
    assert s["mpi"] is True and s["maxcpus"] >= 4
    assert info["mpi"]["library"].startswith("Open MPI")
    assert "prio" in s["schedulers"]
    assert info["ranks"][0]["cores"] == len(os.sched_getaffinity(0))
    assert info["blas"] and all(b["threads"] >= 1 for b in info["blas"])
    choice = build_flags.starpu_choice()
    if choice[0] == "build":   # what scripts/setup.sh does by default
        assert s["kind"] == "starchol build" and s["maxcpus"] >= 256 and s["fxt"] is True
        assert s["maxnumanodes"] >= 8 and s["maxnodes"] >= 16
    elif choice[0] == "system":
        assert s["prefix"] == "/usr" and s["kind"] == "system package"
    text = _starchol("info")
    assert text.returncode == 0 and f"MAXCPUS     {s['maxcpus']}" in text.stdout


def test_label_names_the_kind_of_starpu():
    from starchol.runtime.starpu_build import label

    base = {"version": "1.3.10", "prefix": "/opt/s", "build": None}
    assert label({**base, "kind": "system package", "prefix": "/usr"}) == \
        "StarPU 1.3.10 (system package)"
    assert label({**base, "kind": "starchol build", "build": {"suite": "bookworm"}}) == \
        "StarPU 1.3.10 (built from Debian bookworm source, /opt/s)"
    assert label({**base, "kind": "starchol build", "build": {}}) == \
        "StarPU 1.3.10 (built from Debian source, /opt/s)"
    assert label({**base, "kind": "user install"}) == "StarPU 1.3.10 (user install, /opt/s)"
    assert label({**base, "kind": None, "prefix": None}) == "StarPU 1.3.10"


def test_run_and_bench_documents_say_which_starpu_ran(starpu_home):
    """``starchol run --json`` (record and ``runtime``) and ``starchol bench --json`` name
    the StarPU build the process loaded: the one build_flags chose for this checkout."""
    pytest.importorskip("starchol.runtime._binding")
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1")
    run = _starchol("run", "--dist", "2dbc", "--n", "64", "--nb", "32", "--workers", "1",
                    "--quiet", "--json", "-", env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    bench = _starchol("bench", "--n", "64", "--nb", "32", "--repeat", "1", "--no-lapack",
                      "--json", "-", env=env)
    assert bench.returncode == 0, bench.stderr
    kind, dirs = build_flags.starpu_choice()
    version = doc["starpu_version"]
    want = {"system": f"StarPU {version} (system package)",
            "build": f"StarPU {version} (built from Debian bookworm source, "
                     f"{build_flags.prefix_of(dirs[0]) if dirs else ''})"}.get(kind)
    if want is None:
        want = doc["starpu_build"]
        assert want.startswith(f"StarPU {version} (")
    assert doc["starpu_build"] == doc["runtime"]["starpu_build"] == want
    assert f"  StarPU build: {want}" in run.stderr
    assert json.loads(bench.stdout)["runtime"]["starpu_build"] == want
    assert f"  StarPU build: {want}" in bench.stderr


def test_run_refuses_more_workers_than_maxcpus():
    starpu = pytest.importorskip("starchol.runtime._binding")
    limit = starpu.max_cpus()
    proc = _starchol("run", "--dist", "2dbc", "--n", "64", "--nb", "32",
                     "--workers", str(limit + 1))
    assert proc.returncode == 2
    assert f"--workers must be between 1 and {limit}" in proc.stderr, proc.stderr
    assert "STARPU_MAXCPUS" in proc.stderr
