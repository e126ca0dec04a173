"""How many CPU workers a rank runs: the one home of the workers-per-rank rule.

Pure Python (no StarPU, no MPI), so the Slurm generator, ``starchol info`` and the
Session all use the same rule:

1. :func:`rank_cores`: the cores given to this rank. Its CPU affinity (what the launcher
   bound it to: ``srun --cpus-per-task``, ``mpirun --map-by ...:PE=C``), capped by
   Slurm's ``SLURM_CPUS_PER_TASK`` when set, and shared evenly among the ranks of the
   node that have the very same affinity (unbound ranks all see the whole node).
2. :func:`workers_per_rank`: every one of those cores runs a StarPU CPU worker (at least
   1, at most the StarPU build's ``STARPU_MAXCPUS``). StarPU-MPI's progress thread is
   not given a core of its own: see :data:`RESERVE_MPI_CORE`.
"""
import os

from ..errors import UsageError
from .backend import binding
from .errors import RuntimeUnavailableError

#: Keep one core of each rank for StarPU-MPI's progress thread? Measured on this
#: project's 2-core machine (docs/engine.md, "Workers per rank"): using every core was
#: not slower, so the rule gives every core to a worker. Set STARCHOL_RESERVE_MPI_CORE=1
#: to keep one core free on ranks with 3 or more cores.
RESERVE_MPI_CORE = False


def affinity_cores():
    """The cores this process may run on (its CPU affinity), as a sorted tuple."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return tuple(range(os.cpu_count() or 1))


def rank_cores(affinity=None, sharing=1, environ=None):
    """Cores given to one rank.

    Parameters
    ----------
    affinity : sequence of int, optional
        The rank's CPU affinity (default: this process's).
    sharing : int
        How many ranks on this node have exactly this affinity (1 when the launcher
        bound each rank to its own cores).
    environ : mapping, optional
        Environment to read ``SLURM_CPUS_PER_TASK`` from (default ``os.environ``).

    Returns
    -------
    int
        At least 1.
    """
    environ = os.environ if environ is None else environ
    n = len(affinity_cores() if affinity is None else affinity)
    cores = max(1, n // max(1, int(sharing)))
    slurm = environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        cores = min(cores, int(slurm))
    return cores


def reserve_mpi_core(environ=None):
    """Whether a core is kept for StarPU-MPI's thread (:data:`RESERVE_MPI_CORE`, or
    ``STARCHOL_RESERVE_MPI_CORE=0|1``)."""
    environ = os.environ if environ is None else environ
    value = environ.get("STARCHOL_RESERVE_MPI_CORE", "")
    if value in ("0", "1"):
        return value == "1"
    return RESERVE_MPI_CORE


#: CUDA workers per GPU when ``STARPU_NWORKER_PER_CUDA`` is unset (StarPU's own default
#: is 1). Each is a driver thread with its own stream, so POTRF and TRSM on the critical
#: path overlap the GEMMs (measured on the project's GPU machine: docs/gpu.md, "Results
#: on the GPU machine").
DEFAULT_CUDA_WORKERS_PER_GPU = 4


def cuda_workers_per_gpu(environ=None, cores=None, gpus=1):
    """CUDA workers (each a driver thread and a stream) StarPU starts per GPU.

    ``STARPU_NWORKER_PER_CUDA`` when set (values are checked before the start by
    :mod:`starchol.runtime.starpu_env`). Otherwise :data:`DEFAULT_CUDA_WORKERS_PER_GPU`,
    less where the rank's ``cores`` are too few: each CUDA worker keeps a core busy, and
    one core is left for a CPU worker (at least 1 per GPU).

    Parameters
    ----------
    environ : mapping, optional
        Environment to read (default ``os.environ``).
    cores : int, optional
        Cores given to the rank (:func:`rank_cores`); None: no cap.
    gpus : int
        GPUs of the rank that share those cores.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("STARPU_NWORKER_PER_CUDA", "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            return 1
    per_gpu = DEFAULT_CUDA_WORKERS_PER_GPU
    if cores is not None:
        per_gpu = min(per_gpu, (int(cores) - 1) // max(1, int(gpus)))
    return max(1, per_gpu)


def workers_per_rank(cores, max_cpus, environ=None, gpus=0):
    """CPU workers for a rank with ``cores`` cores and a StarPU limited to ``max_cpus``
    CPU workers per process (``STARPU_MAXCPUS``): every core (less one for the MPI thread
    on 3+ cores when :func:`reserve_mpi_core`, less one per CUDA worker: each CUDA
    worker's driver thread keeps a core busy, :func:`cuda_workers_per_gpu` of them per
    GPU), at least 1, at most ``max_cpus``."""
    gpus = max(0, int(gpus))
    w = int(cores)
    if gpus:
        w -= gpus * cuda_workers_per_gpu(environ, cores, gpus)
    if reserve_mpi_core(environ) and w >= 3:
        w -= 1
    return max(1, min(int(max_cpus), w))


def plan_ranks(cpus_per_node, max_cpus, environ=None):
    """``(ranks per node, cores per rank, workers per rank)`` for K cores per node.

    The fewest ranks whose worker count is not capped by ``max_cpus``, so that the
    workers cover the node: K=128 with a 256-CPU StarPU gives one rank of 128 workers;
    K=64 with Debian's 4-CPU StarPU gives 16 ranks of 4; K=5 with it, 2 ranks of 2.
    """
    k = max(1, int(cpus_per_node))
    # the most cores one rank keeps busy: its workers, plus the MPI thread's if reserved
    widest = int(max_cpus) + (1 if reserve_mpi_core(environ) else 0)
    r = -(-k // widest)
    return r, k // r, workers_per_rank(k // r, max_cpus, environ)


def installed_max_cpus():
    """STARPU_MAXCPUS of the StarPU this starchol is built against, or None when the
    compiled layer is not built (e.g. STARCHOL_NO_RUNTIME=1)."""
    try:
        return int(binding().max_cpus())
    except (ImportError, RuntimeUnavailableError):
        return None


def default_workers(sharing=1, gpus=0):
    """CPU workers per rank by this module's rule: every core given to the rank (its
    affinity, shared by the ``sharing`` ranks of the node bound to the same cores; Slurm's
    cpus-per-task) less one per CUDA worker, at most the loaded StarPU's STARPU_MAXCPUS."""
    return workers_per_rank(rank_cores(sharing=sharing), binding().max_cpus(), gpus=gpus)


def check_workers(workers):
    """Raise :class:`UsageError` unless ``workers`` is a valid worker count (1 ..
    STARPU_MAXCPUS of the loaded StarPU); return it as an int."""
    limit = binding().max_cpus()
    try:
        w = int(workers)
    except (TypeError, ValueError):
        raise UsageError(f"workers must be an integer, got {workers!r}",
                         param="workers") from None
    if w < 1 or w > limit:
        raise UsageError(f"workers must be between 1 and {limit} (the StarPU build's "
                         f"STARPU_MAXCPUS, its limit per process), got {w}"
                         + ("; Debian's StarPU allows 4, scripts/setup.sh builds one with 256"
                            if w > limit and limit <= 4 else
                            "; use more ranks per node for more cores" if w > limit else ""),
                         param="workers")
    return w
