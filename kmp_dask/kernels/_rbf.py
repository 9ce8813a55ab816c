"""Gaussian (RBF) kernel block: ``exp(-gamma * ||x - y||^2)``.

Pure NumPy. Uses the expanded form ``||x||^2 + ||y||^2 - 2 <x, y>`` so that
the work is one GEMM; the squared row norms may be precomputed and cached per
partition by the caller.
"""

from __future__ import annotations

import numpy as np

from ._common import as_float_pair, as_float_rows, row_sqnorms

_SLAB_ELEMENTS = 1 << 16  # elements per row slab of the elementwise passes


def _rounding_slack(dtype: np.dtype, n_features: int) -> float:
    """Relative rounding error of the expanded squared distance.

    The computed ``||x||^2 + ||y||^2 - 2 <x, y>`` carries an error of about
    ``sqrt(n_features) * eps * (||x||^2 + ||y||^2)`` (probabilistic bound for a
    sum of ``n_features`` terms), which is why it can come out slightly
    positive for identical rows. Distances below four times that bound are
    indistinguishable from 0 and are set to 0.
    """
    return 4.0 * float(np.sqrt(max(n_features, 1))) * float(np.finfo(dtype).eps)


def _gram_to_sqdist(G, x_sq, y_sq, slack, floor):
    """Turn a Gram slab ``G = X Y^T`` into clipped squared distances in place.

    ``d^2 = x_sq + y_sq - 2 G``; entries at or below ``slack * (x_sq + y_sq)`` (negative ones
    included) become 0. ``floor`` is a scratch buffer of G's shape: reused across slabs so the
    hot loop allocates nothing (dask nannies set ``MALLOC_TRIM_THRESHOLD_``, which turns off
    glibc's adaptive mmap threshold: every large temporary would then be a fresh mmap with page
    faults — measured as +60% per pass inside a worker).
    """
    G *= -2.0
    G += x_sq[:, None]
    G += y_sq[None, :]
    np.add.outer(x_sq, y_sq, out=floor)
    floor *= slack
    np.copyto(G, 0.0, where=G <= floor)


def _gram_to_rbf(G, x_sq, y_sq, gamma, slack, floor):
    """Turn a Gram slab ``G = X Y^T`` into ``exp(-gamma d^2)`` in place."""
    _gram_to_sqdist(G, x_sq, y_sq, slack, floor)
    G *= -gamma
    np.exp(G, out=G)


def rbf(X, Y, *, gamma, X_sqnorm=None, Y_sqnorm=None, out=None):
    """Gaussian kernel block ``K[i, j] = exp(-gamma * ||X[i] - Y[j]||^2)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Row block (for example one data chunk).
    Y : ndarray of shape (n_basis, n_features)
        Basis or candidate points.
    gamma : float
        Positive bandwidth parameter.
    X_sqnorm : ndarray of shape (n_samples,), default=None
        Precomputed ``||X[i]||^2``; computed when None.
    Y_sqnorm : ndarray of shape (n_basis,), default=None
        Precomputed ``||Y[j]||^2``; computed when None.
    out : ndarray of shape (n_samples, n_basis), default=None
        C-contiguous buffer of the result dtype to write into.

    Returns
    -------
    K : ndarray of shape (n_samples, n_basis)
        float32 if both inputs are float32, float64 otherwise.

    Notes
    -----
    The squared distance is computed as ``||x||^2 + ||y||^2 - 2 <x, y>`` in
    place on the GEMM output. Cancellation makes it inexact for close points:
    values at or below its rounding-error bound (relative
    ``4 sqrt(n_features) eps`` of ``||x||^2 + ||y||^2``), negative ones
    included, are set to 0 before the exponential. Hence the result never
    exceeds 1, is never NaN for finite inputs, and is exactly 1 for identical
    rows; other entries are unchanged. The elementwise passes run over row
    slabs of about 64k elements, so temporaries stay small and in cache.
    Cost: one GEMM plus O(n_samples * n_basis) elementwise work.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> rbf(X, X, gamma=0.5)
    array([[1.        , 0.60653066],
           [0.60653066, 1.        ]])
    """
    X, Y = as_float_pair(X, Y)
    dtype = X.dtype
    slack = _rounding_slack(dtype, X.shape[1])
    x_sq = row_sqnorms(X) if X_sqnorm is None else np.asarray(X_sqnorm, dtype=dtype)
    y_sq = row_sqnorms(Y) if Y_sqnorm is None else np.asarray(Y_sqnorm, dtype=dtype)
    K = np.matmul(X, Y.T, out=out)
    step = max(1, _SLAB_ELEMENTS // max(1, K.shape[1]))
    scratch = np.empty((min(step, K.shape[0]), K.shape[1]), dtype=K.dtype)
    for start in range(0, K.shape[0], step):
        rows = slice(start, start + step)
        _gram_to_rbf(K[rows], x_sq[rows], y_sq, gamma, slack, scratch[: len(K[rows])])
    return K


def rbf_diag(X, *, gamma):
    """Diagonal ``k(x, x) = 1`` of the Gaussian kernel.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    gamma : float
        Bandwidth (unused: the diagonal does not depend on it; accepted so
        that every diagonal function takes the kernel's parameters).

    Returns
    -------
    diag : ndarray of shape (n_samples,)
        Ones in the floating dtype of ``X``.
    """
    X = as_float_rows(X)
    return np.ones(X.shape[0], dtype=X.dtype)


def rbf_multi(X, Y, gammas, *, X_sqnorm=None, Y_sqnorm=None):
    """Gaussian kernel blocks for several widths, sharing one GEMM and one distance pass.

    Returns a list ``[rbf(X, Y, gamma=g) for g in gammas]``, bit for bit: the squared distances
    are formed exactly as :func:`rbf` forms them, then each block is ``exp(-g * d²)``. For a
    dictionary mixing RBF widths this replaces ``len(gammas)`` GEMMs by one.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_basis, n_features)
    gammas : sequence of float
    X_sqnorm, Y_sqnorm : ndarray, optional
        Precomputed squared row norms.

    Returns
    -------
    list of ndarray of shape (n_samples, n_basis)
    """
    X, Y = as_float_pair(X, Y)
    dtype = X.dtype
    slack = _rounding_slack(dtype, X.shape[1])
    x_sq = row_sqnorms(X) if X_sqnorm is None else np.asarray(X_sqnorm, dtype=dtype)
    y_sq = row_sqnorms(Y) if Y_sqnorm is None else np.asarray(Y_sqnorm, dtype=dtype)
    D = np.matmul(X, Y.T)
    out = [np.empty_like(D) for _ in gammas]
    step = max(1, _SLAB_ELEMENTS // max(1, D.shape[1]))
    scratch = np.empty((min(step, D.shape[0]), D.shape[1]), dtype=D.dtype)
    for start in range(0, D.shape[0], step):
        rows = slice(start, start + step)
        G = D[rows]
        _gram_to_sqdist(G, x_sq[rows], y_sq, slack, scratch[: len(G)])
        for K, gamma in zip(out, gammas, strict=True):
            np.multiply(G, -gamma, out=K[rows])
            np.exp(K[rows], out=K[rows])
    return out
