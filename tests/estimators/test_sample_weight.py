"""``sample_weight`` in ``fit``: every sum over rows is weighted (blockops/_kmp.py).

Oracles: a weight of 2 is the row duplicated, a weight of 0 is the row removed, all-ones
weights are the unweighted fit, backfitted coefficients are the dense weighted least-squares
solution on the selected basis; the same weighted fit on a process cluster, streamed out of
core, from a store, equals the in-process one bit for bit; integer class weights on an
imbalanced keel set raise the minority class's recall.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.datasets import load_keel, make_classification_store

RNG = np.random.default_rng(0)
X = RNG.normal(size=(240, 3))
Y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] ** 2 + 0.05 * RNG.normal(size=240)
W = RNG.integers(0, 4, size=240).astype(float)  # 0 (removed) to 3 (three copies)
LABELS = (Y > np.median(Y)).astype(int) + (X[:, 2] > 0.8).astype(int)  # 3 classes
X_TEST = RNG.normal(size=(60, 3))


def _repeated(*arrays):
    k = W.astype(int)
    return [np.repeat(a, k, axis=0) for a in arrays]


def _same_model(a, b, method, atol, rtol=0.0):
    """Same predictions and the same basis rows. Precondition: the fit on repeated rows did not
    select two copies of one row (``basic`` mode may: a weighted row is selected at most once)."""
    rows = lambda est: sorted(map(tuple, np.round(est.basis_vectors_, 12)))  # noqa: E731
    assert len(set(rows(b))) == len(rows(b)), "the repeated fit selected a row twice: not comparable"
    np.testing.assert_allclose(getattr(a, method)(X_TEST), getattr(b, method)(X_TEST), rtol=rtol, atol=atol)
    assert rows(a) == rows(b)


@pytest.mark.parametrize("fit_mode,n_basis", [("basic", 12), ("backfit", 25), ("prefit", 25)])
def test_integer_weights_equal_repeated_rows_squared_loss(fit_mode, n_basis):
    kw = dict(n_basis=n_basis, candidates="all", fit_mode=fit_mode, gamma=0.5, ridge=1e-8)
    weighted = KMPRegressor(**kw).fit(X, Y, sample_weight=W)
    repeated = KMPRegressor(**kw).fit(*_repeated(X, Y))
    _same_model(weighted, repeated, "predict", 1e-9)
    assert weighted.n_basis_ == n_basis


@pytest.mark.parametrize("loss,fit_mode,n_basis", [("logistic", "basic", 6), ("logistic", "backfit", 12),
                                                   ("squared_hinge", "backfit", 12), ("exponential", "basic", 6)])
def test_integer_weights_equal_repeated_rows_other_losses(loss, fit_mode, n_basis):
    """Other losses: Newton steps stop at a tolerance, so equal to ~1e-7 relative, not to rounding."""
    kw = dict(n_basis=n_basis, candidates="all", fit_mode=fit_mode, loss=loss, gamma=0.5)
    weighted = KMPClassifier(**kw).fit(X, LABELS, sample_weight=W)
    repeated = KMPClassifier(**kw).fit(*_repeated(X, LABELS))
    _same_model(weighted, repeated, "decision_function", 1e-9, rtol=1e-6)


def test_integer_weights_equal_repeated_rows_huber_regression():
    kw = dict(n_basis=12, candidates="all", loss="huber", loss_params={"delta": 0.3}, gamma=0.5)
    weighted = KMPRegressor(**kw).fit(X, Y, sample_weight=W)
    repeated = KMPRegressor(**kw).fit(*_repeated(X, Y))
    _same_model(weighted, repeated, "predict", 1e-9, rtol=1e-6)


def test_zero_weight_rows_are_removed_and_never_selected():
    keep = W > 0
    kw = dict(n_basis=20, candidates="all", gamma=0.5)
    weighted = KMPRegressor(**kw).fit(X, Y, sample_weight=keep.astype(float))
    removed = KMPRegressor(**kw).fit(X[keep], Y[keep])
    _same_model(weighted, removed, "predict", 1e-9)
    assert keep[weighted.basis_indices_].all()
    # random candidates: zero-weight rows drawn are masked, never picked
    est = KMPRegressor(n_basis=20, candidates=30, random_state=0).fit(X, Y, sample_weight=keep.astype(float))
    assert keep[est.basis_indices_].all()


def test_unit_weights_equal_the_unweighted_fit():
    kw = dict(n_basis=15, random_state=2)
    a = KMPClassifier(**kw).fit(X, LABELS, sample_weight=np.ones(len(X)))
    b = KMPClassifier(**kw).fit(X, LABELS)
    assert a.basis_indices_.tolist() == b.basis_indices_.tolist()
    np.testing.assert_allclose(a.decision_function(X_TEST), b.decision_function(X_TEST), rtol=1e-10, atol=1e-12)


def test_backfit_coefficients_are_weighted_least_squares():
    w = RNG.uniform(0.1, 3.0, size=len(X))
    est = KMPRegressor(n_basis=10, candidates="all", gamma=0.5, ridge=1e-4).fit(X, Y, sample_weight=w)
    B = np.column_stack([np.ones(len(X)), est.kernel_(X, est.basis_vectors_)])
    lam = 1e-4 * w.sum()  # ridge per unit of weight, on every coefficient of the basis Gram
    coef = np.linalg.solve(B.T @ (w[:, None] * B) + lam * np.eye(B.shape[1]), B.T @ (w * Y))
    np.testing.assert_allclose(est.predict(X), B @ coef, rtol=0, atol=1e-9)  # the weighted LS fit
    np.testing.assert_allclose(np.r_[est.intercept_.ravel(), est.dual_coef_.ravel()], coef, rtol=1e-6)


def test_weights_change_the_fit_where_they_should():
    """Weighting one region up pulls the model's error there down."""
    region = X[:, 0] > 0.5
    w = np.where(region, 20.0, 1.0)
    plain = KMPRegressor(n_basis=8, candidates="all", gamma=0.5).fit(X, Y)
    heavy = KMPRegressor(n_basis=8, candidates="all", gamma=0.5).fit(X, Y, sample_weight=w)
    err = lambda est: np.mean((est.predict(X[region]) - Y[region]) ** 2)  # noqa: E731
    assert err(heavy) < 0.7 * err(plain)


