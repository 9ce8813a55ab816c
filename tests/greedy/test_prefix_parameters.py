"""The CV's prefix scorer read from the fit's prefix parameters equals the one built from
``expansion_at`` (one KernelExpansion per size), bit for bit."""

import numpy as np
import pytest

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.greedy._cv_path import prefix_scorer


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kind", ["clf3", "reg2"])
def test_prefix_parameters_match_expansion_at(kind, fit_intercept):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((150, 4))
    if kind == "clf3":
        est = KMPClassifier(n_basis=12, random_state=0, fit_intercept=fit_intercept)
        y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5])
    else:
        est = KMPRegressor(n_basis=12, random_state=0, fit_intercept=fit_intercept)
        y = np.c_[np.sin(X[:, 0]), X[:, 1] ** 2]
    est.fit(X, y)
    classes = getattr(est, "classes_", None)
    slow = prefix_scorer(est.expansion_, est.expansion_at, classes)
    fast = prefix_scorer(est.expansion_, est.expansion_at, classes, est._path.prefix_parameters)
    assert slow.A.shape[1] == (est.expansion_.n_vectors + 1) * est.expansion_.n_outputs
    assert np.any(slow.A != 0)
    np.testing.assert_array_equal(fast.A, slow.A)
    np.testing.assert_array_equal(fast.b, slow.b)
    Xh = rng.standard_normal((40, 4))
    yh = np.digitize(Xh[:, 0], [-0.5, 0.5]) if kind == "clf3" else np.c_[np.sin(Xh[:, 0]), Xh[:, 1] ** 2]
    np.testing.assert_array_equal(fast.stats(Xh, yh), slow.stats(Xh, yh))
