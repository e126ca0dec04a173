"""The critical path of a traced run: the chain of tasks and transfers that ends last.

Built from what ``starpu_fxt_tool`` writes (see :mod:`starchol.reports.trace_records`):

- ``tasks.rec``: every task with its ``JobId`` (``RANK_ID``), the jobs it waited for
  (``DependsOn``: StarPU's own dependencies on that rank, through its internal tasks such
  as the data acquisitions of MPI sends and receives), its times (ms) and the handles it
  accessed with their modes;
- ``data.rec``: each rank's handles with their StarPU-MPI tag and owner rank (a tile's
  tag is the same on every rank: ``(matrix + 1) << 40 | i * nt + j``, see
  ``Session``), so that a task that reads a tile of another rank can be joined to the
  MPI transfer that brought it and to the task that wrote it there;
- the MPI transfers of ``paje.trace`` (:func:`starchol.reports.trace_records.read_comms`),
  which carry the low 32 bits of the tag.

The walk goes backwards from the task that ends last: at each task it follows whichever
of its predecessors finished last (a task of the same rank it depended on, or the
transfer of a remote tile it read, then the task that wrote that tile on the sender),
until a task has none. Along the chain, the time from 0 to the makespan is split into
kernels, transfers, reductions (ADD tasks of 2.5D, and the transfers of the partial sums
they add) and waiting (a task or transfer was ready but had not started: workers busy,
queues, the network stack). The chain's length, its kernels + transfers + reductions,
is at most the makespan; the difference is the waiting.

Units: milliseconds from the first task start (as in ``trace.json``), bytes.
Pure Python; no StarPU.
"""
import bisect
import re

#: kernels counted as reductions (2.5D's sums of partial copies)
REDUCTION_KERNELS = ("add",)
#: tags of the MPI transfers are the tile tags' low 32 bits
_TAG32 = (1 << 32) - 1
_INTERNAL = re.compile(r"^(_starpu|starpu_)")


def _is_app(rec):
    name = rec.get("Name", "")
    return bool(name) and not _INTERNAL.match(name) and "StartTime" in rec


def _split(rec, key):
    return rec.get(key, "").split()


def clock_offsets(comms, size):
    """Per-rank clock offsets (ms) estimated from the transfers, to subtract from that
    rank's times.

    ``starpu_fxt_tool`` puts the ranks on one time line by the moment each left one
    ``MPI_Barrier``; a rank that left it late (its core busy) gets times too early by as
    much, milliseconds on oversubscribed cores, so that transfers seem to end before they
    start. Every transfer starts on the sender's clock and ends on the receiver's: the
    quickest transfer each way between two ranks bounds their offset from both sides,
    and the middle of those bounds (equal quickest latency each way, as NTP assumes) is
    the estimate; a least-squares fit over all pairs makes the ranks agree, rank 0 at 0.
    A rank with no transfer both ways to another keeps 0.

    Parameters
    ----------
    comms : list of dict
        ``src``, ``dst`` (ranks), ``start``, ``end`` (ms).
    size : int
        the number of ranks.

    Returns
    -------
    list of float
        offset of each rank in ms.
    """
    import numpy as np

    quickest = {}
    for c in comms:
        s, d = c["src"], c["dst"]
        if s == d or not (0 <= s < size and 0 <= d < size):
            continue
        v = float(c["end"]) - float(c["start"])
        quickest[(s, d)] = min(quickest.get((s, d), v), v)
    rows, rhs = [], []
    for (s, d), v in quickest.items():
        if s < d and (d, s) in quickest:
            row = np.zeros(size)
            row[d], row[s] = 1.0, -1.0   # o_d - o_s = (v - w_ds) / 2
            rows.append(row)
            rhs.append((v - quickest[(d, s)]) / 2)
    if not rows:
        return [0.0] * size
    for r in range(size):                 # rank 0 at 0; unconstrained ranks stay near 0
        row = np.zeros(size)
        row[r] = 1.0 if r == 0 else 1e-6
        rows.append(row)
        rhs.append(0.0)
    sol = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
    return [float(x) for x in sol]


