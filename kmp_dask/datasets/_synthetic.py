"""Seeded synthetic datasets generated block by block (any size, bounded memory).

Rows are produced in fixed generation blocks of ``GEN_BLOCK_ROWS`` rows; block
``j`` comes from ``np.random.default_rng([random_state, j])``. The data are
therefore identical for any storage chunking, write order or parallelism, and
any row range can be produced alone. Model parameters (class centres, warps,
target directions) come from ``default_rng([random_state, 2**32 - 1])``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..store import ZarrStore, default_chunk_rows, store_from_blocks

__all__ = [
    "GEN_BLOCK_ROWS",
    "classification_rows",
    "make_classification",
    "make_classification_store",
    "make_regression",
    "make_regression_store",
    "regression_rows",
]

#: Rows per generation block (the unit of seeding).
GEN_BLOCK_ROWS = 1000
_MODEL_KEY = 2**32 - 1
_N_MODES = 3


@dataclass(frozen=True)
class _ClassModel:
    """Class-conditional Gaussian mixtures in a latent space, warped nonlinearly to d features."""

    priors: np.ndarray  # (n_classes,)
    centres: np.ndarray  # (n_classes, _N_MODES, k)
    W: np.ndarray  # (k, d) nonlinear part
    V: np.ndarray  # (k, d) linear part


@functools.lru_cache(maxsize=16)
def _class_model(random_state: int, n_features: int, n_classes: int) -> _ClassModel:
    rng = np.random.default_rng([random_state, _MODEL_KEY])
    k = min(n_features, 6)
    logits = 0.8 * rng.standard_normal(n_classes)
    priors = np.exp(logits) / np.exp(logits).sum()
    centres = 1.5 * rng.standard_normal((n_classes, _N_MODES, k))
    W = rng.standard_normal((k, n_features)) / np.sqrt(k)
    V = rng.standard_normal((k, n_features)) / np.sqrt(k)
    return _ClassModel(priors, centres, W, V)


def _classification_block(model: _ClassModel, random_state: int, j: int) -> tuple:
    """Generation block ``j``: labels, latent points, warped features plus noise."""
    rng = np.random.default_rng([random_state, j])
    n_classes, n_modes, k = model.centres.shape
    y = rng.choice(n_classes, size=GEN_BLOCK_ROWS, p=model.priors).astype(np.int32)
    mode = rng.integers(0, n_modes, size=GEN_BLOCK_ROWS)
    z = model.centres[y, mode] + 0.6 * rng.standard_normal((GEN_BLOCK_ROWS, k))
    X = 1.5 * np.tanh(z @ model.W) + z @ model.V
    X += 0.1 * rng.standard_normal(X.shape)
    return X, y


@dataclass(frozen=True)
class _RegModel:
    """Smooth target from three random unit directions."""

    w: np.ndarray  # (3, d)


@functools.lru_cache(maxsize=16)
def _reg_model(random_state: int, n_features: int) -> _RegModel:
    rng = np.random.default_rng([random_state, _MODEL_KEY])
    w = rng.standard_normal((3, n_features))
    return _RegModel(w / np.linalg.norm(w, axis=1, keepdims=True))


def _regression_block(model: _RegModel, random_state: int, j: int, noise: float) -> tuple:
    """Generation block ``j``: uniform features, ``sin + square + cos`` target plus noise."""
    rng = np.random.default_rng([random_state, j])
    X = rng.uniform(-1.0, 1.0, size=(GEN_BLOCK_ROWS, model.w.shape[1]))
    p = X @ model.w.T
    y = np.sin(3.0 * p[:, 0]) + 0.5 * p[:, 1] ** 2 + np.cos(2.0 * p[:, 2])
    return X, y + noise * rng.standard_normal(GEN_BLOCK_ROWS)


def _rows(block_fn, start: int, stop: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[start, stop)`` cut from the generation blocks that cover them."""
    first, last = start // GEN_BLOCK_ROWS, -(-stop // GEN_BLOCK_ROWS)
    parts = [block_fn(j) for j in range(first, last)]
    X = np.concatenate([p[0] for p in parts]) if parts else np.empty((0, 0))
    y = np.concatenate([p[1] for p in parts]) if parts else np.empty(0)
    lo, hi = start - first * GEN_BLOCK_ROWS, stop - first * GEN_BLOCK_ROWS
    return np.ascontiguousarray(X[lo:hi], dtype=dtype), y[lo:hi]


