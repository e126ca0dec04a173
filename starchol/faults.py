"""Faults and signals: a signal or a lone error on any rank ends the whole job promptly and
leaves no temporary file.

Three pieces, used by the command line (and, for :func:`end_diverged`, by
:class:`~starchol.runtime.Session`):

- :func:`track` / :func:`untrack`: temporary files to remove if the process is stopped.
  :func:`starchol.files.atomic_path` registers each one before its first byte. Without
  the watcher (the library in a program of one's own), SIGTERM and SIGHUP at their
  default action remove them too while any exists, then end the process as they would.
- :func:`install_signal_watcher`: SIGINT, SIGTERM and SIGHUP are handled by a watcher
  thread woken through :func:`signal.set_wakeup_fd`, so they act at once even while the
  main thread is inside StarPU or MPI (where Python handlers would wait). The watcher
  removes the tracked files, prints one line, and ends the process: SIGINT and SIGHUP
  abort the MPI job (``MPI_Abort``: the other ranks are ended by mpirun), SIGTERM (which
  mpirun and Slurm send to end a job) exits with 143.
- :func:`end_diverged`: an exception that the other ranks may not share (anything but a
  :class:`~starchol.errors.StarcholError`, which starchol raises identically on every
  rank) must not reach a collective shutdown, where it would wait forever for the others:
  the job is aborted instead, with one line on the failing rank.
"""
import logging
import os
import signal
import sys
import threading
import traceback

from .errors import StarcholError

log = logging.getLogger("starchol")

#: signals the watcher handles
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_tracked = set()
_lock = threading.RLock()  # new_temporary tracks while holding it
_state = {"label": "starchol", "installed": False}


def track(path):
    """Remove ``path`` if the process is stopped by a signal or an abort."""
    with _lock:
        _tracked.add(path)
        _guard_signals()


def untrack(path):
    with _lock:
        _tracked.discard(path)
        if not _tracked and not _children:
            _unguard_signals()


#: signals whose default action ends the process: guarded while temporaries exist
DEFAULT_ENDING = (signal.SIGTERM, signal.SIGHUP)
_guarded = set()


def _guard_signals():
    """Without the watcher (the library in a user's program), SIGTERM and SIGHUP left at
    their default action ended the process and left its temporary files behind. While
    temporaries are tracked, such a signal first removes them (:func:`_end_by_default`).
    Only from the main thread (where Python handlers are set), and only for a signal at
    its default action: a handler of the program's own, or the watcher, is kept."""
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        return
    for signum in DEFAULT_ENDING:
        if signum not in _guarded and signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _end_by_default)
            _guarded.add(signum)


def _unguard_signals():
    """Give the guarded signals back their default action (no temporary left)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in list(_guarded):
        if signal.getsignal(signum) is _end_by_default:
            signal.signal(signum, signal.SIG_DFL)
        _guarded.discard(signum)


def _end_by_default(signum, frame):
    """Remove the tracked temporaries, then end the process by the same signal at its
    default action (the status a parent sees is the signal's, as without starchol)."""
    remove_tracked()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)          # not reached: the signal ends the process


class creating:
    """Context for creating a tracked temporary: holds the lock, and never lets a new
    one start once the process is being stopped (the caller then waits for the end)."""

    def __enter__(self):
        _lock.acquire()
        if _state.get("stopping"):
            _lock.release()
            wait_for_end()  # the process is ending: never create anything
        return self

    def __exit__(self, *exc):
        _lock.release()
        return False


def stopping():
    """True once a signal or an abort has begun ending this process."""
    return bool(_state.get("stopping"))


def wait_for_end():
    """Block the calling thread for good: the process is being ended by the watcher
    (which prints its one line and exits). Used by the main thread when the removal of
    its temporary files made its own work fail, so that it prints no second, misleading
    error (``FileNotFoundError: .../.a.h5.tmp-...``) and does not exit first with 1."""
    threading.Event().wait()


#: child processes to end with this one: pid -> True when it leads a process group
_children = {}


def track_child(pid, group=False):
    """End the child process ``pid`` (its whole process group with ``group``: mpirun and
    its ranks) when this process is stopped by a signal or an abort
    (:func:`remove_tracked`), before the tracked files are removed."""
    with _lock:
        _children[pid] = bool(group)
        _guard_signals()


