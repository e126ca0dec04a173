"""Writes: the one home of atomic writes. Every file starchol writes goes through a
temporary file in the destination's folder, registered with :mod:`starchol.faults`
*before its first byte* (so a signal removes it), and is renamed over the final name
only when complete; output folders (:class:`OutputFolder`) are created at the first
write and removed on an interruption."""
import contextlib
import errno
import logging
import os
import shutil

from .errors import StarcholError, UsageError
from .paths import resolve, fingerprint, same_file, read_only, special_kind, check_printable
from .outputs import check_regular_output


def new_temporary(path):
    """Create a fresh, empty temporary file for ``path`` (resolved through symlinks) and
    return its name: ``.NAME.tmp-PID-XXXX/NAME`` in the destination's folder.

    The private folder is registered for removal on signals before it exists
    (:func:`starchol.faults.track`, under the faults lock, so a signal either finds it
    complete or stops its creation). Removing the folder, not only the file, closes the
    race where code still running re-creates the file by name after the signal's
    cleanup: without its folder it cannot. Mode: the usual 0666 & ~umask.
    """
    import secrets

    from . import faults

    target = resolve(path)
    folder, base = os.path.dirname(target), os.path.basename(target)
    with faults.creating():
        while True:
            private = os.path.join(folder, f".{base}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
            faults.track(private)
            try:
                os.mkdir(private, 0o777)
                break
            except FileExistsError:
                faults.untrack(private)
            except BaseException:
                faults.untrack(private)
                raise
        name = os.path.join(private, base)
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return name


def keep_mode(tmp, target):
    """Give ``tmp`` the permission bits of ``target`` when that exists, so a replaced
    file keeps its permissions (a temporary file has 0666 & ~umask)."""
    import stat

    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return
    os.chmod(tmp, mode)


def drop_temporary(name):
    """Remove a temporary file of :func:`new_temporary` (if still there) with its private
    folder, and forget it."""
    from . import faults

    if not name:
        return
    private = os.path.dirname(name)
    shutil.rmtree(private, ignore_errors=True)
    faults.untrack(private)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc):
    """True when the ``OSError`` ``exc`` says the disk (or the user's quota) is full;
    h5py's errors carry the words, not always the errno."""
    return isinstance(exc, OSError) and (
        exc.errno in DISK_FULL or "No space left on device" in str(exc)
        or "Disk quota exceeded" in str(exc))


@contextlib.contextmanager
def naming_full_disk(path, role):
    """Turn a full disk met inside the block into a :class:`StarcholError` that names
    the file being written (``role path``) and its folder, instead of a bare
    ``OSError: No space left on device``."""
    try:
        yield
    except OSError as exc:
        if not disk_full(exc):
            raise
        folder = os.path.dirname(resolve(path))
        raise StarcholError(f"{role} {path}: the disk is full (no space left on the file "
                            f"system of {folder}) while writing it; nothing was published "
                            f"there: free space or write elsewhere") from None


@contextlib.contextmanager
def atomic_path(path, copy_existing=False, role="output"):
    """Yield a temporary file name beside ``path`` (resolved through symlinks); on success
    rename it over ``path``, on any error or signal remove it.

    The temporary name is registered for removal on signals before anything is written
    (:func:`starchol.faults.track`). With ``copy_existing`` the temporary file starts as a
    copy of ``path`` when that exists (used to add a dataset to an HDF5 file). A ``path``
    that is not a regular file (a device, a FIFO, a socket, a link loop) is refused
    before anything is written (:func:`check_regular_output`); a full disk is reported
    naming ``role path`` (:func:`naming_full_disk`).
    """
    check_regular_output(path, role)
    target = resolve(path)
    tmp = new_temporary(target)
    try:
        with naming_full_disk(path, role):
            if copy_existing and os.path.exists(target):
                shutil.copyfile(target, tmp)
            yield tmp
        keep_mode(tmp, target)
        check_regular_output(path, role)  # not replaced by a device meanwhile
        os.replace(tmp, target)
        logging.getLogger("starchol.files").info("wrote %s", target)
    finally:
        drop_temporary(tmp)


