"""Linear kernel block: ``<x, y>``. Pure NumPy."""

from __future__ import annotations

from ._common import as_float_pair, as_float_rows, row_sqnorms


def linear(X, Y):
    """Linear kernel block ``K[i, j] = <X[i], Y[j]>``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_basis, n_features)

    Returns
    -------
    K : ndarray of shape (n_samples, n_basis)
        float32 if both inputs are float32, float64 otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> linear(np.array([[1.0, 2.0]]), np.array([[3.0, 1.0]]))
    array([[5.]])
    """
    X, Y = as_float_pair(X, Y)
    return X @ Y.T


def linear_diag(X):
    """Diagonal ``||x||^2`` of the linear kernel.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    diag : ndarray of shape (n_samples,)
    """
    return row_sqnorms(as_float_rows(X))
