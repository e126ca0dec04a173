"""Writing command results: JSON documents and the human text beside them (files are
written by :func:`starchol.files.write_atomic`, re-exported here).

The one rule of ``--json`` for every command (:func:`add_json_arg`, :func:`json_file`,
:func:`emit`): ``--json FILE`` writes the document to FILE atomically and prints the
text on stdout; ``--json -`` or a bare ``--json`` prints the document on stdout and the
text on stderr. ``--json FILE`` follows ``--output``'s rule: an existing FILE is
replaced only with ``--overwrite``, FILE must be a regular file (never a device, FIFO,
socket or link loop: ``-`` is standard output), and a FILE that appeared or changed
while the command worked is not replaced: the document is kept aside as
``FILE.starchol-PID.json`` (:func:`starchol.files.publish`).
"""
import json
import sys

from ..files import write_atomic  # noqa: F401 - the one atomic-write helper
from ..units import bytes_text  # noqa: F401 - its home is starchol.units


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




def add_json_arg(parser, what="the result document", overwrite=True):
    """``--json [FILE]``: ``what`` to FILE, or on stdout with ``-`` or no FILE; with
    ``overwrite`` also ``--overwrite`` (commands that have their own pass False)."""
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help=f"write {what} to FILE (atomically; an existing FILE only with "
                             "--overwrite); '-' or no FILE: print it on stdout, and the "
                             "text on stderr")
    if overwrite:
        parser.add_argument("--overwrite", action="store_true",
                            help="replace the --json file if it exists")


def json_path(args):
    """The ``--json`` file to write: None for no ``--json`` or for stdout (``-``)."""
    path = getattr(args, "json", None)
    return None if path in (None, "-") else path


def check_json_file(path, overwrite, others=()):
    """Check the ``--json`` file ``path`` before the work and return its
    :func:`~starchol.files.fingerprint` (None: absent), for :func:`publish_json`:
    a regular file in a writable folder, not one of ``others`` (``(role, path)``
    pairs, :func:`~starchol.files.check_distinct`), and an existing one only with
    ``overwrite``."""
    from ..errors import UsageError
    from ..files import check_distinct, check_folder_writable, fingerprint

    check_folder_writable(path, "--json", stdout=True)
    check_distinct([*others, ("--json", path)], INPUT_ROLES)
    before = fingerprint(path)
    if before is not None and not overwrite:
        raise UsageError(f"--json {path} exists; pass --overwrite to replace it, or "
                         f"choose another name")
    return before


#: the options whose files a command reads: ``{dest: role}``; a ``FILE.h5:/DATASET``
#: value is compared by its file
INPUT_DESTS = {"map_file": "--map-file", "node": "--node", "input": "--input",
               "rhs": "--rhs", "runs": "RUN.json"}
#: the roles of the files that commands read (:func:`starchol.files.check_distinct`'s
#: ``inputs``): an output on one of them is "the input file"
INPUT_ROLES = frozenset(INPUT_DESTS.values())


def command_inputs(args):
    """``[(role, path)]`` of every input file of the parsed command ``args`` (see
    :data:`INPUT_DESTS`): what no output of the command may be
    (:func:`starchol.files.check_output`'s ``inputs``)."""
    out = []
    for dest, role in INPUT_DESTS.items():
        value = getattr(args, dest, None)
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if not v or not isinstance(v, str):
                continue
            if role in ("--input", "--rhs") and ":" in v:
                v = v.rsplit(":", 1)[0]
            out.append((role, v))
    return out


def check_command_outputs(args, outputs):
    """The one output check of a command, before its work: each ``(role, path)`` of
    ``outputs`` through :func:`starchol.files.check_outputs` against the command's
    inputs (:func:`command_inputs`) and its ``--overwrite``; returns ``{role:
    fingerprint}``."""
    from ..files import check_outputs

    return check_outputs(outputs, getattr(args, "overwrite", False), command_inputs(args))


def json_file(args, others=()):
    """The ``--json`` file to write, None for none or stdout; checked before the work
    (:func:`check_json_file`; it may not be one of the command's input files,
    :func:`command_inputs`, nor one of ``others``, ``(role, path)`` of its other
    outputs). Its state is kept in ``args.json_before`` for :func:`emit`."""
    path = json_path(args)
    args.json_before = None
    if path is None:
        return None
    args.json_before = check_json_file(path, getattr(args, "overwrite", False),
                                       [*command_inputs(args), *others])
    return path


def publish_json(path, doc, before, overwrite, aside=None):
    """Publish ``doc`` as the ``--json`` file ``path`` checked by
    :func:`check_json_file` (``before``), or print it on stdout for ``-``: a file that
    appeared or changed meanwhile is kept, this document aside
    (:class:`~starchol.files.OutputAppeared`); so it is with ``aside`` (the reason: the
    run lost another output to another run)."""
    from ..files import publish_text

    if path == "-":
        write_atomic("-", dumps(doc) + "\n")
        return "-"
    return publish_text(path, dumps(doc) + "\n", before, overwrite, what="--json",
                        aside=aside)


def text_stream(args):
    """Where the human text goes: stderr when stdout holds the JSON document."""
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


def emit(args, doc, text):
    """Write ``doc`` where ``--json`` says (nowhere without it; :func:`publish_json`,
    after :func:`json_file` checked it), then print ``text`` (str or None) on
    :func:`text_stream`."""
    if args.json:
        if not hasattr(args, "json_before"):    # not checked before the work
            json_file(args)
        publish_json(args.json, doc, args.json_before, getattr(args, "overwrite", False))
    if text is not None:
        stream = text_stream(args)
        print(text, file=stream)
        stream.flush()
