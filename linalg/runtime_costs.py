"""What a runtime costs besides the tasks and the bytes: the runtime description.

A **runtime description** (JSON; ``examples/runtimes/``, ``docs/simulation.md``, "The
runtime's costs") gives the costs of the task runtime on each node, in seconds, that the
simulator adds to the tasks' durations and the links' bytes:

- ``sends_in_flight``: sends a node keeps going at once, the others queued by the
  priority of the task they feed (StarPU-MPI's ``STARPU_MPI_NDETACHED_SEND``; 0: no
  limit);
- ``submission``: ``"pruned"`` (a rank submits only the tasks it takes part in: it runs
  them or owns one of their operands, as starchol's graph loops do) or ``"every-task"``
  (every rank walks every task of the graph and StarPU-MPI decides, as Chameleon does);
- ``insert``: seconds of the submitting thread per task the rank takes part in;
- ``walk``: seconds per task it takes no part in (``"every-task"`` only);
- ``startup``: seconds before a rank submits its first task;
- ``message_overhead``: seconds of the rank's one communication thread per message, on
  the sender before the bytes leave and on the receiver after they arrive, one message
  at a time;
- ``receive_overhead``: seconds more of the receiving rank's communication thread per
  message it receives (matching, the rendezvous handshake of a large message, the copy
  on receive), in the same one-at-a-time queue; 0 unless measured;
- ``sent_overhead``: seconds of the sending rank's communication thread per message
  once its bytes have left (StarPU-MPI's thread testing the send to completion and
  releasing the tile; on an onload network, progressing the transfer), in the same
  queue: it delays the messages behind it on that thread, not this one;
- ``task_order``: ``"priority"`` (a node's workers take the highest-priority ready
  task, as StarPU's ``prio`` scheduler, the default) or ``"ready"`` (the task ready
  first: a scheduler that ignores priorities);
- ``send_order``: the same for a node's waiting sends (``"priority"`` of the task they
  feed, the default, or ``"ready"``: in the order their data became ready);
- ``priorities``: the tasks' priorities, ``"starchol"`` (the graph loops', the default)
  or ``"chameleon"`` (Chameleon's ``pzpotrf``: a step's updates ranked by anti-diagonal,
  :meth:`~starchol.linalg.task_graph.TaskGraph.chameleon_records`); they order the
  ready tasks (``task_order`` ``"priority"``) and the waiting sends, each carrying the
  priority of the task it feeds;
- ``window``: the submission window in iterations (docs/runtime.md; 0: the whole graph
  at once, as Chameleon submits it); absent: starchol's rule,
  :func:`~starchol.model.memory.default_window`, as ``starchol run`` applies it;
- optional ``name``, ``source``, ``comment``.

The node's ``comm_throughput`` (:mod:`starchol.model.platform`) is the other
communication cost. A task starts no earlier than its rank has submitted it, a transfer no earlier than both
its ends have submitted the task that reads it. Units: seconds.
"""
import json
from dataclasses import dataclass

from ..errors import UsageError
from ..integers import check_int
from ..runtime.starpu_env import SENDS_IN_FLIGHT
from ..model.platform import check_fields, parse_latency

SUBMISSIONS = ("pruned", "every-task")
ORDERS = ("priority", "ready")
PRIORITIES = ("starchol", "chameleon")


