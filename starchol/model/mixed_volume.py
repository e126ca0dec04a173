"""Exact inter-node bytes of a mixed-precision solve (``starchol.linalg.mixed.solve_mixed``).

The solve is a sequence of graphs whose bytes the model of each already counts
(:mod:`~starchol.model.volume`), so its count is their sum, per node pair:

- the float32 factorization: :func:`~starchol.model.volume.transfer_pairs_bytes` with
  4-byte entries, half of float64's (the same transfers);
- the first solve and each refinement iteration's correction: the float32 solve
  (:func:`~starchol.model.volume.solve_transfer_pairs_bytes`, 4-byte entries);
- each check of the backward error: the float64 residual R = B - A X
  (:func:`~starchol.model.volume.residual_transfer_pairs_bytes`, 8-byte entries);
- a fallback: the float64 factorization, its solve and one residual.

Each solve and each residual runs the variant with fewer bytes on the busiest link
(:func:`~starchol.model.rhs_volume.choose_variant`, as ``Factor.solve`` and
``rhs_residual`` choose it at run time): for few right-hand sides the right-hand-side
variant, whose bytes are NB x K blocks, so that the float32 factorization's bytes
(half of float64's) are nearly all the mixed solve sends.

With I refinement iterations (corrections X += D), the float32 part runs I + 1 solves
and I + 1 residuals (LAPACK's ``dsposv`` order: solve, check, then correct and check
again). Bytes only (the unit of every figure); tiles do not change with the precision.
"""
from ..integers import check_int
from .rhs_volume import choose_variant, residual_bytes_by_variant, solve_bytes_by_variant
from .volume import DOUBLE_BYTES, transfer_pairs_bytes

SINGLE_BYTES = 4

#: why a mixed-precision solve fell back to float64 (``MixedSolution.fallback``):
#: ``"range"`` (A has entries beyond float32's range: no float32 factorization),
#: ``"factorization"`` (A is not positive definite in float32: the float32
#: factorization ran and failed), ``"refinement"`` (the refinement did not converge)
FALLBACKS = ("range", "factorization", "refinement")


def chosen_solve_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES,
                       variant="auto"):
    """The bytes (int64 (P, P)) of the solve in the variant ``Factor.solve`` runs."""
    by = solve_bytes_by_variant(tile_map, n, nb, nrhs, cache=cache, itemsize=itemsize)
    return by[choose_variant(by, variant)[0]]


def chosen_residual_bytes(tile_map, n, nb, nrhs, cache=True, itemsize=DOUBLE_BYTES,
                          variant="auto"):
    """The bytes (int64 (P, P)) of the residual B - A X in the variant it runs."""
    by = residual_bytes_by_variant(tile_map, n, nb, nrhs, cache=cache, itemsize=itemsize)
    return by[choose_variant(by, variant)[0]]


def mixed_phase_bytes(tile_map, n, nb, nrhs, iterations=0, fallback=None, cache=True,
                      variant="auto"):
    """The bytes of each graph of a mixed-precision solve, as a dict of int64 (P, P)
    arrays (sender row, receiver column): ``factor32``, ``solve32`` (all of them),
    ``residual64`` (all of them), ``factor64``, ``solve64`` (the fallback's; zero
    without one).

    Parameters
    ----------
    tile_map : TileMap
    n, nb, nrhs : int
        Matrix order, tile size, right-hand sides K (entries).
    iterations : int
        Refinement iterations I (corrections applied), >= 0; ignored when the float32
        factorization did not give a factor (``fallback`` ``"range"`` or
        ``"factorization"``).
    fallback : None or str
        One of :data:`FALLBACKS`, or None (converged in float32).
    cache : bool
        StarPU-MPI's receive cache.
    variant : {"auto", "rhs", "factor"}
        The solves' and residuals' graphs (``"auto"``: each the one with fewer bytes
        on the busiest link, as the runtime picks it).
    """
    if fallback is not None and fallback not in FALLBACKS:
        raise ValueError(f"fallback must be None or one of {', '.join(FALLBACKS)}, got "
                         f"{fallback!r}")
    check_int(iterations, "iterations", 0, error=ValueError)
    f32 = transfer_pairs_bytes(tile_map, n, nb, cache=cache, itemsize=SINGLE_BYTES)
    zero = f32 * 0
    refined = fallback not in ("range", "factorization")
    steps = int(iterations) + 1 if refined else 0
    s32 = chosen_solve_bytes(tile_map, n, nb, nrhs, cache=cache, itemsize=SINGLE_BYTES,
                             variant=variant)
    r64 = chosen_residual_bytes(tile_map, n, nb, nrhs, cache=cache, itemsize=DOUBLE_BYTES,
                                variant=variant)
    out = {"factor32": zero if fallback == "range" else f32,
           "solve32": s32 * steps, "residual64": r64 * steps,
           "factor64": zero, "solve64": zero}
    if fallback is not None:
        out["factor64"] = transfer_pairs_bytes(tile_map, n, nb, cache=cache,
                                               itemsize=DOUBLE_BYTES)
        out["solve64"] = chosen_solve_bytes(tile_map, n, nb, nrhs, cache=cache,
                                            itemsize=DOUBLE_BYTES, variant=variant)
        out["residual64"] = out["residual64"] + r64
    return out


def mixed_transfer_pairs_bytes(tile_map, n, nb, nrhs, iterations=0, fallback=None,
                               cache=True, variant="auto"):
    """Bytes sent between every pair of nodes by a whole mixed-precision solve (int64
    (P, P)): the sum of :func:`mixed_phase_bytes`."""
    phases = mixed_phase_bytes(tile_map, n, nb, nrhs, iterations, fallback, cache, variant)
    return sum(phases.values())


__all__ = ["FALLBACKS", "SINGLE_BYTES", "chosen_residual_bytes", "chosen_solve_bytes",
           "mixed_phase_bytes", "mixed_transfer_pairs_bytes"]