def write_atomic(path, data, mode="w", role="output"):
    """Write ``data`` (str, or bytes with ``mode="wb"``) to ``path`` atomically: a failed
    or interrupted write leaves no partial file at ``path``. ``path == "-"`` writes to
    standard output. ``role`` names the file in messages (``--json``)."""
    if path == "-":
        import sys

        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        stream.write(data)
        stream.flush()
        return
    with atomic_path(path, role=role) as tmp:
        with open(tmp, mode) as fh:
            fh.write(data)


class OutputFolder:
    """An output folder (``report -o``): checked before the work, created only at the
    first write: the one home of creating an output folder.

    A folder this command creates (with any missing parents) is registered with
    :mod:`starchol.faults` while the report is written, so an interruption (a signal,
    or an error in the ``with`` block) removes it with what it holds: no empty or
    half-written folder is left. A folder that already existed is kept; each file in it
    is written atomically.

    An existing folder that holds anything is refused unless ``overwrite`` (its files
    would be replaced by this command's files of the same names); an empty one is
    used. The folder name is also refused when it is one of ``inputs`` (``(role,
    path)`` pairs) or holds one of them. ``role`` names the folder in messages: the
    caller's word for it (``folder`` by default; the command line passes its flag,
    ``-o``).

    Use as ``with OutputFolder(path) as out: write(out.path("report.md"), ...)``.
    """

    def __init__(self, folder, role="folder", overwrite=False, inputs=()):
        self.folder, self.role = folder, role
        if not folder:
            raise UsageError(f"{role} is empty; give a folder name")
        if "\0" in folder:
            check_printable(folder, role)
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise UsageError(f"{self.role} {folder}: exists and is not a folder")
        for in_role, in_path in inputs:
            if in_path and same_file(in_path, folder):
                raise UsageError(f"{role} {folder} is the input ({in_role} {in_path}); "
                                 f"starchol never modifies its input: choose another "
                                 f"folder")
        if os.path.isdir(folder):
            if read_only(folder) or not os.access(folder, os.W_OK | os.X_OK):
                raise UsageError(f"{role} {folder}: the folder is not writable")
            try:
                held = sorted(os.listdir(folder))
            except OSError as exc:
                raise UsageError(f"{role} {folder}: cannot list the folder "
                                 f"({exc.strerror})") from None
            if held and not overwrite:
                shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
                raise UsageError(f"{role} {folder} is a folder that holds files "
                                 f"({len(held)}: {shown}); pass overwrite=True to write "
                                 f"into it, or give a new or empty folder",
                                 param="overwrite")
        # the topmost folder this command would create, and the folder that would hold it
        target = os.path.abspath(folder)
        self.root = None
        while not os.path.isdir(target):
            if os.path.lexists(target):
                raise UsageError(f"{self.role} {folder}: {target} exists and is not a "
                                 f"folder")
            self.root, target = target, os.path.dirname(target)
        if self.root is not None and not os.access(target, os.W_OK | os.X_OK):
            raise UsageError(f"{self.role} {folder}: cannot create the folder ({target} "
                             f"is not writable)")
        self.made = False

    def path(self, name):
        """``folder/name``, creating the folder first if this is the first write."""
        if self.root is not None and not self.made:
            from . import faults

            with faults.creating():  # a signal either finds it registered or stops this
                faults.track(self.root)
                try:
                    os.makedirs(self.folder, exist_ok=True)
                except OSError as exc:
                    faults.untrack(self.root)
                    raise UsageError(f"{self.role} {self.folder}: cannot create the folder "
                                     f"({exc.strerror or exc})") from None
            self.made = True
        return os.path.join(self.folder, name)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.made:
            from . import faults

            if exc_type is not None:  # interrupted or failed: leave nothing behind
                shutil.rmtree(self.root, ignore_errors=True)
            faults.untrack(self.root)
        return False


