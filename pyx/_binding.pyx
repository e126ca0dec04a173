# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The thin StarPU-MPI binding of starchol (``starchol.runtime._binding``).

Only this module holds StarPU-MPI's process state. It does four things:

- start/stop StarPU + StarPU-MPI on one MPI communicator, pause/resume the workers;
- register tiled matrices (:class:`TileHandles`: one StarPU matrix handle per stored
  tile, with its owner rank and a unique 64-bit tag);
- insert tasks (``ins1/ins2/ins3``: a plain ``starpu_task_insert`` when every operand is
  local, ``starpu_mpi_task_insert`` when this rank runs the task, the sends of its own
  tiles (as StarPU-MPI would make them, cache included) when it only feeds it, nothing
  otherwise; a rank needs no handle of a tile it neither owns nor runs a task on),
  flush StarPU-MPI's cache; count each iteration's tasks that run here
  until they are done (``panel_track``/``panel_wait``: the submission window);
- statistics (bytes sent per rank, tasks pending, versions, schedulers), the end of an
  FxT trace (``fxt_stop``).

Every StarPU status goes through one check, :c:func:`CHKERR`, which raises
:class:`starchol.runtime.errors.StarPUError`; nogil loops return the first non-zero
status and their caller checks it once the GIL is back. The task graphs live in
``_graphs.pyx`` and reach this module through ``starchol/runtime/_binding.pxd``.
"""
from libc.stdint cimport int64_t, uintptr_t, uint32_t
from libc.string cimport memset, memcpy
from libc.stdlib cimport malloc, free, realloc

from starpu cimport *
from starpu_mpi cimport *

import os
import sys

import numpy as np

from starchol.runtime.errors import StarPUError
# the codelets' addresses, for starchol.runtime.gpu (CUDA variants, performance models)
from starchol.runtime._kernels import codelet_addresses  # noqa: F401

# ---------------------------------------------------------------------------
# process state
# ---------------------------------------------------------------------------
cdef bint _started = False
cdef bint _ever_started = False
cdef MPI_Comm _comm
cdef int _rank = 0
cdef int _size = 1
cdef starpu_conf _conf
cdef bytes _sched_name = b""
cdef bint _idle_paused = False   # see idle_pause()


# The graph recorder: while ``_rec_on``, ins1/ins2/ins3 and cache_flush append records
# (REC_WIDTH int64 each, layout in pyx/starchol_sim.h) instead of calling StarPU, and
# every rank's tasks are recorded (all nodes at once). The handles are then those of
# TileHandles.recording(): data ids + 1 cast to pointers, never given to StarPU.
DEF REC_WIDTH = 12
cdef bint _rec_on = False
cdef int64_t *_rec_buf = NULL
cdef int64_t _rec_n = 0, _rec_cap = 0, _rec_tasks = 0
cdef bint _rec_oom = False
cdef int64_t _rec_next_id = 0
cdef int64_t _rec_iter = 0       # the iteration of the tasks recorded (panel_begin)


cdef int64_t *_rec_slot() noexcept nogil:
    global _rec_buf, _rec_cap, _rec_n, _rec_oom
    cdef int64_t cap
    cdef int64_t *buf
    if _rec_n == _rec_cap:
        cap = 4096 if _rec_cap == 0 else 2 * _rec_cap
        buf = <int64_t *>realloc(_rec_buf, <size_t>cap * REC_WIDTH * sizeof(int64_t))
        if buf == NULL:
            _rec_oom = True
            return NULL
        _rec_buf, _rec_cap = buf, cap
    _rec_n += 1
    return &_rec_buf[(_rec_n - 1) * REC_WIDTH]


cdef inline int64_t _rec_id(starpu_data_handle_t h) noexcept nogil:
    return <int64_t><uintptr_t>h - 1 if h != NULL else -1


cdef inline int64_t _rec_mode(int mode) noexcept nogil:
    # STARPU_R / STARPU_W / STARPU_RW -> 1 / 2 / 3 (starchol_sim.h's MODE_R | MODE_W)
    return (1 if (mode & STARPU_R) != 0 else 0) | (2 if (mode & STARPU_W) != 0 else 0)


cdef int _rec_task(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0,
                   int64_t o0, int m1, starpu_data_handle_t h1, int64_t o1,
                   int m2, starpu_data_handle_t h2, int64_t o2,
                   int64_t *count) noexcept nogil:
    global _rec_tasks
    cdef int64_t *r = _rec_slot()
    if r == NULL:
        return -12      # -ENOMEM, as StarPU reports it
    r[0] = <int64_t><uintptr_t>cl
    r[1] = prio
    r[2], r[3], r[4] = _rec_id(h0), _rec_mode(m0), o0
    r[5], r[6], r[7] = _rec_id(h1), _rec_mode(m1), o1
    r[8], r[9], r[10] = _rec_id(h2), _rec_mode(m2), o2
    r[11] = _rec_iter
    _rec_tasks += 1
    count[0] += 1
    return 0


def record_start():
    """Start recording the task graphs instead of submitting them (no StarPU needed).

    Until :func:`record_stop`, the graph loops of ``_graphs`` append one record per task
    (codelet key, priority, and per operand: data id, access mode 1 = R, 2 = W, 3 = RW,
    owner node; last, the iteration of a graph submitted with ``track``, else 0) and one
    per cache flush (key 0, data id), for every node, in submission order. Use handles made by :meth:`TileHandles.recording`. Not thread-safe; refused
    while StarPU runs in this process.
    """
    global _rec_on, _rec_n, _rec_tasks, _rec_oom, _rec_next_id, _rec_iter
    if _started:
        raise RuntimeError("cannot record task graphs while StarPU is started")
    if _rec_on:
        raise RuntimeError("a recording is already in progress")
    _rec_on, _rec_n, _rec_tasks, _rec_oom, _rec_next_id = True, 0, 0, False, 0
    _rec_iter = 0


def record_stop():
    """Stop recording; return ``(records, tasks)``: an int64 array (n, REC_WIDTH) and
    the number of task records. MemoryError when the recorder ran out of memory."""
    global _rec_on, _rec_buf, _rec_n, _rec_cap
    if not _rec_on:
        raise RuntimeError("no recording in progress")
    _rec_on = False
    try:
        if _rec_oom:
            raise MemoryError("the task-graph recorder ran out of memory")
        out = np.empty((_rec_n, REC_WIDTH), dtype=np.int64)
        if _rec_n:
            memcpy(<void *><uintptr_t>out.ctypes.data, _rec_buf, <size_t>_rec_n * REC_WIDTH * sizeof(int64_t))
        return out, int(_rec_tasks)
    finally:
        free(_rec_buf)
        _rec_buf, _rec_n, _rec_cap = NULL, 0, 0


def record_width():
    return REC_WIDTH


cdef int CHKERR(int status, const char *call) except -1:
    """Raise StarPUError(status, call) unless status is 0 (the one error path)."""
    if status == 0:
        return 0
    raise StarPUError(status, call.decode())


cdef int my_rank() noexcept nogil:
    return _rank


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
    MPI must already be initialised (by mpi4py). Collective over the communicator.
    Raises StarPUError.
    """
    global _started, _ever_started, _comm, _rank, _size, _sched_name, _idle_paused
    cdef int rc
    if _started:
        return
    _idle_paused = False
    _sched_name = sched.encode()
    CHKERR(starpu_conf_init(&_conf), "starpu_conf_init")
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
    CHKERR(rc, "starpu_mpi_init_conf")
    _started = True
    _ever_started = True
    starpu_mpi_comm_rank(_comm, &_rank)
    starpu_mpi_comm_size(_comm, &_size)


