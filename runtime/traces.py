"""Execution traces: FxT recording on every rank, conversion to task records.

A StarPU built with FxT (``starchol info`` says so) writes one raw trace per process
when ``STARPU_FXT_TRACE=1``; ``starpu_fxt_tool`` merges the ranks' files into
``tasks.rec`` (one record per task: name, worker, start and end in ms, MPI rank),
``paje.trace`` (states and the MPI communications) and more. This module

1. sets the recording up before StarPU starts (:func:`prepare`): the folder cleared of
   an earlier run's trace files (:func:`clear_stale`), the environment, and the bus
   calibration done beforehand (StarPU-MPI's FxT start has an ``MPI_Barrier``, so
   ranks cannot start one at a time then);
2. ``Session.stop_trace`` may end the recording before the session ends (``starchol
   run --trace --check`` traces the factorization, not the residual check);
3. after StarPU has stopped (:func:`finish`, collective): brings every rank's raw file
   to rank 0 (ranks on nodes that do not share the folder send theirs through MPI),
   runs ``starpu_fxt_tool`` there and writes ``trace.json``: the application's tasks
   (StarPU-internal ones filtered), every worker (idle ones too), and the
   communications.

Without a trace folder nothing of this runs and ``STARPU_FXT_TRACE=0`` (a StarPU 1.3
built with FxT otherwise records by default).

Units: times in milliseconds from the earliest task start, bytes for communications;
workers are ``(rank, worker id)`` pairs.
"""
import fnmatch
import glob
import json
import os
import re
import socket
import subprocess

from ..errors import StarcholError, UsageError

#: file name StarPU gives each process's raw trace (prefix + prof_file_USER_RANK)
RAW_PATTERN = "prof_file_*"
#: the summary written next to the tool's outputs
SUMMARY = "trace.json"

#: the files ``starpu_fxt_tool`` (StarPU 1.3) writes in its working folder
TOOL_OUTPUTS = ("paje.trace", "dag.dot", "tasks.rec", "data.rec", "trace.html", "trace.rec",
                "distrib.data", "activity.data")
#: the run document ``starchol run --trace DIR`` writes beside the trace
RUN_DOCUMENT = "run.json"
#: what a traced run writes in its folder (the raw traces, the tool's outputs, the
#: summary, the run document): glob patterns on file names
TRACE_FILES = (RAW_PATTERN, *TOOL_OUTPUTS, SUMMARY, RUN_DOCUMENT)

_INTERNAL = re.compile(r"^(_starpu|starpu_)")


def fxt_tool(prefix=None):
    """Path of ``starpu_fxt_tool`` of the loaded StarPU (None when it has none)."""
    from . import starpu_build

    prefix = prefix or starpu_build.describe()["prefix"]
    if not prefix:
        return None
    path = os.path.join(prefix, "bin", "starpu_fxt_tool")
    return path if os.access(path, os.X_OK) else None


def check_supported(folder):
    """``folder`` (the session's ``trace``) as the ranks compare it, normalised; raise
    :class:`UsageError` when it is no folder name or the loaded StarPU records no FxT
    traces."""
    from . import starpu_build

    try:
        folder = os.path.normpath(os.fspath(folder))
    except TypeError:
        raise UsageError(f"trace must be a folder name, got {folder!r}",
                         param="trace") from None
    d = starpu_build.describe()
    if "STARPU_USE_FXT" not in d["config"]:
        raise UsageError(
            f"trace needs a StarPU built with FxT; the StarPU in {d['prefix']} "
            f"({d['kind']}) has none. scripts/setup.sh builds one (the default; not with "
            f"STARCHOL_STARPU=system)", param="trace")
    if fxt_tool(d["prefix"]) is None:
        raise UsageError(f"trace needs starpu_fxt_tool, which is not in "
                         f"{d['prefix']}/bin", param="trace")
    return folder


