"""Which BLAS/LAPACK library the tile kernels call, chosen once per process.

The kernels of :mod:`starchol.runtime._kernels` (POTRF, TRSM, SYRK, GEMM of one tile,
float64 and float32) call BLAS/LAPACK through one table of function pointers. The
session fills it before StarPU starts (:func:`activate`), from the environment variable
``STARCHOL_KERNEL_BLAS``:

``auto`` (or unset)
    The system's OpenBLAS (``libopenblas.so.0``, Debian's ``libopenblas0``, which
    ``scripts/setup.sh`` installs) when it loads and has every symbol the kernels need,
    else SciPy's.
``system``
    The system's OpenBLAS; an error when it cannot be loaded.
``scipy``
    SciPy's OpenBLAS (the one ``scipy.linalg`` calls, through its Cython bindings).
a path
    That shared library: the Fortran symbols ``dgemm_``, ``sgemm_``, ``dsyrk_``,
    ``ssyrk_``, ``dtrsm_``, ``strsm_``, ``dpotrf_``, ``spotrf_`` with 32-bit integers,
    called as OpenBLAS's C implementations of them are (without the hidden
    string-length arguments a gfortran-built reference LAPACK expects), e.g. another
    OpenBLAS build (only OpenBLAS was tried).

Why the system's OpenBLAS first: on the 2-core test machine (Xeon, SkylakeX kernels),
with two StarPU workers calling 256 x 256 kernels at once, Debian's OpenBLAS 0.3.21 ran
the float32 factorization at N = 4096 in 121 ms against 158 ms with SciPy's 0.3.30 (the
same kernels alone, one thread, take the same time with either); float64 was the same
with both (docs/engine.md, "Which BLAS the kernels call"). Every run records its
choice (``RunRecord.kernel_blas``) and ``starchol info`` prints it.

OpenBLAS picks its kernels (a "core": Haswell, Zen, SkylakeX, ...) for the processor
when it is loaded. For the library opened here (system or path), ``STARCHOL_KERNEL_CORE``
chooses them instead:

``auto`` (or unset)
    ``Zen`` (OpenBLAS's AVX2 kernels tuned for AMD) on an AMD processor with AVX2 and
    FMA, else OpenBLAS's own choice. On the AMD EPYC (Zen 4) test machine, OpenBLAS
    0.3.21 picks its AVX-512 ``Cooperlake`` kernels, and with two threads calling 256 x 256 kernels at once on
    tiles that are not in cache its AVX2 kernels were faster (``dgemm`` about 0.77
    against 0.88 ms, ``dsyrk`` 0.44 against 0.51 ms): the float64 factorization at
    N = 4096 took 6-8% less time, float32 about 4% more (docs/engine.md, "Small sizes",
    item 8).
``openblas``
    OpenBLAS's own choice.
a core name
    That core (OpenBLAS's ``OPENBLAS_CORETYPE``, e.g. ``Haswell``); refused when the
    library runs another one (a name OpenBLAS does not know, or a library already loaded
    in the process).

Where ``OPENBLAS_CORETYPE`` is set, it applies to every OpenBLAS of the process and
``auto`` leaves it. The choice applies only while the library is loaded (the variable is
restored at once), so NumPy's and SciPy's OpenBLAS keep their own; SciPy's (``scipy``)
is used as it is. The run record names the core in use
(``OpenBLAS 0.3.21 Zen (system: ...)``).

Each StarPU worker calls the library with one BLAS thread: the session limits every
BLAS library loaded in the process to one thread while it runs (threadpoolctl), the one
opened here included, and restores them after. Without threadpoolctl, a library opened
here (system or path) is set to one thread when it is opened.
"""
import ctypes
import logging
import os
from dataclasses import dataclass, replace

from ..errors import UsageError

log = logging.getLogger("starchol.runtime")

#: the environment variable that chooses the library
ENV = "STARCHOL_KERNEL_BLAS"
#: the system OpenBLAS's soname (Debian/Ubuntu ``libopenblas0``)
SYSTEM_OPENBLAS = "libopenblas.so.0"
#: the values of :data:`ENV` that are not a path
CHOICES = ("auto", "system", "scipy")
#: the environment variable that chooses the OpenBLAS core of a library opened here
CORE_ENV = "STARCHOL_KERNEL_CORE"
#: OpenBLAS's own variable for its core (read when an OpenBLAS is loaded)
OPENBLAS_CORETYPE = "OPENBLAS_CORETYPE"
#: the values of :data:`CORE_ENV` that are not a core name
CORE_CHOICES = ("auto", "openblas")
#: the core ``auto`` asks for on an AMD processor
AMD_CORE = "Zen"


