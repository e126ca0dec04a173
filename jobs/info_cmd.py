"""``starchol info``: what this installation runs on, so a user can trust a run.

    starchol info [--json]
    mpirun -np 4 starchol info          # also the cores of every rank

StarPU (version, prefix, which build, STARPU_MAXCPUS, FxT, MPI, CUDA and the devices
seen), the MPI library, the schedulers, the BLAS/LAPACK the tile kernels call
(``STARCHOL_KERNEL_BLAS``), the BLAS libraries loaded and their threads, and the
cores given to each rank with the worker count ``starchol run`` would use there.
Nothing is started: StarPU is not initialised (no bus calibration).
"""
import glob
import os
import shutil
import socket
import subprocess

from ..integers import int_or_none
from .output import emit, json_file
from .info_args import register as register_parser


def register(sub):
    """Add ``starchol info``'s parser (:mod:`.info_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


def cuda_devices():
    """NVIDIA GPUs visible on this node (``nvidia-smi -L``, else /dev/nvidiaN), a list of
    names."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            if out.returncode == 0:
                return [line.strip() for line in out.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.SubprocessError):
            pass
    return [os.path.basename(d) for d in sorted(glob.glob("/dev/nvidia[0-9]*"))]


def kernel_blas_info():
    """The BLAS/LAPACK the kernels would call in a run started here: what
    ``STARCHOL_KERNEL_BLAS`` and ``STARCHOL_KERNEL_CORE`` ask, the library chosen (with
    its OpenBLAS core), or why none can be."""
    from ..errors import UsageError
    from ..runtime import kernel_blas

    out = {"variable": kernel_blas.ENV, "request": os.environ.get(kernel_blas.ENV, "auto"),
           "core_variable": kernel_blas.CORE_ENV,
           "core_request": os.environ.get(kernel_blas.CORE_ENV, "auto"),
           "chosen": None, "error": None}
    try:
        out["chosen"] = kernel_blas.activate().describe()
    except UsageError as exc:
        out["error"] = str(exc)
    return out