def untrack_child(pid):
    with _lock:
        _children.pop(pid, None)
        if not _tracked and not _children:
            _unguard_signals()


def _descendants(pid):
    """The processes below ``pid`` (Linux ``/proc``; empty elsewhere), deepest last."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def end_children(wait_s=3.0):
    """SIGKILL every tracked child, its process group (``group``) and every process
    below it (ranks that a launcher put in groups of their own), then wait up to
    ``wait_s`` for them to be gone, so that none writes into a temporary folder being
    removed. Returns how many processes were signalled."""
    import time

    with _lock:
        children = list(_children.items())
    victims = []
    for pid, group in children:
        victims += [pid, *_descendants(pid)]
        if group:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    alive = list(victims)
    while alive and time.monotonic() < deadline:
        still = []
        for pid in alive:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:    # our own child: reaped
                    continue
            except ChildProcessError:
                pass
            except OSError:
                continue
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] == "Z":   # a zombie: ended
                        continue
            except (OSError, IndexError):
                continue                                   # gone
            still.append(pid)
        alive = still
        if alive:
            time.sleep(0.02)
    return len(victims)


#: prctl's option that sends a signal to this process when its parent ends (Linux)
PR_SET_PDEATHSIG = 1


def die_with_parent(signum=signal.SIGKILL):
    """In a child process: be sent ``signum`` when the parent ends, whatever ends it
    (``kill -9`` included: nothing of the parent can act then), so no child outlives
    the command. Linux only (``prctl(PR_SET_PDEATHSIG)``); a no-op elsewhere. Also
    gives the child the default action for the signals the watcher handles (a child
    of the command line inherited its handlers), so SIGTERM ends it. Returns True when
    set. Safe in ``preexec_fn`` (no allocation of Python objects that matters)."""
    for sig in SIGNALS:
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (ValueError, OSError):
            pass
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    return ok


def remove_tracked():
    """End the tracked children (:func:`track_child`), then remove every tracked
    temporary file or private folder; no new one is created afterwards (see
    :class:`creating`). A folder is removed until it is really gone (code still running
    may re-create a file inside it meanwhile). Returns the paths that could not be
    removed (none, normally), so a message never claims a removal that failed."""
    import shutil

    end_children()
    with _lock:
        _state["stopping"] = True
        paths = list(_tracked)
    for path in paths:
        for _ in range(100):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            if not os.path.lexists(path):
                break
    return [path for path in paths if os.path.lexists(path)]


def _world():
    """COMM_WORLD when mpi4py has initialised MPI (never initialises it), else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    try:
        if mpi.Is_initialized() and not mpi.Is_finalized():
            return mpi.COMM_WORLD
    except Exception:  # noqa: BLE001
        return None
    return None


def _several(comm):
    """True when ``comm`` (or None) has more than one rank; False if it cannot tell."""
    try:
        return comm is not None and comm.Get_size() > 1
    except Exception:  # noqa: BLE001
        return False