def _check_params(n_rows: int, random_state: int, n_features: int) -> None:
    if int(n_rows) < 1 or int(n_features) < 1:
        raise ValueError(f"n_rows and n_features must be >= 1; got {n_rows} and {n_features}.")
    if int(random_state) < 0:
        raise ValueError(f"random_state must be a non-negative int; got {random_state}.")


def classification_rows(start: int, stop: int, *, n_features: int = 54, n_classes: int = 7,
                        random_state: int = 0, dtype="float32") -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[start, stop)`` of the synthetic classification dataset.

    Returns
    -------
    X : ndarray of shape (stop - start, n_features)
    y : ndarray of shape (stop - start,), int32 class codes
    """
    model = _class_model(int(random_state), int(n_features), int(n_classes))
    return _rows(functools.partial(_classification_block, model, int(random_state)),
                 start, stop, dtype)


def regression_rows(start: int, stop: int, *, n_features: int = 8, noise: float = 0.1,
                    random_state: int = 0, dtype="float32") -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[start, stop)`` of the synthetic regression dataset (y float64)."""
    model = _reg_model(int(random_state), int(n_features))
    fn = functools.partial(_regression_block, model, int(random_state), noise=float(noise))
    return _rows(fn, start, stop, dtype)


def make_classification(n_rows: int, n_features: int = 54, n_classes: int = 7, *,
                        random_state: int = 0, dtype="float32") -> tuple[np.ndarray, np.ndarray]:
    """In-memory version of :func:`make_classification_store` (same rows).

    The default shape mimics covertype: 54 features, 7 imbalanced classes.
    Each class is a mixture of 3 Gaussian blobs in a latent space of
    ``min(n_features, 6)`` dimensions, mapped to the features by
    ``1.5 tanh(z W) + z V`` plus noise: smooth and learnable by RBF models.
    """
    _check_params(n_rows, random_state, n_features)
    if int(n_classes) < 2:
        raise ValueError(f"n_classes must be >= 2; got {n_classes}.")
    return classification_rows(0, int(n_rows), n_features=n_features, n_classes=n_classes,
                               random_state=random_state, dtype=dtype)


def make_regression(n_rows: int, n_features: int = 8, *, noise: float = 0.1,
                    random_state: int = 0, dtype="float32") -> tuple[np.ndarray, np.ndarray]:
    """In-memory version of :func:`make_regression_store` (same rows).

    Features are uniform on [-1, 1]; ``y = sin(3 a.x) + 0.5 (b.x)^2 + cos(2 c.x)
    + noise * N(0, 1)`` for seeded unit vectors a, b, c.
    """
    _check_params(n_rows, random_state, n_features)
    return regression_rows(0, int(n_rows), n_features=n_features, noise=noise,
                           random_state=random_state, dtype=dtype)


def _gen_chunk_rows(chunk_rows, n_rows: int, n_features: int, dtype) -> int:
    """Default chunking rounded down to whole generation blocks."""
    if chunk_rows is not None:
        return int(chunk_rows)
    rows = default_chunk_rows(int(n_rows), int(n_features), np.dtype(dtype).itemsize)
    return max(GEN_BLOCK_ROWS, rows - rows % GEN_BLOCK_ROWS) if rows >= GEN_BLOCK_ROWS else rows


def _rows_from(fn, offset: int, start: int, stop: int):
    return fn(start + offset, stop + offset)


