"""Label encoding of dask arrays (the estimators' only dask pass over ``y`` before fitting)."""

from __future__ import annotations

import numpy as np

__all__ = ["encode_dask_labels"]


def encode_dask_labels(y, name_unorderable=None):
    """Non-numeric dask labels → ``(classes, codes)``, one small pass for the label set.

    ``classes`` is the sorted numpy array of distinct labels (computed now); ``codes`` is a lazy
    int64 dask array of indices into ``classes``, chunked as ``y``. ``name_unorderable``: called
    with the labels (in memory, as objects) when they mix types that cannot be ordered, to raise
    an error naming them (the estimators' in-memory check); numpy's TypeError otherwise.
    """
    import dask.array as da

    from ._waits import compute_bounded

    y = da.asarray(y)
    try:
        (found,) = compute_bounded(da.unique(y), what="label set pass")
        classes = np.unique(found)
    except TypeError:  # labels of several types: named (rows and values) by the in-memory check
        if name_unorderable is not None:
            (labels,) = compute_bounded(y, what="label read")
            name_unorderable(np.asarray(labels, dtype=object))
        raise
    return classes, y.map_blocks(_codes, classes, dtype=np.int64)


def _codes(block, classes):
    return np.searchsorted(classes, block).astype(np.int64)
