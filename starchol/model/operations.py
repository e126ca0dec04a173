"""Which volume model goes with which operation, and the bytes of one entry per dtype.

A run record names its operation (``RunRecord.operation``): ``cholesky`` (the
factorization), ``solve`` (L L^T X = B after it), ``forward_solve`` (L Y = B) and
``backward_solve`` (L^T X = Y), which :meth:`Factor.solve_triangular` runs alone, and
``solve_mixed`` (float32 factorization with float64 refinement, whose bytes depend on
its iterations: :func:`~starchol.model.mixed_volume.mixed_transfer_pairs_bytes`).
:func:`predicted_pairs_bytes` is the one place that picks the exact model of each;
``cholesky``/``Factor.solve`` record it and ``starchol report`` settles against it.
"""
from .mixed_volume import SINGLE_BYTES
from .rhs_volume import SOLVE_MODELS
from .volume import DOUBLE_BYTES, transfer_pairs_bytes

#: bytes of one matrix entry for each dtype the runtime has kernels for (its keys are
#: those dtypes: ``--dtype``'s choices, node descriptions' speeds, DistributedMatrix's)
BYTES_PER_ENTRY = {"float64": DOUBLE_BYTES, "float32": SINGLE_BYTES}

#: The triangular passes of each solve a run record names (``RunRecord.operation``):
#: ``Factor.solve`` (L L^T X = B) runs both, ``Factor.solve_triangular`` one.
SOLVE_PASSES = {"solve": "both", "forward_solve": "forward", "backward_solve": "backward"}

#: the operations :func:`predicted_pairs_bytes` models from (N, NB, K) alone
PAIR_MODELS = ("cholesky",) + tuple(SOLVE_PASSES)


def bytes_per_entry(dtype):
    """Bytes of one entry of ``dtype`` (a numpy dtype or its name): 8 for float64, 4 for
    float32. ValueError for any other dtype."""
    name = getattr(dtype, "name", None) or str(dtype)
    try:
        return BYTES_PER_ENTRY[name]
    except KeyError:
        raise ValueError(f"dtype {name!r} is neither float64 nor float32") from None


def predicted_pairs_bytes(operation, tile_map, n, nb, nrhs=0, cache=True,
                          itemsize=DOUBLE_BYTES, variant="factor"):
    """Bytes the exact model predicts between every pair of nodes for ``operation`` (one
    of :data:`PAIR_MODELS`) on an N x N matrix in NB x NB tiles, ``nrhs`` right-hand
    sides for a solve, receive cache on or off, ``itemsize`` bytes per entry: an int64
    (P, P) array, sender row, receiver column.

    ``cholesky``: :func:`~starchol.model.volume.transfer_pairs_bytes`; ``solve``,
    ``forward_solve``, ``backward_solve``: the model of the solve's ``variant`` (as the
    run record's ``solve_variant`` names it; :data:`~starchol.model.rhs_volume.SOLVE_MODELS`:
    :func:`~starchol.model.volume.solve_transfer_pairs_bytes` for ``"factor"``,
    :func:`~starchol.model.rhs_volume.rhs_solve_transfer_pairs_bytes` for ``"rhs"``) with
    that pass. ValueError for an operation without such a model (``solve_mixed`` needs
    its iterations).
    """
    if operation == "cholesky":
        return transfer_pairs_bytes(tile_map, n, nb, cache=cache, itemsize=itemsize)
    if operation in SOLVE_PASSES:
        return SOLVE_MODELS[variant](tile_map, n, nb, nrhs, cache=cache, itemsize=itemsize,
                                     which=SOLVE_PASSES[operation])
    raise ValueError(f"operation {operation!r} has no volume model from (N, NB, K) alone; "
                     f"one of {', '.join(PAIR_MODELS)}")


__all__ = ["BYTES_PER_ENTRY", "SOLVE_PASSES", "PAIR_MODELS", "bytes_per_entry",
           "predicted_pairs_bytes"]
