"""Bus calibration: StarPU's measurement of this host's memory and device links.

StarPU 1.3 measures the bus at its first start on a host and keeps the result under
:func:`perf_model_dir`; :class:`bus_calibration_lock` serialises the starts of one host
until the files are complete (see its docstring), and :func:`bus_calibrated` says whether
they are. A traced start cannot wait for that lock (StarPU-MPI's FxT start has an
``MPI_Barrier``): :func:`calibrate_bus` calibrates the bus beforehand.
"""
import logging
import os
import subprocess
import time

from ..errors import StarcholError

log = logging.getLogger("starchol.runtime")


#: seconds a rank waits for another process's StarPU start (bus calibration) before
#: starting anyway
CALIBRATION_LOCK_TIMEOUT = 600.0


def perf_model_dir():
    """Folder where StarPU 1.3 keeps its samplings (bus calibration in ``bus/``):
    ``$STARPU_PERF_MODEL_DIR``, else ``$STARPU_HOME/.starpu/sampling`` (``$HOME`` when
    STARPU_HOME is unset)."""
    env = os.environ
    if env.get("STARPU_PERF_MODEL_DIR"):
        return env["STARPU_PERF_MODEL_DIR"]
    home = env.get("STARPU_HOME") or env.get("HOME") or "/tmp"
    return os.path.join(home, ".starpu", "sampling")


def _has_accelerators():
    """Whether the loaded StarPU is built with CUDA or OpenCL (True when unknown)."""
    try:
        from .starpu_build import describe

        config = describe()["config"]
    except Exception:  # pragma: no cover - no compiled layer or no header
        return True
    if not config:
        return True
    return "STARPU_USE_CUDA" in config or "STARPU_USE_OPENCL" in config


def bus_calibrated(folder=None):
    """True if the bus calibration files of this host are all present (non-empty)."""
    import socket

    bus = os.path.join(folder or perf_model_dir(), "bus")
    host = os.environ.get("STARPU_HOSTNAME") or socket.gethostname()
    names = {host, host.split(".")[0]}
    exts = ["config", "latency", "bandwidth"]
    if _has_accelerators():  # StarPU writes the affinity file only for CUDA / OpenCL
        exts.append("affinity")
    for name in names:
        if all(os.path.getsize(f) > 0 if os.path.isfile(f) else False
               for f in (os.path.join(bus, f"{name}.{ext}") for ext in exts)):
            return True
    return False


class bus_calibration_lock:
    """Serialise StarPU starts on one host while its bus is not calibrated yet.

    StarPU 1.3 benchmarks the bus at its first start and writes the result under
    STARPU_HOME; ranks that start together with a fresh STARPU_HOME all calibrate at
    once and one may read a half-written file and abort (``check_bus_affinity_file``
    assertion). Each start takes an exclusive ``flock`` on a file next to the
    samplings and checks the calibration under it: when complete, the lock is released
    at once (starts stay parallel); otherwise it is held until StarPU has started, so
    the next process finds complete files. ``starpu_mpi_init_conf`` has no collective
    call without FxT, so holding the lock across it cannot deadlock (a traced start has
    a barrier: :mod:`starchol.runtime.traces` calibrates the bus beforehand); after
    :data:`CALIBRATION_LOCK_TIMEOUT` seconds a rank starts anyway (with a warning).
    """

    def __init__(self, folder=None, timeout=None):
        self.folder = folder or perf_model_dir()
        self.timeout = CALIBRATION_LOCK_TIMEOUT if timeout is None else timeout
        self.fd = None
        self.held = False  # held through the start (calibration needed)

    def __enter__(self):
        import fcntl

        try:
            os.makedirs(self.folder, exist_ok=True)
            self.fd = os.open(os.path.join(self.folder, ".starchol-start.lock"),
                              os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:  # unwritable: StarPU will say so itself
            log.warning("no bus calibration lock in %s (%s)", self.folder, exc)
            self.fd = None
            return self
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log.warning("waited %.0f s for another StarPU start on this host; "
                                "starting anyway", self.timeout)
                    self._close()
                    return self
                time.sleep(0.05)
        if bus_calibrated(self.folder):
            self._close()
        else:
            self.held = True
        return self

    def _close(self):
        if self.fd is not None:
            import fcntl

            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None

    def __exit__(self, *exc):
        self._close()
        return False


def calibrate_bus(fxt_tool):
    """Run ``starpu_calibrate_bus`` (found beside ``fxt_tool``, the path of the loaded
    StarPU's ``starpu_fxt_tool``, or None) under the session's start lock when this
    host's bus calibration is missing, so that a traced start needs no lock.
    StarcholError when the tool is missing or writes no calibration."""
    with bus_calibration_lock() as lock:
        if not lock.held:
            return
        calibrate = (os.path.join(os.path.dirname(fxt_tool), "starpu_calibrate_bus")
                     if fxt_tool else "")
        if not os.access(calibrate, os.X_OK):
            raise StarcholError("the StarPU bus is not calibrated on this host and "
                                "starpu_calibrate_bus is missing: start StarPU once without a "
                                "trace first (it calibrates the bus)")
        env = dict(os.environ, STARPU_FXT_TRACE="0", STARPU_SILENT="1")
        subprocess.run([calibrate], env=env, capture_output=True, timeout=600, check=False)
        if not bus_calibrated():
            raise StarcholError("starpu_calibrate_bus did not write the bus calibration "
                                f"under {os.environ.get('STARPU_HOME', '~')}/.starpu")