def blas_info():
    """The BLAS libraries loaded in this process with their thread counts."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS)
    from threadpoolctl import threadpool_info

    return [{"library": i.get("internal_api"), "version": i.get("version"),
             "threads": i.get("num_threads"), "path": i.get("filepath")}
            for i in threadpool_info() if i.get("user_api") == "blas"]


def rank_facts(comm, max_cpus, gpus=0):
    """This rank's host, affinity and worker counts (the Session's rule: ``gpus`` GPUs,
    as a run started here takes by default, each with its CUDA workers). Collective."""
    from ..runtime.backend import mpi
    from ..runtime.workers import (affinity_cores, cuda_workers_per_gpu, rank_cores,
                                   reserve_mpi_core, workers_per_rank)

    aff = affinity_cores()
    local = comm.Split_type(mpi().COMM_TYPE_SHARED)
    sharing = sum(1 for a in local.allgather(aff) if a == aff)
    local.Free()
    cores = rank_cores(aff, sharing)
    return {"rank": comm.Get_rank(), "host": socket.gethostname(), "affinity": len(aff),
            "sharing": sharing, "slurm_cpus_per_task": os.environ.get("SLURM_CPUS_PER_TASK"),
            "cores": cores, "workers": workers_per_rank(cores, max_cpus, gpus=gpus),
            "gpus": gpus,
            "cuda_workers_per_gpu": cuda_workers_per_gpu(cores=cores, gpus=gpus) if gpus else 0,
            "reserve_mpi_core": reserve_mpi_core()}


def collect(comm):
    """The facts of ``starchol info`` as one dict (on every rank). Collective."""
    from ..runtime import starpu_build
    from ..runtime.backend import DEFAULT_SCHEDULER, binding, mpi, mpi4py_version
    from ..version import VERSION

    backend = binding()
    starpu = starpu_build.describe(backend.runtime_version())
    cfg = starpu["config"]
    max_cpus = int(backend.max_cpus())
    cuda_built = "STARPU_USE_CUDA" in cfg
    # Open MPI 4's string ends its first line with a NUL byte
    MPI = mpi()
    lib_version = MPI.Get_library_version().replace("\0", "").strip().splitlines()[0].strip()
    facts = {
        "starchol": VERSION,
        "starpu": {
            "version": starpu["version"],
            "compiled_version": ".".join(map(str, backend.compiled_version())),
            "prefix": starpu["prefix"], "kind": starpu["kind"],
            "library": starpu["library"], "mpi_library": starpu["mpi_library"],
            "maxcpus": max_cpus,
            "maxnumanodes": int_or_none(cfg.get("STARPU_MAXNUMANODES")),
            "maxnodes": int_or_none(cfg.get("STARPU_MAXNODES")),
            "fxt": "STARPU_USE_FXT" in cfg,
            "mpi": "STARPU_USE_MPI" in cfg or starpu["mpi_library"] is not None,
            "hwloc": "STARPU_HAVE_HWLOC" in cfg,
            "cuda": {"built": cuda_built,
                     "maxcudadevs": (int_or_none(cfg.get("STARPU_MAXCUDADEVS"))
                                     if cuda_built else None),
                     "devices": cuda_devices()},
            "schedulers": [name for name, _ in backend.predefined_schedulers()],
            "default_scheduler": DEFAULT_SCHEDULER,
            "build": starpu["build"],
        },
        "mpi": {"library": lib_version, "standard": "%d.%d" % MPI.Get_version(),
                "mpi4py": mpi4py_version(),
                "ranks": comm.Get_size()},
        "kernel_blas": kernel_blas_info(),
        "blas": blas_info(),
    }
    from ..runtime.gpu import visible_gpus

    mine = rank_facts(comm, max_cpus, visible_gpus() if cuda_built else 0)
    mine["kernel_blas"] = facts["kernel_blas"]["chosen"] or facts["kernel_blas"]["error"]
    facts["ranks"] = comm.allgather(mine)
    return facts


def format_text(f):
    """The human-readable form of :func:`collect`'s dict."""
    s = f["starpu"]
    lines = [f"starchol {f['starchol']}",
             f"StarPU        {s['version']} ({s['kind']}) in {s['prefix']}",
             f"  library     {s['library']}",
             f"  MAXCPUS     {s['maxcpus']} CPU workers per process"
             + (f", {s['maxnumanodes']} NUMA nodes, {s['maxnodes']} memory nodes"
                if s["maxnodes"] else ""),
             f"  FxT traces  {'yes' if s['fxt'] else 'no (starchol run --trace needs it)'}",
             f"  StarPU-MPI  {'yes' if s['mpi'] else 'no'}",
             f"  CUDA        {'built' if s['cuda']['built'] else 'not built'}; "
             f"{len(s['cuda']['devices'])} device(s) seen"
             + "".join(f"\n                {d}" for d in s["cuda"]["devices"]),
             f"  schedulers  {', '.join(s['schedulers'])} (default {s['default_scheduler']})",
             *([f"  patches     {(s['build'] or {}).get('patches') or 'none'}"]
               if s["kind"] == "starchol build" else []),
             f"MPI           {f['mpi']['library']} (MPI {f['mpi']['standard']}, "
             f"mpi4py {f['mpi']['mpi4py']}), {f['mpi']['ranks']} rank(s)"]
    k = f["kernel_blas"]
    lines.append(f"kernels' BLAS {k['chosen'] or 'none: ' + str(k['error'])} "
                 f"({k['variable']}={k['request']}, {k['core_variable']}={k['core_request']})")
    for b in f["blas"]:
        lines.append(f"BLAS          {b['library']} {b['version']}, {b['threads']} thread(s) "
                     f"({b['path']}); 1 per StarPU worker during runs")
    if not f["blas"]:
        lines.append("BLAS          none found by threadpoolctl")
    for r in f["ranks"]:
        extra = f", Slurm cpus-per-task {r['slurm_cpus_per_task']}" \
            if r["slurm_cpus_per_task"] else ""
        share = f" shared by {r['sharing']} ranks" if r["sharing"] > 1 else ""
        lines.append(f"rank {r['rank']:<8} {r['host']}: {r['affinity']} core(s) in its "
                     f"affinity{share}{extra} -> {r['cores']} core(s), {r['workers']} "
                     f"CPU worker(s)"
                     + (f" and {r['gpus']} GPU(s) x {r['cuda_workers_per_gpu']} CUDA "
                        f"worker(s)" if r.get("gpus") else "") + " by default")
        if r.get("kernel_blas") != f["ranks"][0].get("kernel_blas"):
            lines.append(f"{'':14}kernels' BLAS here: {r['kernel_blas']}")
    return "\n".join(lines)


def run(args):
    from ..collective import run_on_root
    from ..runtime.backend import mpi

    comm = mpi().COMM_WORLD
    run_on_root(comm, json_file, args)
    facts = collect(comm)
    if comm.Get_rank() == 0:
        emit(args, facts, format_text(facts))
    return 0