def is_trace_file(name):
    """True when a traced run writes a file of this name (no folder) in its folder."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in TRACE_FILES)


def _raw_rank(path):
    """The rank of a raw trace ``prof_file_USER_RANK``, or None."""
    tail = path.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


def clear_stale(folder, rank, size=None):
    """Remove the files an earlier traced run left in ``folder``: this rank's raw trace;
    on rank 0 also the raw traces of ranks >= ``size`` (an earlier run on more ranks),
    the tool's outputs (:data:`TOOL_OUTPUTS`), the summary and the run document, so that
    a run that fails before its conversion leaves no earlier run's trace looking like
    its own. Other files are left alone. Returns the names removed."""
    removed = []
    for path in glob.glob(os.path.join(folder, RAW_PATTERN)):
        r = _raw_rank(path)
        if r == rank or (rank == 0 and size is not None and r is not None and r >= size):
            os.unlink(path)
            removed.append(os.path.basename(path))
    if rank == 0:
        for name in (*TOOL_OUTPUTS, SUMMARY, RUN_DOCUMENT):
            try:
                os.unlink(os.path.join(folder, name))
                removed.append(name)
            except FileNotFoundError:
                pass
    return removed


def prepare(folder, rank, size=None):
    """Before StarPU starts, on every rank: create ``folder``, remove what an earlier
    traced run left there (:func:`clear_stale`), set ``STARPU_FXT_TRACE`` /
    ``STARPU_FXT_PREFIX``, and calibrate the bus if needed (under the start lock). Not
    collective (the session runs it on every rank before any starts)."""
    folder = os.path.abspath(check_supported(folder))
    os.makedirs(folder, exist_ok=True)
    clear_stale(folder, rank, size)
    env = os.environ
    env["STARPU_FXT_TRACE"] = "1"
    env["STARPU_FXT_PREFIX"] = folder + os.sep
    env.setdefault("USER", "starchol")  # part of the raw file names
    _calibrate_bus()
    return folder


def _calibrate_bus():
    """Run ``starpu_calibrate_bus`` under the session's start lock when this host's bus
    calibration is missing, so that the traced start needs no lock."""
    from .bus import bus_calibrated, bus_calibration_lock

    with bus_calibration_lock() as lock:
        if not lock.held:
            return
        tool = fxt_tool()
        calibrate = os.path.join(os.path.dirname(tool), "starpu_calibrate_bus") if tool else ""
        if not os.access(calibrate, os.X_OK):
            raise StarcholError("the StarPU bus is not calibrated on this host and "
                                "starpu_calibrate_bus is missing: start StarPU once without a "
                                "trace first (it calibrates the bus)")
        env = dict(os.environ, STARPU_FXT_TRACE="0", STARPU_SILENT="1")
        subprocess.run([calibrate], env=env, capture_output=True, timeout=600, check=False)
        if not bus_calibrated():
            raise StarcholError("starpu_calibrate_bus did not write the bus calibration "
                                f"under {os.environ.get('STARPU_HOME', '~')}/.starpu")


def finish(comm, folder):
    """After StarPU has stopped: convert the ranks' raw traces. Collective.

    Returns the summary dict on rank 0 (also written to ``folder/trace.json``), None on
    the other ranks. Raises :class:`StarcholError` on every rank if a raw file is missing
    or the tool fails.
    """
    folder = os.path.abspath(folder)
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = sorted(glob.glob(os.path.join(folder, f"prof_file_*_{rank}")))
    host = socket.gethostname()
    facts = comm.gather((rank, host, mine), root=0)
    missing = None
    if rank == 0:
        missing = [r for r, _, files in facts if not files or
                   not all(os.path.exists(f) for f in files)]
    missing = comm.bcast(missing, root=0)
    # ranks whose file rank 0 cannot see (another node, no shared folder) send it, on a
    # duplicate of comm (the caller's own messages on comm, of any tag, are never matched)
    sending = [r for r in missing if r != 0]   # rank 0's own file missing: _convert says so
    files = comm.Dup() if sending else None    # `missing` is the same on every rank
    try:
        for r in sending:
            if rank == r and mine:
                with open(mine[0], "rb") as f:
                    files.send((os.path.basename(mine[0]), f.read()), dest=0, tag=7301)
            elif rank == r:
                files.send(None, dest=0, tag=7301)
            if rank == 0:
                got = files.recv(source=r, tag=7301)
                if got is not None:
                    with open(os.path.join(folder, got[0]), "wb") as f:
                        f.write(got[1])
    finally:
        if files is not None:
            files.Free()
    error = summary = None
    if rank == 0:
        try:
            summary = _convert(folder, size, {r: h for r, h, _ in facts})
        except StarcholError as exc:
            error = str(exc)
    error = comm.bcast(error, root=0)
    if error:
        raise StarcholError(error)
    return summary


def _convert(folder, size, hosts):
    raw = [sorted(glob.glob(os.path.join(folder, f"prof_file_*_{r}"))) for r in range(size)]
    lost = [r for r, files in enumerate(raw) if not files]
    if lost:
        raise StarcholError(f"no FxT trace from rank(s) {lost} in {folder}")
    cmd = [fxt_tool()]
    for files in raw:
        cmd += ["-i", files[-1]]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0 or not os.path.exists(os.path.join(folder, "tasks.rec")):
        raise StarcholError(f"starpu_fxt_tool failed ({proc.returncode}): "
                            f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    records = read_records(os.path.join(folder, "tasks.rec"))
    paje = os.path.join(folder, "paje.trace")
    tasks, comms, offsets = _aligned(records, read_comms(paje), size)
    summary = summarize(tasks, comms, size, hosts, read_workers(paje))
    summary["clock_offsets_ms"] = [round(o, 4) for o in offsets]
    summary["critical_path"] = _critical_path(folder, records, comms, tasks,
                                              summary["span_ms"], offsets)
    from ..files import write_atomic  # one atomic-write home

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


def _paje_events(path, kinds):
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
            words = _split_paje(line)
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
    for _, rec in _paje_events(path, ("PajeCreateContainer",)):
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
    for kind, rec in _paje_events(path, ("PajeStartLink", "PajeEndLink")):
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
        comms.append({"src": _rank_of(s.get("StartContainer", "")),
                      "dst": _rank_of(e.get("EndContainer", "")),
                      "start": float(s["Time"]), "end": float(e["Time"]),
                      "bytes": int(float(s.get("Value") or 0)),  # the message size
                      "tag": _int_or_none(s.get("MPITAG"))})
    return comms


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _aligned(records, comms, size):
    """The tasks and transfers with each rank's clock offset (estimated from the
    transfers: :func:`starchol.runtime.critical_path.clock_offsets`) taken off, and the
    offsets (ms)."""
    from .critical_path import clock_offsets

    offsets = clock_offsets(comms, size)

    def off(rank):
        return offsets[rank] if 0 <= rank < len(offsets) else 0.0

    tasks = [dict(t, start=t["start"] - off(t["rank"]), end=t["end"] - off(t["rank"]))
             for t in tasks_of(records)]
    comms = [dict(c, start=c["start"] - off(c["src"]), end=c["end"] - off(c["dst"]))
             for c in comms]
    return tasks, comms, offsets


def _critical_path(folder, records, comms, tasks, span, offsets):
    """The critical path (:func:`starchol.runtime.critical_path.critical_path`) of the
    trace in ``folder``, on ``trace.json``'s time origin (clocks aligned)."""
    from .critical_path import critical_path

    path = os.path.join(folder, "data.rec")
    data = read_records(path) if os.path.exists(path) else []
    t0 = min((t["start"] for t in tasks), default=0.0)
    return critical_path(records, data, comms, t0=t0, span=span, offsets=offsets)


def critical_path_of_folder(folder, size):
    """The critical path of a trace folder whose ``trace.json`` predates it, recomputed
    from the tool's outputs there (clocks aligned as :func:`finish` does), or None when
    they are gone. Times are from the first task start of the aligned tasks."""
    path = os.path.join(folder, "tasks.rec")
    if not os.path.exists(path):
        return None
    records = read_records(path)
    tasks, comms, offsets = _aligned(records, read_comms(os.path.join(folder, "paje.trace")),
                                     size)
    span = (max((t["end"] for t in tasks), default=0.0)
            - min((t["start"] for t in tasks), default=0.0))
    return _critical_path(folder, records, comms, tasks, span, offsets)


def _split_paje(line):
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


def _rank_of(container):
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
