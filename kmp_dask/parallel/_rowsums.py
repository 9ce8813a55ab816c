"""Sums of small per-block statistics over the row blocks of dask arrays (one pass, nothing gathered).

The estimators' cross-validation scores every prefix model of every fold on its held-out rows in
one pass: ``fn(X_block, y_block, start, *args)`` returns a small numpy array for one row block
(``start`` is the block's first global row index, so a block can work out which of its rows
belong to which fold from a hash of the index, whatever the chunking) and the blocks' arrays are
summed on the driver in block order.
"""

from __future__ import annotations

import numpy as np

from ._scatter import rerun_if_lost, scatter_value
from ._waits import wait_for

__all__ = ["row_block_sums"]


def row_block_sums(fn, X, y, args: tuple, *, client=None) -> np.ndarray:
    """``Σ_b fn(X_b, y_b, start_b, *args)`` over the row blocks ``b`` of the dask arrays ``X`` and ``y``.

    ``fn`` should be a module-level function. With ``client`` (a ``distributed.Client``) the pass
    runs on its workers, and ``args`` (the prefix scorers of a cross-validated search: tens of MB at
    a cap of 800 atoms) are scattered once (:func:`~._scatter.scatter_value`), not put in the graph:
    a graph carrying them went through the scheduler whole (dask warned "Sending large graph of size
    42 MiB" on a 12,000-row store). If the worker holding them dies before the pass ends, the pass
    is submitted again with a new scatter, at most :data:`SCATTER_RETRIES` times. Without
    ``client`` it runs in this process (dask's synchronous scheduler).
    """
    import uuid

    import dask

    X = X.rechunk({1: -1}) if X.ndim == 2 and X.numblocks[1] != 1 else X
    y = y.rechunk((X.chunks[0],) + tuple((-1,) * (y.ndim - 1)))
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    blocks = list(zip(X.to_delayed().ravel(), y.to_delayed().ravel(), starts, strict=True))
    if not blocks:
        raise ValueError("row_block_sums needs at least one row block; got an empty array")
    if client is None:
        shared = dask.delayed(args, name=f"row-block-args-{uuid.uuid4().hex}", traverse=False)  # not tokenized
        results = dask.compute(*_parts(fn, blocks, shared), scheduler="sync")
    else:
        results = _on_workers(client, fn, blocks, args)
    return np.sum(np.stack([np.asarray(r, dtype=np.float64) for r in results]), axis=0)


def _parts(fn, blocks, shared):
    import dask

    return [dask.delayed(_call, pure=True)(fn, xb, yb, int(s), shared) for xb, yb, s in blocks]


def _on_workers(client, fn, blocks, args):
    """The blocks' results on ``client``'s workers, ``args`` scattered once for all blocks (and again
    if the worker holding them died: :func:`~._scatter.rerun_if_lost`)."""

    def once():
        shared = scatter_value(client, args)
        try:
            return wait_for(client.compute(_parts(fn, blocks, shared)), client, what="block of the scoring pass")
        finally:
            shared.release()

    return rerun_if_lost(once)


def _call(fn, X, y, start, args):
    return fn(np.asarray(X), np.asarray(y), start, *args)
