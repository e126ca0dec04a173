"""``starchol plan``: choose a map (2D or 2.5D, and c) for P nodes and a memory budget.

Every map that fits P nodes or fewer (the candidates of ``starchol compare``) is scored
and ranked by :mod:`starchol.model.plan` (the one home of the rule): the exact volume
model and the exact per-node load at the run's NT give a time estimate,

    estimate = (flops of the busiest node) / node_gflops
             + (bytes sent + received by the busiest node) / node_bandwidth
             + (2.5D maps) the reduction steps on the critical path (--step-latency),

and with ``--runtime FILE`` the runtime's costs that ``simulate`` charges
(:mod:`starchol.model.runtime_time`: the busiest communication thread's time per message,
the bytes at min(bandwidth, the --node's comm_throughput), and the estimate at least the
slowest rank's submission clock), so a map's imbalance at this NT is in its estimate, and a 2.5D map ranks above its 2D
slice map only when it gains more time than its reduction steps cost (the explanation
says which way it went). Maps whose peak memory on some node
(:func:`starchol.model.memory.node_memory`: its tiles, every tile copy it receives, the
runtime's handles and tasks, the process) exceeds ``--memory-per-node`` are listed as
not fitting. The pick is the fitting map
with the smallest estimate (then the fewest bytes, then the least storage per node). With
ample memory, the SC22 paper's rule of thumb for 2.5D SBC is r = 2c.
"""
import logging
import shlex
import time

from ..errors import UsageError
from ..distributions.base import MAP_PARAMS, nodes_text
from ..model.platform import load_node
from ..model.plan import rank_maps, score_map, versus_2d
from ..units import format_bytes, format_seconds
from .options import (candidates_for, check_positive_finite, is_mixed, itemsize_from_args,
                      map_argv)
from .output import emit, json_file
from .progress import Progress
from .plan_args import register as register_parser

log = logging.getLogger("starchol.plan")

#: the explanation mentions the pick's flop imbalance (busiest node / mean) above this
IMBALANCE_NOTE = 1.10


