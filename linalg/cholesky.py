"""Distributed Cholesky, solve and log-determinant on the StarPU-MPI runtime.

    A = DistributedMatrix.from_function(fn, (n, n), nb, tile_map)
    F = cholesky(A, tile_map)          # any map: 2D, 2.5D (slices from the map), custom
    X = F.solve(B)                     # B: DistributedMatrix of kind "rhs"
    F.logdet(), F.record, F.solve_record

One Python path for every map: the checks (collective), then one compiled graph loop
(``starchol.runtime._graphs.cholesky``: the right-looking tiled Cholesky over c slices,
c = 1 for a 2D map), then the agreement on failures and the typed record
(:class:`~starchol.linalg.record.RunRecord`). The task graph, with Chameleon's
priorities (NT tiles per side), iteration k on slice s = it[k] (the map's
``iteration_slices``: blocks of b iterations, the slices visited back and forth):

    for m >= k, every other slice t that updated column k:  A[m][k] += P_t[m][k]  (ADD)
    L[k][k] = POTRF(A[k][k])                         priority 2NT-2k
    for m > k:  L[m][k] = A[m][k] L[k][k]^-T         priority 2NT-2k-m     (TRSM)
    for n > k:  A_s[n][n] -= L[n][k] L[n][k]^T       priority 2NT-2k-n     (SYRK)
        for m > n:  A_s[m][n] -= L[m][k] L[n][k]^T   priority 2NT-2k-n-m   (GEMM)

Each task runs on the owner of the tile it writes; StarPU-MPI moves the panel tiles
(and the 2.5D partial sums). A POTRF failure is recorded by the kernel; after the wait
the ranks agree on the first failing global column with one reduction and all raise the
same :class:`~starchol.linalg.errors.NotPositiveDefiniteError` (a
``numpy.linalg.LinAlgError``).
"""
import functools

import numpy as np

from ..distributions.base import iteration_slices, slice_updates
from ..errors import UsageError
from ..collective import agree, allreduce_min
from ..runtime.errors import SessionError, agree_callback_error
from .errors import NotPositiveDefiniteError
from .distributed import DistributedMatrix, check_map, map_key
from .record import RunRecord
from ..units import now_utc
from ..model.counts import local_task_count, solve_task_count, task_count
from ..model.operations import SOLVE_PASSES, predicted_pairs_bytes
from ..model.rhs_volume import check_variant
from .rhs_solve import residual_variant, solve_variant, submit_residual_rhs, submit_solve_rhs


#: a graph of at most this many tasks per rank is submitted whole before the workers
#: wake (about 1 ms of submission); of a larger Cholesky, the first panel only, and a
#: larger solve or residual graph is submitted to awake workers
WAKE_AFTER_TASKS = 256


def _small_graph(tasks, comm):
    """Whether a graph of about ``tasks`` tasks (all ranks) is small enough to be
    submitted whole while the workers sleep (see :data:`WAKE_AFTER_TASKS`)."""
    return tasks <= WAKE_AFTER_TASKS * comm.Get_size()


def partial_mask(nt, c, s, it=None):
    """uint8 (nt, nt): tiles (i, j), i >= j, of which slice ``s`` keeps a partial sum
    (it updates them, it[k] == s for some k < j, and does not factor them, it[j] != s).
    ``it``: the slice of each iteration (default: the maps' default rule)."""
    it = iteration_slices(nt, c) if it is None else np.asarray(it)
    cols = (slice_updates(it, c)[s] > 0) & (it != s)
    return np.ascontiguousarray(np.tril(np.ones((nt, nt), dtype=bool)) & cols[None, :],
                                dtype=np.uint8)


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


def _check_variant(variant):
    """UsageError unless ``variant`` names a solve variant or ``"auto"``."""
    try:
        check_variant(variant)
    except ValueError as exc:
        raise UsageError(str(exc), param="variant") from None


def _graphs():
    from ..runtime import _graphs

    return _graphs