@dataclass(frozen=True)
class KernelBlas:
    """The library the kernels call.

    Attributes
    ----------
    source : str
        ``"system"``, ``"scipy"`` or ``"path"`` (a library named by path).
    library : str
        Its file (resolved path), or ``""`` when unknown.
    version : str
        ``"OpenBLAS 0.3.21"``, or ``""`` when the library does not say.
    core : str
        The OpenBLAS core (kernel set) in use, e.g. ``"Zen"``, or ``""`` when unknown.
    """

    source: str
    library: str
    version: str
    core: str = ""

    def describe(self):
        """One line: version, OpenBLAS core, where it comes from and its file."""
        what = self.version or "BLAS/LAPACK of unknown version"
        if self.core:
            what = f"{what} {self.core}"
        return f"{what} ({self.source}: {self.library or 'unknown file'})"


#: between the descriptions of ranks that chose differently (:func:`joined`)
SEPARATOR = "; "


def joined(descriptions):
    """One text for the ranks' :meth:`KernelBlas.describe` lines: every distinct one,
    in rank order, joined by :data:`SEPARATOR` (empty ones left out)."""
    return SEPARATOR.join(d for d in dict.fromkeys(descriptions) if d)


def short(text):
    """``"OpenBLAS 0.3.21 (system)"`` from a :func:`joined` text (each library's file
    left out); ``""`` for an empty text."""
    parts = []
    for d in text.split(SEPARATOR) if text else []:
        what, _, where = d.partition(" (")
        parts.append(f"{what} ({where.split(':')[0]})" if where else what)
    return SEPARATOR.join(parts)


_active = None


class _NoLibrary(UsageError):
    """The system OpenBLAS cannot be loaded (``auto`` then takes SciPy's)."""


def requested(environ=None):
    """The value of :data:`ENV` (``"auto"`` when unset), checked.

    Raises
    ------
    UsageError
        An empty value, or a path that is not a file.
    """
    value = (os.environ if environ is None else environ).get(ENV, "auto")
    if value in CHOICES:
        return value
    if not value.strip():
        raise UsageError(f"environment variable {ENV} is empty; unset it or give one of "
                         f"{', '.join(CHOICES)} or a library's path")
    if not os.path.isfile(value):
        raise UsageError(f"environment variable {ENV}={value!r} is neither one of "
                         f"{', '.join(CHOICES)} nor a library file; fix or unset it "
                         f"(unset {ENV})")
    return value


def requested_core(environ=None, cpuinfo="/proc/cpuinfo"):
    """The OpenBLAS core to load the kernels' library with (:data:`CORE_ENV`), or None
    for OpenBLAS's own choice (``openblas``; ``auto`` off AMD processors with AVX2 and
    FMA, read from ``cpuinfo``; or ``OPENBLAS_CORETYPE`` set: it applies anyway).

    Raises
    ------
    UsageError
        An empty value, or one that is not a core name.
    """
    env = os.environ if environ is None else environ
    value = env.get(CORE_ENV, "auto")
    if not value.strip() or (value not in CORE_CHOICES and not value.isalnum()):
        raise UsageError(f"environment variable {CORE_ENV}={value!r} is neither one of "
                         f"{', '.join(CORE_CHOICES)} nor an OpenBLAS core name (such as "
                         f"Haswell, Zen, SkylakeX); fix or unset it (unset {CORE_ENV})")
    if value == "openblas" or env.get(OPENBLAS_CORETYPE):
        return None
    if value != "auto":
        return value
    try:
        with open(cpuinfo) as f:
            text = f.read()
    except OSError:
        return None
    amd = any(line.startswith("vendor_id") and "AuthenticAMD" in line
              for line in text.splitlines())
    # OpenBLAS's Zen kernels use AVX2 and FMA: not on the AMD processors before them
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return AMD_CORE if amd and {"avx2", "fma"} <= set(flags) else None


def _load_with_core(load, core):
    """``load()`` with ``OPENBLAS_CORETYPE`` set to ``core`` (None: unchanged) while it
    runs, then restored."""
    if core is None:
        return load()
    saved = os.environ.get(OPENBLAS_CORETYPE)
    os.environ[OPENBLAS_CORETYPE] = core
    try:
        return load()
    finally:
        if saved is None:
            del os.environ[OPENBLAS_CORETYPE]
        else:
            os.environ[OPENBLAS_CORETYPE] = saved


def _openblas_text(lib, function):
    """The string a loaded OpenBLAS's ``function`` (no arguments) returns, else ""."""
    try:
        get = getattr(lib, function)
    except AttributeError:
        return ""
    get.restype = ctypes.c_char_p
    return (get() or b"").decode(errors="replace").strip()


def _openblas_core(lib):
    """The core a loaded OpenBLAS runs (``openblas_get_corename``), else ""."""
    return _openblas_text(lib, "openblas_get_corename")


def _check_core(lib, named, what):
    """The core the library runs; UsageError when the core ``named`` in
    :data:`CORE_ENV` (None: not named) is not the one it runs."""
    running = _openblas_core(lib)
    if named is not None and running.lower() != named.lower():
        raise UsageError(f"{CORE_ENV}={named}: {what} runs OpenBLAS core "
                         f"{running or 'unknown'} instead (a core name OpenBLAS does not "
                         f"know, a library that is not OpenBLAS, or one already loaded in "
                         f"this process); unset {CORE_ENV} or give another core")
    return running


