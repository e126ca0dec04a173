"""Execution traces: FxT recording on every rank, and the conversion of the raw traces.

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
   to rank 0 (ranks on nodes that do not share the folder send theirs through MPI) and
   runs ``starpu_fxt_tool`` there.

Reading the tool's outputs and writing ``trace.json`` (the application's tasks, every
worker, the communications, the critical path) is report work:
:mod:`starchol.reports.trace_records`, called by the command line after :func:`finish`.

Without a trace folder nothing of this runs and ``STARPU_FXT_TRACE=0`` (a StarPU 1.3
built with FxT otherwise records by default).
"""
import fnmatch
import glob
import os
import socket
import subprocess

from ..errors import StarcholError, UsageError
from .bus import calibrate_bus

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

#: disk a traced run needs, measured (2dbc, N = 2048, NB = 128, 816 tasks, one rank:
#: 4.25 MB in all, the raw FxT file 1.72 MB of it): bytes per task of the graph, and a
#: fixed part (the summary, the page, a small run's files), rounded up
TRACE_BYTES_PER_TASK = 6000
TRACE_FIXED_BYTES = 256 * 1024


def trace_disk_bytes(tasks):
    """Bytes of disk a traced run of ``tasks`` tasks (all ranks) needs in its folder: the
    raw traces and what ``starpu_fxt_tool`` and the summary make of them (an estimate
    from :data:`TRACE_BYTES_PER_TASK`, rounded up; StarPU's FxT exits without a word
    when it cannot write, so the room is checked before the run)."""
    return TRACE_FIXED_BYTES + TRACE_BYTES_PER_TASK * int(tasks)


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


#: trace folders this process created (:func:`prepare`), removed again by :func:`discard`
_CREATED = set()


def discard(folder, rank, size=None):
    """After a traced run failed (a full disk while converting, say): remove what the
    trace wrote into ``folder`` (:func:`clear_stale`: this rank's raw trace; on rank 0
    the tool's outputs, the summary and the run document) and the folder itself when
    :func:`prepare` created it and it is now empty, so a failed run leaves no partial
    trace behind. Not collective; never raises."""
    folder = os.path.abspath(folder)
    try:
        clear_stale(folder, rank, size)
        if folder in _CREATED and not os.listdir(folder):
            os.rmdir(folder)
            _CREATED.discard(folder)
    except OSError:
        pass


def prepare(folder, rank, size=None):
    """Before StarPU starts, on every rank: create ``folder``, remove what an earlier
    traced run left there (:func:`clear_stale`), set ``STARPU_FXT_TRACE`` /
    ``STARPU_FXT_PREFIX``, and calibrate the bus if needed (under the start lock). Not
    collective (the session runs it on every rank before any starts)."""
    folder = os.path.abspath(check_supported(folder))
    if not os.path.isdir(folder):
        os.makedirs(folder, exist_ok=True)
        _CREATED.add(folder)
    clear_stale(folder, rank, size)
    env = os.environ
    env["STARPU_FXT_TRACE"] = "1"
    env["STARPU_FXT_PREFIX"] = folder + os.sep
    env.setdefault("USER", "starchol")  # part of the raw file names
    calibrate_bus(fxt_tool())
    return folder


def finish(comm, folder):
    """After StarPU has stopped: bring the ranks' raw traces to rank 0 and convert them
    with ``starpu_fxt_tool`` there. Collective.

    Returns ``{rank: host name}`` on rank 0 (what the summary,
    :func:`starchol.reports.trace_records.write_summary`, groups the workers by), None
    on the other ranks. Raises :class:`StarcholError` on every rank if a raw file is
    missing or the tool fails. Reading the tool's outputs is report work
    (:mod:`starchol.reports.trace_records`).
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
    error = hosts = None
    if rank == 0:
        try:
            _convert(folder, size)
            hosts = {r: h for r, h, _ in facts}
        except StarcholError as exc:
            error = str(exc)
    error = comm.bcast(error, root=0)
    if error:
        raise StarcholError(error)
    return hosts


def _convert(folder, size):
    """Rank 0: run ``starpu_fxt_tool`` on every rank's raw trace in ``folder``; its
    outputs (:data:`TOOL_OUTPUTS`) are written there. StarcholError when a rank's raw
    trace is missing or the tool fails."""
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
