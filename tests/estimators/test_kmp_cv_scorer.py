"""The CV's prefix scorer from the Gram factor (one product per row block for every size) against
the models of every size built one by one (``expansion_at(k)``, the fit's own per-size solve),
evaluated densely on held-out rows."""

import numpy as np
import pytest

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.greedy._cv_path import factor_prefix_scorer


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kind", ["clf2", "clf3", "reg2"])
def test_factor_scorer_values_are_every_prefix_model(kind, fit_intercept):
    rng = np.random.default_rng(1)
    X, Xh = rng.standard_normal((300, 3)), rng.standard_normal((120, 3))
    if kind == "reg2":
        target = lambda A: np.c_[np.sin(A[:, 0]), A[:, 1] ** 2]
        est = KMPRegressor(n_basis=40, random_state=0, fit_intercept=fit_intercept, client="sync")
    else:
        cuts = [0.0] if kind == "clf2" else [-0.5, 0.5]
        target = lambda A: np.digitize(A[:, 0] + 0.3 * A[:, 1], cuts)
        est = KMPClassifier(n_basis=40, random_state=0, fit_intercept=fit_intercept, client="sync")
    est.fit(X, target(X))
    n = est.expansion_.n_vectors
    assert n >= 30
    sc = factor_prefix_scorer(est.expansion_, est._path, getattr(est, "classes_", None))
    F = sc._values(Xh)
    assert F.shape == (len(Xh), n + 1, est.expansion_.n_outputs)
    for k in range(n + 1):  # the oracle: the k-atom model, evaluated on its own
        e = est.expansion_at(k)
        m = F.shape[2]
        dense = (e.kernel_matrix(Xh) @ np.reshape(e.coef, (k, m)) if k else np.zeros((len(Xh), m))) + e.intercept
        np.testing.assert_allclose(F[:, k], dense, rtol=1e-7, atol=1e-8)
    yh = target(Xh)
    s = sc.scores(sc.stats(Xh, yh))
    if kind == "reg2":  # R² of each size, averaged over the outputs
        r2 = [np.mean(1 - ((F[:, k] - yh) ** 2).sum(0) / ((yh - yh.mean(0)) ** 2).sum(0)) for k in range(n + 1)]
        np.testing.assert_allclose(s, r2, rtol=1e-9, atol=1e-12)
    else:
        pred = est.classes_[(F[..., 0] > 0).astype(int)] if F.shape[2] == 1 else est.classes_[F.argmax(axis=2)]
        np.testing.assert_array_equal(s, (pred == yh[:, None]).mean(axis=0))
        assert s[-1] == est.score(Xh, yh)  # the last size is the fitted model
