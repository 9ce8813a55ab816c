"""Moments of a dask array computed in one pass (the estimators hand dask input here; on a cluster
the pass is waited for as every wait of ours is: ``_waits.compute_bounded``)."""

from __future__ import annotations

import numpy as np

from ._waits import compute_bounded


def entry_variance(X) -> float:
    """The variance over every entry of the dask array ``X`` (float64 accumulation)."""
    (var,) = compute_bounded(X.astype(np.float64).var(), what="variance pass")
    return float(var)


def weighted_entry_variance(X, weights) -> float:
    """The variance over every entry of the dask array ``X``, row ``i`` counted ``weights[i]`` times
    (a numpy vector, one weight per row; float64 accumulation, one pass)."""
    import dask.array as da

    w = da.from_array(np.asarray(weights, dtype=np.float64), chunks=(X.chunks[0],))[:, None]
    Xf = X.astype(np.float64)
    total, first, second = compute_bounded(w.sum() * X.shape[1], (w * Xf).sum(), (w * Xf * Xf).sum(),
                                           what="variance pass")
    mean = first / total
    return float(max(second / total - mean * mean, 0.0))


def feature_moments(X, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and std (population) of the dask array ``X``, rows weighted by ``weights``
    (a numpy vector, or None: all 1); float64 accumulation, one pass."""
    import dask.array as da

    Xf = X.astype(np.float64)
    if weights is None:
        w = da.ones((X.shape[0], 1), chunks=(X.chunks[0], 1))
    else:
        w = da.from_array(np.asarray(weights, dtype=np.float64), chunks=(X.chunks[0],))[:, None]
    total, first, second = compute_bounded(w.sum(), (w * Xf).sum(axis=0), (w * Xf * Xf).sum(axis=0),
                                           what="feature moments pass")
    mean = first / total
    return mean, np.sqrt(np.maximum(second / total - mean * mean, 0.0))
