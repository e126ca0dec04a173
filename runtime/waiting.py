"""The helper thread that blocks in StarPU's wait for the application thread.

A wait for a computation's tasks blocks in C (``starpu_task_wait_for_all``), where
Python cannot deliver Ctrl-C or call a progress display. So the application thread
hands the blocking call to a helper thread and waits on an event, which a signal
interrupts. One helper serves every wait of a session, asleep on a condition between
them (no CPU): a thread started per wait cost each call of a small factorization 0.06
ms when the cores were free, and much more when they were not (``Thread.start`` waits
until the new thread runs, which takes a core from busy workers; docs/engine.md, "Calls
back to back").

Waits are served in order. A wait that an interrupt abandoned is still being served
when the next one is asked for: the helper finishes it (StarPU's wait returns once the
cancelled tasks are done), then serves the next one.
"""
import collections
import threading


class Wait:
    """One wait asked of a :class:`TaskWaiter`.

    Attributes
    ----------
    tasks_done : threading.Event
        Set when StarPU's wait returned (this process's tasks are done).
    done : threading.Event
        Set when the helper is through with this wait (after ``after``, or an error).
    error : BaseException or None
        What StarPU's wait raised, for the application thread to raise.
    """

    def __init__(self, after=None):
        self.after = after
        self.tasks_done = threading.Event()
        self.done = threading.Event()
        self.error = None

    def result(self):
        """Block until the helper is through (a signal interrupts it); raise its error."""
        self.done.wait()
        if self.error is not None:
            raise self.error


class TaskWaiter:
    """A session's helper thread for waits (see the module's docstring).

    Parameters
    ----------
    wait_tasks : callable
        Blocks until this process's tasks are done (the binding's ``wait_tasks``).
    """

    def __init__(self, wait_tasks):
        self.wait_tasks = wait_tasks
        self.closed = False
        self._queue = collections.deque()
        self._ready = threading.Condition(threading.Lock())
        self._thread = None

    def start(self):
        """Start the helper thread (it sleeps until a wait is asked for). Idempotent."""
        with self._ready:
            if self._thread is None and not self.closed:
                self._thread = threading.Thread(target=self._run, name="starchol-wait",
                                                daemon=True)
                self._thread.start()

    def submit(self, after=None):
        """Ask for a wait; ``after()`` runs on the helper thread once the tasks are done
        (before :attr:`Wait.done` is set). Returns the :class:`Wait`."""
        request = Wait(after)
        self.start()
        with self._ready:
            if self.closed:     # no helper any more: StarPU may be stopped
                request.tasks_done.set()
                request.done.set()
            else:
                self._queue.append(request)
                self._ready.notify()
        return request

    def close(self, timeout=None):
        """End the helper thread, after the waits asked for (a wait asked after this does
        not block in StarPU). Call it once the tasks are done, before StarPU stops:
        ``timeout`` seconds at most."""
        with self._ready:
            self.closed = True
            self._ready.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self):
        while True:
            with self._ready:
                while not self._queue and not self.closed:
                    self._ready.wait()
                if not self._queue:
                    return
                request = self._queue.popleft()
                closed = self.closed
            try:
                if not closed:
                    self.wait_tasks()
                request.tasks_done.set()
                if request.after is not None:
                    request.after()
            except BaseException as exc:  # raised by Wait.result, in the caller's thread
                request.error = exc
            finally:
                request.done.set()
