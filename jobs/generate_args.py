"""``starchol generate``'s parser: its options and their help (the command itself is
:mod:`.generate_cmd`)."""
from ..integers import int_type
from .options import add_dtype_arg, add_seed_arg


def register(sub, run):
    """Add ``generate``'s parser to the subparsers ``sub``; ``run`` is the function
    it calls."""
    p = sub.add_parser(
        "generate", help="write a test matrix (SPD or indefinite) to FILE.h5:/DATASET",
        description="Write the same symmetric test matrix that `starchol run --seed S "
                    "--matrix KIND` generates in memory, as an HDF5 dataset (float64, or "
                    "float32 with --dtype float32: the float64 values rounded), both "
                    "triangles, with attributes: content ('symmetric matrix (both "
                    "triangles)'), kind, seed, n, generator, date. The file is written "
                    "under a temporary name and renamed when complete.")
    p.add_argument("--n", type=int_type(1), required=True, metavar="N", help="matrix order")
    p.add_argument("--output", required=True, metavar="FILE.h5:/DATASET",
                   help="HDF5 file and dataset to write (other datasets of the file kept)")
    add_seed_arg(p, "seed (default 0; an integer in 0..2^64-1, as for run)")
    p.add_argument("--kind", default="spd", metavar="KIND",
                   help="spd (default) or indefinite:J (Cholesky fails at global column J)")
    add_dtype_arg(p, "entries of the dataset: float64 (default) or float32 (half the "
                     "file; starchol run --dtype float32 reads it without conversion)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the dataset if it already exists")
    p.set_defaults(func=run, one_process=True)
    return p