def _shifted(fn, start_row: int):
    """``fn(start, stop)`` moved to rows ``[start_row + start, start_row + stop)`` (picklable)."""
    if isinstance(start_row, bool) or not isinstance(start_row, (int, np.integer)) or start_row < 0:
        raise ValueError(f"start_row must be an int >= 0; got {start_row!r}")
    return fn if start_row == 0 else functools.partial(_rows_from, fn, int(start_row))


def make_classification_store(target, n_rows: int, n_features: int = 54, n_classes: int = 7, *,
                              chunk_rows=None, random_state: int = 0, dtype="float32",
                              overwrite=False, client=None, storage_options=None,
                              progress=None, start_row: int = 0) -> ZarrStore:
    """Write the synthetic classification dataset chunk by chunk (see :func:`make_classification`).

    Parameters
    ----------
    target : str or os.PathLike
        Store location (path or fsspec URL).
    n_rows, n_features, n_classes : int
        Size of the data; defaults mimic covertype (54 features, 7 classes).
    chunk_rows : int, optional
        Rows per storage chunk; default about 16 MiB, in whole 1000-row blocks.
    random_state : int, default=0
        Seed; the data do not depend on ``chunk_rows`` or ``client``.
    dtype : {"float32", "float64"}, default="float32"
    overwrite : bool, default=False
    client : distributed.Client, optional
        Generate and write chunks in parallel (one task per chunk; local path only).
    storage_options : dict, optional
    progress : bool or callable, optional
        Rows written, as for :func:`~kmp_dask.store.create_store` (serial writes only).
    start_row : int, default=0
        First row of the (infinite) seeded sequence to write: a held-out store of the same
        distribution is ``start_row=n_train`` with the same ``random_state``.

    Returns
    -------
    ZarrStore
    """
    _check_params(n_rows, random_state, n_features)
    fn = _shifted(functools.partial(classification_rows, n_features=int(n_features),
                           n_classes=int(n_classes), random_state=int(random_state), dtype=dtype), start_row)
    params = dict(generator="make_classification", n_rows=int(n_rows), n_features=int(n_features),
                  n_classes=int(n_classes), random_state=int(random_state), start_row=int(start_row),
                  dtype=str(np.dtype(dtype)), gen_block_rows=GEN_BLOCK_ROWS)
    return store_from_blocks(
        target, int(n_rows), fn, chunk_rows=_gen_chunk_rows(chunk_rows, n_rows, n_features, dtype),
        overwrite=overwrite, classes=list(range(int(n_classes))), dtype=dtype,
        provenance={"source": "kmp_dask.datasets.make_classification_store", "params": params},
        storage_options=storage_options, client=client, progress=progress)


def make_regression_store(target, n_rows: int, n_features: int = 8, *, noise: float = 0.1,
                          chunk_rows=None, random_state: int = 0, dtype="float32",
                          overwrite=False, client=None, storage_options=None,
                          progress=None, start_row: int = 0) -> ZarrStore:
    """Write the synthetic regression dataset chunk by chunk (see :func:`make_regression`).

    Parameters are as for :func:`make_classification_store` (``start_row`` too), plus ``noise``
    (standard deviation of the Gaussian noise added to ``y``).

    Returns
    -------
    ZarrStore
    """
    _check_params(n_rows, random_state, n_features)
    fn = _shifted(functools.partial(regression_rows, n_features=int(n_features), noise=float(noise),
                                    random_state=int(random_state), dtype=dtype), start_row)
    params = dict(generator="make_regression", n_rows=int(n_rows), n_features=int(n_features),
                  noise=float(noise), random_state=int(random_state), start_row=int(start_row),
                  dtype=str(np.dtype(dtype)), gen_block_rows=GEN_BLOCK_ROWS)
    return store_from_blocks(
        target, int(n_rows), fn, chunk_rows=_gen_chunk_rows(chunk_rows, n_rows, n_features, dtype),
        overwrite=overwrite, dtype=dtype,
        provenance={"source": "kmp_dask.datasets.make_regression_store", "params": params},
        storage_options=storage_options, client=client, progress=progress)
