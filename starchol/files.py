"""Files: the one home of atomic writes, ``FILE.h5:/dataset`` targets and path checks.

Every file starchol writes (JSON documents, pictures, map files, scripts, HDF5 factors)
goes through a temporary file in the destination's folder, registered with
:mod:`starchol.faults` *before its first byte* (so a signal removes it), and renamed over
the final name only when complete. Destinations are resolved first, so writing to a
symbolic link writes through it to its target instead of replacing the link.
"""
import contextlib
import errno
import logging
import os
import shutil
import stat

from .errors import StarcholError, UsageError
from .units import format_bytes


def parse_target(text, flag="--input"):
    """``"file.h5:/A"`` -> ``("file.h5", "/A")``. The dataset part is required.

    ``flag`` names the option in error messages.
    """
    if not text or ":" not in text:
        raise UsageError(f"{flag} must look like FILE.h5:/DATASET, got {text!r}")
    path, dataset = text.rsplit(":", 1)
    if not path or not dataset or dataset.strip("/") == "":
        raise UsageError(f"{flag} must look like FILE.h5:/DATASET, got {text!r}")
    if not dataset.startswith("/"):
        dataset = "/" + dataset
    return path, dataset


def resolve(path):
    """The absolute path with symbolic links resolved (the file that would be written)."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def identity(path):
    """``(st_dev, st_ino)`` of an existing file, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def fingerprint(path):
    """``(st_dev, st_ino, size, mtime_ns)`` of an existing file, or None (to notice that a
    file was replaced or changed between two moments)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_file(a, b):
    """True when ``a`` and ``b`` name the same file: same resolved path, or same inode
    (hard links, bind mounts)."""
    if resolve(a) == resolve(b):
        return True
    ia, ib = identity(a), identity(b)
    return ia is not None and ia == ib


#: the roles of files starchol reads (never writes): a matrix and a custom map
INPUT_ROLES = ("--input", "--map-file", "--rhs", "--node", "RUN.json")


def check_distinct(named_paths):
    """Refuse two roles on one file. ``named_paths`` is a list of ``(role, path)``, e.g.
    ``[("--input", "a.h5"), ("--json", "a.h5")]``; ``None`` paths are skipped. Roles in
    :data:`INPUT_ROLES` are files that are read: an output on one of them is refused as
    "the input file", whatever the order of the list.

    Raises :class:`UsageError` naming both roles.
    """
    items = [(role, p) for role, p in named_paths if p]
    for k, (role_a, a) in enumerate(items):
        for role_b, b in items[k + 1:]:
            a_in, b_in = role_a in INPUT_ROLES, role_b in INPUT_ROLES
            if (a_in and b_in) or not same_file(a, b):
                continue            # two inputs may be one file (read twice)
            if a_in or b_in:        # an output on an input, in either order
                (role_i, i), (role_o, o) = (((role_a, a), (role_b, b)) if a_in
                                            else ((role_b, b), (role_a, a)))
                raise UsageError(f"{role_o} {o} is the input file ({role_i} {i}); "
                                 f"starchol never modifies its input: choose another "
                                 f"name for {role_o}")
            raise UsageError(f"{role_b} {b} is also the {role_a} file ({a}); two "
                             f"results cannot share one file: choose another name for "
                             f"{role_b}")


def read_only(path):
    """True when ``path`` exists and is read-only to this process: ``access()`` says it
    cannot be written (permissions, a read-only file system), or no write permission bit
    is set at all (a file or folder marked read-only, which ``access()`` ignores for
    root)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not os.access(path, os.W_OK) or not st.st_mode & 0o222


