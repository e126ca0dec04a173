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
"""
import logging
import os

import numpy as np

from ..collective import (agree, allreduce_max, as_comm, describe, run_everywhere,
                          run_on_root)
from ..errors import StarcholError, UsageError
from ..files import (OutputAppeared, check_folder_writable, disk_full,  # noqa: F401
                     fingerprint, naming_full_disk, parse_target, publish, resolve,
                     same_file)

__all__ = ["SYMMETRY_TOL", "check_symmetry_tol", "parse_target", "inspect_input",
           "inspect_dataset", "read_tiles", "check_output",
           "FactorWriter", "write_matrix"]

log = logging.getLogger("starchol.hdf5")

#: the ``content`` attribute of a dataset written by :class:`FactorWriter` (``starchol run
#: --output``, ``to_hdf5``) and :func:`write_matrix` (``starchol generate``), by kind
CONTENT = {"matrix": "symmetric matrix (both triangles)",
           "factor": "Cholesky factor L (lower triangle; zeros above)",
           "rhs": "right-hand sides or solutions (N x K, every entry)"}

#: default tolerance of the symmetry check: max |A - A^T| <= tol * max |A|
SYMMETRY_TOL = 1e-10


def names_compared(path, dataset):
    """``{"path": ..., "dataset": ...}`` as the ranks compare them (``a.h5`` and
    ``./a.h5`` alike, ``A`` and ``/A`` alike; never raises)."""
    import posixpath

    try:
        path = os.path.normpath(os.fspath(path))
    except TypeError:
        path = repr(path)
    if isinstance(dataset, str):
        dataset = posixpath.normpath("/" + dataset.lstrip("/"))
    else:
        dataset = repr(dataset)
    return {"path": path, "dataset": dataset}


def check_symmetry_tol(symmetry_tol):
    """The tolerance of the symmetry check (:data:`SYMMETRY_TOL` for None), if it is a
    finite number >= 0; else UsageError naming ``symmetry_tol``."""
    import math

    if symmetry_tol is None:
        return SYMMETRY_TOL
    try:
        if isinstance(symmetry_tol, bool):
            raise TypeError
        tol = float(symmetry_tol)
    except (TypeError, ValueError):
        tol = None
    if tol is None or not math.isfinite(tol) or tol < 0:
        raise UsageError(f"symmetry_tol must be a finite number >= 0, got {symmetry_tol!r}",
                         param="symmetry_tol")
    return tol


def _h5py():
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py is a dependency
        raise StarcholError("h5py is missing: pip install h5py") from exc
    return h5py


def _comm(comm):
    return as_comm(comm)


def inspect_input(path, dataset, comm=None):
    """Check that ``path:dataset`` is a square float matrix. Collective.

    Returns ``(n, dtype_name)``. Raises :class:`UsageError` on every rank: missing file,
    a folder, unreadable, not HDF5, damaged (e.g. truncated), missing dataset, not 2D or
    not square, unsupported dtype. Rank 0 looks; use :func:`inspect_file` to look from
    every rank (each rank reads its own tiles later).
    """
    return run_on_root(_comm(comm), inspect_file, path, dataset)


def _open(path, role, shown=None, mode="r"):
    """h5py.File(path, mode), with any failure as a :class:`UsageError` naming ``role``
    (:func:`unopenable`)."""
    h5py = _h5py()
    try:
        return h5py.File(path, mode)
    except OSError as exc:
        raise UsageError(unopenable(exc, role, shown or path)) from None


def unopenable(exc, role, shown):
    """The message for an ``OSError`` of ``h5py.File`` on the file ``shown``: a file
    locked by another program (HDF5's file locking), else a damaged or truncated file."""
    if isinstance(exc, BlockingIOError) or "unable to lock file" in str(exc):
        return (f"{role} {shown} is open in another program (HDF5 locks a file while "
                f"a program writes it: {exc}); close that program or its h5py.File, "
                f"then run again. If no program has it open (a lock left by one that "
                f"crashed, or a file system without locks), set "
                f"HDF5_USE_FILE_LOCKING=FALSE in the environment")
    return f"{role} {shown} cannot be opened by HDF5 (damaged or truncated file?): {exc}"


def _text_attr(d, name, shown):
    """The text attribute ``name`` of the dataset ``d`` (str), or None when it is
    absent. A value that cannot be read, or is not one text (a number, an array, an
    empty value), is a :class:`UsageError` naming the attribute."""
    h5py = _h5py()
    try:
        if name not in d.attrs:
            return None
        value = d.attrs[name]
    except Exception as exc:  # noqa: BLE001 - an attribute h5py cannot read
        raise UsageError(f"{shown}: its attribute {name!r} cannot be read ({describe(exc)});"
                         f" starchol reads it to tell what the dataset holds: rewrite or "
                         f"delete the attribute") from None
    if isinstance(value, np.ndarray) and value.shape in ((), (1,)):
        value = value.reshape(()).item()
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if not isinstance(value, str):
        if isinstance(value, h5py.Empty):
            what = "no value"
        elif isinstance(value, np.ndarray):
            what = f"an array of shape {value.shape} ({value.dtype})"
        elif isinstance(value, np.generic):
            what = f"a number ({value.dtype}), {value.item()!r}"
        else:
            what = f"a {type(value).__name__} value"
        raise UsageError(f"{shown}: its attribute {name!r} holds {what}, not a text; "
                         f"starchol reads it to tell what the dataset holds ("
                         f"{', '.join(repr(v) for v in CONTENT.values())}, or any other "
                         f"text): rewrite or delete the attribute")
    return value


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
    from ..files import check_readable_file

    h5py = _h5py()
    check_readable_file(path, role)
    if not h5py.is_hdf5(path):
        raise UsageError(f"{role} {path!r} is not an HDF5 file")
    with _open(path, role) as fh:
        if dataset not in fh:
            names = []
            fh.visititems(lambda name, obj: names.append("/" + name)
                          if isinstance(obj, h5py.Dataset) else None)
            hint = f"; datasets in the file: {', '.join(names[:10])}" if names else \
                "; the file holds no dataset"
            raise UsageError(f"dataset {dataset!r} not found in {path}{hint}")
        d = _open_object(fh, path, dataset)
        if not isinstance(d, h5py.Dataset):
            raise UsageError(f"{path}:{dataset} is a group, not a dataset")
        content = _text_attr(d, "content", f"{path}:{dataset}")
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


def _open_object(fh, path, dataset):
    """``fh[dataset]``; a link on the way that leads nowhere (an external link to a
    missing file or object, a soft link to nothing) is a :class:`UsageError` naming the
    file and the link."""
    h5py = _h5py()
    try:
        return fh[dataset]
    except (KeyError, OSError) as exc:
        reason = describe(exc)
    parts = _norm(dataset).strip("/").split("/")
    for k in range(1, len(parts) + 1):
        sub = "/" + "/".join(parts[:k])
        link = fh.get(sub, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            to = f"an external link to {link.filename}:{link.path}"
        elif isinstance(link, h5py.SoftLink):
            to = f"a soft link to {link.path}"
        else:
            continue
        try:
            fh[sub]
        except (KeyError, OSError):
            raise UsageError(f"{path}:{dataset} cannot be read: {sub} in {path} is {to}, "
                             f"which cannot be opened ({reason}); copy the data into "
                             f"the file or fix the link") from None
    raise UsageError(f"{path}:{dataset} cannot be opened ({reason})") from None


#: datasets up to this many bytes are digested whole by :func:`content_key`
DIGEST_WHOLE_BYTES = 8 << 20
#: otherwise the digest covers this many bytes of rows at each end
DIGEST_ENDS_BYTES = 1 << 20
#: rows are read for the digest in blocks of about this many bytes (memory stays small)
DIGEST_BLOCK_BYTES = 256 << 10


def content_key(path, dataset, role="--input"):
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

    from ..collective import Keyed

    h5py = _h5py()
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
    comm = _comm(comm)
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
    comm = _comm(comm)
    h5py = _h5py()
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
        with _open(path, "input file") as fh:
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




def check_output(path, dataset, overwrite=False, input_path=None, role="path"):
    """Why ``path:dataset`` cannot be written (a :class:`UsageError`), or None if it can.
    Local. ``role`` names the file in the messages: the caller's parameter (``path``,
    the default, for the library; ``--output`` for the command line)."""
    try:
        _check_output(path, dataset, overwrite, input_path, role)
    except UsageError as exc:
        return exc
    return None


def _check_output(path, dataset, overwrite=False, input_path=None, role="path"):
    h5py = _h5py()
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
        with _open(target, f"{role} (an existing file)", path) as fh:
            if _check_place(fh, path, dataset) and not overwrite:
                raise UsageError(f"{path}:{dataset} already exists; pass overwrite=True to "
                                 f"replace it, or choose another dataset name",
                                 param="overwrite")


def _check_place(fh, path, dataset):
    """Whether the open file ``fh`` has an object at ``dataset`` (True: a dataset to
    replace), after refusing a name that goes under an existing dataset (``/A/L`` with
    a dataset ``/A``: HDF5 cannot create it) or names a group (replacing it would delete
    everything in it)."""
    h5py = _h5py()
    parts = _norm(dataset).strip("/").split("/")
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
                             f"(such as {_norm(dataset + '/L')})")
    return True


#: the largest chunk side (entries): a 256 x 256 float64 chunk (512 KiB) fits HDF5's
#: default 1 MiB chunk cache, so writing a tile part by part does not re-read its chunk
CHUNK_MAX = 256


def _chunk_side(n, nb=None):
    """The chunk side for ``n`` entries: at most min(nb, :data:`CHUNK_MAX`), and the
    smallest side that covers n with the fewest such chunks: n = 1000, nb = 500 gives
    250, not 256 (whose fourth chunk would be 232 entries of data and 24 of padding)."""
    most = max(1, min(nb or CHUNK_MAX, CHUNK_MAX))
    per_side = -(-n // most)
    return max(1, -(-n // per_side))


def _chunks(shape, nb=None):
    """Chunk shape of a dataset of ``shape`` (``(n, k)``; an int n for n x n): each side
    at most min(nb, 256) entries, splitting its side evenly (:func:`_chunk_side`). Chunks
    no larger than a tile let a factor's strict upper triangle go unwritten, and so take
    no space (:meth:`FactorWriter.write` never touches a chunk above the diagonal)."""
    if isinstance(shape, int):
        shape = (shape, shape)
    return tuple(_chunk_side(int(s), nb) for s in shape)


def _new_tmp(path):
    """A fresh, empty temporary file beside ``path``, tracked for removal on signals
    before it exists (:func:`starchol.files.new_temporary`)."""
    from ..files import new_temporary

    return new_temporary(path)


def _drop_tmp(tmp):
    from ..files import drop_temporary

    drop_temporary(tmp)


def _norm(dataset):
    import posixpath

    return posixpath.normpath("/" + dataset.lstrip("/"))


def _copy_without(src, dst, skip):
    """Copy the HDF5 file ``src`` into the new file ``dst``, every object and attribute
    but the one at path ``skip``.

    Deleting a dataset from a copy of the file instead leaves its bytes in the file as
    dead space (HDF5 does not reclaim it): replacing a dataset again and again grew the
    file each time. Soft and external links are kept as links; an object reached by
    several hard links is copied once and linked again.
    """
    h5py = _h5py()
    skip = _norm(skip)
    seen = {}

    def copy_attrs(a, b):
        for k in a.attrs:
            b.attrs.create(k, a.attrs[k], dtype=a.attrs.get_id(k).dtype)

    def walk(gi, go):
        for name in gi:
            full = _norm(f"{gi.name}/{name}")
            if full == skip:
                continue
            link = gi.get(name, getlink=True)
            if isinstance(link, h5py.SoftLink):
                go[name] = h5py.SoftLink(link.path)
                continue
            if isinstance(link, h5py.ExternalLink):
                go[name] = h5py.ExternalLink(link.filename, link.path)
                continue
            obj = gi[name]
            info = h5py.h5o.get_info(obj.id)
            key = (info.fileno, info.addr)
            if key in seen:                     # another hard link to a copied object
                go[name] = go.file[seen[key]]
                continue
            if isinstance(obj, h5py.Group):
                sub = go.create_group(name)
                copy_attrs(obj, sub)
                seen[key] = sub.name
                walk(obj, sub)
            else:                               # a dataset or a named datatype
                gi.copy(obj, go, name)
                seen[key] = go[name].name

    with _open(src, "output file") as fi, h5py.File(dst, "w") as fo:
        copy_attrs(fi, fo)
        walk(fi, fo)


def _create_tmp(path, dataset, shape, attrs, nb=None, dtype=np.float64, role="output"):
    """A temporary copy of ``path`` (or a new file) beside it, holding a zero ``dataset``
    of ``shape`` (an int n for n x n) and ``dtype`` with ``attrs``. An existing dataset
    of that name is left out of the copy (no dead space). Returns its name (tracked:
    removed on signals). A full disk is reported naming ``role path``."""
    import shutil

    h5py = _h5py()
    if isinstance(shape, int):
        shape = (shape, shape)
    tmp = _new_tmp(path)
    try:
        with naming_full_disk(path, role):
            target = resolve(path)
            mode = "w"
            if os.path.exists(target):
                with _open(target, "output file", path) as fh:
                    replaced = fh.get(dataset, getlink=True) is not None
                if replaced:
                    _copy_without(target, tmp, dataset)
                else:
                    shutil.copyfile(target, tmp)  # keep the file's other datasets
                mode = "a"
            with h5py.File(tmp, mode) as fh:
                d = fh.create_dataset(dataset, shape=shape, dtype=np.dtype(dtype),
                                      chunks=_chunks(shape, nb), fillvalue=0.0)
                for k, v in attrs.items():
                    d.attrs[k] = v
    except BaseException:
        _drop_tmp(tmp)
        raise
    return tmp


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
        self.comm = _comm(comm)
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
        _check_output(self.path, self.dataset, self.overwrite, input_path, self.role)
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
        h5py = _h5py()
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        kind = "rhs" if tiled.kind == "rhs" else "matrix" if whole else "factor"
        attrs = {**(attrs or {}), "content": CONTENT[kind]}
        self.tmp = run_on_root(self.comm, _create_tmp, self.path, self.dataset,
                               (self.n, self.ncols), attrs, self.nb, self.dtype, self.role)
        error = None
        try:
            for turn in range(size):
                if turn == rank:
                    try:
                        with h5py.File(self.tmp, "r+") as fh:
                            _write_tiles(fh[self.dataset], tiled, kind)
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
                _drop_tmp(self.tmp)
                self.tmp = None


def _write_tiles(d, tiled, kind):
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
                 dtype=np.float64):
    """Write an n x n matrix of ``dtype`` (float64 or float32) row block by row block,
    atomically (one process).

    ``make_rows(r0, r1)`` returns rows r0..r1-1 of a symmetric matrix (the dataset's
    ``content`` attribute says so, :data:`CONTENT`). Used by ``starchol generate``.
    Checks the target and the free disk space first; the temporary file is removed if
    anything (a signal included) stops the write. Returns the name written.
    """
    from ..files import check_hdf5_output_space

    _check_output(path, dataset, overwrite, role="--output")
    dtype = np.dtype(dtype)
    check_hdf5_output_space(path, n * n * dtype.itemsize, "--output")
    before = fingerprint(resolve(path))
    h5py = _h5py()
    tmp = _create_tmp(path, dataset, n, {**(attrs or {}), "content": CONTENT["matrix"]},
                      dtype=dtype, role="--output")
    try:
        with naming_full_disk(path, "--output"), h5py.File(tmp, "r+") as fh:
            d = fh[dataset]
            # whole chunk rows per block (about 64 MB), so that no chunk is written twice
            c = d.chunks[0]
            step = rows_per_chunk or max(1, (8 << 20) // max(n, 1) // c) * c
            for r0 in range(0, n, step):
                r1 = min(n, r0 + step)
                d[r0:r1, :] = make_rows(r0, r1)
        return publish(tmp, path, before, overwrite)
    finally:
        _drop_tmp(tmp)  # its private folder too (the file itself was renamed or kept)
