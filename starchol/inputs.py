"""Inputs: the one readable-input check (regular files only, bounded reads, decoded
errors as usage errors) for node files, map files, run documents and JSON."""
import os
import stat

from .errors import UsageError
from .units import format_bytes
from .paths import special_kind


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

