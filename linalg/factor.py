"""The Cholesky factor of a distributed matrix (:class:`Factor`, from
:func:`~starchol.linalg.cholesky.cholesky`) and what it computes: solves (the tiled
triangular passes as tasks, by either graph), log det, the residual of the factorization
and the backward error of a solve, their norms scaled so that no entry overflows or
underflows."""
import functools

import numpy as np

from ..collective import agree
from ..errors import UsageError
from ..model.counts import solve_task_count, task_count
from ..model.handles import llt_residual_handles, solve_handles, symm_residual_handles
from ..model.operations import SOLVE_PASSES
from ..model.rhs_volume import check_variant
from ..runtime.errors import SessionError
from .computations import computation_record, graphs, small_graph, submit_windowed
from .distributed import DistributedMatrix, check_root
from .operands import check_operand
from .rhs_solve import residual_variant, solve_variant, submit_residual_rhs, submit_solve_rhs


def check_solve_variant(variant):
    """UsageError unless ``variant`` names a solve variant or ``"auto"``."""
    try:
        check_variant(variant)
    except ValueError as exc:
        raise UsageError(str(exc), param="variant") from None


class Factor:
    """The Cholesky factor L (A = L L^T) of a distributed matrix, from
    :func:`~starchol.linalg.cholesky.cholesky`.

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
    window : int
        The submission window W in iterations of the factorization (``cholesky(...,
        window=W)``, by default :func:`~starchol.model.memory.default_window`; 0: none).
        :meth:`solve`, :meth:`solve_triangular`, :meth:`residual` and
        :meth:`solve_residual` are submitted in the same window: a rank submits step k
        of a pass (row k of a residual) once its own tasks of step k - W are done
        (the backward pass's steps follow the forward pass's, so the window spans the
        two). The results and the bytes moved are the same whatever W.
    """

    def __init__(self, L, tile_map, session, record, window=0):
        self.L = L
        L.factor = True
        self.tile_map = tile_map
        self.session = session
        self.record = record
        self.solve_record = None
        self.window = int(window)
        # the variant chosen for each (K, passes, requested variant, cache setting), with
        # the model's figures: counted once (about 1 s at NT = 1000), reused by later
        # solves (a refinement's, a likelihood's many)
        self._variants = {}

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
        session = self._running_session("solve" if operation == "solve"
                                        else "solve_triangular")
        comm = session.comm
        error, mode = None, None
        try:
            root = check_root(root, comm)
            check_solve_variant(variant)
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
        key = (B.ncols, which, variant, session.cache)
        if key not in self._variants:
            self._variants[key] = solve_variant(session, self.tile_map, L, B.ncols, which,
                                                variant)
        name, summary, predicted = self._variants[key]
        count = solve_task_count(L.nt, X.kt, which)
        with session.computation(deferred=small_graph(count, comm), measured=True) as c:
            # L's tiles this rank owns or its tasks read (model.handles)
            hl = c.register(L.owners, L.tiles, L.rows, elemsize=L.itemsize,
                            stored=solve_handles(L.owners, comm.Get_rank(), name, which))
            hb = c.register(X.owners, X.tiles, X.rows, X.cols, stored=X.stored,
                            elemsize=X.itemsize)
            if name == "rhs":
                tasks = submit_solve_rhs(c, graphs(), hl, hb, L, X, comm.Get_size(),
                                         which, self.window)
            else:
                forward, backward = which != "backward", which != "forward"

                def submit(k_begin, k_end, track):
                    return graphs().solve(hl, hb, forward, backward, k_begin, k_end, track)

                # the steps of the forward, then the backward pass: 2 NT iterations
                tasks = submit_windowed(c, submit, 2 * L.nt, self.window)
            c.submitted()
            c.wait()   # no callback: nothing to agree on
        self.solve_record = computation_record(session, operation, self.tile_map, L, c, tasks,
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
        with session.computation(deferred=small_graph(task_count(nt), comm)) as c:
            used_l, used_r = llt_residual_handles(L.owners, comm.Get_rank())
            hl = c.register(L.owners, L.tiles, L.rows, stored=used_l, elemsize=L.itemsize)
            hr = c.register(R.owners, R.tiles, R.rows, stored=used_r, elemsize=R.itemsize)
            submit_windowed(c, lambda k_begin, k_end, track: graphs().llt_residual(
                hl, hr, k_begin, k_end, track), nt, self.window)
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
        R = rhs_residual(session, A, X, B, tile_map=self.tile_map, window=self.window)
        return backward_error(R.frobenius_parts(), A.frobenius_parts(),
                               X.frobenius_parts(), B.frobenius_parts())


@functools.lru_cache(maxsize=4)
def strict_upper(n):
    """A read-only bool (n, n) mask of the strict upper triangle (cached per tile size)."""
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def symmetrized(t):
    """A full symmetric copy of a diagonal tile from its lower triangle (Fortran order):
    one copy and one masked pass (three np.tril passes took 6 ms per 512 x 512 tile)."""
    out = np.array(t, order="F", copy=True)
    np.copyto(out, out.T, where=strict_upper(out.shape[0]))
    return out


def symmetric_tiles(A):
    """A's local tiles for :func:`rhs_residual`: the diagonal ones as full symmetric
    copies made from their lower triangle, the others as they are (views). Local."""
    return {ij: (symmetrized(t) if ij[0] == ij[1] else t) for ij, t in A.tiles.items()}


def rhs_residual(session, A, X, B, tiles=None, tile_map=None, variant="auto", window=0):
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
    ``"factor"``). ``window``: the submission window in row tiles (0: the whole graph
    at once; :attr:`Factor.window`). Returns R, laid out like B; A, X and B are not
    modified.
    """
    name = "factor" if tile_map is None and variant == "auto" else variant
    if name == "auto":
        name = residual_variant(session, tile_map, A, X.ncols, variant)[0]
    R = B.copy()
    # the diagonal tiles with both triangles (A stores the lower one): local copies
    if tiles is None:
        tiles = symmetric_tiles(A)
    with session.computation(deferred=small_graph(X.kt * A.nt * A.nt,
                                                   session.comm)) as c:
        ha = c.register(A.owners, tiles, A.rows, elemsize=A.itemsize,
                        stored=symm_residual_handles(A.owners, session.comm.Get_rank(),
                                                     name))
        hx = c.register(X.owners, X.tiles, X.rows, X.cols, stored=X.stored,
                        elemsize=X.itemsize)
        hr = c.register(R.owners, R.tiles, R.rows, R.cols, stored=R.stored,
                        elemsize=R.itemsize)
        if name == "rhs":
            submit_residual_rhs(c, graphs(), ha, hx, hr, A, X, session.comm.Get_size(),
                                window)
        else:
            submit_windowed(c, lambda k_begin, k_end, track: graphs().symm_residual(
                ha, hx, hr, k_begin, k_end, track), A.nt, window)
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
