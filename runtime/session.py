"""A StarPU-MPI session on an mpi4py communicator.

    with Session(comm, workers=2, scheduler="prio", stats=True) as rt:
        handles = rt.register_tiles(owners, tiles, rows)
        ...

The session keeps the life cycle (checks, start, shutdown), the registration of tiles
and the waiting. Its helpers each have a module: the binding (:mod:`.backend`), worker
counts (:mod:`.workers`), ``STARPU_*`` settings (:mod:`.starpu_env`), the bus calibration
lock (:mod:`.bus`), process hooks (:mod:`.hooks`), the workers' sleep (:mod:`.idle`),
one computation's block (:mod:`.computation`), GPUs (:mod:`.gpu`), traces
(:mod:`.traces`) and facts (:mod:`.session_facts`).

StarPU-MPI can be started once per process. The session shuts it down (waiting for
tasks, unregistering the tiles still registered) on ``__exit__``, on :meth:`shutdown`,
and at interpreter exit before mpi4py finalises MPI; all of them are idempotent.
"""
import atexit
import contextlib
import logging
import os
import weakref

import numpy as np

from ..collective import agree, run_everywhere
from ..errors import UsageError
from ..faults import end_diverged, end_failed_exit
from . import gpu, hooks, kernel_blas
from .backend import (DEFAULT_SCHEDULER, available_schedulers, binding, check_scheduler,
                      check_thread_level, mpi)
from .bus import bus_calibration_lock
from .computation import Computation
from .errors import CallbackError, SessionError, agree_callback_error
from .idle import WorkerSleep, linger_seconds
from .session_facts import SessionFacts
from .starpu_env import check_environment, set_start_variables
from .traces import check_supported, prepare
from .waiting import TaskWaiter
from .workers import affinity_cores, check_workers, default_workers, rank_cores

log = logging.getLogger("starchol.runtime")