def shutdown(bint quiet_stats=True):
    """Wait for every task, then stop StarPU-MPI (which also stops StarPU).

    Handles must have been unregistered before. Idempotent. With ``quiet_stats``,
    the byte table StarPU-MPI prints on stderr at shutdown (when STARPU_COMM_STATS=1)
    is discarded: starchol reads the same numbers with comm_amounts().
    """
    global _started
    if not _started:
        return
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
    CHKERR(rc, "starpu_mpi_shutdown")


def rank_size():
    return (_rank, _size)


def worker_count():
    return starpu_cpu_worker_get_count()


def wait_tasks():
    """Block until every task submitted by this process has completed."""
    cdef int rc
    with nogil:
        rc = starpu_task_wait_for_all()
    CHKERR(rc, "starpu_task_wait_for_all")


def tasks_pending():
    """Tasks submitted by this process and not yet completed (for progress displays)."""
    return starpu_task_nsubmitted()


def wait_mpi():
    """Block until all ranks' pending StarPU-MPI requests are done. Collective."""
    cdef int rc
    with nogil:
        rc = starpu_mpi_wait_for_all(_comm)
    CHKERR(rc, "starpu_mpi_wait_for_all")


def pause():
    """Workers stop taking tasks and sleep (no CPU) until resume() (StarPU counts: one
    resume() per pause())."""
    starpu_pause()


