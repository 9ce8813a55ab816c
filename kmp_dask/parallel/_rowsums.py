"""Sums of small per-block statistics over the row blocks of dask arrays (one pass, nothing gathered).

The estimators' cross-validation scores every prefix model of every fold on its held-out rows in
one pass: ``fn(X_block, y_block, start, *args)`` returns a small numpy array for one row block
(``start`` is the block's first global row index, so a block can work out which of its rows
belong to which fold from a hash of the index, whatever the chunking) and the blocks' arrays are
summed on the driver in block order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_block_sums"]


def row_block_sums(fn, X, y, args: tuple, *, client=None) -> np.ndarray:
    """``Σ_b fn(X_b, y_b, start_b, *args)`` over the row blocks ``b`` of the dask arrays ``X`` and ``y``.

    ``fn`` should be a module-level function and ``args`` small values: they are one key of the
    graph, shipped once per worker. With ``client`` (a ``distributed.Client``) the pass runs on
    its workers, else in this process (dask's synchronous scheduler).
    """
    import uuid

    import dask

    X = X.rechunk({1: -1}) if X.ndim == 2 and X.numblocks[1] != 1 else X
    y = y.rechunk((X.chunks[0],) + tuple((-1,) * (y.ndim - 1)))
    shared = dask.delayed(args, name=f"row-block-args-{uuid.uuid4().hex}", traverse=False)
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    parts = [dask.delayed(_call, pure=True)(fn, xb, yb, int(s), shared)
             for xb, yb, s in zip(X.to_delayed().ravel(), y.to_delayed().ravel(), starts)]
    if not parts:
        raise ValueError("row_block_sums needs at least one row block; got an empty array")
    if client is not None:
        results = client.gather(client.compute(parts))
    else:
        results = dask.compute(*parts, scheduler="sync")
    return np.sum(np.stack([np.asarray(r, dtype=np.float64) for r in results]), axis=0)


def _call(fn, X, y, start, args):
    return fn(np.asarray(X), np.asarray(y), start, *args)
