"""Which StarPU starchol's compiled layer uses, and how starchol builds one.

**Which StarPU** (:func:`starpu_choice`, first match wins):

- ``STARCHOL_STARPU=system``: Debian's ``libstarpu-dev`` (pkg-config's default path);
- ``STARPU_PREFIX=DIR``, or ``STARCHOL_STARPU=DIR``: a user's StarPU, installed under DIR
  (DIR/lib/pkgconfig) or DIR itself a folder of ``.pc`` files (a cluster module, spack);
- otherwise the choice ``scripts/setup.sh`` recorded in ``build/starpu-choice``
  (``build PREFIX``: the project's own build under :func:`starpu_cache_dir`;
  ``user PREFIX``; ``system``), so a later ``pip install -e .`` builds against the same;
- otherwise the system's.

**How StarPU is built** when starchol builds it (:data:`STARPU_VERSION`,
:func:`starpu_configure_args`, :func:`starpu_build_prefix`, :func:`starpu_plan`):
``scripts/build-starpu.sh`` fetches Debian's source package and runs the configure line
``python3 build_flags.py starpu-plan`` prints. How the extension then compiles and links
against the chosen StarPU is :mod:`build_flags`'s job.
"""
import glob
import hashlib
import os
import shlex
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))

#: StarPU's pkg-config module (StarPU + StarPU-MPI); a 1.4 install also writes this name
STARPU_PKG = "starpumpi-1.3"
#: the StarPU starchol builds: Debian bookworm's source package of upstream 1.3.10
STARPU_VERSION = "1.3.10"
STARPU_SOURCE_PACKAGE = "starpu"
STARPU_SOURCE_SUITE = "bookworm"
#: CPU workers per process (Debian's package has 4: --enable-quick-check)
STARPU_MAXCPUS = 256
#: NUMA nodes per process: 2 sockets x NPS4 (AMD) or SNC4 (Intel) is 8; room for 16
STARPU_MAXNUMANODES = 16
#: CUDA devices per process when CUDA is on (8-GPU nodes)
STARPU_MAXCUDADEVS = 8
#: memory nodes per process: NUMA nodes + GPUs + 2 disks; 32 is StarPU 1.3's wt_mask limit
STARPU_MAXNODES = 32
#: where setup.sh records which StarPU this checkout builds against
CHOICE_FILE = os.path.join(HERE, "build", "starpu-choice")
#: environment variable naming a StarPU build cache shared by several checkouts
CACHE_ENV = "STARCHOL_STARPU_CACHE"


class BuildConfigError(RuntimeError):
    """The system libraries the runtime layer needs are missing."""


def run_tool(cmd, env=None):
    """The words ``cmd`` prints (shell-split), or BuildConfigError saying why it failed."""
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    except FileNotFoundError as exc:
        raise BuildConfigError(f"{cmd[0]} not found") from exc
    except subprocess.CalledProcessError as exc:
        raise BuildConfigError(f"{' '.join(cmd)} failed: {exc.stderr.strip()}") from exc
    return shlex.split(out.stdout)


# -- building StarPU ---------------------------------------------------------------------
def cuda_home():
    """The CUDA toolkit folder when ``nvcc`` and cuBLAS are both found, else None.

    ``CUDA_HOME`` / ``CUDA_PATH`` first, then the folder above ``nvcc`` on PATH (its
    symlinks resolved). cuBLAS counts when ``cublas_v2.h`` and ``libcublas.so`` are in it.
    """
    if os.environ.get("STARCHOL_CUDA") == "0":
        return None
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
        # a wrapper script (e.g. /usr/local/bin/nvcc -> exec /usr/local/cuda-X/bin/nvcc)
        homes.append("/usr/local/cuda")
    for home in homes:
        if not home or not os.path.isfile(os.path.join(home, "bin", "nvcc")):
            continue
        inc = glob.glob(os.path.join(home, "include", "cublas_v2.h")) + \
            glob.glob(os.path.join(home, "targets", "*", "include", "cublas_v2.h"))
        lib = [p for d in ("lib64", "lib", "targets/*/lib")
               for p in glob.glob(os.path.join(home, d, "libcublas.so*"))]
        if inc and lib:
            return home
    return None


