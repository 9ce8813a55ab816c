"""Staged predictions and prefix estimators: the k-th stage equals a model fitted with n_basis=k."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons

from kmp_dask import KMPClassifier, KMPRegressor

XM, YM = make_moons(300, noise=0.25, random_state=0)
XB, YB = make_blobs(300, centers=3, cluster_std=2.0, random_state=0)
RNG = np.random.default_rng(1)
XR = RNG.uniform(-2, 2, size=(300, 2))
YR = np.column_stack([np.sin(2 * XR[:, 0]), XR[:, 1] ** 2]) + 0.05 * RNG.normal(size=(300, 2))


@pytest.mark.parametrize("fit_mode", ["backfit", "prefit"])
@pytest.mark.parametrize("X, y", [(XM, YM), (XB, YB)], ids=["binary", "3 classes"])
def test_prefix_predicts_as_a_separately_fitted_classifier(X, y, fit_mode):
    full = KMPClassifier(n_basis=12, fit_mode=fit_mode, random_state=0).fit(X, y)
    for k in (1, 5, 12):
        alone = KMPClassifier(n_basis=k, fit_mode=fit_mode, random_state=0).fit(X, y)
        part = full.prefix(k)
        np.testing.assert_array_equal(part.basis_indices_, alone.basis_indices_)
        np.testing.assert_allclose(part.decision_function(X), alone.decision_function(X), rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(part.predict(X), alone.predict(X))
        assert part.n_basis_ == k and part.stop_reason_ == "prefix" and len(part.history_) == k
    assert full.n_basis_ == 12 and full.stop_reason_ != "prefix"  # the original is untouched


def test_prefix_regressor_multi_output_and_candidates_all():
    full = KMPRegressor(n_basis=10, candidates="all", random_state=0).fit(XR, YR)
    alone = KMPRegressor(n_basis=6, candidates="all", random_state=0).fit(XR, YR)
    np.testing.assert_allclose(full.prefix(6).predict(XR), alone.predict(XR), rtol=1e-9, atol=1e-9)
    assert full.prefix(6).score(XR, YR) == pytest.approx(alone.score(XR, YR), abs=1e-12)


def test_staged_outputs_are_the_prefix_models():
    clf = KMPClassifier(n_basis=9, random_state=0).fit(XB, YB)
    decisions = list(clf.staged_decision_function(XB))
    labels = list(clf.staged_predict(XB))
    assert len(decisions) == len(labels) == clf.n_basis_
    for k, (F, lab) in enumerate(zip(decisions, labels, strict=True), start=1):
        np.testing.assert_allclose(F, clf.prefix(k).decision_function(XB), rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(lab, clf.prefix(k).predict(XB))
    np.testing.assert_allclose(decisions[-1], clf.decision_function(XB), rtol=1e-10, atol=1e-10)
    reg = KMPRegressor(n_basis=5, random_state=0).fit(XR, YR[:, 0])
    stages = list(reg.staged_predict(XR))
    assert stages[0].shape == (300,)
    np.testing.assert_allclose(stages[-1], reg.predict(XR), rtol=1e-10, atol=1e-10)


def test_staged_on_a_dask_array_is_lazy_and_equal():
    import dask.array as da

    clf = KMPClassifier(n_basis=4, random_state=0).fit(XM, YM)
    lazy = list(clf.staged_decision_function(da.from_array(XM, chunks=(100, 2))))
    eager = list(clf.staged_decision_function(XM))
    assert all(hasattr(F, "dask") for F in lazy)
    for a, b in zip(lazy, eager, strict=True):
        np.testing.assert_allclose(a.compute(), b, rtol=1e-10, atol=1e-10)


def test_prefix_survives_save_and_load(tmp_path):
    from kmp_dask.persist import load, save

    clf = KMPClassifier(n_basis=8, random_state=0).fit(XM, YM)
    save(clf.prefix(3), tmp_path / "p.model")
    back = load(tmp_path / "p.model")
    np.testing.assert_array_equal(back.decision_function(XM), clf.prefix(3).decision_function(XM))
    assert back.n_basis_ == 3


def test_without_prefix_models_and_bad_k_the_errors_say_why():
    basic = KMPClassifier(n_basis=4, fit_mode="basic", random_state=0).fit(XM, YM)
    with pytest.raises(ValueError, match="fit_mode='backfit' or 'prefit'.*fit_mode='basic'"):
        next(basic.staged_predict(XM))
    with pytest.raises(ValueError, match="prefix"):
        basic.prefix(2)
    clf = KMPClassifier(n_basis=4, random_state=0).fit(XM, YM)
    for k in (0, 5, 2.0, True):
        with pytest.raises(ValueError, match=r"k must be an int in \[1, n_basis_=4\].*got"):
            clf.prefix(k)
