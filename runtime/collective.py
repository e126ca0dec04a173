"""MPI helpers shared by every layer: reductions and collective agreement on errors.

The one home of the max/min reductions and of the rule "a check that fails on one rank
raises the same exception on every rank". Any communicator-like object with
``allreduce``/``allgather`` works (an mpi4py communicator, or a 1-rank stand-in).
"""


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
    mine = _portable(error, comm.Get_rank())
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
    from ..errors import UsageError

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


def _portable(error, rank):
    if error is None:
        return None
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # an exception type that cannot travel: keep type name and text
        from ..errors import StarcholError

        return StarcholError(f"rank {rank}: {type(error).__name__}: {error}")
