"""Collective checks: run a check on every rank (or on one) and agree on the verdict.

    plan = run_everywhere(comm, check_everything, args)  # a result, or the same error everywhere

A thin layer over the one home of the agreement rule,
:func:`starchol.runtime.collective.agree`: each rank runs the check itself, catching
*any* exception (not only :class:`~starchol.errors.UsageError`: an ``OSError`` from HDF5,
a ``MemoryError``, a ``KeyError``...), and every rank then raises the lowest failing
rank's exception (same type, same message). The check itself must not call collectives
(a failing rank would skip them).
"""
from .errors import StarcholError


class _Comm1:
    """Stand-in for a 1-rank communicator (serial use)."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def bcast(self, obj, root=0):
        return obj

    def allreduce(self, obj, op=None):
        return obj

    def allgather(self, obj):
        return [obj]

    def gather(self, obj, root=0):
        return [obj]

    def Barrier(self):
        pass


def as_comm(comm):
    """``comm``, or a 1-rank stand-in when None."""
    return _Comm1() if comm is None else comm


def describe(exc):
    """One line for an exception of any type: its message, with the type when the message
    alone would not say what happened (``OSError``: the file and the reason)."""
    if isinstance(exc, StarcholError):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return f"{type(exc).__name__}:{where}: {exc.strerror}"
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError)"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_everywhere(comm, check, *args, **kwargs):
    """Run ``check(*args, **kwargs)`` on every rank; return this rank's result, or raise
    the same exception on every rank if it failed on any. Collective."""
    from .runtime.collective import agree as agree_errors

    result, error = None, None
    try:
        result = check(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every type takes the same path
        error = exc
    agree_errors(None if comm is None else comm, error)
    return result


def run_on_root(comm, check, *args, root=0, **kwargs):
    """Run ``check`` on ``root`` only and broadcast its result, or raise its exception on
    every rank. Collective."""
    from .runtime.collective import _portable, mark_agreed

    comm = as_comm(comm)
    result, error = None, None
    if comm.Get_rank() == root:
        try:
            result = check(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            error = _portable(exc, root)
    result, error = comm.bcast((result, error), root=root)
    if error is not None:
        raise mark_agreed(error)
    return result
