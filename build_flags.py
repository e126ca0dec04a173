"""How starchol's compiled layer compiles and links against StarPU, MPI and CUDA.

:func:`flags`, :func:`runtime_extensions`: ``pkg-config starpumpi-1.3`` of the StarPU
that :mod:`starpu_plan` chose (which StarPU, and how starchol builds one, are its job),
``mpicc --showme:compile`` / ``--showme:link`` for Open MPI (the StarPU-MPI .pc file
lacks MPI's include path), and an rpath to the StarPU library folder when it is not the
system's; the GPU and simulator modules' flags (:func:`gpu_flags`, :func:`sim_flags`).

``setup.py`` calls :func:`runtime_extensions`, which records the chosen StarPU and the
flags in ``build/starpu-flags`` (:func:`record_flags`); the compiled modules depend on
that file, so building after a switch of StarPU recompiles them (setuptools otherwise
keeps a module that is newer than its sources, linked to the StarPU it was built with).
``CMakeLists.txt`` asks for the same module list and flags (``python build_flags.py
modules|gpu-module|cflags|libs|gpu-cflags|gpu-libs``); ``scripts/`` ask it for the
StarPU plan (``starpu-plan|starpu-choice|starpu-user``, from :mod:`starpu_plan`).
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from starpu_plan import (  # noqa: E402,F401  (beside this file; re-exported for callers)
    CACHE_ENV, CHOICE_FILE, HERE, STARPU_MAXCPUS, STARPU_MAXCUDADEVS, STARPU_MAXNODES,
    STARPU_MAXNUMANODES, STARPU_PKG, STARPU_SOURCE_PACKAGE, STARPU_SOURCE_SUITE,
    STARPU_VERSION, BuildConfigError, cuda_home, prefix_of, run_tool, starpu_build_key,
    starpu_build_prefix, starpu_cache_dir, starpu_choice, starpu_configure_args,
    pkg_config_env, starpu_from_env, starpu_patches, starpu_plan, starpu_source_dir)

#: what the compiled layer was last built against (:func:`record_flags`): the StarPU
#: and every flag; the compiled modules depend on this file, so that a build after a
#: switch of StarPU recompiles them instead of keeping modules linked to the other one
FLAGS_STAMP = os.path.join(HERE, "build", "starpu-flags")


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
    kind, dirs = starpu_choice()
    env = pkg_config_env(dirs)
    try:
        cflags = run_tool(["pkg-config", "--cflags", STARPU_PKG], env)
        libs = run_tool(["pkg-config", "--libs", STARPU_PKG], env)
        libdir = run_tool(["pkg-config", "--variable=libdir", STARPU_PKG], env)
    except BuildConfigError as exc:
        raise BuildConfigError(f"{exc}; " + hint) from exc
    cflags += run_tool(["mpicc", "--showme:compile"])
    libs += run_tool(["mpicc", "--showme:link"])
    inc = [f[2:] for f in cflags if f.startswith("-I")]
    ccx = [f for f in cflags if not f.startswith("-I")]
    libdirs = [f[2:] for f in libs if f.startswith("-L")]
    libnames = [f[2:] for f in libs if f.startswith("-l")]
    lx = [f for f in libs if not f.startswith(("-L", "-l"))]
    if kind != "system" and libdir:
        # the project's or a user's StarPU: found at run time without LD_LIBRARY_PATH
        lx += [f"-Wl,-rpath,{libdir[0]}"]
    return inc, libdirs, libnames, ccx, lx


#: the compiled modules of the runtime layer: (module name, source in pyx/)
RUNTIME_MODULES = (
    ("starchol.runtime._binding", "_binding.pyx"),   # start/stop, register, insert, stats
    ("starchol.runtime._kernels", "_kernels.pyx"),   # kernels and codelets
    ("starchol.runtime._graphs", "_graphs.pyx"),     # task graphs (cimport the two above)
)


def starpu_identity(kind, dirs):
    """One line naming the StarPU a build uses: kind, pkg-config version and prefix
    (e.g. ``system 1.3.10 /usr``); ``dirs`` as :func:`starpu_choice` gives them."""
    env = pkg_config_env(dirs)
    words = []
    for what in (["--modversion"], ["--variable=prefix"]):
        try:
            words.append(" ".join(run_tool(["pkg-config", *what, STARPU_PKG], env)) or "?")
        except BuildConfigError:
            words.append("?")
    return " ".join([kind, *words])


def flags_record(kind, dirs, runtime_flags, gpu):
    """The text of :data:`FLAGS_STAMP`: the StarPU (:func:`starpu_identity`), its
    pkg-config folders, then the flags of the runtime modules and of the GPU module
    (``gpu``: :func:`gpu_flags`'s tuple), one ``name: words`` line each."""
    inc, libdirs, libnames, ccx, lx = runtime_flags
    ginc, glibdirs, glibnames, gccx, glx, macros = gpu
    lines = ["# the StarPU and flags of starchol's last build (build_flags.py); the compiled",
             "# modules are rebuilt when this changes",
             f"starpu: {starpu_identity(kind, dirs)}",
             f"pkgconfig: {' '.join(dirs) or '(the system default)'}",
             f"cflags: {' '.join(['-I' + d for d in inc] + list(ccx))}",
             f"libs: {' '.join(['-L' + d for d in libdirs] + ['-l' + n for n in libnames] + list(lx))}",
             f"gpu-cflags: {' '.join(['-I' + d for d in ginc] + list(gccx) + [f'-D{k}={v}' for k, v in macros])}",
             f"gpu-libs: {' '.join(['-L' + d for d in glibdirs] + ['-l' + n for n in glibnames] + list(glx))}"]
    return "\n".join(lines) + "\n"


def record_flags(text, path=None):
    """Write ``text`` to the stamp ``path`` (default :data:`FLAGS_STAMP`) unless it already
    holds exactly that; atomically (a temporary file renamed). Returns True when written.

    The compiled modules list the stamp among their ``depends``, so setuptools rebuilds
    a module older than the stamp: a changed stamp (another StarPU, other flags) makes
    the next build recompile, an unchanged one leaves its modules as they are.
    """
    path = path or FLAGS_STAMP
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def runtime_extensions():
    """Extensions of the runtime layer (empty list when STARCHOL_NO_RUNTIME=1).

    Records the StarPU and flags in :data:`FLAGS_STAMP` (:func:`record_flags`) and makes
    every module depend on it."""
    if os.environ.get("STARCHOL_NO_RUNTIME") == "1":
        return []
    if not all(os.path.exists(os.path.join(HERE, "pyx", src)) for _, src in RUNTIME_MODULES):
        return []
    import numpy
    from Cython.Build import cythonize
    from setuptools import Extension

    kind, dirs = starpu_choice()
    inc, libdirs, libnames, ccx, lx = flags()
    gpu = gpu_flags(inc, libdirs, libnames, ccx, lx)
    if record_flags(flags_record(kind, dirs, (inc, libdirs, libnames, ccx, lx), gpu)):
        print(f"build_flags: {FLAGS_STAMP} records a new StarPU or new flags; the compiled "
              f"modules will be rebuilt", file=sys.stderr)
    exts = [Extension(
        name,
        sources=[os.path.join("pyx", src)],
        include_dirs=[numpy.get_include(), os.path.join(HERE, "pyx")] + inc,
        library_dirs=libdirs,
        # BLAS/LAPACK come from SciPy's Cython bindings (cython_blas/cython_lapack),
        # i.e. the same OpenBLAS that scipy.linalg uses: nothing more to link.
        libraries=libnames,
        extra_compile_args=ccx + ["-O3"],
        extra_link_args=lx,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        depends=[FLAGS_STAMP],
    ) for name, src in RUNTIME_MODULES]
    # pyx/ holds the raw declarations (starpu.pxd, starpu_mpi.pxd) and, under
    # pyx/starchol/runtime/, the .pxd of the modules that others cimport
    return cythonize(exts + [gpu_extension(inc, libdirs, libnames, ccx, lx, gpu),
                             sim_extension()],
                     language_level=3, include_path=[os.path.join(HERE, "pyx")])


# -- the GPU/scheduler layer (starchol.runtime._gpu) ---------------------------------------
def starpu_has_cuda(include_dirs):
    """True when the ``starpu_config.h`` in ``include_dirs`` defines STARPU_USE_CUDA."""
    for d in include_dirs:
        path = os.path.join(d, "starpu_config.h")
        if os.path.isfile(path):
            with open(path) as f:
                return any(line.split()[:2] == ["#define", "STARPU_USE_CUDA"] for line in f)
    return False


def cuda_gpu_paths():
    """``(include_dirs, library_dirs)`` of CUDA + cuBLAS + cuSOLVER for the GPU layer:
    ``$CUDA_HOME`` (e.g. the folder scripts/cuda-home.sh assembles from NVIDIA's wheels),
    else ``/usr/local/cuda``. BuildConfigError when cuBLAS or cuSOLVER is missing."""
    home = cuda_home() or os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    inc = [os.path.join(home, "include")]
    libs = [d for d in (os.path.join(home, "lib64"), os.path.join(home, "lib"))
            if os.path.isdir(d)]
    for header in ("cublas_v2.h", "cusolverDn.h", "cuda_runtime.h"):
        if not os.path.isfile(os.path.join(inc[0], header)):
            raise BuildConfigError(
                f"StarPU has CUDA but {header} is not in {inc[0]}; set CUDA_HOME to a CUDA "
                f"folder with cuBLAS and cuSOLVER (bash scripts/cuda-home.sh DIR assembles "
                f"one from the toolkit and NVIDIA's pip wheels), or STARCHOL_GPU_CUDA=0")
    return inc, libs


#: the GPU/scheduler module and its sources in pyx/ (Cython front + hand-written C);
#: compiled with :func:`gpu_flags`, not with the flags of :data:`RUNTIME_MODULES`
GPU_MODULE = ("starchol.runtime._gpu", ("_gpu.pyx", "starchol_gpu.c"))


def gpu_flags(inc, libdirs, libnames, ccx, lx):
    """The flags of ``starchol.runtime._gpu`` from the runtime's :func:`flags`: the CUDA
    kernels (cuBLAS, cuSOLVER) when the StarPU it compiles against has CUDA, unless
    ``STARCHOL_GPU_CUDA=0``; else the macro ``STARCHOL_NO_CUDA=1``. The one home of that
    decision (setup.py through :func:`gpu_extension`, CMake through ``gpu-cflags|gpu-libs``).

    Returns ``(include_dirs, library_dirs, libraries, extra_compile, extra_link, macros)``.
    """
    inc, libdirs, libnames = list(inc), list(libdirs), list(libnames)
    ccx, lx, macros = list(ccx) + ["-O2"], list(lx), []
    if starpu_has_cuda(inc) and os.environ.get("STARCHOL_GPU_CUDA") != "0":
        cinc, clibs = cuda_gpu_paths()
        inc += cinc
        libdirs += clibs
        libnames += ["cusolver", "cublas", "cudart"]
        lx += [f"-Wl,-rpath,{d}" for d in clibs]
    else:
        macros.append(("STARCHOL_NO_CUDA", "1"))
    return inc, libdirs, libnames, ccx, lx, macros


def gpu_extension(inc, libdirs, libnames, ccx, lx, gpu=None):
    """``starchol.runtime._gpu`` (pyx/_gpu.pyx + pyx/starchol_gpu.c): HeteroPrio set-up,
    performance models and per-kernel counts always; the CUDA kernels as
    :func:`gpu_flags` decides (``gpu``: its result, when already computed)."""
    from setuptools import Extension

    inc, libdirs, libnames, ccx, lx, macros = gpu or gpu_flags(inc, libdirs, libnames, ccx, lx)
    name, sources = GPU_MODULE
    return Extension(
        name, sources=[os.path.join("pyx", src) for src in sources],
        include_dirs=[os.path.join(HERE, "pyx")] + inc,
        library_dirs=libdirs, libraries=libnames,
        extra_compile_args=ccx, extra_link_args=lx, define_macros=macros,
        depends=[FLAGS_STAMP])


#: the simulator (``starchol simulate``): its .pyx and the C++ driver of SimGrid's S4U
#: API, linked to libsimgrid (Debian's ``libsimgrid-dev``; scripts/setup.sh installs it)
SIM_MODULE = ("starchol.runtime._sim", ("_sim.pyx", "starchol_sim.cpp"))
#: pkg-config's name of SimGrid
SIMGRID_PKG = "simgrid"


def sim_flags():
    """``(include_dirs, library_dirs, libraries, extra_compile)`` of the simulator module,
    from ``pkg-config simgrid``; BuildConfigError when SimGrid is missing."""
    try:
        words = run_tool(["pkg-config", "--cflags", "--libs", SIMGRID_PKG])
    except BuildConfigError as exc:
        raise BuildConfigError(f"SimGrid not found ({exc}); install libsimgrid-dev "
                               f"(scripts/setup.sh does it)") from exc
    inc = [w[2:] for w in words if w.startswith("-I")]
    libdirs = [w[2:] for w in words if w.startswith("-L")]
    libs = [w[2:] for w in words if w.startswith("-l")] or ["simgrid"]
    ccx = [w for w in words if not w.startswith(("-I", "-L", "-l"))]
    return inc, libdirs, libs, ccx + ["-std=c++17", "-O2"]


def sim_extension():
    """``starchol.runtime._sim`` (pyx/_sim.pyx + pyx/starchol_sim.cpp, C++, libsimgrid)."""
    import numpy
    from setuptools import Extension

    inc, libdirs, libs, ccx = sim_flags()
    name, sources = SIM_MODULE
    return Extension(
        name, sources=[os.path.join("pyx", src) for src in sources], language="c++",
        include_dirs=[numpy.get_include(), os.path.join(HERE, "pyx")] + inc,
        library_dirs=libdirs, libraries=libs, extra_compile_args=ccx,
        # the stamp too, like every compiled module (a rebuild of the whole layer)
        depends=[os.path.join("pyx", "starchol_sim.h"), FLAGS_STAMP],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])


