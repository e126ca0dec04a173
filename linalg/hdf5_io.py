"""HDF5 input and output of distributed tiled matrices (h5py, serial HDF5).

Targets are written ``FILE.h5:/dataset``. Conventions:

- Input: a square float64 or float32 (upcast) dataset holding a symmetric matrix; each
  rank reads only the tiles it owns (and, for the symmetry check, their mirror images in
  the upper triangle). The lower triangle is what the factorization uses.
- Output: the factor L (lower triangular, zeros above) as a float64 dataset with
  attributes. It is written to a temporary file in the output's folder and renamed over
  the final name only when complete: a failed or killed run leaves no file at the output
  name. The input file is never opened for writing.

Every check is collective: rank 0 (or every rank, for what each reads) decides, the
verdict is shared, and every rank raises the same :class:`UsageError`; no rank waits on
another that failed.
"""
import os
import shutil
import signal
import time

import numpy as np

from ..errors import StarcholError, UsageError
from ..runtime.collective import allreduce_max

#: default tolerance of the symmetry check: max |A - A^T| <= tol * max |A|
SYMMETRY_TOL = 1e-10


def parse_target(text, flag="--input"):
    """``"file.h5:/A"`` -> ``("file.h5", "/A")``. The dataset part is required."""
    if not text or ":" not in text:
        raise UsageError(f"{flag} must look like FILE.h5:/DATASET, got {text!r}")
    path, dataset = text.rsplit(":", 1)
    if not path or not dataset:
        raise UsageError(f"{flag} must look like FILE.h5:/DATASET, got {text!r}")
    if not dataset.startswith("/"):
        dataset = "/" + dataset
    return path, dataset


def _h5py():
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py is a dependency
        raise StarcholError("h5py is missing: pip install h5py") from exc
    return h5py


class _Comm1:
    """Stand-in for a 1-rank communicator (serial use)."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def bcast(self, obj, root=0):
        return obj

    def allreduce(self, obj, op=None):
        return obj

    def allgather(self, obj):
        return [obj]

    def Barrier(self):
        pass


def _comm(comm):
    return _Comm1() if comm is None else comm


def _agree(comm, error):
    """Share rank 0's verdict (an error message or None); raise it on every rank."""
    error = comm.bcast(error, root=0)
    if error:
        raise UsageError(error)


def _agree_any(comm, error):
    """Raise on every rank the first (lowest rank) error message any rank found."""
    errors = [e for e in comm.allgather(error) if e]
    if errors:
        raise UsageError(errors[0])


def inspect_input(path, dataset, comm=None):
    """Check that ``path:dataset`` is a square float matrix. Collective.

    Returns ``(n, dtype_name)``. Raises :class:`UsageError` on every rank: missing file,
    not HDF5, missing dataset, not 2D or not square, unsupported dtype.
    """
    comm = _comm(comm)
    info, error = None, None
    if comm.Get_rank() == 0:
        try:
            info = _inspect(path, dataset)
        except UsageError as exc:
            error = str(exc)
    _agree(comm, error)
    return comm.bcast(info, root=0)


def _inspect(path, dataset):
    h5py = _h5py()
    if not os.path.exists(path):
        raise UsageError(f"input file {path!r} not found")
    if not h5py.is_hdf5(path):
        raise UsageError(f"input file {path!r} is not an HDF5 file")
    with h5py.File(path, "r") as fh:
        if dataset not in fh:
            names = []
            fh.visititems(lambda name, obj: names.append("/" + name)
                          if isinstance(obj, h5py.Dataset) else None)
            hint = f"; datasets in the file: {', '.join(names[:10])}" if names else \
                "; the file holds no dataset"
            raise UsageError(f"dataset {dataset!r} not found in {path}{hint}")
        d = fh[dataset]
        if not isinstance(d, h5py.Dataset):
            raise UsageError(f"{path}:{dataset} is a group, not a dataset")
        if d.ndim != 2 or d.shape[0] != d.shape[1]:
            raise UsageError(f"{path}:{dataset} must be a square matrix, it has shape {d.shape}")
        if d.dtype not in (np.float64, np.float32):
            raise UsageError(f"{path}:{dataset} has dtype {d.dtype}; starchol reads float64 "
                             f"or float32 (upcast to float64)")
        if d.shape[0] == 0:
            raise UsageError(f"{path}:{dataset} is empty")
        return int(d.shape[0]), str(d.dtype)


