"""gamma="scale" (the default): 1 / (n_features · Var(X)) from the training rows,
the same for numpy, dask and store input; gamma=None and explicit numbers unchanged."""

import warnings

import numpy as np
import pytest

from kmp_dask import (
    MMDA,
    CVMClassifier,
    KMPClassifier,
    KMPRegressor,
    SparseKCCA,
    SparseKernelPCA,
)
from kmp_dask.estimators._scale import SCALE_DIGITS, scale_gamma
from kmp_dask.exceptions import FeatureScaleWarning, KernelWidthWarning
from kmp_dask.store import create_store

RNG = np.random.default_rng(0)
X = RNG.normal(scale=40.0, size=(240, 4)) + 5.0  # raw features at std 40: 1/n_features is far too narrow
Y_REG = np.sin(X[:, 0] / 40.0) + 0.1 * RNG.normal(size=240)
Y_CLS = (X[:, 0] * X[:, 1] > 0).astype(int)


def _sklearn_scale(A, kernel="rbf"):
    var = np.asarray(A, dtype=np.float64).var()  # scikit-learn's SVC(gamma="scale") uses X.var()
    return 1.0 / (A.shape[1] * (np.sqrt(var) if kernel == "laplacian" else var))


def test_default_is_scale_and_matches_sklearns_formula():
    est = KMPRegressor(n_basis=5, random_state=0).fit(X, Y_REG)
    assert KMPRegressor().gamma == "scale"
    assert est.kernel_.get("gamma") == pytest.approx(_sklearn_scale(X), rel=10.0 ** (1 - SCALE_DIGITS))


def test_laplacian_scale_uses_the_standard_deviation():
    est = KMPRegressor(kernel="laplacian", n_basis=5, random_state=0).fit(X, Y_REG)
    assert est.kernel_.get("gamma") == pytest.approx(_sklearn_scale(X, "laplacian"), rel=1e-11)


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.KernelWidthWarning")
def test_none_and_explicit_numbers_are_unchanged():
    old = KMPRegressor(gamma=None, n_basis=8, random_state=0).fit(X, Y_REG)
    explicit = KMPRegressor(gamma=0.25, n_basis=8, random_state=0).fit(X, Y_REG)
    assert old.kernel_.get("gamma") == 0.25 and explicit.kernel_.get("gamma") == 0.25
    np.testing.assert_array_equal(old.dual_coef_, explicit.dual_coef_)
    np.testing.assert_array_equal(old.basis_indices_, explicit.basis_indices_)


def test_scale_equals_the_same_explicit_number():
    est = KMPClassifier(n_basis=10, random_state=0).fit(X, Y_CLS)
    same = KMPClassifier(gamma=est.kernel_.get("gamma"), n_basis=10, random_state=0).fit(X, Y_CLS)
    np.testing.assert_array_equal(est.decision_function(X), same.decision_function(X))


def test_scale_fixes_raw_features_where_one_over_n_features_memorises():
    Xtr, Xte, ytr, yte = X[:160], X[160:], Y_CLS[:160], Y_CLS[160:]
    new = KMPClassifier(n_basis=20, random_state=0).fit(Xtr, ytr).score(Xte, yte)
    with pytest.warns(KernelWidthWarning):  # the width check flags 1 / n_features on these raw rows
        old = KMPClassifier(n_basis=20, gamma=None, random_state=0).fit(Xtr, ytr).score(Xte, yte)
    assert new > old + 0.1


def test_same_width_from_a_store_and_a_dask_array(tmp_path):
    import dask.array as da

    ref = scale_gamma(X)
    store = create_store(tmp_path / "s.zarr", X, Y_REG, chunk_rows=70)
    assert scale_gamma(store) == ref
    assert scale_gamma(da.from_array(X, chunks=(50, 4))) == ref
    a = KMPRegressor(n_basis=6, random_state=0, client="sync").fit(store.url)
    b = KMPRegressor(n_basis=6, random_state=0).fit(X, Y_REG)
    assert a.kernel_ == b.kernel_


def test_sample_weight_counts_rows_as_repeats():
    w = np.where(np.arange(len(X)) % 3 == 0, 2.0, 1.0)
    repeated = np.repeat(X, w.astype(int), axis=0)
    assert scale_gamma(X, sample_weight=w) == pytest.approx(scale_gamma(repeated), rel=1e-11)
    est = KMPRegressor(n_basis=4, random_state=0).fit(X, Y_REG, sample_weight=w)
    assert est.kernel_.get("gamma") == pytest.approx(scale_gamma(repeated), rel=1e-11)


def test_a_list_may_hold_scale():
    est = KMPRegressor(gamma=["scale", 1.0], n_basis=4, random_state=0).fit(X, Y_REG)
    assert [k.get("gamma") for k in est.kernels_] == [scale_gamma(X), 1.0]


@pytest.mark.parametrize("make", [lambda g: KMPRegressor(gamma=g), lambda g: CVMClassifier(gamma=g),
                                  lambda g: SparseKernelPCA(gamma=g)])
def test_unknown_string_names_the_argument(make):
    with pytest.raises(ValueError, match=r"gamma must be 'scale'.*got 'auto'"):
        make("auto").fit(X, Y_CLS)


def test_cvm_mmda_kpca_kcca_default_to_scale():
    g = scale_gamma(X)
    assert CVMClassifier(random_state=0).fit(X[:120], Y_CLS[:120]).kernel_.get("gamma") == pytest.approx(
        scale_gamma(X[:120]), rel=1e-11)
    assert MMDA(n_components=1, random_state=0).fit(X[:120], Y_CLS[:120]).kernel_.get("gamma") == pytest.approx(
        scale_gamma(X[:120]), rel=1e-11)
    assert SparseKernelPCA(n_components=5).fit(X).kernel_.get("gamma") == pytest.approx(g, rel=1e-11)
    kcca = SparseKCCA(n_components=4).fit(X[:, :2], X[:, 2:] * 100.0)
    assert kcca.expansion_x_.kernels[0].get("gamma") == pytest.approx(scale_gamma(X[:, :2]), rel=1e-11)
    assert kcca.expansion_y_.kernels[0].get("gamma") == pytest.approx(scale_gamma(X[:, 2:] * 100.0), rel=1e-11)


def test_mixed_feature_scales_warn_and_name_the_small_features():
    Z = X * np.array([1000.0, 1.0, 1.0, 1.0])
    with pytest.warns(FeatureScaleWarning, match=r"3 of 4 features.*x1 \(std.*Standardise"):
        KMPRegressor(n_basis=4, random_state=0, standardize=False).fit(Z, Y_REG)  # "auto" standardises instead
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        assert KMPRegressor(n_basis=4, random_state=0).fit(Z, Y_REG).standardized_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelWidthWarning)
        warnings.simplefilter("error", FeatureScaleWarning)
        KMPRegressor(n_basis=4, gamma=None, random_state=0).fit(Z, Y_REG)  # no "scale": no such warning
    KMPRegressor(n_basis=4, random_state=0).fit(X, Y_REG)  # comparable scales: silent