def resume():
    starpu_resume()


# The session's own pause of idle workers: one flag beside StarPU's pause count, flipped
# in the same compiled call as starpu_pause/starpu_resume. Cython runs no Python bytecode
# between the two, so a Python signal handler (Ctrl-C) cannot run in between and leave
# the count and the flag disagreeing (workers paused twice, or awake while the session
# thinks them asleep). The flag is declared with the module's state above.


def idle_pause():
    """Pause the workers for the session unless it already did; True when this call
    paused them."""
    global _idle_paused
    if _idle_paused or not _started:
        return False
    starpu_pause()
    _idle_paused = True
    return True


def idle_resume():
    """Undo :func:`idle_pause` if it is in effect; True when this call resumed them."""
    global _idle_paused
    if not _idle_paused or not _started:
        return False
    starpu_resume()
    _idle_paused = False
    return True


def idle_paused():
    """Whether the workers are paused by :func:`idle_pause`."""
    return _idle_paused


def fxt_stop():
    """Stop recording this process's FxT trace: events after this call (tasks,
    transfers) are not written. A no-op in a StarPU built without FxT."""
    with nogil:
        starpu_fxt_stop_profiling()


def cache_set(bint enabled):
    CHKERR(starpu_mpi_cache_set(1 if enabled else 0), "starpu_mpi_cache_set")


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
# inserting tasks (called by the task graphs, nogil)
# ---------------------------------------------------------------------------
cdef int ins1(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
              void *arg, size_t arg_size, int me, int64_t *count) noexcept nogil:
    # a task on one tile runs on its owner only (no communication)
    cdef int rc
    cdef int64_t *left
    if _rec_on:
        return _rec_task(cl, prio, m0, h0, o0, 0, NULL, 0, 0, NULL, 0, count)
    if o0 != me:
        return 0
    left = _panel_count()
    if arg != NULL:
        rc = starpu_task_insert(cl, STARPU_PRIORITY, prio, m0, h0,
                                STARPU_CL_ARGS_NFREE, arg, arg_size,
                                STARPU_CALLBACK_WITH_ARG_NFREE, _panel_cb(left), <void *>left,
                                <int>0)
    else:
        rc = starpu_task_insert(cl, STARPU_PRIORITY, prio, m0, h0,
                                STARPU_CALLBACK_WITH_ARG_NFREE, _panel_cb(left), <void *>left,
                                <int>0)
    _panel_inserted(left, rc)
    if rc == 0:
        count[0] += 1
    return rc


cdef inline bint _writes(int mode) noexcept nogil:
    return (mode & STARPU_W) != 0


#: the status of a task this rank runs with an operand it has no handle for (-EINVAL):
#: the graph and the registered tiles (starchol.model.handles) disagree
DEF _NO_HANDLE = -22


cdef int _feed(int mode, starpu_data_handle_t h, int64_t o, int64_t x, int prio,
               int me) noexcept nogil:
    # What starpu_mpi_task_insert does for one operand on a rank that does not run the
    # task (x runs it; StarPU-MPI 1.3, mpi/src/starpu_mpi_task_insert.c): a tile this
    # rank owns and the task reads is sent to x unless the cache says x holds this
    # version (the cache off: always); a tile the task writes leaves this rank's cache.
    # Done here so that only the handles of this rank's own tiles are needed: the same
    # sends, in the same order, with the task's priority, so the same bytes.
    if (mode & STARPU_R) != 0 and o == me:
        if starpu_mpi_cached_send_set(h, <int>x) == 0:
            return starpu_mpi_isend_detached_prio(h, <int>x, starpu_mpi_data_get_tag(h),
                                                  prio, _comm, NULL, NULL)
    elif (mode & STARPU_W) != 0 and h != NULL and starpu_mpi_cache_is_enabled():
        starpu_mpi_cached_send_clear(h)
        starpu_mpi_cached_receive_clear(h)
    return 0