class Factor:
    """The Cholesky factor L (A = L L^T) of a distributed matrix, from :func:`cholesky`.

    Attributes
    ----------
    L : DistributedMatrix
        The lower-triangular factor (symmetric kind; the strict upper triangle of the
        diagonal tiles is not referenced). Tile (i, j) lives where the map factored it.
    tile_map : TileMap
    record : RunRecord
        The factorization's record.
    solve_record : RunRecord or None
        The last :meth:`solve`'s record.
    """

    def __init__(self, L, tile_map, session, record):
        self.L = L
        L.factor = True
        self.tile_map = tile_map
        self.session = session
        self.record = record
        self.solve_record = None

    def _running_session(self, method):
        """The factor's session, or SessionError (the same on every rank: a session
        starts and stops collectively) when it no longer runs."""
        session = self.session
        if not session.started:
            raise SessionError(
                f"Factor.{method} runs tasks on the StarPU session that computed the "
                f"factor, and that session " + (
                    "was shut down: call it inside the `with Session(...)` block"
                    if session.closed else "is not running")
                + " (Factor.logdet, Factor.L and the records need no session)")
        return session

    def logdet(self):
        """log det A = 2 sum log L[i, i]. Collective (one reduction on L's communicator).

        Needs no StarPU session: it works after the session is shut down too.
        """
        local = 0.0
        for (i, j), t in self.L.tiles.items():
            if i == j:
                local += float(np.sum(np.log(np.diag(t).astype(np.float64))))
        return 2.0 * self.L.comm.allreduce(local)

    def solve(self, B, overwrite_b=False, root=0, variant="auto"):
        """X with A X = B, by the tiled forward (L Y = B) and backward (L^T X = Y)
        triangular solves, run as tasks on the runtime. Collective.

        Parameters
        ----------
        B : DistributedMatrix or numpy.ndarray
            Right-hand sides, kind ``"rhs"``, N x K, same NB and dtype as the factor,
            laid out by the same map (row tile i with L's diagonal tile (i, i)). Or, as
            scipy users write it, a numpy array of N entries or N x K held by rank
            ``root`` (ignored on the other ranks; None there is fine): it is scattered
            from ``root``
            (converted to the factor's dtype), solved as tasks, and X is gathered back
            to ``root`` as a numpy array of B's shape (None on the other ranks).
        overwrite_b : bool
            Solve in place in B's tiles (no copy); a read-only tile is a UsageError.
            Ignored for a numpy B (which is never modified).
        root : int
            The rank that holds a numpy B and receives X (default 0).
        variant : {"auto", "rhs", "factor"}
            The graph: ``"rhs"`` keeps L in place and moves blocks of B and NB x K
            partial sums (the ``solve_rhs`` graph), ``"factor"`` runs every task where
            its block of B lives and moves L's tiles there (the ``solve`` graph);
            ``"auto"`` (default) takes the one with fewer bytes on the busiest link for
            B's K columns (:func:`~starchol.model.rhs_volume.choose_variant`: few
            right-hand sides, ``"rhs"``). The same on every rank.

        Returns
        -------
        DistributedMatrix or numpy.ndarray or None
            X, laid out like B; for a numpy B, X on ``root`` and None elsewhere. The
            solve's record (bytes measured and predicted per pair, the variant that ran
            and why: ``extra["solve_variant"]``) is :attr:`solve_record`.
        """
        return self._solve_any("solve", B, overwrite_b, root, variant)

    def solve_triangular(self, B, trans=False, overwrite_b=False, root=0, variant="auto"):
        """Y with L Y = B, or with L^T Y = B when ``trans``: one of :meth:`solve`'s two
        passes, run as tasks on the runtime. Collective.

        For a Gaussian process, y^T A^-1 y = ||L^-1 y||^2 needs the forward pass alone
        (half the solve's flops and about half its bytes); ``trans=True`` then gives
        A^-1 y = L^-T (L^-1 y). Like :func:`scipy.linalg.solve_triangular` with
        ``lower=True`` and ``trans`` 0 or 1.

        Parameters
        ----------
        B : DistributedMatrix or numpy.ndarray
            Right-hand sides, as for :meth:`solve` (a numpy array on ``root``: Y comes
            back to ``root`` as one).
        trans : bool
            False: solve L Y = B (forward); True: L^T Y = B (backward).
        overwrite_b : bool
            Solve in place in B's tiles (no copy); a read-only tile is a UsageError.
        root : int
            The rank that holds a numpy B and receives Y (default 0).
        variant : {"auto", "rhs", "factor"}
            The graph, as for :meth:`solve` (chosen for this pass alone).

        Returns
        -------
        DistributedMatrix or numpy.ndarray or None
            Y, laid out like B (a numpy B: on ``root``, None elsewhere). The record (operation ``"forward_solve"`` or
            ``"backward_solve"``, bytes measured and predicted per pair by
            ``solve_transfer_pairs_bytes(..., which="forward"|"backward")``) is
            :attr:`solve_record`.
        """
        session = self._running_session("solve_triangular")
        valid = isinstance(trans, (bool, np.bool_))
        # every rank must run the same pass: the value is compared too
        agree(session.comm, None if valid else UsageError(
            f"trans must be True or False, got {trans!r}", param="trans"),
            same={"trans": bool(trans) if valid else repr(trans)})
        return self._solve_any("backward_solve" if trans else "forward_solve", B,
                               overwrite_b, root, variant)

    def _solve_any(self, operation, B, overwrite_b, root, variant="auto"):
        """:meth:`_solve` of a DistributedMatrix B, or of a numpy array on ``root``
        (scattered, solved, gathered back to ``root``; what other ranks pass is ignored,
        as by :meth:`DistributedMatrix.from_numpy`). The ranks agree first on which it
        is: a DistributedMatrix on some ranks only is the same UsageError on every rank,
        naming both ways. Collective."""
        from .distributed import check_root

        session = self._running_session("solve" if operation == "solve"
                                        else "solve_triangular")
        comm = session.comm
        error, mode = None, None
        try:
            root = check_root(root, comm)
            _check_variant(variant)
            mode = ("distributed" if isinstance(B, DistributedMatrix) else
                    "none" if B is None else "array")
        except Exception as exc:  # noqa: BLE001 - shared below
            error = exc
        modes = comm.allgather(mode)
        if error is None and "distributed" in modes and set(modes) != {"distributed"}:
            error = UsageError(
                "B must be a DistributedMatrix on every rank, or a numpy array on the root "
                f"rank ({root}) and None elsewhere; the ranks gave "
                + ", ".join(f"rank {r}: {m}" for r, m in enumerate(modes)), param="B")
        agree(comm, error, same={"root": root, "variant": repr(variant)})
        if set(modes) == {"distributed"}:
            return self._solve(operation, B, overwrite_b, variant)
        L = self.L
        error, shape, array = None, None, None
        if comm.Get_rank() == root:
            try:
                array = np.asarray(B)
                shape = array.shape
                if array.ndim == 1:
                    array = array.reshape(-1, 1)
                if array.ndim != 2 or array.shape[0] != L.n or array.shape[1] < 1:
                    raise UsageError(f"B must have N = {L.n} rows (N entries, or N x K), "
                                     f"got shape {shape}", param="B")
                if array.dtype.kind not in "fiu":
                    raise UsageError(f"B must hold real numbers, got dtype {array.dtype}",
                                     param="B")
                array = np.asarray(array, dtype=L.dtype)
            except Exception as exc:  # noqa: BLE001 - shared below
                error = exc
        agree(comm, error)
        shape = comm.bcast(shape, root=root)
        Bd = DistributedMatrix.from_numpy(array, L.nb, self.tile_map, kind="rhs", root=root,
                                          comm=comm)
        X = self._solve(operation, Bd, True, variant).gather(root)
        return None if X is None else X.reshape(shape)

    def _solve(self, operation, B, overwrite_b, variant="auto"):
        """:meth:`solve` or :meth:`solve_triangular`: the passes of ``operation``
        (:data:`~starchol.model.volume.SOLVE_PASSES`) by the graph of ``variant``
        (checked and agreed on by the caller). Collective."""
        which = SOLVE_PASSES[operation]
        method = "solve" if operation == "solve" else "solve_triangular"
        session, L = self._running_session(method), self.L
        comm = session.comm
        check_operand(comm, B, "B", self.tile_map, "overwrite_b" if overwrite_b else None,
                       kind="rhs", n=L.n, nb=L.nb, dtype=L.dtype)
        X = B if overwrite_b else B.copy()
        name, summary, predicted = solve_variant(session, self.tile_map, L, B.ncols, which,
                                                 variant)
        count = solve_task_count(L.nt, X.kt, which)
        with session.computation(deferred=_small_graph(count, comm), measured=True) as c:
            hl = c.register(L.owners, L.tiles, L.rows, elemsize=L.itemsize)
            hb = c.register(X.owners, X.tiles, X.rows, X.cols, stored=X.stored,
                            elemsize=X.itemsize)
            if name == "rhs":
                tasks = submit_solve_rhs(c, _graphs(), hl, hb, L, X, comm.Get_size(),
                                         which)
            else:
                tasks = _graphs().solve(hl, hb, forward=which != "backward",
                                        backward=which != "forward")
            c.submitted()
            c.wait()   # no callback: nothing to agree on
        self.solve_record = _record(session, operation, self.tile_map, L, c, tasks,
                                    predicted if session.stats else None, nrhs=B.ncols,
                                    extra={"solve_variant": summary})
        return X

    def residual(self, A):
        """||A - L L^T||_F / ||A||_F, computed where the tiles live (the update as
        SYRK/GEMM tasks, the norms scaled, so that entries near
        1e300 or 1e-300 neither overflow nor underflow:
        :meth:`~starchol.linalg.distributed.DistributedMatrix.frobenius_parts`).
        Collective. A: the factored matrix, a ``DistributedMatrix`` laid out like L."""
        session, L = self._running_session("residual"), self.L
        comm = session.comm
        check_operand(comm, A, "A", self.tile_map, factor=L, kind="symmetric", n=L.n,
                       nb=L.nb, dtype=L.dtype)
        R = A.copy()
        amax_a, ssq_a = A.frobenius_parts()
        nt = L.nt
        with session.computation(deferred=_small_graph(task_count(nt), comm)) as c:
            _graphs().llt_residual(c.register(L.owners, L.tiles, L.rows, elemsize=L.itemsize),
                                   c.register(R.owners, R.tiles, R.rows, elemsize=R.itemsize))
            c.wait()   # no callback: nothing to agree on
        amax_r, ssq_r = R.frobenius_parts()
        if not 0.0 < amax_a < np.inf:      # A is zero, or holds NaN or Inf
            return float(amax_r * np.sqrt(ssq_r)) if amax_a == 0.0 else float("nan")
        # the ratio of the scaled norms: exact for entries near 1e300 or 1e-300 too
        return float(amax_r / amax_a * np.sqrt(ssq_r / ssq_a))

    def solve_residual(self, A, X, B):
        """The backward error of a solve, ||B - A X||_F / (||A||_F ||X||_F + ||B||_F).
        Collective.

        R = B - A X is computed where the tiles live: row tile i of R, on the owner of
        L's diagonal tile (i, i), takes A[i][k] X[k] (and A[k][i]^T X[k] above the
        diagonal) as GEMM tasks, with A's tiles sent to it and freed row by row. A
        backward-stable solve gives about the unit roundoff times a small factor
        (about 1e-16 in float64, 1e-7 in float32), whatever the condition of A. The
        norms are taken from scaled parts (:meth:`~starchol.linalg.distributed.
        DistributedMatrix.frobenius_parts`) and combined in logarithms, so entries near
        1e300 or 1e-300 neither overflow nor underflow. The bytes this check sends are
        in no record.

        Parameters
        ----------
        A : DistributedMatrix
            The factored matrix (kind ``"symmetric"``, laid out like L; not the factor
            itself). Not modified.
        X : DistributedMatrix
            The solution, as :meth:`solve` returned it (kind ``"rhs"``, N x K).
        B : DistributedMatrix
            The right-hand sides that were solved, laid out like ``X``. Not modified.

        Returns
        -------
        float
            The same on every rank; 0 when B, X and R are all zero, NaN when an entry
            of A, X or B is NaN or infinite.
        """
        session, L = self._running_session("solve_residual"), self.L
        comm = session.comm
        check_operand(comm, A, "A", self.tile_map, factor=L, kind="symmetric", n=L.n,
                       nb=L.nb, dtype=L.dtype)
        check_operand(comm, X, "X", self.tile_map, kind="rhs", n=L.n, nb=L.nb,
                       dtype=L.dtype)
        check_operand(comm, B, "B", self.tile_map, kind="rhs", n=L.n, nb=L.nb,
                       dtype=L.dtype, ncols=X.ncols)
        R = rhs_residual(session, A, X, B, tile_map=self.tile_map)
        return backward_error(R.frobenius_parts(), A.frobenius_parts(),
                               X.frobenius_parts(), B.frobenius_parts())


