"""standardize="auto" | True | False for SparseKernelPCA and SparseKCCA, as KMP/CVM/MMDA.

Oracle: the same estimator with ``standardize=False`` fitted on the rows standardised by hand
(``(X − feature_mean_) / feature_scale_``, which equal scikit-learn's StandardScaler's mean_ /
scale_ to rounding) and transforming standardised rows.
"""

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.preprocessing import StandardScaler

from kmp_dask import SparseKCCA, SparseKernelPCA, load, save
from kmp_dask.exceptions import FeatureScaleWarning
from kmp_dask.store import create_store

RNG = np.random.default_rng(5)
SCALES = np.array([1.0, 300.0, 0.01, 5.0, 40.0])  # mixed: x2 is far below the RMS std
X_MIXED = RNG.normal(size=(300, 5)) * SCALES + np.array([0.0, 1000.0, -3.0, 2.0, 0.5])
Y_MIXED = np.column_stack([X_MIXED[:, 0] + RNG.normal(size=300), 200.0 * X_MIXED[:, 2] + RNG.normal(size=300),
                           0.001 * RNG.normal(size=300)])  # KCCA's second view: mixed scales too
X_SAME = RNG.normal(size=(250, 4)) * 3.0 + 1.0


def _by_hand(X, mean, scale):
    return (X - mean) / scale


def _kcca(**kw):
    return SparseKCCA(n_components=6, random_state=0, **kw)


