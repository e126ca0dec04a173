"""Reading HDF5 input: what a dataset holds (checked from one rank or from every rank, the
ranks' views compared by a digest), and this rank's tiles of it, checked finite and
symmetric. Every check that several ranks make is collective: the verdict is shared and
every rank raises the same :class:`UsageError`."""

import numpy as np

from ..collective import Keyed, agree, allreduce_max, as_comm, run_everywhere, run_on_root
from ..errors import UsageError
from ..files import check_readable_file
from .layout import SYMMETRY_TOL
from .hdf5_file import CONTENT, h5py_module, names_compared, open_file, open_object, text_attr


def inspect_input(path, dataset, comm=None):
    """Check that ``path:dataset`` is a square float matrix. Collective.

    Returns ``(n, dtype_name)``. Raises :class:`UsageError` on every rank: missing file,
    a folder, unreadable, not HDF5, damaged (e.g. truncated), missing dataset, not 2D or
    not square, unsupported dtype. Rank 0 looks; use :func:`inspect_file` to look from
    every rank (each rank reads its own tiles later).
    """
    return run_on_root(as_comm(comm), inspect_file, path, dataset)


def inspect_file(path, dataset):
    """Check ``path:dataset`` from this rank (see :func:`inspect_input`). Local.

    Returns ``(n, dtype_name)`` of a symmetric matrix (:func:`inspect_dataset`)."""
    _, shape, name = inspect_dataset(path, dataset, "symmetric")
    return shape[0], name


def inspect_dataset(path, dataset, kind=None, role="input file"):
    """Check ``path:dataset`` from this rank as a matrix of ``kind``. Local.

    ``kind``: ``"symmetric"`` (a square matrix) or ``"rhs"`` (any N x K matrix); None
    takes it from the dataset's ``content`` attribute (:data:`CONTENT`): right-hand
    sides written by starchol are read back as ``"rhs"``, anything else as
    ``"symmetric"``. Returns ``(kind, (rows, columns), dtype_name)``, dtype_name such
    as ``"float32"`` or ``"float64 (big-endian)"``. Raises :class:`UsageError` (see
    :func:`inspect_input`), also for a factor or right-hand sides read as a symmetric
    matrix, and for a dataset reached through a broken link (naming the link).
    ``role`` names the file in messages.
    """
    h5py = h5py_module()
    check_readable_file(path, role)
    if not h5py.is_hdf5(path):
        raise UsageError(f"{role} {path!r} is not an HDF5 file")
    with open_file(path, role) as fh:
        if dataset not in fh:
            names = []
            fh.visititems(lambda name, obj: names.append("/" + name)
                          if isinstance(obj, h5py.Dataset) else None)
            hint = f"; datasets in the file: {', '.join(names[:10])}" if names else \
                "; the file holds no dataset"
            raise UsageError(f"dataset {dataset!r} not found in {path}{hint}")
        d = open_object(fh, path, dataset)
        if not isinstance(d, h5py.Dataset):
            raise UsageError(f"{path}:{dataset} is a group, not a dataset")
        content = text_attr(d, "content", f"{path}:{dataset}")
        if kind is None:
            kind = "rhs" if content == CONTENT["rhs"] else "symmetric"
        if kind == "symmetric" and content == CONTENT["factor"]:
            raise UsageError(f"{path}:{dataset} holds a Cholesky factor L (its 'content' "
                             f"attribute; written by starchol run --output or Factor.L"
                             f".to_hdf5), not a symmetric matrix to factor")
        if kind == "symmetric" and content == CONTENT["rhs"]:
            raise UsageError(f"{path}:{dataset} holds right-hand sides or solutions (its "
                             f"'content' attribute; written by to_hdf5 of a kind='rhs' "
                             f"matrix), not a symmetric matrix to factor; read it with "
                             f"kind='rhs'", param="kind")
        if kind == "symmetric" and (d.ndim != 2 or d.shape[0] != d.shape[1]):
            raise UsageError(f"{path}:{dataset} must be a square matrix, it has shape {d.shape}")
        if d.ndim != 2:
            raise UsageError(f"{path}:{dataset} must be a 2-D matrix, it has shape {d.shape}")
        if d.dtype.kind != "f" or d.dtype.itemsize not in (4, 8):
            raise UsageError(f"{path}:{dataset} has dtype {d.dtype}; starchol reads float64 "
                             f"or float32, either byte order")
        if d.size == 0:
            raise UsageError(f"{path}:{dataset} is empty")
        name = "float64" if d.dtype.itemsize == 8 else "float32"
        if d.dtype.byteorder == ">":
            name += " (big-endian)"
        return kind, tuple(int(x) for x in d.shape), name


