"""Score maps for a run and rank them: the one home of ``starchol plan``'s choice.

Each map is scored with the exact volume model and the exact per-node load at the
run's NT (:func:`score_map`):

    compute_s = (flops of the busiest node) / node_gflops      (NB^3 units -> flops)
    comm_s    = (bytes sent + received by the busiest node) / node_bandwidth
    overhead_s = (reduction steps) * step_latency_s  (2.5D maps only; 0 for 2D)
    estimate  = compute_s + comm_s + overhead_s   (no overlap: a conservative bound)

With a runtime description and the node's ``comm_throughput`` (``plan --runtime FILE
--node FILE``), the estimate charges the simulator's runtime costs too
(:mod:`starchol.model.runtime_time`, one time model for ``plan`` and ``simulate``): the
bytes go at min(bandwidth, comm_throughput), the busiest node's communication thread
adds ``message_overhead`` per message sent or received (``message_s``), and the
submission clock (``submission_s``, the slowest node's) bounds the whole:

    estimate  = max(submission_s, compute_s + comm_s + message_s + overhead_s)

The 2.5D overhead is what the critical path of traced runs shows (docs/cluster.md,
"Where 2.5D loses time"): where iteration k runs on another slice than iteration k - 1,
the last update of column k is in another slice's partial copy, so that panel step waits
on the chain for the transfer of the partial sums into the factoring copy and their ADD
before its POTRF (:func:`reduction_steps`: NT - 1 steps when the slices alternate at
every iteration, about (c - 1) NT / (c b) with the maps' blocks of b iterations going back and
forth); a 2D map has no such link. ``step_latency_s`` is the
time one such step adds (the partial tiles' bytes are already in ``comm_s``; what is left
is message and runtime latency, and the ADD): measured on the emulated cluster (6 ranks on 2 cores, 1 gbit/s) it was about
5 ms (:data:`MEASURED_STEP_LATENCY_S`); on a real cluster it is the MPI + StarPU latency
of one small message and task, tens of microseconds (:data:`STEP_LATENCY_S`, the
default). A 2.5D map thus ranks above its 2D slice map (the same family on the same
nodes) only when its gain in transfer (and compute) time exceeds that overhead
(:func:`versus_2d` says by how much, for ``starchol plan``'s explanation).

The busiest node's flops and traffic already carry the map's imbalance at this NT, so no
separate balance rule is applied: :func:`rank_key` orders maps that fit the memory
first, then by estimate, then by total bytes, then by the peak memory of the node that
needs the most (:func:`starchol.model.memory.node_memory`; a 2.5D map stores about c
times the tiles of a 2D map on the same nodes; the footprint decides only between maps
of equal estimate and equal bytes: at an equal estimate the map moving fewer bytes,
often the 2.5D one, wins).

(An earlier rule, which set aside maps whose pattern appears fewer than 6 times in NT,
was a poor proxy for the balance: ``benchmarks/plan_balance.py`` measured it, see
docs/volume-model.md, "How plan ranks the maps".)
"""
import numpy as np

from .load import node_load
from ..distributions.base import iteration_slices
from .memory import node_memory
from .runtime_time import effective_bandwidth, message_seconds, submission_seconds
from .volume import DOUBLE_BYTES, tile_bytes
from .volume_summary import volume_summary

#: seconds one 2.5D panel step adds to the critical path on a real cluster (one small MPI
#: message and one small task; the partial tiles' bytes are in the transfer time): the
#: default
STEP_LATENCY_S = 50e-6
#: the same, measured on the emulated cluster (6 ranks sharing 2 cores, 1 gbit/s links;
#: the traced runs: docs/cluster.md, "Where 2.5D loses time")
MEASURED_STEP_LATENCY_S = 5e-3
#: the 2D map whose slices a 2.5D family uses
SLICE_FAMILY = {"sbc25d": "sbc", "2dbc25d": "2dbc", "sym25d": "sym"}


