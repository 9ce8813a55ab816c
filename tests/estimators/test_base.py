"""The shared fit / predict skeleton (kmp_dask/estimators/_base.py), against dense numpy oracles."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask import CVMClassifier, KMPClassifier, KMPRegressor, SparseKernelPCA
from kmp_dask.estimators._base import ExpansionEstimatorMixin, class_codes, take_labels
from kmp_dask.expansion import KernelExpansion
from kmp_dask.kernels import get_kernel
from kmp_dask.store import InMemoryStore


class _MeanDirection(ExpansionEstimatorMixin, BaseEstimator):
    """A toy family on the skeleton: f(x) = ⟨x, mean of the fit's rows⟩ (a linear-kernel expansion
    over one vector); records the order in which the skeleton calls its hooks."""

    def __init__(self, scale=1.0, standardize=False, gamma=None, random_state=0, chunk_rows=None):
        self.scale = scale
        self.standardize = standardize
        self.gamma = gamma
        self.random_state = random_state
        self.chunk_rows = chunk_rows

    def fit(self, X, y=None, **kw):
        self.calls_ = []
        return self._fit_skeleton(X, y, **kw)

    def _check_params(self):
        self.calls_.append("check")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0; got {self.scale!r}")

    def _fit_input(self, X, y):
        from kmp_dask.estimators._inputs import unsupervised_input

        self.calls_.append("input")
        return unsupervised_input(self, X, chunk_rows=self.chunk_rows)

    def _run_loop(self, run):
        self.calls_.append("loop")
        rows, _ = run.store.read_rows(np.arange(run.store.n_rows))
        return np.asarray(rows, dtype=np.float64).mean(axis=0), run

    def _finish_fit(self, out, run):
        self.calls_.append("finish")
        mean, seen = out
        assert seen is run
        self.expansion_ = KernelExpansion(mean[None, :], [self.scale], 0.0, get_kernel("linear"))
        return self


def _data(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(40, d))


def test_skeleton_order_and_oracle():
    X, Xt = _data()
    est = _MeanDirection(scale=2.0).fit(X)
    assert est.calls_ == ["check", "input", "loop", "finish"]
    assert est.n_features_in_ == 3 and est.standardized_ is False
    want = 2.0 * Xt @ X.mean(axis=0)  # dense oracle
    np.testing.assert_allclose(est._decision(Xt)[:, 0], want, rtol=1e-12, atol=1e-12)
    lazy = est._decision(da.from_array(Xt, chunks=(15, 3)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute()[:, 0], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(est._decision(InMemoryStore(Xt, chunk_rows=16)).compute()[:, 0], want,
                               rtol=1e-12, atol=1e-12)


def test_skeleton_validates_before_the_input():
    X, _ = _data()
    est = _MeanDirection(scale=-1.0)
    with pytest.raises(ValueError, match=r"scale must be > 0; got -1\.0"):
        est.fit(X)
    assert est.calls_ == ["check"]  # nothing resolved, no engine


def test_skeleton_checks_weights_and_predict_features():
    X, Xt = _data()
    with pytest.raises(ValueError, match="sample_weight must have shape"):
        _MeanDirection().fit(X, sample_weight=np.ones(3))
    est = _MeanDirection().fit(X)
    with pytest.raises(ValueError, match="features"):
        est._decision(Xt[:, :2])  # predict step 2: the fit's feature count
    with pytest.raises(Exception, match="not fitted"):
        _MeanDirection()._decision(Xt)


def test_skeleton_standardizes_the_rows_the_loop_sees():
    X, Xt = _data()
    X = X * np.array([1.0, 100.0, 0.01]) + 5.0
    est = _MeanDirection(standardize=True).fit(X)
    assert est.standardized_ is True
    Z = (X - est.feature_mean_) / est.feature_scale_
    np.testing.assert_allclose(est.expansion_.support_vectors[0], Z.mean(axis=0), atol=1e-12)


def test_labels_from_decision_oracle():
    rng = np.random.default_rng(1)
    classes = np.array(["a", "b", "c"])
    F = rng.normal(size=(50, 3))
    np.testing.assert_array_equal(take_labels(class_codes(F), classes), classes[np.argmax(F, axis=1)])
    F1 = rng.normal(size=(50, 1))
    np.testing.assert_array_equal(take_labels(class_codes(F1), classes[:2]), np.where(F1[:, 0] > 0, "b", "a"))


@pytest.mark.parametrize("make", [
    lambda: KMPClassifier(n_basis=8, gamma=0.5, standardize=False, random_state=0),
    lambda: CVMClassifier(gamma=0.5, standardize=False, random_state=0),
], ids=["kmp", "cvm"])
def test_classifiers_predict_through_the_dispatch(make):
    from sklearn.datasets import make_blobs

    X, y = make_blobs(150, centers=3, random_state=0)
    est = make().fit(X, y)
    exp = est.expansion_
    F = rbf_kernel(X, exp.support_vectors, gamma=0.5) @ exp.coef + exp.intercept  # dense oracle
    np.testing.assert_allclose(est.decision_function(X), F, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(F, axis=1)])
    dask_labels = est.predict(da.from_array(X, chunks=(40, 2)))
    np.testing.assert_array_equal(np.asarray(getattr(dask_labels, "compute", lambda: dask_labels)()),
                                  est.classes_[np.argmax(F, axis=1)])


def test_regressor_and_transformer_through_the_dispatch():
    X, Xt = _data()
    y = np.sin(X[:, 0])
    reg = KMPRegressor(n_basis=6, gamma=0.5, standardize=False, random_state=0).fit(X, y)
    e = reg.expansion_
    np.testing.assert_allclose(reg.predict(Xt), (rbf_kernel(Xt, e.support_vectors, gamma=0.5) @ e.coef)[:, 0]
                               + e.intercept[0], rtol=1e-10, atol=1e-10)
    kpca = SparseKernelPCA(4, gamma=0.5, standardize=False, random_state=0).fit(X)
    e = kpca.expansion_
    want = rbf_kernel(Xt, e.support_vectors, gamma=0.5) @ e.coef + e.intercept
    np.testing.assert_allclose(kpca.transform(Xt), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(kpca.transform(da.from_array(Xt, chunks=(10, 3))).compute(), want,
                               rtol=1e-10, atol=1e-10)
