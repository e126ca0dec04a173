"""GPU workers and hybrid scheduling for a StarPU session (front of ``runtime._gpu``).

What this module decides, in one place:

- how many CUDA workers a rank starts (``--gpus K``; default every GPU the rank sees,
  none when the StarPU build or starchol's GPU layer has no CUDA);
- which codelets get a CUDA variant (POTRF with cuSOLVER; TRSM, SYRK, GEMM, their
  2.5D first-update variants and ADD with cuBLAS; the residual's TRIL stays on CPUs)
  and a history-based performance model (whenever GPUs run, or the scheduler uses
  models: ``dm*``, ``heteroprio``);
- the HeteroPrio configuration for the tiled Cholesky: one bucket per kernel type,
  GPUs visit GEMM, SYRK, TRSM, ADD, POTRF in that order, CPUs POTRF, ADD, TRSM, SYRK,
  GEMM (the critical-path kernels first), and each bucket's CPU slow factor (CPU time /
  GPU time of its kernel) read from the calibrated models, or defaults until they are;
- what a run reports: tasks per kernel on CPU and on CUDA workers, and the bytes StarPU
  copied between host and device memories (apart from the network bytes).

The session calls :func:`plan` before starting StarPU (it returns the ``init`` arguments),
:func:`after_start` once it runs and :func:`before_shutdown` before it stops.
"""
import glob
import logging
import mmap
import os
import re
import socket
from dataclasses import dataclass, field

from ..errors import UsageError
from ..integers import check_int

log = logging.getLogger("starchol.runtime")

#: schedulers that place tasks with performance models
MODEL_SCHEDULERS = ("dm", "dmda", "dmdap", "dmdar", "dmdas", "dmdasd", "heteroprio")

#: HeteroPrio buckets: one per kernel type (the 2.5D first updates share SYRK's / GEMM's)
POTRF, TRSM, SYRK, GEMM, ADD, CPU_ONLY, ANY_BOTH, ANY_CUDA = range(8)
BUCKET_NAMES = ("potrf", "trsm", "syrk", "gemm", "add", "cpu-only", "other", "other-cuda")
KERNEL_BUCKET = {"potrf": POTRF, "trsm": TRSM, "syrk": SYRK, "syrk0": SYRK, "gemm": GEMM,
                 "gemm0": GEMM, "add": ADD, "tril": CPU_ONLY}
#: the order in which each kind of worker visits the buckets
CPU_ORDER = [POTRF, ADD, TRSM, SYRK, GEMM, CPU_ONLY, ANY_BOTH]
CUDA_ORDER = [GEMM, SYRK, TRSM, ADD, POTRF, ANY_BOTH, ANY_CUDA]
#: CPU slow factors (time on one CPU worker / time on one GPU) used until the models are
#: calibrated: orders of magnitude for NB ~ 1024 float64 tiles on a recent GPU against
#: one core; the run report says which factors were used and where they came from
DEFAULT_SLOW = {POTRF: 8.0, TRSM: 100.0, SYRK: 150.0, GEMM: 300.0, ADD: 2.0}

#: the kernels whose codelets get a CUDA variant (TRIL is the residual's CPU step)
CUDA_KERNELS = ("potrf", "trsm", "syrk", "gemm", "syrk0", "gemm0", "add")


def _gpu_backend():
    try:
        from . import _gpu
    except ImportError:  # pragma: no cover - depends on the installation
        return None
    return _gpu


def cuda_built():
    """True when starchol's GPU layer was compiled with CUDA (StarPU built with CUDA)."""
    g = _gpu_backend()
    return bool(g is not None and g.cuda_built())


def visible_gpus():
    """CUDA devices this process sees (0 without CUDA support or without a GPU)."""
    g = _gpu_backend()
    return g.cuda_device_count() if g is not None and g.cuda_built() else 0


