"""When StarPU's workers sleep: the one state machine of a session's idle policy.

The workers are either *awake* (they take tasks) or *asleep* (``starpu_pause``: no CPU,
tasks may still be submitted). One vocabulary, four events:

- :meth:`WorkerSleep.enter` / :meth:`WorkerSleep.leave`: a computation block begins or
  ends (blocks nest). ``enter(deferred=False)`` wakes the workers at once; with
  ``deferred`` they stay as they are until :meth:`WorkerSleep.wake`, so that the
  application thread registers and submits without sharing the cores with workers that
  have nothing to run yet.
- :meth:`WorkerSleep.wake`: wake them for the computation under way.
- :meth:`WorkerSleep.tasks_done`: the helper thread of a wait saw this rank's tasks
  done.
- :meth:`WorkerSleep.wake_if_pending`: wake them if tasks remain (before an
  unregistration on an error path, which waits for them).

The policy: when a computation is over (its tasks done, or the last block left), the
workers stay awake for ``linger`` seconds, then sleep. A computation that starts within
that time finds them awake (calls made back to back skip the sleep and the wake-up);
an idle session uses no CPU once ``linger`` has passed. ``linger = 0`` puts them to
sleep at once. Without ``enabled`` (a session with CUDA workers, whose driver threads
also move data back to host memory) the workers are never put to sleep.

The binding flips StarPU's pause count and its own flag in one compiled call
(``idle_pause``/``idle_resume``/``idle_paused``), so Ctrl-C cannot fall between them;
every change here is made under one lock, from the application thread, a wait's helper
thread or the linger timer's thread.
"""
import math
import os
import threading
import time

from ..errors import UsageError

#: seconds the workers stay awake after a computation (``STARCHOL_AWAKE_S`` overrides);
#: docs/engine.md, "Calls back to back", gives the measurements behind it
LINGER_S = 0.05


def linger_seconds(environ=None):
    """``STARCHOL_AWAKE_S`` (seconds >= 0) when set, else :data:`LINGER_S`.

    Raises
    ------
    UsageError
        The variable is set to no finite number of seconds >= 0.
    """
    text = (os.environ if environ is None else environ).get("STARCHOL_AWAKE_S", "").strip()
    if not text:
        return LINGER_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"STARCHOL_AWAKE_S must be a number of seconds >= 0 (how long "
                         f"the workers stay awake after a computation), got {text!r}")
    return value


class WorkerSleep:
    """The sleep state of a session's workers (see the module's docstring).

    Parameters
    ----------
    binding : module
        The compiled binding (``idle_pause``, ``idle_resume``, ``idle_paused``,
        ``tasks_pending``).
    enabled : bool
        Whether the workers may sleep at all (False with CUDA workers).
    linger : float
        Seconds the workers stay awake after a computation (default
        :func:`linger_seconds`).
    """

    def __init__(self, binding, enabled=True, linger=None):
        self.binding = binding
        self.enabled = bool(enabled)
        self.linger = linger_seconds() if linger is None else float(linger)
        self.depth = 0          # computation blocks open
        self.waits = 0          # waits begun: a helper acts only for the latest one
        self.closed = False
        self._deadline = None   # when lingering: the monotonic time of the sleep
        self._lock = threading.Lock()
        self._timer = threading.Condition(self._lock)
        self._thread = None

    @property
    def awake(self):
        """Whether the workers are awake as far as this policy goes (always True when not
        ``enabled``: never put to sleep)."""
        return not self.closed and not self.binding.idle_paused()

    # -- events ---------------------------------------------------------------------
    def enter(self, deferred=False):
        """A computation block begins; wake the workers unless ``deferred``."""
        with self._lock:
            self.depth += 1
            self._deadline = None
        if not deferred:
            self.wake()

    def leave(self):
        """A computation block ends; the last one lets the workers sleep (after
        ``linger``)."""
        with self._lock:
            self.depth -= 1
            if self.depth == 0:
                self._done()

    def begin_wait(self):
        """A wait begins; returns its number, for :meth:`tasks_done`."""
        with self._lock:
            self.waits += 1
            return self.waits

    def wake(self, unless=None, blocking=True):
        """Wake the workers for the computation under way (inside a block), unless the
        event ``unless`` is set (checked under the lock); ``blocking=False``: not at all
        when another thread holds the lock (a signal handler)."""
        if not self._lock.acquire(blocking):
            return
        try:
            if unless is not None and unless.is_set():
                return
            self._deadline = None
            if self.depth and self.enabled and not self.closed:
                self.binding.idle_resume()
        finally:
            self._lock.release()

    def tasks_done(self, wait):
        """The helper thread of wait number ``wait`` saw this rank's tasks done: the
        workers may sleep (after ``linger``) -- only if no later wait has begun and no
        task was submitted since (a helper whose wait an interrupt abandoned returns
        late, perhaps during the next computation)."""
        with self._lock:
            if wait != self.waits or self.binding.tasks_pending():
                return
            self._done()

    def wake_if_pending(self):
        """:meth:`wake`, when this rank still has tasks submitted and not completed."""
        if self.binding.tasks_pending():
            self.wake()

    def sleep_now(self):
        """Put the awake workers to sleep at once (also inside a block)."""
        with self._lock:
            self._deadline = None
            self._sleep()

    def close(self):
        """The session shuts down: wake the workers for good (StarPU aborts on a pause
        left at shutdown) and end the linger timer."""
        with self._lock:
            self.closed = True
            self._deadline = None
            self.binding.idle_resume()
            self._timer.notify_all()

    # -- under the lock -------------------------------------------------------------
    def _sleep(self):
        if self.enabled and not self.closed and not self.binding.idle_paused():
            self.binding.idle_pause()

    def _done(self):
        if not self.enabled or self.closed:
            return
        if self.linger <= 0:
            self._sleep()
            return
        self._deadline = time.monotonic() + self.linger
        if self._thread is None:
            self._thread = threading.Thread(target=self._run_timer, daemon=True,
                                            name="starchol-sleep")
            self._thread.start()
        else:
            self._timer.notify()

    def _run_timer(self):
        """The linger timer's thread: sleeps on a condition (no CPU) until a deadline is
        set, then puts the workers to sleep when it passes with no computation begun."""
        with self._lock:
            while not self.closed:
                if self._deadline is None:
                    self._timer.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._timer.wait(left)
                    continue
                self._deadline = None
                if not self.binding.tasks_pending():
                    self._sleep()
