"""Collective agreement: the one home of the rule "a check that fails on one rank raises
the same exception on every rank", and of the reductions every layer uses.

    agree(comm, error)                            # every rank raises the lowest rank's error
    plan = run_everywhere(comm, check, args)      # a result, or the same error everywhere
    info = run_on_root(comm, inspect, path)       # rank 0 looks, every rank gets the verdict
    largest = allreduce_max(comm, value)

Any communicator-like object with ``allreduce``/``allgather``/``bcast`` works (an mpi4py
communicator, or the 1-rank stand-in of :func:`as_comm`). :func:`run_everywhere` and
:func:`run_on_root` catch *any* exception (not only :class:`~starchol.errors.UsageError`:
an ``OSError`` from HDF5, a ``MemoryError``, a ``KeyError``...), and every rank then raises
the lowest failing rank's exception (same type, same message). The check itself must not
call collectives (a failing rank would skip them).
"""
import pickle

from .errors import StarcholError, UsageError


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
        if exc.filename:
            return f"{type(exc).__name__}: {exc.filename}: {exc.strerror}"
        return f"{type(exc).__name__}: {exc.strerror}"
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError)"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_everywhere(comm, check, *args, **kwargs):
    """Run ``check(*args, **kwargs)`` on every rank; return this rank's result, or raise
    the same exception on every rank if it failed on any. Collective."""
    result, error = None, None
    try:
        result = check(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every type takes the same path
        error = exc
    agree(None if comm is None else comm, error)
    return result


def run_on_root(comm, check, *args, root=0, **kwargs):
    """Run ``check`` on ``root`` only and broadcast its result, or raise its exception on
    every rank. Collective."""
    comm = as_comm(comm)
    result, error = None, None
    if comm.Get_rank() == root:
        try:
            result = check(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            error = portable(exc, root)
    result, error = comm.bcast((result, error), root=root)
    if error is not None:
        raise mark_agreed(error)
    return result


def _op(name):
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - mpi4py is a dependency
        return None
    return getattr(MPI, name)


def allreduce_max(comm, value):
    """The largest ``value`` over the ranks of ``comm``. Collective."""
    return comm.allreduce(value, op=_op("MAX"))


def allreduce_min(comm, value):
    """The smallest ``value`` over the ranks of ``comm``. Collective."""
    return comm.allreduce(value, op=_op("MIN"))


def agree(comm, error, same=None):
    """Raise on every rank the first error (lowest rank) any rank found. Collective.

    Parameters
    ----------
    comm : mpi4py communicator
    error : BaseException or None
        This rank's verdict: an exception instance, or None when its checks passed.
    same : dict, optional
        What every rank must have been given alike, by parameter name (``{"shape": (n,
        n), "nb": nb, "tile_map": ...}``); values are plain comparable objects (a
        :class:`Keyed` shows a text and compares a key too). When no rank found an error
        and the ranks' values differ, a :class:`~starchol.errors.UsageError` naming each
        differing parameter, with the lowest rank whose value differs from rank 0's, is
        raised everywhere (``params``: those names)::

            the ranks were given different inputs: shape: rank 0 has (130, 130), rank 1
            has (120, 120)

    Every rank calls this at the same point, whatever its own verdict, so a check that
    fails on one rank only never leaves the others waiting. The exception raised is a
    copy (pickled) of the lowest failing rank's, so its type and message are the same
    everywhere; its message says which rank found it when several ranks take part.
    """
    if comm is None or comm.Get_size() == 1:
        if error is not None:
            raise error
        return
    mine = portable(error, comm.Get_rank())
    if same is None:    # every rank calls agree the same way: same is None everywhere
        found = [(exc, None) for exc in comm.allgather(mine)]
    else:
        found = comm.allgather((mine, dict(same)))
    for rank, (exc, _) in enumerate(found):
        if exc is not None:
            mark_agreed(exc)
            raise exc
    if same is not None:
        mismatch = differences([value for _, value in found])
        if mismatch is not None:
            raise mismatch


class Keyed(tuple):
    """A value for :func:`agree` shown by its ``text`` and compared by ``(text, key)``:
    a map is shown by its description and compared by a digest of its owners too, so two
    maps of the same description and different owners differ (``what``: what the key
    stands for, said when only the key differs)."""

    def __new__(cls, text, key, what="content"):
        return super().__new__(cls, (str(text), key, what))

    def __getnewargs__(self):
        return tuple(self)

    text = property(lambda self: self[0])
    key = property(lambda self: self[1])
    what = property(lambda self: self[2])

    def __repr__(self):
        return self.text


def differences(values):
    """The :class:`~starchol.errors.UsageError` of :func:`agree` for the ranks' ``same``
    dicts (rank order), or None when they are all alike."""
    names = list(values[0])
    for v in values[1:]:
        names += [k for k in v if k not in names]
    parts, params, key_only = [], [], []
    for name in names:
        first = values[0].get(name)
        for rank, v in enumerate(values[1:], 1):
            other = v.get(name)
            if _equal(other, first):
                continue
            if isinstance(first, Keyed) and isinstance(other, Keyed) and \
                    first.text == other.text:
                # said only when nothing else differs (the key may follow from a size)
                key_only.append((name, f"{name}: rank 0 and rank {rank} both have "
                                       f"{first.text}, but with different {other.what}"))
            else:
                parts.append(f"{name}: rank 0 has {first!r}, rank {rank} has {other!r}")
                params.append(name)
            break
    if not parts:
        parts = [text for _, text in key_only]
        params = [name for name, _ in key_only]
    if not parts:
        return None
    return UsageError("the ranks were given different inputs: " + "; ".join(parts),
                      params=params)


def _equal(a, b):
    """Alike values: equal, or both a float NaN (``nan`` given on every rank is one input,
    refused or accepted by the checks that follow)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an ambiguous comparison (arrays): unlike
        return False


def mark_agreed(exc):
    """Note on ``exc`` that every rank raises it (so no rank waits for another: the
    session may shut down collectively, see :func:`starchol.faults.end_diverged`)."""
    try:
        exc.starchol_agreed = True
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception types
        pass
    return exc


def portable(error, rank):
    """``error`` as it can travel to the other ranks: itself when it pickles, else a
    :class:`~starchol.errors.StarcholError` with its type name and text (None stays
    None)."""
    if error is None:
        return None

    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # an exception type that cannot travel: keep type name and text
        return StarcholError(f"rank {rank}: {type(error).__name__}: {error}")
