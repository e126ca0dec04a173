"""The CMake build (CMakeLists.txt): the same four modules as setup.py, with the flags and
the module list asked of build_flags.py (the one home of both)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import build_flags  # noqa: E402

CMAKE = shutil.which("cmake")
needs_cmake = pytest.mark.skipif(CMAKE is None, reason="cmake not on PATH")


def _flags(what):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "build_flags.py"), what],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def _cmake(*args, timeout):
    proc = subprocess.run([CMAKE, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"cmake {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _configure(src, build, *defs):
    return _cmake("-S", src, "-B", build, f"-DPython_EXECUTABLE={sys.executable}", *defs,
                  timeout=300)


# -- the module list and the GPU flags: one home, build_flags.py --------------------------
def test_module_subcommands_follow_build_flags():
    assert _flags("modules") == [n.rpartition(".")[2] for n, _ in build_flags.RUNTIME_MODULES]
    name, sources = build_flags.GPU_MODULE
    assert _flags("gpu-module") == [name.rpartition(".")[2], *sources]
    name, sources = build_flags.SIM_MODULE
    assert _flags("sim-module") == [name.rpartition(".")[2], *sources]
    assert build_flags.module_names() == ["_binding", "_kernels", "_graphs", "_gpu", "_sim"]
    # every pyx/*.pyx is one of them
    pyx = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(ROOT, "pyx", "*.pyx")))
    assert pyx == sorted(build_flags.module_names())


def _starpu_include(tmp_path, cuda):
    inc = tmp_path / "starpu-include"
    inc.mkdir()
    (inc / "starpu_config.h").write_text(
        "#define STARPU_USE_CPU 1\n" + ("#define STARPU_USE_CUDA 1\n" if cuda else ""))
    return str(inc)


def test_gpu_flags_without_cuda(tmp_path, monkeypatch):
    monkeypatch.delenv("STARCHOL_GPU_CUDA", raising=False)
    base = ([_starpu_include(tmp_path, cuda=False)], ["/l"], ["starpu-1.3"], ["-g"], ["-x"])
    inc, libdirs, libnames, ccx, lx, macros = build_flags.gpu_flags(*base)
    assert (inc, libdirs, libnames, lx) == (base[0], ["/l"], ["starpu-1.3"], ["-x"])
    assert ccx == ["-g", "-O2"]
    assert macros == [("STARCHOL_NO_CUDA", "1")]


def test_gpu_flags_with_cuda(tmp_path, monkeypatch):
    home = tmp_path / "cuda"
    for sub in ("bin", "include", "lib64"):
        (home / sub).mkdir(parents=True)
    for f in ("bin/nvcc", "include/cublas_v2.h", "include/cusolverDn.h",
              "include/cuda_runtime.h", "lib64/libcublas.so"):
        (home / f).write_text("")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.delenv("STARCHOL_CUDA", raising=False)
    monkeypatch.delenv("STARCHOL_GPU_CUDA", raising=False)
    starpu = _starpu_include(tmp_path, cuda=True)
    inc, libdirs, libnames, ccx, lx, macros = build_flags.gpu_flags([starpu], [], ["m"], [], [])
    assert inc == [starpu, str(home / "include")]
    assert libdirs == [str(home / "lib64")]
    assert libnames == ["m", "cusolver", "cublas", "cudart"]
    assert lx == [f"-Wl,-rpath,{home / 'lib64'}"] and macros == []
    # switched off on purpose: the StarPU has CUDA, starchol's GPU layer does not
    monkeypatch.setenv("STARCHOL_GPU_CUDA", "0")
    assert build_flags.gpu_flags([starpu], [], [], [], [])[5] == [("STARCHOL_NO_CUDA", "1")]
    # the StarPU has CUDA but cuSOLVER is missing: a clear error, not a failed link
    monkeypatch.delenv("STARCHOL_GPU_CUDA")
    (home / "include" / "cusolverDn.h").unlink()
    with pytest.raises(build_flags.BuildConfigError, match="cusolverDn.h is not in"):
        build_flags.gpu_flags([starpu], [], [], [], [])


@needs_cmake
def test_cmake_configures_the_modules_build_flags_names(tmp_path):
    _configure(ROOT, str(tmp_path / "build"), f"-DSTARCHOL_INSTALL_DIR={tmp_path / 'out'}")
    listed = (tmp_path / "build" / "starchol-modules.txt").read_text().strip().split(";")
    assert listed == build_flags.module_names()


# -- a full CMake build, installed outside the checkout ---------------------------------
_PROBE = textwrap.dedent("""
    import importlib, json, os, sys
    out, names = sys.argv[1], sys.argv[2:]
    import starchol.runtime as rt
    rt.__path__.insert(0, out)       # starchol.runtime._* from the CMake install first
    mods = {n: importlib.import_module("starchol.runtime." + n) for n in names}
    g = mods["_gpu"]
    print(json.dumps({"files": {n: m.__file__ for n, m in mods.items()},
                      "cuda_built": g.cuda_built(), "devices": g.cuda_device_count(),
                      "kernels": g.kernel_names()}))
""")


@pytest.mark.slow
@pytest.mark.timeout(1800)
@needs_cmake
def test_cmake_builds_and_installs_the_four_modules(tmp_path):
    build, out = str(tmp_path / "build"), str(tmp_path / "out")
    t0 = time.monotonic()
    _configure(ROOT, build, f"-DSTARCHOL_INSTALL_DIR={out}")
    _cmake("--build", build, "-j2", timeout=1800)
    _cmake("--install", build, timeout=120)
    print(f"cmake configure + build + install: {time.monotonic() - t0:.0f} s")

    names = build_flags.module_names()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert sorted(os.listdir(out)) == sorted(n + suffix for n in names)

    # loaded from there (not from the checkout's runtime/), in a fresh interpreter
    proc = subprocess.run([sys.executable, "-c", _PROBE, out, *names], capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["files"] == {n: os.path.join(out, n + suffix) for n in names}
    # the CUDA decision is build_flags's: the same as setup.py's build of this checkout
    cuda = "-DSTARCHOL_NO_CUDA=1" not in _flags("gpu-cflags")
    assert got["cuda_built"] is cuda
    if not build_flags.starpu_has_cuda([f[2:] for f in _flags("cflags") if f.startswith("-I")]):
        assert got["cuda_built"] is False and got["devices"] == 0  # this machine: no CUDA
    from starchol.runtime import _gpu
    assert got["kernels"] == _gpu.kernel_names()
    assert got["cuda_built"] is _gpu.cuda_built()