def _openblas_version(lib):
    """"OpenBLAS 0.3.21" from a loaded OpenBLAS's ``openblas_get_config``, else ""."""
    words = _openblas_text(lib, "openblas_get_config").split()
    return " ".join(words[:2]) if words[:1] == ["OpenBLAS"] else ""


def _one_thread(name):
    """The library opened by ``name`` (ctypes). Where threadpoolctl is missing (the
    session then cannot limit it), it is set to one thread here, for good: each StarPU
    worker is a thread of its own. With threadpoolctl the session limits it while it
    runs and restores it after."""
    lib = ctypes.CDLL(name)
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        if hasattr(lib, "openblas_set_num_threads"):
            lib.openblas_set_num_threads(ctypes.c_int(1))
        elif hasattr(lib, "bli_thread_set_num_threads"):
            lib.bli_thread_set_num_threads(ctypes.c_int64(1))
    return lib


def _describe(source, prefix=None, path=None, lib=None):
    """KernelBlas for a loaded library, from threadpoolctl's view of the process:
    matched by ``prefix`` (file name start) or by ``path``. Without threadpoolctl: the
    version OpenBLAS reports (``lib``) and the name it was opened by."""
    real = os.path.realpath(path) if path else None
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return KernelBlas(source, real or (SYSTEM_OPENBLAS if source == "system" else ""),
                          _openblas_version(lib) if lib is not None else "")
    for info in threadpool_info():
        file = info.get("filepath") or ""
        name = os.path.basename(file)
        if (real is not None and os.path.realpath(file) == real) or (
                prefix is not None and info.get("prefix") == prefix
                and not name.startswith(prefix + "64_")):
            api = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}.get(
                info.get("internal_api"), info.get("internal_api") or "")
            return KernelBlas(source, file, f"{api} {info.get('version') or ''}".strip(),
                              info.get("architecture") or "")
    return KernelBlas(source, real or "", "")


def _scipy(named=None):
    if named is not None:
        raise UsageError(f"{CORE_ENV}={named}: the kernels call SciPy's OpenBLAS, which "
                         f"SciPy loads with its own core; the variable applies to a library "
                         f"starchol opens ({ENV}=system or a path); unset {CORE_ENV}")
    import scipy.linalg.cython_blas  # noqa: F401  (loads SciPy's OpenBLAS)

    from . import _kernels

    _kernels.use_blas(None)
    return _describe("scipy", prefix="libscipy_openblas")


def _system(core=None, named=None):
    from . import _kernels

    try:
        _load_with_core(lambda: _kernels.use_blas(SYSTEM_OPENBLAS), core)
    except OSError as exc:
        raise _NoLibrary(f"{ENV}=system: the system OpenBLAS cannot be used ({exc}); "
                         f"install it (apt-get install libopenblas0) or set {ENV}=scipy"
                         ) from None
    lib = _one_thread(SYSTEM_OPENBLAS)
    running = _check_core(lib, named, "the system OpenBLAS")
    return replace(_describe("system", prefix="libopenblas", lib=lib), core=running)


def _path(path, core=None, named=None):
    from . import _kernels

    path = os.path.abspath(path)
    try:
        _load_with_core(lambda: _kernels.use_blas(path), core)
    except OSError as exc:
        raise UsageError(f"{ENV}={path!r}: {exc}") from None
    lib = _one_thread(path)
    running = _check_core(lib, named, path)
    return replace(_describe("path", path=path, lib=lib), core=running)


def activate(environ=None):
    """Point the kernels at the library :data:`ENV` asks for, once per process, and
    return it (a :class:`KernelBlas`). Later calls return the first choice: the
    kernels may be running by then.

    Raises
    ------
    UsageError
        A bad value of :data:`ENV`, or a library that cannot be used.
    """
    global _active
    if _active is not None:
        return _active
    value = requested(environ)
    core = requested_core(environ)
    # a core the user named (not auto's choice): SciPy's library cannot take it, and a
    # library starchol opens must run it
    named = (os.environ if environ is None else environ).get(CORE_ENV, "auto")
    named = None if named in CORE_CHOICES else named
    check = core if named else None
    if value == "scipy":
        chosen = _scipy(named)
    elif value == "system":
        chosen = _system(core, check)
    elif value == "auto":
        try:
            chosen = _system(core, check)
        except _NoLibrary:
            chosen = _scipy(named)
    else:
        chosen = _path(value, core, check)
    _active = chosen
    return chosen


def active():
    """The library the kernels call (None before the first :func:`activate`)."""
    return _active


__all__ = ["CORE_ENV", "ENV", "KernelBlas", "activate", "active", "joined", "requested",
           "requested_core", "short"]


def limit_threads():
    """Limit every BLAS of the process to one thread (each StarPU worker calls BLAS from
    a thread of its own). Returns the threadpoolctl limiter, whose
    ``restore_original_limits()`` undoes it, or None without threadpoolctl (then the
    kernels' library was set to one thread when it was loaded)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        log.warning("threadpoolctl is missing: BLAS inside tasks may be multi-threaded")
        return None
    return threadpool_limits(limits=1, user_api="blas")
