"""Driver-side small dense linear algebra (NumPy/SciPy only, float64)."""

from ._blas import rank_one_update
from ._cholesky import IncrementalCholesky, back_substitution, forward_substitution
from ._threads import one_blas_thread

__all__ = ["IncrementalCholesky", "back_substitution", "forward_substitution", "one_blas_thread", "rank_one_update"]