cdef int ins2(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
              int m1, starpu_data_handle_t h1, int64_t o1, int me,
              int64_t *count) noexcept nogil:
    # a 2-operand task, if this rank runs it (plain insert when all local) or feeds it
    # (the sends of its tiles, _feed); a task it runs with an operand it has no handle
    # for returns _NO_HANDLE
    cdef int rc
    cdef bint here
    cdef int64_t *left
    cdef int64_t x
    if _rec_on:
        return _rec_task(cl, prio, m0, h0, o0, m1, h1, o1, 0, NULL, 0, count)
    # the rank that runs it: the owner of the tile it writes
    x = o0 if _writes(m0) else o1
    here = x == me
    if not here:
        # a rank that only feeds the task sends its tiles (handles of the others unneeded)
        if o0 == me or o1 == me:
            rc = _feed(m0, h0, o0, x, prio, me)
            if rc == 0:
                rc = _feed(m1, h1, o1, x, prio, me)
            return rc
        return 0
    if h0 == NULL or h1 == NULL:
        return _NO_HANDLE
    left = _panel_count()
    if o0 == me and o1 == me:
        rc = starpu_task_insert(cl, STARPU_PRIORITY, prio, m0, h0, m1, h1,
                                STARPU_CALLBACK_WITH_ARG_NFREE, _panel_cb(left), <void *>left,
                                <int>0)
    else:
        rc = starpu_mpi_task_insert(_comm, cl, STARPU_PRIORITY, prio, m0, h0, m1, h1,
                                    STARPU_CALLBACK_WITH_ARG_NFREE, _panel_cb(left),
                                    <void *>left, <int>0)
    _panel_inserted(left, rc)
    # count the task on the rank that runs it only
    if rc == 0:
        count[0] += 1
    return rc


cdef int ins3(starpu_codelet *cl, int prio, int m0, starpu_data_handle_t h0, int64_t o0,
              int m1, starpu_data_handle_t h1, int64_t o1,
              int m2, starpu_data_handle_t h2, int64_t o2, int me,
              int64_t *count) noexcept nogil:
    cdef int rc
    cdef bint here
    cdef int64_t *left
    cdef int64_t x
    if _rec_on:
        return _rec_task(cl, prio, m0, h0, o0, m1, h1, o1, m2, h2, o2, count)
    x = o0 if _writes(m0) else (o1 if _writes(m1) else o2)
    here = x == me
    if not here:
        if o0 == me or o1 == me or o2 == me:
            rc = _feed(m0, h0, o0, x, prio, me)
            if rc == 0:
                rc = _feed(m1, h1, o1, x, prio, me)
            if rc == 0:
                rc = _feed(m2, h2, o2, x, prio, me)
            return rc
        return 0
    if h0 == NULL or h1 == NULL or h2 == NULL:
        return _NO_HANDLE
    left = _panel_count()
    if o0 == me and o1 == me and o2 == me:
        rc = starpu_task_insert(cl, STARPU_PRIORITY, prio, m0, h0, m1, h1, m2, h2,
                                STARPU_CALLBACK_WITH_ARG_NFREE, _panel_cb(left), <void *>left,
                                <int>0)
    else:
        rc = starpu_mpi_task_insert(_comm, cl, STARPU_PRIORITY, prio, m0, h0, m1, h1,
                                    m2, h2, STARPU_CALLBACK_WITH_ARG_NFREE, _panel_cb(left),
                                    <void *>left, <int>0)
    _panel_inserted(left, rc)
    if rc == 0:
        count[0] += 1
    return rc


