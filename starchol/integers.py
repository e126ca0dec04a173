"""Integers and sizes: the one check of the library, the run documents and the command line.

- :func:`is_int`: whether a value is an integer (a Python or numpy int, never a bool);
- :func:`exact_int`: a value as an int when it is one (``3.0`` too), else TypeError;
- :func:`check_int`: an integer in a range, or an error that names the parameter
  (:class:`~starchol.errors.UsageError` by default, or ``ValueError`` for a document);
- :func:`int_type`: the same check as an argparse ``type=`` (``--nrhs``), so that a bad
  value is refused by the parser with one line, before any work;
- :func:`int_or_none`: a text another tool wrote (a trace, StarPU's configuration) as an
  int, or None where it holds none.

Every message reads ``NAME must be an integer >= LOW, got VALUE`` (``from LOW to HIGH``
when both bounds are given).
"""
import argparse
import numbers

from .errors import UsageError


def is_int(value):
    """Whether ``value`` is an integer: a Python or numpy int, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def exact_int(value):
    """``value`` as an int when it is an integer (a Python or numpy int, or a float such
    as 3.0); TypeError otherwise (a bool, 10.5, a string), ValueError for NaN or a
    string that is no number, OverflowError for an infinity."""
    if isinstance(value, bool) or int(value) != value:
        raise TypeError(value)
    return int(value)


def bounds_text(low=None, high=None):
    """``'an integer >= 1'``, ``'an integer from 0 to 1000'``, ``'an integer'``."""
    if low is not None and high is not None:
        return f"an integer from {low} to {high}"
    if low is not None:
        return f"an integer >= {low}"
    if high is not None:
        return f"an integer <= {high}"
    return "an integer"


def check_int(value, name, low=None, high=None, error=UsageError, exact=True, param=True):
    """``value`` as an int, when it is an integer (``exact``: 3.0 counts, as
    :func:`exact_int` says; else only :func:`is_int` values) from ``low`` to ``high``
    (either None: unbounded); else ``error(f"{name} must be an integer >= {low}, got
    {value!r}")``. A :class:`UsageError` names its parameter, so the command line can
    say its flag: ``param`` True (``name``, without a trailing ``=``), a name, or None."""
    try:
        if not exact and not is_int(value):
            raise TypeError(value)
        out = exact_int(value)
    except (TypeError, ValueError, OverflowError):
        out = None
    if out is None or (low is not None and out < low) or (high is not None and out > high):
        message = f"{name} must be {bounds_text(low, high)}, got {value!r}"
        if error is not UsageError:
            raise error(message)
        raise UsageError(message, param=name.rstrip("=") if param is True else param)
    return out


def int_type(low=None, high=None):
    """An argparse ``type=``: the option's text as an int from ``low`` to ``high``, or the
    parser's one-line error ``argument --nrhs: must be an integer >= 1, got '0'``."""
    def parse(text):
        try:
            value = int(text)
        except (TypeError, ValueError):
            value = None
        if value is None or (low is not None and value < low) or (
                high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {bounds_text(low, high)}, "
                                             f"got {text!r}{_as_integer(text)}")
        return value

    parse.__name__ = bounds_text(low, high)
    return parse


def _as_integer(text):
    """``'; write it as an integer: 1000'`` for a text such as ``'1e3'``, else ``''``."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return ""
    return f"; write it as an integer: {int(value)}" if value.is_integer() and \
        str(int(value)) != str(text).strip() else ""


def int_or_none(text):
    """``int(text)``, or None where ``text`` is None or not an integer."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


__all__ = ["is_int", "exact_int", "bounds_text", "check_int", "int_type", "int_or_none"]