def special_kind(path):
    """What ``path`` is when it exists and is not a regular file (symbolic links
    followed): ``"a folder"``, ``"a character device"``, ``"a block device"``,
    ``"a FIFO (named pipe)"``, ``"a socket"``, ``"a symbolic link loop"``; None when it
    is absent (a dangling link included: writing through it creates its target) or a
    regular file. A name holding a NUL byte is ``"a name holding a NUL byte"`` (no file
    can have it)."""
    if "\0" in os.fspath(path):
        return "a name holding a NUL byte"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "a symbolic link loop" if exc.errno == errno.ELOOP else None
    for test, words in ((stat.S_ISREG, None), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


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


def check_readable_file(path, role):
    """Refuse an input ``path`` that is missing, a folder, not a regular file (a FIFO
    would block the reader, a device never ends), a symbolic link loop, or unreadable
    by this process. The one home of the readable-file rule (``--input``, ``--rhs``,
    ``--map-file``, run documents)."""
    kind = special_kind(path)
    if kind == "a folder":
        raise UsageError(f"{role} {path!r} is a folder, not a file")
    if kind is not None:
        raise UsageError(f"{role} {path!r} is {kind}, not a regular file; give a file")
    if not os.path.exists(path):
        raise UsageError(f"{role} {path!r} not found")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{role} {path!r} is not readable (permissions)")


#: the most bytes starchol reads from a text input (a node description, a run document,
#: a map file): far above any real one, far below what would exhaust memory
MAX_TEXT_INPUT_BYTES = 64 * 2 ** 20


def read_text_input(path, role, limit=MAX_TEXT_INPUT_BYTES):
    """The text of the input file ``path``: the one readable-input rule for text files.

    A regular file only (:func:`check_readable_file`; opened without blocking, so a FIFO
    swapped in after the check cannot hang the reader, and checked again on the open
    file), at most ``limit`` bytes (a larger one is refused, never read whole), UTF-8
    text (a binary file is refused). Every refusal is a :class:`UsageError` naming
    ``role path``.
    """
    path = os.fspath(path)
    check_readable_file(path, role)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UsageError(f"{role} {path} cannot be read ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{role} {path} is not a regular file; give a file")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UsageError(f"{role} {path} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise UsageError(f"{role} {path} is larger than {format_bytes(limit)}; starchol "
                         f"reads no such input file (is it the right file?)")
    data = b"".join(chunks)
    if b"\0" in data:
        raise UsageError(f"{role} {path} is a binary file (it holds NUL bytes), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{role} {path} is not UTF-8 text (byte {exc.start}: "
                         f"{exc.reason}); is it a binary file?") from None


#: JSON inputs nested deeper than this are refused (a real document has 5 levels)
MAX_JSON_DEPTH = 64


def _depth(text):
    """The deepest nesting of brackets in the JSON ``text`` (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def read_json_input(path, role, limit=MAX_TEXT_INPUT_BYTES):
    """The JSON document of the input file ``path`` (:func:`read_text_input`): a
    document that is not JSON, nested deeper than :data:`MAX_JSON_DEPTH`, or holds
    ``NaN``/``Infinity`` is a :class:`UsageError` naming the file and the place."""
    import json

    text = read_text_input(path, role, limit)
    if _depth(text) > MAX_JSON_DEPTH:
        raise UsageError(f"{role} {path} is nested more than {MAX_JSON_DEPTH} levels "
                         f"deep; not a starchol document")

    def constant(word):
        raise ValueError(f"{word} is not a number starchol accepts")
    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{role} {path} is not JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{role} {path} is not valid JSON: {exc}") from None


def check_printable(text, role):
    """Refuse ``text`` (a path or an option's value) holding a newline, a NUL or another
    character that is not printable: such a value cannot be written into a script, a
    comment or one line of output unchanged."""
    for k, ch in enumerate(str(text)):
        if not ch.isprintable():
            raise UsageError(f"{role} {str(text)!r} holds the control character {ch!r} at "
                             f"position {k}; starchol refuses newlines, NUL and other "
                             f"non-printable characters in paths and options: rename it")


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
        raise UsageError(f"{role} {path} exists; pass --overwrite to replace it, or choose "
                         f"another name")
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


#: errno values of a full disk or an exhausted quota
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
    path)`` pairs) or holds one of them.

    Use as ``with OutputFolder(path) as out: write(out.path("report.md"), ...)``.
    """

    def __init__(self, folder, role="-o", overwrite=False, inputs=()):
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
                                 f"({len(held)}: {shown}); pass --overwrite to write into "
                                 f"it, or give a new or empty folder")
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


def publish(tmp, path, before, overwrite=False, what="--output", suffix=".h5", aside=None):
    """Rename the complete ``tmp`` to ``path`` (resolved), claiming it atomically.

    ``before`` is :func:`starchol.files.fingerprint` of the path when the run checked it
    (None: absent). If the path appeared (or changed) since, it is replaced only with
    ``overwrite``; otherwise ``tmp`` is kept as ``NAME.starchol-PID.EXT`` (EXT: the
    path's own, else ``suffix``) and :class:`OutputAppeared` says where. A new file is
    claimed with ``link()``, which fails if a file of that name exists, so two runs never
    both "win" the same name; a replaced file keeps its permissions. ``what`` names the
    output in the message (``--gather``). ``aside`` (a reason, such as "its factor was
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


def publish_text(path, text, before, overwrite=False, what="--json", suffix=".json",
                 aside=None):
    """Write ``text`` to a temporary file beside ``path`` and :func:`publish` it: the
    one path of a document whose name was checked before the work (``before``: its
    :func:`fingerprint` then). A file that appeared or changed meanwhile is kept unless
    ``overwrite``, and this document is kept aside (:class:`OutputAppeared` names it),
    as it is with ``aside`` (:func:`publish`). A full disk names ``what path``."""
    tmp = None
    try:
        with naming_full_disk(path, what):
            tmp = new_temporary(path)
            with open(tmp, "w") as fh:
                fh.write(text)
        return publish(tmp, path, before, overwrite, what=what, suffix=suffix, aside=aside)
    finally:
        drop_temporary(tmp)
