"""Bounds as stopping rules: sparse KPCA's compression bound picks the dimension, the
KMP bound picks the basis size, each at the minimum of the path it records."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_friedman1

from kmp_dask import KMPClassifier, KMPRegressor, SparseKernelPCA
from kmp_dask.bounds import kmp_bound_from_count, kpca_compression_bound


def test_kpca_bound_picks_a_dimension_near_the_true_one():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(600, 120))
    X[:, :20] *= 10  # 20 directions with 100× the variance of the other 100
    est = SparseKernelPCA("bound", kernel="linear", max_components=60).fit(X)
    assert est.stop_reason_ == "bound"
    assert est.n_components_ == int(np.argmin(est.bound_path_))
    assert 16 <= est.n_components_ <= 30, est.n_components_
    assert est.transform(X).shape == (600, est.n_components_)


def test_kpca_bound_path_is_corollary_1_from_the_trace():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    est = SparseKernelPCA("bound", gamma=0.3, max_components=30).fit(X)
    full = SparseKernelPCA(30, gamma=0.3).fit(X)
    trace = full.trace_residual_path_
    for k in (0, 5, 17):
        # the points outside the compression set: their residuals average tr(K − K̃_k)/(m − k)
        residuals = np.full(200 - k, trace[k] / (200 - k))
        assert est.bound_path_[k] == pytest.approx(kpca_compression_bound(residuals, k, 200, 1.0), rel=1e-12)


def test_kmp_bound_stopping_cuts_the_path_at_the_bound_minimum():
    X, y = make_friedman1(800, noise=1.0, random_state=0)
    est = KMPRegressor(n_basis=50, gamma=0.1, candidates="all", stopping="bound", bound_threshold=2.0,
                       random_state=0).fit(X, y)
    full = KMPRegressor(n_basis=50, gamma=0.1, candidates="all", random_state=0).fit(X, y)
    k = est.n_basis_
    assert k == int(np.argmin(est.bound_path_)) and 0 < k < 50
    t = int(np.sum(np.abs(full.expansion_at(k).decision_function(X)[:, 0] - y) > 2.0))
    assert est.bound_errors_[k] == t  # the engine's count equals the prefix model's errors
    assert est.bound_path_[k] == pytest.approx(kmp_bound_from_count(min(t, 800 - k), k, 800, 0.05))
    np.testing.assert_allclose(est.predict(X), full.expansion_at(k).decision_function(X)[:, 0], rtol=1e-12)


def test_kmp_bound_stopping_for_a_classifier_counts_wrong_signs():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    est = KMPClassifier(n_basis=40, gamma=1.0, candidates="all", stopping="bound", random_state=0).fit(X, y)
    assert 0 < est.n_basis_ <= 40 and len(est.bound_path_) >= est.n_basis_
    assert est.score(X, y) > 0.85


@pytest.mark.parametrize("params, match", [
    ({"stopping": "bound"}, "needs bound_threshold"),
    ({"stopping": "bound", "bound_threshold": 1.0, "fit_mode": "basic"}, "needs loss='squared' with fit_mode"),
    ({"stopping": "bound", "bound_threshold": 1.0, "loss": "huber"}, "needs loss='squared'"),
    ({"stopping": "bound", "bound_threshold": -1.0}, "bound_threshold must be"),
    ({"stopping": "bound", "bound_threshold": 1.0, "bound_delta": 1.5}, "bound_delta must be"),
    ({"stopping": "validation"}, "stopping must be"),
])
def test_bound_parameters_outside_their_domain_are_named(params, match):
    X, y = make_friedman1(100, random_state=0)
    with pytest.raises(ValueError, match=match):
        KMPRegressor(n_basis=5, **params).fit(X, y)


def test_kpca_bound_parameters_are_named():
    with pytest.raises(ValueError, match="bound_delta must be"):
        SparseKernelPCA("bound", bound_delta=0).fit(np.ones((10, 2)))
    with pytest.raises(ValueError, match="n_components must be an int >= 1 or 'bound'"):
        SparseKernelPCA("auto").fit(np.ones((10, 2)))