@functools.lru_cache(maxsize=4)
def _strict_upper(n):
    """A read-only bool (n, n) mask of the strict upper triangle (cached per tile size)."""
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def _symmetrized(t):
    """A full symmetric copy of a diagonal tile from its lower triangle (Fortran order):
    one copy and one masked pass (three np.tril passes took 6 ms per 512 x 512 tile)."""
    out = np.array(t, order="F", copy=True)
    np.copyto(out, out.T, where=_strict_upper(out.shape[0]))
    return out


def symmetric_tiles(A):
    """A's local tiles for :func:`rhs_residual`: the diagonal ones as full symmetric
    copies made from their lower triangle, the others as they are (views). Local."""
    return {ij: (_symmetrized(t) if ij[0] == ij[1] else t) for ij, t in A.tiles.items()}


def rhs_residual(session, A, X, B, tiles=None, tile_map=None, variant="auto"):
    """R = B - A X as GEMM tasks: the body of :meth:`Factor.solve_residual`, without
    its checks. Collective.

    ``A`` symmetric (lower tiles, laid out by ``tile_map``), ``X`` and ``B`` right-hand
    sides (N x K) of A's dtype, all checked by the caller. ``tiles``: A's
    :func:`symmetric_tiles`, when the caller keeps them for several residuals (else
    made here). ``variant``: ``"factor"`` (the ``symm_residual`` graph: every task where
    R's row tile lives, A's tiles move; its bytes
    :func:`~starchol.model.volume.residual_transfer_pairs_bytes`), ``"rhs"`` (the
    ``symm_residual_rhs`` graph: A in place, X's blocks and partial sums move;
    :func:`~starchol.model.rhs_volume.rhs_residual_transfer_pairs_bytes`) or
    ``"auto"`` (fewer bytes on the busiest link; needs ``tile_map``, else
    ``"factor"``). Returns R, laid out like B; A, X and B are not modified.
    """
    name = "factor" if tile_map is None and variant == "auto" else variant
    if name == "auto":
        name = residual_variant(session, tile_map, A, X.ncols, variant)[0]
    R = B.copy()
    # the diagonal tiles with both triangles (A stores the lower one): local copies
    if tiles is None:
        tiles = symmetric_tiles(A)
    with session.computation(deferred=_small_graph(X.kt * A.nt * A.nt,
                                                   session.comm)) as c:
        ha = c.register(A.owners, tiles, A.rows, elemsize=A.itemsize)
        hx = c.register(X.owners, X.tiles, X.rows, X.cols, stored=X.stored,
                        elemsize=X.itemsize)
        hr = c.register(R.owners, R.tiles, R.rows, R.cols, stored=R.stored,
                        elemsize=R.itemsize)
        if name == "rhs":
            submit_residual_rhs(c, _graphs(), ha, hx, hr, A, X, session.comm.Get_size())
        else:
            _graphs().symm_residual(ha, hx, hr)
        c.wait()   # no callback: nothing to agree on
    return R


