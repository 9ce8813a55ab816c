"""KMPClassifierCV / KMPRegressorCV ``cv="auto"``: 3 folds from 3,000 training rows, else 5 — for
numpy, dask and store input (``n_splits_``), the same search as the int it resolves to, hash folds
with K = 3 that do not depend on the chunking, and clear errors for other strings."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.metrics import accuracy_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from kmp_dask import KMPClassifier, KMPClassifierCV, KMPRegressorCV
from kmp_dask.estimators import _kmp_cv
from kmp_dask.estimators._kmp_cv import AUTO_CV, _n_folds, hash_folds
from kmp_dask.store import create_store

FAST = {"gammas": [1.0], "n_basis": 4, "random_state": 0, "client": "sync"}


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)


def test_auto_threshold_is_three_thousand_rows():
    assert AUTO_CV == (3_000, 3, 5)
    assert [_n_folds("auto", n) for n in (10, 2_999, 3_000, 10**7)] == [5, 5, 3, 3]
    assert _n_folds(4, 10) == 4 and _n_folds(np.int64(7), 10**6) == 7  # an int is used as given


@pytest.mark.parametrize("n, k", [(2_999, 5), (3_000, 3)])
def test_auto_on_numpy_is_the_search_of_the_int_it_resolves_to(n, k):
    X, c = _data(n)
    auto = KMPClassifierCV(cv="auto", **FAST).fit(X, c)
    fixed = KMPClassifierCV(cv=k, **FAST).fit(X, c)
    assert auto.n_splits_ == k and auto.scores_.shape[1] == k
    assert f"split{k - 1}_test_score" in auto.cv_results_ and f"split{k}_test_score" not in auto.cv_results_
    np.testing.assert_array_equal(auto.scores_, fixed.scores_)
    assert auto.best_params_ == fixed.best_params_


def test_auto_on_dask_input_does_not_depend_on_the_chunking(tmp_path):
    """3,000 dask rows → 3 hash folds: the same scores for two chunkings and for a store, and each
    fold's score is the accuracy of a pursuit with the fold's rows (``hash_folds``, K = 3) weighted 0."""
    n = 3_000
    X, c = _data(n)
    fits = [KMPClassifierCV(cv="auto", **FAST).fit(da.from_array(X, chunks=k), da.from_array(c, chunks=k))
            for k in (700, 1_100)]
    store = create_store(tmp_path / "c.zarr", X, c, chunk_rows=450)
    fits.append(KMPClassifierCV(cv="auto", **FAST).fit(store))
    for est in fits:
        assert est.n_splits_ == 3 and est.scores_.shape[1] == 3
        np.testing.assert_array_equal(est.scores_, fits[0].scores_)  # accuracies: counts, exact
        assert est.best_params_ == fits[0].best_params_
    folds = hash_folds(np.arange(n), 3, fits[0].split_seed_)
    seed = fits[0].best_estimator_.random_state
    for f in range(3):
        sep = KMPClassifier(gamma=1.0, n_basis=4, random_state=seed, client="sync",
                            atoms_per_pass=fits[0].atoms_per_pass_).fit(store, sample_weight=(folds != f).astype(float))
        held = folds == f
        assert fits[0].scores_[0, f, -1] == accuracy_score(c[held], sep.predict(X[held]))


def test_auto_on_a_small_store_keeps_five_folds(tmp_path):
    X, c = _data(400)
    store = create_store(tmp_path / "c.zarr", X, c, chunk_rows=90)
    est = KMPClassifierCV(cv="auto", **FAST).fit(store)
    assert est.n_splits_ == 5 and est.scores_.shape[1] == 5
    np.testing.assert_array_equal(est.scores_, KMPClassifierCV(cv=5, **FAST).fit(store).scores_)


@pytest.mark.parametrize("cv", ["Auto", "three", "", None, 2.5])
def test_other_values_are_named_before_any_cluster(cv, monkeypatch):
    def no_cluster(*a, **k):
        raise AssertionError("a cluster was asked for before the arguments were checked")

    monkeypatch.setattr(_kmp_cv, "client_session", no_cluster)
    X, c = _data(60)
    with pytest.raises(ValueError, match=r"cv must be an int >= 2.*'auto' \(3 folds from 3,000 training rows, "
                                         r"else 5\).*got cv=" + repr(cv).replace(".", r"\.")):
        KMPClassifierCV(cv=cv, client="embedded").fit(X, c)


@parametrize_with_checks([KMPClassifierCV(n_basis=8, cv="auto")])
def test_sklearn_compatible_with_auto(estimator, check):
    check(estimator)


@pytest.mark.slow  # the regressor's checks in the default run: test_kmp_cv.py::test_sklearn_compatible (cv=3);
# "auto" resolves as for the classifier above (test_auto_on_a_small_store_keeps_five_folds)
@parametrize_with_checks([KMPRegressorCV(n_basis=8, cv="auto")])
def test_regressor_sklearn_compatible_with_auto(estimator, check):
    check(estimator)


def test_defaults_auto_for_the_classifier_and_the_regressor():
    """The studies' decisions (docs/cross_validation.md, "Defaults"; benchmarks/kmp_cv_folds.py and
    kmp_cv_folds_regression.py): "auto" for both; the signature shows it, so get_params / clone / repr
    agree."""
    from sklearn.base import clone

    assert KMPClassifierCV().cv == "auto" and KMPRegressorCV().cv == "auto"
    assert clone(KMPRegressorCV()).get_params()["cv"] == "auto" and repr(KMPRegressorCV(cv=5)).count("cv=5") == 1
    assert clone(KMPClassifierCV()).get_params()["cv"] == "auto" and repr(KMPClassifierCV(cv=5)).count("cv=5") == 1
    # the classifier adds only probability=True (calibrated probabilities), which a regressor has no use for
    assert set(KMPClassifierCV().get_params()) == set(KMPRegressorCV().get_params()) | {"probability"}
