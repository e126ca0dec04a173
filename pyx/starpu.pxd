# Raw declarations of the parts of starpu.h (StarPU 1.3) that starchol uses.
# C names are kept verbatim; no logic lives here (see _starpu.pyx).
from libc.stdint cimport uint32_t, uintptr_t, int64_t

cdef extern from "starpu.h" nogil:
    # --- starpu_config.h -------------------------------------------------
    enum: STARPU_MAJOR_VERSION
    enum: STARPU_MINOR_VERSION
    enum: STARPU_RELEASE_VERSION
    enum: STARPU_MAXCPUS
    enum: STARPU_NMAXBUFS
    enum: STARPU_MAXIMPLEMENTATIONS

    # --- starpu.h ---------------------------------------------------------
    struct starpu_conf:
        const char *sched_policy_name
        int precedence_over_environment_variables
        int ncpus
        int reserve_ncpus
        int ncuda
        int nopencl
        int nmic
        int nmpi_ms
        int bus_calibrate
        int calibrate
        int catch_signals

    int starpu_conf_init(starpu_conf *conf)

# starpu_conf's scheduler policy and its init callback (the callback's field name is
# STARCHOL_CONF_SCHED_CALLBACK of starpu_compat.h: sched_policy_init in 1.3)
cdef extern from "starpu_compat.h":
    """
    #define STARCHOL_CONF_SET_SCHED(conf, pol, cb) do { \\
        (conf)->sched_policy = (struct starpu_sched_policy *)(pol); \\
        (conf)->STARCHOL_CONF_SCHED_CALLBACK = (void (*)(unsigned))(cb); } while (0)
    """
    void STARCHOL_CONF_SET_SCHED(starpu_conf *conf, void *policy, void *init) nogil

cdef extern from "starpu.h" nogil:
    int starpu_init(starpu_conf *conf)
    int starpu_is_initialized()
    void starpu_shutdown()
    void starpu_pause()
    void starpu_resume()
    void starpu_get_version(int *major, int *minor, int *release)

    # --- starpu_fxt.h (no-ops in a StarPU built without FxT) ---------------
    void starpu_fxt_stop_profiling()

    # --- starpu_data.h (access modes, used by the codelet) ---------------
    enum starpu_data_access_mode:
        STARPU_NONE
        STARPU_R
        STARPU_W
        STARPU_RW
        STARPU_SCRATCH
        STARPU_REDUX

    # --- starpu_task.h ----------------------------------------------------
    enum: STARPU_MAIN_RAM
    enum: STARPU_CPU
    ctypedef void (*starpu_cpu_func_t)(void **, void *)

    struct starpu_perfmodel

    struct starpu_codelet:
        uint32_t where
        starpu_cpu_func_t cpu_funcs[4]
        int nbuffers
        starpu_data_access_mode modes[8]
        starpu_perfmodel *model
        const char *name

    int starpu_task_wait_for_all()
    int starpu_task_nsubmitted()
    int starpu_task_insert(starpu_codelet *cl, ...)

    # --- starpu_data.h ----------------------------------------------------
    struct _starpu_data_state
    ctypedef _starpu_data_state *starpu_data_handle_t

    void starpu_data_unregister(starpu_data_handle_t handle)
    void starpu_data_unregister_submit(starpu_data_handle_t handle)
    void starpu_data_wont_use(starpu_data_handle_t handle)
    int starpu_data_acquire(starpu_data_handle_t handle, starpu_data_access_mode mode)
    void starpu_data_release(starpu_data_handle_t handle)

    # --- starpu_data_interfaces.h ----------------------------------------
    void starpu_matrix_data_register(starpu_data_handle_t *handle, int home_node,
                                     uintptr_t ptr, uint32_t ld, uint32_t nx,
                                     uint32_t ny, size_t elemsize)
    uintptr_t STARPU_MATRIX_GET_PTR(void *interface)
    uint32_t STARPU_MATRIX_GET_NX(void *interface)
    uint32_t STARPU_MATRIX_GET_NY(void *interface)
    uint32_t STARPU_MATRIX_GET_LD(void *interface)

    # --- starpu_task_util.h -----------------------------------------------
    enum: STARPU_VALUE
    enum: STARPU_PRIORITY
    enum: STARPU_EXECUTE_ON_NODE
    enum: STARPU_NAME
    enum: STARPU_CL_ARGS
    enum: STARPU_CL_ARGS_NFREE
    enum: STARPU_CALLBACK_WITH_ARG_NFREE

    # --- starpu_worker.h --------------------------------------------------
    unsigned starpu_worker_get_count()
    unsigned starpu_cpu_worker_get_count()

    # --- starpu_scheduler.h -----------------------------------------------
    struct starpu_sched_policy:
        const char *policy_name
        const char *policy_description

    starpu_sched_policy **starpu_sched_get_predefined_policies()
