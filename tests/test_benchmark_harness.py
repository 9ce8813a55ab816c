"""benchmarks/_harness.py: prefix models from the estimator's own ``expansion_at`` equal a dense
least-squares reference, and the reconstruction guard fails a benchmark above 1e-6."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _harness as H  # noqa: E402

from kmp_dask import KMPClassifier, KMPRegressor  # noqa: E402

RIDGE = 1e-8


def _data(n=90, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1] ** 2, [-0.3, 0.6])  # three classes
    return X, y


def _dense_prefix(K, T, k, lam):
    """Ridge least squares of T on [1, K[:, :k]] (λ on every column, as the driver's Gram)."""
    B = np.hstack([np.ones((len(K), 1)), K[:, :k]])
    c = np.linalg.solve(B.T @ B + lam * np.eye(k + 1), B.T @ T)
    return c[1:], c[0]


@pytest.mark.parametrize("fit_mode", ["backfit", "prefit"])
def test_prefix_models_match_dense_least_squares(fit_mode):
    X, y = _data()
    Xe, _ = _data(40, seed=1)
    est = KMPClassifier(gamma=0.7, n_basis=10, fit_mode=fit_mode, candidates="all", ridge=RIDGE,
                        random_state=0, client="sync").fit(X, y)
    T = H.ovr_targets(y, est.classes_)
    K_tr = est.expansion_.kernel_matrix(X)
    K_e = est.expansion_.kernel_matrix(Xe)
    pm = H.PrefixModels(est, Xe)
    for k in (0, 1, 4, 10):
        coef, intercept = _dense_prefix(K_tr, T, k, RIDGE * len(X))
        np.testing.assert_allclose(pm.expansion(k).coef, coef, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(pm.decision(k), K_e[:, :k] @ coef + intercept, rtol=0, atol=1e-8)
    # sizes past the fit give the full model; errors are those of the decided labels
    np.testing.assert_array_equal(pm.decision(50), pm.decision(est.n_basis_))
    err = pm.errors(_data(40, seed=1)[1], [10])[0]
    assert err == pytest.approx(np.mean(est.predict(Xe) != _data(40, seed=1)[1]))
    rec = pm.check()
    assert rec["recon_max_abs_diff"] <= 1e-10 and rec["recon_pred_agreement"] == 1.0


def test_prefix_models_regressor_and_separate_fit():
    X, _ = _data()
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1]
    big = KMPRegressor(gamma=0.5, n_basis=8, candidates=20, ridge=RIDGE, random_state=3, client="sync").fit(X, y)
    small = KMPRegressor(gamma=0.5, n_basis=5, candidates=20, ridge=RIDGE, random_state=3, client="sync").fit(X, y)
    assert H.PrefixModels(big, X).check()["recon_max_abs_diff"] <= 1e-10
    sep = H.prefix_vs_separate_fit(big, small, X)
    assert sep["same_selection"] and sep["max_abs_decision_diff"] <= 1e-10


def test_reconstruction_guard_raises_above_tolerance():
    F = np.zeros((5, 2))
    assert H.require_reconstruction(F, F + 0.9e-6) == pytest.approx(0.9e-6)
    with pytest.raises(H.ReconstructionError, match="exceeds|> tolerance"):
        H.require_reconstruction(F, F + 1.1e-6)
    with pytest.raises(H.ReconstructionError):
        H.require_reconstruction(F, np.full((5, 2), np.nan))
    with pytest.raises(H.ReconstructionError):
        H.require_reconstruction(F, np.zeros((5, 1)))


def test_prefix_check_fails_when_the_model_is_not_the_estimators():
    X, y = _data()
    est = KMPClassifier(gamma=0.7, n_basis=6, candidates="all", ridge=RIDGE, random_state=0, client="sync").fit(X, y)
    pm = H.PrefixModels(est, X)
    pm.K[:, -1] *= 1.0 + 1e-3  # a drifted rebuild: one kernel column off by 0.1 %
    with pytest.raises(H.ReconstructionError):
        pm.check()
