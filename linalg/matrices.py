"""Reproducible test matrices, generated tile by tile where the tiles live.

Entry (r, c) of the symmetric matrix is a pure function of (seed, max(r, c), min(r, c)):
a counter-based hash (SplitMix64's finaliser) mapped to [-0.5, 0.5). Each rank makes
only its own tiles, and the matrix is the same for any map, any rank count and any NB.

- ``spd``: off-diagonal entries in [-0.5, 0.5), diagonal entry + N. Strictly
  diagonally dominant with a positive diagonal, hence symmetric positive definite.
- ``indefinite:J``: the ``spd`` matrix with entry (J, J) replaced by -N. Its leading
  minors of order <= J are those of the SPD matrix (positive) while the pivot at
  column J is -N - ||l_J||^2 < 0, so Cholesky fails exactly at global column J.

Right-hand sides for solves (:func:`rhs_block`) come from the same hash with a salted
seed.
"""
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class MatrixSpec:
    """What matrix to generate: ``kind`` is ``"spd"`` or ``"indefinite"``; ``column`` is
    the global column J where an indefinite matrix must fail (None for spd)."""
    kind: str = "spd"
    column: int = None

    def __str__(self):
        return self.kind if self.column is None else f"{self.kind}:{self.column}"


def parse_matrix_spec(text, n=None, param="matrix"):
    """Parse ``spd`` or ``indefinite:J`` (0 <= J < n).

    Raises :class:`UsageError` whose message names the spec ``param`` (the caller's
    name for it; the command line writes it as its flag: ``--matrix`` for ``run``,
    ``--kind`` for ``generate``).
    """
    text = str(text).strip()
    if text == "spd":
        return MatrixSpec("spd")
    if text.startswith("indefinite:"):
        try:
            j = int(text.split(":", 1)[1])
        except ValueError:
            raise UsageError(f"{param} indefinite:J needs an integer column J, got {text!r}",
                             param=param) from None
        if j < 0 or (n is not None and j >= n):
            last = n - 1 if n else "N-1"
            raise UsageError(f"{param} indefinite:{j}: J must be a global column in "
                             f"0..{last}", param=param)
        return MatrixSpec("indefinite", j)
    raise UsageError(f"unknown {param} {text!r}; use spd or indefinite:J (J a 0-based "
                     f"column)", param=param)


def _hash_uniform(seed, r, c):
    """[-0.5, 0.5) values for global entries (r, c), r >= c (broadcast uint64 arrays)."""
    with np.errstate(over="ignore"):
        x = (r << np.uint64(32)) | c
        x = x + np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _GOLDEN + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0) - 0.5


def block(spec, n, seed, r0, r1, c0, c1):
    """The (r1-r0) x (c1-c0) block of the matrix at rows r0.., columns c0.. (Fortran order)."""
    r = np.arange(r0, r1, dtype=np.uint64)[:, None]
    c = np.arange(c0, c1, dtype=np.uint64)[None, :]
    hi = np.maximum(r, c)
    lo = np.minimum(r, c)
    out = np.asfortranarray(_hash_uniform(int(seed), hi, lo))
    d0, d1 = max(r0, c0), min(r1, c1)
    if d0 < d1:  # the block meets the diagonal
        d = np.arange(d0, d1)
        out[d - r0, d - c0] += n
        if spec.column is not None and d0 <= spec.column < d1:
            out[spec.column - r0, spec.column - c0] = -float(n)
    return out


#: mixed into the seed of generated right-hand sides, so that B is not a block of A
RHS_SEED_SALT = 0x5DEECE66D


def rhs_block(seed, r0, r1, c0, c1):
    """Rows r0..r1-1, columns c0..c1-1 of the generated right-hand sides B (N x K, any
    N and K): entry (r, c) is a pure function of (seed, r, c) in [-0.5, 0.5), so B is the
    same for any map, rank count and NB (``starchol run --nrhs K``)."""
    r = np.arange(r0, r1, dtype=np.uint64)[:, None]
    c = np.arange(c0, c1, dtype=np.uint64)[None, :]
    return np.asfortranarray(_hash_uniform(int(seed) ^ RHS_SEED_SALT, r, c))


def dense(spec, n, seed):
    """The whole n x n matrix (for checks on one process)."""
    return block(spec, n, seed, 0, n, 0, n)
