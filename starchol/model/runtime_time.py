"""The runtime's costs in ``plan``'s time estimate: the simulator's quantities, counted.

``starchol simulate`` charges a task runtime's costs (docs/simulation.md, "The runtime's
costs"; a runtime description, :mod:`starchol.linalg.runtime_costs`, and the node's
``comm_throughput``). ``plan``'s estimate (:func:`starchol.model.plan.score_map`) uses
the same quantities, counted exactly per node instead of replayed:

- ``message_overhead`` (s): the node's one communication thread spends it per message
  it sends and per message it receives, one message at a time:
  ``message_s = message_overhead * (tiles sent + tiles received) + receive_overhead *
  tiles received + sent_overhead * tiles sent`` of the busiest node
  (:func:`message_seconds`; ``receive_overhead``, s, is the receiver's own share of a
  message, ``sent_overhead`` the sender's after the bytes left);
- ``comm_throughput`` (bytes/s, the node's): what the node's communication moves, sends
  and receives together: the estimate's bytes go at ``min(link bandwidth,
  comm_throughput)``;
- the submission clock: a rank spends ``insert`` seconds per task it takes part in (it
  runs it or owns one of its operands, :func:`participation_counts`) and, with
  ``submission = "every-task"``, ``walk`` seconds per other task of the graph, after
  ``startup`` (:func:`submission_seconds`).

The estimate is then ``max(submission_s, compute_s + comm_s + message_s +
overhead_s)``: submission runs beside the execution (a task waits for it), the rest is
the conservative sum of ``plan`` (no overlap).

A ``runtime`` here is any object with the attributes of
:class:`starchol.linalg.runtime_costs.RuntimeSpec` (``submission``, ``insert_s``,
``walk_s``, ``startup_s``, ``message_overhead_s``, optionally ``receive_overhead_s``
and ``sent_overhead_s``; seconds), or None (free).
"""
import numpy as np

from .counts import task_count


def participation_counts(tile_map, nt):
    """Tasks of the Cholesky graph each node takes part in, int64 array (P,): it runs the
    task or owns one of its operands (the simulator's submission clock counts the same).

    Per iteration k on slice it[k] (owners of that slice's copy): POTRF(k, k) on the
    owner of (k, k); TRSM(i, k) on the owner of (i, k), reading (k, k); SYRK/GEMM(i, j, k)
    on the owner of (i, j), reading (i, k) and (j, k); a node counted once per task.
    A 2.5D map's ADDs of partial sums (NT^2 / 2 at most, against NT^3 / 6 tasks) are not
    counted."""
    p = tile_map.nodes
    it = tile_map.iteration_slices(nt)
    owners = [tile_map.owner_map(nt, s) for s in range(tile_map.slices)]
    out = np.zeros(p, dtype=np.int64)
    for k in range(nt):
        own = owners[int(it[k])]
        out[own[k, k]] += 1                               # POTRF
        if k + 1 >= nt:
            continue
        idx = np.arange(k + 1, nt)
        panel = own[idx, k]
        diag = own[k, k]
        out += np.bincount(panel, minlength=p)            # TRSM runners
        out += np.bincount(np.full(np.count_nonzero(panel != diag), diag), minlength=p)
        rows, cols = np.tril_indices(len(idx))            # updates (i, j), i >= j
        a = own[idx[rows], idx[cols]]
        b = panel[rows]
        c = panel[cols]
        out += np.bincount(a, minlength=p)
        out += np.bincount(b[b != a], minlength=p)
        out += np.bincount(c[(c != a) & (c != b)], minlength=p)
    return out


def submission_seconds(runtime, tile_map, nt):
    """Seconds each node's submission takes, float64 array (P,): ``startup + insert *
    (tasks it takes part in) [+ walk * (the other tasks), every-task]``; zeros for a
    free runtime (None, or no insert/walk/startup)."""
    p = tile_map.nodes
    if runtime is None:
        return np.zeros(p)
    walk = runtime.walk_s if runtime.submission == "every-task" else 0.0
    if runtime.insert_s <= 0 and walk <= 0:
        return np.full(p, float(runtime.startup_s))
    part = participation_counts(tile_map, nt).astype(np.float64)
    total = float(task_count(nt))
    return runtime.startup_s + runtime.insert_s * part + walk * np.maximum(total - part, 0)


def message_seconds(runtime, sent_tiles, received_tiles):
    """Seconds of each node's communication thread, float64 array (P,):
    ``message_overhead * (tiles sent + tiles received) + receive_overhead * tiles
    received + sent_overhead * tiles sent`` (0 without a runtime)."""
    msgs = np.asarray(sent_tiles, dtype=np.float64) + np.asarray(received_tiles, dtype=np.float64)
    if runtime is None:
        return np.zeros_like(msgs)
    recv = np.asarray(received_tiles, dtype=np.float64)
    sent = np.asarray(sent_tiles, dtype=np.float64)
    return (runtime.message_overhead_s * msgs
            + getattr(runtime, "receive_overhead_s", 0.0) * recv
            + getattr(runtime, "sent_overhead_s", 0.0) * sent)


def effective_bandwidth(node_bandwidth, comm_throughput=None):
    """Bytes/s of a node's communication in the estimate: the link's, or the node's
    ``comm_throughput`` when that is smaller."""
    if comm_throughput:
        return min(float(node_bandwidth), float(comm_throughput))
    return float(node_bandwidth)


__all__ = ["participation_counts", "submission_seconds", "message_seconds",
           "effective_bandwidth"]
