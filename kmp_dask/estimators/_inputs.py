"""Turning what a user passes to ``fit``/``predict`` into a store, without loading big data.

* numpy / pandas / lists → scikit-learn's ``validate_data`` (all its checks apply), then an
  :class:`~kmp_dask.store.InMemoryStore` whose chunks are the engine's partitions;
* a dask array → metadata-only checks (row-only chunks, known chunk sizes, numeric dtype) and
  ``validate_data(..., skip_check_array=True)``; the array is written once to a temporary zarr
  store that workers read (and that lets a lost partition be rebuilt: DESIGN.md §5);
* a store object, or a path / URL of one → opened; its ``y`` is used.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np
from sklearn.utils.validation import validate_data

from ..parallel import encode_dask_labels
from ..store import DataStore, InMemoryStore, as_store, store_from_dask

__all__ = ["is_dask_array", "is_store_like", "fit_input", "check_dask_X"]


def is_dask_array(X) -> bool:
    return type(X).__module__.startswith("dask.") and hasattr(X, "chunks") and hasattr(X, "dask")


def is_store_like(X) -> bool:
    return isinstance(X, (str, os.PathLike)) or isinstance(X, DataStore) and not isinstance(X, np.ndarray)


def check_dask_X(X):
    """dask-ml style metadata checks; returns X unchanged (nothing computed)."""
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got a dask array with shape {X.shape}")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if X.dtype.kind not in "fiub":
        raise ValueError(f"X must be numeric; got dtype {X.dtype}")
    return X


@contextlib.contextmanager
def fit_input(estimator, X, y, *, chunk_rows, is_classifier):
    """Yield a store holding X (and y) for ``fit``; sets ``n_features_in_``.

    Temporary stores made for dask input are deleted when the context exits.
    """
    if is_store_like(X):
        if y is not None:
            raise ValueError(
                "when X is a store (or a path to one), y is read from the store; got y as well. "
                "Pass y=None, or pass numpy/dask arrays for X and y."
            )
        store = as_store(X)
        if not store.has_y:
            raise ValueError(f"the store {store!r} has no 'y' array; supervised fit needs targets")
        estimator.n_features_in_ = store.n_features
        yield store
        return
    if is_dask_array(X):
        check_dask_X(X)
        if y is None:
            raise ValueError("y is required when X is an array")
        validate_data(estimator, X, skip_check_array=True)
        if is_classifier and getattr(y, "dtype", np.dtype(float)).kind not in "biuf":
            estimator._input_classes, y = encode_dask_labels(y)
        with tempfile.TemporaryDirectory(prefix="kmp-dask-fit-") as tmp:
            yield store_from_dask(os.path.join(tmp, "data.zarr"), X, y, chunk_rows=chunk_rows)
        return
    X, y = validate_data(
        estimator, X, y, dtype=[np.float64, np.float32], multi_output=not is_classifier,
        y_numeric=not is_classifier,
    )
    if is_classifier:
        from sklearn.utils import column_or_1d

        y = column_or_1d(y, warn=True)
        estimator._input_classes, y = np.unique(y, return_inverse=True)
    yield InMemoryStore(X, y, chunk_rows=chunk_rows or _default_memory_chunks(X))


def _default_memory_chunks(X) -> int:
    """Partitions for in-memory input: ~4 MiB each, at least 2048 rows."""
    return int(max(2048, (4 << 20) // max(1, X.shape[1] * X.itemsize)))


def predict_input(estimator, X):
    """Return ("numpy", array) or ("dask", dask array) for prediction."""
    if is_store_like(X):
        store = as_store(X)
        Xd = store.to_dask("X")
        validate_data(estimator, Xd, skip_check_array=True, reset=False)
        return "dask", Xd
    if is_dask_array(X):
        check_dask_X(X)
        validate_data(estimator, X, skip_check_array=True, reset=False)
        return "dask", X
    return "numpy", validate_data(estimator, X, dtype=[np.float64, np.float32], reset=False)
