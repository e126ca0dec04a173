"""The StarPU-MPI runtime layer: the only code that sees StarPU and MPI handles.

- :class:`Session` starts StarPU + StarPU-MPI on an mpi4py communicator (worker count,
  scheduler, statistics, cache) and stops it before MPI finalises, also on errors.
- :mod:`starchol.runtime._binding`, `._kernels`, `._graphs`, `._gpu` are the compiled
  layer (binding, codelets with nogil BLAS/LAPACK kernels, nogil task-graph submission,
  and the GPU layer: CUDA codelets, HeteroPrio, performance models; see :mod:`.gpu`).
- StarPU error codes become :class:`StarPUError` (a failed factorization is the linear
  algebra's :class:`starchol.linalg.errors.NotPositiveDefiniteError`).
"""
from .errors import (CallbackError, RuntimeUnavailableError, SessionError,
                     StarPUError)
from .backend import DEFAULT_SCHEDULER, available_schedulers, starpu_version
from .session import Session
from .workers import default_workers

__all__ = [
    "Session", "SessionError", "CallbackError", "StarPUError", "RuntimeUnavailableError",
    "available_schedulers", "default_workers", "starpu_version", "DEFAULT_SCHEDULER",
]
