"""The data's own kernel width: ``gamma="scale"`` as scikit-learn's SVC has it.

``scale_gamma(X) = 1 / (n_features · Var(X))``, the variance taken over every entry of ``X`` (as
``X.var()`` in scikit-learn). For a store the variance comes from the per-feature ``mean`` and
``std`` attributes the store keeps (no pass over the data); for a dask array it is one pass; for a
numpy array it is ``X.var()``. A constant ``X`` (variance 0) gives ``1.0``, as scikit-learn does.
"""

from __future__ import annotations

import numpy as np

from ._inputs import is_dask_array, is_store_like


def _store_variance(store) -> float | None:
    attrs = store.attrs
    mean, std = attrs.get("mean"), attrs.get("std")
    if mean is None or std is None or len(mean) != store.n_features:
        return None
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    # every column has the same number of rows, so the entries' moments are the columns' averages
    second = float(np.mean(std**2 + mean**2))
    return max(second - float(np.mean(mean)) ** 2, 0.0)


def _variance(X) -> tuple[float, int]:
    if is_store_like(X):
        var = _store_variance(X)
        if var is not None:
            return var, int(X.n_features)
        X = X.to_dask()
    if is_dask_array(X):
        from ..parallel._moments import entry_variance

        return entry_variance(X), int(X.shape[1])
    X = np.asarray(X)
    return float(X.astype(np.float64, copy=False).var()), int(X.shape[1])


def scale_gamma(X) -> float:
    """``1 / (n_features · Var(X))`` for numpy, dask or store input (``1.0`` when ``Var(X) = 0``)."""
    var, n_features = _variance(X)
    if not np.isfinite(var) or var <= 0.0 or n_features == 0:
        return 1.0
    return 1.0 / (n_features * var)
