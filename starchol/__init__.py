"""starchol: communication-avoiding distributed dense Cholesky on StarPU-MPI.

Subpackages (each a folder of the source tree, mapped by setup.py):

- :mod:`starchol.distributions` - tile -> node maps (2DBC, SBC, 2.5D, custom)
- :mod:`starchol.model` - what a run costs: exact communication volumes, memory, flop and
  task counts, the planner (numpy only: no StarPU, MPI or HDF5)
- :mod:`starchol.linalg` - tiled Cholesky, solve, run records, matrices, I/O
- :mod:`starchol.runtime` - the StarPU-MPI runtime layer (Cython)
- :mod:`starchol.jobs` - the ``starchol`` command line

The public API (docs/api.md): :class:`DistributedMatrix`, :func:`cholesky` ->
:class:`Factor` (``solve``, ``logdet``, ``record``), :func:`solve_mixed` ->
:class:`MixedSolution`, :class:`RunRecord`,
:class:`Session`, and the errors.
"""
from .version import VERSION as __version__

try:
    from . import distributions as _distributions  # noqa: F401
except ImportError as _exc:  # pragma: no cover - only in a raw, uninstalled checkout
    raise ImportError(
        "starchol is being imported from its source folder without being installed, so its "
        "subpackages (distributions/, linalg/, runtime/, jobs/) are not mapped. Install it: "
        "`bash scripts/setup.sh` (system packages + .venv), or `pip install -e .` in a "
        "virtual environment that has the system StarPU; then use .venv/bin/python."
    ) from _exc

from .errors import StarcholError, UsageError  # noqa: E402

#: the public names of the library and the runtime, and their modules: imported when
#: first used (PEP 562), so that ``import starchol.model`` loads neither the runtime
#: nor mpi4py
_LAZY = {"DistributedMatrix": "linalg", "Factor": "linalg", "MixedSolution": "linalg",
         "NotPositiveDefiniteError": "linalg", "RunRecord": "linalg", "cholesky": "linalg",
         "solve_mixed": "linalg", "CallbackError": "runtime", "Session": "runtime",
         "SessionError": "runtime", "StarPUError": "runtime"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'starchol' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["__version__", "StarcholError", "UsageError", "DistributedMatrix", "cholesky",
           "solve_mixed", "MixedSolution", "Factor", "RunRecord", "Session",
           "NotPositiveDefiniteError", "StarPUError", "SessionError", "CallbackError"]
