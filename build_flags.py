"""The one place that knows how to compile against StarPU-MPI and Open MPI.

Flags come from ``pkg-config starpumpi-1.3`` (StarPU + StarPU-MPI) and from
``mpicc --showme:compile`` / ``--showme:link`` (Open MPI; the StarPU-MPI .pc file
does not carry MPI's include path). ``setup.py`` calls :func:`runtime_extensions`;
``CMakeLists.txt`` asks this module for the same flags (``python build_flags.py cflags``).
"""
import os
import shlex
import shutil
import subprocess
import sys

STARPU_PKG = "starpumpi-1.3"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildConfigError(RuntimeError):
    """The system libraries the runtime layer needs are missing."""


def _run(cmd):
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise BuildConfigError(f"{cmd[0]} not found") from exc
    except subprocess.CalledProcessError as exc:
        raise BuildConfigError(f"{' '.join(cmd)} failed: {exc.stderr.strip()}") from exc
    return shlex.split(out.stdout)


def flags():
    """Return ``(include_dirs, library_dirs, libraries, extra_compile, extra_link)``."""
    hint = ("install the system packages first: "
            "apt-get install libstarpu-dev openmpi-bin libopenmpi-dev libopenblas-dev "
            "liblapacke-dev pkg-config (scripts/setup.sh does it), "
            "or set STARCHOL_NO_RUNTIME=1 to skip the runtime layer")
    if shutil.which("pkg-config") is None:
        raise BuildConfigError("pkg-config not found; " + hint)
    if shutil.which("mpicc") is None:
        raise BuildConfigError("mpicc not found; " + hint)
    try:
        cflags = _run(["pkg-config", "--cflags", STARPU_PKG])
        libs = _run(["pkg-config", "--libs", STARPU_PKG])
    except BuildConfigError as exc:
        raise BuildConfigError(f"{exc}; " + hint) from exc
    cflags += _run(["mpicc", "--showme:compile"])
    libs += _run(["mpicc", "--showme:link"])
    inc = [f[2:] for f in cflags if f.startswith("-I")]
    ccx = [f for f in cflags if not f.startswith("-I")]
    libdirs = [f[2:] for f in libs if f.startswith("-L")]
    libnames = [f[2:] for f in libs if f.startswith("-l")]
    lx = [f for f in libs if not f.startswith(("-L", "-l"))]
    return inc, libdirs, libnames, ccx, lx


def runtime_extensions():
    """Extensions of the runtime layer (empty list when STARCHOL_NO_RUNTIME=1)."""
    if os.environ.get("STARCHOL_NO_RUNTIME") == "1":
        return []
    pyx = os.path.join("pyx", "_starpu.pyx")
    if not os.path.exists(os.path.join(HERE, pyx)):
        return []
    import numpy
    from Cython.Build import cythonize
    from setuptools import Extension

    inc, libdirs, libnames, ccx, lx = flags()
    ext = Extension(
        "starchol.runtime._starpu",
        sources=[pyx],
        include_dirs=[numpy.get_include(), os.path.join(HERE, "pyx")] + inc,
        library_dirs=libdirs,
        # BLAS/LAPACK come from SciPy's Cython bindings (cython_blas/cython_lapack),
        # i.e. the same OpenBLAS that scipy.linalg uses: nothing more to link.
        libraries=libnames,
        extra_compile_args=ccx + ["-O3"],
        extra_link_args=lx,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    return cythonize([ext], language_level=3, include_path=[os.path.join(HERE, "pyx")])


if __name__ == "__main__":
    inc, libdirs, libnames, ccx, lx = flags()
    what = sys.argv[1] if len(sys.argv) > 1 else "cflags"
    if what == "cflags":
        print(" ".join(["-I" + d for d in inc] + ccx))
    elif what == "libs":
        print(" ".join(["-L" + d for d in libdirs] + ["-l" + n for n in libnames] + lx))
    else:
        sys.exit(f"usage: {sys.argv[0]} cflags|libs")
