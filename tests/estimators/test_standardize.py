"""standardize="auto" | True | False: standardisation carried inside the fitted model.

Oracle: the same estimator with ``standardize=False`` fitted on the rows standardised by hand
(``(X − feature_mean_) / feature_scale_``; those equal scikit-learn's StandardScaler's mean_ /
scale_ to rounding) and predicting on standardised rows.
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from kmp_dask import MMDA, CVMClassifier, KernelExpansion, KMPClassifier, KMPRegressor, load, save
from kmp_dask.exceptions import FeatureScaleWarning
from kmp_dask.store import AffineStore, InMemoryStore, create_store

RNG = np.random.default_rng(3)
SCALES = np.array([1.0, 300.0, 0.01, 5.0, 40.0])  # mixed: x2 is far below the RMS std
X_MIXED = RNG.normal(size=(400, 5)) * SCALES + np.array([0.0, 1000.0, -3.0, 2.0, 0.5])
Y_MIXED = (X_MIXED[:, 0] + (X_MIXED[:, 2] + 3.0) * 100 > 0).astype(int)
X_SAME = RNG.normal(size=(300, 4)) * 3.0 + 1.0
Y_SAME = (X_SAME[:, 0] * X_SAME[:, 1] > 0).astype(int)


def _by_hand(est, X):
    return (X - est.feature_mean_) / est.feature_scale_


def _same(est, **params):
    return type(est)(**{**est.get_params(), **params})


@pytest.mark.parametrize("est", [KMPClassifier(n_basis=25, random_state=0), CVMClassifier(random_state=0),
                                 KMPRegressor(n_basis=20, random_state=0), MMDA(n_components=1, random_state=0)],
                         ids=lambda e: type(e).__name__)
def test_true_equals_fitting_on_standardised_rows(est):
    y = Y_MIXED if not isinstance(est, KMPRegressor) else X_MIXED[:, 0] + 50 * (X_MIXED[:, 2] + 3.0)
    a = _same(est, standardize=True).fit(X_MIXED, y)
    assert a.standardized_
    sc = StandardScaler().fit(X_MIXED)
    np.testing.assert_allclose(a.feature_mean_, sc.mean_, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(a.feature_scale_, sc.scale_, rtol=1e-11)
    b = _same(est, standardize=False).fit(_by_hand(a, X_MIXED), y)
    out = {MMDA: "transform", KMPRegressor: "predict"}.get(type(est), "decision_function")
    np.testing.assert_allclose(getattr(a, out)(X_MIXED), getattr(b, out)(_by_hand(a, X_MIXED)), rtol=0, atol=1e-10)
    if not isinstance(est, MMDA):
        np.testing.assert_array_equal(a.predict(X_MIXED), b.predict(_by_hand(a, X_MIXED)))


def test_auto_standardises_mixed_scales_without_the_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        est = KMPClassifier(n_basis=20, random_state=0).fit(X_MIXED, Y_MIXED)
    assert est.standardize == "auto" and est.standardized_
    with pytest.warns(FeatureScaleWarning):
        raw = KMPClassifier(n_basis=20, random_state=0, standardize=False).fit(X_MIXED, Y_MIXED)
    assert not raw.standardized_ and not hasattr(raw, "feature_mean_")
    assert raw.expansion_.input_scale is None


@pytest.mark.parametrize("cls", [KMPClassifier, CVMClassifier])
def test_auto_does_nothing_on_same_scale_data(cls):
    kw = {"n_basis": 15} if cls is KMPClassifier else {}
    auto = cls(random_state=0, **kw).fit(X_SAME, Y_SAME)
    off = cls(random_state=0, standardize=False, **kw).fit(X_SAME, Y_SAME)
    assert not auto.standardized_ and auto.expansion_.input_scale is None
    np.testing.assert_array_equal(auto.expansion_.support_vectors, off.expansion_.support_vectors)
    np.testing.assert_array_equal(auto.expansion_.coef, off.expansion_.coef)
    np.testing.assert_array_equal(auto.decision_function(X_SAME), off.decision_function(X_SAME))


def test_scale_width_is_computed_on_the_standardised_rows():
    est = KMPClassifier(n_basis=5, random_state=0, standardize=True).fit(X_MIXED, Y_MIXED)
    assert est.kernel_.get("gamma") == pytest.approx(1.0 / X_MIXED.shape[1], rel=1e-9)


def test_store_input_equals_numpy_input(tmp_path):
    """Moments from the store's attributes (no pass), transform applied as partitions load: the
    same model as numpy input, whatever the chunking (in process: the partitions read through the
    same picklable reader on a cluster, see test_affine_store_reads_transformed_rows)."""
    ref = KMPClassifier(n_basis=20, random_state=0, standardize=True).fit(X_MIXED, Y_MIXED)
    for chunk in (64, 150):
        path = tmp_path / f"s{chunk}.zarr"
        create_store(path, X_MIXED, Y_MIXED, chunk_rows=chunk)
        est = KMPClassifier(n_basis=20, random_state=0, standardize=True, chunk_rows=chunk,
                            client="sync").fit(str(path))
        np.testing.assert_allclose(est.feature_mean_, ref.feature_mean_, rtol=1e-12)
        np.testing.assert_allclose(est.feature_scale_, ref.feature_scale_, rtol=1e-12)
        np.testing.assert_allclose(est.decision_function(X_MIXED), ref.decision_function(X_MIXED), atol=1e-8)
        # predict on the raw store (dask path) equals numpy predict
        np.testing.assert_allclose(np.asarray(est.decision_function(str(path)).compute()),
                                   est.decision_function(X_MIXED), rtol=0, atol=1e-12)


def test_saved_model_predicts_raw_rows(tmp_path):
    for est in (KMPClassifier(n_basis=20, random_state=0), CVMClassifier(random_state=0)):
        est.fit(X_MIXED, Y_MIXED)
        assert est.standardized_
        save(est, tmp_path / type(est).__name__)
        back = load(tmp_path / type(est).__name__)
        assert back.standardized_
        np.testing.assert_array_equal(back.decision_function(X_MIXED), est.decision_function(X_MIXED))
        np.testing.assert_array_equal(back.feature_scale_, est.feature_scale_)


def test_prefix_and_staged_models_take_raw_rows():
    est = KMPClassifier(n_basis=12, random_state=0).fit(X_MIXED, Y_MIXED)
    assert est.standardized_
    k = 7
    stand = _same(est, standardize=False, n_basis=12).fit(_by_hand(est, X_MIXED), Y_MIXED)
    np.testing.assert_allclose(est.expansion_at(k).decision_function(X_MIXED),
                               stand.expansion_at(k).decision_function(_by_hand(est, X_MIXED)), atol=1e-10)
    staged = list(est.staged_decision_function(X_MIXED))
    np.testing.assert_allclose(staged[k - 1], est.prefix(k).decision_function(X_MIXED), atol=1e-10)
    np.testing.assert_allclose(staged[-1], est.decision_function(X_MIXED), atol=1e-10)


def test_weighted_moments():
    w = RNG.uniform(0.0, 3.0, size=len(X_MIXED))
    est = KMPClassifier(n_basis=10, random_state=0, standardize=True).fit(X_MIXED, Y_MIXED, sample_weight=w)
    mean = np.average(X_MIXED, axis=0, weights=w)
    std = np.sqrt(np.average((X_MIXED - mean) ** 2, axis=0, weights=w))
    np.testing.assert_allclose(est.feature_mean_, mean, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(est.feature_scale_, std, rtol=1e-11)
    assert est.kernel_.get("gamma") == pytest.approx(1.0 / X_MIXED.shape[1], rel=1e-9)


def test_constant_feature_keeps_scale_one():
    X = np.column_stack([X_MIXED, np.full(len(X_MIXED), 7.0)])
    est = KMPClassifier(n_basis=5, random_state=0, standardize=True).fit(X, Y_MIXED)
    assert est.feature_scale_[-1] == 1.0 and est.feature_mean_[-1] == 7.0


def test_bad_value_is_named():
    with pytest.raises(ValueError, match="standardize must be 'auto'.*got 'yes'"):
        KMPClassifier(standardize="yes").fit(X_SAME, Y_SAME)
    with pytest.raises(ValueError, match="standardize must be"):
        CVMClassifier(standardize=None).fit(X_SAME, Y_SAME)


def test_expansion_transform_round_trip_and_old_dicts():
    exp = KernelExpansion(X_SAME[:3], np.ones(3), 0.5, KMPClassifier()._resolve_kernels(InMemoryStore(X_SAME))[0],
                          input_offset=np.ones(4), input_scale=np.full(4, 2.0))
    back = KernelExpansion.from_dict(exp.to_dict())
    assert back.allclose(exp)
    np.testing.assert_array_equal(back.decision_function(X_SAME), exp.decision_function(X_SAME))
    np.testing.assert_array_equal(exp.decision_function(X_SAME),
                                  exp.without_input_transform().decision_function((X_SAME - 1.0) / 2.0))
    old = {k: v for k, v in exp.to_dict().items() if not k.startswith("input_")}
    assert KernelExpansion.from_dict(old).input_scale is None
    with pytest.raises(ValueError, match="input_offset and input_scale"):
        KernelExpansion(X_SAME[:3], np.ones(3), 0.0, exp.kernels, input_scale=np.ones(4))


def test_affine_store_reads_transformed_rows():
    base = InMemoryStore(X_MIXED, Y_MIXED, chunk_rows=64)
    off, sc = X_MIXED.mean(0), X_MIXED.std(0)
    view = AffineStore(base, off, sc)
    want = (X_MIXED - off) / sc
    np.testing.assert_array_equal(view.read_range(10, 90)[0], want[10:90])
    np.testing.assert_array_equal(view.read_rows([5, 300, 5])[0], want[[5, 300, 5]])
    np.testing.assert_array_equal(view.to_dask().compute(), want)
    np.testing.assert_allclose(view.attrs["std"], 1.0, rtol=1e-10)
    np.testing.assert_array_equal(view.read_range(0, 5)[1], Y_MIXED[:5])
    # the reader is what a partition spec carries to a worker (and re-reads from after a lost worker)
    reader = pickle.loads(pickle.dumps(view.reader()))
    np.testing.assert_array_equal(reader.read_range(64, 128)[0], want[64:128])


@pytest.mark.filterwarnings("ignore::kmp_dask.reduced.PrefixKeptWarning")
def test_compressor_on_a_standardising_model_takes_raw_rows():
    """ReducedSetCompressor on a KMP model that standardises: compressed in the model's space, the
    result predicts raw rows as the same compression of the model fitted on standardised rows."""
    from kmp_dask import ReducedSetCompressor

    est = KMPClassifier(n_basis=30, random_state=0).fit(X_MIXED, Y_MIXED)
    assert est.standardized_
    ref = _same(est, standardize=False).fit(_by_hand(est, X_MIXED), Y_MIXED)
    a = ReducedSetCompressor(n_vectors=8).fit(est, X_MIXED, Y_MIXED)
    b = ReducedSetCompressor(n_vectors=8).fit(ref, _by_hand(est, X_MIXED), Y_MIXED)
    assert a.n_vectors_ == b.n_vectors_ and a.used_prefix_ == b.used_prefix_
    np.testing.assert_allclose(a.decision_function(X_MIXED), b.decision_function(_by_hand(est, X_MIXED)), atol=1e-8)
    np.testing.assert_allclose(a.expansion_at(4).decision_function(X_MIXED),
                               b.expansion_at(4).decision_function(_by_hand(est, X_MIXED)), atol=1e-8)
    assert np.mean(a.predict(X_MIXED) == Y_MIXED) > 0.8


@pytest.mark.filterwarnings("ignore::UserWarning")  # a choice at the grid's edge is said, not a failure here
@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.KernelWidthWarning")  # the last fit: a raw grid
def test_cv_standardises_folds_and_refit_as_by_hand():
    """KMPClassifierCV(standardize=True) on raw rows = the CV without it on the rows standardised
    by hand (same folds, widths, scores), and its best estimator takes raw rows."""
    from kmp_dask import KMPClassifierCV

    kw = dict(n_basis=10, cv=3, random_state=0, gammas=[0.1, 0.5])
    a = KMPClassifierCV(standardize=True, **kw).fit(X_MIXED, Y_MIXED)
    assert a.standardized_ and a.best_estimator_.standardized_
    b = KMPClassifierCV(standardize=False, **kw).fit(_by_hand(a.best_estimator_, X_MIXED), Y_MIXED)
    np.testing.assert_allclose(a.scores_, b.scores_, atol=1e-10)
    assert a.best_params_ == b.best_params_
    np.testing.assert_allclose(a.decision_function(X_MIXED),
                               b.decision_function(_by_hand(a.best_estimator_, X_MIXED)), atol=1e-10)
    auto = KMPClassifierCV(n_basis=10, cv=3, random_state=0).fit(X_MIXED, Y_MIXED)  # default grid, mixed scales
    assert auto.standardized_ and auto.gammas_[1] == pytest.approx(1.0 / X_MIXED.shape[1], rel=1e-9)
    assert not KMPClassifierCV(**kw).fit(X_MIXED, Y_MIXED).standardized_  # "auto" leaves a user's grid raw


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cv_on_a_store_reads_standardised_rows(tmp_path):
    from kmp_dask import KMPClassifierCV

    kw = dict(n_basis=8, cv=3, random_state=0, gammas=[0.2, 1.0], client="sync")
    create_store(tmp_path / "raw.zarr", X_MIXED, Y_MIXED, chunk_rows=100)
    a = KMPClassifierCV(standardize=True, **kw).fit(str(tmp_path / "raw.zarr"))
    assert a.standardized_ and a.best_estimator_.standardized_
    create_store(tmp_path / "std.zarr", _by_hand(a.best_estimator_, X_MIXED), Y_MIXED, chunk_rows=100)
    b = KMPClassifierCV(standardize=False, **kw).fit(str(tmp_path / "std.zarr"))
    np.testing.assert_allclose(a.scores_, b.scores_, atol=1e-9)
    np.testing.assert_allclose(a.decision_function(X_MIXED),
                               b.decision_function(_by_hand(a.best_estimator_, X_MIXED)), atol=1e-8)