def register(sub):
    """Add ``starchol plan``'s parser (:mod:`.plan_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


def run(args):
    if args.nb > args.n:
        raise UsageError(f"--nb {args.nb} is larger than --n {args.n}")
    check_positive_finite(args.memory_per_node, "--memory-per-node (bytes, e.g. 64e9)")
    check_positive_finite(args.node_gflops, "--node-gflops")
    check_positive_finite(args.node_bandwidth, "--node-bandwidth")
    if not 0 <= args.step_latency < float("inf"):
        raise UsageError(f"--step-latency must be a finite number of seconds >= 0, got "
                         f"{args.step_latency}")
    maps = candidates_for(args.nodes, nt=-(-args.n // args.nb))
    itemsize = itemsize_from_args(args)
    mixed = is_mixed(args)
    if args.nrhs is not None and not mixed:
        raise UsageError("--nrhs applies to --dtype mixed")
    nrhs = (args.nrhs or 1) if mixed else 0
    node = None
    if args.simulate or args.node:
        if not (args.simulate and args.node):
            raise UsageError("--simulate needs --node FILE (a node description), and "
                             "--node applies to --simulate")
        if mixed:
            raise UsageError("--simulate simulates float64 or float32 factorizations, "
                             "not --dtype mixed")
        node = load_node(args.node, "--node")
        node.kernel_gflops(args.dtype, args.nb)      # a clear error before the work
        from .preflight import check_simulation_size

        for m in maps:                               # refused before any work
            check_simulation_size(m, -(-args.n // args.nb), node.workers,
                                  f"plan --simulate ({m})")
    runtime = None
    if args.runtime:
        from .simulate_cmd import runtime_from_args

        runtime = runtime_from_args(args)
    comm_throughput = node.comm_throughput if node is not None else None
    json_file(args)
    log.info("scoring %d maps for up to %s, N = %d, NB = %d", len(maps),
             nodes_text(args.nodes), args.n, args.nb)
    t0 = time.perf_counter()
    progress = Progress("scoring maps", unit="maps", enabled=False if args.quiet else None)
    rows = []
    for k, tile_map in enumerate(maps):
        row = score_map(tile_map, args.n, args.nb, args.node_gflops, args.node_bandwidth,
                        memory_per_node=args.memory_per_node, itemsize=itemsize,
                        step_latency_s=args.step_latency, mixed=mixed, nrhs=nrhs,
                        runtime=runtime, comm_throughput=comm_throughput)
        rows.append(row)
        log.debug("%s: estimate %s, %s per node, fits %s", tile_map,
                  format_seconds(row["estimate_s"]), format_bytes(row["memory_per_node_bytes"]),
                  row["fits"])
        progress(k + 1, len(maps))
    log.info("scored in %.2f s; %d of %d fit the memory", time.perf_counter() - t0,
             sum(r["fits"] for r in rows), len(rows))
    if node is not None:
        simulate_rows(rows, maps, node, args)
    rows, pick = rank_maps(rows, simulated=node is not None)
    why = explain(pick, rows, args)
    if node is not None and pick is not None and pick.get("simulated_s") is not None:
        why = (f"Picked by simulated makespan (SimGrid, {node.name}, {node.workers} "
               f"workers per node): {pick['map']} in {format_seconds(pick['simulated_s'])}."
               f" The estimate's reasoning: " + why)
    doc = {"nodes": args.nodes, "n": args.n, "nb": args.nb, "dtype": args.dtype,
           **({"nrhs": nrhs} if mixed else {}),
           "memory_per_node": args.memory_per_node, "node_gflops": args.node_gflops,
           "node_bandwidth": args.node_bandwidth, "step_latency_s": args.step_latency,
           **({"runtime": runtime.to_dict()} if runtime is not None else {}),
           "rows": rows,
           "pick": pick, "explanation": why, "commands": commands(pick, args)}
    emit(args, doc, text_table(doc))
    return 0 if pick else 1


def simulate_rows(rows, maps, node, args):
    """Simulate the ``--simulate-top`` fitting rows with the least estimates (in place:
    ``simulated_s``, ``simulated_gflops``, ``simulated_busy_max``)."""
    from ..model.platform import Platform
    from ..linalg.simulate import simulate_cholesky
    from .simulate_cmd import runtime_from_args

    by_map = {str(m): m for m in maps}
    best = sorted((r for r in rows if r["fits"]), key=lambda r: r["estimate_s"])
    best = best[:args.simulate_top]
    progress = Progress("simulating maps", unit="maps", enabled=False if args.quiet else None)
    for k, row in enumerate(best):
        m = by_map[row["map"]]
        plat = Platform(node=node, nodes=m.nodes, bandwidth=args.node_bandwidth,
                        latency=node.latency or 0.0)
        res = simulate_cholesky(m, args.n, args.nb, plat, dtype=args.dtype,
                                runtime=runtime_from_args(args))
        row.update(simulated_s=res.makespan_s, simulated_gflops=res.gflops,
                   simulated_busy_max=float(res.busy.max()))
        progress(k + 1, len(best))


def text_table(doc):
    """The human table of the ``plan`` document, and the explanation under it."""
    lines = [f"maps for up to {nodes_text(doc['nodes'])}, N = {doc['n']}, NB = {doc['nb']}, "
             f"{doc.get('dtype', 'float64')}, "
             f"memory {format_bytes(doc['memory_per_node'])} per node; estimate = compute + "
             f"comm with {doc['node_gflops']:g} GFlop/s and "
             f"{format_bytes(doc['node_bandwidth'])}/s per node (busiest node); mem/node: "
             f"the peak of the node that needs the most (tiles, received tile copies, "
             f"runtime, process)"]
    head = (f"{'map':<56} {'nodes':>5} {'bytes':>11} {'mem/node':>10} {'fits':>4} "
            f"{'flops max/avg':>13} {'compute':>10} {'comm':>10} {'estimate':>10}")
    lines += [head, "-" * len(head)]
    for r in doc["rows"]:
        lines.append(f"{r['map']:<56} {r['nodes']:>5} {format_bytes(r['bytes']):>11} "
                     f"{format_bytes(r['memory_per_node_bytes']):>10} "
                     f"{'yes' if r['fits'] else 'no':>4} {r['flops_max_over_avg']:>13.3f} "
                     f"{format_seconds(r['compute_s']):>10} {format_seconds(r['comm_s']):>10} "
                     f"{format_seconds(r['estimate_s']):>10}")
    sims = [r for r in doc["rows"] if r.get("simulated_s") is not None]
    if sims:
        lines += ["", "simulated (SimGrid, best first):"]
        lines += [f"  {r['map']:<56} {format_seconds(r['simulated_s']):>10} "
                  f"{r['simulated_gflops']:>10.0f} GFlop/s" for r in sims]
    lines += ["", doc["explanation"]]
    if doc["commands"]:
        lines += ["", "run it with:", f"  {doc['commands']['run']}",
                  "or write a Slurm job (memory per node from the same model):",
                  f"  {doc['commands']['slurm']}"]
    return "\n".join(lines)


def commands(pick, args):
    """The exact commands that run the pick (None when nothing fits): ``run`` under
    mpirun with one rank per map node, and ``slurm`` with ``--mem auto``."""
    if pick is None:
        return None
    size = ["--n", str(args.n), "--nb", str(args.nb)]
    if args.dtype != "float64":
        size += ["--dtype", args.dtype]
    if is_mixed(args):
        size += ["--nrhs", str(args.nrhs or 1)]
    params = {k: pick[k] for k in MAP_PARAMS if k in pick}     # the row's map fields
    run = ["mpirun", "-np", str(pick["nodes"]), "starchol", "run",
           *map_argv(params, nodes=False), *size]
    slurm_size = [w if w != "--nrhs" else "--run-arg=--nrhs" for w in size]
    if is_mixed(args):     # starchol slurm passes the run's --nrhs as --run-arg
        slurm_size = slurm_size[:-2] + [f"--run-arg=--nrhs={args.nrhs or 1}"]
    slurm = ["starchol", "slurm", *map_argv(params), *slurm_size, "--mem", "auto"]
    return {"run": shlex.join(run), "slurm": shlex.join(slurm)}


def memory_text(row):
    """The parts of a scored map's peak memory per node, as text."""
    return ", ".join(f"{k} {format_bytes(v)}" for k, v in row["memory_parts"].items() if v)


