"""What every computation of the library shares: the session it runs on, when the
workers wake (a small graph is submitted whole while they sleep), the compiled task
graphs, and the record of a measured computation (identical on every rank)."""
from ..runtime.errors import SessionError
from ..units import now_utc
from .record import RunRecord


#: a graph of at most this many tasks per rank is submitted whole before the workers
#: wake (about 1 ms of submission); of a larger Cholesky, the first panel only, and a
#: larger solve or residual graph is submitted to awake workers
WAKE_AFTER_TASKS = 256


def small_graph(tasks, comm):
    """Whether a graph of about ``tasks`` tasks (all ranks) is small enough to be
    submitted whole while the workers sleep (see :data:`WAKE_AFTER_TASKS`)."""
    return tasks <= WAKE_AFTER_TASKS * comm.Get_size()


def get_session(comm, session=None):
    """``session`` if given, else this process's running Session, else a new one started
    on ``comm`` (kept until the interpreter exits). Collective when it starts one.

    Raises :class:`SessionError` when the given session is not running (never started,
    or shut down): a session is started by its owner (``with Session(...)``), not here.
    """
    from ..runtime import Session

    if session is not None:
        if not session.started:
            raise SessionError(
                "the session given to cholesky " + (
                    "was shut down; StarPU-MPI cannot start again in this process: do the "
                    "computations inside one `with Session(...)` block" if session.closed
                    else "is not started: use `with Session(comm) as session:` or "
                    "Session(comm).start() before cholesky"))
        return session
    return Session.current() or Session(comm).start()


def graphs():
    """The compiled task graphs (``starchol.runtime._graphs``), loaded when first used."""
    from ..runtime import _graphs

    return _graphs


def computation_record(session, operation, tile_map, L, computation, tasks, predicted, nrhs=0,
            extra=None):
    """The record of one ``measured`` computation (its times and bytes: a
    :class:`~starchol.runtime.computation.Computation`), identical on every rank.
    Collective."""
    comm = session.comm
    after, before = session.bytes_sent(), computation.bytes_before
    row = None if after is None else (after - before).tolist()
    # one collective: every rank's bytes, tasks, clock and times
    gathered = comm.allgather((row, int(tasks), now_utc(), float(computation.elapsed),
                               float(computation.submit_s)))
    elapsed = max(g[3] for g in gathered)
    t_sub = max(g[4] for g in gathered)
    measured = None if row is None else [g[0] for g in gathered]
    job = session.job_facts()
    return RunRecord(
        operation=operation, **RunRecord.map_fields(tile_map), n=L.n, nb=L.nb, nt=L.nt,
        nrhs=int(nrhs), dtype=str(L.dtype), time_s=elapsed, submit_s=t_sub,
        tasks=sum(g[1] for g in gathered), bytes_measured_pairs=measured,
        bytes_predicted_pairs=None if predicted is None else predicted.tolist(),
        extra=extra or {}, **{**job, "date": gathered[0][2]})
