"""Outputs: the one check of an output file before any work (not a device, FIFO,
socket or link out; a writable folder; ``--overwrite``; never one of the command's
inputs) and the disk space an output needs."""
import os

from .errors import UsageError
from .units import format_bytes
from .paths import resolve, fingerprint, same_file, check_distinct, read_only, special_kind


def check_regular_output(path, role, stdout=False):
    """Refuse an output ``path`` that exists and is not a regular file: a folder, a
    device, a FIFO, a socket or a symbolic link loop (starchol publishes by renaming a
    complete file over the name: it would replace ``/dev/null`` by a regular file).
    ``stdout``: the option takes ``-`` for standard output, said in the message."""
    kind = special_kind(path)
    if kind is None:
        return
    if kind == "a folder":
        raise UsageError(f"{role} {path} is a folder; give a file name")
    also = ", or - for standard output" if stdout else ""
    raise UsageError(f"{role} {path} is {kind}, not a regular file; starchol writes only "
                     f"regular files (it never replaces a device, FIFO or socket): choose "
                     f"a file name{also}")


def check_folder_writable(path, role, stdout=False):
    """Refuse an output ``path`` that cannot be published: one that exists and is not a
    regular file (:func:`check_regular_output`), whose folder is missing or read-only
    (:func:`read_only`), or an existing file marked read-only (it is never replaced,
    even though its folder would allow it)."""
    check_regular_output(path, role, stdout)
    _check_link_out(path, role)
    target = resolve(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise UsageError(f"{role} {path}: the folder {folder} does not exist; create it "
                         f"first")
    if read_only(folder) or not os.access(folder, os.X_OK):
        raise UsageError(f"{role} {path}: the folder {folder} is not writable")
    if read_only(target):
        raise UsageError(f"{role} {path} is read-only (no write permission); make it "
                         f"writable (chmod u+w) to let starchol replace it, or choose "
                         f"another name")


def _check_link_out(path, role):
    """Refuse an output ``path`` that is a symbolic link to a file outside the link's own
    folder: writing through it would replace a file elsewhere (``out.png -> /etc/x``)."""
    absolute = os.path.abspath(os.path.expanduser(path))
    if not os.path.islink(absolute):
        return
    folder = os.path.realpath(os.path.dirname(absolute))
    if os.path.dirname(resolve(path)) != folder:
        raise UsageError(f"{role} {path} is a symbolic link to {resolve(path)}, outside its "
                         f"folder; starchol does not write through it: give the target's "
                         f"own name, or another name")


def check_output(path, role, overwrite=False, inputs=(), stdout=False):
    """The one check of an output file, before any work; returns its
    :func:`fingerprint` (None: absent) for :func:`publish`.

    Refused with a :class:`UsageError` naming ``role path``: a path that exists and is
    not a regular file (a device, a FIFO, a socket, a link loop, a folder), a symbolic
    link to a file outside its own folder, a missing or read-only folder, a read-only
    file, an existing file without ``overwrite``, and a path that is one of ``inputs``
    (``(role, path)`` pairs of the command's input files, compared through links, ``..``
    and hard links: :func:`same_file`). ``stdout``: ``-`` is standard output (accepted,
    returns None). The file is then written with :func:`write_atomic` or
    :func:`atomic_path` (atomic, a full disk named) or :func:`publish_text`.
    """
    if path is None or (stdout and path == "-"):
        return None
    if not path:
        raise UsageError(f"{role} is empty; give a file name")
    check_folder_writable(path, role, stdout)
    for in_role, in_path in inputs:
        if in_path and same_file(in_path, path):
            raise UsageError(f"{role} {path} is the input file ({in_role} {in_path}); "
                             f"starchol never modifies its input: choose another name "
                             f"for {role}")
    before = fingerprint(path)
    if before is not None and not overwrite:
        raise UsageError(f"{role} {path} exists; pass overwrite=True to replace it, or "
                         f"choose another name", param="overwrite")
    return before


def check_outputs(outputs, overwrite=False, inputs=()):
    """:func:`check_output` for each ``(role, path)`` of ``outputs`` (None paths
    skipped), and two outputs on one file refused (:func:`check_distinct`). Returns
    ``{role: fingerprint}``."""
    outputs = [(role, p) for role, p in outputs if p and p != "-"]
    out = {role: check_output(p, role, overwrite, inputs) for role, p in outputs}
    check_distinct(outputs)
    return out


def free_bytes(path):
    """Bytes available to this user on the file system that holds ``path``'s folder."""
    st = os.statvfs(os.path.dirname(resolve(path)))
    return st.f_bavail * st.f_frsize


def check_disk_space(path, need_bytes, role, margin=1.05):
    """Refuse when the folder of ``path`` has less than ``need_bytes`` (times ``margin``)
    free; the message gives both figures (decimal units)."""
    free = free_bytes(path)
    if need_bytes * margin > free:
        raise UsageError(f"{role} {path} needs about {format_bytes(need_bytes)} of disk but "
                         f"{os.path.dirname(resolve(path))} has {format_bytes(free)} free; "
                         f"free space, write elsewhere, or use a smaller N")


def check_hdf5_output_space(path, dataset_bytes, role):
    """:func:`check_disk_space` for an HDF5 output: it is written as a copy of the
    existing file (if any) plus the new dataset of ``dataset_bytes``."""
    target = resolve(path)
    existing = os.path.getsize(target) if os.path.exists(target) else 0
    check_disk_space(path, dataset_bytes + existing, role)