def _mpi_identity():
    """What identifies the MPI StarPU-MPI is built against (mpicc and its flags)."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        raise BuildConfigError("mpicc not found; install openmpi-bin and libopenmpi-dev "
                               "(scripts/setup.sh does it)")
    words = [os.path.realpath(mpicc)]
    for what in ("--showme:compile", "--showme:link"):
        try:
            words += run_tool([mpicc, what])
        except BuildConfigError:
            pass
    return words


def starpu_configure_args(prefix="PREFIX", cuda=None):
    """The ``./configure`` arguments of starchol's StarPU build (after ``--prefix``).

    ``cuda`` is the CUDA toolkit folder (default: :func:`cuda_home`), None for off.
    """
    if cuda is None:
        cuda = cuda_home()
    args = [f"--prefix={prefix}",
            f"--enable-maxcpus={STARPU_MAXCPUS}",
            f"--enable-maxnumanodes={STARPU_MAXNUMANODES}",
            f"--enable-maxnodes={STARPU_MAXNODES}",
            "--enable-mpi", "--disable-mpi-check", "--with-fxt",
            "--disable-opencl", "--disable-opengl-render",
            "--disable-build-doc", "--disable-build-examples", "--disable-build-tests",
            "--disable-starpufft", "--disable-socl", "--disable-openmp",
            "--disable-starpurm", "--disable-static", "--disable-fortran",
            "--disable-mlr"]
    if cuda:
        args += ["--enable-cuda", f"--with-cuda-dir={cuda}",
                 f"--enable-maxcudadev={STARPU_MAXCUDADEVS}"]
        # cuBLAS/cuSPARSE found at link and run time without LD_LIBRARY_PATH (StarPU's own
        # tools link against libstarpu and fail to resolve them otherwise)
        rpath = [d for d in (os.path.join(cuda, "lib64"), os.path.join(cuda, "lib"))
                 if os.path.isdir(d)]
        if rpath:
            args.append("LDFLAGS=" + " ".join(f"-Wl,-rpath,{d}" for d in rpath))
    else:
        # idle CPU workers sleep after a short poll (scripts/starpu-patches: idle-spin)
        # instead of polling forever. CUDA builds keep StarPU's default non-blocking
        # drivers: the GPU path was built and rehearsed with them (docs/gpu.md)
        args += ["--disable-cuda", "--enable-blocking-drivers"]
    return args


def starpu_cache_dir():
    """Folder holding StarPU builds: ``$STARCHOL_STARPU_CACHE`` (shared by checkouts),
    else ``build/starpu`` in this checkout."""
    return os.path.abspath(os.environ.get(CACHE_ENV) or os.path.join(HERE, "build", "starpu"))


def starpu_source_dir():
    """Folder of the StarPU source tarball ``scripts/build-starpu.sh`` fetched: beside the
    build the extension uses (``build/starpu-choice`` names ``CACHE/starpu-VERSION-KEY``,
    the source is in ``CACHE/source``), so a build made with ``$STARCHOL_STARPU_CACHE``
    is found without it; else ``starpu_cache_dir()/source``."""
    if os.path.isfile(CHOICE_FILE):
        with open(CHOICE_FILE) as f:
            kind, _, recorded = f.read().strip().partition(" ")
        beside = os.path.join(os.path.dirname(recorded.rstrip("/")), "source")
        if kind == "build" and recorded and os.path.isdir(beside):
            return beside
    return os.path.join(starpu_cache_dir(), "source")


def starpu_patches():
    """starchol's patches to StarPU's source (``scripts/starpu-patches/*.patch``), sorted;
    ``scripts/build-starpu.sh`` applies them all."""
    return sorted(glob.glob(os.path.join(HERE, "scripts", "starpu-patches", "*.patch")))


def _file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def starpu_build_key(args=None):
    """12 hex digits naming one build: version, configure arguments, MPI, compiler and
    the contents of starchol's patches."""
    args = starpu_configure_args() if args is None else args
    cc = shutil.which(os.environ.get("CC", "gcc")) or "cc"
    words = ([STARPU_VERSION, STARPU_SOURCE_SUITE, cc] + list(args) + _mpi_identity()
             + [_file_sha256(p) for p in starpu_patches()])
    return hashlib.sha256("\0".join(words).encode()).hexdigest()[:12]


def starpu_build_prefix():
    """The install prefix of starchol's StarPU build for this machine's settings."""
    args = starpu_configure_args()
    return os.path.join(starpu_cache_dir(), f"starpu-{STARPU_VERSION}-{starpu_build_key(args)}")


def starpu_plan():
    """Shell assignments for ``scripts/build-starpu.sh`` (version, source, prefix, args)."""
    prefix = starpu_build_prefix()
    args = starpu_configure_args(prefix)
    lines = [f"STARPU_VERSION={shlex.quote(STARPU_VERSION)}",
             f"STARPU_SOURCE_PACKAGE={shlex.quote(STARPU_SOURCE_PACKAGE)}",
             f"STARPU_SOURCE_SUITE={shlex.quote(STARPU_SOURCE_SUITE)}",
             f"STARPU_CACHE={shlex.quote(starpu_cache_dir())}",
             f"STARPU_BUILD_PREFIX={shlex.quote(prefix)}",
             f"STARPU_CUDA={shlex.quote(cuda_home() or '')}",
             "STARPU_CONFIGURE_ARGS=(" + " ".join(shlex.quote(a) for a in args) + ")"]
    return "\n".join(lines)


# -- choosing the StarPU the extension builds against --------------------------------------
def _pc_dirs(prefix):
    return [d for d in (os.path.join(prefix, "lib", "pkgconfig"),
                        os.path.join(prefix, "lib64", "pkgconfig"),
                        *glob.glob(os.path.join(prefix, "lib", "*-linux-gnu", "pkgconfig")),
                        prefix)
            if os.path.isfile(os.path.join(d, STARPU_PKG + ".pc"))]


def pkg_config_env(dirs):
    """The environment in which pkg-config finds the ``.pc`` files in ``dirs`` first."""
    env = dict(os.environ)
    if dirs:
        env["PKG_CONFIG_PATH"] = os.pathsep.join(
            dirs + [p for p in env.get("PKG_CONFIG_PATH", "").split(os.pathsep) if p])
    return env


def prefix_of(pc_dir):
    """The install prefix a pkg-config folder belongs to (its ``prefix=`` variable)."""
    env = pkg_config_env([pc_dir])
    try:
        return run_tool(["pkg-config", "--variable=prefix", STARPU_PKG], env)[0]
    except (BuildConfigError, IndexError):
        return pc_dir


def starpu_from_env():
    """``(kind, pkgconfig_dirs)`` the environment asks for, or None: ``STARCHOL_STARPU=system``
    gives ``("system", [])``; ``STARPU_PREFIX`` or a path in ``STARCHOL_STARPU`` gives
    ``("user", dirs)`` (BuildConfigError when no ``starpumpi-1.3.pc`` is there)."""
    env = os.environ
    want = env.get("STARCHOL_STARPU", "")
    if want == "system":
        return "system", []
    user = env.get("STARPU_PREFIX") or (want if want not in ("", "build") else "")
    if not user:
        return None
    dirs = _pc_dirs(os.path.abspath(os.path.expanduser(user)))
    if not dirs:
        raise BuildConfigError(
            f"no {STARPU_PKG}.pc under {user} (looked in lib/pkgconfig, lib64/pkgconfig "
            f"and the folder itself); point STARPU_PREFIX at StarPU's install prefix, or "
            f"STARCHOL_STARPU at a folder of .pc files")
    return "user", dirs


def starpu_choice():
    """``(kind, pkgconfig_dirs)``: kind is ``system``, ``user`` or ``build``;
    pkgconfig_dirs are prepended to ``PKG_CONFIG_PATH`` (empty for the system's)."""
    from_env = starpu_from_env()
    if from_env is not None:
        return from_env
    if os.path.isfile(CHOICE_FILE):
        with open(CHOICE_FILE) as f:
            kind, _, recorded = f.read().strip().partition(" ")
        if kind in ("build", "user") and recorded:
            dirs = _pc_dirs(recorded)
            if not dirs:
                raise BuildConfigError(
                    f"{CHOICE_FILE} names the StarPU {recorded}, which is gone; run "
                    f"scripts/setup.sh again (or set STARCHOL_STARPU=system)")
            return kind, dirs
    return "system", []
