"""Which BLAS/LAPACK the tile kernels call (starchol.runtime.kernel_blas).

The choice is made once per process, so each choice runs in its own process: a float64
and a float32 factorization and solve on one rank, checked against numpy, and the run
record naming the library.
"""
import ctypes
import json
import os
import subprocess
import sys

import pytest

from starchol.errors import UsageError
from starchol.runtime import kernel_blas

SCRIPT = r"""
import json, sys
import numpy as np
from mpi4py import MPI
from starchol import DistributedMatrix, Session, cholesky
from starchol.distributions import get_map

out = {}
tile_map = get_map("2dbc", 1)
with Session(MPI.COMM_SELF, workers=2) as s:
    rng = np.random.default_rng(3)
    m = rng.standard_normal((600, 600))
    dense = m @ m.T / 600 + np.eye(600)
    y = rng.standard_normal((600, 3))
    for dtype in ("float64", "float32"):
        a = DistributedMatrix.from_numpy(dense.astype(dtype), 128, tile_map,
                                         comm=s.user_comm)
        f = cholesky(a, tile_map, session=s)
        L = np.tril(f.L.gather()).astype(np.float64)
        b = DistributedMatrix.from_numpy(y.astype(dtype), 128, tile_map, kind="rhs",
                                         comm=s.user_comm)
        x = f.solve(b).gather().astype(np.float64)
        out[dtype] = {
            "factor": float(np.linalg.norm(L @ L.T - dense) / np.linalg.norm(dense)),
            "solve": float(np.linalg.norm(dense @ x - y) / np.linalg.norm(y)),
            "record": f.record.kernel_blas}
    out["session"] = s.kernel_blas.source
    if s.kernel_blas.source != "scipy":        # one thread per call in the workers
        import ctypes
        out["threads"] = ctypes.CDLL(s.kernel_blas.library or "libopenblas.so.0"
                                     ).openblas_get_num_threads()
json.dump(out, sys.stdout)
"""


def _system_openblas():
    try:
        ctypes.CDLL(kernel_blas.SYSTEM_OPENBLAS)
    except OSError:
        return None
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("prefix") == "libopenblas":
            return info["filepath"]
    return None


def _run(value, env=None):
    env = dict(os.environ if env is None else env, STARPU_SILENT="1")
    env.pop(kernel_blas.ENV, None)
    if value is not None:
        env[kernel_blas.ENV] = value
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _check(res, source):
    assert res["session"] == source
    assert res["float64"]["factor"] < 1e-14 and res["float64"]["solve"] < 1e-12
    assert res["float32"]["factor"] < 1e-6 and res["float32"]["solve"] < 1e-4
    for dtype in ("float64", "float32"):
        assert f"({source}: " in res[dtype]["record"]


def test_scipy_openblas():
    res = _run("scipy")
    _check(res, "scipy")
    assert "OpenBLAS" in res["float64"]["record"]
    assert "scipy" in res["float64"]["record"]


def test_auto_prefers_the_system_openblas():
    path = _system_openblas()
    res = _run(None)
    if path is None:
        _check(res, "scipy")
    else:
        _check(res, "system")
        assert path in res["float64"]["record"]
        assert res["threads"] == 1


