"""Writing HDF5 output, atomically: the checks of an output before any work, a
distributed matrix written by every rank in turn (:class:`FactorWriter`), and a matrix
written row block by row block by one process (:func:`write_matrix`). The dataset is
written into a temporary file (:mod:`.hdf5_tmp`) renamed over the final name only when
complete; the input file is never opened for writing."""
import os

import numpy as np

from ..collective import agree, as_comm, describe, run_on_root
from ..errors import StarcholError, UsageError
from ..files import (check_folder_writable, check_hdf5_output_space, disk_full, fingerprint,
                     naming_full_disk, publish, resolve, same_file)
from .hdf5_file import CONTENT, h5py_module, names_compared, norm_dataset, open_file
from .hdf5_tmp import create_tmp, drop_tmp


def check_output(path, dataset, overwrite=False, input_path=None, role="path"):
    """Why ``path:dataset`` cannot be written (a :class:`UsageError`), or None if it can.
    Local. ``role`` names the file in the messages: the caller's parameter (``path``,
    the default, for the library; ``--output`` for the command line)."""
    try:
        refuse_output(path, dataset, overwrite, input_path, role)
    except UsageError as exc:
        return exc
    return None


def refuse_output(path, dataset, overwrite=False, input_path=None, role="path"):
    """Raise the :class:`UsageError` of :func:`check_output`, if any. Local."""
    h5py = h5py_module()
    params = (role,) if role.isidentifier() else ()
    if input_path and same_file(path, input_path):
        raise UsageError(f"{role} {path} is the input file; starchol never modifies its "
                         f"input: write the factor to another file", params=params)
    check_folder_writable(path, role)
    target = resolve(path)
    if os.path.exists(target):
        if not os.access(target, os.R_OK):
            raise UsageError(f"{role} {path} exists and is not readable (its other "
                             f"datasets are kept, so it is read); choose another name",
                             params=params)
        if not h5py.is_hdf5(target):
            raise UsageError(f"{role} {path} exists and is not an HDF5 file; choose "
                             f"another name", params=params)
        with open_file(target, f"{role} (an existing file)", path) as fh:
            if check_place(fh, path, dataset) and not overwrite:
                raise UsageError(f"{path}:{dataset} already exists; pass overwrite=True to "
                                 f"replace it, or choose another dataset name",
                                 param="overwrite")


def check_place(fh, path, dataset):
    """Whether the open file ``fh`` has an object at ``dataset`` (True: a dataset to
    replace), after refusing a name that goes under an existing dataset (``/A/L`` with
    a dataset ``/A``: HDF5 cannot create it) or names a group (replacing it would delete
    everything in it)."""
    h5py = h5py_module()
    parts = norm_dataset(dataset).strip("/").split("/")
    for k in range(1, len(parts) + 1):
        sub = "/" + "/".join(parts[:k])
        if fh.get(sub, getlink=True) is None:
            return False
        obj = fh.get(sub)
        if k < len(parts) and not isinstance(obj, h5py.Group):
            what = "a dataset" if isinstance(obj, h5py.Dataset) else \
                "a link to nothing" if obj is None else "not a group"
            raise UsageError(f"{path}:{dataset} cannot be written: {sub} is {what} in "
                             f"{path}, which cannot hold {dataset}; choose another "
                             f"dataset name")
        if k == len(parts) and isinstance(obj, h5py.Group):
            raise UsageError(f"{path}:{dataset} is a group in {path} (holding "
                             f"{len(obj)} object(s)); starchol replaces a dataset, never a "
                             f"group and what it holds: choose another dataset name "
                             f"(such as {norm_dataset(dataset + '/L')})")
    return True