def _percent_more(a, b):
    """How much larger a is than b, as text: ``'12% more'``."""
    return f"{100 * (a / b - 1):.0f}% more"


def why_25d(pick, fitting, nt):
    """Why a 2.5D map was or was not picked: the gain of the pick (or of the best fitting
    2.5D map) over its 2D slice map against its reduction steps' overhead."""
    best = pick if pick["slices"] > 1 else next((r for r in fitting if r["slices"] > 1),
                                                None)
    if best is None:
        return "no 2.5D map fits"
    v = versus_2d(best, fitting)
    steps = (f"{format_seconds(best['overhead_s'])} for its {best['reduction_steps']} "
             f"reduction steps on the critical path (the panel steps where the slice "
             f"changes wait for the other slices' partial sums and their ADD)")
    if v is None:
        return (f"{'2.5D pick' if best is pick else 'best 2.5D map'} {best['map']}: "
                f"its estimate includes {steps}")
    gain = format_seconds(abs(v["gain_s"]))
    versus = f"its 2D slice map on the same nodes, {v['flat']['map']}"
    if best is pick:
        return (f"2.5D picked: over {versus} it saves {gain} of compute and transfers, "
                f"more than the {steps}")
    if v["ahead"]:
        return (f"no 2.5D map picked: the best, {best['map']}, saves {gain} over {versus}, "
                f"more than the {steps}, but its estimate "
                f"{format_seconds(best['estimate_s'])} is still above the pick's")
    if v["gain_s"] > 0:
        return (f"no 2.5D map picked: the best, {best['map']}, saves {gain} of compute and "
                f"transfers over {versus}, less than the {steps}, so it ranks below it")
    return (f"no 2.5D map picked: the best, {best['map']}, takes {gain} more compute and "
            f"transfer time than {versus}, and adds {steps}")


