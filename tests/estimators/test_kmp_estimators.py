"""KMP estimators end to end: inputs (numpy, dask, stores), clusters, determinism, errors."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import orthogonal_mp
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.datasets import load_keel
from kmp_dask.store import create_store


def _reg_data(n=1500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + 0.05 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def banana_store(tmp_path_factory):
    ds = load_keel("banana")
    X = (ds.X - ds.X.mean(0)) / ds.X.std(0)
    path = tmp_path_factory.mktemp("stores") / "banana.zarr"
    return create_store(path, X, ds.y, classes=ds.classes, chunk_rows=1000), X, ds


def test_regressor_exact_matches_sklearn_omp_through_estimator():
    X, y = _reg_data(n=300)
    est = KMPRegressor(n_basis=12, candidates="all", gamma=0.3, ridge=0.0, fit_intercept=False, client="sync").fit(X, y)
    K = rbf_kernel(X, X, gamma=0.3)
    norms = np.linalg.norm(K, axis=0)
    coef = orthogonal_mp(K / norms, y, n_nonzero_coefs=12)
    assert sorted(est.basis_indices_.tolist()) == np.flatnonzero(coef).tolist()
    np.testing.assert_allclose(est.predict(X), (K / norms) @ coef, rtol=1e-7, atol=1e-9)


def test_regressor_learns_and_history_is_complete():
    X, y = _reg_data()
    est = KMPRegressor(n_basis=100, gamma=0.5, random_state=0, client="sync").fit(X, y)
    assert est.score(X, y) > 0.95
    assert est.n_basis_ == 100 == len(est.history_)
    assert est.dual_coef_.shape == (100, 1) and est.basis_vectors_.shape == (100, 4)
    np.testing.assert_array_equal(est.basis_vectors_, X[est.basis_indices_])
    h = est.history_[-1]
    for key in ("index", "score", "best_score", "median_score", "residual_norm", "seconds"):
        assert h[key] is not None
    assert all(59 - r["iteration"] <= r["n_candidates"] <= 59 for r in est.history_)


def test_multi_target_regression_shares_basis():
    X, y = _reg_data()
    Y = np.stack([y, np.cos(X[:, 2])], axis=1)
    est = KMPRegressor(n_basis=100, gamma=0.5, random_state=0, client="sync").fit(X, Y)
    assert est.predict(X).shape == (len(X), 2)
    assert est.dual_coef_.shape == (100, 2)
    assert est.score(X, Y) > 0.9


def test_multiclass_string_labels_iris():
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = KMPClassifier(n_basis=20, candidates="all", client="sync").fit(X, labels)
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"]
    assert clf.decision_function(X).shape == (150, 3)
    assert clf.score(X, labels) > 0.95


def test_early_stopping_on_classifier_stops_at_the_validation_plateau():
    """30% of labels flipped at random around a half-space: validation accuracy reaches the Bayes
    rate (0.7) within a few atoms and then only fluctuates, so the fit stops early — at the first
    maximum of the validation curve of the same fit run on without early stopping."""
    X, _ = _reg_data(n=3000)
    flip = np.random.default_rng(1).random(3000) < 0.3
    labels = ((X[:, 0] > 0) ^ flip).astype(int)
    kw = dict(gamma=0.5, random_state=0, validation_fraction=0.2, client="sync")
    clf = KMPClassifier(n_basis=300, n_iter_no_change=8, **kw).fit(X, labels)
    assert clf.stop_reason_ == "early_stopping"
    n = clf.n_basis_
    assert n < 300 - 8
    assert all(0 <= h["val_score"] <= 1 for h in clf.history_)
    full = KMPClassifier(n_basis=n + 8, **kw).fit(X, labels)  # the 8 non-improving steps as well
    assert full.stop_reason_ == "n_basis"
    val = np.array([h["val_score"] for h in full.history_])
    assert np.argmax(val) == n - 1, val  # kept the best size; no better one in the 8 after it
    np.testing.assert_array_equal(clf.basis_indices_, full.basis_indices_[:n])


def test_early_stopping_does_not_stop_while_validation_improves():
    """A smooth target, low noise: every few atoms improve the validation MSE, so n_iter_no_change=10
    never triggers and the model is the one fitted without early stopping."""
    X, y = _reg_data(n=1500)
    kw = dict(n_basis=30, gamma=0.5, random_state=0, validation_fraction=0.2, client="sync")
    est = KMPRegressor(n_iter_no_change=10, **kw).fit(X, y)
    ref = KMPRegressor(**kw).fit(X, y)
    assert est.stop_reason_ == "n_basis" and est.n_basis_ == 30
    val = np.array([h["val_score"] for h in est.history_])
    assert val[-1] > val[0] + 0.1 and np.argmax(val) > 30 - 10
    np.testing.assert_array_equal(est.basis_indices_, ref.basis_indices_)
    np.testing.assert_array_equal(est.dual_coef_, ref.dual_coef_)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_basis": 0}, "n_basis must be a positive int"),
        ({"fit_mode": "greedy"}, "fit_mode must be one of"),
        ({"candidates": "some"}, "candidates must be"),
        ({"n_basis": 10, "n_iter_no_change": 5}, "validation_fraction > 0"),
        ({"ridge": -1.0}, "ridge must be"),
        ({"kernel": "gaussian"}, "gaussian"),
    ],
)
def test_bad_parameters_are_named(params, match):
    X, y = _reg_data(n=50)
    with pytest.raises(ValueError, match=match):
        KMPRegressor(client="sync", **params).fit(X, y)


def test_store_with_y_argument_is_refused(banana_store):
    store, X, ds = banana_store
    with pytest.raises(ValueError, match="y is read from the store"):
        KMPClassifier(client="sync").fit(store, ds.y)


def test_predict_numpy_dask_and_store_agree(banana_store):
    store, X, ds = banana_store
    clf = KMPClassifier(n_basis=30, random_state=0, client="sync").fit(store)
    assert list(clf.classes_) == list(ds.classes)
    p_np = clf.predict(X)
    p_dask = clf.predict(da.from_array(X, chunks=700))
    p_store = clf.predict(store)
    assert isinstance(p_dask, da.Array) and isinstance(p_store, da.Array)
    np.testing.assert_array_equal(p_np, p_dask.compute())
    np.testing.assert_array_equal(p_np, p_store.compute())
    assert np.mean(p_np == np.asarray(ds.classes)[ds.y]) > 0.85


def test_same_model_on_one_worker_and_on_two_worker_processes(banana_store, process_client):
    """Same seed, same chunking: bit for bit, in-process vs 2 actor workers."""
    store, X, ds = banana_store
    kw = dict(n_basis=25, random_state=3, validation_fraction=0.1, fit_mode="prefit")
    one = KMPClassifier(client="sync", **kw).fit(store)
    two = KMPClassifier(client=process_client, **kw).fit(store)
    np.testing.assert_array_equal(one.basis_indices_, two.basis_indices_)
    assert one.dual_coef_.tobytes() == two.dual_coef_.tobytes()
    assert one.intercept_.tobytes() == two.intercept_.tobytes()


def test_dask_array_input_on_process_cluster(process_client):
    X, y = _reg_data(n=4000)
    Xd, yd = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    est = KMPRegressor(n_basis=30, gamma=0.5, random_state=1, client=process_client).fit(Xd, yd)
    ref = KMPRegressor(n_basis=30, gamma=0.5, random_state=1, client="sync", chunk_rows=1000).fit(X, y)
    np.testing.assert_array_equal(est.basis_indices_, ref.basis_indices_)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-12)
    out = est.predict(Xd)
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), ref.predict(X), rtol=1e-10)


def test_end_to_end_on_dask_scheduler_and_worker_processes(cli_cluster, tmp_path):
    """Real `dask scheduler` + `dask worker` subprocesses: ingest, fit from the store, predict."""
    from distributed import Client

    from kmp_dask.datasets import make_classification_store

    with Client(scheduler_file=cli_cluster, set_as_default=False) as client:
        # ingest through the cluster: one task per whole chunk, written by the worker processes
        store = make_classification_store(tmp_path / "synth.zarr", 20_000, n_features=10, n_classes=3,
                                          chunk_rows=2500, random_state=0, dtype="float64", client=client)
        clf = KMPClassifier(n_basis=20, random_state=0, client=client).fit(store)
        F = client.compute(clf.decision_function(store)).result()
    _, y = store.read_range(0, store.n_rows)
    acc = np.mean(np.asarray(clf.classes_)[F.argmax(axis=1)] == np.asarray(clf.classes_)[y])
    assert F.shape == (20_000, 3)
    assert acc > 0.6  # 3 classes: chance is ~1/3
    local = make_classification_store(tmp_path / "local.zarr", 20_000, n_features=10, n_classes=3,
                                      chunk_rows=2500, random_state=0, dtype="float64")
    np.testing.assert_array_equal(store.read_range(0, 20_000)[0], local.read_range(0, 20_000)[0])
    ref = KMPClassifier(n_basis=20, random_state=0, client="sync").fit(local)
    np.testing.assert_array_equal(clf.basis_indices_, ref.basis_indices_)


def test_dask_string_labels_are_encoded():
    X, y = _reg_data(n=800)
    labels = np.where(y > 0, "pos", "neg")
    clf = KMPClassifier(n_basis=15, random_state=0, client="sync").fit(
        da.from_array(X, chunks=200), da.from_array(labels, chunks=200))
    assert list(clf.classes_) == ["neg", "pos"]
    ref = KMPClassifier(n_basis=15, random_state=0, client="sync", chunk_rows=200).fit(X, labels)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))


@pytest.mark.parametrize("mode", ["backfit", "prefit"])
def test_intercept_is_refitted_with_the_atoms(mode):
    """Squared loss with refits: exact least squares on [1, K(X, basis)], not the target mean."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    est = KMPRegressor(gamma=4.0, n_basis=5, candidates="all", ridge=0.0, fit_mode=mode, client="sync").fit(X, y)
    A = np.hstack([np.ones((200, 1)), rbf_kernel(X, est.basis_vectors_, gamma=4.0)])
    c = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(est.intercept_[0], c[0], rtol=1e-8)
    np.testing.assert_allclose(est.dual_coef_[:, 0], c[1:], rtol=1e-8)
    assert est.n_basis_ == 5 == len(est.history_)
