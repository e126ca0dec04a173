"""``starchol volume``: predicted inter-node traffic of a map, without running it."""
import logging
import time

from ..errors import UsageError
from ..model.mixed_volume import FALLBACKS
from ..model.rhs_volume import SOLVE_VARIANTS
from ..model.volume_summary import mixed_summary, solve_summary, volume_summary
from ..units import format_bytes
from ..integers import int_type
from .options import (add_cache_arg, add_dtype_arg, add_map_args, add_nrhs_arg, add_size_args,
                      is_mixed, itemsize_from_args, map_from_args, sizes_from_args)
from .output import add_json_arg, emit, json_file
from .preflight import check_model_memory, check_table_memory
from .progress import Progress

log = logging.getLogger("starchol.volume")

#: show progress from this many tile rows on
PROGRESS_MIN_NT = 400
#: --dtype's help in the commands that count bytes without running
BYTES_DTYPE_HELP = ("entries of 8 bytes (float64, default) or 4 (float32) in the byte "
                    "counts; tile counts do not change")
#: volume's --dtype help, with mixed
VOLUME_DTYPE_HELP = BYTES_DTYPE_HELP + (
    "; mixed: a float32 factorization (4-byte entries) and the refinement of a solve to "
    "float64 answers (needs --nrhs; see --iterations, --fallback)")
#: --iterations when not given: refinement iterations of a typical well-conditioned solve
DEFAULT_ITERATIONS = 2


