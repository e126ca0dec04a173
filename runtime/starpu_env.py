"""StarPU's environment variables: checked, and written, before StarPU starts.

StarPU 1.3 reads its settings from the environment when it starts and reacts to bad
values with an assertion and a C backtrace on every rank (``STARPU_NCPU=abc``), or by
creating folders in odd places (``STARPU_HOME=/nonexistent/x``). :func:`check_environment`
refuses such values with a message naming the variable and the fix; the session calls it
collectively before ``starpu_mpi_init_conf``, and ``starchol run`` in its pre-flight.
StarPU reads a few settings only from the environment when it starts: the session
writes them with :func:`set_start_variables` (worker count and scheduler go in
``starpu_conf`` and take precedence over ``STARPU_NCPU`` / ``STARPU_SCHED``).
"""
import os
import re

from ..errors import UsageError

#: sends of tiles a rank keeps in flight at once (``STARPU_MPI_NDETACHED_SEND``, unless
#: the user sets it): the others wait in StarPU-MPI's queue, highest priority (that of the
#: task they feed) first. StarPU's default is :data:`STARPU_SENDS_IN_FLIGHT`; with one,
#: a panel tile or a partial sum on the critical path waits for one send instead of
#: sharing its node's link with up to 9. Measured on the emulated cluster (docs/cluster.md,
#: "One send in flight"): at 10 mbit/s sbc25d 6% faster and sbc unchanged, at 1 gbit/s
#: both unchanged within the noise. The simulator's send model reads the same default
SENDS_IN_FLIGHT = 1
#: StarPU-MPI's own default for ``STARPU_MPI_NDETACHED_SEND``
STARPU_SENDS_IN_FLIGHT = 10

#: variables StarPU reads as non-negative integers (counts, switches, sizes in MB)
INTEGER_VARIABLES = (
    "STARPU_NCPU", "STARPU_NCPUS", "STARPU_NCUDA", "STARPU_NOPENCL", "STARPU_NMIC",
    "STARPU_NMPI_MS", "STARPU_NWORKER_PER_CUDA", "STARPU_CALIBRATE", "STARPU_CALIBRATE_MINIMUM",
    "STARPU_SILENT", "STARPU_WORKERS_NOBIND", "STARPU_MPI_NOBIND", "STARPU_MPI_CACHE",
    "STARPU_MPI_CACHE_STATS", "STARPU_COMM_STATS", "STARPU_STATS", "STARPU_PROFILING",
    "STARPU_BUS_STATS", "STARPU_WORKER_STATS", "STARPU_MEMORY_STATS", "STARPU_CATCH_SIGNALS",
    "STARPU_SINGLE_COMBINED_WORKER", "STARPU_LIMIT_CPU_MEM", "STARPU_LIMIT_CUDA_MEM",
    "STARPU_MINIMUM_AVAILABLE_MEM", "STARPU_TARGET_AVAILABLE_MEM", "STARPU_DISABLE_PINNING",
    "STARPU_ENABLE_STATS", "STARPU_WATCHDOG_TIMEOUT", "STARPU_TASK_BREAK_ON_PUSH",
    "STARPU_MAX_WORKERSIZE", "STARPU_MIN_WORKERSIZE", "STARPU_NMAXBUFS",
    "STARPU_BACKOFF_MIN", "STARPU_BACKOFF_MAX", "STARPU_MPI_NDETACHED_SEND",
    "STARPU_MPI_NREADY_PROCESS", "STARPU_MPI_PRIORITIES",
)

#: starchol's tuning patches to StarPU (scripts/starpu-patches), the variable each reads
#: when StarPU starts and the value ``benchmarks/patch_policy.py`` measures against the
#: patch's default: microseconds an idle worker polls before it sleeps (default 0,
#: StarPU's own behaviour; measured with 200); whether the last awake worker of a context
#: sleeps too (default 1; 0 is StarPU's rule); whether StarPU-MPI's progress thread
#: yields its core at each polling round (default 1; 0 is StarPU's polling).
#: Non-negative integers; in starchol's name space, not StarPU's
PATCH_SWITCHES = {
    "starpu-1.3.10-idle-spin.patch": ("STARCHOL_IDLE_SPIN_US", "200"),
    "starpu-1.3.10-last-worker.patch": ("STARCHOL_IDLE_LAST_SLEEPS", "0"),
    "starpu-1.3.10-mpi-yield.patch": ("STARCHOL_MPI_YIELD", "0"),
}