def backward_error(r, a, x, b):
    """||R|| / (||A|| ||X|| + ||B||) from :meth:`DistributedMatrix.frobenius_parts` of
    each, in logarithms (no overflow or underflow); NaN when a part is not finite."""
    parts = (r, a, x, b)
    if not all(np.isfinite(amax) and np.isfinite(ssq) for amax, ssq in parts):
        return float("nan")

    def log_norm(part):
        amax, ssq = part
        with np.errstate(divide="ignore"):
            return np.log(amax) + 0.5 * np.log(ssq) if amax > 0 and ssq > 0 else -np.inf

    lr, la, lx, lb = (log_norm(p) for p in parts)
    denominator = np.logaddexp(la + lx, lb)
    if lr == -np.inf:
        return 0.0
    return float(np.exp(lr - denominator))


def _ranks_error(M, name, comm):
    """The UsageError (naming ``name``) when the DistributedMatrix ``M`` does not live on
    the session's ranks in the session's order (``comm``: the session's communicator),
    else None. Local (``MPI_Comm_compare``). A matrix made on a communicator of the same
    size but of other processes, or of the same processes in another rank order, would
    have its tiles registered on the wrong ranks."""
    size = comm.Get_size()
    if M.comm.Get_size() != size:
        return UsageError(f"{name} lives on {M.comm.Get_size()} rank(s), the session on "
                          f"{size}", param=name)
    from mpi4py import MPI

    if isinstance(M.comm, MPI.Comm) and isinstance(comm, MPI.Comm) and \
            MPI.Comm.Compare(M.comm, comm) not in (MPI.IDENT, MPI.CONGRUENT):
        return UsageError(
            f"{name} lives on a communicator that is not the session's: its rank "
            f"{M.comm.Get_rank()} is the session's rank {comm.Get_rank()} (other processes, "
            f"or the same ones in another order); make it with comm= the communicator "
            f"the session was started on", param=name)
    return None


