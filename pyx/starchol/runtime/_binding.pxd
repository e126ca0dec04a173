# The C-level interface of the thin binding (starchol.runtime._binding), cimported by
# the task graphs (_graphs.pyx). It lives under starchol/runtime/ so that Cython gives
# it its package name (see pyx/README.md).
from libc.stdint cimport int64_t
from starpu cimport starpu_codelet, starpu_data_handle_t


cdef class TileHandles:
    """One StarPU handle per stored tile of an mt x nt tiled matrix (see _binding.pyx)."""
    cdef starpu_data_handle_t *h
    cdef int64_t *own
    cdef readonly int mt
    cdef readonly int nt
    cdef readonly int elemsize
    cdef readonly object tiles
    cdef readonly bint recorded
    cdef object __weakref__


cdef int CHKERR(int status, const char *call) except -1
cdef int my_rank() noexcept nogil
# insert a task if this rank runs it, send this rank's tiles to the rank that runs it if
# it feeds it (only the handles of its own tiles are needed then); *count += 1 on the
# rank that runs it
cdef int ins1(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
              void *arg, size_t arg_size, int me, int64_t *count) noexcept nogil
cdef int ins2(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
              int m1, starpu_data_handle_t h1, int64_t o1, int me,
              int64_t *count) noexcept nogil
cdef int ins3(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
              int m1, starpu_data_handle_t h1, int64_t o1,
              int m2, starpu_data_handle_t h2, int64_t o2, int me,
              int64_t *count) noexcept nogil
cdef void cache_flush(starpu_data_handle_t h) noexcept nogil
cdef void release_submit(starpu_data_handle_t h) noexcept nogil
cdef void write_back(starpu_data_handle_t h) noexcept nogil
# the submission window: the tasks inserted until panel_end() are counted in iteration
# k's counter (panel_track must have been called first; else nothing is counted)
cdef void panel_begin(int64_t k) noexcept nogil
cdef void panel_end() noexcept nogil