# ---------------------------------------------------------------------------
# the submission window (starchol.linalg.cholesky submits iteration k once this rank's
# tasks of iteration k - W are done)
# ---------------------------------------------------------------------------
# _panel_left[k]: tasks of iteration k inserted on this rank and not yet done (each
# task's callback takes one off, atomically, on a worker). Allocated by panel_track and
# never freed while tasks may still call back (a buffer that is too small is replaced
# and the old one kept when tasks are pending: a few bytes per iteration).
cdef extern from *:
    """
    #include <stdint.h>
    #include <pthread.h>
    #include <time.h>
    #include <errno.h>
    /* the submitting thread sleeps on this condition until an iteration's count
       reaches 0 (the last task's callback wakes it), with a timeout */
    static pthread_mutex_t starchol_panel_lock = PTHREAD_MUTEX_INITIALIZER;
    static pthread_cond_t starchol_panel_cond = PTHREAD_COND_INITIALIZER;
    static void starchol_panel_task_done(void *arg)
    {
        if (__atomic_sub_fetch((int64_t *)arg, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&starchol_panel_lock);
            pthread_cond_broadcast(&starchol_panel_cond);
            pthread_mutex_unlock(&starchol_panel_lock);
        }
    }
    /* 1 when *p <= 0 within timeout_s seconds, else 0 */
    static int starchol_panel_wait(int64_t *p, double timeout_s)
    {
        struct timespec until;
        int rc = 0;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)timeout_s;
        until.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&starchol_panel_lock);
        while (__atomic_load_n(p, __ATOMIC_ACQUIRE) > 0 && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&starchol_panel_cond, &starchol_panel_lock, &until);
        pthread_mutex_unlock(&starchol_panel_lock);
        return __atomic_load_n(p, __ATOMIC_ACQUIRE) <= 0;
    }
    static inline void starchol_panel_add(int64_t *p, int64_t v)
    {
        __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    }
    static inline int64_t starchol_panel_load(int64_t *p)
    {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    typedef void (*starchol_callback_t)(void *);
    """
    ctypedef void (*starchol_callback_t)(void *) noexcept nogil
    void starchol_panel_task_done(void *arg) noexcept nogil
    void starchol_panel_add(int64_t *p, int64_t v) noexcept nogil
    int64_t starchol_panel_load(int64_t *p) noexcept nogil
    int starchol_panel_wait(int64_t *p, double timeout_s) noexcept nogil

cdef int64_t *_panel_left = NULL
cdef int64_t _panel_cap = 0, _panel_n = 0
cdef int64_t *_panel_now = NULL


cdef inline int64_t *_panel_count() noexcept nogil:
    # the counter of the task being inserted (before the insertion: its callback may
    # run before starpu_task_insert returns), or NULL when the window is off
    if _panel_now != NULL:
        starchol_panel_add(_panel_now, 1)
    return _panel_now


cdef inline starchol_callback_t _panel_cb(int64_t *left) noexcept nogil:
    if left != NULL:
        return starchol_panel_task_done
    return NULL


cdef inline void _panel_inserted(int64_t *left, int rc) noexcept nogil:
    # a failed insertion runs no callback
    if left != NULL and rc != 0:
        starchol_panel_add(left, -1)


cdef void panel_begin(int64_t k) noexcept nogil:
    global _panel_now, _rec_iter
    if _rec_on:
        _rec_iter = k       # a recorded task's iteration (record[11]: the simulated window)
    _panel_now = &_panel_left[k] if (_panel_left != NULL and 0 <= k < _panel_n
                                     and not _rec_on) else NULL


cdef void panel_end() noexcept nogil:
    global _panel_now
    _panel_now = NULL


def panel_track(int64_t n):
    """Count this rank's tasks of iterations 0..n-1 as graphs insert them (a graph calls
    ``panel_begin(k)`` before iteration k's tasks); :func:`panel_wait` waits for
    iteration k's. ``n`` = 0 stops counting."""
    global _panel_left, _panel_cap, _panel_n, _panel_now
    cdef int64_t *buf
    _panel_now = NULL
    if n < 0:
        raise ValueError(f"panel_track: {n} iterations")
    if n > _panel_cap:
        buf = <int64_t *>malloc(<size_t>n * sizeof(int64_t))
        if buf == NULL:
            raise MemoryError()
        if _panel_left != NULL and (not _started or starpu_task_nsubmitted() == 0):
            free(_panel_left)      # no task can call back into it any more
        _panel_left, _panel_cap = buf, n
    if n:
        memset(_panel_left, 0, <size_t>n * sizeof(int64_t))
    _panel_n = n


