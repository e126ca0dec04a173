"""``starchol volume``'s parser: its options and their help (the command itself is
:mod:`.volume_cmd`)."""
from ..integers import int_type
from ..model.mixed_volume import FALLBACKS
from ..model.rhs_volume import SOLVE_VARIANTS
from .options import add_cache_arg, add_dtype_arg, add_map_args, add_nrhs_arg, add_size_args
from .output import add_json_arg

#: --dtype's help in the commands that count bytes without running
BYTES_DTYPE_HELP = ("entries of 8 bytes (float64, default) or 4 (float32) in the byte "
                    "counts; tile counts do not change")
#: volume's --dtype help, with mixed
VOLUME_DTYPE_HELP = BYTES_DTYPE_HELP + (
    "; mixed: a float32 factorization (4-byte entries) and the refinement of a solve to "
    "float64 answers (needs --nrhs; see --iterations, --fallback)")
#: --iterations when not given: refinement iterations of a typical well-conditioned solve
DEFAULT_ITERATIONS = 2


def register(sub, run):
    """Add ``volume``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
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
    return p