#: the patch variables' former names, inside StarPU's name space: refused with the new name
RENAMED_VARIABLES = {"STARPU_IDLE_SPIN_US": "STARCHOL_IDLE_SPIN_US",
                     "STARPU_IDLE_LAST_SLEEPS": "STARCHOL_IDLE_LAST_SLEEPS"}

#: of :data:`INTEGER_VARIABLES`, those for which 0 would stall StarPU-MPI (no send ever
#: leaves, or the ready requests are never processed) or abort StarPU (CUDA workers per
#: GPU)
POSITIVE_VARIABLES = ("STARPU_MPI_NDETACHED_SEND", "STARPU_MPI_NREADY_PROCESS",
                      "STARPU_NWORKER_PER_CUDA")

#: folders StarPU writes into (it creates ``.starpu/sampling`` under the home)
FOLDER_VARIABLES = ("STARPU_HOME", "STARPU_PERF_MODEL_DIR", "STARPU_FXT_PREFIX")


def _check_integer(name, text):
    least = 1 if name in POSITIVE_VARIABLES else 0
    try:
        value = int(text.strip())
    except ValueError:
        raise UsageError(f"environment variable {name}={text!r} must be a "
                         f"{'positive' if least else 'non-negative'} integer; fix or unset it "
                         f"(unset {name})") from None
    if value < least:
        raise UsageError(f"environment variable {name}={text!r} must be >= {least}; fix or "
                         f"unset it (unset {name})")


def _writable(folder):
    """True when a folder can really be created in ``folder`` (``os.access`` says yes to
    root even on /proc); the probe is removed at once."""
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".starchol-probe-", dir=folder))
    except OSError:
        return False
    return True


def _check_folder(name, path, creatable=False):
    if not path:
        raise UsageError(f"environment variable {name} is empty; unset it or give a folder")
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    if name.startswith("STARPU_") and os.path.realpath(path) == "/":
        raise UsageError(f"{name}={path} is the file system root: StarPU would write its "
                         f"files there (/.starpu); set {name} to a folder of its own, such "
                         f"as $HOME/.starpu or /tmp/starpu-$USER")
    if os.path.isdir(path):
        if not _writable(path):
            raise UsageError(f"{name}={path} is not writable; StarPU writes its samplings "
                             f"there: set STARPU_HOME to a writable folder")
        return
    if os.path.exists(path):
        raise UsageError(f"{name}={path} is not a folder; set it to a writable folder")
    # StarPU creates the missing folders itself (mkdir -p): accept that below an existing
    # writable folder other than the file system root (STARPU_HOME=/nonexistent/x would
    # create /nonexistent; /tmp/starpu-$JOB/rank-0, as the Slurm scripts use, is fine)
    ancestor = os.path.dirname(path.rstrip("/"))
    while ancestor and not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if (creatable or ancestor != "/") and os.path.isdir(ancestor) and _writable(ancestor):
        return
    raise UsageError(f"{name}={path} does not exist and StarPU cannot create it below "
                     f"{ancestor or '/'}; create it (mkdir -p {path}) or set it to an "
                     f"existing writable folder")


#: StarPU's STARPU_WORKERS_CPUID: core numbers or ranges (``3``, ``0-3``, ``4-``)
_CPUID_RE = re.compile(r"^\s*\d+(-\d*)?([\s,]+\d+(-\d*)?)*\s*$")


