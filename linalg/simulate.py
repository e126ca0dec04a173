"""Simulated time of the project's task graphs on a described platform (SimGrid).

The graph is recorded from the compiled loops that the runtime runs
(:mod:`.task_graph`), each task gets a duration from the node description (its flops
over the worker's GFlop/s for its kernel), and ``starchol.runtime._sim`` replays it on
SimGrid (C++ S4U API): one host per node with W cores, per-node list scheduling by
priority (StarPU's ``prio``), one transfer per tile version and receiving node with the
cache on (per task and remote operand with it off), each node's full-duplex link and an
optional shared backbone. The simulated bytes per node pair are the exact model's
(:func:`~starchol.model.volume.transfer_pairs_bytes`), by construction and by test.

SimGrid keeps one engine per process, and aborts the process on some internal
errors: every simulation runs in a child process of its own (fork), which sends its
progress and result back through a pipe.

Units: seconds, bytes, flop/s; busy fractions are task time over W x makespan.
"""
import multiprocessing
import os
import time
from dataclasses import dataclass

import numpy as np

from ..errors import StarcholError
from ..model.operations import BYTES_PER_ENTRY
from ..model.platform import DTYPES
from ..model.counts import KERNELS
from ..model.memory import check_window
from .task_graph import record_cholesky, record_solve
from ..runtime.starpu_env import SENDS_IN_FLIGHT, STARPU_SENDS_IN_FLIGHT  # noqa: F401

#: report progress every this many simulated tasks
PROGRESS_EVERY = 20000
# SENDS_IN_FLIGHT (imported above): sends a node keeps in flight by default, what
# ``starchol run`` gives StarPU-MPI (``STARPU_MPI_NDETACHED_SEND``); the others wait,
# ordered by the priority of the task they feed


class SimulationError(StarcholError, RuntimeError):
    """The simulator could not run the graph (SimGrid missing or failed)."""


@dataclass
class SimulationResult:
    """The outcome of one simulation (units: s, bytes, GFlop/s).

    ``pair_bytes[a, b]`` is what node a sent to node b; ``busy`` each node's task time
    over W x makespan; per task (submission order): ``start``, ``end`` (s), ``node``,
    ``worker``, ``kernel`` (index in :data:`~starchol.model.counts.KERNELS`).
    ``critical_path_s``: the longest chain of task durations (transfers free);
    ``critical_path_comm_s``: the same with each transfer's time alone on its route.
    """
    makespan_s: float
    gflops: float
    busy: np.ndarray
    pair_bytes: np.ndarray
    critical_path_s: float
    critical_path_comm_s: float
    tasks: int
    transfers: int
    wall_s: float
    start: np.ndarray
    end: np.ndarray
    node: np.ndarray
    worker: np.ndarray
    kernel: np.ndarray

    @property
    def bytes(self):
        return int(self.pair_bytes.sum())

    @property
    def tasks_per_s(self):
        """Simulated tasks per second of wall time (the simulator's rate)."""
        return self.tasks / self.wall_s if self.wall_s > 0 else float("inf")

    def to_dict(self):
        """The JSON document (no per-task arrays)."""
        return {"makespan_s": self.makespan_s, "gflops": self.gflops,
                "busy_fraction": [round(float(b), 6) for b in self.busy],
                "bytes": self.bytes, "pair_bytes": self.pair_bytes.tolist(),
                "critical_path_s": self.critical_path_s,
                "critical_path_comm_s": self.critical_path_comm_s,
                "tasks": self.tasks, "transfers": self.transfers,
                "simulation_wall_s": self.wall_s, "tasks_per_s": self.tasks_per_s}


