# cython: language_level=3, boundscheck=False, wraparound=False
"""starchol's GPU and scheduler layer (``starchol.runtime._gpu``).

A thin binding over pyx/starchol_gpu.c: CUDA kernels (when StarPU has CUDA), the
performance models, the HeteroPrio configuration, per-worker task counts and the
bytes StarPU moved between host and device memories. It never owns a codelet: the
codelets live in ``starchol.runtime._kernels``, which gives their addresses
(``codelet_addresses(precision)``, re-exported by ``_binding``); this module fills in
their CUDA function, CUDA flags, ``where`` mask and performance model.

Python front: :mod:`starchol.runtime.gpu`.
"""
from libc.stdint cimport uintptr_t, uint32_t
from libc.string cimport memset

import numpy as np

cdef extern from "starpu.h" nogil:
    enum: STARPU_NMAXWORKERS
    enum: STARPU_CPU
    enum: STARPU_CUDA
    enum: STARPU_CUDA_ASYNC
    enum: STARPU_MAXIMPLEMENTATIONS
    ctypedef void (*starpu_cuda_func_t)(void **, void *)
    struct starpu_perfmodel
    # only the fields this module reads or writes (C name: struct starpu_codelet)
    ctypedef struct codelet_t "struct starpu_codelet":
        uint32_t where
        starpu_cuda_func_t cuda_funcs[1]
        char cuda_flags[1]
        starpu_perfmodel *model
        unsigned long per_worker_stats[1]
        const char *name
    enum starpu_worker_archtype:
        STARPU_CPU_WORKER
        STARPU_CUDA_WORKER
    unsigned starpu_worker_get_count()
    starpu_worker_archtype starpu_worker_get_type(int id)
    int starpu_is_initialized()

    int starpu_memory_pin(void *addr, size_t size)
    int starpu_memory_unpin(void *addr, size_t size)

    struct timespec:
        pass
    struct starpu_profiling_bus_info:
        long long transferred_bytes
        int transfer_count
    int starpu_bus_get_count()
    int starpu_bus_get_src(int busid)
    int starpu_bus_get_dst(int busid)
    int starpu_bus_get_profiling_info(int busid, starpu_profiling_bus_info *bus_info)
    enum starpu_node_kind:
        STARPU_CPU_RAM
        STARPU_CUDA_RAM
    starpu_node_kind starpu_node_get_kind(unsigned node)

cdef extern from "starchol_gpu.h" nogil:
    enum: STARCHOL_NKERNELS
    enum: STARCHOL_HP_MAX_BUCKETS
    const char *starchol_kernel_name(int kernel)
    int starchol_cuda_built()
    int starchol_cuda_device_count()
    starpu_cuda_func_t starchol_cuda_func(int kernel)
    int starchol_cuda_setup(int nb)
    void starchol_cuda_teardown()
    starpu_perfmodel *starchol_perfmodel(int kernel, char precision)
    void starchol_hp_reset()
    int starchol_hp_name(const char *name, int bucket)
    int starchol_hp_order(int arch, int n, const int *buckets)
    int starchol_hp_factor(int bucket, int faster, float slow)
    int starchol_hp_fallback(int both, int cpu_only, int cuda_only)
    void *starchol_hp_policy()
    void starchol_hp_init(unsigned sched_ctx_id)
    unsigned long starchol_hp_pushed(int bucket)


def cuda_built():
    """True when this module was compiled with the CUDA kernels (StarPU with CUDA)."""
    return bool(starchol_cuda_built())


def cuda_device_count():
    """CUDA devices the CUDA runtime sees (0 without CUDA or without a driver)."""
    return starchol_cuda_device_count()


def kernel_names():
    """The kernel kinds, in the order of the C tables."""
    return [starchol_kernel_name(i).decode() for i in range(STARCHOL_NKERNELS)]


def max_buckets():
    return STARCHOL_HP_MAX_BUCKETS


def attach(uintptr_t codelet, int kernel, str precision, bint cuda, bint model):
    """Give the codelet at address ``codelet`` its CUDA variant (``cuda``, when built and
    the kernel has one: flags STARPU_CUDA_ASYNC, ``where`` gains STARPU_CUDA) and its
    history-based performance model (``model``). Returns True when the CUDA variant is
    attached. Call before the codelet's first task."""
    cdef codelet_t *cl = <codelet_t *>codelet
    cdef starpu_cuda_func_t f
    cdef bint attached = False
    if cl == NULL or kernel < 0 or kernel >= STARCHOL_NKERNELS or precision not in ("d", "s"):
        raise ValueError(f"bad codelet, kernel {kernel} or precision {precision!r}")
    if cuda:
        f = starchol_cuda_func(kernel)
        if f != NULL:
            cl.cuda_funcs[0] = f
            cl.cuda_flags[0] = STARPU_CUDA_ASYNC
            cl.where = cl.where | STARPU_CUDA
            attached = True
    if model:
        cl.model = starchol_perfmodel(kernel, ord(precision))
    return attached


def detach(uintptr_t codelet):
    """Undo :func:`attach`: CPU only, no model."""
    cdef codelet_t *cl = <codelet_t *>codelet
    cl.cuda_funcs[0] = NULL
    cl.cuda_flags[0] = 0
    cl.where = cl.where & ~(<uint32_t>STARPU_CUDA)
    cl.model = NULL