@dataclass
class RuntimeSpec:
    """The runtime's costs (module docstring); the default is free, with starchol's one
    send in flight and its pruned submission. Units: seconds."""
    sends_in_flight: int = SENDS_IN_FLIGHT
    submission: str = "pruned"
    insert_s: float = 0.0
    walk_s: float = 0.0
    startup_s: float = 0.0
    message_overhead_s: float = 0.0
    receive_overhead_s: float = 0.0
    sent_overhead_s: float = 0.0
    sends_fifo: bool = False
    tasks_fifo: bool = False
    priorities: str = "starchol"
    name: str = "runtime"
    source: str = ""
    window: object = None       # None: starchol's rule (model.memory.default_window)

    def sim_kwargs(self):
        """The keyword arguments of ``starchol.runtime._sim.simulate`` (but the sends)."""
        return {"message_overhead": self.message_overhead_s,
                "receive_overhead": self.receive_overhead_s,
                "sent_overhead": self.sent_overhead_s,
                "submit_every_task": self.submission == "every-task",
                "insert_s": self.insert_s, "walk_s": self.walk_s,
                "startup_s": self.startup_s, "sends_fifo": self.sends_fifo,
                "tasks_fifo": self.tasks_fifo}

    def to_dict(self):
        out = {"name": self.name, "sends_in_flight": self.sends_in_flight,
               "submission": self.submission, "insert_s": self.insert_s,
               "walk_s": self.walk_s, "startup_s": self.startup_s,
               "message_overhead_s": self.message_overhead_s,
               "receive_overhead_s": self.receive_overhead_s,
               "sent_overhead_s": self.sent_overhead_s,
               "task_order": "ready" if self.tasks_fifo else "priority",
               "send_order": "ready" if self.sends_fifo else "priority",
               "priorities": self.priorities}
        if self.window is not None:
            out["window"] = self.window
        if self.source:
            out["source"] = self.source
        return out


def runtime_from_dict(doc, where="runtime description"):
    """A :class:`RuntimeSpec` from a parsed JSON object; UsageError naming the field."""
    check_fields(doc, {"name", "sends_in_flight", "submission", "insert", "walk", "startup",
                       "message_overhead", "receive_overhead", "sent_overhead", "task_order",
                       "send_order", "priorities", "source", "comment", "window"}, where)
    k = check_int(doc.get("sends_in_flight", SENDS_IN_FLIGHT), f"{where}: sends_in_flight",
                  low=0, exact=False, param=None)
    w = doc.get("window")
    if w is not None:
        w = check_int(w, f"{where}: window", low=0, exact=False, param=None)
    sub = doc.get("submission", "pruned")
    if sub not in SUBMISSIONS:
        raise UsageError(f"{where}: submission must be one of {', '.join(SUBMISSIONS)}, "
                         f"got {sub!r}")
    for key in ("task_order", "send_order"):
        if doc.get(key, "priority") not in ORDERS:
            raise UsageError(f"{where}: {key} must be one of {', '.join(ORDERS)}, got "
                             f"{doc[key]!r}")
    if doc.get("priorities", "starchol") not in PRIORITIES:
        raise UsageError(f"{where}: priorities must be one of {', '.join(PRIORITIES)}, got "
                         f"{doc['priorities']!r}")
    seconds = {key: parse_latency(doc.get(key, 0), f"{where}: {key}")
               for key in ("insert", "walk", "startup", "message_overhead",
                            "receive_overhead", "sent_overhead")}
    return RuntimeSpec(sends_in_flight=k, submission=sub, insert_s=seconds["insert"],
                       walk_s=seconds["walk"], startup_s=seconds["startup"],
                       message_overhead_s=seconds["message_overhead"],
                       receive_overhead_s=seconds["receive_overhead"],
                       sent_overhead_s=seconds["sent_overhead"],
                       tasks_fifo=doc.get("task_order", "priority") == "ready",
                       sends_fifo=doc.get("send_order", "priority") == "ready",
                       priorities=doc.get("priorities", "starchol"),
                       name=str(doc.get("name", "runtime")), source=str(doc.get("source", "")),
                       window=w)


def load_runtime(path):
    """Read a runtime description from a JSON file; UsageError naming the file and the
    problem."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"cannot read runtime description {path}: {exc.strerror}",
                         param="runtime") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"runtime description {path} is not JSON: {exc.msg} at line "
                         f"{exc.lineno}, column {exc.colno}", param="runtime") from exc
    return runtime_from_dict(doc, f"runtime description {path}")