def check_gpus(gpus):
    """Validate ``gpus`` (None: every visible GPU). Returns the CUDA worker count.
    Same verdict on every rank of a node. Messages name the parameter ``gpus``."""
    if gpus is None:
        return visible_gpus()
    k = check_int(gpus, "gpus", 0)
    if k == 0:
        return 0
    if not cuda_built():
        raise UsageError(f"gpus {k}: this starchol has no CUDA support (StarPU or "
                         f"starchol was built without CUDA; see docs/gpu.md)", param="gpus")
    seen = visible_gpus()
    if k > seen:
        raise UsageError(f"gpus {k}: this rank sees {seen} GPU(s) "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})",
                         param="gpus")
    return k


def kernel_of(name):
    """``(kernel, precision)`` of a codelet name: ``potrf`` -> ("potrf", "d");
    float32 codelets are named with an ``_s`` / ``_f32`` suffix or an ``s`` prefix
    (``potrf_s``, ``spotrf``); None for a name that is no Cholesky kernel."""
    base, prec = name, "d"
    for suffix, p in (("_s", "s"), ("_f32", "s"), ("_d", "d"), ("_f64", "d")):
        if name.endswith(suffix):
            base, prec = name[: -len(suffix)], p
            break
    if base not in KERNEL_BUCKET and base[:1] in ("s", "d") and base[1:] in KERNEL_BUCKET:
        base, prec = base[1:], base[0]
    return (base, prec) if base in KERNEL_BUCKET else None


@dataclass
class GpuPlan:
    """What one session runs with (identical on the ranks of a node)."""
    ncuda: int = 0
    cuda_workers: int = 0            # ncuda x per_gpu
    per_gpu: int = 0                 # CUDA workers per GPU (STARPU_NWORKER_PER_CUDA)
    scheduler: str = "prio"
    models: bool = False
    cuda_codelets: list = field(default_factory=list)
    heteroprio: dict = None          # buckets, orders, factors and their source
    pinned: list = field(default_factory=list, repr=False)


def _uses_models(scheduler):
    return scheduler in MODEL_SCHEDULERS


def plan(backend, scheduler, gpus, cores=None):
    """Prepare the codelets and the scheduler before StarPU starts.

    ``cores``: the cores given to the rank, which cap the CUDA workers per GPU when
    ``STARPU_NWORKER_PER_CUDA`` is unset (:func:`~starchol.runtime.workers.cuda_workers_per_gpu`).

    Returns ``(plan, init_kwargs)``: ``init_kwargs`` go to ``backend.init`` (``ncuda`` and,
    for heteroprio, the policy and init-callback addresses). Without CUDA workers and
    with a scheduler that uses no models, the codelets are left exactly as they are (the
    CPU path is unchanged)."""
    ncuda = check_gpus(gpus)
    from .workers import cuda_workers_per_gpu

    per_gpu = cuda_workers_per_gpu(cores=cores, gpus=ncuda) if ncuda else 0
    p = GpuPlan(ncuda=ncuda, scheduler=scheduler, per_gpu=per_gpu,
                cuda_workers=ncuda * per_gpu)
    g = _gpu_backend()
    kwargs = {}
    if ncuda:
        kwargs["ncuda"] = ncuda
    if g is None:
        if scheduler == "heteroprio":
            raise UsageError("scheduler heteroprio needs starchol's GPU/scheduler layer "
                             "(starchol.runtime._gpu), which is not built", param="scheduler")
        return p, kwargs
    addresses = _codelets(backend)
    p.models = bool(ncuda) or _uses_models(scheduler)
    for name, addr in addresses.items():
        kp = kernel_of(name)
        g.detach(addr)
        if kp is None:
            continue
        kernel, prec = kp
        index = g.kernel_names().index(kernel)
        want_cuda = bool(ncuda) and kernel in CUDA_KERNELS
        if g.attach(addr, index, prec, want_cuda, p.models):
            p.cuda_codelets.append(name)
    if scheduler == "heteroprio":
        # buckets by the codelets' C names (the same for both precisions)
        names = {kernel_of(name)[0]: KERNEL_BUCKET[kernel_of(name)[0]] for name in addresses
                 if kernel_of(name) is not None}
        slow, source = heteroprio_factors(addresses)
        factors = {b: (1, s) for b, s in slow.items()}
        g.hp_configure(names, CPU_ORDER, CUDA_ORDER if ncuda else [], factors,
                       (ANY_BOTH, CPU_ONLY, ANY_CUDA))
        policy = g.hp_policy_address()
        if not policy:
            raise UsageError("this StarPU has no heteroprio scheduler")
        kwargs["policy"] = policy
        kwargs["policy_init"] = g.hp_init_address()
        p.heteroprio = {"buckets": dict(zip(BUCKET_NAMES, range(len(BUCKET_NAMES)))),
                        "cpu_order": [BUCKET_NAMES[b] for b in CPU_ORDER],
                        "cuda_order": [BUCKET_NAMES[b] for b in CUDA_ORDER] if ncuda else [],
                        "cpu_slow_factors": {BUCKET_NAMES[b]: s for b, s in slow.items()},
                        "factors_from": source}
    return p, kwargs


