"""Loading the compiled layer and mpi4py, and the rules that ask the loaded StarPU.

The one home of "load the binding" (:func:`binding`) and "load mpi4py" (:func:`mpi`):
each raises :class:`~starchol.runtime.errors.RuntimeUnavailableError` with the fix when
the piece is missing, so no other module imports the session for them. Also the
scheduler rules (:data:`DEFAULT_SCHEDULER`, :func:`available_schedulers`,
:func:`check_scheduler`) and :func:`starpu_version`, which read the loaded StarPU.
"""
from ..errors import UsageError
from .errors import RuntimeUnavailableError

#: the scheduler used when none is given (prio, lws and dmda measured within a few %:
#: docs/engine.md)
DEFAULT_SCHEDULER = "prio"


def binding():
    """The compiled StarPU-MPI binding, :mod:`starchol.runtime._binding`.

    Raises
    ------
    RuntimeUnavailableError
        The compiled layer is not built, or StarPU cannot load.
    """
    try:
        from . import _binding
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RuntimeUnavailableError(
            f"the StarPU-MPI layer (starchol.runtime._binding) is not built or cannot load "
            f"({exc}); install the system packages (libstarpu-dev, libopenmpi-dev, ...) "
            f"and reinstall starchol with `pip install --no-build-isolation -e .`") from exc
    return _binding


def mpi():
    """mpi4py's ``MPI`` module.

    Raises
    ------
    RuntimeUnavailableError
        mpi4py is not installed.
    """
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RuntimeUnavailableError(
            "mpi4py is missing; build it against the system Open MPI: "
            "MPICC=mpicc pip install --no-binary mpi4py mpi4py") from exc
    return MPI


def mpi4py_version():
    """The version of the mpi4py that :func:`mpi` loads, e.g. ``"3.1.4"``."""
    mpi()
    import mpi4py

    return mpi4py.__version__


def starpu_version():
    """The version string of the StarPU library loaded at run time, e.g. ``"1.3.10"``."""
    return ".".join(map(str, binding().runtime_version()))


def available_schedulers():
    """Names of the scheduling policies of the installed StarPU."""
    return [name for name, _ in binding().predefined_schedulers()]


def check_scheduler(name):
    """Raise :class:`UsageError` unless ``name`` is a StarPU scheduling policy."""
    names = available_schedulers()
    if name not in names:
        raise UsageError(f"unknown scheduler {name!r}; StarPU {starpu_version()} has: "
                         f"{', '.join(names)} (default {DEFAULT_SCHEDULER})",
                         param="scheduler")
    return name


def check_thread_level(MPI):
    """Raise :class:`RuntimeUnavailableError` unless MPI runs with
    ``MPI_THREAD_SERIALIZED`` or more (StarPU-MPI's communication thread calls MPI)."""
    level = MPI.Query_thread()
    if level < MPI.THREAD_SERIALIZED:
        names = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
                 MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED"}
        raise RuntimeUnavailableError(
            f"StarPU-MPI needs MPI_THREAD_SERIALIZED or more (its communication thread "
            f"calls MPI); MPI was initialised with {names.get(level, level)} "
            f"(do not set mpi4py.rc.thread_level below 'serialized'; mpi4py's default, "
            f"'multiple', is right)")
