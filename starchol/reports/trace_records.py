"""The outputs of ``starpu_fxt_tool`` read (``tasks.rec``, ``paje.trace``, ``data.rec``,
converted from a traced run's raw files by :func:`starchol.runtime.traces.finish`), and
the trace summary ``trace.json`` written from them: the application's tasks
(StarPU-internal ones filtered), every worker (idle ones too), the communications, each
rank's clock offset and the critical path (:mod:`.critical_path`).

Units: times in milliseconds from the earliest task start, bytes for communications;
workers are ``(rank, worker id)`` pairs.
"""
import json
import os
import re

from ..files import write_atomic
from ..integers import int_or_none
from ..runtime.traces import SUMMARY
from .critical_path import clock_offsets, critical_path

_INTERNAL = re.compile(r"^(_starpu|starpu_)")


def write_summary(folder, size, hosts):
    """Read the tool's outputs in ``folder`` (a trace of ``size`` ranks, ``hosts``:
    ``{rank: host name}``) and write ``folder/trace.json`` (atomically); returns the
    summary (:func:`summarize`, with ``clock_offsets_ms`` and ``critical_path``)."""
    records = read_records(os.path.join(folder, "tasks.rec"))
    paje = os.path.join(folder, "paje.trace")
    tasks, comms, offsets = aligned(records, read_comms(paje), size)
    summary = summarize(tasks, comms, size, hosts, read_workers(paje))
    summary["clock_offsets_ms"] = [round(o, 4) for o in offsets]
    summary["critical_path"] = folder_critical_path(folder, records, comms, tasks,
                                                    summary["span_ms"], offsets)
    write_atomic(os.path.join(folder, SUMMARY), json.dumps(summary) + "\n")
    return summary


def read_records(path):
    """The records of a GNU recutils file (``Key: value`` lines, blank-line separated)."""
    out, cur = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if cur:
                    out.append(cur)
                    cur = {}
                continue
            if line.startswith("#"):
                continue
            key, sep, value = line.partition(": ")
            if sep:
                cur[key] = value
    if cur:
        out.append(cur)
    return out


def read_tasks(path):
    """Application tasks of a ``tasks.rec``: dicts with ``kernel``, ``rank``, ``worker``,
    ``start``/``end`` (ms, StarPU's clock). StarPU-internal tasks are dropped."""
    return tasks_of(read_records(path))


def tasks_of(records):
    """The application tasks of ``tasks.rec``'s records, as :func:`read_tasks` gives them."""
    tasks = []
    for rec in records:
        name = rec.get("Name", "")
        if not name or _INTERNAL.match(name) or "StartTime" not in rec:
            continue
        tasks.append({"kernel": name, "rank": max(0, int(rec.get("MPIRank", "0"))),
                      "worker": int(rec.get("WorkerId", "-1")),
                      "start": float(rec["StartTime"]), "end": float(rec["EndTime"])})
    return tasks


def paje_events(path, kinds):
    """``(kind, fields)`` of every event of a Paje file whose kind (``PajeStartLink``,
    ``PajeCreateContainer``, ...) is in ``kinds``, in file order; the fields are named
    as the file's own ``%EventDef`` header declares them. Nothing for a missing file."""
    if not os.path.exists(path):
        return
    defs, fields = {}, {}
    with open(path, errors="replace") as f:
        current = None
        for line in f:
            if line.startswith("%"):
                parts = line[1:].split()
                if not parts:
                    continue
                if parts[0] == "EventDef":
                    current = parts[2]
                    defs[current] = parts[1]
                    fields[current] = []
                elif parts[0] == "EndEventDef":
                    current = None
                elif current is not None:
                    fields[current].append(parts[0])
                continue
            words = split_paje(line)
            if not words:
                continue
            kind = defs.get(words[0])
            if kind in kinds:
                yield kind, dict(zip(fields[words[0]], words[1:]))


def read_workers(path):
    """The StarPU workers of a ``paje.trace``, busy or not: dicts with ``rank``,
    ``worker`` (StarPU's worker id, as ``WorkerId`` in ``tasks.rec``) and ``name``
    (``CPU0``, ``CUDA0``, ...), in file order.

    The tool declares each worker as a container of type ``W`` whose alias is
    ``RANK_wID`` (``wID`` in a one-process trace) and whose name is ``RANK_NAME``.
    """
    out = []
    for _, rec in paje_events(path, ("PajeCreateContainer",)):
        if rec.get("Type") != "W":
            continue
        m = re.match(r"^(?:(\d+)_)?w(\d+)$", rec.get("Alias", ""))
        if not m:
            continue
        rank = int(m.group(1) or 0)
        name = rec.get("Name", "")
        out.append({"rank": rank, "worker": int(m.group(2)),
                    "name": name[len(f"{rank}_"):] if name.startswith(f"{rank}_") else name})
    return out


