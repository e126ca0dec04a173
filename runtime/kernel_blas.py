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

Each StarPU worker calls the library with one BLAS thread: the session limits every
BLAS library loaded in the process to one thread while it runs (threadpoolctl), the one
opened here included, and restores them after. Without threadpoolctl, a library opened
here (system or path) is set to one thread when it is opened.
"""
import ctypes
import os
from dataclasses import dataclass

from ..errors import UsageError

#: the environment variable that chooses the library
ENV = "STARCHOL_KERNEL_BLAS"
#: the system OpenBLAS's soname (Debian/Ubuntu ``libopenblas0``)
SYSTEM_OPENBLAS = "libopenblas.so.0"
#: the values of :data:`ENV` that are not a path
CHOICES = ("auto", "system", "scipy")


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
    """

    source: str
    library: str
    version: str

    def describe(self):
        """One line: version, where it comes from and its file."""
        what = self.version or "BLAS/LAPACK of unknown version"
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


def _openblas_version(lib):
    """"OpenBLAS 0.3.21" from a loaded OpenBLAS's ``openblas_get_config``, else ""."""
    try:
        get = lib.openblas_get_config
    except AttributeError:
        return ""
    get.restype = ctypes.c_char_p
    words = (get() or b"").decode(errors="replace").split()
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
            return KernelBlas(source, file, f"{api} {info.get('version') or ''}".strip())
    return KernelBlas(source, real or "", "")


def _scipy():
    import scipy.linalg.cython_blas  # noqa: F401  (loads SciPy's OpenBLAS)

    from . import _kernels

    _kernels.use_blas(None)
    return _describe("scipy", prefix="libscipy_openblas")


def _system():
    from . import _kernels

    try:
        _kernels.use_blas(SYSTEM_OPENBLAS)
    except OSError as exc:
        raise UsageError(f"{ENV}=system: the system OpenBLAS cannot be used ({exc}); "
                         f"install it (apt-get install libopenblas0) or set {ENV}=scipy"
                         ) from None
    lib = _one_thread(SYSTEM_OPENBLAS)
    return _describe("system", prefix="libopenblas", lib=lib)


def _path(path):
    from . import _kernels

    path = os.path.abspath(path)
    try:
        _kernels.use_blas(path)
    except OSError as exc:
        raise UsageError(f"{ENV}={path!r}: {exc}") from None
    return _describe("path", path=path, lib=_one_thread(path))


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
    if value == "scipy":
        chosen = _scipy()
    elif value == "system":
        chosen = _system()
    elif value == "auto":
        try:
            chosen = _system()
        except UsageError:
            chosen = _scipy()
    else:
        chosen = _path(value)
    _active = chosen
    return chosen


def active():
    """The library the kernels call (None before the first :func:`activate`)."""
    return _active


__all__ = ["ENV", "KernelBlas", "activate", "active", "joined", "requested", "short"]
