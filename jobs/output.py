"""Writing command results: JSON documents and files, atomically."""
import json
import os
import sys
import tempfile


def to_jsonable(obj):
    """numpy scalars and arrays -> plain Python, recursively."""
    import numpy as np

    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def dumps(doc):
    """One JSON document as text."""
    return json.dumps(to_jsonable(doc), indent=1)


def print_json(doc, stream=None):
    """Print one JSON document on stdout."""
    (stream or sys.stdout).write(dumps(doc) + "\n")


def write_atomic(path, data, mode="w"):
    """Write ``data`` to ``path`` through a temporary file in the same folder + rename.

    A failed or interrupted write leaves no partial file at ``path``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, mode) as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
