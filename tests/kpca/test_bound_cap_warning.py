"""BoundAtCapWarning: a bound-chosen size at the path's cap with the bound still falling."""

import warnings

import numpy as np
import pytest

from kmp_dask import KMPRegressor, SparseKernelPCA
from kmp_dask.exceptions import BoundAtCapWarning

X = np.random.default_rng(0).normal(size=(300, 5))


def test_kpca_bound_at_its_cap_warns_and_says_how_to_raise_it():
    with pytest.warns(BoundAtCapWarning, match=r"15 = max_components.*still falling.*max_components=30"):
        est = SparseKernelPCA(n_components="bound", max_components=15, random_state=0).fit(X)
    assert est.n_components_ == 15 and est.bound_path_[-1] < est.bound_path_[-2]  # the condition it reports


def test_kpca_bound_minimum_inside_the_path_is_silent():
    low = np.repeat(X[:6], 20, axis=0) + 1e-3 * np.random.default_rng(1).normal(size=(120, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoundAtCapWarning)
        est = SparseKernelPCA(n_components="bound", max_components=40, random_state=0).fit(low)
    assert est.n_components_ < 40 and int(np.argmin(est.bound_path_)) < len(est.bound_path_) - 1


def test_kmp_bound_at_n_basis_warns_and_a_longer_path_does_not():
    rng = np.random.default_rng(0)
    Xs = rng.uniform(-3, 3, size=(2000, 1))
    ys = np.sin(2 * Xs[:, 0]) + 0.02 * rng.normal(size=2000)
    with pytest.warns(BoundAtCapWarning, match=r"3 = n_basis.*still falling.*n_basis=6"):
        est = KMPRegressor(n_basis=3, stopping="bound", bound_threshold=0.1, random_state=0).fit(Xs, ys)
    assert est.n_basis_ == 3 and est.bound_path_[-1] < est.bound_path_[-2]
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoundAtCapWarning)
        longer = KMPRegressor(n_basis=12, stopping="bound", bound_threshold=0.1, random_state=0).fit(Xs, ys)
    assert int(np.argmin(longer.bound_path_)) < len(longer.bound_path_) - 1


def test_the_warning_is_kept_on_the_model_saved_and_shown_in_the_report(tmp_path):
    from kmp_dask.persist import load, save
    from kmp_dask.report import build_report

    with pytest.warns(BoundAtCapWarning):
        est = SparseKernelPCA(n_components="bound", max_components=15, random_state=0).fit(X)
    assert len(est.fit_warnings_) == 1 and est.fit_warnings_[0].startswith("BoundAtCapWarning: SparseKernelPCA")
    save(est, tmp_path / "k.model")
    back = load(tmp_path / "k.model")
    assert back.fit_warnings_ == est.fit_warnings_
    html = build_report({"kpca": back})
    assert "BoundAtCapWarning: SparseKernelPCA: the bound is smallest" in html
    quiet = SparseKernelPCA(n_components=5, random_state=0).fit(X)
    assert quiet.fit_warnings_ == []
