"""Reading ``starchol run --json`` documents for ``starchol report``.

Each document is read into the typed :class:`starchol.linalg.record.RunRecord`
(``run["record"]``), whose :meth:`~starchol.linalg.record.RunRecord.from_dict` is the
one validator of run documents: a damaged document gives an error naming the file and
the key, never a traceback. Only ``dist, nodes, n, nb`` are required; every other key is
optional and the report leaves out what it cannot draw.

:func:`starchol.reports.settle.settle_bytes` then makes the byte figures follow from the
pair matrices and the exact model.
"""
import os

from ..distributions.base import nodes_text
from ..errors import UsageError
from ..files import read_json_input, special_kind
from ..linalg.record import PAIR_KEYS, RUNTIME_KEYS, RunRecord, pair_matrix


def load_run(path):
    """Read and check one run document; return a normalised dict.

    The result has the document's keys plus ``path``, ``label`` (map, nodes, N, NB),
    ``record`` (the :class:`~starchol.linalg.record.RunRecord`), ``runtime`` as a dict
    (nested or dotted keys accepted), numpy arrays for the pair matrices present (None
    for those absent, in the run and in its ``solve``), and ``nt`` (computed from N and
    NB when absent).

    Raises
    ------
    UsageError
        The file is missing, not JSON, or not a run document
        (:meth:`~starchol.linalg.record.RunRecord.from_dict` says why); the message names
        the file and the key.
    """
    kind = special_kind(path)   # a FIFO or a device would block or never end
    if kind not in (None, "a folder"):
        raise UsageError(f"{path}: is {kind}, not a run JSON document")
    if kind == "a folder":
        raise UsageError(f"{path}: is a folder, not a run JSON document")
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such run document (make one with "
                         f"`starchol run ... --json {path}`)")
    doc = read_json_input(path, "run document")   # the one readable-input rule
    try:  # the one validator, shared with `starchol run` (RunRecord.from_json's reader)
        record = RunRecord.from_dict(doc)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    run = dict(doc, path=str(path), nt=record.nt, record=record)
    _pair_arrays(run, doc, record.nodes)
    runtime = dict(doc.get("runtime") or {})
    for key in RUNTIME_KEYS:
        if f"runtime.{key}" in doc and key not in runtime:
            runtime[key] = doc[f"runtime.{key}"]
    run["runtime"] = runtime
    run["label"] = run_label(run)
    run["solve"] = None if doc.get("solve") is None else \
        _pair_arrays(dict(doc["solve"]), doc["solve"], record.nodes)
    run["mixed"] = None if doc.get("mixed") is None else dict(doc["mixed"])
    return run


def _pair_arrays(out, doc, nodes):
    """Set ``out``'s byte matrices from ``doc``'s (already checked) as arrays, None where
    absent; return ``out``."""
    for key in PAIR_KEYS:
        out[key] = None if doc.get(key) is None else pair_matrix(doc[key], nodes, key)
    return out


def map_label(run):
    """The document's ``map`` text if any ('sbc r=4 (extended, 6 nodes)'), else one made
    from its keys: '2dbc 2x2 (4 nodes)', '2dbc25d c=2 2x2 (8 nodes)'."""
    if isinstance(run.get("map"), str) and run["map"].strip():
        return _one_line(run["map"])
    parts = [_one_line(run["dist"])]
    slices = run.get("slices")
    if isinstance(slices, int) and slices > 1:
        parts.append(f"c={slices}")
    grid = grid_text(run.get("grid"))
    if isinstance(grid, str) and grid:
        parts.append(grid)
    return f"{' '.join(parts)} ({nodes_text(run['nodes'])})"


def grid_text(grid):
    """A document's ``grid`` as text: ``[2, 3]`` -> ``'2x3'``; anything else unchanged."""
    if isinstance(grid, (list, tuple)) and len(grid) == 2:
        return f"{grid[0]}x{grid[1]}"
    return grid


def _one_line(text):
    """Document text made safe for one Markdown line or heading: control characters
    (newlines) become spaces, Markdown's special characters are escaped."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(text)).strip()
    for ch in "\\`*_[]<>#":
        text = text.replace(ch, "\\" + ch)
    return " ".join(text.split())


def run_label(run):
    """Map label plus matrix size: 'sbc (6 nodes), N=1000 NB=96'."""
    return f"{map_label(run)}, N={run['n']} NB={run['nb']}"
