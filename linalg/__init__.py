"""The library: distributed matrices, Cholesky/solve/log-determinant, the exact
communication-volume model, run records, test matrices, HDF5 I/O.

- :mod:`.distributed` - :class:`DistributedMatrix` (tiles on their owners, by a map)
- :mod:`.cholesky` - :func:`cholesky` for every map, :class:`Factor` (solve, logdet)
- :mod:`.mixed` - :func:`solve_mixed`: float32 factorization, float64 answers (refinement,
  fallback); its bytes in :mod:`.mixed_volume`
- :mod:`.errors` - :class:`NotPositiveDefiniteError` (a ``numpy.linalg.LinAlgError``)
- :mod:`.record` - :class:`RunRecord`, the typed record of a run (JSON)
- :mod:`.volume` / :mod:`.volume_summary` - exact inter-node bytes of every graph (numpy)
- :mod:`.plan` - score maps for a run (estimate from the busiest node) and rank them
- :mod:`.matrices` - reproducible test matrices, generated where the tiles live
- :mod:`.hdf5_io` - HDF5 input and atomic output

Nothing here needs the compiled runtime until a computation starts.
"""
from .cholesky import Factor, cholesky
from .distributed import DistributedMatrix
from .errors import NotPositiveDefiniteError
from .matrices import MatrixSpec, parse_matrix_spec
from .mixed import MixedSolution, solve_mixed
from .record import RunRecord
from ..model.volume import (leading_term_tiles, solve_transfer_pairs_bytes, transfer_pairs,
                     transfer_pairs_bytes, transfer_pairs_tiles)

__all__ = ["DistributedMatrix", "cholesky", "Factor", "NotPositiveDefiniteError",
           "solve_mixed", "MixedSolution", "RunRecord", "MatrixSpec",
           "parse_matrix_spec", "transfer_pairs", "transfer_pairs_tiles",
           "transfer_pairs_bytes", "solve_transfer_pairs_bytes", "leading_term_tiles"]