def check_operand(comm, M, name, tile_map, overwrite=None, factor=None, **expect):
    """UsageError on every rank unless ``M`` (the argument ``name``) is a
    DistributedMatrix laid out by ``tile_map`` as ``expect`` says (kind, n, nb, dtype)
    on every rank, with writable tiles when ``overwrite`` (the name of the overwrite
    parameter given True) says the result goes into them, and is not ``factor`` (the
    factor L itself, which an in-place factorization leaves in A). Collective."""
    error = None
    try:
        if not isinstance(M, DistributedMatrix):
            raise UsageError(f"{name} must be a DistributedMatrix, got {type(M).__name__}",
                             param=name)
        if M is factor:
            raise UsageError(f"{name} is the factor L itself (cholesky with overwrite_a=True "
                             f"wrote L into its tiles); pass the original matrix: keep a "
                             f"copy, {name}.copy(), before factoring in place", param=name)
        error = _ranks_error(M, name, comm)
        if error is not None:
            raise error
        error = M.local_error(tile_map, **expect)
        if isinstance(error, UsageError):
            error = UsageError(f"{name} does not match the factor: {error}",
                               params=(name,) + error.params)
        if error is None and overwrite:
            error = M.read_only_error(overwrite)
    except Exception as exc:  # noqa: BLE001
        error = exc
    agree(comm, error, same=M.signature() if isinstance(M, DistributedMatrix) else {})