def panel_pending(int64_t k):
    """Tasks of iteration k inserted on this rank and not yet done (0 when not counted)."""
    if _panel_left == NULL or not 0 <= k < _panel_n:
        return 0
    return int(starchol_panel_load(&_panel_left[k]))


def panel_wait(int64_t k, double timeout_s):
    """Wait up to ``timeout_s`` seconds for this rank's tasks of iteration k (counted
    since :func:`panel_track`); True when they are done. Sleeps on a condition that the
    callback of the iteration's last task signals (no polling), with the GIL released;
    the caller loops, so that a signal reaches Python in between."""
    cdef int64_t *p
    cdef int done
    if _panel_left == NULL or not 0 <= k < _panel_n:
        return True
    p = &_panel_left[k]
    if starchol_panel_load(p) <= 0:
        return True
    with nogil:
        done = starchol_panel_wait(p, timeout_s)
    return bool(done)


cdef void cache_flush(starpu_data_handle_t h) noexcept nogil:
    # drop received copies of h (every rank, at the same point of the submission)
    cdef int64_t *r
    if _rec_on:
        if h != NULL:
            r = _rec_slot()
            if r != NULL:
                r[0], r[1], r[2] = 0, 0, _rec_id(h)
                r[3] = r[4] = r[5] = r[6] = r[7] = r[8] = r[9] = r[10] = r[11] = 0
        return
    if h != NULL:
        starpu_mpi_cache_flush(_comm, h)


cdef void release_submit(starpu_data_handle_t h) noexcept nogil:
    # unregister h once the tasks submitted on it are done
    if h != NULL and not _rec_on:
        starpu_data_unregister_submit(h)


cdef void write_back(starpu_data_handle_t h) noexcept nogil:
    # h is final once the tasks submitted on it are done: copy it back to its home (host)
    # memory as soon as the bus is idle, so that the unregistration finds it there (GPU
    # runs; on CPU workers the tile never left its home)
    if h != NULL and not _rec_on:
        starpu_data_wont_use(h)


