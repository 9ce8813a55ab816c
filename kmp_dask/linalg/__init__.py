"""Driver-side small dense linear algebra (NumPy/SciPy only, float64)."""

from ._blas import rank_one_update
from ._cholesky import IncrementalCholesky, back_substitution, forward_substitution

__all__ = ["IncrementalCholesky", "back_substitution", "forward_substitution", "rank_one_update"]
