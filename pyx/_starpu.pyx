# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled StarPU-MPI layer of starchol (``starchol.runtime._starpu``).

Only this module sees StarPU and MPI handles. It holds:

- process-wide start/stop of StarPU + StarPU-MPI on one MPI communicator;
- :class:`TileHandles`, the registration of a tiled matrix (one StarPU matrix handle
  per stored tile, with its owner rank and a unique 64-bit tag);
- the codelets and their ``nogil`` kernels (LAPACK/BLAS from SciPy's Cython
  bindings, called single-threaded by the worker that runs the task);
- the task-graph submitters (tiled Cholesky, residual L L^T), written as plain C
  loops under ``nogil``.

Every function returns StarPU's C status (0 or a negative errno); the Python front
(:mod:`starchol.runtime.session`) turns non-zero codes into named exceptions.
"""
from libc.stdint cimport int64_t, uintptr_t, uint32_t
from libc.string cimport memset
from libc.stdlib cimport malloc, free

from scipy.linalg.cython_blas cimport dgemm, dsyrk, dtrsm
from scipy.linalg.cython_lapack cimport dpotrf

from starpu cimport *
from starpu_mpi cimport *

import os
import sys

import numpy as np

# ---------------------------------------------------------------------------
# process-wide state
# ---------------------------------------------------------------------------
cdef bint _started = False
cdef bint _ever_started = False
cdef MPI_Comm _comm
cdef int _rank = 0
cdef int _size = 1
cdef starpu_conf _conf
cdef bytes _sched_name = b""


def compiled_version():
    """StarPU version of the headers this module was compiled with."""
    return (STARPU_MAJOR_VERSION, STARPU_MINOR_VERSION, STARPU_RELEASE_VERSION)


def runtime_version():
    """StarPU version of the library loaded at run time."""
    cdef int a = 0, b = 0, c = 0
    starpu_get_version(&a, &b, &c)
    return (a, b, c)


def max_cpus():
    """Largest number of CPU workers this StarPU build accepts per process."""
    return STARPU_MAXCPUS


def predefined_schedulers():
    """``[(name, description), ...]`` of the scheduling policies StarPU knows."""
    cdef starpu_sched_policy **p = starpu_sched_get_predefined_policies()
    out = []
    cdef int i = 0
    while p[i] != NULL:
        name = p[i].policy_name.decode() if p[i].policy_name != NULL else ""
        desc = p[i].policy_description.decode() if p[i].policy_description != NULL else ""
        out.append((name, desc))
        i += 1
    return out


def is_started():
    return _started


def was_started():
    """True once StarPU-MPI has been started in this process (it cannot restart)."""
    return _ever_started


def init(uintptr_t comm_handle, int ncpus, str sched, int ncuda=0, uintptr_t policy=0,
         uintptr_t policy_init=0):
    """Start StarPU and StarPU-MPI on the communicator whose handle is ``comm_handle``.

    ``ncuda`` CUDA workers (0: none; StarPU without CUDA ignores it). ``policy`` and
    ``policy_init``, when non-zero, are the addresses of a ``struct starpu_sched_policy``
    and its init callback (starchol's heteroprio, see :mod:`starchol.runtime.gpu`); they
    replace the policy named ``sched``.
    MPI must already be initialised (by mpi4py). Returns StarPU's status.
    Collective over the communicator.
    """
    global _started, _ever_started, _comm, _rank, _size, _sched_name
    cdef int rc
    if _started:
        return 0
    _sched_name = sched.encode()
    rc = starpu_conf_init(&_conf)
    if rc != 0:
        return rc
    _conf.ncpus = ncpus
    _conf.ncuda = ncuda
    _conf.nopencl = 0
    _conf.nmic = 0
    _conf.nmpi_ms = 0
    _conf.sched_policy_name = _sched_name
    if policy != 0:
        _conf.sched_policy_name = NULL
        STARCHOL_CONF_SET_SCHED(&_conf, <void *>policy, <void *>policy_init)
    _conf.precedence_over_environment_variables = 1
    _comm = <MPI_Comm>comm_handle
    with nogil:
        rc = starpu_mpi_init_conf(NULL, NULL, 0, _comm, &_conf)
    if rc != 0:
        return rc
    _started = True
    _ever_started = True
    starpu_mpi_comm_rank(_comm, &_rank)
    starpu_mpi_comm_size(_comm, &_size)
    return 0


def shutdown(bint quiet_stats=True):
    """Wait for every task, then stop StarPU-MPI (which also stops StarPU).

    Handles must have been unregistered before. Idempotent. With ``quiet_stats``,
    the byte table StarPU-MPI prints on stderr at shutdown (when STARPU_COMM_STATS=1)
    is discarded: starchol reads the same numbers with comm_amounts().
    """
    global _started
    if not _started:
        return 0
    cdef int rc
    cdef int saved = -1, devnull = -1
    with nogil:
        starpu_task_wait_for_all()
    if quiet_stats:
        sys.stderr.flush()
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    try:
        with nogil:
            rc = starpu_mpi_shutdown()
    finally:
        if saved >= 0:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(devnull)
    _started = False
    return rc


def rank_size():
    return (_rank, _size)


def worker_count():
    return starpu_cpu_worker_get_count()


def wait_tasks():
    """Block until every task submitted by this process has completed."""
    cdef int rc
    with nogil:
        rc = starpu_task_wait_for_all()
    return rc


def tasks_pending():
    """Tasks submitted by this process and not yet completed (for progress displays)."""
    return starpu_task_nsubmitted()


def wait_mpi():
    """Block until all ranks' pending StarPU-MPI requests are done. Collective."""
    cdef int rc
    with nogil:
        rc = starpu_mpi_wait_for_all(_comm)
    return rc


def barrier():
    """StarPU-MPI barrier. Collective."""
    cdef int rc
    with nogil:
        rc = starpu_mpi_barrier(_comm)
    return rc


def pause():
    starpu_pause()


def resume():
    starpu_resume()


def cache_enabled():
    return bool(starpu_mpi_cache_is_enabled())


def cache_set(bint enabled):
    return starpu_mpi_cache_set(1 if enabled else 0)


def comm_amounts():
    """Bytes this rank has sent to each rank so far (uint64 array of the comm size).

    All zero when StarPU was started without STARPU_COMM_STATS=1.
    """
    out = np.zeros(_size, dtype=np.uint64)
    cdef size_t[::1] v = out.view(np.uintp)
    if _started and _size > 0:
        starchol_mpi_comm_stats_retrieve(&v[0])
    return out


# ---------------------------------------------------------------------------
# kernels (run by StarPU workers; never touch Python objects)
# ---------------------------------------------------------------------------
cdef char _L = b'L'
cdef char _N = b'N'
cdef char _T = b'T'
cdef char _R = b'R'
cdef double _ONE = 1.0
cdef double _MONE = -1.0


cdef void k_potrf(void **buffers, void *arg) noexcept nogil:
    # A[k][k] = chol(A[k][k]) (lower); a failure is stored in the task's slot.
    cdef double *a = <double *>STARPU_MATRIX_GET_PTR(buffers[0])
    cdef int n = <int>STARPU_MATRIX_GET_NX(buffers[0])
    cdef int ld = <int>STARPU_MATRIX_GET_LD(buffers[0])
    cdef int info = 0
    dpotrf(&_L, &n, a, &ld, &info)
    if info != 0 and arg != NULL:
        (<int64_t *>arg)[0] = info


cdef void k_trsm(void **buffers, void *arg) noexcept nogil:
    # A[m][k] = A[m][k] L[k][k]^-T
    cdef double *l = <double *>STARPU_MATRIX_GET_PTR(buffers[0])
    cdef int ldl = <int>STARPU_MATRIX_GET_LD(buffers[0])
    cdef double *a = <double *>STARPU_MATRIX_GET_PTR(buffers[1])
    cdef int m = <int>STARPU_MATRIX_GET_NX(buffers[1])
    cdef int n = <int>STARPU_MATRIX_GET_NY(buffers[1])
    cdef int lda = <int>STARPU_MATRIX_GET_LD(buffers[1])
    dtrsm(&_R, &_L, &_T, &_N, &m, &n, &_ONE, l, &ldl, a, &lda)


cdef inline void _syrk_update(void **buffers, double beta) noexcept nogil:
    # C[n][n] = beta C[n][n] - A[n][k] A[n][k]^T   (lower triangle)
    cdef double *a = <double *>STARPU_MATRIX_GET_PTR(buffers[0])
    cdef int k = <int>STARPU_MATRIX_GET_NY(buffers[0])
    cdef int lda = <int>STARPU_MATRIX_GET_LD(buffers[0])
    cdef double *c = <double *>STARPU_MATRIX_GET_PTR(buffers[1])
    cdef int n = <int>STARPU_MATRIX_GET_NX(buffers[1])
    cdef int ldc = <int>STARPU_MATRIX_GET_LD(buffers[1])
    dsyrk(&_L, &_N, &n, &k, &_MONE, a, &lda, &beta, c, &ldc)


cdef inline void _gemm_update(void **buffers, double beta) noexcept nogil:
    # C[m][n] = beta C[m][n] - A[m][k] B[n][k]^T
    cdef double *a = <double *>STARPU_MATRIX_GET_PTR(buffers[0])
    cdef int m = <int>STARPU_MATRIX_GET_NX(buffers[0])
    cdef int k = <int>STARPU_MATRIX_GET_NY(buffers[0])
    cdef int lda = <int>STARPU_MATRIX_GET_LD(buffers[0])
    cdef double *b = <double *>STARPU_MATRIX_GET_PTR(buffers[1])
    cdef int n = <int>STARPU_MATRIX_GET_NX(buffers[1])
    cdef int ldb = <int>STARPU_MATRIX_GET_LD(buffers[1])
    cdef double *c = <double *>STARPU_MATRIX_GET_PTR(buffers[2])
    cdef int ldc = <int>STARPU_MATRIX_GET_LD(buffers[2])
    dgemm(&_N, &_T, &m, &n, &k, &_MONE, a, &lda, b, &ldb, &beta, c, &ldc)


cdef void k_syrk(void **buffers, void *arg) noexcept nogil:
    # C[n][n] -= A[n][k] A[n][k]^T   (lower triangle)
    _syrk_update(buffers, 1.0)


cdef void k_gemm(void **buffers, void *arg) noexcept nogil:
    # C[m][n] -= A[m][k] B[n][k]^T
    _gemm_update(buffers, 1.0)


cdef void k_tril(void **buffers, void *arg) noexcept nogil:
    # zero the strictly upper triangle of a diagonal tile
    cdef double *a = <double *>STARPU_MATRIX_GET_PTR(buffers[0])
    cdef int n = <int>STARPU_MATRIX_GET_NX(buffers[0])
    cdef int ny = <int>STARPU_MATRIX_GET_NY(buffers[0])
    cdef int ld = <int>STARPU_MATRIX_GET_LD(buffers[0])
    cdef int i, j
    for j in range(ny):
        for i in range(min(j, n)):
            a[i + <size_t>j * ld] = 0.0


cdef void k_syrk0(void **buffers, void *arg) noexcept nogil:
    # C[n][n] = -A[n][k] A[n][k]^T: first update of a 2.5D slice's zero copy (W mode,
    # so the buffer is only allocated here); the upper triangle is zeroed too, so the
    # whole tile can be added into the factoring slice's copy later.
    _syrk_update(buffers, 0.0)
    cdef double *c = <double *>STARPU_MATRIX_GET_PTR(buffers[1])
    cdef int n = <int>STARPU_MATRIX_GET_NX(buffers[1])
    cdef int ldc = <int>STARPU_MATRIX_GET_LD(buffers[1])
    cdef int i, j
    for j in range(n):
        for i in range(j):
            c[i + <size_t>j * ldc] = 0.0


cdef void k_gemm0(void **buffers, void *arg) noexcept nogil:
    # C[m][n] = -A[m][k] B[n][k]^T: first update of a 2.5D slice's zero copy (W mode)
    _gemm_update(buffers, 0.0)


cdef void k_add(void **buffers, void *arg) noexcept nogil:
    # B[i][j] += P[i][j]: a 2.5D slice's partial sum added into the factoring slice's copy
    cdef double *p = <double *>STARPU_MATRIX_GET_PTR(buffers[0])
    cdef int ldp = <int>STARPU_MATRIX_GET_LD(buffers[0])
    cdef double *b = <double *>STARPU_MATRIX_GET_PTR(buffers[1])
    cdef int m = <int>STARPU_MATRIX_GET_NX(buffers[1])
    cdef int n = <int>STARPU_MATRIX_GET_NY(buffers[1])
    cdef int ldb = <int>STARPU_MATRIX_GET_LD(buffers[1])
    cdef int i, j
    for j in range(n):
        for i in range(m):
            b[i + <size_t>j * ldb] += p[i + <size_t>j * ldp]


cdef starpu_codelet cl_potrf
cdef starpu_codelet cl_trsm
cdef starpu_codelet cl_syrk
cdef starpu_codelet cl_gemm
cdef starpu_codelet cl_tril
cdef starpu_codelet cl_syrk0
cdef starpu_codelet cl_gemm0
cdef starpu_codelet cl_add


cdef void _codelet(starpu_codelet *cl, starpu_cpu_func_t f, int nbuf, const char *name) noexcept:
    memset(cl, 0, sizeof(starpu_codelet))
    cl.where = STARPU_CPU
    cl.cpu_funcs[0] = f
    cl.nbuffers = nbuf
    cl.name = name
    cdef int i
    for i in range(nbuf):
        cl.modes[i] = STARPU_R
    cl.modes[nbuf - 1] = STARPU_RW


_codelet(&cl_potrf, k_potrf, 1, b"potrf")
_codelet(&cl_trsm, k_trsm, 2, b"trsm")
_codelet(&cl_syrk, k_syrk, 2, b"syrk")
_codelet(&cl_gemm, k_gemm, 3, b"gemm")
_codelet(&cl_tril, k_tril, 1, b"tril")
_codelet(&cl_syrk0, k_syrk0, 2, b"syrk0")
_codelet(&cl_gemm0, k_gemm0, 3, b"gemm0")
_codelet(&cl_add, k_add, 2, b"add")
cl_syrk0.modes[1] = STARPU_W
cl_gemm0.modes[2] = STARPU_W


def codelet_addresses():
    """``{name: address}`` of every codelet, for starchol.runtime._gpu (CUDA variants,
    performance models, per-worker task counts); kernels are float64 (precision "d")."""
    return {"potrf": <uintptr_t>&cl_potrf, "trsm": <uintptr_t>&cl_trsm,
            "syrk": <uintptr_t>&cl_syrk, "gemm": <uintptr_t>&cl_gemm,
            "tril": <uintptr_t>&cl_tril, "syrk0": <uintptr_t>&cl_syrk0,
            "gemm0": <uintptr_t>&cl_gemm0, "add": <uintptr_t>&cl_add}


# ---------------------------------------------------------------------------
# registered tiled matrices
# ---------------------------------------------------------------------------
cdef class TileHandles:
    """One StarPU matrix handle per stored tile (i >= j) of an NT x NT tiled matrix.

    Tiles owned by this rank are registered on its main memory over the numpy
    (Fortran-ordered, float64) arrays given in ``tiles``; the others are registered
    with no home (StarPU allocates them when they arrive). Every handle gets its
    owner and the tag ``tag_base + i * nt + j``; all ranks must create the same
    TileHandles in the same order (collective).

    ``stored`` (uint8 (nt, nt), default: the lower triangle) selects the tiles that get
    a handle. With ``lazy``, no tile has a buffer yet, not even on its owner: StarPU
    allocates it when a task first writes it (the 2.5D slices' zero copies).
    """
    cdef starpu_data_handle_t *h
    cdef int64_t *own
    cdef readonly int nt
    cdef readonly int rank
    cdef readonly object tiles
    cdef readonly object info
    cdef readonly int64_t ntasks
    cdef object __weakref__

    def __cinit__(self):
        self.h = NULL
        self.own = NULL

    def __init__(self, int64_t[:, ::1] owners, object tiles, int64_t[::1] rows,
                 int64_t tag_base, object stored=None, bint lazy=False):
        if not _started:
            raise RuntimeError("StarPU is not started")
        cdef int nt = owners.shape[0]
        cdef int i, j
        cdef int64_t o
        cdef double[::1, :] v
        cdef unsigned char[:, ::1] keep
        if stored is None:
            stored = np.tril(np.ones((nt, nt), dtype=np.uint8))
        keep = np.ascontiguousarray(stored, dtype=np.uint8)
        if keep.shape[0] != nt or keep.shape[1] != nt:
            raise ValueError(f"stored must be {nt} x {nt}")
        self.nt = nt
        self.rank = _rank
        self.tiles = tiles
        self.info = np.zeros(nt, dtype=np.int64)
        self.ntasks = 0
        self.h = <starpu_data_handle_t *>malloc(<size_t>nt * nt * sizeof(starpu_data_handle_t))
        self.own = <int64_t *>malloc(<size_t>nt * nt * sizeof(int64_t))
        if self.h == NULL or self.own == NULL:
            raise MemoryError()
        memset(self.h, 0, <size_t>nt * nt * sizeof(starpu_data_handle_t))
        for i in range(nt):
            for j in range(nt):
                self.own[i * nt + j] = owners[i, j]
        for i in range(nt):
            for j in range(i + 1):
                if not keep[i, j]:
                    continue
                o = owners[i, j]
                if o < 0 or o >= _size:
                    self.unregister()
                    raise ValueError(f"tile ({i}, {j}) has owner {o}, outside 0..{_size - 1}")
                if o == _rank and not lazy:
                    v = tiles[(i, j)]
                    if v.shape[0] != rows[i] or v.shape[1] != rows[j]:
                        self.unregister()
                        raise ValueError(f"tile ({i}, {j}) has shape {v.shape[0]}x{v.shape[1]}")
                    starpu_matrix_data_register(&self.h[i * nt + j], STARPU_MAIN_RAM,
                                                <uintptr_t>&v[0, 0], <uint32_t>rows[i],
                                                <uint32_t>rows[i], <uint32_t>rows[j], sizeof(double))
                else:
                    starpu_matrix_data_register(&self.h[i * nt + j], -1, 0, <uint32_t>rows[i],
                                                <uint32_t>rows[i], <uint32_t>rows[j], sizeof(double))
                starpu_mpi_data_register_comm(self.h[i * nt + j], tag_base + i * nt + j,
                                              <int>o, _comm)

    def unregister(self):
        """Unregister every handle (data comes back to the owners' arrays). Idempotent."""
        cdef int i
        if self.h != NULL:
            if _started:
                with nogil:
                    for i in range(self.nt * self.nt):
                        if self.h[i] != NULL:
                            starpu_data_unregister(self.h[i])
                            self.h[i] = NULL
            free(self.h)
            self.h = NULL
        if self.own != NULL:
            free(self.own)
            self.own = NULL

    @property
    def registered(self):
        return self.h != NULL

    def __dealloc__(self):
        # Never call into StarPU here (it may be shut down); just free memory.
        if self.h != NULL:
            free(self.h)
        if self.own != NULL:
            free(self.own)

    def submit_cholesky(self, bint flush=True):
        """Submit the right-looking tiled Cholesky DAG (lower) on these tiles.

        Each rank inserts only the tasks it runs or feeds. POTRF failures land in
        ``self.info[k]`` (LAPACK's info of tile k). Returns ``(status, tasks)``.
        Collective (every rank must call it at the same point).
        """
        if self.h == NULL:
            return (-22, 0)
        cdef int64_t[::1] info = self.info
        info[:] = 0
        cdef int64_t count = 0
        cdef int rc
        with nogil:  # the 2.5D loop with one slice is the 2D right-looking loop
            rc = _submit_cholesky_sliced(self.h, &self.h, &self.own, 1, self.nt, _rank,
                                         &info[0], flush, &count)
        self.ntasks = count
        return (rc, count)

    def submit_cholesky_sliced(self, list copies, bint flush=True):
        """Submit the 2.5D tiled Cholesky (lower) over c = len(copies) slices.

        ``self`` holds the factoring copies: tile (i, j) of slice j mod c, with A's values,
        owned by that slice's owner of (i, j) (the factor ends there). ``copies[s]`` holds
        slice s's other copies (handles only for tiles (i, j) with s < j and
        j mod c != s, registered ``lazy`` with slice s's owners; its ``own`` array gives
        slice s's owner of every tile). Iteration k runs on slice s = k mod c: before the
        POTRF/TRSM of tile (m, k), each other slice t < k adds its partial sum into the
        factoring copy (one ADD task, one transfer); the SYRK/GEMM updates of iteration
        k go into slice s's copies, the first one (k = s) in W mode so that the zero copy
        is only allocated then. A partial copy is released right after its ADD.
        With c = 1 this is exactly :meth:`submit_cholesky`. Returns ``(status, tasks)``.
        Collective.
        """
        if self.h == NULL:
            return (-22, 0)
        cdef int c = len(copies)
        cdef int s
        cdef TileHandles t
        if c < 1:
            return (-22, 0)
        cdef starpu_data_handle_t **ch = <starpu_data_handle_t **>malloc(c * sizeof(void *))
        cdef int64_t **co = <int64_t **>malloc(c * sizeof(void *))
        if ch == NULL or co == NULL:
            free(ch)
            free(co)
            raise MemoryError()
        for s in range(c):
            t = copies[s]
            if t.h == NULL or t.nt != self.nt:
                free(ch)
                free(co)
                return (-22, 0)
            ch[s] = t.h
            co[s] = t.own
        cdef int64_t[::1] info = self.info
        info[:] = 0
        cdef int64_t count = 0
        cdef int rc
        with nogil:
            rc = _submit_cholesky_sliced(self.h, ch, co, c, self.nt, _rank, &info[0], flush,
                                         &count)
        free(ch)
        free(co)
        self.ntasks = count
        return (rc, count)

    def submit_llt_residual(self, TileHandles R):
        """Submit R := R - L L^T on the lower triangle, L being self (factor).

        Zeroes the strict upper triangle of L's diagonal tiles first. R must have the
        same owners. Returns ``(status, tasks)``. Collective.
        """
        if self.h == NULL or R.h == NULL or R.nt != self.nt:
            return (-22, 0)
        cdef int64_t count = 0
        cdef int rc
        with nogil:
            rc = _submit_residual(self.h, R.h, self.own, self.nt, _rank, &count)
        return (rc, count)


cdef inline int64_t _ij(int nt, int i, int j) noexcept nogil:
    return <int64_t>i * nt + j


cdef int _submit_residual(starpu_data_handle_t *l, starpu_data_handle_t *r, int64_t *own,
                          int nt, int me, int64_t *count) noexcept nogil:
    # R[i][j] -= sum_{k<=j} L[i][k] L[j][k]^T  for i >= j
    cdef int i, j, k, rc = 0
    cdef int64_t oij
    starpu_mpi_cache_flush_all_data(_comm)
    for j in range(nt):
        if own[_ij(nt, j, j)] == me:
            rc = starpu_mpi_task_insert(_comm, &cl_tril, STARPU_RW, l[_ij(nt, j, j)], <int>0)
            if rc != 0:
                return rc
            count[0] += 1
    for i in range(nt):
        for j in range(i + 1):
            oij = own[_ij(nt, i, j)]
            for k in range(j + 1):
                if i == j:
                    if oij == me or own[_ij(nt, j, k)] == me:
                        rc = starpu_mpi_task_insert(_comm, &cl_syrk,
                                                    STARPU_R, l[_ij(nt, j, k)],
                                                    STARPU_RW, r[_ij(nt, j, j)],
                                                    <int>0)
                        if rc != 0:
                            return rc
                        count[0] += 1
                elif oij == me or own[_ij(nt, i, k)] == me or own[_ij(nt, j, k)] == me:
                    rc = starpu_mpi_task_insert(_comm, &cl_gemm,
                                                STARPU_R, l[_ij(nt, i, k)],
                                                STARPU_R, l[_ij(nt, j, k)],
                                                STARPU_RW, r[_ij(nt, i, j)],
                                                <int>0)
                    if rc != 0:
                        return rc
                    count[0] += 1
    return 0


# ---------------------------------------------------------------------------
# 2.5D (sliced) Cholesky
# ---------------------------------------------------------------------------
cdef int _ins2(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
               int m1, starpu_data_handle_t h1, int64_t o1, int me,
               int64_t *count) noexcept nogil:
    # insert a 2-operand task if this rank runs or feeds it (plain insert when all local)
    cdef int rc
    if o0 == me and o1 == me:
        rc = starpu_task_insert(cl, STARPU_PRIORITY, prio, m0, h0, m1, h1, <int>0)
    elif o0 == me or o1 == me:
        rc = starpu_mpi_task_insert(_comm, cl, STARPU_PRIORITY, prio, m0, h0, m1, h1, <int>0)
    else:
        return 0
    if rc == 0:
        count[0] += 1
    return rc


cdef int _ins3(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
               int m1, starpu_data_handle_t h1, int64_t o1,
               int m2, starpu_data_handle_t h2, int64_t o2, int me,
               int64_t *count) noexcept nogil:
    cdef int rc
    if o0 == me and o1 == me and o2 == me:
        rc = starpu_task_insert(cl, STARPU_PRIORITY, prio, m0, h0, m1, h1, m2, h2, <int>0)
    elif o0 == me or o1 == me or o2 == me:
        rc = starpu_mpi_task_insert(_comm, cl, STARPU_PRIORITY, prio, m0, h0, m1, h1,
                                    m2, h2, <int>0)
    else:
        return 0
    if rc == 0:
        count[0] += 1
    return rc


cdef int _submit_cholesky_sliced(starpu_data_handle_t *home, starpu_data_handle_t **ch,
                                 int64_t **co, int c, int nt, int me, int64_t *info,
                                 bint flush, int64_t *count) noexcept nogil:
    # The right-looking tiled Cholesky (lower), priorities as in Chameleon's pzpotrf;
    # each rank inserts only the tasks it runs or feeds (plain inserts when all local).
    # Iteration k runs on slice s = k mod c (c = 1: the 2D algorithm).
    # Slice s's copy of tile (i, j): home[ij] when j mod c == s (the factoring copy),
    # else ch[s][ij] (a partial sum, zero until its first update at k = s).
    cdef int k, m, n, s, t, nup, rc = 0
    cdef int64_t *own
    cdef int64_t mk, nk, nn, mn
    cdef starpu_data_handle_t hp, ht
    cdef int prio
    cdef bint first
    for k in range(nt):
        s = k % c
        own = co[s]
        nup = k if k < c else c          # slices 0..nup-1 updated column k
        # A[m][k] += P_t[m][k] for every other slice t that updated it (one transfer each)
        for m in range(k, nt):
            mk = _ij(nt, m, k)
            prio = 2 * nt - 2 * k - (0 if m == k else m)
            for t in range(nup):
                if t == s:
                    continue
                hp = ch[t][mk]
                rc = _ins2(&cl_add, prio, STARPU_R, hp, co[t][mk], STARPU_RW, home[mk],
                           own[mk], me, count)
                if rc != 0:
                    return rc
                # the partial sum is read once: release it (and any received copy)
                if flush:
                    starpu_mpi_cache_flush(_comm, hp)
                starpu_data_unregister_submit(hp)
                ch[t][mk] = NULL
        # A[k][k] = chol(A[k][k])
        if own[_ij(nt, k, k)] == me:
            rc = starpu_task_insert(&cl_potrf,
                                    STARPU_PRIORITY, <int>(2 * nt - 2 * k),
                                    STARPU_RW, home[_ij(nt, k, k)],
                                    STARPU_CL_ARGS_NFREE, <void *>&info[k], <size_t>sizeof(int64_t),
                                    <int>0)
            if rc != 0:
                return rc
            count[0] += 1
        # A[m][k] = A[m][k] L[k][k]^-T,  m > k
        for m in range(k + 1, nt):
            mk = _ij(nt, m, k)
            rc = _ins2(&cl_trsm, 2 * nt - 2 * k - m, STARPU_R, home[_ij(nt, k, k)],
                       own[_ij(nt, k, k)], STARPU_RW, home[mk], own[mk], me, count)
            if rc != 0:
                return rc
        # updates into slice s's copies; the first one of a zero copy writes it (W)
        for n in range(k + 1, nt):
            nk = _ij(nt, n, k)
            first = k < c and n % c != s
            nn = _ij(nt, n, n)
            ht = home[nn] if n % c == s else ch[s][nn]
            # A_s[n][n] -= L[n][k] L[n][k]^T
            if first:
                rc = _ins2(&cl_syrk0, 2 * nt - 2 * k - n, STARPU_R, home[nk], own[nk],
                           STARPU_W, ht, own[nn], me, count)
            else:
                rc = _ins2(&cl_syrk, 2 * nt - 2 * k - n, STARPU_R, home[nk], own[nk],
                           STARPU_RW, ht, own[nn], me, count)
            if rc != 0:
                return rc
            # A_s[m][n] -= L[m][k] L[n][k]^T,  m > n
            for m in range(n + 1, nt):
                mk = _ij(nt, m, k)
                mn = _ij(nt, m, n)
                ht = home[mn] if n % c == s else ch[s][mn]
                if first:
                    rc = _ins3(&cl_gemm0, 2 * nt - 2 * k - n - m, STARPU_R, home[mk], own[mk],
                               STARPU_R, home[nk], own[nk], STARPU_W, ht, own[mn], me, count)
                else:
                    rc = _ins3(&cl_gemm, 2 * nt - 2 * k - n - m, STARPU_R, home[mk], own[mk],
                               STARPU_R, home[nk], own[nk], STARPU_RW, ht, own[mn], me, count)
                if rc != 0:
                    return rc
        # column k is final and read by no later task: drop the received copies
        if flush:
            for m in range(k, nt):
                starpu_mpi_cache_flush(_comm, home[_ij(nt, m, k)])
    return 0