def register(sub):
    p = sub.add_parser(
        "volume", help="exact predicted communication volume of a map (no run)",
        description="Count the tiles the right-looking tiled Cholesky sends between nodes "
                    "under a map (owner-computes, StarPU-MPI receive cache on by default).")
    add_map_args(p)
    add_size_args(p)
    add_cache_arg(p)
    add_dtype_arg(p, VOLUME_DTYPE_HELP, mixed=True)
    add_json_arg(p, "the volume document (keys: docs/volume-model.md, \"starchol volume --json\")")
    add_nrhs_arg(p, "also count the solve A X = B with K right-hand sides after the "
                 "factorization (starchol run --nrhs K): its bytes, forward and "
                 "backward passes, in the variant that runs (rhs: L in place, "
                 "blocks of B move; factor: L's tiles move; the one with fewer "
                 "bytes on the busiest link)")
    p.add_argument("--variant", choices=("auto",) + SOLVE_VARIANTS, default=None,
                   help="with --nrhs: the solve's graph (rhs: L in place, blocks of B and "
                        "partial sums move; factor: L's tiles move to B's blocks; auto, "
                        "the default: fewer bytes on the busiest link, as Factor.solve "
                        "chooses)")
    p.add_argument("--iterations", type=int_type(0), default=None, metavar="I",
                   help=f"--dtype mixed: refinement iterations (float32 solve + float64 "
                        f"residual each; default {DEFAULT_ITERATIONS})")
    p.add_argument("--fallback", choices=FALLBACKS, default=None,
                   help="--dtype mixed: count a fallback to float64 too (range: A beyond "
                        "float32, no float32 factorization; factorization: not positive "
                        "definite in float32; refinement: no convergence after I iterations)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run, one_process=True)


def run(args):
    nt, n, nb = sizes_from_args(args)
    mixed = is_mixed(args)
    if mixed and args.nrhs is None:
        raise UsageError("--dtype mixed counts a solve refined to float64: give --nrhs K "
                         "(right-hand sides)")
    if not mixed and (args.iterations is not None or args.fallback is not None):
        raise UsageError("--iterations and --fallback count a mixed-precision solve: "
                         "give --dtype mixed")
    if args.variant is not None and args.nrhs is None:
        raise UsageError("--variant chooses the graph of a solve: give --nrhs K "
                         "(right-hand sides)")
    if args.nodes is not None and args.nodes > 0:
        check_model_memory(args.nodes)      # arithmetic, before any map is built
    tile_map = map_from_args(args, nt=nt)
    check_table_memory(nt, tile_map.slices)
    json_file(args)
    log.info("counting the transfers of %s, N = %d, NB = %d, NT = %d, cache %s",
             tile_map, n, nb, nt, args.cache)
    progress = None
    if nt >= PROGRESS_MIN_NT and not args.quiet:
        progress = Progress("counting transfers", unit="tile rows")
    t0 = time.perf_counter()
    doc = volume_summary(tile_map, nt, nb, n=n, cache=args.cache == "on", progress=progress,
                         itemsize=itemsize_from_args(args))
    doc["dtype"] = args.dtype
    if args.nrhs and mixed:
        it = DEFAULT_ITERATIONS if args.iterations is None else args.iterations
        doc["mixed"] = mixed_summary(tile_map, n, nb, args.nrhs, it, args.fallback,
                                     cache=args.cache == "on",
                                     variant=args.variant or "auto")
    elif args.nrhs:
        doc["solve"] = solve_summary(tile_map, n, nb, args.nrhs, cache=args.cache == "on",
                                     itemsize=itemsize_from_args(args),
                                     variant=args.variant or "auto")
    log.info("counted %d transfers in %.2f s", doc["transfers_tiles"],
             time.perf_counter() - t0)
    emit(args, doc, text_report(doc))
    return 0


def text_report(doc):
    """The human summary of :func:`volume_summary`'s document."""
    lead = doc["leading_term_tiles"]
    lines = [
        f"map:        {doc['map']}",
        f"matrix:     N = {doc['n']}, NB = {doc['nb']}, NT = {doc['nt']}, "
        f"{doc.get('dtype', 'float64')} ({doc['stored_tiles']} stored tiles S)",
        f"cache:      {'on' if doc['cache'] else 'off'}",
        f"transfers:  {doc['transfers_tiles']} tiles = {format_bytes(doc['bytes'])} "
        f"({doc['transfers_tiles'] / doc['stored_tiles']:.4f} x S)",
    ]
    if lead is not None:
        lines.append(f"leading:    {lead:.0f} tiles ({lead / doc['stored_tiles']:.4f} x S)")
    elif not doc["cache"]:
        lines.append("leading:    - (the leading terms hold with the cache on)")
    sent = doc["per_node"]["sent_tiles"]
    recv = doc["per_node"]["received_tiles"]
    lines += [
        f"per node:   sent {min(sent)}..{max(sent)} tiles, received {min(recv)}..{max(recv)} tiles",
        f"load:       tiles {min(doc['load']['tiles'])}..{max(doc['load']['tiles'])}, "
        f"flops max/avg {doc['load']['flops_max_over_avg']:.3f}",
    ]
    solve = doc.get("solve")
    if solve:
        lines.append(f"solve:      K = {solve['nrhs']}, variant {solve['variant']}: "
                     f"{format_bytes(solve['bytes'])} "
                     f"(forward pass alone {format_bytes(solve['bytes_forward'])}, backward "
                     f"alone {format_bytes(solve['bytes_backward'])})")
        v = solve["variants"]
        lines.append(f"            (rhs: L in place, {format_bytes(v['rhs']['bytes'])}, "
                     f"busiest link {format_bytes(v['rhs']['busiest_link_bytes'])}; "
                     f"factor: L's tiles move, {format_bytes(v['factor']['bytes'])}, "
                     f"busiest link {format_bytes(v['factor']['busiest_link_bytes'])})")
    mixed = doc.get("mixed")
    if mixed:
        ph, k = mixed["phases"], mixed["iterations"] + 1
        lines.append(f"mixed:      K = {mixed['nrhs']}, I = {mixed['iterations']} "
                     f"refinement iteration(s): {format_bytes(mixed['bytes'])} in all, "
                     f"{mixed['ratio_to_float64']:.3f} x float64's factorization + solve "
                     f"({format_bytes(mixed['bytes_float64'])})")
        var = mixed["variants"]
        lines.append(f"            float32 factorization {format_bytes(ph['factor32'])} "
                     f"(float64's halved); float32 solves {format_bytes(ph['solve32'])} "
                     f"(variant {var['solve32']}); float64 residuals B - A X "
                     f"{format_bytes(ph['residual64'])} (variant {var['residual64']})")
        if mixed["fallback"] is not None:
            lines.append(f"            fallback ({mixed['fallback']}): float64 "
                         f"factorization {format_bytes(ph['factor64'])}, solve "
                         f"{format_bytes(ph['solve64'])}, one more residual")
        elif k:
            lines.append(f"            ({k} float32 solve(s) and {k} residual(s): the first "
                         f"solve and each iteration's, each checked)")
    return "\n".join(lines)