def read_tiles(path, dataset, tiled, comm=None, symmetry_tol=SYMMETRY_TOL):
    """Fill ``tiled`` (a :class:`~starchol.linalg.tiled.TiledMatrix`) with this rank's tiles
    of ``path:dataset``. Collective.

    Checks, over the whole matrix (each rank its own tiles, verdicts shared): every entry
    finite; symmetric within ``symmetry_tol``: max |A - A^T| <= tol * max |A|.

    Returns a dict ``{"max_abs", "max_asymmetry", "relative_asymmetry", "symmetry_tol",
    "dtype"}`` (the same on every rank).
    """
    comm = _comm(comm)
    h5py = _h5py()
    o = tiled.offsets
    max_abs, max_asym, bad = 0.0, 0.0, None
    error = None
    try:
        with h5py.File(path, "r") as fh:
            d = fh[dataset]
            dtype = str(d.dtype)
            for i, j in tiled.local_keys():
                t = np.asfortranarray(d[o[i]:o[i + 1], o[j]:o[j + 1]], dtype=np.float64)
                u = t if i == j else np.asarray(d[o[j]:o[j + 1], o[i]:o[i + 1]], dtype=np.float64)
                finite = np.isfinite(t) & np.isfinite(u.T)
                if not finite.all():
                    r, c = np.argwhere(~finite)[0]
                    loc = (int(o[i] + r), int(o[j] + c))
                    bad = loc if bad is None else min(bad, loc)
                    continue
                max_abs = max(max_abs, float(np.abs(t).max()))
                max_asym = max(max_asym, float(np.abs(t - u.T).max()))
                tiled.tiles[(i, j)] = t
    except OSError as exc:
        error = f"cannot read {path}:{dataset}: {exc}"
    _agree_any(comm, error)
    bads = [b for b in comm.allgather(bad) if b is not None]
    if bads:
        r, c = min(bads)
        raise UsageError(f"{path}:{dataset} holds a non-finite value (NaN or Inf) at row {r}, "
                         f"column {c} (0-based); the matrix must be finite")
    max_abs = allreduce_max(comm, max_abs)
    max_asym = allreduce_max(comm, max_asym)
    rel = max_asym / max_abs if max_abs > 0 else 0.0
    if rel > symmetry_tol:
        raise UsageError(f"{path}:{dataset} is not symmetric: max |A - A^T| / max |A| = "
                         f"{rel:.3e} > tolerance {symmetry_tol:.1e} (the lower triangle would "
                         f"be used; symmetrize the matrix or raise --symmetry-tol)")
    return {"max_abs": max_abs, "max_asymmetry": max_asym, "relative_asymmetry": rel,
            "symmetry_tol": symmetry_tol, "dtype": dtype}


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output(path, dataset, overwrite=False, input_path=None):
    """Why ``path:dataset`` cannot be written (a message), or None if it can."""
    h5py = _h5py()
    folder = os.path.dirname(os.path.abspath(path))
    if input_path and (_same_file(path, input_path)
                       or os.path.abspath(path) == os.path.abspath(input_path)):
        return (f"--output {path} is the input file; starchol never modifies its "
                f"input: write the factor to another file")
    if not os.path.isdir(folder):
        return f"output folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"output folder {folder} is not writable"
    if os.path.exists(path):
        if not h5py.is_hdf5(path):
            return f"--output {path} exists and is not an HDF5 file; choose another name"
        with h5py.File(path, "r") as fh:
            if dataset in fh and not overwrite:
                return (f"{path}:{dataset} already exists; pass --overwrite to "
                        f"replace it, or choose another dataset name")
    return None


