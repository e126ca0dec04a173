"""Writing command results: JSON documents (files are written by
:func:`starchol.files.write_atomic`, re-exported here)."""
import json
import sys

from ..files import write_atomic  # noqa: F401 - the one atomic-write helper


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