def critical_path(task_records, data_records, comms, t0=None, span=None, offsets=None):
    """The critical path of a trace.

    Parameters
    ----------
    task_records : list of dict
        the records of ``tasks.rec`` (:func:`starchol.reports.trace_records.read_records`),
        internal tasks included (they carry the dependencies).
    data_records : list of dict
        the records of ``data.rec`` (handle, rank, MPI tag, owner).
    comms : list of dict
        transfers as :func:`starchol.reports.trace_records.read_comms` gives them (``src``,
        ``dst``, ``start``, ``end`` in ms on StarPU's clock, ``bytes``, ``tag``), in the
        order of ``trace.json``'s ``comms``.
    t0, span : float, optional
        the time origin (ms; default: the first task start) and the makespan (ms from
        t0; default: the last task end).
    offsets : list of float, optional
        each rank's clock offset (ms, :func:`clock_offsets`), subtracted from the task
        records' times (``comms`` are taken as given: correct them beforehand).

    Returns
    -------
    dict
        ``elements``: the chain in time order, each a dict with ``kind`` ("task" or
        "transfer"), ``start_ms``/``end_ms`` (from t0) and ``wait_ms`` (time between the
        previous element's end and its start); a task also has ``kernel``, ``rank``,
        ``worker``, ``task`` (its index in ``trace.json``'s ``tasks``), ``writes`` and
        ``reads`` (tags of the tiles it writes, reads; RW in both); a transfer ``src``, ``dst``, ``bytes``, ``tag`` (the
        tile's full tag), ``comm`` (index in ``comms``) and ``reduction``.
        ``makespan_ms``, ``length_ms`` (kernels + transfers + reductions),
        ``split_ms`` (``kernels``, ``transfers``, ``reductions``, ``waiting``: they add up
        to the makespan), ``kernels`` (tasks and ms on the chain per kernel),
        ``transfers`` (count) and ``unmatched_reads`` (remote reads the trace had no
        transfer for; 0 in a complete trace). Empty chain for a trace without tasks.
    """
    jobs = {r["JobId"]: r for r in task_records if "JobId" in r}
    app = [r for r in task_records if _is_app(r) and "JobId" in r]
    index = {r["JobId"]: k for k, r in enumerate(app)}
    offsets = offsets or ()

    def shift(rec):
        r = max(0, int(rec.get("MPIRank", "0")))
        return offsets[r] if r < len(offsets) else 0.0

    if t0 is None:
        t0 = min((float(r["StartTime"]) - shift(r) for r in app), default=0.0)
    ends = {j: float(jobs[j]["EndTime"]) - shift(jobs[j]) - t0 for j in index}
    starts = {j: float(jobs[j]["StartTime"]) - shift(jobs[j]) - t0 for j in index}
    if span is None:
        span = max(ends.values(), default=0.0)
    empty = {"elements": [], "makespan_ms": span, "length_ms": 0.0,
             "split_ms": {"kernels": 0.0, "transfers": 0.0, "reductions": 0.0,
                          "waiting": span},
             "kernels": {}, "transfers": 0, "unmatched_reads": 0}
    if not app:
        return empty
    # handles -> (tag, owner), per rank
    handles = {}
    for d in data_records:
        if "Handle" in d and "MPITag" in d:
            handles[(int(d.get("MPIRank", "0")), d["Handle"])] = (
                int(d["MPITag"]), int(d.get("MPIOwner", "-1")))

    def rank_of(rec):
        return max(0, int(rec.get("MPIRank", "0")))

    def accesses(rec):
        r = rank_of(rec)
        out = []
        for h, mode in zip(_split(rec, "Handles"), _split(rec, "Modes")):
            tag, owner = handles.get((r, h), (None, -1))
            if tag is not None:
                out.append((tag, mode, owner))
        return out

    # the application tasks a job waited for, through internal tasks
    memo = {}

    def app_preds(job):
        if job in memo:
            return memo[job]
        out, seen, stack = set(), set(), list(_split(jobs[job], "DependsOn"))
        while stack:
            p = stack.pop()
            if p in seen or p not in jobs:
                continue
            seen.add(p)
            if p in index:
                out.add(p)
            else:
                stack.extend(_split(jobs[p], "DependsOn"))
        memo[job] = out
        return out

    # writers of each tile on each rank, by end time
    writers = {}
    for r in app:
        for tag, mode, _ in accesses(r):
            if "W" in mode:
                writers.setdefault((rank_of(r), tag), []).append((ends[r["JobId"]],
                                                                  r["JobId"]))
    for v in writers.values():
        v.sort()
    # transfers by (src, dst, tag & 0xffffffff), by start
    by_key = {}
    for k, c in enumerate(comms):
        if c.get("tag") is None:
            continue
        by_key.setdefault((c["src"], c["dst"], int(c["tag"]) & _TAG32), []).append(
            (float(c["start"]) - t0, k))
    for v in by_key.values():
        v.sort()

    def transfer_into(rec, tag, owner):
        """The transfer that brought remote tile ``tag`` to ``rec``'s rank before it
        started (the latest one that had started by then; else the first)."""
        cands = by_key.get((owner, rank_of(rec), tag & _TAG32))
        if not cands:
            return None
        k = bisect.bisect_right(cands, (starts[rec["JobId"]], len(comms))) - 1
        return cands[max(k, 0)][1]

    def writer_before(rank, tag, t):
        ws = writers.get((rank, tag))
        if not ws:
            return None
        k = bisect.bisect_right(ws, (t, "\uffff")) - 1
        return ws[max(k, 0)][1]

    last = max(index, key=lambda j: (ends[j], starts[j]))
    chain, unmatched, guard = [("task", last, None)], 0, set()
    cur = last
    while cur not in guard:
        guard.add(cur)
        rec = jobs[cur]
        cands = [(ends[p], 0, ("task", p, None)) for p in app_preds(cur)]
        for tag, mode, owner in accesses(rec):
            if "R" not in mode or owner < 0 or owner == rank_of(rec):
                continue
            k = transfer_into(rec, tag, owner)
            if k is None:
                unmatched += 1
                continue
            cands.append((float(comms[k]["end"]) - t0, 1, ("transfer", k, tag)))
        if not cands:
            break
        _, _, best = max(cands, key=lambda c: (c[0], c[1]))
        if best[0] == "task":
            chain.append(best)
            cur = best[1]
            continue
        chain.append(best)
        c = comms[best[1]]
        producer = writer_before(c["src"], best[2], float(c["start"]) - t0)
        if producer is None or producer in guard:
            break
        chain.append(("task", producer, None))
        cur = producer
    chain.reverse()
    # elements with their times, and the timeline split along the chain
    elements = []
    split = {"kernels": 0.0, "transfers": 0.0, "reductions": 0.0, "waiting": 0.0}
    per_kernel = {}
    cursor = 0.0
    for pos, (kind, ref, tag) in enumerate(chain):
        if kind == "task":
            rec = jobs[ref]
            s, e = starts[ref], ends[ref]
            kernel = rec["Name"]
            el = {"kind": "task", "kernel": kernel, "rank": rank_of(rec),
                  "worker": int(rec.get("WorkerId", "-1")), "task": index[ref],
                  "writes": [t for t, m, _ in accesses(rec) if "W" in m],
                  "reads": [t for t, m, _ in accesses(rec) if "R" in m],
                  "start_ms": round(s, 4), "end_ms": round(e, 4)}
            what = "reductions" if kernel in REDUCTION_KERNELS else "kernels"
            k = per_kernel.setdefault(kernel, {"tasks": 0, "ms": 0.0})
            k["tasks"] += 1
            k["ms"] += e - s
        else:
            c = comms[ref]
            s, e = float(c["start"]) - t0, float(c["end"]) - t0
            nxt = chain[pos + 1] if pos + 1 < len(chain) else None
            reduction = nxt is not None and jobs[nxt[1]]["Name"] in REDUCTION_KERNELS
            el = {"kind": "transfer", "src": c["src"], "dst": c["dst"],
                  "bytes": int(c["bytes"]), "tag": tag, "comm": ref,
                  "reduction": reduction, "start_ms": round(s, 4), "end_ms": round(e, 4)}
            what = "reductions" if reduction else "transfers"
        el["wait_ms"] = round(max(0.0, s - cursor), 4) if elements else round(max(0.0, s), 4)
        if s > cursor:
            split["waiting"] += s - cursor
            cursor = s
        e = min(e, span)
        if e > cursor:
            split[what] += e - cursor
            cursor = e
        elements.append(el)
    if cursor < span:
        split["waiting"] += span - cursor
    length = split["kernels"] + split["transfers"] + split["reductions"]
    return {"elements": elements, "makespan_ms": span, "length_ms": length,
            "split_ms": split,
            "kernels": {k: {"tasks": v["tasks"], "ms": round(v["ms"], 4)}
                        for k, v in sorted(per_kernel.items())},
            "transfers": sum(1 for e in elements if e["kind"] == "transfer"),
            "unmatched_reads": unmatched}