#: datasets up to this many bytes are digested whole by :func:`content_key`
DIGEST_WHOLE_BYTES = 8 << 20
#: otherwise the digest covers this many bytes of rows at each end
DIGEST_ENDS_BYTES = 1 << 20
#: rows are read for the digest in blocks of about this many bytes (memory stays small)
DIGEST_BLOCK_BYTES = 256 << 10


def content_key(path, dataset):
    """What this rank sees at ``path:dataset``, for the ranks to compare
    (:func:`~starchol.collective.agree`): a
    :class:`~starchol.collective.Keyed` shown as ``path:dataset`` and compared
    by the dataset's shape, dtype, chunk shape and a SHA-256 of its values: all of them
    when the dataset holds at most :data:`DIGEST_WHOLE_BYTES` (8 MiB), else its first
    and last rows (about :data:`DIGEST_ENDS_BYTES`, 1 MiB, at each end). Not compared:
    the name (ranks may see node-local copies under other paths), the file's size and
    modification time (a copy differs in both but holds the same data) and its other
    datasets. Local; call after :func:`inspect_dataset` accepted the file."""
    import hashlib

    h5py = h5py_module()
    digest = hashlib.sha256()
    with h5py.File(path, "r") as fh:
        d = fh[dataset]
        shape, dtype = tuple(int(x) for x in d.shape), d.dtype
        row_bytes = max(1, shape[1] * dtype.itemsize)
        step = max(1, DIGEST_BLOCK_BYTES // row_bytes)

        def add(r0, r1):
            for r in range(r0, r1, step):
                digest.update(np.ascontiguousarray(d[r:min(r1, r + step)]).tobytes())

        if d.size * dtype.itemsize <= DIGEST_WHOLE_BYTES:
            add(0, shape[0])
            covered = "all values"
        else:
            rows = min(shape[0], max(1, DIGEST_ENDS_BYTES // row_bytes))
            add(0, rows)
            add(shape[0] - rows, shape[0])
            covered = f"first and last {rows} rows"
        key = (shape, dtype.str, d.chunks, digest.hexdigest())
    names = names_compared(path, dataset)      # "A" and "/A", "a.h5" and "./a.h5" alike
    return Keyed(f"{names['path']}:{names['dataset']}", key,
                 what=f"data (shape, dtype, chunks and a SHA-256 of its {covered})")


def look(path, dataset, kind=None, role="input file"):
    """:func:`inspect_dataset` and :func:`content_key` of ``path:dataset`` from this
    rank: ``(kind, shape, dtype_name, key)``. Local: run it on every rank and compare
    the keys (:func:`inspect_everywhere`)."""
    kind, shape, name = inspect_dataset(path, dataset, kind, role)
    return kind, shape, name, content_key(path, dataset)


def inspect_everywhere(path, dataset, kind=None, comm=None, role="input file"):
    """Check ``path:dataset`` on every rank (:func:`inspect_dataset`) and refuse, on
    every rank, ranks that see different data under that name (a node-local file, a
    rank started in another folder): :func:`content_key` says what is compared.
    Collective. Returns ``(kind, shape, dtype_name)``."""
    comm = as_comm(comm)
    kind, shape, name, key = run_everywhere(comm, look, path, dataset, kind, role)
    agree(comm, None, same={role: key})
    return kind, shape, name


def read_tiles(path, dataset, tiled, comm=None, symmetry_tol=SYMMETRY_TOL):
    """Fill ``tiled`` (a :class:`~starchol.linalg.distributed.DistributedMatrix`) with this rank's tiles
    of ``path:dataset``, in one arena of its dtype (its tiles are replaced). Collective.

    Checks, over the whole matrix (each rank its own tiles, verdicts shared): every entry
    finite; symmetric within ``symmetry_tol``: max |A - A^T| <= tol * max |A| (not for
    right-hand sides, ``tiled.kind == "rhs"``, whose asymmetry is reported as 0).

    Returns a dict ``{"max_abs", "max_asymmetry", "relative_asymmetry", "symmetry_tol",
    "dtype"}`` (the same on every rank).
    """
    comm = as_comm(comm)
    o, oc, rhs = tiled.offsets, tiled.col_offsets, tiled.kind == "rhs"
    max_abs, max_asym, max_upper, bad = 0.0, 0.0, 0.0, None
    error = None
    # this rank's tiles, agreed before any read: a MemoryError here on one rank alone
    # left the others waiting in the first agreement below
    try:
        keys, _, views = tiled._local_arena()
        tiled.tiles = dict(zip(keys, views))
    except MemoryError as exc:
        error = exc
    agree(comm, error)
    try:
        with open_file(path, "input file") as fh:
            d = fh[dataset]
            dtype = str(d.dtype)
            for i, j in keys:
                t = np.asfortranarray(d[o[i]:o[i + 1], oc[j]:oc[j + 1]], dtype=np.float64)
                # the mirror tile, for the symmetry check; right-hand sides have none
                # (t.T: no asymmetry, every check below passes but finiteness)
                u = (t.T if rhs else t if i == j else
                     np.asarray(d[o[j]:o[j + 1], o[i]:o[i + 1]], dtype=np.float64))
                finite = np.isfinite(t) & np.isfinite(u.T)
                if not finite.all():
                    r, c = np.argwhere(~finite)[0]
                    loc = (int(o[i] + r), int(o[j] + c))
                    bad = loc if bad is None else min(bad, loc)
                    continue
                max_abs = max(max_abs, float(np.abs(t).max()))
                max_asym = max(max_asym, float(np.abs(t - u.T).max()))
                # the strict upper triangle: all zeros is a lower triangle stored alone
                max_upper = max(max_upper, float(np.abs(np.triu(u, 1) if i == j else u).max()))
                with np.errstate(over="ignore"):    # beyond float32: refused below
                    tiled.tiles[(i, j)][...] = t
    except OSError as exc:
        error = UsageError(f"cannot read {path}:{dataset}: {exc}")
    except UsageError as exc:
        error = exc
    agree(comm, error)
    bads = [b for b in comm.allgather(bad) if b is not None]
    if bads:
        r, c = min(bads)
        raise UsageError(f"{path}:{dataset} holds a non-finite value (NaN or Inf) at row {r}, "
                         f"column {c} (0-based); the matrix must be finite")
    max_abs = allreduce_max(comm, max_abs)
    largest = float(np.finfo(tiled.dtype).max)
    if max_abs > largest:                      # finite in the file, Inf once converted
        raise UsageError(f"{path}:{dataset} holds values up to {max_abs:.3e}, beyond "
                         f"{tiled.dtype}'s largest ({largest:.3e}); read it as float64 "
                         f"(dtype)", param="dtype")
    max_asym = allreduce_max(comm, max_asym)
    rel = max_asym / max_abs if max_abs > 0 else 0.0
    if rel > symmetry_tol and allreduce_max(comm, max_upper) == 0.0:
        raise UsageError(f"{path}:{dataset} holds a lower triangle only (zeros above the "
                         f"diagonal: a factor, or a matrix stored by its lower half); a "
                         f"symmetric input must be stored whole: mirror it first "
                         f"(A + tril(A, -1).T)")
    if rel > symmetry_tol:
        raise UsageError(f"{path}:{dataset} is not symmetric: max |A - A^T| / max |A| = "
                         f"{rel:.3e} > tolerance {symmetry_tol:.1e} (the lower triangle would "
                         f"be used; symmetrize the matrix or raise symmetry_tol)",
                         param="symmetry_tol")
    return {"max_abs": max_abs, "max_asymmetry": max_asym, "relative_asymmetry": rel,
            "symmetry_tol": symmetry_tol, "dtype": dtype}
