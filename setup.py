"""Build and install starchol.

The owner's top-level folders are mapped into one import package, ``starchol``:

    starchol                 <- starchol/        version, ``python -m starchol``
    starchol.distributions   <- distributions/   tile -> node maps (pure Python)
    starchol.model           <- starchol/model/  what a run costs: exact volumes, memory, counts,
                                                 plan, platform (numpy only: no StarPU, MPI, HDF5)
    starchol.linalg          <- linalg/          tiled Cholesky, solve, records, matrices, I/O
    starchol.runtime         <- runtime/         Python front of the StarPU-MPI runtime
    starchol.runtime._*      <- pyx/*.pyx        the compiled layer (binding, kernels, graphs, gpu)
    starchol.reports         <- starchol/reports/ the data of ``starchol report`` (model sweep, runs, traces)
    starchol.jobs            <- jobs/            the command line

The compiler and linker flags for the Cython layer come from one place,
``build_flags.py`` (pkg-config for StarPU + ``mpicc --showme`` for Open MPI); the
CMake build reads the same sources of truth.
Set ``STARCHOL_NO_RUNTIME=1`` to install only the pure-Python parts (maps, the model layer).
"""
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_flags  # noqa: E402  (lives beside this file)

PACKAGE_DIRS = {
    "starchol": "starchol",
    "starchol.distributions": "distributions",
    "starchol.model": "starchol/model",
    "starchol.linalg": "linalg",
    "starchol.runtime": "runtime",
    "starchol.reports": "starchol/reports",
    "starchol.jobs": "jobs",
}

setup(
    packages=list(PACKAGE_DIRS),
    package_dir=PACKAGE_DIRS,
    ext_modules=build_flags.runtime_extensions(),
    zip_safe=False,
)
