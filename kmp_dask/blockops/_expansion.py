"""Evaluate a kernel expansion ``f(x) = Σ_j k_j(x, z_j) coef_j + intercept`` on one block of rows."""

from __future__ import annotations

import numpy as np

__all__ = ["predict_block", "BLOCK_ELEMENTS"]

BLOCK_ELEMENTS = 1 << 22
"""Largest kernel block (rows × centres) held at once: 32 MiB in float64 (an expansion of 10⁵
centres is evaluated 41 rows at a time, not 8192 × 10⁵ = 6.5 GB at once)."""


def predict_block(X_block, basis, coef, intercept, kernel, basis_kernels=None, *, block_rows: int = 8192):
    """Decision values (rows, m) for ``X_block``, in row blocks to bound memory.

    ``kernel`` is one kernel, or the dictionary's list of kernels with ``basis_kernels`` giving
    each basis element's index into it (mixed dictionaries).
    """
    X_block = np.asarray(X_block)
    coef = np.asarray(coef, dtype=np.float64)
    out = np.empty((X_block.shape[0], coef.shape[1]))
    out[:] = intercept
    if len(basis) == 0:
        return out
    basis = np.asarray(basis, dtype=X_block.dtype)
    kernels = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel]
    groups = np.zeros(len(basis), dtype=int) if basis_kernels is None else np.asarray(basis_kernels)
    for q, k in enumerate(kernels):
        sel = np.flatnonzero(groups == q)
        if len(sel) == 0:
            continue
        Zq, Cq = basis[sel], coef[sel]
        rows = max(1, min(block_rows, BLOCK_ELEMENTS // len(Zq)))  # bounded kernel block, however many centres
        for a in range(0, X_block.shape[0], rows):
            out[a : a + rows] += k(X_block[a : a + rows], Zq) @ Cq
    return out
