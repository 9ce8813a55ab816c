"""Lazy chunk-wise evaluation over dask arrays (prediction side, dask-ml ParallelPostFit style)."""

from __future__ import annotations

import numpy as np

__all__ = ["map_blocks_rows", "map_rows_predict"]


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


def map_blocks_rows(fn, X, *args, dtype, n_cols=None):
    """Lazy ``fn(block, *args)`` over the row chunks of dask array ``X`` (1-D or one column chunk).

    The result keeps ``X``'s row chunks; with ``n_cols`` it is 2-D with ``n_cols`` columns, else
    it has ``X``'s chunks. ``fn`` should be a module-level function and ``args`` small (numpy)
    values, so that tasks pickle cheaply.
    """
    if n_cols is None:
        return X.map_blocks(fn, *args, dtype=dtype)
    if X.ndim != 2 or X.numblocks[1] != 1:
        raise ValueError(f"n_cols needs a 2-D dask array with one column chunk; got chunks {X.chunks}")
    return X.map_blocks(fn, *args, dtype=dtype, chunks=(X.chunks[0], (n_cols,)))
