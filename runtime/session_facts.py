"""What a running session reports: its StarPU, its settings, bytes sent, traces, and
the counters of its GPUs. A base class of :class:`~starchol.runtime.session.Session`,
which keeps the life cycle, the registration and the waiting.
"""
import socket
import sys

import numpy as np

from ..version import VERSION
from . import gpu
from .backend import starpu_version
from .kernel_blas import joined
from .starpu_build import label


class SessionFacts:
    """The facts and counters of :class:`~starchol.runtime.session.Session` (its
    ``_require``, ``_backend``, ``gpu_plan``, ``trace`` and ``stats`` are read here)."""

    _trace_stopped = False
    _job_facts = None

    def job_facts(self):
        """The runtime fields of a run record, the same on every rank (a new dict each
        call). Collective on the first call (gathered once, then kept).

        ``ranks``, ``hosts`` (every rank's host name), ``ranks_per_host`` (the most ranks
        on one host), ``workers``, ``scheduler``, ``cache``, ``command_line`` (rank 0's
        ``sys.argv``), ``starchol_version``, ``starpu_version``, and ``starpu_build`` and
        ``kernel_blas`` (every distinct one of the ranks': nodes may differ). The record
        adds its ``date``.
        """
        self._require()
        if self._job_facts is None:
            comm = self.comm
            hosts = comm.allgather(socket.gethostname())
            blas = comm.allgather(self.kernel_blas.describe() if self.kernel_blas else "")
            starpu = comm.allgather(self.starpu_build)
            argv = comm.bcast(list(sys.argv), root=0)
            self._job_facts = dict(
                ranks=comm.Get_size(), hosts=hosts,
                ranks_per_host=max(hosts.count(h) for h in set(hosts)),
                workers=self.workers, scheduler=self.scheduler, cache=self.cache,
                command_line=argv, starchol_version=VERSION,
                starpu_version=self.version, starpu_build=joined(starpu),
                kernel_blas=joined(blas))
        return {k: list(v) if isinstance(v, list) else v
                for k, v in self._job_facts.items()}

    @property
    def version(self):
        return starpu_version()

    @property
    def starpu_build(self):
        """Which StarPU build this process loaded, in words
        (:func:`starchol.runtime.starpu_build.label`)."""
        return label()

    def describe(self):
        """Runtime facts for reports."""
        out = {"scheduler": self.scheduler, "workers_per_rank": self.workers,
               "starpu_version": self.version, "starpu_build": self.starpu_build,
               "cache": self.cache, "stats": self.stats,
               "kernel_blas": self.kernel_blas.describe() if self.kernel_blas else None}
        p = self.gpu_plan
        if p is not None:
            out["gpus_per_rank"] = p.ncuda
            out["cuda_workers_per_gpu"] = p.per_gpu
            out["cuda_codelets"] = list(p.cuda_codelets)
            out["perf_models"] = p.models
            if p.heteroprio:
                out["heteroprio"] = p.heteroprio
        return out

    # -- GPUs and per-kernel placement ------------------------------------------
    @property
    def cuda_workers(self):
        """CUDA workers of this rank: its GPUs times the CUDA workers per GPU
        (``STARPU_NWORKER_PER_CUDA``, or starchol's default: docs/gpu.md); 0 before the
        start and without GPUs."""
        p = self.gpu_plan
        return p.cuda_workers if p is not None and self.started else 0

    def pin_tiles(self, tiles):
        """Page-lock host tiles (numpy arrays) for asynchronous copies to the GPUs; a
        no-op without CUDA workers. They stay pinned until shutdown. Returns how many."""
        self._require()
        return gpu.pin_tiles(self.gpu_plan, tiles)

    def unpin_tiles(self, tiles):
        """Undo :meth:`pin_tiles` for these tiles (before they are freed, e.g. between
        problem sizes). Returns how many were unpinned."""
        self._require()
        return gpu.unpin_tiles(self.gpu_plan, tiles)

    def kernel_counts(self, reset=True):
        """``{kernel: {"cpu": n, "cuda": m}}`` tasks this rank ran (since start or the last
        reset), per kernel and kind of worker."""
        self._require()
        out = gpu.kernel_counts(self._backend)
        if reset:
            gpu.reset_counts(self._backend)
        return out

    def device_bytes(self):
        """Bytes StarPU copied between this rank's host and device memories since the last
        call (not network bytes): ``host_to_device``, ``device_to_host``, ``device_to_device``."""
        self._require()
        return gpu.bus_bytes()

    # -- traces and statistics -------------------------------------------------
    def stop_trace(self):
        """Stop recording the FxT trace of this rank (``starpu_fxt_stop_profiling``): what
        runs afterwards (a residual check, a gather) is left out of the trace. Local;
        call it on every rank at the same point, once this rank's part of the traced work
        is done (after :meth:`wait`: its tasks and transfers are complete). A no-op in a
        session without ``trace`` or after an earlier call. The recording cannot restart.
        """
        self._require()
        if self.trace is not None and not self._trace_stopped:
            self._backend.fxt_stop()
            self._trace_stopped = True

    def bytes_sent(self):
        """Bytes this rank has sent to each rank so far, int64 array (size,), or None
        when statistics are off."""
        self._require()
        if not self.stats:
            return None
        return self._backend.comm_amounts().astype(np.int64)
