"""One computation on a running session: register, submit, wait, unregister.

    with session.computation(deferred=True, measured=True) as c:
        hl = c.register(L.owners, L.tiles, L.rows, elemsize=L.itemsize)
        tasks = graphs.cholesky(hl, ...)        # submit (the workers may still sleep)
        c.submitted()
        failed = c.wait(progress, total)        # wakes the workers, waits
    c.elapsed, c.submit_s, c.bytes_before

The block absorbs what every computation repeats: the workers' sleep (a
:meth:`~starchol.runtime.session.Session.running` block, the deferred wake), the
registration of the tiles and, on the way out (an error or an interrupt too), the wake
of workers that still have tasks and the unregistration of every registered matrix in
reverse order (which writes the tiles back to host memory). The task graphs themselves
are the caller's (:mod:`starchol.runtime._graphs`).
"""
import time

from .backend import binding
from .errors import CallbackError

#: with CUDA workers, send each final tile of L back to host memory as soon as its panel
#: is done (``starpu_data_wont_use``) rather than all at the unregistration;
#: ``benchmarks/gpu_vs_cusolver.py --no-writeback`` turns it off to measure what it gives
EAGER_WRITEBACK = True


class Computation:
    """A context manager for one computation of ``session``. Collective (the
    registrations, the wait and the unregistrations are, in the same order on every
    rank).

    Parameters
    ----------
    session : Session
        A running session.
    deferred : bool
        The sleeping workers stay asleep until :meth:`wake` or :meth:`wait`.
    measured : bool
        Before the block: this rank's bytes sent so far (:attr:`bytes_before`) and a
        barrier, so that the record's times and bytes are of this computation alone.

    Attributes
    ----------
    bytes_before : numpy.ndarray or None
        Bytes sent by this rank before the block, per rank (None without statistics or
        ``measured``).
    submit_s, elapsed : float
        Seconds from the block's start to :meth:`submitted`, and to the block's end
        (after the unregistrations); 0 until then.
    """

    def __init__(self, session, deferred=False, measured=False):
        self.session = session
        self.deferred = bool(deferred)
        self.measured = bool(measured)
        self.bytes_before = None
        self.submit_s = self.elapsed = 0.0
        self._handles = []
        self._tracking = False
        self._failed = self._next_report = None
        self._running = None
        self._t0 = None

    @property
    def writeback(self):
        """Whether final tiles go back to host memory as soon as they are done: with CUDA
        workers, unless :data:`EAGER_WRITEBACK` is off."""
        return EAGER_WRITEBACK and self.session.cuda_workers > 0

    def __enter__(self):
        if self.measured:
            self.bytes_before = self.session.bytes_sent()
            self.session.comm.Barrier()
        self._running = self.session.running(deferred=self.deferred)
        self._running.__enter__()
        self._t0 = time.perf_counter()
        return self

    def register(self, owners, tiles, rows, cols=None, stored=None, lazy=False,
                 elemsize=8):
        """:meth:`Session.register_tiles`, unregistered when the block ends. Collective.
        Returns the ``TileHandles``."""
        h = self.session.register_tiles(owners, tiles, rows, cols, stored=stored, lazy=lazy,
                                        elemsize=elemsize)
        self._handles.append(h)
        return h

    def track_iterations(self, nt):
        """Count this rank's tasks of each iteration 0..nt-1 as a graph submitted with
        ``track`` inserts them, for :meth:`wait_iteration` (the submission window)."""
        binding().panel_track(int(nt))
        self._tracking = True

    def wait_iteration(self, k, progress=None, total=None, submitted=0, interval=0.25):
        """Wait until this rank's tasks of iteration ``k`` are done (counted since
        :meth:`track_iterations`), while the rest of the graph is not yet submitted.

        Waits in the binding at most ``interval`` seconds at a time, so that a Ctrl-C
        reaches the session's handler in between. ``progress(done, total)``, if given,
        is called every ``interval`` seconds while the window goes on (``done``: of the
        ``submitted`` tasks of this rank so far, those that ran); if it raises, it is not
        called again and :meth:`wait` returns the error (as ``Session.wait_local``)."""
        backend = binding()
        while True:
            self._report(progress, total, submitted, interval)
            if backend.panel_wait(int(k), interval / 5):
                return

    def _report(self, progress, total, submitted, interval):
        # progress(done, total) once ``interval`` seconds have passed since the last call
        # (the first: ``interval`` after the first wait); never again once it raised
        if progress is None or self._failed is not None:
            return
        now = time.perf_counter()
        if self._next_report is None:
            self._next_report = now + interval
        elif now >= self._next_report:
            self._next_report = now + interval
            try:
                progress(max(0, int(submitted) - binding().tasks_pending()), total)
            except Exception as exc:  # noqa: BLE001 - the user's code: any type
                self._failed = CallbackError.wrap("progress", progress, exc,
                                                  self.session.rank)

    def submitted(self):
        """Mark the end of the submission (:attr:`submit_s`)."""
        self.submit_s = time.perf_counter() - self._t0

    def wake(self):
        """Wake the workers of a deferred block (the rest of a graph is submitted to
        awake workers)."""
        self.session.wake()

    def wait(self, progress=None, total=None):
        """:meth:`Session.wait_local`: wake the workers, wait for this rank's tasks and
        all communications; returns this rank's ``CallbackError`` or None, for the
        caller to agree on. Collective. A ``progress`` that raised in
        :meth:`wait_iteration` is not called again, and its error is returned."""
        if self._failed is not None:
            self.session.wait_local(None, total)
            return self._failed
        return self.session.wait_local(progress, total)

    def __exit__(self, exc_type, exc, tb):
        try:
            try:
                # an unregistration waits for the tiles' tasks: wake workers that have some
                self.session.idle.wake_if_pending()
            finally:
                if self._tracking:
                    self._tracking = False
                    binding().panel_track(0)
                while self._handles:
                    self._handles.pop().unregister()
            self.elapsed = time.perf_counter() - self._t0
        finally:
            self._running.__exit__(exc_type, exc, tb)
        return False


__all__ = ["Computation", "EAGER_WRITEBACK"]
