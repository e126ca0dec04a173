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

    same : object, optional
        What every rank must have been given alike (sizes, map, dtype...): when the
        ranks' values differ and no rank found an error, a UsageError naming the first
        differing rank is raised everywhere.

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
        found = comm.allgather((mine, same))
    for rank, (exc, _) in enumerate(found):
        if exc is not None:
            mark_agreed(exc)
            raise exc
    for rank, (_, value) in enumerate(found):
        if value != found[0][1]:
            from ..errors import UsageError

            raise UsageError(f"the ranks were given different inputs: rank 0 has "
                             f"{found[0][1]!r}, rank {rank} has {value!r}")


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