def cholesky(A, tile_map, session=None, overwrite_a=False, progress=None, flush=True):
    """Factor A = L L^T under any tile map. Collective.

    Parameters
    ----------
    A : DistributedMatrix
        Symmetric (lower triangle used), float64 or float32, laid out by ``tile_map``.
    tile_map : starchol.distributions.TileMap
        Any map of :func:`starchol.distributions.get_map`: 2D (2dbc, sbc, sbc-basic,
        pplane, aplane, sym) or 2.5D (2dbc25d, sbc25d, sym25d:
        :data:`~starchol.distributions.MAPS_25D`; the slices come from the map), or a
        :class:`~starchol.distributions.custom.CustomMap`; one node per MPI rank.
    session : Session, optional
        A running session. Default: the running session of this process, or a new one
        on A's communicator.
    overwrite_a : bool
        Factor in place in A's tiles (no copy; A then holds L); a read-only tile
        is a UsageError.
    progress : callable, optional
        ``progress(done, total)`` on this rank while its tasks run (every 0.25 s, and
        once at the end; it adds no wait). If it raises, it is not called again, the
        factorization goes on, and every rank then raises :class:`~starchol.runtime.errors.CallbackError`.
    flush : bool
        Drop StarPU-MPI's received copies once read (as the volume model assumes).
        The same on every rank (StarPU-MPI's cache is flushed on all ranks or none).

    Returns
    -------
    Factor

    Raises
    ------
    UsageError
        On every rank, when any rank's input is wrong: a map whose node count is not
        the rank count, A made on a communicator that is not the session's (other
        processes, or the same in another order), A not laid out by the map, a missing or misshapen tile, a wrong
        dtype, ranks given different sizes or maps, or a read-only tile with
        ``overwrite_a``.
    NotPositiveDefiniteError
        On every rank, with the first failing global column.
    CallbackError
        On every rank, after the factorization, when ``progress`` raised on some rank
        (naming it, the rank and the original exception, which is the ``__cause__`` on
        that rank); the session stays usable. A failed factorization takes precedence.
    SessionError
        ``session`` is not running (never started, or shut down).
    """
    session = get_session(A.comm if isinstance(A, DistributedMatrix) else None, session)
    so = _check_cholesky(session.comm, A, tile_map, overwrite_a, flush)
    L = A if overwrite_a else A.copy()
    info = np.zeros(L.nt, dtype=np.int64)
    it = np.ascontiguousarray(tile_map.iteration_slices(L.nt), dtype=np.int64)
    tasks, failed, c = _factor(session, L, so, it, info, flush, progress)
    first, finite = _first_failure(L, info, session.comm, failed)
    if first < L.n:
        raise NotPositiveDefiniteError(first, L.n, finite=finite)
    predicted = None
    if session.stats:
        predicted = predicted_pairs_bytes("cholesky", tile_map, L.n, L.nb,
                                          cache=session.cache, itemsize=L.itemsize)
    return Factor(L, tile_map, session,
                  _record(session, "cholesky", tile_map, L, c, tasks, predicted))