def has_cuda(uintptr_t codelet):
    cdef codelet_t *cl = <codelet_t *>codelet
    return bool(cl.where & STARPU_CUDA) and cl.cuda_funcs[0] != NULL


def model_symbol(int kernel, str precision):
    """The symbol of a kernel's performance model (``starchol_<kernel>_<d|s>``)."""
    return f"starchol_{starchol_kernel_name(kernel).decode()}_{precision}"


def worker_types():
    """``"cpu"``, ``"cuda"`` or ``"other"`` for each StarPU worker id (StarPU started)."""
    cdef unsigned i, n = starpu_worker_get_count()
    out = []
    for i in range(n):
        t = starpu_worker_get_type(i)
        out.append("cpu" if t == STARPU_CPU_WORKER else "cuda" if t == STARPU_CUDA_WORKER
                   else "other")
    return out


def codelet_stats(uintptr_t codelet):
    """Tasks of this codelet each worker has run since the last reset (int64 array,
    one entry per worker id). StarPU counts them itself (``per_worker_stats``)."""
    cdef codelet_t *cl = <codelet_t *>codelet
    cdef unsigned i, n = starpu_worker_get_count()
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        out[i] = cl.per_worker_stats[i]
    return out


def reset_codelet_stats(uintptr_t codelet):
    cdef codelet_t *cl = <codelet_t *>codelet
    memset(&cl.per_worker_stats[0], 0, STARPU_NMAXWORKERS * sizeof(unsigned long))


def cuda_setup(int nb=0):
    """Create the cuBLAS/cuSOLVER handles and POTRF workspace (for NB x NB tiles; 0: on
    first use) on every CUDA worker. Returns 0 or a negative code."""
    cdef int rc
    with nogil:
        rc = starchol_cuda_setup(nb)
    return rc


def cuda_teardown():
    with nogil:
        starchol_cuda_teardown()


def pin(object array):
    """Page-lock a numpy array's buffer for asynchronous copies to the GPUs
    (``starpu_memory_pin``; a no-op without CUDA workers). Returns StarPU's status."""
    cdef uintptr_t p = array.__array_interface__["data"][0]
    return starpu_memory_pin(<void *>p, <size_t>array.nbytes)


def unpin(object array):
    cdef uintptr_t p = array.__array_interface__["data"][0]
    return starpu_memory_unpin(<void *>p, <size_t>array.nbytes)


def bus_bytes():
    """Bytes StarPU copied between this process's memory nodes since the last call
    (StarPU resets its counters when read): ``{"host_to_device", "device_to_host",
    "device_to_device", "host_to_host"}``. Network bytes are not in here."""
    cdef int b, n = starpu_bus_get_count()
    cdef starpu_profiling_bus_info info
    out = {"host_to_device": 0, "device_to_host": 0, "device_to_device": 0,
           "host_to_host": 0}
    for b in range(n):
        starpu_bus_get_profiling_info(b, &info)
        s = starpu_node_get_kind(starpu_bus_get_src(b))
        d = starpu_node_get_kind(starpu_bus_get_dst(b))
        key = ("host" if s == STARPU_CPU_RAM else "device") + "_to_" + \
              ("host" if d == STARPU_CPU_RAM else "device")
        out[key] += int(info.transferred_bytes)
    return out


def hp_configure(dict names, list cpu_order, list cuda_order, dict factors, tuple fallback):
    """Set the HeteroPrio configuration read by the init callback and the push wrapper.

    ``names``: codelet name -> bucket; ``cpu_order`` / ``cuda_order``: buckets in the
    order each arch visits them; ``factors``: bucket -> (faster arch 0 CPU / 1 CUDA,
    slow factor >= 1 of the other arch); ``fallback``: buckets of unnamed tasks
    (runnable on both, CPU only, CUDA only)."""
    cdef int buf[64]
    cdef int i
    starchol_hp_reset()
    for name, b in names.items():
        if starchol_hp_name(name.encode(), int(b)) != 0:
            raise ValueError(f"bad heteroprio bucket {b!r} for {name!r}")
    for arch, order in ((0, cpu_order), (1, cuda_order)):
        if len(order) > STARCHOL_HP_MAX_BUCKETS:
            raise ValueError("too many buckets")
        for i in range(len(order)):
            buf[i] = int(order[i])
        if starchol_hp_order(arch, len(order), buf) != 0:
            raise ValueError(f"bad bucket order {order!r}")
    for b, (faster, slow) in factors.items():
        if starchol_hp_factor(int(b), int(faster), float(slow)) != 0:
            raise ValueError(f"bad factor {slow!r} (faster arch {faster!r}) for bucket {b!r}")
    if starchol_hp_fallback(int(fallback[0]), int(fallback[1]), int(fallback[2])) != 0:
        raise ValueError(f"bad fallback buckets {fallback!r}")


def hp_policy_address():
    """Address of starchol's heteroprio policy (StarPU's, with buckets taken from codelet
    names), 0 when StarPU has no heteroprio."""
    return <uintptr_t>starchol_hp_policy()


def hp_init_address():
    """Address of the heteroprio init callback (``starpu_conf.sched_policy_init``)."""
    return <uintptr_t>&starchol_hp_init


def hp_pushed(int nbuckets):
    """Tasks pushed into each of the first ``nbuckets`` buckets so far."""
    return [int(starchol_hp_pushed(b)) for b in range(nbuckets)]
