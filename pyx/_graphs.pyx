# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The task graphs of starchol (``starchol.runtime._graphs``): tiled Cholesky (2D and
2.5D in one loop), the triangular solves of L L^T X = B, and the residuals A - L L^T
and B - A X.

Each graph is a plain C loop under ``nogil`` that calls the binding
(``starchol/runtime/_binding.pxd``: ``ins1/ins2/ins3``, cache flushes) with the codelets
of ``_kernels``. Each rank inserts only the tasks it runs, and sends its tiles to the
tasks it feeds; every task runs on the owner of the tile it writes. A NULL handle is a
tile this rank does not use (``starchol.model.handles``). Tiles are (i, j) = (tile row, tile column), lower
triangle i >= j, panel index k. A loop returns the first non-zero StarPU status; the
Python wrapper turns it into StarPUError through the binding's CHKERR.
"""
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free

from starpu cimport *
from starchol.runtime._binding cimport (TileHandles, CHKERR, my_rank, ins1, ins2, ins3,
                                        cache_flush, release_submit, write_back,
                                        panel_begin, panel_end)
from starchol.runtime._kernels cimport Codelets, codelets


cdef inline int64_t _ij(int nt, int i, int j) noexcept nogil:
    return <int64_t>i * nt + j


cdef bint _single(TileHandles a) except -1:
    if a.elemsize not in (4, 8):
        raise ValueError(f"tiles of {a.elemsize}-byte entries are not supported")
    return a.elemsize == 4


# ---------------------------------------------------------------------------
# Cholesky: right-looking, lower, over c slices (c = 1: the 2D algorithm)
# ---------------------------------------------------------------------------
def cholesky(TileHandles home, list partials, int64_t[:, :, ::1] slice_owners,
             int64_t[::1] iter_slice, int64_t[::1] info, bint flush=True, int k_begin=0,
             int k_end=-1, bint writeback=False, bint track=False):
    """Submit the tiled Cholesky of ``home`` over c = slice_owners.shape[0] slices.

    Iteration k runs on slice s = ``iter_slice[k]`` (the map's ``iteration_slices``,
    each in 0..c-1). ``home`` holds the factoring copies: tile (i, j) of slice
    iter_slice[j] with A's values, owned by that slice's owner of (i, j) (the factor
    ends there); a rank has handles only for the tiles it owns or its tasks read
    (``starchol.model.handles``: NULL elsewhere, in ``partials`` too) and unregisters
    the other ranks' tiles of column k once iteration k is submitted. For c > 1, ``partials[s]`` holds slice s's other copies (handles only
    for tiles (i, j) of the columns j that s updates, iter_slice[k] == s for some k < j,
    and does not factor, iter_slice[j] != s; registered lazy); ``partials`` is empty for
    c = 1. At iteration k, each other slice t that updated column k first adds its
    partial sum into the factoring copy (one ADD task, one transfer), then POTRF/TRSM;
    the SYRK/GEMM updates go into slice s's copies, the first one (s's first iteration)
    in W mode so that a zero copy is only allocated then. Priorities are Chameleon's (pzpotrf) for the
    ADD, POTRF and TRSM tasks; the updates of one tile column n at step k share one
    priority, 2 nt - 2 k - 2 n (Chameleon's 2 nt - 2 k - n - m ranks them by
    anti-diagonal), so that StarPU's priority queues hand a worker the updates of one
    column in order and the tile L[n][k] they all read stays in its cache: the mean
    256 x 256 GEMM went from 0.69-0.70 ms to 0.66-0.67 ms on 2 workers
    (benchmarks/small_sizes.py, N = 4096).
    LAPACK's info of tile k lands in ``info[k]``. Returns the tasks that run on this rank.
    Collective.

    ``k_begin``/``k_end`` submit only iterations k_begin <= k < k_end (k_end = -1: to
    the end); consecutive calls covering 0..nt-1 in order submit the whole graph (the
    caller may wake the workers after the first panel). ``info`` is zeroed when
    ``k_begin`` is 0.

    ``writeback``: once panel k is submitted, each of this rank's tiles of column k is
    final; StarPU is told so (``starpu_data_wont_use``) and copies it back to host memory
    when the bus is idle, instead of all at the unregistration (for CUDA workers).

    ``track``: this rank's tasks of iteration k are counted in the binding's counter k
    (``panel_track`` first), for the submission window (``panel_wait``).
    """
    cdef int c = slice_owners.shape[0], nt = home.nt, s
    if k_end < 0:
        k_end = nt
    if not 0 <= k_begin <= k_end <= nt:
        raise ValueError(f"cholesky: iterations {k_begin}..{k_end} outside 0..{nt}")
    if (home.h == NULL or slice_owners.shape[1] != nt or slice_owners.shape[2] != nt
            or info.shape[0] != nt or iter_slice.shape[0] != nt
            or len(partials) != (c if c > 1 else 0)):
        raise ValueError("cholesky: inconsistent handles, owners, iteration slices or info")
    for s in range(nt):
        if not 0 <= iter_slice[s] < c:
            raise ValueError(f"cholesky: iteration {s} on slice {iter_slice[s]}, not "
                             f"0..{c - 1}")
    cdef starpu_data_handle_t **ch = <starpu_data_handle_t **>malloc(c * sizeof(void *))
    cdef int64_t **co = <int64_t **>malloc(c * sizeof(void *))
    # first[t]: slice t's first iteration (nt if none)
    cdef int64_t *first = <int64_t *>malloc(c * sizeof(int64_t))
    if ch == NULL or co == NULL or first == NULL:
        free(ch)
        free(co)
        free(first)
        raise MemoryError()
    for s in range(c):
        first[s] = nt
    for s in range(nt - 1, -1, -1):
        first[iter_slice[s]] = s
    cdef TileHandles t
    for s in range(c):
        co[s] = &slice_owners[s, 0, 0]
        if c > 1:
            t = partials[s]
            ch[s] = t.h
        else:
            ch[s] = home.h
    if k_begin == 0:
        info[:] = 0
    cdef Codelets *cl = codelets(_single(home))
    cdef int64_t count = 0
    cdef int rc
    with nogil:
        rc = _cholesky(cl, home.h, ch, co, &iter_slice[0], first, c, nt, k_begin, k_end,
                       my_rank(), &info[0], flush, writeback, track, &count)
    free(ch)
    free(co)
    free(first)
    CHKERR(rc, "starpu_task_insert (Cholesky)")
    return count


cdef int _cholesky(Codelets *cl, starpu_data_handle_t *home, starpu_data_handle_t **ch,
                   int64_t **co, int64_t *it, int64_t *first, int c, int nt, int k_begin,
                   int k_end, int me, int64_t *info, bint flush, bint writeback,
                   bint track, int64_t *count) noexcept nogil:
    cdef int rc = _cholesky_panels(cl, home, ch, co, it, first, c, nt, k_begin, k_end, me, info,
                          flush, writeback, track, count)
    if track:
        panel_end()
    return rc


cdef int _cholesky_panels(Codelets *cl, starpu_data_handle_t *home,
                          starpu_data_handle_t **ch, int64_t **co, int64_t *it,
                          int64_t *first, int c, int nt, int k_begin, int k_end, int me,
                          int64_t *info, bint flush, bint writeback, bint track,
                          int64_t *count) noexcept nogil:
    # Slice s's copy of tile (i, j): home[ij] when it[j] == s (the factoring copy),
    # else ch[s][ij] (a partial sum, zero until its first update at k = first[s]).
    cdef int k, m, n, s, t, rc = 0
    cdef int64_t *own
    cdef int64_t mk, nk, nn, mn, kk
    cdef starpu_data_handle_t hp, ht
    cdef int prio
    cdef bint zero
    for k in range(k_begin, k_end):
        if track:
            panel_begin(k)
        s = it[k]
        own = co[s]
        # A[m][k] += P_t[m][k] for every other slice t that updated column k (first[t] < k;
        # one transfer each)
        for m in range(k, nt):
            mk = _ij(nt, m, k)
            prio = 2 * nt - 2 * k - (0 if m == k else m)
            for t in range(c):
                if t == s or first[t] >= k:
                    continue
                hp = ch[t][mk]
                rc = ins2(cl.add, prio, STARPU_R, hp, co[t][mk], STARPU_RW, home[mk],
                          own[mk], me, count)
                if rc != 0:
                    return rc
                # the partial sum is read once: release it (and any received copy)
                if flush:
                    cache_flush(hp)
                release_submit(hp)
                ch[t][mk] = NULL
        # L[k][k] = POTRF(A[k][k])
        kk = _ij(nt, k, k)
        rc = ins1(cl.potrf, 2 * nt - 2 * k, STARPU_RW, home[kk], own[kk], <void *>&info[k],
                  sizeof(int64_t), me, count)
        if rc != 0:
            return rc
        # L[m][k] = A[m][k] L[k][k]^-T,  m > k
        for m in range(k + 1, nt):
            mk = _ij(nt, m, k)
            rc = ins2(cl.trsm, 2 * nt - 2 * k - m, STARPU_R, home[kk], own[kk],
                      STARPU_RW, home[mk], own[mk], me, count)
            if rc != 0:
                return rc
        # updates into slice s's copies; the first one of a zero copy writes it (W)
        for n in range(k + 1, nt):
            nk = _ij(nt, n, k)
            zero = k == first[s] and it[n] != s
            nn = _ij(nt, n, n)
            ht = home[nn] if it[n] == s else ch[s][nn]
            # A_s[n][n] -= L[n][k] L[n][k]^T
            prio = 2 * nt - 2 * k - 2 * n      # one priority per tile column and step
            rc = ins2(cl.syrk0 if zero else cl.syrk, prio,
                      STARPU_R, home[nk], own[nk],
                      STARPU_W if zero else STARPU_RW, ht, own[nn], me, count)
            if rc != 0:
                return rc
            # A_s[m][n] -= L[m][k] L[n][k]^T,  m > n
            for m in range(n + 1, nt):
                mk = _ij(nt, m, k)
                mn = _ij(nt, m, n)
                ht = home[mn] if it[n] == s else ch[s][mn]
                rc = ins3(cl.gemm0 if zero else cl.gemm, prio,
                          STARPU_R, home[mk], own[mk], STARPU_R, home[nk], own[nk],
                          STARPU_W if zero else STARPU_RW, ht, own[mn], me, count)
                if rc != 0:
                    return rc
        # column k is final and read by no later task: drop the received copies, and
        # (GPU runs) send this rank's own tiles of it home now, overlapping the
        # device-to-host copies with the rest of the factorization
        if flush or writeback:
            for m in range(k, nt):
                mk = _ij(nt, m, k)
                if flush:
                    cache_flush(home[mk])
                if writeback and own[mk] == me:
                    write_back(home[mk])
        # ... and this rank's handles of the other ranks' tiles of it are unregistered
        # (starchol.model.handles)
        for m in range(k, nt):
            mk = _ij(nt, m, k)
            if own[mk] != me and home[mk] != NULL:
                release_submit(home[mk])
                home[mk] = NULL
    return 0


# ---------------------------------------------------------------------------
# Solve L L^T X = B: forward L Y = B, then backward L^T X = Y, in place in B
# ---------------------------------------------------------------------------
def solve(TileHandles L, TileHandles B, bint forward=True, bint backward=True,
          int k_begin=0, int k_end=-1, bint track=False):
    """Submit the tiled triangular solves of L L^T X = B, in place in B (or one of them:
    ``forward`` L Y = B, ``backward`` L^T X = B). Collective.

    ``L`` is the factor (nt x nt lower tiles, on the factor's owners F); ``B`` is
    nt x kt tiles whose row tile i lives on F[i, i]. Forward, k = 0..nt-1:
    B[k] = L[k][k]^-1 B[k] (TRSM), then B[m] -= L[m][k] B[k] for m > k (GEMM);
    backward, k = nt-1..0: B[k] = L[k][k]^-T B[k], then B[m] -= L[k][m]^T B[k] for
    m < k. Between the passes B's received copies are flushed (B[k] changes
    value), after the backward pass L's and B's. Returns the tasks that run on this rank.

    Iterations, for the submission window (:func:`_iterations`): g = 0..nt-1 the
    forward steps k = g, g = nt..2 nt-1 the backward steps k = 2 nt-1-g (a pass that
    does not run has no tasks in its iterations); ``k_begin``/``k_end``/``track`` as
    for :func:`cholesky`, over these 2 nt iterations.
    """
    if L.h == NULL or B.h == NULL or B.mt != L.nt or B.elemsize != L.elemsize:
        raise ValueError("solve: the factor and the right-hand sides do not match")
    k_end = _iterations("solve", k_begin, k_end, 2 * L.nt)
    cdef Codelets *cl = codelets(_single(L))
    cdef int64_t count = 0
    cdef int rc
    with nogil:
        rc = _solve(cl, L.h, L.own, B.h, B.own, L.nt, B.nt, my_rank(), forward, backward,
                    k_begin, k_end, track, &count)
        if track:
            panel_end()
    CHKERR(rc, "starpu_task_insert (solve)")
    return count


cdef int _iterations(str graph, int k_begin, int k_end, int n) except -2:
    # k_end (-1: n) of iterations k_begin <= g < k_end of a graph of n iterations
    if k_end < 0:
        k_end = n
    if not 0 <= k_begin <= k_end <= n:
        raise ValueError(f"{graph}: iterations {k_begin}..{k_end} outside 0..{n}")
    return k_end


cdef int _solve(Codelets *cl, starpu_data_handle_t *l, int64_t *lo, starpu_data_handle_t *b,
                int64_t *bo, int nt, int kt, int me, bint forward, bint backward,
                int k_begin, int k_end, bint track, int64_t *count) noexcept nogil:
    cdef int g, k, rc = 0
    for g in range(k_begin, k_end):
        if track:
            panel_begin(g)
        if g < nt:
            if forward:
                rc = _solve_step(cl, l, lo, b, bo, NULL, NULL, nt, kt, 1, g, True, me,
                                 count)
        elif backward:
            rc = _solve_step(cl, l, lo, b, bo, NULL, NULL, nt, kt, 1, 2 * nt - 1 - g,
                             False, me, count)
        if rc != 0:
            return rc
        if g == nt - 1:
            # between the passes
            for k in range(nt * kt):
                cache_flush(b[k])
    if k_end == 2 * nt and k_begin < k_end:
        for k in range(nt * kt):
            cache_flush(b[k])
        for k in range(nt):
            for g in range(k + 1):
                cache_flush(l[_ij(nt, k, g)])
    return 0


# ---------------------------------------------------------------------------
# Residual R := A - L L^T (lower triangle), for checks
# ---------------------------------------------------------------------------
def llt_residual(TileHandles L, TileHandles R, int k_begin=0, int k_end=-1,
                 bint track=False):
    """Submit R := R - L L^T on the lower triangle (L's diagonal tiles get their strict
    upper triangle zeroed first). R must have L's owners. Returns the tasks that run on
    this rank. Collective.

    Iterations (the submission window): g = row i of R (the zeroing tasks, submitted
    first, count in iteration 0); ``k_begin``/``k_end``/``track`` as for
    :func:`cholesky`."""
    if L.h == NULL or R.h == NULL or R.nt != L.nt or R.elemsize != L.elemsize:
        raise ValueError("llt_residual: the factor and the matrix do not match")
    k_end = _iterations("llt_residual", k_begin, k_end, L.nt)
    cdef Codelets *cl = codelets(_single(L))
    cdef int64_t count = 0
    cdef int rc
    with nogil:
        rc = _residual(cl, L.h, R.h, L.own, L.nt, my_rank(), k_begin, k_end, track, &count)
        if track:
            panel_end()
    CHKERR(rc, "starpu_task_insert (residual)")
    return count


cdef int _residual(Codelets *cl, starpu_data_handle_t *l, starpu_data_handle_t *r,
                   int64_t *own, int nt, int me, int k_begin, int k_end, bint track,
                   int64_t *count) noexcept nogil:
    # R[i][j] -= sum_{k<=j} L[i][k] L[j][k]^T  for i >= j
    cdef int i, j, k, rc = 0
    if k_begin == 0 and k_end > 0:
        if track:
            panel_begin(0)
        for k in range(nt):
            for j in range(k + 1):
                cache_flush(l[_ij(nt, k, j)])
        for j in range(nt):
            rc = ins1(cl.tril, 0, STARPU_RW, l[_ij(nt, j, j)], own[_ij(nt, j, j)], NULL, 0,
                      me, count)
            if rc != 0:
                return rc
    for i in range(k_begin, k_end):
        if track:
            panel_begin(i)
        for j in range(i + 1):
            for k in range(j + 1):
                if i == j:
                    rc = ins2(cl.syrk, 0, STARPU_R, l[_ij(nt, j, k)], own[_ij(nt, j, k)],
                              STARPU_RW, r[_ij(nt, j, j)], own[_ij(nt, j, j)], me, count)
                else:
                    rc = ins3(cl.gemm, 0, STARPU_R, l[_ij(nt, i, k)], own[_ij(nt, i, k)],
                              STARPU_R, l[_ij(nt, j, k)], own[_ij(nt, j, k)],
                              STARPU_RW, r[_ij(nt, i, j)], own[_ij(nt, i, j)], me, count)
                if rc != 0:
                    return rc
    return 0


# ---------------------------------------------------------------------------
# Residual R := B - A X of a solve, for checks
# ---------------------------------------------------------------------------
def symm_residual(TileHandles A, TileHandles X, TileHandles R, int k_begin=0,
                  int k_end=-1, bint track=False):
    """Submit R := R - A X, R holding B: the residual of the solve A X = B. Collective.

    ``A`` is the symmetric matrix by its lower tiles (nt x nt, on the factor's owners
    F), its diagonal tiles with both triangles filled (the caller's symmetric copies);
    ``X`` and ``R`` are nt x kt tiles whose row tile i lives on F[i, i]. Row tile i of R
    takes A[i][k] X[k] for k <= i (GEMM) and A[k][i]^T X[k] for k > i (GEMM, A's tile
    transposed), on R's owner; A[i][k] is last read by row i, so its received copies
    are flushed as each row is submitted, X's at the end. Returns the tasks that run on
    this rank.

    Iterations (the submission window): g = row tile i of R; ``k_begin``/``k_end``/
    ``track`` as for :func:`cholesky`.
    """
    if A.h == NULL or X.h == NULL or R.h == NULL or X.mt != A.nt or R.mt != A.nt \
            or R.nt != X.nt or X.elemsize != A.elemsize or R.elemsize != A.elemsize:
        raise ValueError("symm_residual: the matrix, the solution and the residual do "
                         "not match")
    k_end = _iterations("symm_residual", k_begin, k_end, A.nt)
    cdef Codelets *cl = codelets(_single(A))
    cdef int64_t count = 0
    cdef int rc
    with nogil:
        rc = _symm_residual(cl, A.h, A.own, X.h, X.own, R.h, R.own, A.nt, X.nt,
                            my_rank(), k_begin, k_end, track, &count)
        if track:
            panel_end()
    CHKERR(rc, "starpu_task_insert (solve residual)")
    return count


cdef int _symm_residual(Codelets *cl, starpu_data_handle_t *a, int64_t *ao,
                        starpu_data_handle_t *x, int64_t *xo, starpu_data_handle_t *r,
                        int64_t *ro, int nt, int kt, int me, int k_begin, int k_end,
                        bint track, int64_t *count) noexcept nogil:
    cdef int i, j, k, rc = 0
    cdef int64_t ik, ki
    for i in range(k_begin, k_end):
        if track:
            panel_begin(i)
        for j in range(kt):
            for k in range(nt):
                if k <= i:
                    ik = _ij(nt, i, k)
                    rc = ins3(cl.gemm_fwd, 0, STARPU_R, a[ik], ao[ik],
                              STARPU_R, x[_ij(kt, k, j)], xo[_ij(kt, k, j)],
                              STARPU_RW, r[_ij(kt, i, j)], ro[_ij(kt, i, j)], me, count)
                else:
                    ki = _ij(nt, k, i)
                    rc = ins3(cl.gemm_bwd, 0, STARPU_R, a[ki], ao[ki],
                              STARPU_R, x[_ij(kt, k, j)], xo[_ij(kt, k, j)],
                              STARPU_RW, r[_ij(kt, i, j)], ro[_ij(kt, i, j)], me, count)
                if rc != 0:
                    return rc
        for k in range(i + 1):
            cache_flush(a[_ij(nt, i, k)])
    if k_end == nt and k_begin < k_end:
        for k in range(nt * kt):
            cache_flush(x[k])
    return 0


# ---------------------------------------------------------------------------
# The right-hand-side variant: L (A) stays in place, the blocks of B and the NB x K
# partial sums move (starchol.linalg.rhs_volume counts its bytes)
# ---------------------------------------------------------------------------
def solve_rhs(TileHandles L, TileHandles B, TileHandles Tf, TileHandles Tb, int nodes,
              bint forward=True, bint backward=True, int k_begin=0, int k_end=-1,
              bint track=False):
    """Submit the triangular solves of L L^T X = B in place in B, each product on the
    owner of its tile of L (or one pass: ``forward`` L Y = B, ``backward`` L^T X = B).
    Collective.

    ``L``: nt x nt lower tiles on the factor's owners F; ``B``: nt x kt tiles, row tile
    i on d(i) = F[i, i]. ``Tf`` (forward) and ``Tb`` (backward): the partial sums,
    nt x (kt * nodes) tiles, tile (m, j * nodes + q) on node q, zero-filled, a handle
    only where node q != d(m) writes into row m (forward: q owns some L[m][k], k < m;
    backward: q owns some L[k][m], k > m); None for a pass that does not run.

    Forward, k = 0..nt-1: on d(k), B[k] += Tf_q[k] for each such q (ADD; the partial
    sum is then dropped), B[k] = L[k][k]^-1 B[k] (TRSM); for m > k, on q = F[m, k]:
    Tf_q[m] -= L[m][k] B[k], or B[m] -= L[m][k] B[k] when q = d(m). Backward, k =
    nt-1..0: the same with Tb, L[k][k]^-T and the products L[k][m]^T B[k], m < k, into
    row m. B's received copies are dropped after each pass. Returns the tasks that run
    on this rank.

    Iterations (the submission window): as for :func:`solve`, g = 0..nt-1 forward,
    nt..2 nt-1 backward; ``k_begin``/``k_end``/``track`` as for :func:`cholesky`.
    """
    if L.h == NULL or B.h == NULL or B.mt != L.nt or B.elemsize != L.elemsize:
        raise ValueError("solve_rhs: the factor and the right-hand sides do not match")
    k_end = _iterations("solve_rhs", k_begin, k_end, 2 * L.nt)
    for T, on in ((Tf, forward), (Tb, backward)):
        if on and (T is None or T.h == NULL or T.mt != L.nt or T.nt != B.nt * nodes
                   or T.elemsize != L.elemsize):
            raise ValueError("solve_rhs: the partial sums do not match the right-hand sides")
    cdef Codelets *cl = codelets(_single(L))
    cdef int64_t count = 0
    cdef int rc
    cdef starpu_data_handle_t *tf = Tf.h if forward else NULL
    cdef starpu_data_handle_t *tb = Tb.h if backward else NULL
    cdef int64_t *tfo = Tf.own if forward else NULL
    cdef int64_t *tbo = Tb.own if backward else NULL
    with nogil:
        rc = _solve_rhs(cl, L.h, L.own, B.h, B.own, tf, tfo, tb, tbo, L.nt, B.nt, nodes,
                        my_rank(), forward, backward, k_begin, k_end, track, &count)
        if track:
            panel_end()
    CHKERR(rc, "starpu_task_insert (solve, rhs variant)")
    return count


cdef int _add_partials(Codelets *cl, starpu_data_handle_t *t, int64_t *to,
                       starpu_data_handle_t *b, int64_t *bo, int k, int kt, int nodes,
                       int prio, int me, int64_t *count) noexcept nogil:
    # B[k] += T_q[k] for every node q with a partial sum of row k; each is read once
    cdef int q, j, rc
    cdef int64_t w = <int64_t>kt * nodes, x
    for q in range(nodes):
        for j in range(kt):
            x = <int64_t>k * w + <int64_t>j * nodes + q
            if t[x] == NULL:
                continue
            rc = ins2(cl.add, prio, STARPU_R, t[x], to[x], STARPU_RW, b[_ij(kt, k, j)],
                      bo[_ij(kt, k, j)], me, count)
            if rc != 0:
                return rc
            cache_flush(t[x])
    return 0


cdef int _solve_rhs(Codelets *cl, starpu_data_handle_t *l, int64_t *lo,
                    starpu_data_handle_t *b, int64_t *bo, starpu_data_handle_t *tf,
                    int64_t *tfo, starpu_data_handle_t *tb, int64_t *tbo, int nt, int kt,
                    int nodes, int me, bint forward, bint backward, int k_begin, int k_end,
                    bint track, int64_t *count) noexcept nogil:
    cdef int g, k, rc = 0
    for g in range(k_begin, k_end):
        if track:
            panel_begin(g)
        if g < nt:
            if forward:
                rc = _solve_step(cl, l, lo, b, bo, tf, tfo, nt, kt, nodes, g, True,
                                     me, count)
        elif backward:
            rc = _solve_step(cl, l, lo, b, bo, tb, tbo, nt, kt, nodes, 2 * nt - 1 - g,
                                 False, me, count)
        if rc != 0:
            return rc
        # B's received copies are dropped after each pass
        if (g == nt - 1 and forward) or (g == 2 * nt - 1 and backward):
            for k in range(nt * kt):
                cache_flush(b[k])
    return 0


cdef int _solve_step(Codelets *cl, starpu_data_handle_t *l, int64_t *lo,
                     starpu_data_handle_t *b, int64_t *bo, starpu_data_handle_t *t,
                     int64_t *to, int nt, int kt, int nodes, int k, bint forward,
                     int me, int64_t *count) noexcept nogil:
    # step k of the forward pass (L Y = B: TRSM of row k, products into rows m > k) or
    # of the backward pass (L^T X = Y, k = nt-1 first: into rows m < k, with L's tile
    # (k, m)). t NULL (the factor variant): every product into B, on the owner of B's
    # block (L's tiles move); else (the rhs variant) a product on another node than B's
    # block goes into that node's partial sum in t, added into B at its row's step
    cdef int m, j, m_end, step, rc = 0
    cdef int prio = 2 * nt - k if forward else nt + k
    cdef int64_t kk = _ij(nt, k, k), lt, q, x, w = <int64_t>kt * nodes
    cdef starpu_data_handle_t out
    cdef int64_t oo
    if t != NULL:
        rc = _add_partials(cl, t, to, b, bo, k, kt, nodes, prio, me, count)
        if rc != 0:
            return rc
    for j in range(kt):
        rc = ins2(cl.trsm_fwd if forward else cl.trsm_bwd, prio, STARPU_R, l[kk], lo[kk],
                  STARPU_RW, b[_ij(kt, k, j)], bo[_ij(kt, k, j)], me, count)
        if rc != 0:
            return rc
    if forward:
        m, m_end, step = k + 1, nt, 1
    else:
        m, m_end, step = k - 1, -1, -1
    while m != m_end:
        lt = _ij(nt, m, k) if forward else _ij(nt, k, m)
        q = lo[lt]
        for j in range(kt):
            if t == NULL or q == bo[_ij(kt, m, j)]:
                out, oo = b[_ij(kt, m, j)], bo[_ij(kt, m, j)]
            else:
                x = <int64_t>m * w + <int64_t>j * nodes + q
                out, oo = t[x], to[x]
            rc = ins3(cl.gemm_fwd if forward else cl.gemm_bwd,
                      2 * nt - m if forward else nt + m, STARPU_R, l[lt], lo[lt],
                      STARPU_R, b[_ij(kt, k, j)], bo[_ij(kt, k, j)],
                      STARPU_RW, out, oo, me, count)
            if rc != 0:
                return rc
        m += step
    return 0


def symm_residual_rhs(TileHandles A, TileHandles X, TileHandles R, TileHandles T,
                      int nodes, int k_begin=0, int k_end=-1, bint track=False):
    """Submit R := R - A X (R holding B), each product on the owner of its tile of A.
    Collective.

    ``A``: the symmetric matrix by its lower tiles on the factor's owners F, the
    diagonal tiles with both triangles; ``X``, ``R``: nt x kt tiles, row tile i on
    d(i) = F[i, i]; ``T``: the partial sums, nt x (kt * nodes) tiles, tile
    (i, j * nodes + q) on node q, zero-filled, a handle only where q != d(i) owns a tile
    of row i (A[i][k], k < i) or of column i (A[m][i], m > i). Row i: on d(i),
    R[i] -= A[i][i] X[i]; on q = F[i, k], k < i: T_q[i] -= A[i][k] X[k]; on
    q = F[m, i], m > i: T_q[i] -= A[m][i]^T X[m] (the upper triangle from the lower
    tile); R[i] itself where q = d(i); then R[i] += T_q[i] on d(i) (ADD; the partial sum
    is dropped). X's received copies are dropped at the end. Returns the tasks that run
    on this rank.

    Iterations (the submission window): g = row tile i of R; ``k_begin``/``k_end``/
    ``track`` as for :func:`cholesky`.
    """
    if A.h == NULL or X.h == NULL or R.h == NULL or T is None or T.h == NULL \
            or X.mt != A.nt or R.mt != A.nt or R.nt != X.nt or T.mt != A.nt \
            or T.nt != X.nt * nodes or X.elemsize != A.elemsize \
            or R.elemsize != A.elemsize or T.elemsize != A.elemsize:
        raise ValueError("symm_residual_rhs: the matrix, the solution, the residual and "
                         "the partial sums do not match")
    k_end = _iterations("symm_residual_rhs", k_begin, k_end, A.nt)
    cdef Codelets *cl = codelets(_single(A))
    cdef int64_t count = 0
    cdef int rc
    with nogil:
        rc = _symm_residual_rhs(cl, A.h, A.own, X.h, X.own, R.h, R.own, T.h, T.own, A.nt,
                                X.nt, nodes, my_rank(), k_begin, k_end, track, &count)
        if track:
            panel_end()
    CHKERR(rc, "starpu_task_insert (solve residual, rhs variant)")
    return count


cdef int _symm_residual_rhs(Codelets *cl, starpu_data_handle_t *a, int64_t *ao,
                            starpu_data_handle_t *x, int64_t *xo, starpu_data_handle_t *r,
                            int64_t *ro, starpu_data_handle_t *t, int64_t *to, int nt,
                            int kt, int nodes, int me, int k_begin, int k_end,
                            bint track, int64_t *count) noexcept nogil:
    cdef int i, k, j, rc = 0
    cdef int64_t ii, at, q, y, w = <int64_t>kt * nodes
    cdef starpu_data_handle_t out
    cdef int64_t oo
    cdef starpu_codelet *op
    for i in range(k_begin, k_end):
        if track:
            panel_begin(i)
        ii = _ij(nt, i, i)
        for j in range(kt):
            rc = ins3(cl.gemm_fwd, 0, STARPU_R, a[ii], ao[ii],
                      STARPU_R, x[_ij(kt, i, j)], xo[_ij(kt, i, j)],
                      STARPU_RW, r[_ij(kt, i, j)], ro[_ij(kt, i, j)], me, count)
            if rc != 0:
                return rc
        # k < i: A[i][k] X[k]; k > i: A[k][i]^T X[k]
        for k in range(nt):
            if k == i:
                continue
            at = _ij(nt, i, k) if k < i else _ij(nt, k, i)
            op = cl.gemm_fwd if k < i else cl.gemm_bwd
            q = ao[at]
            for j in range(kt):
                if q == ro[_ij(kt, i, j)]:
                    out, oo = r[_ij(kt, i, j)], ro[_ij(kt, i, j)]
                else:
                    y = <int64_t>i * w + <int64_t>j * nodes + q
                    out, oo = t[y], to[y]
                rc = ins3(op, 0, STARPU_R, a[at], ao[at],
                          STARPU_R, x[_ij(kt, k, j)], xo[_ij(kt, k, j)],
                          STARPU_RW, out, oo, me, count)
                if rc != 0:
                    return rc
        rc = _add_partials(cl, t, to, r, ro, i, kt, nodes, 0, me, count)
        if rc != 0:
            return rc
    if k_end == nt and k_begin < k_end:
        for k in range(nt * kt):
            cache_flush(x[k])
    return 0