def explain(pick, rows, args):
    """One paragraph on why the pick was made (or why nothing fits)."""
    if pick is None:
        least = min(rows, key=lambda r: r["memory_per_node_bytes"])
        return (f"no map fits {format_bytes(args.memory_per_node)} per node: the smallest "
                f"need is {least['map']} with {format_bytes(least['memory_per_node_bytes'])} "
                f"per node ({memory_text(least)}); use more nodes or a larger "
                f"--memory-per-node")
    nt = -(-args.n // args.nb)
    fitting = [r for r in rows if r["fits"]]
    best2d = min((r for r in rows if r["slices"] == 1 and r["dist"] == "2dbc"),
                 key=lambda r: r["bytes"], default=None)
    parts = [f"pick: {pick['map']}: fits memory ({format_bytes(pick['memory_per_node_bytes'])} "
             f"of {format_bytes(args.memory_per_node)} per node: {memory_text(pick)}) and "
             f"has the smallest "
             f"estimate ({format_seconds(pick['estimate_s'])}: "
             f"{format_seconds(pick['compute_s'])} compute on the busiest node + "
             f"{format_seconds(pick['comm_s'])} of its transfers)"]
    if best2d is not None and best2d is not pick and best2d["bytes"] > pick["bytes"]:
        parts.append(f"it moves {format_bytes(pick['bytes'])}, "
                     f"{best2d['bytes'] / pick['bytes']:.2f}x less than the best 2dbc "
                     f"({best2d['map']}, {format_bytes(best2d['bytes'])})")
    if pick["slices"] > 1:
        flat = [r for r in fitting if r["slices"] == 1]
        text = (f"2.5D keeps {pick['slices']} copies of the matrix, so it stores about "
                f"{pick['slices']}x the tiles per node of a 2D map on the same nodes")
        if flat:
            f = flat[0]
            text += (f" (peak {format_bytes(pick['memory_per_node_bytes'])} per node against "
                     f"{format_bytes(f['memory_per_node_bytes'])} for the best 2D map, "
                     f"{f['map']}, whose estimate {format_seconds(f['estimate_s'])} is "
                     f"{_percent_more(f['estimate_s'], pick['estimate_s'])})")
        parts.append(text + "; with ample memory the SC22 rule of thumb is r = 2c")
    fewer = [r for r in fitting if r["bytes"] < pick["bytes"]]
    if fewer:
        r = min(fewer, key=lambda r: (r["bytes"], r["estimate_s"]))
        parts.append(f"{len(fewer)} fitting map(s) move fewer bytes in all but take longer "
                     f"on their busiest node (best: {r['map']}, {format_bytes(r['bytes'])} "
                     f"against {format_bytes(pick['bytes'])}; its busiest node: "
                     f"{format_seconds(r['compute_s'])} compute, flops max/avg "
                     f"{r['flops_max_over_avg']:.3f} over its {nodes_text(r['nodes'])}, + "
                     f"{format_seconds(r['comm_s'])} for "
                     f"{format_bytes(r['busiest_node_traffic_bytes'])} of transfers = "
                     f"{format_seconds(r['estimate_s'])})")
    if pick["flops_max_over_avg"] > IMBALANCE_NOTE:
        periods = ("" if pick["periods"] is None else
                   f", {pick['periods']:.1f} periods of its {pick['pattern_size']}-row pattern")
        parts.append(f"at NT = {nt} the pick's busiest node runs "
                     f"{pick['flops_max_over_avg']:.2f}x the mean flops{periods}; the "
                     f"estimate includes it, and it shrinks as NT grows")
    parts.append(why_25d(pick, fitting, nt))
    unfit = [r for r in rows if not r["fits"] and r["estimate_s"] < pick["estimate_s"]]
    if unfit:
        parts.append(f"{len(unfit)} map(s) with a smaller estimate do not fit in memory "
                     f"(best: {unfit[0]['map']}, needs "
                     f"{format_bytes(unfit[0]['memory_per_node_bytes'])} per node)")
    return "; ".join(parts) + "."
