"""``starchol simulate``: the time of a run on a described platform, simulated on SimGrid
(no cluster needed); ``starchol calibrate`` writes the node description of this machine."""
import logging

import numpy as np

from ..errors import UsageError
from ..model.platform import (Platform, load_node, node_from_dict, parse_bandwidth,
                              parse_latency)
from ..model.counts import KERNELS
from ..model.rhs_volume import choose_variant, solve_bytes_by_variant
from ..model.volume import transfer_pairs_bytes
from ..units import format_bytes, format_seconds
from .options import cache_from_args, itemsize_from_args, map_from_args, sizes_from_args
from .output import check_command_outputs, emit, json_file
from .preflight import check_simulation_size
from .progress import Progress
from .simulate_args import DEFAULT_BANDWIDTH, DEFAULT_LATENCY
from .simulate_args import register as register_parser

log = logging.getLogger("starchol.simulate")

#: show a progress line from this many tasks on
PROGRESS_MIN_TASKS = 50000


def runtime_from_args(args):
    """The RuntimeSpec of ``--runtime`` (default: free, starchol's sends in flight),
    with ``--sends-in-flight`` over the file's when given."""
    from ..linalg.runtime_costs import RuntimeSpec, load_runtime

    rt = load_runtime(args.runtime) if getattr(args, "runtime", None) else RuntimeSpec()
    k = getattr(args, "sends_in_flight", None)
    if k is not None:
        if k < 0:
            raise UsageError(f"--sends-in-flight must be >= 0, got {k}")
        rt.sends_in_flight = k
    return rt


def _gflops_arg(text):
    try:
        if "=" not in text:
            value = float(text)
            return {k: value for k in KERNELS}
        out = {}
        for part in text.split(","):
            k, _, v = part.partition("=")
            out[k.strip()] = float(v)
        return out
    except ValueError as exc:
        raise UsageError(f"--node-gflops: cannot read {text!r}; give one number (GFlop/s) "
                         f"or kernel=GFlop/s pairs such as gemm=30,potrf=10") from exc


def node_from_args(args, dtype):
    """The NodeSpec of ``--node`` / ``--cores`` / ``--node-gflops``."""
    if args.node and args.node_gflops:
        raise UsageError("give --node FILE or --node-gflops, not both")
    if args.node:
        node = load_node(args.node, "--node")
        if args.cores is not None:
            node.workers = args.cores
        return node
    if not args.node_gflops or args.cores is None:
        raise UsageError("describe the nodes: --node FILE (`starchol calibrate` writes this "
                         "machine's; examples/nodes/), or --node-gflops G and --cores W")
    return node_from_dict({"name": "command line", "workers": args.cores,
                           "gflops": {dtype: _gflops_arg(args.node_gflops)}},
                          "--node-gflops/--cores")


def platform_from_args(args, nodes, dtype):
    """The Platform of the options for ``nodes`` nodes."""
    node = node_from_args(args, dtype)
    bw = parse_bandwidth(args.bandwidth, "--bandwidth") if args.bandwidth is not None else \
        node.bandwidth or parse_bandwidth(DEFAULT_BANDWIDTH)
    lat = parse_latency(args.latency, "--latency") if args.latency is not None else \
        (node.latency if node.latency is not None else parse_latency(DEFAULT_LATENCY))
    bb_bw, bb_lat = 0.0, 0.0
    if args.backbone is not None:
        words = args.backbone.split(",")
        if len(words) > 2:
            raise UsageError(f"--backbone is BANDWIDTH[,LATENCY], got {args.backbone!r}")
        bb_bw = parse_bandwidth(words[0], "--backbone")
        bb_lat = parse_latency(words[1], "--backbone latency") if len(words) == 2 else 0.0
    return Platform(node=node, nodes=nodes, bandwidth=bw, latency=lat,
                    backbone_bandwidth=bb_bw, backbone_latency=bb_lat)


def sends_from_args(args):
    """The keyword arguments of the send model (``--sends-in-flight`` over the runtime
    description's, ``--pair-serial``)."""
    return {"sends_in_flight": runtime_from_args(args).sends_in_flight,
            "pair_serial": bool(args.pair_serial)}


def register(sub):
    """Add ``starchol simulate``'s parser (:mod:`.simulate_args`) to the subparsers
    ``sub``."""
    return register_parser(sub, run)