def _check_cholesky(comm, A, tile_map, overwrite_a, flush):
    """:func:`cholesky`'s checks: the same UsageError on every rank, else the slices'
    owners (c, nt, nt), int64. Collective."""
    error, so = None, None
    try:
        check_map(tile_map, comm.Get_size())
        if not isinstance(A, DistributedMatrix):
            raise UsageError(f"A must be a DistributedMatrix, got {type(A).__name__}",
                             param="A")
        error = _ranks_error(A, "A", comm) or A.local_error(tile_map, kind="symmetric")
        if error is None and overwrite_a:
            error = A.read_only_error("overwrite_a")
        if error is None:       # the slices' owners, once: for the agreement and the graph
            so = np.ascontiguousarray(tile_map.owner_maps(A.nt), dtype=np.int64)
    except Exception as exc:  # noqa: BLE001
        error = exc
    signature = A.signature() if isinstance(A, DistributedMatrix) else {}
    # the map by its owners, not only its description (two custom maps may share one)
    # flush too: StarPU-MPI's cache flush must happen on every rank or on none
    agree(comm, error, same={**signature,
                             "tile_map": map_key(tile_map, getattr(A, "nt", 0), so),
                             "flush": flush if isinstance(flush, bool) else repr(flush)})
    return so


def _factor(session, L, so, it, info, flush, progress):
    """The Cholesky graph of L in place, over the slices whose owners are ``so`` (c, nt,
    nt), iteration k on slice ``it[k]``, POTRF failures in ``info``. Returns the tasks this rank submitted, this rank's
    ``CallbackError`` or None (for the caller to agree on) and the
    :class:`~starchol.runtime.computation.Computation` (its times and bytes). Collective.

    The workers sleep while this thread registers the tiles and submits the first panel
    (the whole graph when it is small), then run it while the rest is submitted: workers
    woken earlier only compete with this thread for the cores
    (benchmarks/small_sizes.py). With GPUs, final tiles are copied back while the
    factorization goes on (``c.writeback``)."""
    nt, c = L.nt, so.shape[0]
    split = nt if _small_graph(task_count(nt), session.comm) else 1
    graphs = _graphs()
    with session.computation(deferred=True, measured=True) as comp:
        home = comp.register(L.owners, L.tiles, L.rows, elemsize=L.itemsize)
        partials = [comp.register(so[s], {}, L.rows, stored=partial_mask(nt, c, s, it),
                                  lazy=True, elemsize=L.itemsize)
                    for s in range(c)] if c > 1 else []
        # from here on, even when it fails or is interrupted, L holds a (partial) factor
        L.factor = True
        tasks = graphs.cholesky(home, partials, so, it, info, flush, 0, split,
                                comp.writeback)
        if split < nt:
            comp.wake()
            tasks += graphs.cholesky(home, partials, so, it, info, flush, split, nt,
                                     comp.writeback)
        comp.submitted()
        failed = comp.wait(progress, local_task_count(so, session.comm.Get_rank(), it)
                           if progress else None)
    return tasks, failed, comp