def test_kpca_true_equals_fitting_on_standardised_rows():
    a = SparseKernelPCA(n_components=12, random_state=0, standardize=True).fit(X_MIXED)
    assert a.standardized_
    sc = StandardScaler().fit(X_MIXED)
    np.testing.assert_allclose(a.feature_mean_, sc.mean_, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(a.feature_scale_, sc.scale_, rtol=1e-11)
    Z = _by_hand(X_MIXED, a.feature_mean_, a.feature_scale_)
    b = SparseKernelPCA(n_components=12, random_state=0, standardize=False).fit(Z)
    np.testing.assert_array_equal(a.components_index_, b.components_index_)
    np.testing.assert_allclose(a.transform(X_MIXED), b.transform(Z), rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.basis_vectors_, Z[a.components_index_], rtol=0, atol=1e-12)  # standardised rows


def test_kcca_true_equals_fitting_on_standardised_views():
    a = _kcca(standardize=True).fit(X_MIXED, Y_MIXED)
    assert a.standardized_x_ and a.standardized_y_
    for view, A in (("x", X_MIXED), ("y", Y_MIXED)):
        sc = StandardScaler().fit(A)
        np.testing.assert_allclose(getattr(a, f"feature_mean_{view}_"), sc.mean_, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(getattr(a, f"feature_scale_{view}_"), sc.scale_, rtol=1e-11)
    Zx = _by_hand(X_MIXED, a.feature_mean_x_, a.feature_scale_x_)
    Zy = _by_hand(Y_MIXED, a.feature_mean_y_, a.feature_scale_y_)
    b = _kcca(standardize=False).fit(Zx, Zy)
    np.testing.assert_array_equal(a.components_index_, b.components_index_)
    np.testing.assert_allclose(a.correlations_, b.correlations_, rtol=0, atol=1e-10)
    for fa, fb in zip(a.transform(X_MIXED, Y_MIXED), b.transform(Zx, Zy), strict=True):
        np.testing.assert_allclose(fa, fb, rtol=0, atol=1e-10)
    # Theorem 4's bound takes the raw training view and equals the one on standardised rows
    assert a.bound(X_MIXED, Y_MIXED, 0.5) == pytest.approx(b.bound(Zx, Zy, 0.5), rel=1e-9)


def test_auto_standardises_mixed_scales_without_the_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        kpca = SparseKernelPCA(n_components=8, random_state=0).fit(X_MIXED)
        kcca = _kcca().fit(X_MIXED, Y_MIXED)
    assert kpca.standardize == "auto" and kpca.standardized_
    assert kpca.kernel_.get("gamma") == pytest.approx(1.0 / X_MIXED.shape[1], rel=1e-9)  # "scale" on standardised rows
    assert kcca.standardized_x_ and kcca.standardized_y_
    with pytest.warns(FeatureScaleWarning, match="standardize='auto'"):
        raw = SparseKernelPCA(n_components=8, random_state=0, standardize=False).fit(X_MIXED)
    assert not raw.standardized_ and not hasattr(raw, "feature_mean_") and raw.expansion_.input_scale is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raw = _kcca(standardize=False).fit(X_MIXED, Y_MIXED)
    said = [str(w.message) for w in caught if issubclass(w.category, FeatureScaleWarning)]
    assert len(said) == 2 and "gamma_x='scale'" in said[0] and "gamma_y='scale'" in said[1], said
    assert not raw.standardized_x_ and raw.expansion_x_.input_scale is None


def test_auto_decides_view_by_view_and_leaves_numeric_widths_alone():
    kcca = _kcca().fit(X_MIXED, X_MIXED[:, [0, 3]])  # Y on one scale: only X is standardised
    assert kcca.standardized_x_ and not kcca.standardized_y_ and not hasattr(kcca, "feature_mean_y_")
    assert kcca.expansion_y_.input_scale is None and kcca.expansion_x_.input_scale is not None
    kcca = _kcca(gamma_x=0.1).fit(X_MIXED, Y_MIXED)  # a width the user chose for the raw rows of X
    assert not kcca.standardized_x_ and kcca.standardized_y_
    kpca = SparseKernelPCA(n_components=5, gamma=1e-4, random_state=0).fit(X_MIXED)
    assert not kpca.standardized_


def test_auto_is_bit_identical_on_same_scale_data():
    auto = SparseKernelPCA(n_components=10, random_state=0).fit(X_SAME)
    off = SparseKernelPCA(n_components=10, random_state=0, standardize=False).fit(X_SAME)
    assert not auto.standardized_ and auto.expansion_.input_scale is None
    np.testing.assert_array_equal(auto.expansion_.support_vectors, off.expansion_.support_vectors)
    np.testing.assert_array_equal(auto.expansion_.coef, off.expansion_.coef)
    np.testing.assert_array_equal(auto.transform(X_SAME), off.transform(X_SAME))
    Y = X_SAME[:, :2] ** 2
    auto = _kcca().fit(X_SAME, Y)
    off = _kcca(standardize=False).fit(X_SAME, Y)
    assert not (auto.standardized_x_ or auto.standardized_y_)
    np.testing.assert_array_equal(auto.correlations_, off.correlations_)
    for fa, fb in zip(auto.transform(X_SAME, Y), off.transform(X_SAME, Y), strict=True):
        np.testing.assert_array_equal(fa, fb)


def test_kpca_store_input_equals_numpy_input(tmp_path):
    """Moments from the store's attributes (no pass), rows standardised as partitions load: the
    same model as numpy input whatever the chunking; transform on the raw store equals numpy."""
    ref = SparseKernelPCA(n_components=10, random_state=0, standardize=True).fit(X_MIXED)
    for chunk in (64, 150):
        path = tmp_path / f"s{chunk}.zarr"
        create_store(path, X_MIXED, chunk_rows=chunk)
        est = SparseKernelPCA(n_components=10, random_state=0, chunk_rows=chunk, client="sync").fit(str(path))
        assert est.standardized_  # "auto" on the store's own std attribute
        np.testing.assert_allclose(est.feature_mean_, ref.feature_mean_, rtol=1e-12)
        np.testing.assert_allclose(est.feature_scale_, ref.feature_scale_, rtol=1e-12)
        np.testing.assert_array_equal(est.components_index_, ref.components_index_)
        np.testing.assert_allclose(est.transform(X_MIXED), ref.transform(X_MIXED), rtol=0, atol=1e-8)
        np.testing.assert_allclose(np.asarray(est.transform(str(path)).compute()), est.transform(X_MIXED),
                                   rtol=0, atol=1e-12)


def test_saved_models_transform_raw_rows(tmp_path):
    kpca = SparseKernelPCA(n_components=8, random_state=0).fit(X_MIXED)
    kcca = _kcca().fit(X_MIXED, Y_MIXED)
    for name, est in (("kpca", kpca), ("kcca", kcca)):
        save(est, tmp_path / name)
        back = load(tmp_path / name)
        assert back.get_params() == est.get_params()
        if name == "kpca":
            assert back.standardized_
            np.testing.assert_array_equal(back.feature_scale_, est.feature_scale_)
            np.testing.assert_array_equal(back.transform(X_MIXED), est.transform(X_MIXED))
        else:
            assert back.standardized_x_ and back.standardized_y_
            for fa, fb in zip(back.transform(X_MIXED, Y_MIXED), est.transform(X_MIXED, Y_MIXED), strict=True):
                np.testing.assert_array_equal(fa, fb)


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.FeatureScaleWarning")
def test_models_saved_before_standardize_still_load(tmp_path):
    """A model file written before the parameter existed (no ``standardize``, no ``standardized_``,
    an expansion without an input transform) loads and transforms as it did."""
    for name, est in (("kpca", SparseKernelPCA(n_components=6, random_state=0, standardize=False).fit(X_MIXED)),
                      ("kcca", _kcca(standardize=False).fit(X_MIXED, Y_MIXED))):
        save(est, tmp_path / name)
        meta = tmp_path / name / "model.json"
        doc = json.loads(meta.read_text())
        doc["state"] = {k: v for k, v in doc["state"].items() if "standardiz" not in k}
        meta.write_text(json.dumps(doc))
        back = load(tmp_path / name)
        assert back.get_params()["standardize"] == "auto"  # a parameter the file predates: its default
        assert not hasattr(back, "standardized_")
        np.testing.assert_array_equal(back.transform(X_MIXED), est.transform(X_MIXED))
        if name == "kcca":
            assert back.bound(X_MIXED, Y_MIXED, 0.5) == est.bound(X_MIXED, Y_MIXED, 0.5)


def test_bad_value_is_named():
    with pytest.raises(ValueError, match="standardize must be 'auto'.*got 'yes'"):
        SparseKernelPCA(standardize="yes").fit(X_SAME)
    with pytest.raises(ValueError, match="standardize must be 'auto'.*got None"):
        SparseKCCA(standardize=None).fit(X_SAME, X_SAME)


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.FeatureScaleWarning")  # --standardize no: the old warning
@pytest.mark.parametrize("flag, expect", [(None, True), ("yes", True), ("no", False)])
def test_cli_train_skpca_standardize_flag(tmp_path, flag, expect):
    from kmp_dask.cli import main

    create_store(tmp_path / "train.zarr", X_MIXED, (X_MIXED[:, 0] > 0).astype(int), classes=["a", "b"],
                 chunk_rows=100)
    extra = [] if flag is None else ["--standardize", flag]
    r = CliRunner().invoke(main, [str(a) for a in (
        "train", tmp_path / "train.zarr", "--model", tmp_path / "m", "--algorithm", "skpca", "--n-components", 6,
        "--random-state", 0, "--scheduler", "sync", "--quiet", "--force", *extra)])
    assert r.exit_code == 0, r.output
    saved = load(tmp_path / "m")
    assert saved.standardized_ is expect
    ref = SparseKernelPCA(n_components=6, random_state=0, standardize=expect, client="sync").fit(
        str(tmp_path / "train.zarr"))
    np.testing.assert_array_equal(saved.transform(X_MIXED), ref.transform(X_MIXED))