def _codelets(backend):
    """``{name: address}`` of the binding's Cholesky codelets: float64 ones by kernel name,
    float32 ones as ``<kernel>_s`` (both precisions share the C name, e.g. ``potrf``)."""
    get = getattr(backend, "codelet_addresses", None)
    if get is None:
        return {}
    out = dict(get())
    try:
        out.update({f"{name}_s": addr for name, addr in get("s").items()})
    except TypeError:  # a binding with one precision
        pass
    return out


def after_start(backend, p):
    """Once StarPU runs: per-worker cuBLAS/cuSOLVER handles, counters reset."""
    g = _gpu_backend()
    if g is None:
        return
    if p.ncuda:
        rc = g.cuda_setup(0)
        if rc != 0:
            from .errors import RuntimeUnavailableError
            raise RuntimeUnavailableError("could not create the cuBLAS/cuSOLVER handles on "
                                          "every CUDA worker (messages above)")
    reset_counts(backend)
    g.bus_bytes()  # StarPU resets its bus counters when read


def before_shutdown(backend, p):
    """Before StarPU stops: unpin host tiles, destroy the per-worker handles."""
    g = _gpu_backend()
    if g is None:
        return
    for arr in p.pinned:
        g.unpin(arr)
    p.pinned.clear()
    if p.ncuda:
        g.cuda_teardown()


def pin_tiles(p, tiles):
    """Page-lock host tiles (numpy arrays) so copies to the GPUs are asynchronous; a
    no-op without CUDA workers. Unpinned by :func:`before_shutdown`. Tiles smaller
    than a page are left alone: they may share a page with another tile (one arena,
    :mod:`starchol.linalg.tile_arena`), and a page cannot be registered twice."""
    g = _gpu_backend()
    if g is None or not p.ncuda:
        return 0
    n = 0
    for arr in tiles:
        if arr.nbytes < mmap.PAGESIZE:
            continue
        if g.pin(arr) == 0:
            p.pinned.append(arr)
            n += 1
    return n


def unpin_tiles(p, tiles):
    """Unpin tiles pinned by :func:`pin_tiles` (the others are left alone)."""
    g = _gpu_backend()
    if g is None:
        return 0
    ids = {id(arr) for arr in tiles}
    keep, n = [], 0
    for arr in p.pinned:
        if id(arr) in ids:
            g.unpin(arr)
            n += 1
        else:
            keep.append(arr)
    p.pinned[:] = keep
    return n


def reset_counts(backend):
    g = _gpu_backend()
    if g is None:
        return
    for addr in _codelets(backend).values():
        g.reset_codelet_stats(addr)


def kernel_counts(backend):
    """``{kernel: {"cpu": n, "cuda": m}}``: tasks this rank ran since the last reset, per
    kernel (codelet name) and kind of worker (StarPU's own per-worker counters)."""
    g = _gpu_backend()
    if g is None:
        return {}
    kinds = g.worker_types()
    out = {}
    for name, addr in _codelets(backend).items():
        per = g.codelet_stats(addr)
        row = {"cpu": 0, "cuda": 0}
        for w, n in enumerate(per):
            if n:
                row[kinds[w] if kinds[w] in row else "cpu"] += int(n)
        if row["cpu"] or row["cuda"]:
            out[name] = row
    return out


