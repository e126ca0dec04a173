"""Reading the execution trace of a run: ``trace.json`` (written by ``starchol run --trace
DIR``, see :mod:`starchol.runtime.traces` and :mod:`.trace_records`), what the Gantt chart's
time axis cuts, and the critical path (:mod:`.critical_path`). Times in milliseconds from the
first task's start."""
import json
import os

from ..errors import UsageError


def load_trace(folder):
    """The ``trace.json`` of a trace folder, checked (UsageError naming the file)."""
    path = os.path.join(folder, "trace.json")
    try:
        with open(path) as f:
            trace = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path}: no trace summary (made by `starchol run --trace "
                         f"{folder}`)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read the trace summary ({exc})") from None
    for key in ("tasks", "workers", "comms", "kernels", "span_ms"):
        if key not in trace:
            raise UsageError(f"{path}: missing key {key!r} (not a starchol trace summary)")
    return trace


def clipped(trace):
    """What the Gantt chart's time axis (0 to ``span_ms``: the tasks' extent) cuts: a
    dict with the ``tasks`` and ``comms`` (MPI transfers) that reach outside it and how
    far, ``before_ms`` and ``after_ms`` (0.0 when nothing does). Transfers can: each
    starts on the sender's clock and ends on the receiver's."""
    span = max(trace["span_ms"], 1e-3)
    out = {"tasks": 0, "comms": 0, "before_ms": 0.0, "after_ms": 0.0}
    for kind, rows in (("tasks", [t[3:5] for t in trace["tasks"]]),
                       ("comms", [c[2:4] for c in trace["comms"]])):
        for start, end in rows:
            lo, hi = min(start, end), max(start, end)
            if lo < 0 or hi > span:
                out[kind] += 1
                out["before_ms"] = max(out["before_ms"], -lo)
                out["after_ms"] = max(out["after_ms"], hi - span)
    return out


def clipped_text(trace):
    """One sentence saying what the chart's time axis cuts (:func:`clipped`), or ""."""
    c = clipped(trace)
    if not c["tasks"] and not c["comms"]:
        return ""
    what = [f"{c[k]} of {len(trace[k])} {name}" for k, name in
            (("tasks", "tasks"), ("comms", "MPI transfers")) if c[k]]
    beyond = [f"{c['before_ms']:.3f} ms before its start" if c["before_ms"] > 0 else "",
              f"{c['after_ms']:.3f} ms after its end" if c["after_ms"] > 0 else ""]
    return (f"the Gantt chart's time axis (0 to {trace['span_ms']:.3f} ms, the tasks' "
            f"extent) cuts {' and '.join(what)}, which reach up to "
            f"{' and '.join(b for b in beyond if b)}; the tables count them in full")


def critical_path(trace, folder=None):
    """The critical path of a trace: ``trace.json``'s own, else recomputed from the
    tool's outputs in ``folder`` (a trace made before the path was recorded), else None."""
    path = trace.get("critical_path")
    if path is None and folder is not None:
        from .trace_records import critical_path_of_folder

        path = critical_path_of_folder(folder, int(trace.get("ranks") or 1))
    return path


def comm_pairs(trace):
    """The MPI transfers of a trace per pair of ranks: ``{(sender, receiver): (transfers,
    bytes)}``, sorted by sender then receiver."""
    pairs = {}
    for src, dst, _, _, size in trace["comms"]:
        count, nbytes = pairs.get((src, dst), (0, 0))
        pairs[(src, dst)] = (count + 1, nbytes + size)
    return dict(sorted(pairs.items()))
