"""Figures with their units, as messages and reports print them (decimal units), and the
time of day as run documents and file attributes record it."""
import math
import time


def format_bytes(nbytes):
    """Human-readable bytes (decimal units: kB, MB, GB, TB)."""
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(value) < 1000 or unit == "PB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    return f"{value} B"


def bytes_text(nbytes):
    """Bytes in decimal units with the exact count beside when the units round it:
    ``'1.48 MB (1480000 B)'``, ``'512 B'``."""
    nbytes = int(nbytes)
    text = format_bytes(nbytes)
    return text if abs(nbytes) < 1000 else f"{text} ({nbytes} B)"


def format_seconds(seconds):
    """Human-readable seconds with three significant digits: ``'12.3 s'``, ``'45.6 ms'``,
    ``'7.89 us'`` (``'0 s'`` for zero), so that small estimates do not print as 0.0."""
    value = float(seconds)
    if value == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(value) >= scale or unit == "ns":
            v = value / scale
            digits = max(0, 2 - int(math.floor(math.log10(abs(v)))))
            return f"{v:.{digits}f} {unit}"


def now_utc():
    """The current UTC time, ISO 8601 to the second (``'2026-12-07T14:29:25Z'``): the
    ``date`` of run documents and of the attributes of the HDF5 files starchol writes."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
