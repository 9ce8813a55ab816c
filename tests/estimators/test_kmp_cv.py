"""KMPClassifierCV / KMPRegressorCV: prefix scores against separate fits, folds that do not depend
on chunking or workers, the one-standard-error rule by hand, argument errors, scikit-learn checks."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_moons
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from kmp_dask import KMPClassifier, KMPClassifierCV, KMPRegressor, KMPRegressorCV
from kmp_dask.estimators import _kmp_cv
from kmp_dask.estimators._kmp_cv import hash_folds, one_standard_error
from kmp_dask.store import create_store


def _moons(n=400, seed=0):
    return make_moons(n, noise=0.3, random_state=seed)


def _reg(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)


@pytest.fixture(scope="module")
def moons_stores(tmp_path_factory):
    X, y = _moons(500)
    d = tmp_path_factory.mktemp("cv-stores")
    return X, y, create_store(d / "a.zarr", X, y, chunk_rows=64), create_store(d / "b.zarr", X, y, chunk_rows=200)


def test_prefix_scores_equal_separately_fitted_classifiers():
    """scores_[γ, fold, k−1] is the held-out accuracy of KMPClassifier(n_basis=k) fitted on the fold."""
    X, y = _moons()
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    gammas = [0.5, 2.0]
    clf = KMPClassifierCV(gammas=gammas, n_basis=25, cv=cv, random_state=0, client="sync").fit(X, y)
    seed = clf.best_estimator_.random_state
    assert clf.scores_.shape == (2, 3, 25)
    for g, gamma in enumerate(gammas):
        for f, (train, test) in enumerate(cv.split(X, y)):
            for k in (1, 7, 25):
                sep = KMPClassifier(gamma=gamma, n_basis=k, random_state=seed, client="sync").fit(X[train], y[train])
                assert clf.scores_[g, f, k - 1] == accuracy_score(y[test], sep.predict(X[test]))


def test_prefix_scores_equal_separately_fitted_regressors():
    X, y = _reg()
    cv = KFold(3, shuffle=True, random_state=2)
    est = KMPRegressorCV(gammas=[0.3], n_basis=20, cv=cv, random_state=0, client="sync").fit(X, y)
    seed = est.best_estimator_.random_state
    for f, (train, test) in enumerate(cv.split(X)):
        for k in (2, 11, 20):
            sep = KMPRegressor(gamma=0.3, n_basis=k, random_state=seed, client="sync").fit(X[train], y[train])
            np.testing.assert_allclose(est.scores_[0, f, k - 1], r2_score(y[test], sep.predict(X[test])),
                                       rtol=1e-9, atol=1e-12)


def test_store_prefix_scores_equal_weighted_fits_on_hash_folds(moons_stores):
    """Store input: fold f is the rows whose hash fold is f; its pursuit weights them 0."""
    X, y, store, _ = moons_stores
    clf = KMPClassifierCV(gammas=[1.0], n_basis=15, cv=3, random_state=0, client="sync").fit(store)
    folds = hash_folds(np.arange(len(X)), 3, clf.split_seed_)
    assert sorted(np.unique(folds)) == [0, 1, 2]
    seed, per_pass = clf.best_estimator_.random_state, clf.atoms_per_pass_  # store: "auto" is k > 1
    for f in range(3):
        for k in (3, 15):
            sep = KMPClassifier(gamma=1.0, n_basis=k, random_state=seed, client="sync", atoms_per_pass=per_pass).fit(
                store, sample_weight=(folds != f).astype(float))
            held = folds == f
            assert clf.scores_[0, f, k - 1] == accuracy_score(y[held], sep.predict(X[held]))


def test_refit_equals_the_prefix_of_a_full_pursuit():
    X, y = _moons()
    clf = KMPClassifierCV(gammas=[1.0, 4.0], n_basis=30, cv=3, random_state=0, client="sync").fit(X, y)
    best = clf.best_estimator_
    full = KMPClassifier(gamma=clf.best_params_["gamma"], n_basis=30, random_state=best.random_state,
                         client="sync").fit(X, y)
    k = clf.n_basis_
    assert k == clf.best_params_["n_basis"]
    np.testing.assert_array_equal(full.basis_indices_[:k], best.basis_indices_)
    np.testing.assert_allclose(full.expansion_at(k).coef, best.dual_coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), best.predict(X))
    assert clf.score(X, y) == best.score(X, y)


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_staged_predictions_and_prefixes_are_the_best_estimators(kind):
    X, y = _moons() if kind == "classifier" else _reg()
    cls = KMPClassifierCV if kind == "classifier" else KMPRegressorCV
    est = cls(gammas=[1.0], n_basis=12, cv=3, random_state=0, client="sync").fit(X, y)
    best, k = est.best_estimator_, est.n_basis_
    for mine, theirs in ((est.staged_predict(X), best.staged_predict(X)),
                         (est.staged_decision_function(X), best.staged_decision_function(X))):
        stages = list(mine)
        assert len(stages) == k
        for a, b in zip(stages, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(list(est.staged_predict(X))[-1], est.predict(X))
    small = est.prefix(max(1, k // 2))
    assert small.n_basis_ == max(1, k // 2)
    np.testing.assert_array_equal(small.predict(X), best.prefix(max(1, k // 2)).predict(X))


def test_cv_results_are_gridsearch_shaped():
    X, y = _moons()
    clf = KMPClassifierCV(gammas=[0.5, 2.0], n_basis=10, cv=4, random_state=0, client="sync").fit(X, y)
    r = clf.cv_results_
    assert len(r["params"]) == 20 and r["params"][0] == {"gamma": 0.5, "n_basis": 1}
    split = np.stack([r[f"split{i}_test_score"] for i in range(4)], axis=1)
    np.testing.assert_allclose(r["mean_test_score"], split.mean(axis=1))
    np.testing.assert_allclose(r["std_test_score"], split.std(axis=1))
    np.testing.assert_allclose(split, clf.scores_.transpose(0, 2, 1).reshape(20, 4))
    assert r["rank_test_score"].min() == 1
    assert r["mean_test_score"][r["rank_test_score"] == 1].max() == r["mean_test_score"].max()
    assert r["params"][clf.best_index_] == clf.best_params_
    assert clf.best_score_ == r["mean_test_score"][clf.best_index_]


def test_one_standard_error_rule_by_hand():
    # 2 γ × 3 folds × 4 sizes; γ1 size 4 is best (mean 0.90, fold scores 0.86 0.90 0.94: SE 0.04 / √3 · 2)
    S = np.array([[[0.70, 0.80, 0.85, 0.86], [0.72, 0.82, 0.86, 0.87], [0.74, 0.84, 0.87, 0.88]],
                  [[0.60, 0.84, 0.85, 0.86], [0.62, 0.86, 0.88, 0.90], [0.64, 0.88, 0.91, 0.94]]])
    mean = S.mean(axis=1)
    se = np.std([0.86, 0.90, 0.94], ddof=1) / np.sqrt(3)  # 0.0231
    assert mean[1, 3] == mean.max()
    threshold = mean[1, 3] - se  # 0.8769: size 3 of γ1 (0.88) is the smallest within it
    assert mean[1, 2] >= threshold > max(mean[0, 2], mean[:, 1].max())
    assert one_standard_error(S) == (1, 2)
    assert one_standard_error(S, rule="best") == (1, 3)
    # a wider spread: the SE admits size 2 of γ1 (mean 0.86); at size 2, γ1 beats γ0 (0.82)
    S2 = S.copy()
    S2[1, :, 3] = [0.80, 0.90, 1.00]
    se2 = np.std([0.80, 0.90, 1.00], ddof=1) / np.sqrt(3)
    assert S2[1, :, 1].mean() >= S2[1, :, 3].mean() - se2 > S2[:, :, 0].mean(axis=1).max()
    assert one_standard_error(S2) == (1, 1)


@pytest.mark.parametrize("rule,share", [("1se", 1.0), ("auto", 0.5)])  # "auto": half_se (AUTO_RULE)
def test_fitted_choice_follows_the_rule_on_its_own_scores(rule, share):
    X, y = _reg(300)
    est = KMPRegressorCV(gammas=[0.1, 0.5, 2.0], n_basis=25, cv=5, rule=rule, random_state=3, client="sync").fit(X, y)
    assert est.rule_ == ("1se" if rule == "1se" else "half_se")
    mean = est.scores_.mean(axis=1)
    g0, s0 = np.unravel_index(np.argmax(mean), mean.shape)
    se = share * est.scores_[g0, :, s0].std(ddof=1) / np.sqrt(5)
    s = next(j for j in range(25) if (mean[:, j] >= mean[g0, s0] - se).any())  # smallest size within (½) SE
    g = max((g for g in range(3) if mean[g, s] >= mean[g0, s0] - se), key=lambda g: mean[g, s])
    assert est.best_params_ == {"gamma": [0.1, 0.5, 2.0][g], "n_basis": s + 1}
    assert est.n_basis_ <= s0 + 1


def test_cv_results_do_not_depend_on_chunking(moons_stores):
    X, y, a, b = moons_stores
    kw = dict(n_basis=15, cv=3, random_state=0, client="sync")
    ca, cb = KMPClassifierCV(**kw).fit(a), KMPClassifierCV(**kw).fit(b)
    np.testing.assert_array_equal(ca.scores_, cb.scores_)
    assert ca.best_params_ == cb.best_params_
    np.testing.assert_array_equal(ca.predict(X), cb.predict(X))
    # numpy input: the in-process partitions do not move the choice either
    n1 = KMPClassifierCV(chunk_rows=50, **kw).fit(X, y)
    n2 = KMPClassifierCV(chunk_rows=500, **kw).fit(X, y)
    np.testing.assert_array_equal(n1.scores_, n2.scores_)
    assert n1.best_params_ == n2.best_params_


def test_cv_results_do_not_depend_on_the_workers(moons_stores, process_client):
    """In process against a 2-worker LocalCluster, on a store and on dask arrays."""
    X, y, store, _ = moons_stores
    kw = dict(gammas=[0.5, 2.0], n_basis=12, cv=2, random_state=0)
    one = KMPClassifierCV(client="sync", **kw).fit(store)
    two = KMPClassifierCV(client=process_client, **kw).fit(store)
    np.testing.assert_array_equal(one.scores_, two.scores_)
    assert one.best_params_ == two.best_params_
    assert two.best_estimator_.client is process_client
    Xd, yd = da.from_array(X, chunks=128), da.from_array(y, chunks=128)
    dsk = KMPClassifierCV(client=process_client, **kw).fit(Xd, yd)
    np.testing.assert_array_equal(dsk.scores_, one.scores_)
    np.testing.assert_array_equal(dsk.predict(Xd).compute(), one.predict(X))


def test_regressor_on_a_store_matches_numpy_hash_folds(tmp_path):
    X, y = _reg(300)
    store = create_store(tmp_path / "r.zarr", X, y, chunk_rows=70)
    est = KMPRegressorCV(gammas=[0.5], n_basis=12, cv=3, random_state=0, client="sync").fit(store)
    folds = hash_folds(np.arange(300), 3, est.split_seed_)
    seed = est.best_estimator_.random_state
    for f in range(3):
        sep = KMPRegressor(gamma=0.5, n_basis=12, random_state=seed, client="sync").fit(
            store, sample_weight=(folds != f).astype(float))
        held = folds == f
        np.testing.assert_allclose(est.scores_[0, f, -1], r2_score(y[held], sep.predict(X[held])), rtol=1e-9)
    assert est.score(store) == pytest.approx(est.score(X, y), rel=1e-12)


@pytest.mark.parametrize("params, match", [
    ({"cv": 1}, "cv must be an int >= 2.*cv=1"),
    ({"cv": 0}, "cv must be an int >= 2.*cv=0"),
    ({"cv": "five"}, "cv must be an int >= 2.*'five'"),
    ({"gammas": []}, r"gammas must be None.*gammas=\[\]"),
    ({"gammas": [1.0, -2.0]}, r"gammas must hold positive.*-2.0"),
    ({"gammas": [0]}, r"gammas must hold positive.*got 0 in"),
    ({"gammas": 0.5}, r"gammas must be None.*gammas=0.5"),
    ({"fit_mode": "basic"}, "fit_mode must be 'backfit' or 'prefit'.*'basic'"),
    ({"rule": "min"}, "rule must be 'auto'.*'1se'.*'half_se'.*'best'.*'min'"),
    ({"n_basis": 0}, "n_basis must be a positive int"),
    ({"kernel": ["rbf", "laplacian"]}, r"kernel must be a kernel name.*\['rbf', 'laplacian'\]"),
])
def test_bad_arguments_are_named_before_any_cluster(params, match, monkeypatch):
    def no_cluster(*a, **k):
        raise AssertionError("a cluster was asked for before the arguments were checked")

    monkeypatch.setattr(_kmp_cv, "client_session", no_cluster)
    X, y = _moons(60)
    with pytest.raises(ValueError, match=match):
        KMPClassifierCV(client="embedded", **params).fit(X, y)


def test_splitter_cv_is_refused_for_store_input(moons_stores):
    _, _, store, _ = moons_stores
    with pytest.raises(ValueError, match="cv must be an int for store or dask input"):
        KMPClassifierCV(cv=KFold(3), client="sync").fit(store)


def test_default_grid_is_multiples_of_the_scale_width():
    from kmp_dask.estimators._scale import scale_gamma

    X, y = _moons(200)
    X = X * 300.0  # raw, wide features: the default grid follows them
    clf = KMPClassifierCV(n_basis=10, cv=3, random_state=0).fit(X, y)
    np.testing.assert_allclose(clf.gammas_, scale_gamma(X) * np.asarray(_kmp_cv.DEFAULT_GAMMA_FACTORS))
    assert clf.best_params_["gamma"] in clf.gammas_
    assert clf.score(X, y) > 0.8


@pytest.mark.slow
def test_on_a_real_scheduler(cli_cluster, tmp_path):
    from distributed import Client

    X, y = _moons(600, seed=1)
    store = create_store(tmp_path / "m.zarr", X, y, chunk_rows=150)
    with Client(scheduler_file=cli_cluster, set_as_default=False) as client:
        far = KMPClassifierCV(n_basis=15, cv=3, random_state=0, client=client).fit(store.url)
    near = KMPClassifierCV(n_basis=15, cv=3, random_state=0, client="sync").fit(store)
    np.testing.assert_array_equal(far.scores_, near.scores_)
    assert far.best_params_ == near.best_params_


@parametrize_with_checks([KMPClassifierCV(n_basis=8, cv=3), KMPRegressorCV(n_basis=8, cv=3),
                          KMPClassifierCV(n_basis=8, cv=3, probability=True)],
                         expected_failed_checks=lambda est: {"check_classifiers_train": (
                             "argmax(predict_proba) may differ from predict near the boundary: the refit's "
                             "probabilities are calibrated on held-out rows (tests/estimators/test_sklearn_checks.py)")}
                         if getattr(est, "probability", False) else {})
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_warns_when_the_best_score_is_at_the_edge_of_the_grid():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(400, 2))
    y = (np.sin(2 * X[:, 0]) * np.sin(2 * X[:, 1]) > 0).astype(int)  # a checkerboard: 10 atoms are too few
    with pytest.warns(UserWarning, match=r"at 10 of n_basis=10 atoms.*raise n_basis, e.g. n_basis=20"):
        clf = KMPClassifierCV(gammas=[2.0], n_basis=10, cv=3, rule="best", random_state=0, client="sync").fit(X, y)
    assert clf.scores_.mean(axis=1)[0].argmax() == 9
    X, y = _moons(400)
    with pytest.warns(UserWarning, match=r"at the largest gamma of the grid \(0\.1\).*4 × 0\.1"):
        KMPClassifierCV(gammas=[0.05, 0.1], n_basis=5, cv=3, random_state=0, client="sync").fit(X, y)
