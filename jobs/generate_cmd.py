"""``starchol generate``: write a reproducible test matrix to an HDF5 file."""
import logging

import numpy as np

from ..version import VERSION
from ..linalg import matrices
from ..linalg.hdf5_io import parse_target, write_matrix
from ..units import now_utc
from .generate_args import register as register_parser

log = logging.getLogger("starchol.generate")


def register(sub):
    """Add ``starchol generate``'s parser (:mod:`.generate_args`) to the subparsers
    ``sub``."""
    return register_parser(sub, run)


def run(args):
    spec = matrices.parse_matrix_spec(args.kind, args.n, param="kind")
    path, dataset = parse_target(args.output, "--output")
    log.info("writing the %d x %d %s matrix (seed %d) to %s:%s", args.n, args.n, spec,
             args.seed, path, dataset)
    attrs = {"kind": str(spec), "seed": np.uint64(args.seed), "n": args.n,
             "generator": f"starchol {VERSION}", "date": now_utc()}
    write_matrix(path, dataset, args.n,
                 lambda r0, r1: matrices.block(spec, args.n, args.seed, r0, r1, 0, args.n),
                 attrs=attrs, overwrite=args.overwrite, dtype=args.dtype)
    print(f"wrote {args.n} x {args.n} {spec} matrix (seed {args.seed}, {args.dtype}) to "
          f"{path}:{dataset}")
    return 0
