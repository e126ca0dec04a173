# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# distutils: language = c++
"""Replay a recorded task graph on SimGrid (``starchol.runtime._sim``).

A thin wrapper of ``pyx/starchol_sim.cpp`` (SimGrid's C++ S4U API): the records of the
graph recorder (``_binding.record_start``) with each task's duration, each datum's bytes
and the platform, in; makespan, per-task start/end/worker, bytes per node pair and the
critical paths, out. SimGrid holds one engine per process: :func:`simulate` may run once
in a process (``starchol.linalg.simulate`` runs it in a child process).
Units: seconds, bytes, bytes per second.
"""
from libc.stdint cimport int64_t, int32_t

import numpy as np

cdef extern from "starchol_sim.h":
    int STARCHOL_REC_WIDTH
    ctypedef struct starchol_sim_input:
        int64_t nrec
        const int64_t *rec
        int64_t ntasks
        const double *duration
        const int64_t *data_bytes
        int64_t ndata
        int cache
        int nodes
        const int *cores
        const double *bandwidth
        const double *latency
        double backbone_bandwidth
        double backbone_latency
        int sends_in_flight
        int pair_serial
        const double *comm_throughput
        double message_overhead
        double receive_overhead
        double sent_overhead
        int sends_fifo
        int tasks_fifo
        int submit_every_task
        double insert_s
        double walk_s
        double startup_s
        int window
        void (*progress)(void *ctx, int64_t done, int64_t total) noexcept nogil
        void *progress_ctx
        int64_t progress_every
    ctypedef struct starchol_sim_output:
        double makespan
        double critical_path
        double critical_path_comm
        int64_t ntransfers
        double *start
        double *end
        int32_t *worker
        int32_t *node
        int64_t *pair_bytes
        double *busy
    int starchol_simulate(const starchol_sim_input *inp, starchol_sim_output *out,
                          char *err, int errlen) nogil


cdef void _progress(void *ctx, int64_t done, int64_t total) noexcept nogil:
    with gil:
        try:
            (<object>ctx)(done, total)
        except BaseException:  # noqa: BLE001  a display must not stop the simulation
            pass


def rec_width():
    return STARCHOL_REC_WIDTH