def _create_tmp(path, dataset, n, attrs):
    """A temporary copy of ``path`` (or a new file) beside it, holding a zero n x n
    float64 ``dataset`` with ``attrs``. Returns its name."""
    h5py = _h5py()
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    if os.path.exists(path):
        shutil.copy2(path, tmp)  # keep the file's other datasets
    with h5py.File(tmp, "a") as fh:
        if dataset in fh:
            del fh[dataset]
        chunk = min(n, 512)
        d = fh.create_dataset(dataset, shape=(n, n), dtype="f8", chunks=(chunk, chunk),
                              fillvalue=0.0)
        for k, v in attrs.items():
            d.attrs[k] = v
    return tmp


class FactorWriter:
    """Write a distributed lower-triangular factor to ``path:dataset``, atomically. Collective.

    Usage (all ranks)::

        w = FactorWriter(path, dataset, n, comm, overwrite=False, input_path=inp)  # checks
        ... factorize ...
        w.write(tiled_factor, attrs)   # ranks write their tiles in turn, rank 0 renames

    The checks run at construction, before any work: the output must not be the input
    file, an existing dataset is kept unless ``overwrite``, the folder must be writable.
    """

    def __init__(self, path, dataset, n, comm=None, overwrite=False, input_path=None):
        self.comm = _comm(comm)
        self.path, self.dataset, self.n = path, dataset, int(n)
        self.overwrite = bool(overwrite)
        self.tmp = None
        error = None
        if self.comm.Get_rank() == 0:
            error = check_output(path, dataset, overwrite, input_path)
        _agree(self.comm, error)

    def write(self, tiled, attrs=None):
        """Write every rank's tiles of the factor (lower part; zeros above). Collective."""
        h5py = _h5py()
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        error = None
        if rank == 0:
            try:
                self.tmp = _create_tmp(self.path, self.dataset, self.n, attrs or {})
            except (OSError, ValueError) as exc:
                error = f"cannot create the output file next to {self.path}: {exc}"
        _agree(self.comm, error)
        self.tmp = self.comm.bcast(self.tmp, root=0)
        old = _remove_on_sigterm(self.tmp) if rank == 0 else None
        try:
            o = tiled.offsets
            for turn in range(size):
                if turn == rank and error is None:
                    try:
                        with h5py.File(self.tmp, "r+") as fh:
                            d = fh[self.dataset]
                            for (i, j), t in sorted(tiled.tiles.items()):
                                d[o[i]:o[i + 1], o[j]:o[j + 1]] = np.tril(t) if i == j else t
                    except OSError as exc:
                        error = f"rank {rank} cannot write its tiles to {self.tmp}: {exc}"
                self.comm.Barrier()
            errors = [e for e in self.comm.allgather(error) if e]
            if errors:
                raise StarcholError(errors[0])
            if rank == 0:
                os.replace(self.tmp, self.path)
                self.tmp = None
            self.comm.Barrier()
        finally:
            if rank == 0:
                if self.tmp and os.path.exists(self.tmp):
                    os.unlink(self.tmp)
                if old is not None:
                    signal.signal(signal.SIGTERM, old)

def _remove_on_sigterm(tmp):
    """While the output is being written, SIGTERM (mpirun aborting) removes the temp file."""
    def handler(signum, frame):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        os._exit(128 + signum)
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


def write_matrix(path, dataset, n, make_rows, attrs=None, overwrite=False, rows_per_chunk=None):
    """Write an n x n float64 matrix row block by row block, atomically (one process).

    ``make_rows(r0, r1)`` returns rows r0..r1-1. Used by ``starchol generate``.
    """
    h5py = _h5py()
    error = check_output(path, dataset, overwrite)
    if error:
        raise UsageError(error)
    tmp = _create_tmp(path, dataset, n, attrs or {})
    old = _remove_on_sigterm(tmp)
    try:
        step = rows_per_chunk or max(1, (8 << 20) // max(n, 1))
        with h5py.File(tmp, "r+") as fh:
            d = fh[dataset]
            for r0 in range(0, n, step):
                r1 = min(n, r0 + step)
                d[r0:r1, :] = make_rows(r0, r1)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def now_iso():
    """The current UTC time, ISO 8601 (for file attributes)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