def _say(comm, message):
    prefix = ""
    if comm is not None:
        try:
            if comm.Get_size() > 1:
                prefix = f"rank {comm.Get_rank()}: "
        except Exception:  # noqa: BLE001
            pass
    try:
        sys.stderr.write(f"{_state['label']}: {prefix}{message}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


def abort_job(message, code=1, comm=None, mpi_abort=True):
    """Remove the tracked files, print ``message`` (one line, this rank) and end the job:
    ``MPI_Abort`` when several ranks run (and ``mpi_abort``), else ``os._exit(code)``.
    Does not return."""
    left = remove_tracked()
    comm = comm if comm is not None else _world()
    if left:
        message = message.replace("; temporary files removed", "")
        message += f" (could not remove: {', '.join(left)})"
    _say(comm, message)
    try:
        if mpi_abort and comm is not None and comm.Get_size() > 1:
            comm.Abort(code)
    finally:
        os._exit(code)


def exit_status(code):
    """The process status of ``sys.exit(code)``: 0 for None, the number for an int, 1
    for anything else (a message, which Python prints)."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    return 1


def note_exit(code):
    """Remember the status of a ``sys.exit(code)`` this process is making (its wrapper,
    :func:`starchol.runtime.hooks.end_job_on_uncaught_errors`), for
    :func:`end_failed_exit` at the interpreter's exit."""
    _state["exit_code"] = code


def end_failed_exit(comm=None):
    """At the interpreter's exit, before a collective shutdown: when this process is
    exiting with a non-zero status (``sys.exit("...")``, :func:`note_exit`) while
    several ranks run, the other ranks may be waiting for it in a collective, and the
    collective shutdown would wait for them forever: end the job on every rank
    (``MPI_Abort`` with that status, one line). Returns otherwise (one rank, status 0)."""
    status = exit_status(_state.get("exit_code"))
    if not status:
        return
    comm = comm if comm is not None else _world()
    if not _several(comm):
        return
    code = _state.get("exit_code")
    said = "" if isinstance(code, int) else f" ({str(code)[:200]})"
    abort_job(f"exited with status {status}{said} (sys.exit) while other ranks may wait "
              f"for it in a collective; ending the job on every rank (MPI_Abort)",
              status, comm)


def end_diverged(exc, comm=None):
    """Abort the job if ``exc`` may exist on this rank only; return if it is agreed.

    Agreed errors are :class:`StarcholError` (starchol raises them identically on every
    rank) and any exception raised through :func:`starchol.collective.agree`
    (marked ``starchol_agreed``). Anything else (``KeyboardInterrupt``, ``OSError``, ``KeyError``...) leaves the
    other ranks waiting in a collective, so with several ranks the job is aborted with one
    line naming the error (and the traceback with ``-v``). With one rank, returns.
    """
    if exc is None or isinstance(exc, StarcholError) or getattr(exc, "starchol_agreed", False):
        return
    if isinstance(exc, SystemExit) and not exit_status(exc.code):
        return                       # sys.exit(0): a normal end, shut down together
    comm = comm if comm is not None else _world()
    if not _several(comm):
        return
    if isinstance(exc, SystemExit):  # sys.exit("...") on this rank: the rank-exit rule
        note_exit(exc.code)
        end_failed_exit(comm)
    from .collective import describe

    if log.isEnabledFor(logging.INFO):
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    if isinstance(exc, KeyboardInterrupt):
        abort_job("interrupted; ending the job on every rank", 130, comm)
    abort_job(f"error: {describe(exc)}; ending the job on every rank (MPI_Abort)", 1, comm)


def finish(code):
    """The command ended with status ``code`` (its results published, its lines
    printed): the end of the signal window. Returns ``code``.

    The window, for the command line (the watcher installed): a signal that reached
    the process before this call ends it as the watcher says (128 + N, one line,
    temporary files removed); the results published before it stay complete, the
    others are not published. It is never lost: if one arrived (its handler ran, which
    Python does at the latest when this function is entered) this call waits for the
    watcher to end the process. A signal after this call is ignored: ``code`` stands.
    """
    if not _state["installed"]:
        return code
    with _lock:
        pending = _state.get("received") or _state.get("stopping")
        if not pending:
            _state["finished"] = True
    if pending:
        wait_for_end()
    return code


def _on_signal(signum):
    with _lock:
        if _state.get("finished"):    # after the command's end: its status stands
            return
        _state["stopping"] = True
    name = signal.Signals(signum).name
    comm = _world()
    several = _several(comm)
    if signum == signal.SIGTERM:
        why = ("the job is being ended: a rank failed or was interrupted, or mpirun/Slurm "
               "ended it" if several else
               "sent by another process: kill, timeout, or a job manager ending the job")
        abort_job(f"stopped by SIGTERM ({why}); temporary files removed", 128 + signum, comm,
                  mpi_abort=False)
    abort_job(f"interrupted by {name}" + ("; ending the job on every rank" if several else ""),
              128 + signum, comm)


def _watch(fd):
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in SIGNALS:
                _on_signal(signum)


def _noop(signum, frame):
    """The main thread's handler: the watcher thread does the work; noting the signal
    lets :func:`finish` wait for it."""
    _state["received"] = signum


def install_signal_watcher(label="starchol"):
    """Handle SIGINT, SIGTERM and SIGHUP in a watcher thread (see the module doc).

    Call once, from the main thread, before the work starts. Returns True when installed.
    """
    _state["label"] = label
    if _state["installed"]:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    for signum in SIGNALS:
        signal.signal(signum, _noop)
    signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(rfd,), name="starchol-signals", daemon=True).start()
    _state["installed"] = True
    return True