def bus_bytes():
    """Bytes StarPU copied between this rank's memories since the last call
    (``host_to_device``, ``device_to_host``, ``device_to_device``); not network bytes."""
    g = _gpu_backend()
    if g is None:
        return {"host_to_device": 0, "device_to_host": 0, "device_to_device": 0}
    b = g.bus_bytes()
    b.pop("host_to_host", None)
    return b


# -- acceleration factors from the calibrated models --------------------------------------
def sampling_dir():
    """StarPU 1.3's folder of codelet models (``$STARPU_PERF_MODEL_DIR`` or
    ``$STARPU_HOME/.starpu/sampling``) + ``codelets/<version>``."""
    env = os.environ
    if env.get("STARPU_PERF_MODEL_DIR"):
        base = env["STARPU_PERF_MODEL_DIR"]
    else:
        home = env.get("STARPU_HOME") or env.get("HOME") or "/tmp"
        base = os.path.join(home, ".starpu", "sampling")
    return os.path.join(base, "codelets")


def read_history_model(path):
    """Parse a StarPU 1.3 history-based model file (format version 45):
    ``{arch: [(size_bytes, mean_us, nsamples), ...]}``, arch being the kind of worker of
    each ``# Model for <arch><id>_impl<k>`` section (``"cpu"``, ``"cuda"``)."""
    out = {}
    arch = None
    in_entries = False
    with open(path) as f:
        for line in f:
            text = line.strip()
            if text.startswith("# Model for "):
                m = re.match(r"# Model for ([a-z]+)", text)
                arch = m.group(1) if m else None
                in_entries = False
                if arch:
                    out.setdefault(arch, [])
                continue
            if text.startswith("# hash"):
                in_entries = arch is not None
                continue
            if text.startswith("#"):
                if not text.startswith("# hash"):
                    in_entries = in_entries and not text.startswith("# Model")
                continue
            words = text.split()
            if not in_entries or len(words) != 8:
                continue
            try:
                int(words[0], 16)
                out[arch].append((int(words[1]), float(words[3]), int(words[7])))
            except ValueError:
                continue
    return out


def heteroprio_factors(addresses=None, folder=None):
    """CPU slow factor per bucket (time on a CPU worker / time on a CUDA worker of the same
    kernel and tile size, from the float64 history models of this host) and where they
    came from: ``("models", ...)`` when every GPU kernel has both, else the defaults
    (``"defaults"``) for the missing ones (``"models+defaults"``)."""
    folder = folder or sampling_dir()
    host = os.environ.get("STARPU_HOSTNAME") or socket.gethostname()
    slow, used = dict(DEFAULT_SLOW), 0
    for kernel, bucket in (("potrf", POTRF), ("trsm", TRSM), ("syrk", SYRK), ("gemm", GEMM),
                           ("add", ADD)):
        files = glob.glob(os.path.join(folder, "*", f"starchol_{kernel}_d.{host}"))
        if not files:
            continue
        try:
            model = read_history_model(files[0])
        except (OSError, ValueError, IndexError):
            continue
        cpu, cuda = model.get("cpu", []), model.get("cuda", [])
        if not cpu or not cuda:
            continue
        # the tile size both archs have measured most
        sizes = {s for s, _, _ in cpu} & {s for s, _, _ in cuda}
        if not sizes:
            continue
        size = max(sizes, key=lambda s: sum(n for ss, _, n in cpu + cuda if ss == s))
        t_cpu = max((n, m) for s, m, n in cpu if s == size)[1]
        t_cuda = max((n, m) for s, m, n in cuda if s == size)[1]
        if t_cuda > 0:
            slow[bucket] = max(1.0, t_cpu / t_cuda)
            used += 1
    source = "models" if used == len(DEFAULT_SLOW) else "models+defaults" if used else "defaults"
    return slow, source
