"""Dot-product kernels: polynomial ``(gamma <x, y> + coef0)^degree`` and
sigmoid ``tanh(gamma <x, y> + coef0)``.

Pure NumPy; one GEMM plus in-place elementwise passes.
"""

from __future__ import annotations

import numpy as np

from ._common import as_float_pair, as_float_rows, row_sqnorms


def polynomial(X, Y, *, gamma, degree, coef0):
    """Polynomial kernel block ``K[i, j] = (gamma <X[i], Y[j]> + coef0)^degree``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_basis, n_features)
    gamma : float
        Positive scale of the inner product.
    degree : int
        Positive degree.
    coef0 : float
        Additive constant.

    Returns
    -------
    K : ndarray of shape (n_samples, n_basis)
        float32 if both inputs are float32, float64 otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> polynomial(np.array([[1.0, 2.0]]), np.array([[3.0, 1.0]]),
    ...            gamma=1.0, degree=2, coef0=1.0)
    array([[36.]])
    """
    X, Y = as_float_pair(X, Y)
    K = X @ Y.T
    K *= gamma
    K += coef0
    K **= degree
    return K


def polynomial_diag(X, *, gamma, degree, coef0):
    """Diagonal ``(gamma ||x||^2 + coef0)^degree`` of the polynomial kernel.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    gamma, degree, coef0
        As in :func:`polynomial`.

    Returns
    -------
    diag : ndarray of shape (n_samples,)
    """
    d = row_sqnorms(as_float_rows(X))
    d *= gamma
    d += coef0
    d **= degree
    return d


def sigmoid(X, Y, *, gamma, coef0):
    """Sigmoid kernel block ``K[i, j] = tanh(gamma <X[i], Y[j]> + coef0)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_basis, n_features)
    gamma : float
        Positive scale of the inner product.
    coef0 : float
        Additive constant.

    Returns
    -------
    K : ndarray of shape (n_samples, n_basis)
        float32 if both inputs are float32, float64 otherwise.

    Notes
    -----
    The sigmoid kernel is not positive semi-definite in general.

    Examples
    --------
    >>> import numpy as np
    >>> sigmoid(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0]]), gamma=1.0, coef0=0.0)
    array([[0.76159416]])
    """
    X, Y = as_float_pair(X, Y)
    K = X @ Y.T
    K *= gamma
    K += coef0
    np.tanh(K, out=K)
    return K


def sigmoid_diag(X, *, gamma, coef0):
    """Diagonal ``tanh(gamma ||x||^2 + coef0)`` of the sigmoid kernel.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    gamma, coef0
        As in :func:`sigmoid`.

    Returns
    -------
    diag : ndarray of shape (n_samples,)
    """
    d = row_sqnorms(as_float_rows(X))
    d *= gamma
    d += coef0
    np.tanh(d, out=d)
    return d