def task_durations(graph, node, dtype, nb):
    """Seconds of every task of ``graph`` on one worker of ``node`` (a NodeSpec):
    its flops over the worker's GFlop/s for its kernel at tile size ``nb``."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    speeds = node.kernel_gflops(dtype, nb)
    per_kernel = np.array([speeds[k] * 1e9 for k in KERNELS])
    return graph.flops / per_kernel[graph.kernel_of_tasks()]


def _sim_module():
    try:
        from ..runtime import _sim
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SimulationError(
            f"the simulator (starchol.runtime._sim) is not built or cannot load ({exc}); "
            f"install libsimgrid-dev and reinstall starchol (scripts/setup.sh does both)"
        ) from exc
    return _sim


def _child(conn, reader, parent_pid, args, kwargs, progress):
    """The child process: run the simulation, send progress and the result.

    It dies with its parent (:func:`starchol.faults.die_with_parent`: SIGKILL when the
    parent ends, however), and closes its copy of the pipe's read end, so that a write
    to a parent that is gone fails at once instead of blocking forever."""
    from ..faults import die_with_parent

    die_with_parent()
    reader.close()
    if os.getppid() != parent_pid:      # the parent ended before prctl took effect
        os._exit(1)
    try:
        if progress:
            kwargs["progress"] = lambda done, total: conn.send(("progress", done, total))
        out = _sim_module().simulate(*args, **kwargs)
        conn.send(("result", out))
    except BaseException as exc:  # noqa: BLE001  reported to the parent
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except Exception:  # noqa: BLE001
            pass
    finally:
        conn.close()
        os._exit(0)


def _run_in_child(args, kwargs, progress):
    _sim_module()          # fail here, with the clear message, when it is not built
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    from .. import faults

    proc = ctx.Process(target=_child, args=(child, parent, os.getpid(), args, kwargs,
                                            progress is not None), daemon=True)
    with faults.creating():         # a signal either finds the child tracked or stops this
        proc.start()
        faults.track_child(proc.pid)
    child.close()
    result, error = None, None
    try:
        while True:
            try:
                msg = parent.recv()
            except EOFError:
                break
            if msg[0] == "progress":
                if progress is not None:
                    progress(msg[1], msg[2])
            elif msg[0] == "result":
                result = msg[1]
                break
            else:
                error = msg[1]
                break
    finally:
        parent.close()
        proc.join(timeout=30 if result is not None or error is not None else 0.5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        faults.untrack_child(proc.pid)
    if error is not None:
        raise SimulationError(f"the simulation failed: {error}")
    if result is None:
        raise SimulationError(f"the simulator process ended without a result (exit code "
                              f"{proc.exitcode})")
    return result


def simulate_graph(graph, platform, dtype="float64", nb=None, cache=True, progress=None,
                   sends_in_flight=None, pair_serial=False, runtime=None, window=0):
    """Simulate a recorded :class:`~starchol.linalg.task_graph.TaskGraph` on
    ``platform`` (a :class:`~starchol.model.platform.Platform` with as many nodes as
    the graph). ``nb``: the tile size, to pick calibrated kernel speeds. ``progress``:
    callable(done_tasks, total_tasks). ``sends_in_flight``: sends per node at once, the
    others queued by priority (0: no limit; None: the runtime's); ``pair_serial``: one
    send at a time from a node to each other node. ``runtime``: a
    :class:`~starchol.linalg.runtime_costs.RuntimeSpec` (None: free, starchol's one send
    in flight); the node's ``comm_throughput`` applies either way. ``window``: the
    submission window in iterations (each task's in its record's last column, as the
    graph loops record them): a node submits iteration k once its own tasks of iteration
    k - ``window`` are done (0: the whole graph at once). Returns a
    :class:`SimulationResult`."""
    if platform.nodes != graph.nodes:
        raise ValueError(f"the graph has {graph.nodes} nodes, the platform {platform.nodes}")
    p = platform.nodes
    if runtime is None:
        from .runtime_costs import RuntimeSpec
        runtime = RuntimeSpec()
    if sends_in_flight is None:
        sends_in_flight = runtime.sends_in_flight
    ct = platform.node.comm_throughput
    duration = np.ascontiguousarray(task_durations(graph, platform.node, dtype, nb))
    records = graph.chameleon_records() if runtime.priorities == "chameleon" else graph.records
    args = (records, graph.tasks, duration, graph.data_bytes, bool(cache),
            np.full(p, platform.node.workers, dtype=np.intc),
            np.full(p, float(platform.bandwidth)), np.full(p, float(platform.latency)))
    kwargs = {"backbone_bandwidth": float(platform.backbone_bandwidth or 0.0),
              "backbone_latency": float(platform.backbone_latency or 0.0),
              "sends_in_flight": int(sends_in_flight), "pair_serial": bool(pair_serial),
              "every": PROGRESS_EVERY, "window": int(window),
              "comm_throughput": None if not ct else np.full(p, float(ct)),
              **runtime.sim_kwargs()}
    t0 = time.perf_counter()
    out = _run_in_child(args, kwargs, progress)
    wall = time.perf_counter() - t0
    if progress is not None:
        progress(graph.tasks, graph.tasks)
    makespan = float(out["makespan"])
    return SimulationResult(
        makespan_s=makespan,
        gflops=graph.flops_total / makespan / 1e9 if makespan > 0 else float("inf"),
        busy=out["busy"] / (platform.node.workers * makespan) if makespan > 0
        else np.zeros(p),
        pair_bytes=out["pair_bytes"], critical_path_s=float(out["critical_path"]),
        critical_path_comm_s=float(out["critical_path_comm"]), tasks=graph.tasks,
        transfers=int(out["transfers"]), wall_s=wall, start=out["start"], end=out["end"],
        node=out["node"], worker=out["worker"], kernel=graph.kernel_of_tasks())


def simulate_cholesky(tile_map, n, nb, platform, dtype="float64", cache=True, flush=True,
                      progress=None, sends_in_flight=None, pair_serial=False, runtime=None,
                      window=None):
    """Simulate ``cholesky`` of an n x n matrix in nb x nb tiles under ``tile_map`` on
    ``platform``, submitted in a window of ``window`` iterations (None: the runtime
    description's, else the rule of ``starchol run``: :func:`run_window`; 0: the whole
    graph at once). Returns a :class:`SimulationResult` (GFlop/s of N^3/3 flops)."""
    graph = record_cholesky(tile_map, n, nb, itemsize=BYTES_PER_ENTRY[dtype],
                            flush=flush)
    return simulate_graph(graph, platform, dtype, nb, cache, progress, sends_in_flight,
                          pair_serial, runtime, run_window(window, n, nb, platform, runtime))


def simulate_solve(tile_map, n, nb, nrhs, platform, dtype="float64", cache=True,
                   which="both", progress=None, sends_in_flight=None,
                   pair_serial=False, variant="factor", runtime=None, window=None):
    """Simulate the solve L L^T X = B (B n x nrhs) after the factorization (which the
    runtime finishes first: the two times add up), by the graph of ``variant``
    (``"factor"`` or ``"rhs"``, :func:`~starchol.linalg.task_graph.record_solve`), in
    the factorization's window (``window`` as for :func:`simulate_cholesky`; the 2 NT
    steps of the two passes are its iterations). GFlop/s of 2 N^2 nrhs flops."""
    graph = record_solve(tile_map, n, nb, nrhs, itemsize=BYTES_PER_ENTRY[dtype],
                         which=which, variant=variant)
    return simulate_graph(graph, platform, dtype, nb, cache, progress, sends_in_flight,
                          pair_serial, runtime, run_window(window, n, nb, platform, runtime))


def run_window(window, n, nb, platform, runtime=None):
    """The submission window of a simulated run of N = ``n`` in ``nb`` tiles on
    ``platform``'s nodes: ``window``, else the runtime description's (``runtime.window``:
    Chameleon's is 0), else the one that ``starchol run`` would use
    (:func:`~starchol.model.memory.default_window`), by the one rule
    (:func:`~starchol.model.memory.check_window`)."""
    if window is None and runtime is not None:
        window = runtime.window
    nt = -(-int(n) // int(nb))
    return check_window(window, nt, platform.nodes)


#: the map families a node-count sweep simulates (:func:`sweep_maps`), besides the most
#: square 2DBC grid; 2.5D ones with each slice count asked for
SWEEP_2D = ("sbc", "sym", "aplane", "pplane")
SWEEP_25D = ("sbc25d", "sym25d")


def sweep_maps(nodes, nt, slices=(2, 3)):
    """``[(family label, map)]`` of every map a sweep simulates on exactly ``nodes``
    nodes: the most square 2DBC grid, then SBC, sym, aplane, pplane and sbc25d/sym25d with
    each c in ``slices``, where they exist for that node count (``report --simulate``,
    benchmarks/simulate_paper.py)."""
    from ..distributions import get_map
    from ..errors import UsageError

    out = [("2dbc", get_map("2dbc", nodes))]
    tries = [(name, {}) for name in SWEEP_2D] + \
        [(name, {"slices": c}) for name in SWEEP_25D for c in slices]
    for name, kw in tries:
        try:
            m = get_map(name, nodes, nt=nt, **kw)
        except UsageError:
            continue
        out.append((name + (f" c={kw['slices']}" if kw else ""), m))
    return out
