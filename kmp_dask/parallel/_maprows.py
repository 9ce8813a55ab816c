"""Lazy chunk-wise evaluation over dask arrays (prediction side, dask-ml ParallelPostFit style)."""

from __future__ import annotations

import numpy as np

from ..blockops import predict_block

__all__ = ["map_rows_predict"]


def map_rows_predict(X, basis, coef, intercept, kernel, basis_kernels=None):
    """Lazy (N, m) dask array of decision values ``K(X, basis) @ coef + intercept``."""
    import dask.array as da

    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    m = np.asarray(coef).shape[1]
    return da.map_blocks(
        predict_block,
        X,
        basis,
        coef,
        intercept,
        kernel,
        basis_kernels,
        dtype=np.float64,
        chunks=(X.chunks[0], (m,)),
        meta=np.empty((0, m)),
    )
