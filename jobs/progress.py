"""Progress lines on a terminal: done / total, elapsed time and rate.

Off when stderr is not a terminal or with ``--quiet``; refreshed at most every 0.5 s.
"""
import sys
import time


class Progress:
    """Callable(done, total) that redraws one status line on stderr."""

    def __init__(self, label, unit="items", enabled=None, stream=None, interval=0.5):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label, self.unit, self.interval = label, unit, interval
        self.start = time.monotonic()
        self._last = 0.0

    def __call__(self, done, total):
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label}: {done}/{total} {self.unit} "
                          f"({100 * done / max(total, 1):.0f}%), {elapsed:.1f} s, "
                          f"{rate:.0f} {self.unit}/s{end}")
        self.stream.flush()
