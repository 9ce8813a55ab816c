"""Laplacian kernel block: ``exp(-gamma * ||x - y||_1)``.

Pure NumPy/SciPy. L1 distances come from :func:`scipy.spatial.distance.cdist`
(C loop, no ``(n, s, d)`` temporary).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from ._common import as_float_pair
from ._rbf import rbf_diag


def laplacian(X, Y, *, gamma):
    """Laplacian kernel block ``K[i, j] = exp(-gamma * ||X[i] - Y[j]||_1)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_basis, n_features)
    gamma : float
        Positive bandwidth parameter.

    Returns
    -------
    K : ndarray of shape (n_samples, n_basis)
        float32 if both inputs are float32, float64 otherwise.

    Notes
    -----
    ``cdist`` accumulates in float64, so memory is one float64 block of shape
    (n_samples, n_basis), cast to the result dtype before the in-place
    exponential.

    Examples
    --------
    >>> import numpy as np
    >>> laplacian(np.array([[0.0, 0.0]]), np.array([[1.0, -1.0]]), gamma=0.5)
    array([[0.36787944]])
    """
    X, Y = as_float_pair(X, Y)
    K = cdist(X, Y, metric="cityblock").astype(X.dtype, copy=False)
    K *= -gamma
    np.exp(K, out=K)
    return K


laplacian_diag = rbf_diag
