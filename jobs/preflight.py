"""Pre-flight checks: memory and disk needs against what this rank and host have.

Used by ``starchol run`` (per rank, before any allocation), ``generate`` (disk), and the
commands that build an NT x NT owner table (``map``, ``volume``). Figures are printed in
decimal units (1 GB = 10^9 bytes).

The estimate of one rank's memory for ``starchol run`` is its node's peak from
:func:`starchol.model.memory.node_memory` (the one home of the rule, shared with
``starchol plan``): its tiles (every 2.5D slice's
copies), every tile copy it receives, the runtime's handles and tasks, the owner tables,
the process itself, A's copies with ``--check`` and the gathered factor on rank 0.

It is compared with the memory available to the rank: the host's ``MemAvailable``
(or the cgroup limit minus its usage, whichever is smaller), shared by the ranks of
that host.
"""
import os

from ..errors import UsageError
from ..model.memory import PROCESS_BASE_BYTES, node_memory
from ..model.volume import DOUBLE_BYTES as DOUBLE
from ..units import format_bytes


def _read_int(path):
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _mem_available():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def _cgroup_room():
    """Bytes the cgroup of this process may still use, or None without a limit."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":  # cgroup v2
            base = os.path.join("/sys/fs/cgroup", parts[2].lstrip("/"))
            limit = _read_int(os.path.join(base, "memory.max"))
            usage = _read_int(os.path.join(base, "memory.current"))
        elif "memory" in parts[1].split(","):  # cgroup v1
            base = os.path.join("/sys/fs/cgroup/memory", parts[2].lstrip("/"))
            limit = _read_int(os.path.join(base, "memory.limit_in_bytes"))
            usage = _read_int(os.path.join(base, "memory.usage_in_bytes"))
            if limit is not None and limit >= 1 << 60:
                limit = None
        else:
            continue
        if limit is not None:
            return max(0, limit - (usage or 0))
    return None


def memory_available():
    """``(bytes, source)``: what this host can still give (MemAvailable or the cgroup
    room, the smaller), and a word saying which."""
    avail = _mem_available()
    room = _cgroup_room()
    if room is not None and (avail is None or room < avail):
        return room, "cgroup memory limit minus usage"
    return avail, "MemAvailable"


def check_table_memory(nt, slices=1, role="--nt"):
    """Refuse an NT x NT owner table (``slices`` of them, int64) that cannot fit."""
    need = (slices + 1) * nt * nt * DOUBLE + PROCESS_BASE_BYTES
    avail, source = memory_available()
    if avail is not None and need > avail:
        raise UsageError(f"{role} {nt}: the owner table of {nt} x {nt} tiles needs about "
                         f"{format_bytes(need)} of memory but {format_bytes(avail)} is "
                         f"available ({source}); use a smaller NT (or a larger NB)")


def rank_memory(tile_map, n, nb, rank, check=False, gather=False, cache=True,
                itemsize=DOUBLE, nrhs=0, mixed=False, window=None):
    """Estimated peak bytes of ``rank`` in ``starchol run``
    (:func:`starchol.model.memory.node_memory`; ``itemsize``: bytes per entry, 8 for
    float64, 4 for float32; ``nrhs``: right-hand sides solved after; ``mixed``: a
    mixed-precision solve, ``--dtype mixed``; ``window``: the submission window,
    ``--window``). Returns ``(total, parts)`` with parts a
    dict of bytes, the parts that apply."""
    mem = node_memory(tile_map, n, nb, cache=cache, check=check, gather=gather,
                      itemsize=itemsize, nrhs=nrhs, mixed=mixed, window=window)
    parts = {k: int(v[rank]) for k, v in mem.items() if k != "total"}
    return int(mem["total"][rank]), parts


#: the model's parts (:data:`starchol.model.memory.PARTS`) that this command line names
#: by a flag: ``check`` is ``run --check``
PART_WORDS = {"copies of A (check)": "copies of A (--check)",
              "residual's received tiles (check)": "residual's received tiles (--check)"}


def _detail(parts):
    """``"tiles 1.0 MB, ..."``: the parts of a memory figure that are not zero, in the
    command line's words (:data:`PART_WORDS`)."""
    return ", ".join(f"{PART_WORDS.get(k, k)} {format_bytes(v)}" for k, v in parts.items()
                     if v)


