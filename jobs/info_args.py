"""``starchol info``'s parser: its options and their help (the command itself is
:mod:`.info_cmd`)."""
from .output import add_json_arg


def register(sub, run):
    """Add ``info``'s parser to the subparsers ``sub``; ``run`` is the function it calls."""
    p = sub.add_parser(
        "info", help="StarPU, MPI, BLAS and cores this installation runs with",
        description="Print the StarPU build (version, prefix, STARPU_MAXCPUS, FxT, MPI, "
                    "CUDA), the MPI library, the schedulers, the BLAS and its threads, and "
                    "the cores given to each rank (under mpirun: every rank).")
    add_json_arg(p, "the facts as one JSON document (rank 0)")
    p.set_defaults(func=run)
    return p
