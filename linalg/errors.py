"""Exceptions of the linear algebra (all derive from :class:`starchol.StarcholError`)."""
import numpy as np

from ..errors import StarcholError


class NotPositiveDefiniteError(StarcholError, np.linalg.LinAlgError):
    """The Cholesky factorization met a non-positive, or a non-finite, pivot.

    A :class:`numpy.linalg.LinAlgError`, so ``except LinAlgError`` (add jitter, retry)
    catches it. Raised on every rank with the same message (the ranks agree on the first
    failing column with one reduction). ``column`` is the 0-based global column;
    ``finite`` is False when the pivot there is NaN or Inf (A holds NaN or Inf, or its
    values overflow), as reference LAPACK's ``?potrf`` reports too.
    """

    def __init__(self, column, n=None, finite=True):
        self.column = int(column)
        self.n = n
        self.finite = bool(finite)
        size = f" of the {n} x {n} matrix" if n is not None else ""
        if self.finite:
            text = (f"matrix is not positive definite: the factorization failed at global "
                    f"column {self.column} (0-based){size}; its leading minor of order "
                    f"{self.column + 1} is not positive")
        else:
            text = (f"matrix is not positive definite: the pivot at global column "
                    f"{self.column} (0-based){size} is not finite; the matrix holds NaN or "
                    f"Inf, or its values overflow")
        super().__init__(text)

    def __reduce__(self):  # travels between ranks (collective agreement)
        return (type(self), (self.column, self.n, self.finite))
