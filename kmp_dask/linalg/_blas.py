"""In-place BLAS updates for the small dense states the drivers and partitions keep."""

from __future__ import annotations

import numpy as np


def rank_one_update(alpha: float, x: np.ndarray, y: np.ndarray, a: np.ndarray) -> None:
    """``a += alpha · x yᵀ`` in place (``a`` float64, Fortran-ordered for BLAS ``dger`` to work in
    place; any other layout is copied back). ``x`` must not alias ``a``."""
    from scipy.linalg.blas import dger

    out = dger(alpha, x, y, a=a, overwrite_a=True)
    if out is not a:  # not updated in place (layout): copy back
        a[...] = out
