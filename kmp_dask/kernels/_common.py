"""Shared helpers for the block kernels: dtype resolution and row norms.

Pure NumPy; imported by every kernel module of :mod:`kmp_dask.kernels`.
"""

from __future__ import annotations

import numpy as np


def float_dtype(*arrays: np.ndarray) -> np.dtype:
    """Floating dtype in which a kernel block over ``arrays`` is computed.

    Parameters
    ----------
    *arrays : ndarray
        Input blocks.

    Returns
    -------
    dtype : numpy.dtype
        float32 if every input is float32 (or a smaller float), float64 if
        any input is float64 or an integer type.
    """
    return np.result_type(*(a.dtype for a in arrays), np.float32)


def as_float_pair(X, Y) -> tuple[np.ndarray, np.ndarray]:
    """Convert two blocks to 2-D arrays of their common floating dtype.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    Y : array-like of shape (n_basis, n_features)

    Returns
    -------
    X, Y : ndarray
        Views when no conversion is needed, copies otherwise.
    """
    X = np.asarray(X)
    Y = np.asarray(Y)
    dtype = float_dtype(X, Y)
    return X.astype(dtype, copy=False), Y.astype(dtype, copy=False)


def row_sqnorms(X: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of every row, in the dtype of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    sqnorms : ndarray of shape (n_samples,)
    """
    return np.einsum("ij,ij->i", X, X)


def as_float_rows(X) -> np.ndarray:
    """Convert one block to a 2-D floating array (float32 kept, else float64).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    """
    X = np.asarray(X)
    return X.astype(float_dtype(X), copy=False)
