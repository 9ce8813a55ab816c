"""Lazy chunk-wise evaluation over dask arrays (prediction side, dask-ml ParallelPostFit style)."""

from __future__ import annotations

import numpy as np

__all__ = ["map_rows_predict"]


def _evaluate(block, expansion):
    return expansion.evaluate_block(block)


def map_rows_predict(X, expansion):
    """Lazy (N, m) dask array of ``expansion``'s values on the row chunks of dask array ``X``.

    ``expansion`` is a :class:`~kmp_dask.KernelExpansion` (small: shipped once per task).
    """
    import dask.array as da

    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    m = expansion.n_outputs
    return da.map_blocks(
        _evaluate, X, expansion, dtype=np.float64, chunks=(X.chunks[0], (m,)), meta=np.empty((0, m)),
    )
