"""Chunk-wise metrics and outputs of a fitted model over a store (dask; small numpy per block).

A model's predictions over a store are a lazy dask array with the store's row chunks; the
metrics here reduce them block by block with the store's labels (a confusion matrix, or the
sums behind R² / MSE / MAE), so no full column of predictions is ever gathered on the driver.
"""

from __future__ import annotations

import numpy as np

__all__ = ["confusion_counts", "regression_sums", "label_codes"]


def _as_dask(a, chunks):
    import dask.array as da

    if isinstance(a, da.Array):
        return a
    return da.from_array(np.asarray(a), chunks=chunks)


def _codes_block(labels, classes):
    """Index of each label in ``classes`` (-1 when absent)."""
    labels = np.asarray(labels)
    lookup = {c: i for i, c in enumerate(classes.tolist())}
    return np.fromiter((lookup.get(v, -1) for v in labels.tolist()), dtype=np.int64, count=len(labels))


def label_codes(labels, classes):
    """A dask array of labels → their indices in ``classes`` (-1 for a label not among them)."""
    import dask.array as da

    classes = np.asarray(classes)
    labels = labels if isinstance(labels, da.Array) else da.from_array(np.asarray(labels))
    return labels.map_blocks(_codes_block, classes, dtype=np.int64)


def _confusion_block(pred, true, n):
    pred, true = np.asarray(pred), np.asarray(true)
    out = np.zeros((n + 1, n + 1), dtype=np.int64)  # last row/column: labels outside the model's classes
    np.add.at(out, (np.where(true >= 0, true, n), np.where(pred >= 0, pred, n)), 1)
    return out


def confusion_counts(pred_codes, true_codes, n_classes: int) -> np.ndarray:
    """(n+1, n+1) counts: rows true class, columns predicted; index n = a label the model lacks."""
    import dask

    true_codes = _as_dask(true_codes, pred_codes.chunks[0]).rechunk(pred_codes.chunks[0])
    parts = [dask.delayed(_confusion_block)(p, t, n_classes)
             for p, t in zip(pred_codes.to_delayed().ravel(), true_codes.to_delayed().ravel())]
    return np.sum(dask.compute(*parts), axis=0)


def _regression_block(pred, true):
    pred = np.asarray(pred, dtype=np.float64).reshape(len(pred), -1)
    true = np.asarray(true, dtype=np.float64).reshape(len(true), -1)
    err = pred - true
    return np.stack([np.full(true.shape[1], len(true), dtype=np.float64), true.sum(0), (true ** 2).sum(0),
                     (err ** 2).sum(0), np.abs(err).sum(0)])


def regression_sums(pred, true) -> dict:
    """Per output: n, Σy, Σy², Σ(ŷ−y)², Σ|ŷ−y| over all rows, one block at a time."""
    import dask

    pred = _as_dask(pred, "auto")
    true = _as_dask(true, pred.chunks[0])
    true = true.rechunk((pred.chunks[0],) + true.chunks[1:])
    parts = [dask.delayed(_regression_block)(p, t)
             for p, t in zip(pred.to_delayed().ravel(), true.to_delayed().ravel())]
    n, s, s2, sse, sae = np.sum(dask.compute(*parts), axis=0)
    return {"n": n, "sum": s, "sumsq": s2, "sse": sse, "sae": sae}
