"""Reading ``starchol run --json`` documents for ``starchol report``.

Each document is read into the typed :class:`starchol.linalg.record.RunRecord` (the
one reader of run documents, ``run["record"]``) after the checks below, which name the
file and the key of anything damaged.

A run document (written by rank 0) has the keys ``dist, nodes, n, nb, nt, time_s, gflops,
residual, bytes_measured_pairs, bytes_predicted_pairs`` (P x P lists, sender row),
``bytes_measured_total, bytes_predicted_total, match`` and ``runtime`` (``scheduler,
workers_per_rank, starpu_version``), maybe ``grid`` and ``slices``. Only ``dist, nodes, n,
nb`` are required here; every other key is optional and the report leaves out what it
cannot draw. Keys that are present are checked (types, P x P shapes) so that a damaged
document gives an error naming the file and the key, never a traceback.
"""
import json
import math
import os

import numpy as np

from ..distributions.base import nodes_text
from ..errors import UsageError

REQUIRED = ("dist", "nodes", "n", "nb")
PAIR_KEYS = ("bytes_measured_pairs", "bytes_predicted_pairs")
NUMBER_KEYS = ("time_s", "gflops", "residual", "bytes_measured_total", "bytes_predicted_total")
RUNTIME_KEYS = ("scheduler", "workers_per_rank", "starpu_version")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _pairs(path, key, value, nodes):
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise UsageError(f"{path}: key {key!r} must be a {nodes} x {nodes} list of numbers "
                         f"(bytes sent, sender row)") from None
    if arr.shape != (nodes, nodes):
        raise UsageError(f"{path}: key {key!r} must be {nodes} x {nodes} (nodes = {nodes}), "
                         f"got shape {'x'.join(map(str, arr.shape)) or 'scalar'}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise UsageError(f"{path}: key {key!r} has negative or non-finite byte counts")
    return arr


def load_run(path):
    """Read and check one run document; return a normalised dict.

    The result has the document's keys plus ``path``, ``label`` (map, nodes, N, NB),
    ``runtime`` as a dict (nested or dotted keys accepted), numpy arrays for the pair
    matrices present, and ``nt`` (computed from N and NB when absent).

    Raises:
        UsageError: the file is missing, not JSON, not an object, or a key is missing or
            has the wrong type; the message names the file and the key.
    """
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such run document (make one with "
                         f"`starchol run ... --json {path}`)") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a run JSON document") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a run document is a JSON object, got {type(doc).__name__}")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise UsageError(f"{path}: missing required key{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(repr(k) for k in missing)} (is this a `starchol run "
                         f"--json` document?)")
    run = dict(doc)
    run["path"] = str(path)
    if not isinstance(doc["dist"], str) or not doc["dist"]:
        raise UsageError(f"{path}: key 'dist' must be a map name, got {doc['dist']!r}")
    for key in ("nodes", "n", "nb"):
        value = doc[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"{path}: key {key!r} must be a positive integer, got {value!r}")
    nt = math.ceil(doc["n"] / doc["nb"])
    if "nt" in doc and doc["nt"] != nt:
        raise UsageError(f"{path}: key 'nt' is {doc['nt']!r} but N = {doc['n']} and "
                         f"NB = {doc['nb']} give NT = {nt}")
    run["nt"] = nt
    for key in NUMBER_KEYS:
        if doc.get(key) is not None and not _is_number(doc[key]):
            raise UsageError(f"{path}: key {key!r} must be a number, got {doc[key]!r}")
    if doc.get("match") is not None and not isinstance(doc["match"], bool):
        raise UsageError(f"{path}: key 'match' must be true or false, got {doc['match']!r}")
    for key in PAIR_KEYS:
        if doc.get(key) is not None:
            run[key] = _pairs(path, key, doc[key], doc["nodes"])
        else:
            run[key] = None
    runtime = doc.get("runtime")
    if runtime is not None and not isinstance(runtime, dict):
        raise UsageError(f"{path}: key 'runtime' must be an object, got {runtime!r}")
    runtime = dict(runtime or {})
    for key in RUNTIME_KEYS:
        if f"runtime.{key}" in doc and key not in runtime:
            runtime[key] = doc[f"runtime.{key}"]
    run["runtime"] = runtime
    for key, arr in (("bytes_measured_total", run["bytes_measured_pairs"]),
                     ("bytes_predicted_total", run["bytes_predicted_pairs"])):
        if run.get(key) is None and arr is not None:
            run[key] = float(arr.sum())
    run["label"] = run_label(run)
    from ..linalg.record import RunRecord

    try:  # the typed record shared with `starchol run` (RunRecord.from_json's reader)
        run["record"] = RunRecord.from_dict(doc)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    return run


def map_label(run):
    """The document's ``map`` text if any ('sbc r=4 (extended, 6 nodes)'), else one made
    from its keys: '2dbc 2x2 (4 nodes)', '2dbc25d c=2 2x2 (8 nodes)'."""
    if isinstance(run.get("map"), str) and run["map"].strip():
        return _one_line(run["map"])
    parts = [_one_line(run["dist"])]
    slices = run.get("slices")
    if isinstance(slices, int) and slices > 1:
        parts.append(f"c={slices}")
    grid = run.get("grid")
    if isinstance(grid, (list, tuple)) and len(grid) == 2:
        grid = f"{grid[0]}x{grid[1]}"
    if isinstance(grid, str) and grid:
        parts.append(grid)
    return f"{' '.join(parts)} ({nodes_text(run['nodes'])})"


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


def file_stem(path, index):
    """A safe, unique stem for the figures of run number ``index`` (1-based)."""
    base = os.path.splitext(os.path.basename(str(path)))[0]
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in base)[:40]
    return f"run{index}-{safe}" if safe else f"run{index}"
