"""What the HDF5 reader and writer share: h5py, opening a file with a clear error, the
``content`` attribute of a written dataset, dataset names as the ranks compare them, and
links that lead nowhere (the read and write sides are :mod:`.hdf5_read`, :mod:`.hdf5_write`;
their temporary files :mod:`.hdf5_tmp`; :mod:`.hdf5_io` is the public front)."""
import os
import posixpath

import numpy as np

from ..collective import describe
from ..errors import StarcholError, UsageError


#: the ``content`` attribute of a dataset written by :class:`FactorWriter` (``starchol run
#: --output``, ``to_hdf5``) and :func:`write_matrix` (``starchol generate``), by kind
CONTENT = {"matrix": "symmetric matrix (both triangles)",
           "factor": "Cholesky factor L (lower triangle; zeros above)",
           "rhs": "right-hand sides or solutions (N x K, every entry)"}


def names_compared(path, dataset):
    """``{"path": ..., "dataset": ...}`` as the ranks compare them (``a.h5`` and
    ``./a.h5`` alike, ``A`` and ``/A`` alike; never raises)."""
    try:
        path = os.path.normpath(os.fspath(path))
    except TypeError:
        path = repr(path)
    if isinstance(dataset, str):
        dataset = posixpath.normpath("/" + dataset.lstrip("/"))
    else:
        dataset = repr(dataset)
    return {"path": path, "dataset": dataset}


def h5py_module():
    """The h5py module (a :class:`StarcholError` naming the fix when it is missing)."""
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py is a dependency
        raise StarcholError("h5py is missing: pip install h5py") from exc
    return h5py


def open_file(path, role, shown=None, mode="r"):
    """h5py.File(path, mode), with any failure as a :class:`UsageError` naming ``role``
    (:func:`unopenable`)."""
    h5py = h5py_module()
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


def text_attr(d, name, shown):
    """The text attribute ``name`` of the dataset ``d`` (str), or None when it is
    absent. A value that cannot be read, or is not one text (a number, an array, an
    empty value), is a :class:`UsageError` naming the attribute."""
    h5py = h5py_module()
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


def open_object(fh, path, dataset):
    """``fh[dataset]``; a link on the way that leads nowhere (an external link to a
    missing file or object, a soft link to nothing) is a :class:`UsageError` naming the
    file and the link."""
    h5py = h5py_module()
    try:
        return fh[dataset]
    except (KeyError, OSError) as exc:
        reason = describe(exc)
    parts = norm_dataset(dataset).strip("/").split("/")
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


def norm_dataset(dataset):
    """``dataset`` as an absolute HDF5 path (``A`` and ``/A/`` are ``/A``)."""
    return posixpath.normpath("/" + dataset.lstrip("/"))
