"""starchol: communication-avoiding distributed dense Cholesky on StarPU-MPI.

Subpackages (each a top-level folder of the source tree, mapped by setup.py):

- :mod:`starchol.distributions` - tile -> node maps (2DBC, SBC, 2.5D, custom)
- :mod:`starchol.linalg` - tiled Cholesky, exact communication-volume model, matrices, I/O
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
from .linalg import (DistributedMatrix, Factor, MixedSolution,  # noqa: E402
                     NotPositiveDefiniteError, RunRecord, cholesky, solve_mixed)
from .runtime import CallbackError, Session, SessionError, StarPUError  # noqa: E402

__all__ = ["__version__", "StarcholError", "UsageError", "DistributedMatrix", "cholesky",
           "solve_mixed", "MixedSolution", "Factor", "RunRecord", "Session",
           "NotPositiveDefiniteError", "StarPUError", "SessionError", "CallbackError"]
