"""A StarPU-MPI session on an mpi4py communicator.

    with Session(comm, workers=2, scheduler="prio", stats=True) as rt:
        handles = rt.register_tiles(owners, tiles, rows)
        ...

StarPU reads a few settings only when it starts, so the session sets them in the
environment first: ``STARPU_COMM_STATS`` (statistics), ``STARPU_MPI_CACHE`` (cache),
and, unless already set, ``STARPU_SILENT=1``, ``STARPU_MPI_NOBIND=1`` and, when
several ranks share a node, ``STARPU_WORKERS_NOBIND=1`` (otherwise every rank would
bind its workers to the same first cores). Worker count and scheduler are passed in
``starpu_conf`` and take precedence over ``STARPU_NCPU`` / ``STARPU_SCHED``.

StarPU-MPI can be started once per process. The session shuts it down (waiting for
tasks, unregistering the tiles still registered) on ``__exit__``, on :meth:`shutdown`,
and at interpreter exit before mpi4py finalises MPI; all of them are idempotent.
"""
import atexit
import contextlib
import logging
import os
import threading
import weakref

import numpy as np

from ..errors import UsageError
from .backend import (DEFAULT_SCHEDULER, available_schedulers, binding, check_scheduler, mpi,
                      starpu_version)
from .bus import bus_calibration_lock
from .errors import CallbackError, RuntimeUnavailableError, SessionError
from .workers import affinity_cores, check_workers, default_workers, rank_cores

log = logging.getLogger("starchol.runtime")

def agree_callback_error(comm, error):
    """Raise on every rank the :class:`CallbackError` of the lowest rank whose callback
    raised (``error``: this rank's, or None); return if none did. Collective. On the
    rank where the callback raised, the error raised keeps the original as its cause."""
    from ..collective import agree

    try:
        agree(comm, error)
    except CallbackError as exc:
        if error is not None and exc is not error and exc.rank == error.rank:
            exc.__cause__ = error.__cause__
        raise


def _initialize_mpi(MPI):
    """Initialise MPI (``MPI_THREAD_MULTIPLE``) when the program has not (``mpi4py.rc.initialize
    = False``), and then finalise it at interpreter exit, after the session's shutdown
    (registered first, so it runs last): mpi4py finalises only what it initialised, and
    a process that ends without ``MPI_Finalize`` makes mpirun fail the whole job."""
    if MPI.Is_initialized():
        return
    MPI.Init_thread(MPI.THREAD_MULTIPLE)

    def finalize():
        if not MPI.Is_finalized():
            MPI.Finalize()

    atexit.register(finalize)


def _end_job_on_uncaught_errors():
    """Chain a ``sys.excepthook`` (once per process) that ends the job when an exception
    nobody caught ends the program on one rank while a session runs on several.

    The interpreter would otherwise go on to the session's shutdown at exit, which is
    collective (``starpu_mpi_shutdown``) and waits forever for ranks that are elsewhere
    (in a barrier, a computation); even ``python -m mpi4py``, whose ``MPI_Abort`` comes
    after the exit handlers, hung. The hook prints the traceback as before (the previous
    hook), then :func:`starchol.faults.end_diverged` ends the job with one line, unless
    the exception is one starchol raised on every rank alike (then every rank exits and
    shuts down together)."""
    import sys

    previous = sys.excepthook
    if getattr(previous, "starchol_session_hook", False):
        return

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        live = Session._live
        if live is not None and live.started:
            from ..faults import end_diverged

            end_diverged(exc, live.user_comm)

    hook.starchol_session_hook = True
    sys.excepthook = hook


def _path_text(path, param):
    """A folder name as the ranks compare it (normalised); a UsageError naming ``param``
    when ``path`` is no file name."""
    try:
        return os.path.normpath(os.fspath(path))
    except TypeError:
        raise UsageError(f"{param} must be a folder name, got {path!r}",
                         param=param) from None