def _first_failure(L, info, comm, failed=None):
    """The first global column where the factorization failed, on every rank, and whether
    its pivot was finite: ``(L.n, True)`` when none did. Collective.

    ``failed``: this rank's :class:`~starchol.runtime.errors.CallbackError` (its
    ``progress`` callback raised), or None. When no column failed and some rank's
    callback raised, every rank raises that rank's error (the lowest one's): a failed
    factorization takes precedence.

    A failure is LAPACK's ``info`` of a POTRF (1-based inside tile k: a pivot <= 0), or
    a diagonal entry of a local factor tile that is NaN or Inf: OpenBLAS's ``?potrf``
    passes NaN pivots without an error (cuSOLVER's is not relied on either), and a NaN or Inf anywhere in A's
    lower triangle reaches the diagonal of a later tile through TRSM and SYRK. Costs
    one pass over NB entries per local diagonal tile.
    """
    local = 2 * L.n
    bad = np.nonzero(info > 0)[0]
    if len(bad):
        local = 2 * int(L.offsets[bad[0]] + info[bad[0]] - 1)
    for k in range(L.nt):
        tile = L.tiles.get((k, k))
        if tile is None:
            continue
        off = np.nonzero(~np.isfinite(np.diagonal(tile)))[0]
        if len(off):
            local = min(local, 2 * int(L.offsets[k] + off[0]) + 1)
            break
    # one reduction, in which a rank whose callback raised sends -1; then (rarely, on
    # every rank alike) the column again, and the callback's error if none failed
    first = allreduce_min(comm, -1 if failed is not None else local)
    if first < 0:
        first = allreduce_min(comm, local)
        if first >= 2 * L.n:
            agree_callback_error(comm, failed)
    return first // 2, not first % 2


def _record(session, operation, tile_map, L, computation, tasks, predicted, nrhs=0,
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


__all__ = ["backward_error", "check_operand", "cholesky", "Factor", "get_session",
           "partial_mask", "rhs_residual", "symmetric_tiles"]
