"""Writing command results: JSON documents and the human text beside them (files are
written by :func:`starchol.files.write_atomic`, re-exported here).

The one rule of ``--json`` for every command (:func:`add_json_arg`, :func:`publish`):
``--json FILE`` writes the document to FILE atomically and prints the text on stdout;
``--json -`` or a bare ``--json`` prints the document on stdout and the text on stderr.
"""
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


def bytes_text(nbytes):
    """Bytes in decimal units with the exact count beside when the units round it:
    ``'1.48 MB (1480000 B)'``, ``'512 B'``."""
    from ..units import format_bytes

    nbytes = int(nbytes)
    text = format_bytes(nbytes)
    return text if abs(nbytes) < 1000 else f"{text} ({nbytes} B)"


def add_json_arg(parser, what="the result document"):
    """``--json [FILE]``: ``what`` to FILE, or on stdout with ``-`` or no FILE."""
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help=f"write {what} to FILE (atomically); '-' or no FILE: print it "
                             "on stdout, and the text on stderr")


def json_path(args):
    """The ``--json`` file to write: None for no ``--json`` or for stdout (``-``)."""
    path = getattr(args, "json", None)
    return None if path in (None, "-") else path


def json_file(args):
    """The ``--json`` file to write, None for none or stdout; its folder is checked, and
    it may not be the command's ``--map-file`` (call before the work)."""
    path = json_path(args)
    if path is None:
        return None
    from ..files import check_distinct, check_folder_writable

    check_folder_writable(path, "--json")
    check_distinct([("--map-file", getattr(args, "map_file", None)), ("--json", path)])
    return path


def text_stream(args):
    """Where the human text goes: stderr when stdout holds the JSON document."""
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


def publish(args, doc, text):
    """Write ``doc`` where ``--json`` says (nowhere without it), then print ``text``
    (str or None) on :func:`text_stream`."""
    if args.json:
        write_atomic(args.json, dumps(doc) + "\n")
    if text is not None:
        stream = text_stream(args)
        print(text, file=stream)
        stream.flush()
