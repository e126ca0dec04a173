"""``starchol run``'s parser: its options and their help (the command itself is
:mod:`.run_cmd`)."""
from ..distributions import MAP_NAMES as MAPS
from ..distributions import MAPS_25D
from ..integers import int_type
from ..model.memory import WINDOW
from ..runtime.workers import DEFAULT_CUDA_WORKERS_PER_GPU
from .options import (SLICE_BLOCK_HELP, add_cache_arg, add_dtype_arg, add_nrhs_arg,
                      add_seed_arg, add_window_arg)
from .output import add_json_arg


def register(sub, run):
    """Add ``run``'s parser to the subparsers ``sub``; ``run`` is the function it calls."""
    p = sub.add_parser(
        "run", help="factor a test matrix with StarPU-MPI (launch with mpirun -np P)",
        description="Distributed tiled Cholesky on StarPU-MPI: one MPI rank per node of the "
                    "map. Reports time, GFlop/s (N^3/3 flops), the residual with --check, and "
                    "the bytes sent between ranks, measured vs the exact model. Every path, "
                    "size and setting is checked on every rank before the work starts. "
                    "The computation is float64 unless --dtype float32 says otherwise; "
                    "--input is converted to it and --output / --gather are written in "
                    "it.",
        hints={"--nodes": "run has no --nodes: the node count is mpirun -np P, one rank "
                          "per map node"})
    p.add_argument("--dist", required=True, choices=MAPS, metavar="D",
                   help=f"tile map: {', '.join(MAPS)}")
    p.add_argument("--grid", metavar="PxQ",
                   help="2dbc grid, or one slice's grid for 2dbc25d (default: most square)")
    p.add_argument("--slices", type=int_type(1), default=None, metavar="C",
                   help=f"2.5D maps ({', '.join(MAPS_25D)}): number of slices c (default "
                        "1); c copies of the matrix, P/c ranks per slice")
    p.add_argument("--slice-block", type=int_type(1), default=None, metavar="B",
                   help=SLICE_BLOCK_HELP)
    p.add_argument("--map-file", metavar="FILE", help="custom map file (Chameleon text or .npy)")
    p.add_argument("--n", type=int, metavar="N",
                   help="matrix order (required unless --input gives the matrix)")
    p.add_argument("--nb", type=int, required=True, metavar="NB", help="tile size")
    add_seed_arg(p)
    p.add_argument("--matrix", default="spd", metavar="KIND",
                   help="spd (default) or indefinite:J (must fail at global column J)")
    add_dtype_arg(p, "precision of the factorization: float64 (default) or float32 "
                     "(single-precision kernels, half the memory and half the bytes "
                     "sent; --check's residual is then about 1e-7, not 1e-16); mixed "
                     "(needs --rhs or --nrhs): a float32 factorization of a float32 copy "
                     "of A, iterative refinement of the solve to float64 accuracy, float64 "
                     "if that fails (solve_mixed; A, B and X in float64)", mixed=True)
    p.add_argument("--check", action="store_true",
                   help="compute ||A - L L^T||_F / ||A||_F (distributed) and, with "
                        "--rhs/--nrhs, the solve's ||B - A X||_F / (||A||_F ||X||_F + "
                        "||B||_F)")
    p.add_argument("--sched", default=None, metavar="NAME",
                   help="StarPU scheduler (default prio); with GPUs: dmdas or heteroprio "
                        "(docs/gpu.md)")
    p.add_argument("--workers", type=int, default=None, metavar="K",
                   help="CPU workers per rank (default: the node's cores / ranks on it)")
    p.add_argument("--gpus", type=int, default=None, metavar="K",
                   help=f"GPUs per rank, {DEFAULT_CUDA_WORKERS_PER_GPU} CUDA workers (streams) "
                        "each unless "
                        "STARPU_NWORKER_PER_CUDA says otherwise (default: every GPU the "
                        "rank sees; 0 for none)")
    add_cache_arg(p, old_spelling=True)
    add_window_arg(p, "submission window in iterations: a rank submits iteration k once "
                      "its tasks of iteration k - W are done, which bounds the tile "
                      f"copies it receives and holds (default {WINDOW}, docs/runtime.md; 0: "
                      "the whole task graph at once)")
    p.add_argument("--gather", metavar="FILE",
                   help="gather the factor L on rank 0 and save it (.npy; the suffix is "
                        "added when missing; an existing file is replaced only with "
                        "--overwrite)")
    add_json_arg(p, "the result document (rank 0)", overwrite=False)
    p.add_argument("--trace", metavar="DIR",
                   help="record FxT execution traces of every rank in DIR and convert them "
                        "(DIR/tasks.rec, paje.trace, trace.json; starchol report draws "
                        "them). Needs the StarPU scripts/setup.sh builds")
    io = p.add_argument_group("HDF5 files")
    io.add_argument("--input", metavar="FILE.h5:/DATASET",
                    help="factor this symmetric matrix (float64/float32, either byte order, "
                         "converted to --dtype; lower triangle used; each rank reads its "
                         "own tiles) instead of a generated one")
    io.add_argument("--output", metavar="FILE.h5:/DATASET",
                    help="write the factor L (in --dtype, lower triangle; the chunks above "
                         "the diagonal are not stored and read as zeros) with attributes (content, "
                         "map, n, nb, residual, ...; a factor file is refused as --input); "
                         "written "
                         "under a temporary name and published when complete (never over a "
                         "file that appeared meanwhile, unless --overwrite)")
    io.add_argument("--rhs", metavar="FILE.h5:/DATASET",
                    help="right-hand sides B (N x K, float64/float32, converted to "
                         "--dtype): after the factorization, solve A X = B with the tiled "
                         "triangular solves (their bytes measured against the model)")
    io.add_argument("--solution", metavar="FILE.h5:/DATASET",
                    help="write X of A X = B (N x K, in --dtype), atomically; needs --rhs "
                         "or --nrhs")
    io.add_argument("--overwrite", action="store_true",
                    help="replace the --output and --solution datasets and the --gather "
                         "and --json files if they exist")
    io.add_argument("--symmetry-tol", type=float, default=None, metavar="TOL",
                    help="refuse an --input with max|A-A^T| > TOL max|A| (default 1e-10)")
    add_nrhs_arg(p, "solve for K generated right-hand sides (reproducible from --seed) "
                 "instead of --rhs")
    p.add_argument("--quiet", action="store_true", help="no progress line on rank 0")
    p.set_defaults(func=run)
    return p