#: above this many bytes of owner tables, :func:`check_rank_memory` first refuses from
#: arithmetic alone (:func:`check_mean_memory`); below, the exact count is fast
QUICK_TABLE_BYTES = 64 * 10**6


def check_rank_memory(tile_map, n, nb, rank, ranks_on_host, check=False, gather=False,
                      fix=None, cache=True, itemsize=DOUBLE, nrhs=0, mixed=False,
                      window=None):
    """Refuse a run whose estimated memory on ``rank`` exceeds its share of the host.

    ``fix`` replaces the advice of the message (default: ``starchol run``'s);
    ``itemsize``: bytes per entry (8: float64, 4: float32)."""
    avail, source = memory_available()
    share = None if avail is None else avail // max(1, ranks_on_host)
    nt = -(-int(n) // int(nb))
    if share is not None and (tile_map.slices + 1) * nt * nt * 8 > QUICK_TABLE_BYTES:
        # the exact count would build owner tables of that size first (seconds, GBs)
        check_mean_memory(tile_map, n, nb, share, avail, source, ranks_on_host, check=check,
                          gather=gather, cache=cache, itemsize=itemsize, nrhs=nrhs,
                          mixed=mixed, fix=fix, window=window)
    need, parts = rank_memory(tile_map, n, nb, rank, check=check, gather=gather, cache=cache,
                              itemsize=itemsize, nrhs=nrhs, mixed=mixed,
                              window=window)
    if avail is None:
        return need
    if need <= share:
        return need
    detail = _detail(parts)
    slices = (f" or fewer slices (now {tile_map.slices})" if tile_map.slices > 1 else "")
    fix = fix or (f"use more ranks on more hosts (mpirun -np){slices}, a smaller --n"
                  f"{', or drop --gather' if gather and rank == 0 else ''}")
    raise UsageError(
        f"not enough memory: this rank needs about {format_bytes(need)} ({detail}) but "
        f"about {format_bytes(share)} is available to it ({source} "
        f"{format_bytes(avail)} shared by {ranks_on_host} rank(s) on this host); {fix}")


def check_mean_memory(tile_map, n, nb, share, avail, source, ranks_on_host, fix=None,
                      **kwargs):
    """Refuse from arithmetic alone, before any owner table is built, a run whose ranks
    need on average more than ``share`` bytes each: the balanced parts of
    :func:`starchol.model.memory.node_memory` (``exact=False``: the mean of the tiles
    and tasks, and the handles, tables and process every rank has; received tiles left
    out), a lower bound of the largest rank's need. ``run --n 10000000`` is refused so
    in well under a second instead of building tables of gigabytes first."""
    mem = node_memory(tile_map, n, nb, exact=False, **kwargs)
    parts = {k: int(v.mean()) for k, v in mem.items()
             if k not in ("total", "received tiles")}
    need = sum(parts.values())
    if need <= share:
        return
    detail = _detail(parts)
    fix = fix or "use more ranks on more hosts (mpirun -np) or a smaller --n"
    raise UsageError(
        f"not enough memory: the ranks need on average at least {format_bytes(need)} each "
        f"({detail}; before the tiles they receive) but about {format_bytes(share)} is "
        f"available to each ({source} {format_bytes(avail)} shared by {ranks_on_host} "
        f"rank(s) on this host); {fix}")


def dense_file_bytes(n, itemsize=DOUBLE, ncols=None):
    """Bytes of an N x N (N x ``ncols``) dataset of ``itemsize``-byte entries (8: float64)."""
    return n * (n if ncols is None else ncols) * itemsize


def model_memory_bytes(nodes):
    """Peak bytes of the exact model at ``nodes`` nodes, beyond the owner tables: the
    node-pair matrix of :func:`starchol.model.volume.transfer_pairs`, P x P 8-byte
    counts (the 2.5D partial sums are added into it in place), and one more for a
    transient copy. Measured: P = 9900, NT = 200, 0.86 GB peak resident."""
    return 2 * DOUBLE * int(nodes) ** 2


def max_nodes_in_memory(avail):
    """The largest node count whose model (:func:`model_memory_bytes`) fits in
    ``avail`` bytes."""
    lo, hi = 1, 2
    while model_memory_bytes(hi) <= avail:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if model_memory_bytes(mid) <= avail else (lo, mid)
    return lo


def check_model_memory(nodes, role=None):
    """Refuse, before any work, a node count ``nodes`` whose exact model (P x P
    matrices of byte counts, :func:`model_memory_bytes`) cannot fit in the memory
    available, giving the largest node count that fits. ``role`` names the option
    (default ``--nodes P``). Arithmetic only: nothing is allocated."""
    need = model_memory_bytes(nodes)
    avail, source = memory_available()
    if avail is None or need <= avail:
        return
    role = role or f"--nodes {nodes}"
    raise UsageError(f"{role}: the exact model holds P x P matrices of byte counts; at "
                     f"P = {nodes} they need about {format_bytes(need)} of memory but "
                     f"{format_bytes(avail)} is available ({source}); the largest node "
                     f"count that fits is {max_nodes_in_memory(avail)}")


#: the simulator's memory, measured (parent + SimGrid child, peak resident; see
#: docs/reliability.md): bytes per task of the graph (records, durations, SimGrid's
#: activities and the per-task results sent back), per worker of a node (SimGrid's
#: actors), per node pair (routes and the pair-byte matrices)
SIM_BYTES_PER_TASK = 600
SIM_BYTES_PER_WORKER = 30
SIM_BYTES_PER_PAIR = 1_000


def simulation_memory_bytes(tasks, nodes, workers):
    """Peak bytes of simulating ``tasks`` tasks on ``nodes`` nodes of ``workers``
    workers (the model of :data:`SIM_BYTES_PER_TASK` and its neighbours)."""
    return (int(tasks) * SIM_BYTES_PER_TASK + int(nodes) * int(workers) *
            SIM_BYTES_PER_WORKER + int(nodes) ** 2 * SIM_BYTES_PER_PAIR +
            PROCESS_BASE_BYTES)


def check_simulation_size(tile_map, nt, workers, role=None, nrhs=None):
    """Refuse, before any graph is recorded, a simulation that cannot fit in the memory
    available (:func:`simulation_memory_bytes` of its tasks, nodes and workers per
    node); the message names the need, what is available and how to lower it.
    Arithmetic only. ``nrhs``: the solve is simulated too."""
    from ..model.counts import task_count

    slices = max(1, getattr(tile_map, "slices", 1))
    tasks = task_count(nt) * slices + (2 * nt * (nt + 1) // 2 if nrhs else 0)
    nodes = tile_map.nodes
    need = simulation_memory_bytes(tasks, nodes, workers)
    avail, source = memory_available()
    if avail is None or need <= avail:
        return need
    parts = [(tasks * SIM_BYTES_PER_TASK, f"{tasks} tasks at NT = {nt}: use a smaller NT "
                                           f"(a larger --nb or a smaller --n)"),
             (nodes * workers * SIM_BYTES_PER_WORKER,
              f"{nodes} nodes x {workers} workers: fewer workers per node (--cores)"),
             (nodes ** 2 * SIM_BYTES_PER_PAIR, f"{nodes} x {nodes} node pairs: fewer "
                                                f"nodes")]
    biggest = max(parts)
    raise UsageError(f"{role + ': ' if role else ''}the simulation needs about {format_bytes(need)} of memory "
                     f"(its largest part, {format_bytes(biggest[0])}, for {biggest[1]}) but "
                     f"{format_bytes(avail)} is available ({source})")
