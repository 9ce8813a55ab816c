"""Driver-side small dense linear algebra (NumPy/SciPy only, float64)."""

from ._blas import rank_one_update
from ._cholesky import IncrementalCholesky

__all__ = ["IncrementalCholesky", "rank_one_update"]
