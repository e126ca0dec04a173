"""HDF5 input and output of distributed tiled matrices (h5py, serial HDF5).

Targets are written ``FILE.h5:/dataset``. Conventions:

- Input: a square float64 or float32 dataset holding a symmetric matrix (read in its
  own dtype unless another is asked: ``starchol run`` reads float64); each
  rank reads only the tiles it owns (and, for the symmetry check, their mirror images in
  the upper triangle). The lower triangle is what the factorization uses.
- Output: the factor L (lower triangular; its strict upper triangle is never written,
  reads as zeros and takes no space), a symmetric matrix (both triangles) or right-hand
  sides, in the matrix's dtype, with attributes. Chunks are at most min(NB, 256) entries
  a side and split the size evenly. The dataset is written into a temporary file in the
  output's folder (a copy of the existing file, less the dataset it replaces: no dead
  space) renamed over the final name only when complete: a failed or killed run leaves
  no file at the output name. The input file is never opened for writing.

Every check is collective: rank 0 (or every rank, for what each reads) decides, the
verdict is shared, and every rank raises the same :class:`UsageError`; no rank waits on
another that failed.

The rules live by job: reading (:mod:`.hdf5_read`), writing (:mod:`.hdf5_write`), their
temporary files (:mod:`.hdf5_tmp`) and what both share (:mod:`.hdf5_file`); this module
is their public front.
"""
from ..files import OutputAppeared, parse_target
from .hdf5_file import CONTENT, names_compared, unopenable
from .hdf5_read import (content_key, inspect_dataset, inspect_everywhere, inspect_file,
                        inspect_input, look, read_tiles)
from .layout import SYMMETRY_TOL, check_symmetry_tol
from .hdf5_write import FactorWriter, check_output, write_matrix

__all__ = ["SYMMETRY_TOL", "CONTENT", "check_symmetry_tol", "parse_target", "inspect_input",
           "inspect_file", "inspect_dataset", "inspect_everywhere", "content_key", "look",
           "read_tiles", "names_compared", "unopenable", "check_output", "OutputAppeared",
           "FactorWriter", "write_matrix"]