class Session:
    """StarPU + StarPU-MPI running on one MPI communicator. Collective.

    Args:
        comm: an mpi4py communicator (default ``MPI.COMM_WORLD``). The session works on
            duplicates of it, one given to StarPU-MPI and one for its own collectives.
        workers: CPU workers on this rank (default: :func:`default_workers`).
        scheduler: a StarPU scheduling policy name (default ``prio``).
        stats: count the bytes StarPU-MPI sends (``STARPU_COMM_STATS=1``).
        cache: StarPU-MPI's receive cache (one transfer per tile version and node).
        trace: a folder for FxT execution traces (needs a StarPU built with FxT); after
            the session, :func:`starchol.runtime.traces.finish` converts them.
            :meth:`stop_trace` ends the recording earlier.
        gpus: GPUs of this rank (default: every GPU it sees; 0 without CUDA support),
            each run by :func:`~starchol.runtime.workers.cuda_workers_per_gpu` CUDA
            workers (4 unless ``STARPU_NWORKER_PER_CUDA`` is set or the rank has few
            cores). GPU codelets, models and heteroprio: :mod:`starchol.runtime.gpu`.

    The arguments are checked by :meth:`start`, collectively, before anything starts: a
    bad value on one rank (an unknown scheduler, ``workers=0``, ``gpus`` this rank
    cannot have, ``trace`` without FxT), or ``scheduler``, ``stats``, ``cache`` or
    ``trace`` not the same on every rank, raises the same :class:`UsageError` on every
    rank (``workers`` and ``gpus`` are per rank: they may differ).

    Once started, ``kernel_blas`` names the BLAS/LAPACK the tile kernels call
    (:mod:`starchol.runtime.kernel_blas`, ``STARCHOL_KERNEL_BLAS``).
    """

    _live = None  # the started session of this process

    def __init__(self, comm=None, workers=None, scheduler=DEFAULT_SCHEDULER, stats=False,
                 cache=True, trace=None, gpus=None):
        MPI = mpi()
        self._backend = binding()
        self.user_comm = MPI.COMM_WORLD if comm is None else comm
        if not isinstance(self.user_comm, MPI.Comm):   # the same verdict on every rank
            raise UsageError(f"comm must be an mpi4py communicator, got "
                             f"{type(self.user_comm).__name__}", param="comm")
        # checked by start, collectively (a check failing here, on one rank, would leave
        # the other ranks waiting in start)
        self.scheduler = scheduler
        self.workers = workers
        self.stats = stats
        self.cache = cache
        self.trace = trace
        self.gpus = gpus
        self.gpu_plan = None
        self.kernel_blas = None   # the kernels' BLAS (runtime.kernel_blas), once started
        self.comm = None          # duplicate for the session's own collectives
        self._starpu_comm = None  # duplicate handed to StarPU-MPI
        self._handles = weakref.WeakSet()
        self._next_matrix = 0
        self._active = 0
        self._pause_idle = True
        # the workers' pause state (StarPU counts pauses: one resume per pause) changes
        # under this lock, from this thread or from a wait's helper thread
        self._pause_lock = threading.Lock()
        self._waits = 0             # wait_local calls: a helper pauses only for its own
        self._trace_stopped = False
        self.started = False
        self.closed = False

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
        _initialize_mpi(MPI)
        self._agree_arguments()
        from ..collective import run_everywhere

        run_everywhere(self.user_comm, self._check_state)
        self._check_environment()
        # the BLAS/LAPACK of the kernels, before StarPU starts and before _limit_blas
        # (which then limits that library to one thread too)
        from . import kernel_blas

        self.kernel_blas = run_everywhere(self.user_comm, kernel_blas.activate)
        local = self.user_comm.Split_type(MPI.COMM_TYPE_SHARED)
        local_ranks = local.Get_size()
        mine = affinity_cores()
        sharing = sum(1 for a in local.allgather(mine) if a == mine)  # same cores as us
        local.Free()
        from . import gpu
        # CUDA workers, codelets' CUDA variants and models, heteroprio (before the CPU
        # worker count: each CUDA worker keeps a core); the same verdict on every rank
        self.gpu_plan, extra = run_everywhere(self.user_comm, gpu.plan, self._backend,
                                              self.scheduler, self.gpus,
                                              rank_cores(sharing=sharing))
        env = os.environ
        if self.gpu_plan.ncuda:
            # StarPU reads its CUDA workers per GPU only from the environment; the user's
            # value is kept (the plan read it)
            env["STARPU_NWORKER_PER_CUDA"] = str(self.gpu_plan.per_gpu)
        if self.workers is None:
            self.workers = default_workers(sharing, self.gpu_plan.ncuda)
        env["STARPU_COMM_STATS"] = "1" if self.stats else "0"
        env["STARPU_MPI_STATS"] = env["STARPU_COMM_STATS"]  # its StarPU 1.4 name
        env["STARPU_MPI_CACHE"] = "1" if self.cache else "0"
        env.setdefault("STARPU_SILENT", "1")
        # a StarPU 1.3 built with FxT records traces unless told not to: only on request
        if self.trace is not None:
            from .traces import prepare

            self.trace = run_everywhere(self.user_comm, prepare, self.trace,
                                        self.user_comm.Get_rank(), self.user_comm.Get_size())
        else:
            env["STARPU_FXT_TRACE"] = "0"
        env.setdefault("STARPU_MPI_NOBIND", "1")
        if local_ranks > 1:
            env.setdefault("STARPU_WORKERS_NOBIND", "1")
        self._limit_blas()
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
        atexit.register(self.shutdown)
        _end_job_on_uncaught_errors()
        # per-worker cuBLAS/cuSOLVER handles: runs on the CUDA workers, so before the pause
        gpu.after_start(self._backend, self.gpu_plan)
        # idle StarPU workers poll for tasks; keep them asleep between computations --
        # except with CUDA workers: their driver threads also move GPU data back to host
        # memory, which an unregistration outside a computation waits for
        self._pause_idle = not self.gpu_plan.ncuda
        if self._pause_idle:
            self._backend.idle_pause()
        self._active = 0
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
        from .gpu import check_gpus

        scheduler = check_scheduler(self.scheduler)
        workers = None if self.workers is None else check_workers(self.workers)
        trace = None
        if self.trace is not None:
            from .traces import check_supported

            trace = _path_text(self.trace, "trace")
            check_supported()
        check_gpus(self.gpus)
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
        from ..collective import agree

        error, same = None, {}
        try:
            same = self.check_arguments()
        except Exception as exc:  # noqa: BLE001 - every type takes the same path
            error = exc
        agree(self.user_comm, error, same=same)

    def _check_state(self):
        MPI = mpi()
        level = MPI.Query_thread()
        if level < MPI.THREAD_SERIALIZED:
            names = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
                     MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED"}
            raise RuntimeUnavailableError(
                f"StarPU-MPI needs MPI_THREAD_SERIALIZED or more (its communication thread "
                f"calls MPI); MPI was initialised with {names.get(level, level)} "
                f"(do not set mpi4py.rc.thread_level below 'serialized'; mpi4py's default, "
                f"'multiple', is right)")
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
            with self._pause_lock:
                self._backend.idle_resume()
            self._backend.wait_tasks()
            for h in list(self._handles):
                h.unregister()
            if self.gpu_plan is not None:
                from . import gpu
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
                atexit.unregister(self.shutdown)
            except Exception:  # pragma: no cover
                pass

    def _check_environment(self):
        # StarPU asserts (C backtrace, every rank) on bad STARPU_* values: refuse them
        # first, on every rank alike (see starpu_env)
        from ..collective import run_everywhere
        from .starpu_env import check_environment

        run_everywhere(self.user_comm, check_environment, schedulers=available_schedulers())

    def _limit_blas(self):
        # each StarPU worker calls BLAS; one BLAS thread per worker
        self._blas = None
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover
            log.warning("threadpoolctl is missing: BLAS inside tasks may be multi-threaded")
            return
        self._blas = threadpool_limits(limits=1, user_api="blas")

    def _restore_blas(self):
        if getattr(self, "_blas", None) is not None:
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
            from ..faults import end_diverged

            end_diverged(exc, self.user_comm)
        self.shutdown()
        return False

    # -- information -----------------------------------------------------------
    @property
    def version(self):
        return starpu_version()

    @property
    def starpu_build(self):
        """Which StarPU build this process loaded, in words
        (:func:`starchol.runtime.starpu_build.label`)."""
        from .starpu_build import label

        return label()

    def describe(self):
        """Runtime facts for reports."""
        out = {"scheduler": self.scheduler, "workers_per_rank": self.workers,
               "starpu_version": self.version, "starpu_build": self.starpu_build,
               "cache": self.cache, "stats": self.stats,
               "kernel_blas": self.kernel_blas.describe() if self.kernel_blas else None}
        p = self.gpu_plan
        if p is not None:
            out["gpus_per_rank"] = p.ncuda
            out["cuda_workers_per_gpu"] = p.per_gpu
            out["cuda_codelets"] = list(p.cuda_codelets)
            out["perf_models"] = p.models
            if p.heteroprio:
                out["heteroprio"] = p.heteroprio
        return out

    # -- GPUs and per-kernel placement ------------------------------------------
    @property
    def cuda_workers(self):
        """CUDA workers of this rank: its GPUs times the CUDA workers per GPU
        (``STARPU_NWORKER_PER_CUDA``, or starchol's default: docs/gpu.md); 0 before the
        start and without GPUs."""
        p = self.gpu_plan
        return p.cuda_workers if p is not None and self.started else 0

    def pin_tiles(self, tiles):
        """Page-lock host tiles (numpy arrays) for asynchronous copies to the GPUs; a
        no-op without CUDA workers. They stay pinned until shutdown. Returns how many."""
        self._require()
        from . import gpu
        return gpu.pin_tiles(self.gpu_plan, tiles)

    def unpin_tiles(self, tiles):
        """Undo :meth:`pin_tiles` for these tiles (before they are freed, e.g. between
        problem sizes). Returns how many were unpinned."""
        self._require()
        from . import gpu
        return gpu.unpin_tiles(self.gpu_plan, tiles)

    def kernel_counts(self, reset=True):
        """``{kernel: {"cpu": n, "cuda": m}}`` tasks this rank ran (since start or the last
        reset), per kernel and kind of worker."""
        self._require()
        from . import gpu
        out = gpu.kernel_counts(self._backend)
        if reset:
            gpu.reset_counts(self._backend)
        return out

    def device_bytes(self):
        """Bytes StarPU copied between this rank's host and device memories since the last
        call (not network bytes): ``host_to_device``, ``device_to_host``, ``device_to_device``."""
        self._require()
        from . import gpu
        return gpu.bus_bytes()

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
        self._waits += 1
        this_wait = self._waits
        done = threading.Event()
        tasks_done = threading.Event()
        status = []

        def wait_tasks():
            try:
                self._backend.wait_tasks()
                tasks_done.set()
                # this rank's tasks are done, yet one idle worker polls on (StarPU never
                # lets the last awake worker sleep; starchol's build after a 200 µs
                # poll, scripts/starpu-patches) and takes a core from the threads
                # that finish the call: StarPU-MPI's progress thread then ran the final
                # barrier a scheduler time slice late (4 ms here, in one call in three at
                # N = 1024, benchmarks/small_sizes.py). Paused at once, from this thread.
                # Only what needs no worker follows (the communications; host-memory
                # tiles: ``_pause_idle`` excludes CUDA workers), and
                # :meth:`wake_if_pending` resumes them where tasks remain (errors).
                self._pause(wait=this_wait)
            except BaseException as exc:  # raised below, in the caller's thread
                status.append(exc)
            finally:
                done.set()

        def report(count):
            nonlocal failed
            try:
                progress(count, total)
            except Exception as exc:  # noqa: BLE001 - the user's code: any type
                failed = CallbackError.wrap("progress", progress, exc, self.rank)

        # the wait blocks in StarPU on a helper thread: this thread stays free for the
        # progress display and for Ctrl-C (a signal reaches Python in the main thread
        # only between bytecodes, never while it waits in C). Started before the
        # workers of a deferred computation wake: Thread.start() waits for the new
        # thread to run, which took a core from busy workers (0.8 ms at N = 1024).
        reporting = progress is not None and bool(total)
        waiter = threading.Thread(target=wait_tasks, name="starchol-wait", daemon=True)
        waiter.start()
        # (workers already awake, e.g. in an outer running() block, may finish the
        # tasks and the helper pause them before this line: then they stay paused)
        self._wake(unless=tasks_done)
        while reporting and failed is None and not done.wait(interval):
            report(max(0, total - self._backend.tasks_pending()))
        done.wait()
        waiter.join()
        if status:
            raise status[0]
        if reporting and failed is None:
            report(total)
        self._backend.wait_mpi()
        return failed

    @contextlib.contextmanager
    def running(self, deferred=False):
        """Workers awake for the computations inside the block (nested blocks allowed).

        Between computations StarPU's workers are paused (``starpu_pause``), so an idle
        session uses no CPU; tasks may be submitted either way. :meth:`wait` pauses
        them as soon as its tasks are done, inside the block too, and the next
        :meth:`wait` wakes them. With ``deferred``, the
        workers stay paused until :meth:`wake` (which :meth:`wait` calls): the
        application thread registers and submits without sharing the cores with
        workers that have nothing to run yet. Call :meth:`wake` before anything that
        waits for tasks (an unregistration on an error path).
        """
        self._require()
        self._active += 1
        previous = self._catch_interrupt() if self._active == 1 else None
        if not deferred:
            self.wake()
        try:
            yield self
        finally:
            self._active -= 1
            if self._active == 0:
                self._release_interrupt(previous)
            if self._active == 0 and self.started:
                self._pause()

    def _catch_interrupt(self):
        """Install :meth:`_on_interrupt` as the SIGINT handler for a computation (main
        thread, and only over Python's own handler: a program's or the command line's
        stays). Returns the handler to restore, or None."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return None
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return None
        signal.signal(signal.SIGINT, self._on_interrupt)
        return signal.default_int_handler

    def _release_interrupt(self, previous):
        from . import _kernels

        _kernels.set_cancelled(False)
        if previous is not None:
            import signal

            signal.signal(signal.SIGINT, previous)

    def _on_interrupt(self, signum, frame):
        """Ctrl-C (SIGINT) during a computation. With several ranks the others wait for
        this rank's part of the same task graph, which can neither finish nor be
        unwound on one rank: the job ends at once (``MPI_Abort``, one line; see
        :func:`starchol.faults.end_diverged`). With one rank the computation is
        abandoned: the kernels of the tasks still queued return without computing
        (``_kernels.set_cancelled``), so the tasks drain in moments, and
        ``KeyboardInterrupt`` is raised; the session stays usable (an in-place
        ``overwrite_a`` leaves A's tiles half-factored)."""
        from ..faults import end_diverged
        from . import _kernels

        end_diverged(KeyboardInterrupt(), self.user_comm)   # returns with one rank only
        _kernels.set_cancelled(True)
        # a deferred computation interrupted before its workers woke. Without waiting
        # for the lock: this handler runs in the main thread, perhaps inside _wake, and
        # the computations' finally blocks call wake_if_pending
        self._wake(blocking=False)
        raise KeyboardInterrupt

    def wake(self):
        """Resume the workers of a ``running(deferred=True)`` block (no-op otherwise)."""
        self._wake()

    def _wake(self, unless=None, blocking=True):
        """:meth:`wake`, unless the event ``unless`` is set (checked under the lock);
        ``blocking=False``: not at all when another call holds the lock."""
        if not self._pause_lock.acquire(blocking):
            return
        try:
            if unless is not None and unless.is_set():
                return
            if self._active and self._pause_idle and not self.closed:
                self._backend.idle_resume()
        finally:
            self._pause_lock.release()

    def _pause(self, wait=None):
        """Pause awake workers (a session without CUDA workers; not once shut down).

        ``wait``: called from the helper thread of :meth:`wait_local` number ``wait``
        once this rank's tasks are done; then only if no later wait has begun and no
        task was submitted since (a helper whose wait an interrupt abandoned returns
        late, perhaps during the next computation)."""
        with self._pause_lock:
            if self.closed or not (self._pause_idle and self._awake):
                return
            if wait is not None and (wait != self._waits or self._backend.tasks_pending()):
                return
            self._backend.idle_pause()

    @property
    def _awake(self):
        """Whether the workers are awake as far as the session's pause goes: the
        binding's flag (``_binding.idle_pause``), flipped in one compiled call with
        StarPU's pause count, so Ctrl-C cannot come between the two. Always True with
        CUDA workers (never paused by the session)."""
        return self.started and not self._backend.idle_paused()

    def wake_if_pending(self):
        """:meth:`wake`, when this rank still has tasks submitted and not completed: before
        an unregistration, which waits for them (after an error or an interrupt). After a
        complete :meth:`wait_local` the workers stay paused."""
        if self._backend.tasks_pending():
            self.wake()

    @classmethod
    def current(cls):
        """The running session of this process, or None."""
        return cls._live

    def stop_trace(self):
        """Stop recording the FxT trace of this rank (``starpu_fxt_stop_profiling``): what
        runs afterwards (a residual check, a gather) is left out of the trace. Local;
        call it on every rank at the same point, once this rank's part of the traced work
        is done (after :meth:`wait`: its tasks and transfers are complete). A no-op in a
        session without ``trace`` or after an earlier call. The recording cannot restart.
        """
        self._require()
        if self.trace is not None and not self._trace_stopped:
            self._backend.fxt_stop()
            self._trace_stopped = True

    def bytes_sent(self):
        """Bytes this rank has sent to each rank so far, int64 array (size,), or None
        when statistics are off."""
        self._require()
        if not self.stats:
            return None
        return self._backend.comm_amounts().astype(np.int64)

    def pause(self):
        """Let StarPU's workers sleep (e.g. while another library computes inside a
        :meth:`running` block); outside such blocks they already sleep. Pair with
        :meth:`resume`."""
        self._require()
        self._backend.pause()

    def resume(self):
        """Undo one :meth:`pause`."""
        self._require()
        self._backend.resume()

    def _require(self):
        if not self.started:
            raise SessionError("the StarPU session is not started (use `with Session(...)` "
                               "or Session(...).start())" if not self.closed else
                               "the StarPU session was shut down")
