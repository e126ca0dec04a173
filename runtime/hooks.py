"""Process-wide hooks: MPI's initialisation and finalisation, the ``sys.excepthook`` that
ends a job an uncaught exception would hang, and the SIGINT handler of a computation.

Who installs them: the command line (every ``starchol`` command that starts a session),
and :class:`~starchol.runtime.session.Session` when the application asks, with
``Session(hooks=True)`` -- the default, so that a script whose rank raises alone ends
its job instead of hanging in the collective shutdown. An application that keeps its
own excepthook and signal handlers passes ``hooks=False``; then only MPI's
initialisation remains (StarPU-MPI needs MPI; :func:`ensure_mpi`).

- :func:`ensure_mpi`: ``MPI_Init_thread(MPI_THREAD_MULTIPLE)`` when the program has not
  initialised MPI (``mpi4py.rc.initialize = False``), and ``MPI_Finalize`` at exit.
- :func:`end_job_on_uncaught_errors`: chains a ``sys.excepthook`` (once per process).
- :func:`catch_interrupt` / :func:`release_interrupt`: a computation's SIGINT handler
  (:class:`ComputationInterrupt`), over Python's own only.
"""
import atexit
import signal
import sys
import threading

from ..faults import end_diverged, note_exit


def ensure_mpi(MPI):
    """Initialise MPI (``MPI_THREAD_MULTIPLE``) when the program has not, and then
    finalise it at interpreter exit, after the session's shutdown (registered first, so
    it runs last): mpi4py finalises only what it initialised, and a process that ends
    without ``MPI_Finalize`` makes mpirun fail the whole job."""
    if MPI.Is_initialized():
        return
    MPI.Init_thread(MPI.THREAD_MULTIPLE)

    def finalize():
        if not MPI.Is_finalized():
            MPI.Finalize()

    atexit.register(finalize)


def end_job_on_uncaught_errors(current):
    """Chain a ``sys.excepthook`` (once per process) that ends the job when an exception
    nobody caught ends the program on one rank while a session runs on several.

    ``current()`` returns the running session of the process, or None. The interpreter
    would otherwise go on to the session's shutdown at exit, which is collective
    (``starpu_mpi_shutdown``) and waits forever for ranks that are elsewhere (in a
    barrier, a computation); even ``python -m mpi4py``, whose ``MPI_Abort`` comes after
    the exit handlers, hung. The hook prints the traceback as before (the previous
    hook), then :func:`starchol.faults.end_diverged` ends the job with one line, unless
    the exception is one starchol raised on every rank alike (then every rank exits and
    shuts down together)."""
    previous = sys.excepthook
    if getattr(previous, "starchol_session_hook", False):
        return

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        live = current()
        if live is not None and live.started:
            end_diverged(exc, live.user_comm)

    hook.starchol_session_hook = True
    sys.excepthook = hook
    real_exit = sys.exit

    def exit(status=None):
        """``sys.exit``, noting the status first: a non-zero one ends the job on every
        rank at the interpreter's exit (:func:`starchol.faults.end_failed_exit`, called
        by the session's exit handler) instead of hanging its collective shutdown."""
        note_exit(status)
        real_exit(status)

    exit.starchol_exit = True
    if not getattr(real_exit, "starchol_exit", False):
        sys.exit = exit


class ComputationInterrupt:
    """The SIGINT handler of a computation on ``comm`` (Ctrl-C).

    With several ranks the others wait for this rank's part of the same task graph,
    which can neither finish nor be unwound on one rank: the job ends at once
    (``MPI_Abort``, one line; :func:`starchol.faults.end_diverged`). With one rank the
    computation is abandoned: ``cancel(True)`` makes the kernels of the tasks still
    queued return without computing (``_kernels.set_cancelled``), so the tasks drain in
    moments; ``wake(blocking=False)`` wakes the workers of a deferred computation
    interrupted before they woke (without waiting for the lock: the handler runs in the
    main thread, perhaps inside a wake); and ``KeyboardInterrupt`` is raised. The session
    stays usable (an in-place ``overwrite_a`` leaves A's tiles half-factored).

    A signal that arrives while one of the ``protected`` code objects runs (a
    computation's set-up and clean-up: registration, unregistration, the workers'
    sleep, this handler's own release) does not raise there, which would skip the rest
    of the clean-up and leave the session with a stale state (tasks cancelled, a handler
    left installed): it is kept in :attr:`pending` and :meth:`raise_pending` raises it
    once the clean-up is through.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The computation's communicator.
    cancel, wake : callable
        ``cancel(True)`` cancels the queued tasks; ``wake(blocking=False)`` wakes the
        workers.
    protected : iterable of code objects
        Where a signal is deferred (anywhere in their calls too).
    """

    def __init__(self, comm, cancel, wake, protected=()):
        self.comm = comm
        self.cancel = cancel
        self.wake = wake
        self.protected = frozenset(protected)
        self.pending = False

    def __call__(self, signum, frame):
        end_diverged(KeyboardInterrupt(), self.comm)   # returns with one rank only
        self.cancel(True)
        self.wake(blocking=False)
        if self._in_protected(frame):
            self.pending = True
            return
        raise KeyboardInterrupt

    def _in_protected(self, frame):
        while frame is not None:
            if frame.f_code in self.protected:
                return True
            frame = frame.f_back
        return False

    def raise_pending(self):
        """Raise the ``KeyboardInterrupt`` deferred in a protected section, if any."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def computation_interrupt(comm, cancel, wake, protected=()):
    """The SIGINT handler of a computation (:class:`ComputationInterrupt`)."""
    return ComputationInterrupt(comm, cancel, wake, protected)


def catch_interrupt(handler):
    """Install ``handler`` for SIGINT during a computation: in the main thread only, and
    only over Python's own handler (a program's or the command line's stays) or over an
    earlier computation's (left behind: replaced). Returns the handler to give back to
    :func:`release_interrupt`, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGINT)
    if current is not signal.default_int_handler \
            and not isinstance(current, ComputationInterrupt):
        return None
    signal.signal(signal.SIGINT, handler)
    return signal.default_int_handler


def release_interrupt(previous):
    """Restore the SIGINT handler :func:`catch_interrupt` replaced (None: nothing to do)."""
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