class FactorWriter:
    """Write a distributed lower-triangular factor to ``path:dataset``, atomically. Collective.

    Usage (all ranks)::

        w = FactorWriter(path, dataset, n, comm, overwrite=False, input_path=inp)  # checks
        ... factorize ...
        w.write(tiled_factor, attrs)   # ranks write their tiles in turn, rank 0 publishes

    The checks run at construction, before any work: the output must not be the input
    file, an existing dataset is kept unless ``overwrite``, the folder must be writable.
    ``role`` names the file in messages (the caller's parameter: ``path`` for
    :meth:`~starchol.linalg.distributed.DistributedMatrix.to_hdf5`, ``--output`` for
    the command line).
    The state of the output file is noted then; :func:`publish` refuses to replace a file
    that appeared or changed during the run (unless ``overwrite``) and keeps the factor
    under a reported name. ``nb`` (the tile size) sets the chunk shape.
    """

    def __init__(self, path, dataset, n, comm=None, overwrite=False, input_path=None,
                 nb=None, role="path", dtype=np.float64, ncols=None):
        self.comm = as_comm(comm)
        self.role = role
        self.path, self.dataset, self.n = path, dataset, int(n)
        self.ncols = self.n if ncols is None else int(ncols)
        self.nb = nb
        self.dtype = np.dtype(dtype)
        self.overwrite = bool(overwrite)
        self.tmp = None
        self.published = None
        # rank 0 checks and publishes, every rank writes its tiles: the ranks must name
        # the same file and dataset
        agree(self.comm, None, same={**names_compared(path, dataset),
                                     "overwrite": self.overwrite})
        self.before = run_on_root(self.comm, self._check, input_path)

    def _check(self, input_path):
        refuse_output(self.path, self.dataset, self.overwrite, input_path, self.role)
        return fingerprint(resolve(self.path))

    def _publish(self):
        """Rank 0: move the written temporary file to the output; the name published.
        :class:`OutputAppeared` as it is, any other ``OSError`` as a
        :class:`StarcholError` naming the output."""
        try:
            return publish(self.tmp, self.path, self.before, self.overwrite, what=self.role)
        except OSError as exc:
            raise StarcholError(f"cannot publish {self.path}: {exc}") from None

    def write(self, tiled, attrs=None, whole=False):
        """Write every rank's tiles, in the writer's dtype. Collective.

        A factor (the default) is written as its lower triangle: the strict upper
        triangle is never written, so its chunks take no space in the file and read as
        zeros. ``whole``: ``tiled`` is a symmetric matrix, written with both triangles
        (each tile also goes, transposed, to its mirror position). Right-hand sides
        (``tiled.kind == "rhs"``) are written tile by tile, every entry. The dataset's
        ``content`` attribute (:data:`CONTENT`) says which was written. Returns the name
        published. Raises :class:`OutputAppeared` (on every rank) when the output
        appeared or changed during the run.
        """
        h5py = h5py_module()
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        kind = "rhs" if tiled.kind == "rhs" else "matrix" if whole else "factor"
        attrs = {**(attrs or {}), "content": CONTENT[kind]}
        self.tmp = run_on_root(self.comm, create_tmp, self.path, self.dataset,
                               (self.n, self.ncols), attrs, self.nb, self.dtype, self.role)
        error = None
        try:
            for turn in range(size):
                if turn == rank:
                    try:
                        with h5py.File(self.tmp, "r+") as fh:
                            write_tiles(fh[self.dataset], tiled, kind)
                    except Exception as exc:  # noqa: BLE001 - shared below, not raised alone
                        full = (f"; the disk is full (no space left on the file system "
                                f"of {os.path.dirname(resolve(self.path))})"
                                if disk_full(exc) else "")
                        error = StarcholError(
                            f"{self.role} {self.path}: rank {rank} cannot write its tiles "
                            f"to {self.tmp}{full}: "
                            f"{exc if isinstance(exc, OSError) else describe(exc)}")
                self.comm.Barrier()
            agree(self.comm, error)
            self.published = run_on_root(self.comm, self._publish)
            return self.published
        finally:
            if rank == 0:
                drop_tmp(self.tmp)
                self.tmp = None


def write_tiles(d, tiled, kind):
    """Write this rank's tiles of ``tiled`` into the dataset ``d``: ``kind`` "rhs" every
    tile as it is, "matrix" each tile and its transposed mirror, "factor" the lower
    triangle only. A factor's diagonal tile is written one chunk row at a time, each up
    to the diagonal, so that no chunk above the diagonal is ever written (allocated)."""
    o, oc = tiled.offsets, tiled.col_offsets
    c = d.chunks[0] if d.chunks else d.shape[0]
    for (i, j), t in sorted(tiled.tiles.items()):
        r0, r1, c0, c1 = int(o[i]), int(o[i + 1]), int(oc[j]), int(oc[j + 1])
        if kind == "rhs" or i != j:
            if kind == "matrix":
                d[c0:c1, r0:r1] = t.T
            d[r0:r1, c0:c1] = t
        elif kind == "matrix":
            t = np.tril(t)
            d[r0:r1, c0:c1] = t + np.tril(t, -1).T
        else:
            a = r0
            while a < r1:
                b = min(r1, (a // c + 1) * c)      # the end of a's chunk row
                d[a:b, r0:b] = np.tril(t[a - r0:b - r0, :b - r0], a - r0)
                a = b


def write_matrix(path, dataset, n, make_rows, attrs=None, overwrite=False, rows_per_chunk=None,
                 dtype=np.float64, role="path"):
    """Write an n x n matrix of ``dtype`` (float64 or float32) row block by row block,
    atomically (one process).

    ``make_rows(r0, r1)`` returns rows r0..r1-1 of a symmetric matrix (the dataset's
    ``content`` attribute says so, :data:`CONTENT`). Used by ``starchol generate``.
    Checks the target and the free disk space first; the temporary file is removed if
    anything (a signal included) stops the write. Returns the name written. ``role``
    names the file in messages: the caller's parameter (``path``, the default, for the
    library; ``--output`` for the command line).
    """
    refuse_output(path, dataset, overwrite, role=role)
    dtype = np.dtype(dtype)
    check_hdf5_output_space(path, n * n * dtype.itemsize, role)
    before = fingerprint(resolve(path))
    h5py = h5py_module()
    tmp = create_tmp(path, dataset, n, {**(attrs or {}), "content": CONTENT["matrix"]},
                      dtype=dtype, role=role)
    try:
        with naming_full_disk(path, role), h5py.File(tmp, "r+") as fh:
            d = fh[dataset]
            # whole chunk rows per block (about 64 MB), so that no chunk is written twice
            c = d.chunks[0]
            step = rows_per_chunk or max(1, (8 << 20) // max(n, 1) // c) * c
            for r0 in range(0, n, step):
                r1 = min(n, r0 + step)
                d[r0:r1, :] = make_rows(r0, r1)
        return publish(tmp, path, before, overwrite, what=role)
    finally:
        drop_tmp(tmp)  # its private folder too (the file itself was renamed or kept)