def test_class_weights_raise_minority_recall_on_an_imbalanced_keel_set():
    from sklearn.metrics import recall_score
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    d = load_keel("yeast3")  # 1321 negative, 163 positive
    Xtr, Xte, ytr, yte = train_test_split(d.X, d.y, test_size=0.4, stratify=d.y, random_state=0)
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    ratio = int(round(np.sum(ytr == 0) / np.sum(ytr == 1)))  # integer class weights: 8 for the minority
    w = np.where(ytr == 1, float(ratio), 1.0)
    kw = dict(n_basis=40, random_state=0, gamma=0.1)
    plain = KMPClassifier(**kw).fit(Xtr, ytr)
    weighted = KMPClassifier(**kw).fit(Xtr, ytr, sample_weight=w)
    r_plain = recall_score(yte, plain.predict(Xte), average=None)
    r_weighted = recall_score(yte, weighted.predict(Xte), average=None)
    assert r_weighted[1] > r_plain[1] + 0.1  # minority recall up (measured 0.738 → 0.938)
    assert r_weighted[0] < r_plain[0]  # bought with majority recall, as expected (0.981 → 0.928)
    assert r_weighted[0] > 0.7


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("sw") / "train.zarr"
    return make_classification_store(str(path), 40_000, n_features=10, n_classes=3, chunk_rows=10_000,
                                     random_state=5)


def _store_weights(store):
    n = store.n_rows
    return np.random.default_rng(1).integers(0, 3, size=n).astype(float)


def test_weighted_fit_on_a_process_cluster_streamed_equals_in_process(store, process_client):
    """Store input, weights shipped with the partitions: in-process, on 2 worker processes, and with
    partitions paged to scratch (tiny budget) — the same model bit for bit."""
    w = _store_weights(store)
    kw = dict(n_basis=10, candidates=40, gamma=0.1, random_state=0, basis_columns="stored")
    local = KMPClassifier(client="sync", **kw).fit(store, sample_weight=w)
    cluster = KMPClassifier(client=process_client, **kw).fit(store, sample_weight=w)
    with dask.config.set({"kmp_dask.budget-bytes": 3 << 20}):
        streamed = KMPClassifier(client=process_client, **kw).fit(store, sample_weight=w)
    for est in (cluster, streamed):
        assert est.basis_indices_.tolist() == local.basis_indices_.tolist()
        assert np.array_equal(est.dual_coef_, local.dual_coef_)
    assert (w[local.basis_indices_] > 0).all()
    unweighted = KMPClassifier(client="sync", **kw).fit(store)
    assert unweighted.basis_indices_.tolist() != local.basis_indices_.tolist()


def test_checkpoint_resume_refuses_other_weights(tmp_path):
    ck = tmp_path / "ck"
    w = np.ones(len(X))
    KMPRegressor(n_basis=6, random_state=0).fit(X, Y, sample_weight=w, checkpoint=ck, checkpoint_every=2)
    w2 = w.copy()
    w2[0] = 3.0
    with pytest.raises(ValueError, match="sample_weight"):
        KMPRegressor(n_basis=6, random_state=0).fit(X, Y, sample_weight=w2, checkpoint=ck, resume=True)
    same = KMPRegressor(n_basis=6, random_state=0).fit(X, Y, sample_weight=w, checkpoint=ck, resume=True)
    fresh = KMPRegressor(n_basis=6, random_state=0).fit(X, Y, sample_weight=w)
    assert np.array_equal(same.dual_coef_, fresh.dual_coef_)
