"""The temporary files of HDF5 output: a copy of the output file (less the dataset it
replaces: no dead space) or a new file, beside it, holding the new dataset, chunked by
tiles; tracked from before it exists so that a signal removes it
(:func:`starchol.files.new_temporary`)."""
import os
import shutil

import numpy as np

from ..files import drop_temporary, naming_full_disk, new_temporary, resolve
from .hdf5_file import h5py_module, norm_dataset, open_file


#: the largest chunk side (entries): a 256 x 256 float64 chunk (512 KiB) fits HDF5's
#: default 1 MiB chunk cache, so writing a tile part by part does not re-read its chunk
CHUNK_MAX = 256


def chunk_side(n, nb=None):
    """The chunk side for ``n`` entries: at most min(nb, :data:`CHUNK_MAX`), and the
    smallest side that covers n with the fewest such chunks: n = 1000, nb = 500 gives
    250, not 256 (whose fourth chunk would be 232 entries of data and 24 of padding)."""
    most = max(1, min(nb or CHUNK_MAX, CHUNK_MAX))
    per_side = -(-n // most)
    return max(1, -(-n // per_side))


def chunks(shape, nb=None):
    """Chunk shape of a dataset of ``shape`` (``(n, k)``; an int n for n x n): each side
    at most min(nb, 256) entries, splitting its side evenly (:func:`chunk_side`). Chunks
    no larger than a tile let a factor's strict upper triangle go unwritten, and so take
    no space (:meth:`FactorWriter.write` never touches a chunk above the diagonal)."""
    if isinstance(shape, int):
        shape = (shape, shape)
    return tuple(chunk_side(int(s), nb) for s in shape)


def new_tmp(path):
    """A fresh, empty temporary file beside ``path``, tracked for removal on signals
    before it exists (:func:`starchol.files.new_temporary`)."""
    return new_temporary(path)


def drop_tmp(tmp):
    """Remove the temporary file ``tmp`` (and its private folder), if it is there."""
    drop_temporary(tmp)


def copy_without(src, dst, skip):
    """Copy the HDF5 file ``src`` into the new file ``dst``, every object and attribute
    but the one at path ``skip``.

    Deleting a dataset from a copy of the file instead leaves its bytes in the file as
    dead space (HDF5 does not reclaim it): replacing a dataset again and again grew the
    file each time. Soft and external links are kept as links; an object reached by
    several hard links is copied once and linked again.
    """
    h5py = h5py_module()
    skip = norm_dataset(skip)
    seen = {}

    def copy_attrs(a, b):
        for k in a.attrs:
            b.attrs.create(k, a.attrs[k], dtype=a.attrs.get_id(k).dtype)

    def walk(gi, go):
        for name in gi:
            full = norm_dataset(f"{gi.name}/{name}")
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

    with open_file(src, "output file") as fi, h5py.File(dst, "w") as fo:
        copy_attrs(fi, fo)
        walk(fi, fo)


def create_tmp(path, dataset, shape, attrs, nb=None, dtype=np.float64, role="output"):
    """A temporary copy of ``path`` (or a new file) beside it, holding a zero ``dataset``
    of ``shape`` (an int n for n x n) and ``dtype`` with ``attrs``. An existing dataset
    of that name is left out of the copy (no dead space). Returns its name (tracked:
    removed on signals). A full disk is reported naming ``role path``."""
    h5py = h5py_module()
    if isinstance(shape, int):
        shape = (shape, shape)
    tmp = new_tmp(path)
    try:
        with naming_full_disk(path, role):
            target = resolve(path)
            mode = "w"
            if os.path.exists(target):
                with open_file(target, "output file", path) as fh:
                    replaced = fh.get(dataset, getlink=True) is not None
                if replaced:
                    copy_without(target, tmp, dataset)
                else:
                    shutil.copyfile(target, tmp)  # keep the file's other datasets
                mode = "a"
            with h5py.File(tmp, mode) as fh:
                d = fh.create_dataset(dataset, shape=shape, dtype=np.dtype(dtype),
                                      chunks=chunks(shape, nb), fillvalue=0.0)
                for k, v in attrs.items():
                    d.attrs[k] = v
    except BaseException:
        drop_tmp(tmp)
        raise
    return tmp