class OutputAppeared(StarcholError):
    """The output changed or appeared while the run was working; the result was kept
    under another name (``kept``)."""

    def __init__(self, message, kept):
        super().__init__(message)
        self.kept = kept

    def __reduce__(self):  # travels between ranks (collective agreement)
        return (type(self), (str(self), self.kept))


def _kept_name(target, suffix):
    """``NAME.starchol-PID.EXT``, or ``NAME.starchol-PID-K.EXT`` when that exists (a
    kept result never replaces another)."""
    stem, ext = os.path.splitext(target)
    name, k = f"{stem}.starchol-{os.getpid()}{ext or suffix}", 1
    while os.path.lexists(name):
        k += 1
        name = f"{stem}.starchol-{os.getpid()}-{k}{ext or suffix}"
    return name


def _wrote(target):
    logging.getLogger("starchol.files").info("wrote %s", target)
    return target


def publish(tmp, path, before, overwrite=False, what="path", suffix=".h5", aside=None):
    """Rename the complete ``tmp`` to ``path`` (resolved), claiming it atomically.

    ``before`` is :func:`starchol.files.fingerprint` of the path when the run checked it
    (None: absent). If the path appeared (or changed) since, it is replaced only with
    ``overwrite``; otherwise ``tmp`` is kept as ``NAME.starchol-PID.EXT`` (EXT: the
    path's own, else ``suffix``) and :class:`OutputAppeared` says where. A new file is
    claimed with ``link()``, which fails if a file of that name exists, so two runs never
    both "win" the same name; a replaced file keeps its permissions. ``what`` names the
    output in the messages: the caller's word for it (``path`` by default; the command
    line passes its flag, ``--gather``). ``aside`` (a reason, such as "its factor was
    kept aside"): keep ``tmp`` aside whatever the path's state, so that a run that lost
    one of its outputs to another run does not take the other names.
    """
    target = resolve(path)
    logging.getLogger("starchol.files").info("publishing %s (was %s when checked)", target,
                                             "absent" if before is None else "present")
    special = special_kind(path)   # became a device, FIFO or loop since the check
    if aside:
        kept = _kept_name(target, suffix)
        os.replace(tmp, kept)
        raise OutputAppeared(f"{what} {path} was not written because {aside}; it is kept "
                             f"in {kept}", kept)
    if special is None and before is None and not overwrite:
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass  # someone else created it meanwhile: keep ours aside
        except OSError:
            # no hard links on this file system: check, then rename (small window)
            if not os.path.exists(target):
                os.replace(tmp, target)
                return _wrote(target)
        else:
            os.unlink(tmp)
            return _wrote(target)
    elif special is None and (overwrite or fingerprint(target) == before):
        keep_mode(tmp, target)
        os.replace(tmp, target)
        return _wrote(target)
    kept = _kept_name(target if special is None else os.path.abspath(path), suffix)
    os.replace(tmp, kept)
    how = (f"is now {special}" if special else
           "appeared" if before is None else "changed")
    raise OutputAppeared(
        f"{what} {path} {how} while this run was working (another program or run wrote "
        f"it); it was not replaced"
        f"{' (overwrite was not asked)' if not special else ''}. "
        f"The result is kept in {kept}", kept)


def publish_text(path, text, before, overwrite=False, what="path", suffix=".json",
                 aside=None):
    """Write ``text`` to a temporary file beside ``path`` and :func:`publish` it: the
    one path of a document whose name was checked before the work (``before``: its
    :func:`fingerprint` then). A file that appeared or changed meanwhile is kept unless
    ``overwrite``, and this document is kept aside (:class:`OutputAppeared` names it),
    as it is with ``aside`` (:func:`publish`). A full disk names ``what path``; ``what``
    is the caller's word for the document (``path`` by default; the command line passes
    its flag, ``--json``)."""
    tmp = None
    try:
        with naming_full_disk(path, what):
            tmp = new_temporary(path)
            with open(tmp, "w") as fh:
                fh.write(text)
        return publish(tmp, path, before, overwrite, what=what, suffix=suffix, aside=aside)
    finally:
        drop_temporary(tmp)