def module_names():
    """Short names of every compiled module (``_binding``, ..., ``_gpu``, ``_sim``), build
    order."""
    return [name.rpartition(".")[2] for name, _ in RUNTIME_MODULES + (GPU_MODULE, SIM_MODULE)]


def _main(argv):
    what = argv[1] if len(argv) > 1 else "cflags"
    if what == "starpu-plan":
        print(starpu_plan())
    elif what == "starpu-user":
        from_env = starpu_from_env()
        print(prefix_of(from_env[1][0]) if from_env and from_env[0] == "user" else "")
    elif what == "starpu-choice":
        kind, dirs = starpu_choice()
        print(kind, *dirs)
    elif what == "modules":
        # the modules built with cflags/libs, one pyx/ source each (CMakeLists.txt)
        print(" ".join(name.rpartition(".")[2] for name, _ in RUNTIME_MODULES))
    elif what == "gpu-module":
        # short name, then its sources in pyx/ (CMakeLists.txt)
        name, sources = GPU_MODULE
        print(name.rpartition(".")[2], *sources)
    elif what == "sim-module":
        # short name, then its sources in pyx/ (CMakeLists.txt)
        name, sources = SIM_MODULE
        print(name.rpartition(".")[2], *sources)
    elif what in ("sim-cflags", "sim-libs"):
        inc, libdirs, libs, ccx = sim_flags()
        print(" ".join(["-I" + d for d in inc] + ccx) if what == "sim-cflags" else
              " ".join(["-L" + d for d in libdirs] + ["-l" + n for n in libs]))
    elif what in ("cflags", "libs", "gpu-cflags", "gpu-libs"):
        inc, libdirs, libnames, ccx, lx = flags()
        macros = []
        if what.startswith("gpu-"):
            inc, libdirs, libnames, ccx, lx, macros = gpu_flags(inc, libdirs, libnames, ccx, lx)
        if what.endswith("cflags"):
            print(" ".join(["-I" + d for d in inc] + ccx
                           + [f"-D{k}={v}" for k, v in macros]))
        else:
            print(" ".join(["-L" + d for d in libdirs] + ["-l" + n for n in libnames] + lx))
    else:
        sys.exit(f"usage: {argv[0]} cflags|libs|gpu-cflags|gpu-libs|modules|gpu-module|"
                 f"sim-module|sim-cflags|sim-libs|"
                 f"starpu-plan|starpu-choice|starpu-user")

if __name__ == "__main__":
    try:
        _main(sys.argv)
    except BuildConfigError as exc:
        sys.exit(f"build_flags.py: {exc}")