def check_environment(environ=None, schedulers=None):
    """Raise :class:`UsageError` for a StarPU setting StarPU would crash on.

    Checks: the integer variables of :data:`INTEGER_VARIABLES` and of
    :data:`PATCH_SWITCHES` parse as integers >= 0 (>= 1 for :data:`POSITIVE_VARIABLES`);
    none of :data:`RENAMED_VARIABLES` is set;
    ``STARPU_SCHED`` names a policy of ``schedulers`` (when given); ``STARPU_HOME``
    (or ``HOME`` when it is unset; StarPU falls back to /tmp when both are unset) is an
    existing writable folder; ``STARPU_PERF_MODEL_DIR``
    and ``STARPU_FXT_PREFIX`` exist or can be created. Local (no communication).
    """
    env = os.environ if environ is None else environ
    for old, name in RENAMED_VARIABLES.items():
        if old in env:
            raise UsageError(f"environment variable {old} is now called {name} (starchol's "
                             f"StarPU patches read their settings in starchol's name space); "
                             f"set {name}={env[old]} instead and unset {old}")
    for name in INTEGER_VARIABLES + tuple(name for name, _ in PATCH_SWITCHES.values()):
        if name in env:
            _check_integer(name, env[name])
    sched = env.get("STARPU_SCHED")
    if sched is not None and schedulers is not None and sched not in schedulers:
        raise UsageError(f"environment variable STARPU_SCHED={sched!r} is not a StarPU "
                         f"scheduling policy (known: {', '.join(schedulers)}); unset it (scheduler "
                         f"chooses the policy)", param="scheduler")
    cpuid = env.get("STARPU_WORKERS_CPUID")
    if cpuid is not None and cpuid.strip() and not _CPUID_RE.match(cpuid):
        raise UsageError(f"environment variable STARPU_WORKERS_CPUID={cpuid!r} must list "
                         f"core numbers or ranges separated by spaces (e.g. '0 1 2' or "
                         f"'0-3'); StarPU aborts on anything else: fix or unset it")
    if "STARPU_HOME" in env:
        _check_folder("STARPU_HOME", env["STARPU_HOME"])
    elif env.get("HOME") and os.path.realpath(env["HOME"]) == "/":
        raise UsageError("HOME=/ and STARPU_HOME is unset: StarPU would write its samplings "
                         "in /.starpu; set STARPU_HOME to a writable folder of your own")
    elif env.get("HOME"):
        try:
            _check_folder("HOME", env["HOME"])
        except UsageError as exc:
            raise UsageError(f"{exc} (StarPU keeps its samplings under $HOME/.starpu when "
                             f"STARPU_HOME is unset: set STARPU_HOME to a writable folder)") \
                from None
    for name in ("STARPU_PERF_MODEL_DIR", "STARPU_FXT_PREFIX"):
        if name in env:
            _check_folder(name, env[name], creatable=True)


def set_start_variables(stats, cache, traced, shared_node, cuda_per_gpu=None, environ=None):
    """Write the ``STARPU_*`` settings StarPU reads when it starts.

    ``STARPU_COMM_STATS`` (and its StarPU 1.4 name ``STARPU_MPI_STATS``) from ``stats``,
    ``STARPU_MPI_CACHE`` from ``cache``; ``STARPU_FXT_TRACE=0`` unless ``traced`` (a
    StarPU 1.3 built with FxT records traces unless told not to; a traced start sets its
    own, :func:`starchol.runtime.traces.prepare`); ``STARPU_NWORKER_PER_CUDA`` when
    ``cuda_per_gpu`` is given (StarPU reads it only from the environment; the GPU plan
    kept the user's value). Unless already set: ``STARPU_SILENT=1``,
    ``STARPU_MPI_NOBIND=1``, ``STARPU_MPI_NDETACHED_SEND`` = :data:`SENDS_IN_FLIGHT` and,
    on a ``shared_node`` (several ranks of the job on this node),
    ``STARPU_WORKERS_NOBIND=1`` (else every rank binds its workers to the same first
    cores). ``environ``: default ``os.environ``.
    """
    env = os.environ if environ is None else environ
    if cuda_per_gpu is not None:
        env["STARPU_NWORKER_PER_CUDA"] = str(cuda_per_gpu)
    env["STARPU_COMM_STATS"] = "1" if stats else "0"
    env["STARPU_MPI_STATS"] = env["STARPU_COMM_STATS"]
    env["STARPU_MPI_CACHE"] = "1" if cache else "0"
    env.setdefault("STARPU_SILENT", "1")
    if not traced:
        env["STARPU_FXT_TRACE"] = "0"
    env.setdefault("STARPU_MPI_NOBIND", "1")
    env.setdefault("STARPU_MPI_NDETACHED_SEND", str(SENDS_IN_FLIGHT))
    if shared_node:
        env.setdefault("STARPU_WORKERS_NOBIND", "1")
