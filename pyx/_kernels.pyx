# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kernels and codelets of starchol (``starchol.runtime._kernels``), float64 and float32.

Each kernel runs on a StarPU CPU worker, single-threaded BLAS/LAPACK through one table of
function pointers, and never touches a Python object. The table starts with SciPy's
Cython bindings (``cython_blas``/``cython_lapack``: the OpenBLAS scipy.linalg uses);
:func:`use_blas` points it at another shared library (``starchol.runtime.kernel_blas``
chooses which, before StarPU starts). Tiles are column-major StarPU matrices
(``STARPU_MATRIX_*``). One body per operation, written once for both precisions (fused
type ``real``); the codelets of each precision are built at import and handed to the
task graphs by :c:func:`codelets`.
"""
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memset
from posix.dlfcn cimport RTLD_LOCAL, RTLD_NOW, dlerror, dlopen, dlsym

import os

cimport scipy.linalg.cython_blas as sblas
cimport scipy.linalg.cython_lapack as slapack

from starpu cimport *

ctypedef fused real:
    float
    double

# -- the BLAS/LAPACK the kernels call (Fortran interface, 32-bit integers) --------------
ctypedef void (*dgemm_t)(char *, char *, int *, int *, int *, double *, double *, int *,
                         double *, int *, double *, double *, int *) noexcept nogil
ctypedef void (*sgemm_t)(char *, char *, int *, int *, int *, float *, float *, int *,
                         float *, int *, float *, float *, int *) noexcept nogil
ctypedef void (*dsyrk_t)(char *, char *, int *, int *, double *, double *, int *, double *,
                         double *, int *) noexcept nogil
ctypedef void (*ssyrk_t)(char *, char *, int *, int *, float *, float *, int *, float *,
                         float *, int *) noexcept nogil
ctypedef void (*dtrsm_t)(char *, char *, char *, char *, int *, int *, double *, double *,
                         int *, double *, int *) noexcept nogil
ctypedef void (*strsm_t)(char *, char *, char *, char *, int *, int *, float *, float *,
                         int *, float *, int *) noexcept nogil
ctypedef void (*dpotrf_t)(char *, int *, double *, int *, int *) noexcept nogil
ctypedef void (*spotrf_t)(char *, int *, float *, int *, int *) noexcept nogil

cdef struct Blas:
    dgemm_t dgemm
    sgemm_t sgemm
    dsyrk_t dsyrk
    ssyrk_t ssyrk
    dtrsm_t dtrsm
    strsm_t strsm
    dpotrf_t dpotrf
    spotrf_t spotrf

cdef Blas _blas
cdef Blas _scipy_blas
_scipy_blas.dgemm = sblas.dgemm
_scipy_blas.sgemm = sblas.sgemm
_scipy_blas.dsyrk = sblas.dsyrk
_scipy_blas.ssyrk = sblas.ssyrk
_scipy_blas.dtrsm = sblas.dtrsm
_scipy_blas.strsm = sblas.strsm
_scipy_blas.dpotrf = slapack.dpotrf
_scipy_blas.spotrf = slapack.spotrf
_blas = _scipy_blas

#: the Fortran symbols :func:`use_blas` needs from a library, in the order of Blas
BLAS_SYMBOLS = ("dgemm_", "sgemm_", "dsyrk_", "ssyrk_", "dtrsm_", "strsm_", "dpotrf_",
                "spotrf_")

# -- cancellation: set while a computation is being abandoned (an interrupt on one rank) --
cdef int _cancelled = 0


def set_cancelled(bint on):
    """While on, every CPU kernel returns at once without touching its tiles, so that the
    tasks already submitted drain in moments (their results are garbage and discarded);
    :meth:`starchol.runtime.Session.wait_local` sets it when interrupted (Ctrl-C) and
    clears it once the tasks are gone."""
    global _cancelled
    _cancelled = on


def use_blas(path=None):
    """Make every kernel call the BLAS/LAPACK of the shared library ``path`` (its Fortran
    symbols ``dgemm_``, ..., ``spotrf_``, 32-bit integers), or SciPy's again (None).

    The library is opened once and never closed. Not while tasks run: the workers read
    the table without a lock (the session calls this before StarPU starts).

    Raises
    ------
    OSError
        The library cannot be opened, or lacks one of :data:`BLAS_SYMBOLS` (named).
    """
    global _blas
    if path is None:
        _blas = _scipy_blas
        return
    cdef bytes name = os.fsencode(path)
    cdef void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)
    if lib == NULL:
        raise OSError(f"cannot open {path}: {(<bytes>dlerror()).decode(errors='replace')}")
    cdef void *f[8]
    cdef int i
    for i, sym in enumerate(BLAS_SYMBOLS):
        f[i] = dlsym(lib, <bytes>sym.encode())
        if f[i] == NULL:
            raise OSError(f"{path} has no {sym} (not a BLAS/LAPACK library with the "
                          f"Fortran interface)")
    cdef Blas b
    b.dgemm = <dgemm_t>f[0]
    b.sgemm = <sgemm_t>f[1]
    b.dsyrk = <dsyrk_t>f[2]
    b.ssyrk = <ssyrk_t>f[3]
    b.dtrsm = <dtrsm_t>f[4]
    b.strsm = <strsm_t>f[5]
    b.dpotrf = <dpotrf_t>f[6]
    b.spotrf = <spotrf_t>f[7]
    _blas = b


cdef char _L = b'L'
cdef char _N = b'N'
cdef char _T = b'T'
cdef char _R = b'R'


cdef inline int _nx(void *buf) noexcept nogil:
    return <int>STARPU_MATRIX_GET_NX(buf)


cdef inline int _ny(void *buf) noexcept nogil:
    return <int>STARPU_MATRIX_GET_NY(buf)


cdef inline int _ld(void *buf) noexcept nogil:
    return <int>STARPU_MATRIX_GET_LD(buf)


# -- bodies (one per operation, both precisions) ----------------------------------------
cdef inline void _potrf(real *a, void **buffers, void *arg) noexcept nogil:
    # A[k][k] = chol(A[k][k]) (lower); LAPACK's info lands in the task's slot
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int n = _nx(buffers[0]), ld = _ld(buffers[0]), info = 0
    if real is double:
        _blas.dpotrf(&_L, &n, a, &ld, &info)
    else:
        _blas.spotrf(&_L, &n, a, &ld, &info)
    if info != 0 and arg != NULL:
        (<int64_t *>arg)[0] = info


cdef inline void _trsm(real *l, real *b, char side, char trans, void **buffers) noexcept nogil:
    # side L, trans N: B[k] = L[k][k]^-1 B[k]                  (forward solve)
    # side L, trans T: B[k] = L[k][k]^-T B[k]                  (backward solve)
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int ldl = _ld(buffers[0]), m = _nx(buffers[1]), n = _ny(buffers[1])
    cdef int ldb = _ld(buffers[1])
    cdef real one = 1
    if real is double:
        _blas.dtrsm(&side, &_L, &trans, &_N, &m, &n, &one, l, &ldl, b, &ldb)
    else:
        _blas.strsm(&side, &_L, &trans, &_N, &m, &n, &one, l, &ldl, b, &ldb)


cdef enum:
    TRSM_BASE = 64     # columns below which the panel solve calls ?trsm itself


cdef void _trsm_panel(real *l, int ldl, real *b, int ldb, int m, int n) noexcept nogil:
    # B (m x n) = B L^-T, L (n x n) lower: recursive on n, the off-diagonal half as ?gemm.
    # OpenBLAS's ?trsm runs at about half its ?gemm speed at NB = 256 (benchmarks/
    # small_sizes.py); with L = [L11 0; L21 L22] and B = [B1 B2], X = B L^-T is
    # X1 = B1 L11^-T, then X2 = (B2 - X1 L21^T) L22^-T.
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int h, n2
    cdef real one = 1, mone = -1
    if n <= TRSM_BASE:
        if real is double:
            _blas.dtrsm(&_R, &_L, &_T, &_N, &m, &n, &one, l, &ldl, b, &ldb)
        else:
            _blas.strsm(&_R, &_L, &_T, &_N, &m, &n, &one, l, &ldl, b, &ldb)
        return
    h = n // 2
    n2 = n - h
    _trsm_panel(l, ldl, b, ldb, m, h)
    if real is double:
        _blas.dgemm(&_N, &_T, &m, &n2, &h, &mone, b, &ldb, l + h, &ldl, &one,
              b + <size_t>h * ldb, &ldb)
    else:
        _blas.sgemm(&_N, &_T, &m, &n2, &h, &mone, b, &ldb, l + h, &ldl, &one,
              b + <size_t>h * ldb, &ldb)
    _trsm_panel(l + h + <size_t>h * ldl, ldl, b + <size_t>h * ldb, ldb, m, n2)


cdef inline void _syrk(real *a, real *c, real beta, void **buffers) noexcept nogil:
    # C[n][n] = beta C[n][n] - A[n][k] A[n][k]^T   (lower triangle)
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int k = _ny(buffers[0]), lda = _ld(buffers[0])
    cdef int n = _nx(buffers[1]), ldc = _ld(buffers[1])
    cdef real mone = -1
    if real is double:
        _blas.dsyrk(&_L, &_N, &n, &k, &mone, a, &lda, &beta, c, &ldc)
    else:
        _blas.ssyrk(&_L, &_N, &n, &k, &mone, a, &lda, &beta, c, &ldc)


cdef inline void _gemm(real *a, real *b, real *c, char ta, char tb, real beta,
                       void **buffers) noexcept nogil:
    # C = beta C - op(A) op(B); op(A) is m x k, op(B) is k x n, C is m x n
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int m = _nx(buffers[2]), n = _ny(buffers[2]), ldc = _ld(buffers[2])
    cdef int k = _ny(buffers[0]) if ta == _N else _nx(buffers[0])
    cdef int lda = _ld(buffers[0]), ldb = _ld(buffers[1])
    cdef real mone = -1
    if real is double:
        _blas.dgemm(&ta, &tb, &m, &n, &k, &mone, a, &lda, b, &ldb, &beta, c, &ldc)
    else:
        _blas.sgemm(&ta, &tb, &m, &n, &k, &mone, a, &lda, b, &ldb, &beta, c, &ldc)


cdef inline void _zero_upper(real *a, int n, int ny, int ld) noexcept nogil:
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int i, j
    for j in range(ny):
        for i in range(min(j, n)):
            a[i + <size_t>j * ld] = 0


cdef inline void _add(real *p, real *b, void **buffers) noexcept nogil:
    # B[i][j] += P[i][j]
    if _cancelled:   # an abandoned computation: drain without computing
        return
    cdef int ldp = _ld(buffers[0]), m = _nx(buffers[1]), n = _ny(buffers[1])
    cdef int ldb = _ld(buffers[1]), i, j
    for j in range(n):
        for i in range(m):
            b[i + <size_t>j * ldb] += p[i + <size_t>j * ldp]


# -- StarPU entry points: (buffers, cl_arg) -> body of the right precision ---------------
cdef inline void *_p(void **buffers, int i) noexcept nogil:
    return <void *>STARPU_MATRIX_GET_PTR(buffers[i])


cdef void d_potrf(void **b, void *arg) noexcept nogil:
    _potrf(<double *>_p(b, 0), b, arg)

cdef void s_potrf(void **b, void *arg) noexcept nogil:
    _potrf(<float *>_p(b, 0), b, arg)

cdef void d_trsm(void **b, void *arg) noexcept nogil:
    _trsm_panel(<double *>_p(b, 0), _ld(b[0]), <double *>_p(b, 1), _ld(b[1]), _nx(b[1]),
                _ny(b[1]))

cdef void s_trsm(void **b, void *arg) noexcept nogil:
    _trsm_panel(<float *>_p(b, 0), _ld(b[0]), <float *>_p(b, 1), _ld(b[1]), _nx(b[1]),
                _ny(b[1]))

cdef void d_syrk(void **b, void *arg) noexcept nogil:
    _syrk(<double *>_p(b, 0), <double *>_p(b, 1), 1.0, b)

cdef void s_syrk(void **b, void *arg) noexcept nogil:
    _syrk(<float *>_p(b, 0), <float *>_p(b, 1), 1.0, b)

cdef void d_gemm(void **b, void *arg) noexcept nogil:
    _gemm(<double *>_p(b, 0), <double *>_p(b, 1), <double *>_p(b, 2), _N, _T, 1.0, b)

cdef void s_gemm(void **b, void *arg) noexcept nogil:
    _gemm(<float *>_p(b, 0), <float *>_p(b, 1), <float *>_p(b, 2), _N, _T, 1.0, b)

# first update of a 2.5D zero copy (W mode): C = -A B^T, upper triangle of SYRK zeroed
cdef void d_syrk0(void **b, void *arg) noexcept nogil:
    _syrk(<double *>_p(b, 0), <double *>_p(b, 1), 0.0, b)
    _zero_upper(<double *>_p(b, 1), _nx(b[1]), _nx(b[1]), _ld(b[1]))

cdef void s_syrk0(void **b, void *arg) noexcept nogil:
    _syrk(<float *>_p(b, 0), <float *>_p(b, 1), 0.0, b)
    _zero_upper(<float *>_p(b, 1), _nx(b[1]), _nx(b[1]), _ld(b[1]))

cdef void d_gemm0(void **b, void *arg) noexcept nogil:
    _gemm(<double *>_p(b, 0), <double *>_p(b, 1), <double *>_p(b, 2), _N, _T, 0.0, b)

cdef void s_gemm0(void **b, void *arg) noexcept nogil:
    _gemm(<float *>_p(b, 0), <float *>_p(b, 1), <float *>_p(b, 2), _N, _T, 0.0, b)

cdef void d_add(void **b, void *arg) noexcept nogil:
    _add(<double *>_p(b, 0), <double *>_p(b, 1), b)

cdef void s_add(void **b, void *arg) noexcept nogil:
    _add(<float *>_p(b, 0), <float *>_p(b, 1), b)

cdef void d_tril(void **b, void *arg) noexcept nogil:
    _zero_upper(<double *>_p(b, 0), _nx(b[0]), _ny(b[0]), _ld(b[0]))

cdef void s_tril(void **b, void *arg) noexcept nogil:
    _zero_upper(<float *>_p(b, 0), _nx(b[0]), _ny(b[0]), _ld(b[0]))

# solve: B[k] = L[k][k]^-1 B[k] / L[k][k]^-T B[k]
cdef void d_trsm_fwd(void **b, void *arg) noexcept nogil:
    _trsm(<double *>_p(b, 0), <double *>_p(b, 1), _L, _N, b)

cdef void s_trsm_fwd(void **b, void *arg) noexcept nogil:
    _trsm(<float *>_p(b, 0), <float *>_p(b, 1), _L, _N, b)

cdef void d_trsm_bwd(void **b, void *arg) noexcept nogil:
    _trsm(<double *>_p(b, 0), <double *>_p(b, 1), _L, _T, b)

cdef void s_trsm_bwd(void **b, void *arg) noexcept nogil:
    _trsm(<float *>_p(b, 0), <float *>_p(b, 1), _L, _T, b)

# solve updates: B[m] -= L[m][k] B[k] (forward), B[m] -= L[k][m]^T B[k] (backward)
cdef void d_gemm_fwd(void **b, void *arg) noexcept nogil:
    _gemm(<double *>_p(b, 0), <double *>_p(b, 1), <double *>_p(b, 2), _N, _N, 1.0, b)

cdef void s_gemm_fwd(void **b, void *arg) noexcept nogil:
    _gemm(<float *>_p(b, 0), <float *>_p(b, 1), <float *>_p(b, 2), _N, _N, 1.0, b)

cdef void d_gemm_bwd(void **b, void *arg) noexcept nogil:
    _gemm(<double *>_p(b, 0), <double *>_p(b, 1), <double *>_p(b, 2), _T, _N, 1.0, b)

cdef void s_gemm_bwd(void **b, void *arg) noexcept nogil:
    _gemm(<float *>_p(b, 0), <float *>_p(b, 1), <float *>_p(b, 2), _T, _N, 1.0, b)


# -- codelets ----------------------------------------------------------------------------
cdef enum:
    NCODELETS = 12

cdef starpu_codelet _cl[2][NCODELETS]
cdef Codelets _sets[2]


cdef starpu_codelet *_codelet(int prec, int idx, starpu_cpu_func_t f, int nbuf,
                              const char *name, int last_mode) noexcept:
    cdef starpu_codelet *cl = &_cl[prec][idx]
    memset(cl, 0, sizeof(starpu_codelet))
    cl.where = STARPU_CPU
    cl.cpu_funcs[0] = f
    cl.nbuffers = nbuf
    cl.name = name
    cdef int i
    for i in range(nbuf - 1):
        cl.modes[i] = STARPU_R
    cl.modes[nbuf - 1] = <starpu_data_access_mode>last_mode
    return cl


cdef void _build(int prec, starpu_cpu_func_t potrf, starpu_cpu_func_t trsm,
                 starpu_cpu_func_t syrk, starpu_cpu_func_t gemm, starpu_cpu_func_t syrk0,
                 starpu_cpu_func_t gemm0, starpu_cpu_func_t add, starpu_cpu_func_t tril,
                 starpu_cpu_func_t trsm_fwd, starpu_cpu_func_t gemm_fwd,
                 starpu_cpu_func_t trsm_bwd, starpu_cpu_func_t gemm_bwd) noexcept:
    cdef Codelets *s = &_sets[prec]
    s.potrf = _codelet(prec, 0, potrf, 1, b"potrf", STARPU_RW)
    s.trsm = _codelet(prec, 1, trsm, 2, b"trsm", STARPU_RW)
    s.syrk = _codelet(prec, 2, syrk, 2, b"syrk", STARPU_RW)
    s.gemm = _codelet(prec, 3, gemm, 3, b"gemm", STARPU_RW)
    s.syrk0 = _codelet(prec, 4, syrk0, 2, b"syrk0", STARPU_W)
    s.gemm0 = _codelet(prec, 5, gemm0, 3, b"gemm0", STARPU_W)
    s.add = _codelet(prec, 6, add, 2, b"add", STARPU_RW)
    s.tril = _codelet(prec, 7, tril, 1, b"tril", STARPU_RW)
    s.trsm_fwd = _codelet(prec, 8, trsm_fwd, 2, b"trsm_fwd", STARPU_RW)
    s.gemm_fwd = _codelet(prec, 9, gemm_fwd, 3, b"gemm_fwd", STARPU_RW)
    s.trsm_bwd = _codelet(prec, 10, trsm_bwd, 2, b"trsm_bwd", STARPU_RW)
    s.gemm_bwd = _codelet(prec, 11, gemm_bwd, 3, b"gemm_bwd", STARPU_RW)


_build(0, d_potrf, d_trsm, d_syrk, d_gemm, d_syrk0, d_gemm0, d_add, d_tril,
       d_trsm_fwd, d_gemm_fwd, d_trsm_bwd, d_gemm_bwd)
_build(1, s_potrf, s_trsm, s_syrk, s_gemm, s_syrk0, s_gemm0, s_add, s_tril,
       s_trsm_fwd, s_gemm_fwd, s_trsm_bwd, s_gemm_bwd)


def codelet_addresses(str precision="d"):
    """``{name: address}`` of the Cholesky codelets of one precision (``"d"`` float64,
    ``"s"`` float32), for starchol.runtime.gpu (CUDA variants, performance models,
    per-worker task counts)."""
    if precision not in ("d", "s"):
        raise ValueError(f"precision must be 'd' or 's', got {precision!r}")
    cdef Codelets *c = &_sets[1 if precision == "s" else 0]
    return {"potrf": <uintptr_t>c.potrf, "trsm": <uintptr_t>c.trsm,
            "syrk": <uintptr_t>c.syrk, "gemm": <uintptr_t>c.gemm,
            "tril": <uintptr_t>c.tril, "syrk0": <uintptr_t>c.syrk0,
            "gemm0": <uintptr_t>c.gemm0, "add": <uintptr_t>c.add}


def graph_codelet_addresses(str precision="d"):
    """``{name: address}`` of every codelet the task graphs insert (the Cholesky's, the
    residual's and the solve's: ``trsm_fwd``, ``gemm_fwd``, ``trsm_bwd``, ``gemm_bwd``),
    for the graph recorder (``starchol.linalg.simulate``: a record's kernel key is its
    codelet's address)."""
    out = codelet_addresses(precision)
    cdef Codelets *c = &_sets[1 if precision == "s" else 0]
    out.update({"trsm_fwd": <uintptr_t>c.trsm_fwd, "gemm_fwd": <uintptr_t>c.gemm_fwd,
                "trsm_bwd": <uintptr_t>c.trsm_bwd, "gemm_bwd": <uintptr_t>c.gemm_bwd})
    return out


cdef Codelets *codelets(bint single) noexcept nogil:
    """The codelets of one precision: float32 when ``single``, else float64."""
    return &_sets[1 if single else 0]
