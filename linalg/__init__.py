"""Tiled Cholesky: the exact communication-volume model, the task graph, matrices, I/O.

- :mod:`.volume` / :mod:`.volume_summary` - exact inter-node transfers of any map (numpy)
- :mod:`.tiled` - a tiled matrix whose tiles live on their owners
- :mod:`.matrices` - reproducible test matrices, generated where the tiles live
- :mod:`.cholesky` - the distributed factorization, residual and gather on StarPU-MPI
- :mod:`.hdf5_io` - HDF5 input and atomic output

The runtime-dependent functions are imported lazily: ``import starchol.linalg`` works
without the compiled runtime layer.
"""
from .matrices import MatrixSpec, parse_matrix_spec
from .tiled import TiledMatrix
from .volume import (leading_term_tiles, transfer_pairs, transfer_pairs_bytes,
                     transfer_pairs_tiles)


def __getattr__(name):
    if name in ("factorize", "residual", "gather"):
        from . import cholesky

        return getattr(cholesky, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MatrixSpec", "parse_matrix_spec", "TiledMatrix", "transfer_pairs",
           "transfer_pairs_tiles", "transfer_pairs_bytes", "leading_term_tiles",
           "factorize", "residual", "gather"]