def reduction_steps(nt, slices, slice_block=None):
    """Panel steps k (1 <= k < NT) whose column's last update (iteration k - 1) ran on
    another slice than the one that factors it (iteration k's): each puts a partial-sum
    transfer and an ADD on the critical path. ``slice_block``: b of
    :func:`~starchol.distributions.base.iteration_slices` (default the maps' default).
    0 for a 2D map (c = 1)."""
    it = iteration_slices(nt, slices, slice_block)
    return int(np.count_nonzero(it[1:] != it[:-1]))


def overhead_25d_s(nt, slices, step_latency_s=STEP_LATENCY_S, slice_block=None):
    """Seconds a 2.5D map of ``slices`` copies adds to the critical path over a 2D map:
    its :func:`reduction_steps`, each waiting ``step_latency_s`` for the other slices'
    partial sums and their ADD. 0 for a 2D map (c = 1)."""
    return reduction_steps(nt, slices, slice_block) * step_latency_s


def score_map(tile_map, n, nb, node_gflops, node_bandwidth, memory_per_node=None,
              itemsize=DOUBLE_BYTES, step_latency_s=STEP_LATENCY_S, mixed=False, nrhs=0,
              runtime=None, comm_throughput=None):
    """Predicted traffic, storage, load and time estimate of one map for an n x n matrix.

    Parameters
    ----------
    tile_map : TileMap
        The map (built for NT = ceil(n / nb) tile rows where it depends on NT).
    n, nb : int
        Matrix order and tile size (elements).
    node_gflops : float
        Sustained GFlop/s of one node.
    node_bandwidth : float
        Network bytes/s of one node.
    memory_per_node : float, optional
        Bytes of memory of each node (one rank per node); sets ``fits`` (True when not
        given).
    itemsize : int
        Bytes per entry: 8 (float64, the default) or 4 (float32).
    step_latency_s : float
        Seconds each 2.5D panel step adds to the critical path (:func:`overhead_25d_s`).
    mixed, nrhs : bool, int
        A mixed-precision solve of ``nrhs`` right-hand sides (``--dtype mixed``): the
        float32 factorization's bytes and estimate (``itemsize`` 4; the refinement is
        not in the estimate), and its memory: float32 tiles plus the float64 A and
        right-hand sides (:func:`~starchol.model.memory.node_memory` with ``mixed``).
    runtime : RuntimeSpec, optional
        The runtime's costs (:class:`starchol.linalg.runtime_costs.RuntimeSpec` or an
        object with its ``submission``, ``insert_s``, ``walk_s``, ``startup_s`` and
        ``message_overhead_s``; seconds): ``message_s`` and ``submission_s`` in the
        estimate (:mod:`starchol.model.runtime_time`). None: free.
    comm_throughput : float, optional
        Bytes/s the node's communication moves, sends and receives together (the node
        description's); the bytes go at min(``node_bandwidth``, this).

    Returns
    -------
    dict
        The map's parameters (``map``, ``dist``, ``nodes``, ``slices``, ...),
        ``pattern_size`` and ``periods`` (NT / pattern size, None if the map has no
        pattern; informative), ``bytes`` and ``ratio`` (D / S) of the whole
        factorization, ``memory_per_node_bytes`` (the peak of the node that needs the
        most, :func:`starchol.model.memory.node_memory`: its tiles, every slice's copies
        included, every tile copy it receives, the runtime's handles and tasks, the
        process), ``memory_parts`` (that node's parts, bytes), ``tile_bytes_per_node``
        (the tile storage of the node that stores the most),
        ``busiest_node_traffic_bytes`` (sent + received; the
        last tile row/column smaller when NB does not divide N), ``flops_max_over_avg``
        and ``tiles_max_over_avg`` (busiest node over the mean of the map's nodes),
        ``compute_s``, ``comm_s``, ``overhead_s`` (2.5D's reduction steps, 0 for 2D),
        ``message_s`` and ``submission_s`` (the runtime's costs, 0 without one),
        ``reduction_steps`` (:func:`reduction_steps`),
        ``estimate_s`` (seconds) and ``fits``.
    """
    nt = -(-n // nb)
    doc = volume_summary(tile_map, nt, nb, n=n, with_pairs=False, itemsize=itemsize)
    load = node_load(tile_map, nt, tile_bytes=tile_bytes(n, nb, itemsize))
    traffic = (np.asarray(doc["per_node"]["sent_bytes"])
               + np.asarray(doc["per_node"]["received_bytes"]))
    compute_s = float(load["flops"].max()) * nb ** 3 / (node_gflops * 1e9)
    comm_s = float(traffic.max()) / effective_bandwidth(node_bandwidth, comm_throughput)
    steps = reduction_steps(nt, tile_map.slices, tile_map.slice_block)
    overhead_s = steps * step_latency_s
    message_s = float(message_seconds(runtime, doc["per_node"]["sent_tiles"],
                                      doc["per_node"]["received_tiles"]).max())
    submission_s = float(submission_seconds(runtime, tile_map, nt).max())
    mem = node_memory(tile_map, n, nb, received_bytes=doc["per_node"]["received_bytes"],
                      load=load, itemsize=itemsize, mixed=mixed, nrhs=nrhs)
    top = int(np.argmax(mem["total"]))
    memory = int(mem["total"][top])
    return {
        "map": str(tile_map), **tile_map.summary(),
        "pattern_size": tile_map.pattern_size(), "periods": tile_map.periods(nt),
        "bytes": doc["bytes"], "ratio": doc["ratio"],
        "memory_per_node_bytes": memory,
        "memory_parts": {k: int(v[top]) for k, v in mem.items() if k != "total"},
        "tile_bytes_per_node": int(load["bytes"].max()),
        "busiest_node_traffic_bytes": int(traffic.max()),
        "flops_max_over_avg": load["flops_max_over_avg"],
        "tiles_max_over_avg": load["tiles_max_over_avg"],
        "compute_s": compute_s, "comm_s": comm_s, "overhead_s": overhead_s,
        "message_s": message_s, "submission_s": submission_s,
        "reduction_steps": steps,
        "estimate_s": max(submission_s, compute_s + comm_s + message_s + overhead_s),
        "fits": memory_per_node is None or memory <= memory_per_node,
    }


def rank_key(row):
    """Sort key of a scored map (:func:`score_map`): fits first, then the least estimate,
    then the least total bytes, then the least peak memory per node."""
    return (not row["fits"], row["estimate_s"], row["bytes"], row["memory_per_node_bytes"])


def rank_key_simulated(row):
    """Sort key with simulated makespans (``plan --simulate``): fits first, then the
    simulated ones by ``simulated_s``, then the others by :func:`rank_key`."""
    sim = row.get("simulated_s")
    return (not row["fits"], sim is None, sim if sim is not None else 0.0, rank_key(row))


def rank_maps(rows, simulated=False):
    """The scored maps best first (:func:`rank_key`, or :func:`rank_key_simulated` with
    ``simulated``; stable), and the pick: the first that fits, or None. Returns
    (rows, pick)."""
    rows = sorted(rows, key=rank_key_simulated if simulated else rank_key)
    return rows, (rows[0] if rows and rows[0]["fits"] else None)


def versus_2d(row, rows):
    """A 2.5D row against its 2D slice map (the same family, 2D, on the same nodes) among
    ``rows``: a dict with ``flat`` (that row), ``gain_s`` (the 2D map's compute + comm
    minus the 2.5D map's), ``overhead_s`` and ``ahead`` (gain > overhead: the 2.5D map
    ranks above it); None for a 2D row or when the 2D slice map is not among ``rows``."""
    family = SLICE_FAMILY.get(row.get("dist"))
    if row.get("slices", 1) <= 1 or family is None:
        return None
    flat = [r for r in rows if r["dist"] == family and r["slices"] == 1
            and r["nodes"] == row["nodes"]]
    if not flat:
        return None
    flat = min(flat, key=rank_key)
    gain = (flat["compute_s"] + flat["comm_s"]) - (row["compute_s"] + row["comm_s"])
    return {"flat": flat, "gain_s": gain, "overhead_s": row["overhead_s"],
            "ahead": gain > row["overhead_s"]}
