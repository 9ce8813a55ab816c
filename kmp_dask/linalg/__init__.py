"""Driver-side small dense linear algebra (NumPy/SciPy only, float64)."""

from ._cholesky import IncrementalCholesky

__all__ = ["IncrementalCholesky"]
