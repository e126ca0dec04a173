"""Paths: the one home of naming files: ``FILE.h5:/dataset`` targets, resolving links,
telling two names of one file apart (``same_file``), what a non-regular path is, and
values that cannot be written into a script or a line of output."""
import errno
import os
import stat

from .errors import UsageError


def parse_target(text, role="target"):
    """``"file.h5:/A"`` -> ``("file.h5", "/A")``. The dataset part is required.

    ``role`` names the value in error messages: the caller's word for it (``target``
    by default; the command line passes its flag, ``--input``).
    """
    if not text or ":" not in text:
        raise UsageError(f"{role} must look like FILE.h5:/DATASET, got {text!r}")
    path, dataset = text.rsplit(":", 1)
    if not path or not dataset or dataset.strip("/") == "":
        raise UsageError(f"{role} must look like FILE.h5:/DATASET, got {text!r}")
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


def check_distinct(named_paths, inputs=()):
    """Refuse two roles on one file. ``named_paths`` is a list of ``(role, path)``, e.g.
    ``[("path", "a.h5"), ("out", "a.h5")]``; ``None`` paths are skipped. The roles in
    ``inputs`` are files that are read (the caller names them: the command line's
    input flags, ``jobs.output.INPUT_ROLES``): an output on one of them is refused as
    "the input file", whatever the order of the list; two inputs may be one file.

    Raises :class:`UsageError` naming both roles.
    """
    items = [(role, p) for role, p in named_paths if p]
    for k, (role_a, a) in enumerate(items):
        for role_b, b in items[k + 1:]:
            a_in, b_in = role_a in inputs, role_b in inputs
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


def check_printable(text, role):
    """Refuse ``text`` (a path or an option's value) holding a newline, a NUL or another
    character that is not printable: such a value cannot be written into a script, a
    comment or one line of output unchanged."""
    for k, ch in enumerate(str(text)):
        if not ch.isprintable():
            raise UsageError(f"{role} {str(text)!r} holds the control character {ch!r} at "
                             f"position {k}; starchol refuses newlines, NUL and other "
                             f"non-printable characters in paths and options: rename it")

