# Raw declarations of the parts of starpu_mpi.h (StarPU-MPI 1.3) that starchol uses,
# plus the MPI communicator type. C names are kept verbatim; no logic lives here.
from libc.stdint cimport int64_t
from starpu cimport starpu_conf, starpu_codelet, starpu_data_handle_t

cdef extern from "mpi.h" nogil:
    # Opaque: a pointer in Open MPI, an int in MPICH; only ever cast from the
    # integer handle that mpi4py gives (Comm.handle).
    ctypedef struct _mpi_comm_t
    ctypedef _mpi_comm_t *MPI_Comm

cdef extern from "starpu_mpi.h" nogil:
    ctypedef int64_t starpu_mpi_tag_t

    int starpu_mpi_init_conf(int *argc, char ***argv, int initialize_mpi,
                             MPI_Comm comm, starpu_conf *conf)
    int starpu_mpi_shutdown()
    int starpu_mpi_comm_size(MPI_Comm comm, int *size)
    int starpu_mpi_comm_rank(MPI_Comm comm, int *rank)
    int starpu_mpi_barrier(MPI_Comm comm)
    int starpu_mpi_wait_for_all(MPI_Comm comm)

    int starpu_mpi_cache_is_enabled()
    int starpu_mpi_cache_set(int enabled)
    void starpu_mpi_cache_flush(MPI_Comm comm, starpu_data_handle_t data_handle)
    void starpu_mpi_cache_flush_all_data(MPI_Comm comm)

    void starpu_mpi_data_register_comm(starpu_data_handle_t data_handle,
                                       starpu_mpi_tag_t data_tag, int rank, MPI_Comm comm)
    int starpu_mpi_data_get_rank(starpu_data_handle_t handle)
    starpu_mpi_tag_t starpu_mpi_data_get_tag(starpu_data_handle_t handle)

    int starpu_mpi_task_insert(MPI_Comm comm, starpu_codelet *codelet, ...)

    int starpu_mpi_isend_detached_prio(starpu_data_handle_t data_handle, int dest,
                                       starpu_mpi_tag_t data_tag, int prio, MPI_Comm comm,
                                       void (*callback)(void *), void *arg)
    int starpu_mpi_cached_send_set(starpu_data_handle_t data, int dest)
    void starpu_mpi_cached_send_clear(starpu_data_handle_t data)
    void starpu_mpi_cached_receive_clear(starpu_data_handle_t data)

# bytes sent to each rank: starpu_mpi_comm_amounts_retrieve in 1.3, renamed
# starpu_mpi_comm_stats_retrieve in 1.4 (starpu_compat.h picks the one of the build)
cdef extern from "starpu_compat.h" nogil:
    void starchol_mpi_comm_stats_retrieve(size_t *comm_amounts)
