"""Progress on stderr: done / total, percent, elapsed time and rate.

On a terminal, one live line redrawn at most every 0.5 s. Elsewhere (under mpirun, in a
Slurm job, piped to a file), one plain line at the start, then one each time another ``step_percent`` of the
work is done or ``step_s`` seconds have passed, whichever comes first, and a last line
at the end; so a job log shows that the run is alive without flooding it.
``enabled=None`` means "on a terminal only" (``volume``, ``compare``, ``plan``);
``starchol run`` (rank 0) and ``starchol report --model`` pass True unless ``--quiet``.
"""
import sys
import time


class Progress:
    """Callable(done, total) that reports progress on stderr (see the module doc)."""

    def __init__(self, label, unit="items", enabled=None, stream=None, interval=0.5,
                 step_percent=10.0, step_s=10.0, live=None):
        self.stream = stream or sys.stderr
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = tty if enabled is None else bool(enabled)
        self.live = tty if live is None else live
        self.label, self.unit, self.interval = label, unit, interval
        self.step_percent, self.step_s = step_percent, step_s
        self.start = time.monotonic()
        self._last = self.start
        self._last_percent = None  # nothing printed yet: the first call prints
        self._finished = False

    def _text(self, done, total, now):
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        return (f"{self.label}: {done}/{total} {self.unit} "
                f"({100 * done / max(total, 1):.0f}%), {elapsed:.1f} s, "
                f"{rate:.0f} {self.unit}/s")

    def __call__(self, done, total):
        if not self.enabled or self._finished:
            return
        now = time.monotonic()
        end = done >= total
        if self.live:
            if not end and now - self._last < self.interval:
                return
            self.stream.write("\r" + self._text(done, total, now) + ("\n" if end else ""))
        else:
            percent = 100.0 * done / max(total, 1)
            first = self._last_percent is None
            if not (end or first) and percent - self._last_percent < self.step_percent \
                    and now - self._last < self.step_s:
                return
            self._last_percent = percent
            self.stream.write(self._text(done, total, now) + "\n")
        self._last = now
        self._finished = end
        self.stream.flush()