def test_without_threadpoolctl(tmp_path):
    """threadpoolctl is optional: the system OpenBLAS is still set to one thread, and
    the record still names it (version from openblas_get_config)."""
    if _system_openblas() is None:
        pytest.skip("no system OpenBLAS (libopenblas.so.0)")
    (tmp_path / "threadpoolctl.py").write_text("raise ImportError('hidden by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    res = _run("system", env)
    _check(res, "system")
    assert res["threads"] == 1
    assert res["float64"]["record"].startswith("OpenBLAS 0.")


def test_a_library_by_path():
    path = _system_openblas()
    if path is None:
        pytest.skip("no system OpenBLAS (libopenblas.so.0) to name by path")
    res = _run(path)
    _check(res, "path")
    assert path in res["float32"]["record"]
    assert res["threads"] == 1


@pytest.mark.parametrize("value, words", [
    ("", "STARCHOL_KERNEL_BLAS is empty"),
    ("/nonexistent/libblas.so", "STARCHOL_KERNEL_BLAS='/nonexistent/libblas.so' is "
                                "neither one of auto, system, scipy nor a library file"),
])
def test_bad_values_are_refused(value, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        kernel_blas.requested({kernel_blas.ENV: value})


def test_choices_pass_the_check():
    for value in kernel_blas.CHOICES:
        assert kernel_blas.requested({kernel_blas.ENV: value}) == value
    assert kernel_blas.requested({}) == "auto"


def test_a_file_that_is_no_blas_is_refused(tmp_path):
    """A library without the kernels' symbols, and a file that is no library: the
    kernels keep their table (the error names the variable and what is wrong)."""
    from starchol.runtime import _kernels

    with pytest.raises(OSError, match="has no dgemm_"):
        _kernels.use_blas("libm.so.6")
    text = tmp_path / "notes.txt"
    text.write_text("not a library\n")
    with pytest.raises(OSError, match="cannot open"):
        _kernels.use_blas(str(text))


def test_auto_falls_back_to_scipy_without_a_system_openblas():
    """A machine without libopenblas.so.0 (the GPU machine's image): ``auto`` takes
    SciPy's, ``system`` is refused with the fix. Each in a fresh process (the choice is
    made once per process)."""
    code = """
import sys
from starchol.errors import UsageError
from starchol.runtime import kernel_blas as kb
kb.SYSTEM_OPENBLAS = "libstarchol-no-such-openblas.so.0"
try:
    print(kb.activate({kb.ENV: sys.argv[1]}).describe())
except UsageError as exc:
    print("UsageError:", exc)
"""
    out = {}
    for value in ("auto", "system"):
        p = subprocess.run([sys.executable, "-c", code, value], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        out[value] = p.stdout.strip()
    assert "(scipy: " in out["auto"] and "OpenBLAS" in out["auto"]
    assert out["system"].startswith("UsageError: STARCHOL_KERNEL_BLAS=system: the system "
                                    "OpenBLAS cannot be used")
    assert "apt-get install libopenblas0" in out["system"]


def test_ranks_that_choose_differently_are_all_recorded(tmp_path, starpu_home):
    """Each rank chooses its kernels' BLAS (nodes may differ): rank 1 told to take
    SciPy's, rank 0 the default; the run document names both."""
    from conftest import MPIRUN, _starchol_exe, run_or_fail

    if MPIRUN is None:
        pytest.skip("mpirun not found")
    if _system_openblas() is None:
        pytest.skip("no system OpenBLAS: both ranks would take SciPy's")
    out = tmp_path / "run.json"
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop(kernel_blas.ENV, None)
    pick = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export STARCHOL_KERNEL_BLAS=scipy; '
            'fi; exec "$@"')
    cmd = [MPIRUN, "--oversubscribe", "-np", "2", "sh", "-c", pick, "sh", *_starchol_exe(),
           "run", "--dist", "2dbc", "--n", "400", "--nb", "100", "--workers", "1",
           "--json", str(out)]
    p = run_or_fail(cmd, env, 120, "mpirun -np 2 starchol run (rank 1 on SciPy's BLAS)")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    parts = doc["kernel_blas"].split("; ")
    assert len(parts) == 2, doc["kernel_blas"]
    assert "(system: " in parts[0] and "(scipy: " in parts[1]
    assert doc["runtime"]["kernel_blas"] == doc["kernel_blas"]


def test_info_names_the_kernels_blas():
    from conftest import _starchol_exe

    env = dict(os.environ, **{kernel_blas.ENV: "scipy"})
    p = subprocess.run([*_starchol_exe(), "info", "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    facts = json.loads(p.stdout)
    k = facts["kernel_blas"]
    assert k["variable"] == kernel_blas.ENV and k["request"] == "scipy" and k["error"] is None
    assert "(scipy: " in k["chosen"] and facts["ranks"][0]["kernel_blas"] == k["chosen"]
    bad = subprocess.run([*_starchol_exe(), "info"], capture_output=True, text=True,
                         env=dict(env, **{kernel_blas.ENV: "/nonexistent.so"}), timeout=120)
    assert bad.returncode == 0, bad.stderr       # info reports, it does not refuse
    assert "kernels' BLAS none: environment variable STARCHOL_KERNEL_BLAS=" in bad.stdout


# -- the OpenBLAS core of a library starchol opens (STARCHOL_KERNEL_CORE) ------------------
def _cpuinfo(tmp_path, vendor, flags="fpu sse2 avx fma avx2 avx512f"):
    f = tmp_path / f"cpuinfo-{vendor}-{len(flags)}"
    f.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 25\n"
                 f"flags\t\t: {flags}\n")
    return str(f)


def test_core_rule(tmp_path):
    amd, intel = _cpuinfo(tmp_path, "AuthenticAMD"), _cpuinfo(tmp_path, "GenuineIntel")
    core = kernel_blas.requested_core
    assert core({}, cpuinfo=amd) == kernel_blas.AMD_CORE == "Zen"
    # an AMD processor without AVX2 (Bulldozer to Steamroller): Zen's kernels would not run
    assert core({}, cpuinfo=_cpuinfo(tmp_path, "AuthenticAMD", "fpu sse2 avx fma")) is None
    assert core({}, cpuinfo=intel) is None                      # OpenBLAS's own choice
    assert core({}, cpuinfo=str(tmp_path / "missing")) is None
    assert core({kernel_blas.CORE_ENV: "openblas"}, cpuinfo=amd) is None
    assert core({kernel_blas.CORE_ENV: "Haswell"}, cpuinfo=intel) == "Haswell"
    # OPENBLAS_CORETYPE applies to every OpenBLAS of the process: starchol leaves it
    assert core({"OPENBLAS_CORETYPE": "SkylakeX"}, cpuinfo=amd) is None


@pytest.mark.parametrize("value", ["", " ", "Has well", "../Zen"])
def test_bad_core_values_are_refused(value):
    with pytest.raises(UsageError, match="STARCHOL_KERNEL_CORE=.* is neither one of auto, "
                                         "openblas nor an OpenBLAS core name"):
        kernel_blas.requested_core({kernel_blas.CORE_ENV: value})


CORE_SCRIPT = """
import sys
from starchol.errors import UsageError
from starchol.runtime import kernel_blas as kb
try:
    print(kb.activate().describe())
except UsageError as exc:
    print("UsageError:", exc)
"""


def _core_run(blas, core):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env[kernel_blas.ENV] = blas
    env[kernel_blas.CORE_ENV] = core
    p = subprocess.run([sys.executable, "-c", CORE_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_a_named_core_is_loaded_and_recorded():
    """``Haswell`` (AVX2, runs on every x86-64 machine CI uses) on the system OpenBLAS:
    the record names it; a name OpenBLAS does not know is refused with what it runs;
    SciPy's library is not opened by starchol, so a named core is refused there."""
    if _system_openblas() is None:
        pytest.skip("no system OpenBLAS (libopenblas.so.0)")
    import re

    if "avx2" not in open("/proc/cpuinfo").read():
        pytest.skip("no AVX2: OpenBLAS's Haswell kernels would not run here")
    out = _core_run("system", "Haswell")
    assert re.match(r"OpenBLAS 0\.\S+ Haswell \(system: ", out), out
    out = _core_run("system", "NoSuchCore")
    assert out.startswith("UsageError: STARCHOL_KERNEL_CORE=NoSuchCore: the system OpenBLAS "
                          "runs OpenBLAS core "), out
    assert "unset STARCHOL_KERNEL_CORE" in out
    out = _core_run("scipy", "Haswell")
    assert out.startswith("UsageError: STARCHOL_KERNEL_CORE=Haswell: the kernels call "
                          "SciPy's OpenBLAS"), out
    # the variable is restored: NumPy/SciPy libraries loaded later keep their own core
    code = ("import os; from starchol.runtime import kernel_blas as kb; kb.activate(); "
            "print(os.environ.get('OPENBLAS_CORETYPE'))")
    env = dict(os.environ, **{kernel_blas.ENV: "system", kernel_blas.CORE_ENV: "Haswell"})
    env.pop("OPENBLAS_CORETYPE", None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "None", p.stdout + p.stderr


def test_auto_core_on_this_machine():
    """``auto``: Zen on an AMD processor, OpenBLAS's own choice elsewhere; recorded."""
    if _system_openblas() is None:
        pytest.skip("no system OpenBLAS (libopenblas.so.0)")
    out = _core_run("system", "auto")
    amd = "AuthenticAMD" in open("/proc/cpuinfo").read()
    assert out.startswith("OpenBLAS 0."), out
    if amd:
        assert " Zen (system: " in out, out