def simulate(int64_t[:, ::1] records, int64_t ntasks, double[::1] duration,
             int64_t[::1] data_bytes, bint cache, int[::1] cores, double[::1] bandwidth,
             double[::1] latency, double backbone_bandwidth=0.0,
             double backbone_latency=0.0, int sends_in_flight=0, bint pair_serial=False,
             object progress=None,
             int64_t every=10000, object comm_throughput=None, double message_overhead=0.0,
             bint submit_every_task=False, double insert_s=0.0, double walk_s=0.0,
             double startup_s=0.0, bint sends_fifo=False, bint tasks_fifo=False,
             int window=0, double receive_overhead=0.0, double sent_overhead=0.0):
    """Simulate the recorded graph once (see the module docstring); returns a dict:
    ``makespan``, ``critical_path``, ``critical_path_comm`` (s), ``transfers``,
    ``start``, ``end`` (float64 per task, s), ``worker``, ``node`` (int32 per task),
    ``pair_bytes`` (int64 (P, P), sender row) and ``busy`` (float64 per node, s).
    ``sends_in_flight``: sends a node keeps in flight, the others queued by the priority
    of the task they feed (0: no limit). ``progress(done, total)`` is called every
    ``every`` tasks. ``pair_serial``: one send at a time per (sender, receiver).
    The runtime's costs (``starchol_sim.h``; 0 = free): ``comm_throughput`` (bytes/s per
    node, sends and receives together; None: no limit), ``message_overhead`` (s of a
    node's communication thread per message, sender and receiver),
    ``receive_overhead`` (s more of the receiver's thread per message it receives),
    ``sent_overhead`` (s of the sender's thread per message after its bytes left), the
    submission
    clock (``insert_s`` per task a node takes part in, ``walk_s`` per other task when
    ``submit_every_task``, from ``startup_s``). ``window``: the submission window in
    iterations (each task's in its record's last column; 0: the whole graph at once).
    RuntimeError with the simulator's message on a bad graph."""
    cdef int p = cores.shape[0]
    if records.shape[1] != STARCHOL_REC_WIDTH:
        raise ValueError(f"records must have {STARCHOL_REC_WIDTH} columns")
    if bandwidth.shape[0] != p or latency.shape[0] != p or duration.shape[0] != ntasks:
        raise ValueError("cores, bandwidth and latency need one entry per node, "
                         "duration one per task")
    start = np.zeros(ntasks, dtype=np.float64)
    end = np.zeros(ntasks, dtype=np.float64)
    worker = np.zeros(ntasks, dtype=np.int32)
    node = np.zeros(ntasks, dtype=np.int32)
    pair_bytes = np.zeros((p, p), dtype=np.int64)
    busy = np.zeros(p, dtype=np.float64)
    cdef double[::1] vs = start, ve = end, vb = busy
    cdef int32_t[::1] vw = worker, vn = node
    cdef int64_t[:, ::1] vp = pair_bytes
    cdef starchol_sim_input inp
    cdef starchol_sim_output out
    cdef double[::1] vc
    if comm_throughput is not None:
        vc = np.ascontiguousarray(comm_throughput, dtype=np.float64)
        if vc.shape[0] != p:
            raise ValueError("comm_throughput needs one entry per node")
    for name, value in (("message_overhead", message_overhead),
                        ("receive_overhead", receive_overhead),
                        ("sent_overhead", sent_overhead), ("insert_s", insert_s),
                        ("walk_s", walk_s), ("startup_s", startup_s)):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0 s, got {value!r}")
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    cdef int64_t dummy_rec = 0
    cdef double dummy_d = 0
    cdef int32_t dummy_i = 0
    inp.nrec = records.shape[0]
    inp.rec = &records[0, 0] if records.shape[0] else &dummy_rec
    inp.ntasks = ntasks
    inp.duration = &duration[0] if ntasks else &dummy_d
    inp.data_bytes = &data_bytes[0] if data_bytes.shape[0] else &dummy_rec
    inp.ndata = data_bytes.shape[0]
    inp.cache = 1 if cache else 0
    inp.nodes = p
    inp.cores = &cores[0]
    inp.bandwidth = &bandwidth[0]
    inp.latency = &latency[0]
    inp.backbone_bandwidth = backbone_bandwidth
    inp.backbone_latency = backbone_latency
    inp.sends_in_flight = sends_in_flight
    inp.pair_serial = 1 if pair_serial else 0
    inp.comm_throughput = &vc[0] if comm_throughput is not None else NULL
    inp.message_overhead = message_overhead
    inp.receive_overhead = receive_overhead
    inp.sent_overhead = sent_overhead
    inp.sends_fifo = 1 if sends_fifo else 0
    inp.tasks_fifo = 1 if tasks_fifo else 0
    inp.submit_every_task = 1 if submit_every_task else 0
    inp.insert_s = insert_s
    inp.walk_s = walk_s
    inp.startup_s = startup_s
    inp.window = window
    inp.progress = NULL
    if progress is not None:
        inp.progress = _progress
    inp.progress_ctx = <void *>progress
    inp.progress_every = every
    out.start = &vs[0] if ntasks else &dummy_d
    out.end = &ve[0] if ntasks else &dummy_d
    out.worker = &vw[0] if ntasks else &dummy_i
    out.node = &vn[0] if ntasks else &dummy_i
    out.pair_bytes = &vp[0, 0]
    out.busy = &vb[0]
    cdef char err[512]
    cdef int rc
    with nogil:
        rc = starchol_simulate(&inp, &out, err, 512)
    if rc != 0:
        raise RuntimeError(err.decode(errors="replace"))
    return {"makespan": out.makespan, "critical_path": out.critical_path,
            "critical_path_comm": out.critical_path_comm,
            "transfers": int(out.ntransfers), "start": start, "end": end,
            "worker": worker, "node": node, "pair_bytes": pair_bytes, "busy": busy}