# ---------------------------------------------------------------------------
# registered tiled matrices
# ---------------------------------------------------------------------------
cdef class TileHandles:
    """One StarPU matrix handle per stored tile (i, j) of an mt x nt tiled matrix.

    Collective: every rank creates the same TileHandles in the same order. Tiles owned
    by this rank are registered on its main memory over the numpy arrays of ``tiles``
    (Fortran-ordered, ``rows[i] x cols[j]``, ``elemsize`` bytes per entry); the others
    with no home (StarPU allocates them when they arrive). Tile (i, j) gets the owner
    ``owners[i, j]`` and the tag ``tag_base + i * nt + j``.

    ``stored`` (uint8 (mt, nt)) selects the tiles that get a handle. With ``lazy``, no
    tile has a buffer yet, not even on its owner: StarPU allocates it when a task first
    writes it (the 2.5D slices' zero copies).
    """

    def __cinit__(self):
        self.h = NULL
        self.own = NULL
        self.recorded = False

    def __init__(self, int64_t[:, ::1] owners, object tiles, int64_t[::1] rows,
                 int64_t[::1] cols, int64_t tag_base, object stored, bint lazy=False,
                 int elemsize=8):
        if not _started:
            raise RuntimeError("StarPU is not started")
        cdef int mt = owners.shape[0], nt = owners.shape[1]
        cdef int i, j
        cdef int64_t o
        cdef uintptr_t ptr
        cdef unsigned char[:, ::1] keep = np.ascontiguousarray(stored, dtype=np.uint8)
        if keep.shape[0] != mt or keep.shape[1] != nt or rows.shape[0] != mt \
                or cols.shape[0] != nt:
            raise ValueError(f"stored, rows and cols must match owners ({mt} x {nt})")
        self.mt, self.nt, self.elemsize = mt, nt, elemsize
        self.tiles = tiles
        self.h = <starpu_data_handle_t *>malloc(<size_t>mt * nt * sizeof(starpu_data_handle_t))
        self.own = <int64_t *>malloc(<size_t>mt * nt * sizeof(int64_t))
        if self.h == NULL or self.own == NULL:
            raise MemoryError()
        memset(self.h, 0, <size_t>mt * nt * sizeof(starpu_data_handle_t))
        for i in range(mt):
            for j in range(nt):
                self.own[i * nt + j] = owners[i, j]
        for i in range(mt):
            for j in range(nt):
                if not keep[i, j]:
                    continue
                o = owners[i, j]
                if o < 0 or o >= _size:
                    self.unregister()
                    raise ValueError(f"tile ({i}, {j}) has owner {o}, outside 0..{_size - 1}")
                if o == _rank and not lazy:
                    t = tiles[(i, j)]
                    if (t.shape[0] != rows[i] or t.shape[1] != cols[j]
                            or t.itemsize != elemsize or not t.flags.f_contiguous):
                        self.unregister()
                        raise ValueError(f"tile ({i}, {j}) must be a Fortran-ordered "
                                         f"{rows[i]} x {cols[j]} array of {elemsize}-byte "
                                         f"floats")
                    ptr = <uintptr_t>t.ctypes.data
                    starpu_matrix_data_register(&self.h[i * nt + j], STARPU_MAIN_RAM, ptr,
                                                <uint32_t>rows[i], <uint32_t>rows[i],
                                                <uint32_t>cols[j], elemsize)
                else:
                    starpu_matrix_data_register(&self.h[i * nt + j], -1, 0,
                                                <uint32_t>rows[i], <uint32_t>rows[i],
                                                <uint32_t>cols[j], elemsize)
                starpu_mpi_data_register_comm(self.h[i * nt + j], tag_base + i * nt + j,
                                              <int>o, _comm)

    @staticmethod
    def recording(int64_t[:, ::1] owners, int64_t[::1] rows, int64_t[::1] cols,
                  object stored, int elemsize=8):
        """Handles for the graph recorder (:func:`record_start`): no StarPU, no data.

        Tile (i, j) with ``stored[i, j]`` gets the data id ``first + i * nt + j``, where
        ``first`` is the attribute ``first_id`` (ids count up from 0 over the handles
        made since :func:`record_start`); its owner is ``owners[i, j]``. Returns the
        TileHandles; ``ids`` (int64 (mt, nt), -1 where not stored) names its data.
        """
        global _rec_next_id
        if not _rec_on:
            raise RuntimeError("TileHandles.recording needs record_start() first")
        cdef int mt = owners.shape[0], nt = owners.shape[1]
        cdef int i, j
        cdef unsigned char[:, ::1] keep = np.ascontiguousarray(stored, dtype=np.uint8)
        if keep.shape[0] != mt or keep.shape[1] != nt or rows.shape[0] != mt \
                or cols.shape[0] != nt:
            raise ValueError(f"stored, rows and cols must match owners ({mt} x {nt})")
        cdef TileHandles self = TileHandles.__new__(TileHandles)
        self.mt, self.nt, self.elemsize = mt, nt, elemsize
        self.recorded = True
        self.h = <starpu_data_handle_t *>malloc(<size_t>mt * nt * sizeof(starpu_data_handle_t))
        self.own = <int64_t *>malloc(<size_t>mt * nt * sizeof(int64_t))
        if self.h == NULL or self.own == NULL:
            raise MemoryError()
        ids = np.full((mt, nt), -1, dtype=np.int64)
        cdef int64_t[:, ::1] iv = ids
        for i in range(mt):
            for j in range(nt):
                self.own[i * nt + j] = owners[i, j]
                if keep[i, j]:
                    iv[i, j] = _rec_next_id + <int64_t>i * nt + j
                    self.h[i * nt + j] = <starpu_data_handle_t><uintptr_t>(iv[i, j] + 1)
                else:
                    self.h[i * nt + j] = NULL
        self.tiles = {"first_id": _rec_next_id, "ids": ids}
        _rec_next_id += <int64_t>mt * nt
        return self

    def unregister(self):
        """Unregister every handle (data comes back to the owners' arrays). Idempotent."""
        cdef int i
        if self.h != NULL and self.recorded:
            free(self.h)
            self.h = NULL
        if self.h != NULL:
            if _started:
                with nogil:
                    for i in range(self.mt * self.nt):
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
