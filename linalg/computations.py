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


def submit_windowed(comp, submit, iterations, window, first=None, progress=None,
                    total=None):
    """Submit a graph of ``iterations`` iterations in a submission window of ``window``
    iterations (0, or ``window`` >= ``iterations``: all at once): the one loop of the
    window, for the factorization, the solves and the residuals. Returns the tasks of
    this rank (the sum of what ``submit`` returned). Collective.

    ``submit(k_begin, k_end, track)`` submits iterations k_begin <= k < k_end of the
    graph (a compiled graph of :mod:`starchol.runtime._graphs`; ``track``: count this
    rank's tasks of each iteration). With a window, iteration k is submitted once this
    rank's tasks of iteration k - W are done (:meth:`~.Computation.wait_iteration`: a
    Ctrl-C and ``progress(done, total)`` reach Python while it waits). ``first``: the
    iterations submitted before the workers of a deferred ``comp`` wake (default: the
    first window, or the whole graph); they are woken before any wait. The tasks, their
    order and the bytes they move do not depend on the window."""
    window = window if 0 < window < iterations else 0
    end = window or iterations
    first = end if first is None else min(first, end)
    track = bool(window)
    if track:
        comp.track_iterations(iterations)
    tasks = submit(0, first, track)
    if first < iterations:
        comp.wake()
        if first < end:
            tasks += submit(first, end, track)
        for k in range(end, iterations):
            comp.wait_iteration(k - window, progress, total, tasks)
            tasks += submit(k, k + 1, track)
    return tasks


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


def run_record(session, operation, tile_map, A, *, nrhs, dtype, bytes_row, tasks, elapsed,
               submit_s, predicted, total_tasks=None, more=None, **fields):
    """The record of a computation of ``session``, identical on every rank: the one
    builder of factorization, solve and mixed-precision records. Collective (one
    allgather).

    ``A``: the matrix (its n, nb, nt); ``bytes_row``: this rank's bytes sent to each
    rank (None when not counted); ``tasks``: this rank's tasks (summed over the ranks,
    unless ``total_tasks`` gives the total); ``elapsed``, ``submit_s``: this rank's
    seconds (the slowest rank's are recorded); ``predicted``: the model's P x P bytes
    or None; ``more``: anything else each rank contributes, gathered. ``fields``: other
    :class:`RunRecord` fields (``mixed``, ``extra``). Returns ``(record, [more of each
    rank])``.
    """
    gathered = session.comm.allgather((bytes_row, int(tasks), now_utc(), float(elapsed),
                                       float(submit_s), more))
    measured = None if bytes_row is None else [g[0] for g in gathered]
    record = RunRecord(
        operation=operation, **RunRecord.map_fields(tile_map), n=A.n, nb=A.nb, nt=A.nt,
        nrhs=int(nrhs), dtype=dtype, time_s=max(g[3] for g in gathered),
        submit_s=max(g[4] for g in gathered),
        tasks=int(sum(g[1] for g in gathered) if total_tasks is None else total_tasks),
        bytes_measured_pairs=measured,
        bytes_predicted_pairs=None if predicted is None else predicted.tolist(),
        **{**session.job_facts(), "date": gathered[0][2]}, **fields)
    return record, [g[5] for g in gathered]


def computation_record(session, operation, tile_map, L, computation, tasks, predicted,
                       nrhs=0, extra=None):
    """The record of one ``measured`` computation (its times and bytes: a
    :class:`~starchol.runtime.computation.Computation`) on L (:func:`run_record`).
    Collective."""
    after, before = session.bytes_sent(), computation.bytes_before
    row = None if after is None else (after - before).tolist()
    record, _ = run_record(session, operation, tile_map, L, nrhs=nrhs, dtype=str(L.dtype),
                           bytes_row=row, tasks=tasks, elapsed=computation.elapsed,
                           submit_s=computation.submit_s, predicted=predicted,
                           extra=extra or {})
    return record
