# The codelets of starchol.runtime._kernels, cimported by the task graphs.
from starpu cimport starpu_codelet


cdef struct Codelets:
    # Cholesky
    starpu_codelet *potrf
    starpu_codelet *trsm
    starpu_codelet *syrk
    starpu_codelet *gemm
    # 2.5D: first update of a zero copy (W mode), partial sum added to the factoring copy
    starpu_codelet *syrk0
    starpu_codelet *gemm0
    starpu_codelet *add
    # residual: zero the strict upper triangle of a diagonal tile
    starpu_codelet *tril
    # solve L L^T X = B: forward (L) and backward (L^T) triangular solves and updates
    starpu_codelet *trsm_fwd
    starpu_codelet *gemm_fwd
    starpu_codelet *trsm_bwd
    starpu_codelet *gemm_bwd


cdef Codelets *codelets(bint single) noexcept nogil