class Session(SessionFacts):
    """StarPU + StarPU-MPI running on one MPI communicator. Collective.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD``. The session works on duplicates of it, one given to
        StarPU-MPI and one for its own collectives.
    workers : int, optional
        CPU workers on this rank (default: :func:`~.workers.default_workers`).
    scheduler : str
        A StarPU scheduling policy (default ``prio``).
    stats : bool
        Count the bytes StarPU-MPI sends (``STARPU_COMM_STATS=1``).
    cache : bool
        StarPU-MPI's receive cache (one transfer per tile version and node).
    trace : str, optional
        A folder for FxT traces (a StarPU built with FxT); after the session,
        :func:`starchol.runtime.traces.finish` converts them; :meth:`stop_trace` ends
        the recording earlier.
    gpus : int, optional
        GPUs of this rank (default: every GPU it sees; 0 without CUDA support), each run
        by :func:`~.workers.cuda_workers_per_gpu` CUDA workers (:mod:`.gpu`).
    hooks : bool
        Install the process hooks of :mod:`.hooks` (default True): the excepthook that
        ends the job when an uncaught exception ends one rank (the collective shutdown
        would wait forever), and the SIGINT handler of computations. False leaves the
        process's handlers to the application. MPI is initialised either way when the
        program has not.

    Notes
    -----
    The arguments are checked by :meth:`start`, collectively, before anything starts: a
    bad value on one rank, or ``scheduler``, ``stats``, ``cache`` or ``trace`` not the
    same on every rank, raises the same :class:`UsageError` on every rank (``workers``
    and ``gpus`` are per rank). Once started, ``kernel_blas`` names the BLAS/LAPACK of
    the tile kernels (:mod:`.kernel_blas`), and ``idle`` is the workers' sleep policy
    (:class:`.idle.WorkerSleep`).
    """

    _live = None  # the started session of this process

    def __init__(self, comm=None, workers=None, scheduler=DEFAULT_SCHEDULER, stats=False,
                 cache=True, trace=None, gpus=None, hooks=True):
        MPI = mpi()
        self._backend = binding()
        self.user_comm = MPI.COMM_WORLD if comm is None else comm
        if not isinstance(self.user_comm, MPI.Comm):   # the same verdict on every rank
            raise UsageError(f"comm must be an mpi4py communicator, got "
                             f"{type(self.user_comm).__name__}", param="comm")
        # checked by start, collectively (a check failing here, on one rank, would leave
        # the other ranks waiting in start)
        self.scheduler, self.workers, self.stats, self.cache = scheduler, workers, stats, cache
        self.trace, self.gpus, self.hooks = trace, gpus, bool(hooks)
        self.gpu_plan = self.kernel_blas = self.idle = self._linger = None
        self.comm = None          # duplicate for the session's own collectives
        self._starpu_comm = None  # duplicate handed to StarPU-MPI
        self._handles = weakref.WeakSet()
        self._waiter = None       # the helper thread of waits (runtime.waiting)
        self._next_matrix = 0
        self._blas = None         # the BLAS thread limit while the session runs
        self.started = self.closed = self._trace_stopped = False

    # -- life cycle ---------------------------------------------------------------
    def start(self):
        """Start StarPU-MPI. Collective. Returns self.

        Raises
        ------
        SessionError
            Another session of this process is running (use it: :meth:`current`), or
            StarPU-MPI already ran and stopped in this process (it cannot start twice).
        """
        if self.started:
            return self
        MPI = mpi()
        hooks.ensure_mpi(MPI)
        self._agree_arguments()
        run_everywhere(self.user_comm, self._check_state)
        # StarPU asserts (C backtrace, every rank) on bad STARPU_* values: refused first
        run_everywhere(self.user_comm, check_environment, schedulers=available_schedulers())
        # the BLAS/LAPACK of the kernels, before StarPU starts and before limit_threads
        # (which then limits that library to one thread too)
        self.kernel_blas = run_everywhere(self.user_comm, kernel_blas.activate)
        local = self.user_comm.Split_type(MPI.COMM_TYPE_SHARED)
        local_ranks = local.Get_size()
        mine = affinity_cores()
        sharing = sum(1 for a in local.allgather(mine) if a == mine)  # same cores as us
        local.Free()
        # CUDA workers, codelets' CUDA variants and models, heteroprio (before the CPU
        # worker count: each CUDA worker keeps a core); the same verdict on every rank
        self.gpu_plan, extra = run_everywhere(self.user_comm, gpu.plan, self._backend,
                                              self.scheduler, self.gpus,
                                              rank_cores(sharing=sharing))
        if self.workers is None:
            self.workers = default_workers(sharing, self.gpu_plan.ncuda)
        set_start_variables(self.stats, self.cache, self.trace is not None, local_ranks > 1,
                            self.gpu_plan.per_gpu if self.gpu_plan.ncuda else None)
        if self.trace is not None:
            self.trace = run_everywhere(self.user_comm, prepare, self.trace,
                                        self.user_comm.Get_rank(), self.user_comm.Get_size())
        self._blas = kernel_blas.limit_threads()
        self.comm = self.user_comm.Dup()
        self._starpu_comm = self.user_comm.Dup()
        handle = self._starpu_comm.handle
        try:
            with bus_calibration_lock():
                self._backend.init(handle, self.workers, self.scheduler, **extra)
        except BaseException:
            self._free_comms()
            self._restore_blas()
            raise
        self.started = True
        Session._live = self
        atexit.register(self._shutdown_at_exit)
        if self.hooks:
            hooks.end_job_on_uncaught_errors(Session.current)
        # per-worker cuBLAS/cuSOLVER handles: runs on the CUDA workers, so before the pause
        gpu.after_start(self._backend, self.gpu_plan)
        # idle StarPU workers poll for tasks; keep them asleep between computations --
        # except with CUDA workers: their driver threads also move GPU data back to host
        # memory, which an unregistration outside a computation waits for
        self.idle = WorkerSleep(self._backend, enabled=not self.gpu_plan.ncuda,
                                linger=self._linger)
        self.idle.sleep_now()
        self._waiter = TaskWaiter(self._backend.wait_tasks)
        self._waiter.start()
        self._backend.cache_set(self.cache)
        self.rank, self.size = self._backend.rank_size()
        got = self._backend.worker_count()
        if got != self.workers:
            log.warning("asked for %d CPU workers, StarPU started %d", self.workers, got)
            self.workers = got
        return self

    def check_arguments(self):
        """Check this rank's arguments; normalise them (``workers`` an int, ``stats`` and
        ``cache`` bools). Local: :meth:`start` runs it on every rank and agrees on the
        verdict. Raises :class:`UsageError` naming the parameter.

        Returns the arguments that must be the same on every rank, by name (``trace`` as
        the normalised folder name the ranks compare)."""
        scheduler = check_scheduler(self.scheduler)
        workers = None if self.workers is None else check_workers(self.workers)
        trace = None
        if self.trace is not None:
            trace = check_supported(self.trace)
        gpu.check_gpus(self.gpus)
        self._linger = linger_seconds()
        self.scheduler, self.workers = scheduler, workers
        self.stats, self.cache = bool(self.stats), bool(self.cache)
        return {"scheduler": self.scheduler, "stats": self.stats, "cache": self.cache,
                "trace": trace}

    def _agree_arguments(self):
        # every rank checks its own arguments, then all agree on the verdict and on the
        # arguments that must be the same everywhere (one collective, before anything
        # starts). The values are compared only when every rank's checks passed, so a
        # failing rank sends none (its arguments may be anything); a passing rank's are
        # normalised by check_arguments.
        error, same = None, {}
        try:
            same = self.check_arguments()
        except Exception as exc:  # noqa: BLE001 - every type takes the same path
            error = exc
        agree(self.user_comm, error, same=same)

    def _check_state(self):
        check_thread_level(mpi())
        live = Session._live
        if live is not None and live is not self:
            raise SessionError(
                "a StarPU session is already running in this process "
                f"({live.workers} worker(s), scheduler {live.scheduler}); StarPU-MPI runs "
                "once per process: use that session (Session.current()) or shut it down")
        if self.closed or self._backend.was_started():
            raise SessionError(
                "StarPU-MPI already ran and was shut down in this process; it cannot be "
                "started again in the same process (keep one Session open for all the "
                "work, or start a new process)")

    def shutdown(self):
        """Wait for the tasks, unregister remaining tiles, stop StarPU-MPI. Idempotent.

        Not a barrier: safe on error paths where other ranks may be elsewhere.
        """
        if not self.started or self.closed:
            return
        self.closed = True
        try:
            if self.idle is not None:
                self.idle.close()
            self._backend.wait_tasks()
            if self._waiter is not None:    # its waits end with the tasks
                self._waiter.close(timeout=10.0)
            for h in list(self._handles):
                h.unregister()
            if self.gpu_plan is not None:
                gpu.before_shutdown(self._backend, self.gpu_plan)
            quiet = self.stats and os.environ.get("STARCHOL_SHOW_COMM_STATS") != "1"
            self._backend.shutdown(quiet)
        finally:
            self.started = False
            if Session._live is self:
                Session._live = None
            self._free_comms()
            self._restore_blas()
            try:
                atexit.unregister(self._shutdown_at_exit)
            except Exception:  # pragma: no cover
                pass

    def _shutdown_at_exit(self):
        """The interpreter's exit with the session running: a rank exiting with a
        non-zero status (``sys.exit("...")``) while several run ends the job on every
        rank (:func:`starchol.faults.end_failed_exit`: the others may wait for it in a
        collective, and the collective shutdown would hang); otherwise the shutdown."""
        if self.started and self.hooks:
            end_failed_exit(self.user_comm)
        self.shutdown()

    def _restore_blas(self):
        if self._blas is not None:
            self._blas.restore_original_limits()
            self._blas = None

    def _free_comms(self):
        MPI = mpi()
        if MPI.Is_finalized():
            return
        for c in (self.comm, self._starpu_comm):
            if c is not None:
                try:
                    c.Free()
                except Exception:  # pragma: no cover
                    pass
        self.comm = self._starpu_comm = None

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and self.started:
            # an error other ranks may not share must not reach the collective
            # starpu_mpi_shutdown (it would wait forever): abort the job instead
            end_diverged(exc, self.user_comm)
        self.shutdown()
        return False

    # -- data and tasks --------------------------------------------------------
    def register_tiles(self, owners, tiles, rows, cols=None, stored=None, lazy=False,
                       elemsize=8):
        """Register a tiled matrix with StarPU-MPI. Collective (same order on every rank).

        Parameters
        ----------
        owners : int array (mt, nt)
            Owner rank of tile (i, j).
        tiles : dict
            ``{(i, j): array}`` of this rank's tiles (Fortran-ordered, ``rows[i] x
            cols[j]``); ignored with ``lazy``.
        rows, cols : int arrays
            Rows of each tile row and columns of each tile column (``cols`` defaults to
            ``rows``).
        stored : bool array (mt, nt), optional
            The tiles that get a handle (default: the lower triangle of a square matrix).
        lazy : bool
            No tile has a buffer until a task writes it.
        elemsize : int
            Bytes per entry: 8 (float64) or 4 (float32).

        Each call gets fresh tags (unique per matrix and tile). Returns a
        ``TileHandles``; unregister it with ``.unregister()``.
        """
        self._require()
        owners = np.ascontiguousarray(owners, dtype=np.int64)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        cols = rows if cols is None else np.ascontiguousarray(cols, dtype=np.int64)
        mt, nt = owners.shape
        if stored is None:
            stored = np.tril(np.ones((mt, nt), dtype=np.uint8))
        if mt * nt >= 1 << 40:
            raise UsageError("too many tiles")
        tag_base = (self._next_matrix + 1) << 40
        self._next_matrix += 1
        h = self._backend.TileHandles(owners, tiles, rows, cols, tag_base, stored, lazy,
                                      elemsize)
        self._handles.add(h)
        return h

    def wait(self, progress=None, total=None, interval=0.25):
        """Wait for this rank's tasks, then for all ranks' communications. Collective.

        ``progress(done, total)``, if given, is called every ``interval`` seconds while
        this rank's ``total`` tasks run (done = total - tasks still pending), and once at
        the end. The wait itself returns as soon as the tasks are done: it blocks in
        StarPU on a helper thread, so a progress display adds no delay.

        Raises
        ------
        CallbackError
            On every rank, after the wait, when ``progress`` raised on some rank: that
            rank stopped calling it and finished the wait like the others (see
            :meth:`wait_local`); the session stays usable.
        """
        agree_callback_error(self.comm, self.wait_local(progress, total, interval))

    def wait_local(self, progress=None, total=None, interval=0.25):
        """:meth:`wait` without the final agreement: returns this rank's
        :class:`CallbackError` (``progress`` raised here: it is not called again and the
        wait goes on to its end) or None. Collective (the wait for the communications);
        the caller must agree on the result (:func:`agree_callback_error`, or within a
        reduction of its own, as :func:`starchol.linalg.cholesky.cholesky` does)."""
        self._require()
        failed = None
        this_wait = self.idle.begin_wait()
        # this rank's tasks are done: the workers may sleep (runtime.idle: at once, or
        # after the linger time). Only what needs no worker follows (the
        # communications; host-memory tiles: CUDA workers never sleep), and a
        # computation's end wakes them where tasks remain (errors)
        request = self._waiter.submit(lambda: self.idle.tasks_done(this_wait))

        def report(count):
            nonlocal failed
            try:
                progress(count, total)
            except Exception as exc:  # noqa: BLE001 - the user's code: any type
                failed = CallbackError.wrap("progress", progress, exc, self.rank)

        # the wait blocks in StarPU on the session's helper thread (runtime.waiting):
        # this thread stays free for the progress display and for Ctrl-C (a signal
        # reaches Python in the main thread only between bytecodes, never while it
        # waits in C). Workers already awake (the linger time, or an outer running()
        # block) may finish the tasks and the helper let them sleep before this line:
        # then they stay asleep
        reporting = progress is not None and bool(total)
        self.idle.wake(unless=request.tasks_done)
        while reporting and failed is None and not request.done.wait(interval):
            report(max(0, total - self._backend.tasks_pending()))
        request.result()
        if reporting and failed is None:
            report(total)
        self._backend.wait_mpi()
        return failed

    @contextlib.contextmanager
    def running(self, deferred=False):
        """Workers awake for the computations inside the block (nested blocks allowed).

        Between computations StarPU's workers sleep (``starpu_pause``), so an idle
        session uses no CPU; tasks may be submitted either way. When a computation's
        tasks are done (:meth:`wait`), inside the block too, the workers stay awake for
        a short while (``STARCHOL_AWAKE_S``, :mod:`starchol.runtime.idle`), then sleep;
        the next :meth:`wait` wakes them. With ``deferred``, sleeping workers stay
        asleep until :meth:`wake` (which :meth:`wait` calls): the application thread
        registers and submits without sharing the cores with workers that have nothing
        to run yet. :meth:`computation` also registers and unregisters the tiles.
        """
        self._require()
        first = self.idle.depth == 0
        handler = previous = None
        if first:
            self._kernels().set_cancelled(False)
            if self.hooks:
                handler = hooks.computation_interrupt(
                    self.user_comm, self._kernels().set_cancelled, self.idle.wake,
                    protected=_SET_UP_AND_CLEAN_UP)
                previous = hooks.catch_interrupt(handler)
        # a Ctrl-C in this generator's code or in a computation's set-up and clean-up is
        # deferred to the end of the block (hooks.ComputationInterrupt): raised inside
        # the clean-up, it would leave the tasks cancelled or the handler installed
        self.idle.enter(deferred)
        try:
            yield self
        finally:
            self.idle.leave()
            if first:
                hooks.release_interrupt(previous)
                self._kernels().set_cancelled(False)
                if previous is not None:
                    handler.raise_pending()

    def computation(self, deferred=False, measured=False):
        """A block for one computation: :class:`~.computation.Computation`."""
        return Computation(self, deferred, measured)

    @staticmethod
    def _kernels():
        from . import _kernels

        return _kernels

    def wake(self):
        """Wake the workers of a ``running(deferred=True)`` block (no-op otherwise)."""
        self.idle.wake()

    @classmethod
    def current(cls):
        """The running session of this process, or None."""
        return cls._live

    def _require(self):
        if not self.started:
            raise SessionError("the StarPU session is not started (use `with Session(...)` "
                               "or Session(...).start())" if not self.closed else
                               "the StarPU session was shut down")


#: where a Ctrl-C waits for the end of a computation block (Session.running)
_SET_UP_AND_CLEAN_UP = (Session.running.__wrapped__.__code__,
                        Session.register_tiles.__code__,
                        Computation.__enter__.__code__, Computation.register.__code__,
                        Computation.__exit__.__code__)