def run(args):
    from ..linalg.simulate import run_window, simulate_cholesky

    nt, n, nb = sizes_from_args(args)
    tile_map = map_from_args(args, nt=nt)
    dtype = args.dtype
    plat = platform_from_args(args, tile_map.nodes, dtype)
    plat.node.kernel_gflops(dtype, nb)          # a clear error before the work
    if args.variant is not None and args.nrhs is None:
        raise UsageError("--variant chooses the graph of a solve: give --nrhs K "
                         "(right-hand sides)")
    check_command_outputs(args, [("--gantt", args.gantt)])    # the one output check
    json_file(args, [("--gantt", args.gantt)])
    check_simulation_size(tile_map, nt, plat.node.workers, nrhs=args.nrhs)
    from ..model.counts import task_count

    progress = None
    if not args.quiet and task_count(nt) * max(1, tile_map.slices) >= PROGRESS_MIN_TASKS:
        progress = Progress("simulating", unit="tasks", enabled=True)
    cache = cache_from_args(args)
    runtime = runtime_from_args(args)
    window = run_window(args.window, n, nb, plat, runtime)
    res = simulate_cholesky(tile_map, n, nb, plat, dtype=dtype, cache=cache,
                            progress=progress, runtime=runtime, window=window,
                            **sends_from_args(args))
    model = transfer_pairs_bytes(tile_map, n, nb, cache=cache,
                                 itemsize=itemsize_from_args(args))
    doc = {"map": str(tile_map), "n": n, "nb": nb, "nt": nt, "dtype": dtype,
           "cache": cache, "platform": plat.to_dict(), **sends_from_args(args),
           "runtime": runtime.to_dict(), "window": window,
           **res.to_dict(),
           "model_bytes": int(model.sum()),
           "bytes_equal_model": bool(np.array_equal(model, res.pair_bytes))}
    if args.nrhs is not None:
        from ..linalg.simulate import simulate_solve

        by = solve_bytes_by_variant(tile_map, n, nb, args.nrhs, cache=cache,
                                    itemsize=itemsize_from_args(args))
        variant, reason = choose_variant(by, args.variant or "auto")
        solve = simulate_solve(tile_map, n, nb, args.nrhs, plat, dtype=dtype, cache=cache,
                               variant=variant, runtime=runtime, window=window,
                               **sends_from_args(args))
        smodel = by[variant]
        sdoc = solve.to_dict()
        doc["solve"] = {"nrhs": args.nrhs, "variant": variant, "variant_reason": reason,
                        **{k: sdoc[k] for k in (
                            "makespan_s", "gflops", "bytes", "pair_bytes", "critical_path_s",
                            "tasks", "transfers")},
                        "model_bytes": int(smodel.sum()),
                        "bytes_equal_model": bool(np.array_equal(smodel, solve.pair_bytes))}
        doc["total_makespan_s"] = res.makespan_s + solve.makespan_s
    if args.gantt:
        from .simulate_figures import gantt_png

        gantt_png(res, args.gantt, f"{tile_map}, N = {n}, NB = {nb}")
        doc["gantt"] = args.gantt
    emit(args, doc, text_report(doc))
    return 0


def runtime_text(rt):
    """One line on the runtime's costs of a simulation document (docs/simulation.md)."""
    if not rt:
        return "runtime:    no runtime costs"
    recv = rt.get("receive_overhead_s", 0.0)
    sent = rt.get("sent_overhead_s", 0.0)
    more = f" + {format_seconds(recv)} per message received" if recv else ""
    if sent:
        more += f" + {format_seconds(sent)} per message sent (after its bytes)"
    prio = rt.get("priorities", "starchol")
    return (f"runtime:    {rt['name']}: {rt['sends_in_flight']} send(s) in flight, "
            f"{rt['submission']} submission ({format_seconds(rt['insert_s'])} per task "
            f"inserted, {format_seconds(rt['walk_s'])} walked), "
            f"thread {format_seconds(rt['message_overhead_s'])} per message{more}, "
            f"{rt['task_order']} order"
            + (f", {prio}'s priorities" if prio != "starchol" else ""))


def text_report(doc):
    """The human summary of a simulation document."""
    plat = doc["platform"]
    busy = doc["busy_fraction"]
    lines = [
        f"map:        {doc['map']}",
        f"matrix:     N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']}, {doc['dtype']}, "
        f"cache {'on' if doc['cache'] else 'off'}, "
        + (f"window {doc['window']} iterations" if doc.get("window") else
           "the whole graph submitted at once"),
        f"platform:   {plat['nodes']} x {plat['node']['name']} ({plat['node']['workers']} "
        f"workers), links {plat['bandwidth_bytes_per_s'] * 8 / 1e9:g} Gbit/s, "
        f"{format_seconds(plat['latency_s'])}"
        + (f", backbone {plat['backbone_bandwidth_bytes_per_s'] * 8 / 1e9:g} Gbit/s"
           if plat.get("backbone_bandwidth_bytes_per_s") else "")
        + (f", communication {plat['node']['comm_throughput'] / 1e9:g} GB/s per node"
           if plat["node"].get("comm_throughput") else ""),
        runtime_text(doc.get("runtime")),
        f"makespan:   {format_seconds(doc['makespan_s'])} ({doc['gflops']:.2f} GFlop/s)",
        f"critical:   {format_seconds(doc['critical_path_s'])} (tasks only), "
        f"{format_seconds(doc['critical_path_comm_s'])} (with each transfer alone on its link)",
        f"busy:       per node {min(busy):.3f}..{max(busy):.3f} (mean {np.mean(busy):.3f})",
        f"bytes:      {format_bytes(doc['bytes'])} ({doc['bytes']} B) in {doc['transfers']} "
        f"transfers; model (starchol volume) {doc['model_bytes']} B: "
        f"{'equal per node pair' if doc['bytes_equal_model'] else 'DIFFERENT'}",
        f"simulated:  {doc['tasks']} tasks in {doc['simulation_wall_s']:.2f} s "
        f"({doc['tasks_per_s']:.0f} tasks/s)",
    ]
    solve = doc.get("solve")
    if solve:
        lines += [
            f"solve:      {solve['nrhs']} right-hand side(s), variant "
            f"{solve.get('variant', 'factor')}: "
            f"{format_seconds(solve['makespan_s'])} ({solve['gflops']:.2f} GFlop/s), "
            f"{format_bytes(solve['bytes'])} in {solve['transfers']} transfers, model "
            f"{solve['model_bytes']} B: "
            f"{'equal per node pair' if solve['bytes_equal_model'] else 'DIFFERENT'}",
            f"total:      {format_seconds(doc['total_makespan_s'])} (factorization, then "
            f"solve)"]
    return "\n".join(lines)