def read_comms(path):
    """MPI communications of a ``paje.trace`` written by ``starpu_fxt_tool``: dicts with
    ``src``, ``dst`` (ranks), ``start``, ``end`` (ms) and ``bytes``.

    The tool writes each transfer as a Paje link (``StartLink``/``EndLink`` events of
    the ``MPIL`` link type) whose key joins the two ends and whose value is the message
    size in bytes; the events' field layout is read from the file's own ``%EventDef``
    header. Containers are named ``RANK_mpict``.
    """
    starts, ends = {}, {}
    for kind, rec in paje_events(path, ("PajeStartLink", "PajeEndLink")):
        if rec.get("Type") != "MPIL":
            continue
        # StarPU 1.3 declares its EndLink's key field under the name SubmitOrder
        key = rec.get("Key", rec.get("SubmitOrder"))
        if kind == "PajeStartLink":
            starts[key] = rec
        else:
            ends[key] = rec
    comms = []
    for key, s in starts.items():
        e = ends.get(key)
        if e is None:
            continue
        comms.append({"src": rank_of(s.get("StartContainer", "")),
                      "dst": rank_of(e.get("EndContainer", "")),
                      "start": float(s["Time"]), "end": float(e["Time"]),
                      "bytes": int(float(s.get("Value") or 0)),  # the message size
                      "tag": int_or_none(s.get("MPITAG"))})
    return comms


def aligned(records, comms, size):
    """The tasks and transfers with each rank's clock offset (estimated from the
    transfers: :func:`.critical_path.clock_offsets`) taken off, and the
    offsets (ms)."""
    offsets = clock_offsets(comms, size)

    def off(rank):
        return offsets[rank] if 0 <= rank < len(offsets) else 0.0

    tasks = [dict(t, start=t["start"] - off(t["rank"]), end=t["end"] - off(t["rank"]))
             for t in tasks_of(records)]
    comms = [dict(c, start=c["start"] - off(c["src"]), end=c["end"] - off(c["dst"]))
             for c in comms]
    return tasks, comms, offsets


def folder_critical_path(folder, records, comms, tasks, span, offsets):
    """The critical path (:func:`.critical_path.critical_path`) of the
    trace in ``folder``, on ``trace.json``'s time origin (clocks aligned)."""
    path = os.path.join(folder, "data.rec")
    data = read_records(path) if os.path.exists(path) else []
    t0 = min((t["start"] for t in tasks), default=0.0)
    return critical_path(records, data, comms, t0=t0, span=span, offsets=offsets)


def critical_path_of_folder(folder, size):
    """The critical path of a trace folder whose ``trace.json`` predates it, recomputed
    from the tool's outputs there (clocks aligned as :func:`write_summary` does), or None when
    they are gone. Times are from the first task start of the aligned tasks."""
    path = os.path.join(folder, "tasks.rec")
    if not os.path.exists(path):
        return None
    records = read_records(path)
    tasks, comms, offsets = aligned(records, read_comms(os.path.join(folder, "paje.trace")),
                                     size)
    span = (max((t["end"] for t in tasks), default=0.0)
            - min((t["start"] for t in tasks), default=0.0))
    return folder_critical_path(folder, records, comms, tasks, span, offsets)


def split_paje(line):
    words, cur, quoted = [], [], False
    for ch in line.rstrip("\n"):
        if ch == '"':
            quoted = not quoted
        elif ch in " \t" and not quoted:
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    return words


def rank_of(container):
    m = re.match(r"^(\d+)_", container)
    return int(m.group(1)) if m else -1


def summarize(tasks, comms, size, hosts=None, workers=None):
    """The content of ``trace.json``: tasks and communications on a common time origin
    (ms from the first task start), the workers, idle time per worker, counts per kernel.

    ``workers`` (:func:`read_workers`) lists every worker of the run, so that a worker
    that ran no task is listed too (idle for the whole span); workers that only the
    tasks name are added."""
    hosts = hosts or {}
    t0 = min((t["start"] for t in tasks), default=0.0)
    t1 = max((t["end"] for t in tasks), default=0.0)
    names = {(w["rank"], w["worker"]): w.get("name", "") for w in workers or ()}
    # grouped by node: host, then rank, then worker
    workers = sorted(set(names) | {(t["rank"], t["worker"]) for t in tasks},
                     key=lambda w: (hosts.get(w[0], ""), w[0], w[1]))
    busy = {w: 0.0 for w in workers}
    for t in tasks:
        busy[(t["rank"], t["worker"])] += t["end"] - t["start"]
    span = t1 - t0
    counts = {}
    for t in tasks:
        counts[t["kernel"]] = counts.get(t["kernel"], 0) + 1
    return {
        "ranks": size,
        "hosts": {str(r): h for r, h in sorted(hosts.items())},
        "span_ms": span,
        "kernels": counts,
        "workers": [{"rank": r, "worker": w, "name": names.get((r, w), ""),
                     "host": hosts.get(r, ""),
                     "busy_ms": busy[(r, w)], "idle_ms": max(0.0, span - busy[(r, w)])}
                    for r, w in workers],
        "tasks": [[t["kernel"], t["rank"], t["worker"], round(t["start"] - t0, 4),
                   round(t["end"] - t0, 4)] for t in tasks],
        "task_fields": ["kernel", "rank", "worker", "start_ms", "end_ms"],
        "comms": [[c["src"], c["dst"], round(c["start"] - t0, 4), round(c["end"] - t0, 4),
                   c["bytes"]] for c in comms],
        "comm_fields": ["src", "dst", "start_ms", "end_ms", "bytes"],
        "comm_bytes": int(sum(c["bytes"] for c in comms)),
    }
