"""Evaluate a kernel expansion ``f(x) = Σ_j k(x, z_j) coef_j + intercept`` on one block of rows."""

from __future__ import annotations

import numpy as np

__all__ = ["predict_block"]


def predict_block(X_block, basis, coef, intercept, kernel, *, block_rows: int = 8192):
    """Decision values (rows, m) for ``X_block``; computed in row blocks to bound memory."""
    X_block = np.asarray(X_block)
    coef = np.asarray(coef, dtype=np.float64)
    out = np.empty((X_block.shape[0], coef.shape[1]))
    if len(basis) == 0:
        out[:] = intercept
        return out
    basis = np.asarray(basis, dtype=X_block.dtype)
    for a in range(0, X_block.shape[0], block_rows):
        K = kernel(X_block[a : a + block_rows], basis)
        out[a : a + block_rows] = K @ coef
    out += intercept
    return out
