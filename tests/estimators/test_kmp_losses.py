"""KMP with other losses, the bias atom and mixed-kernel dictionaries (Vincent & Bengio §3–4)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.kernels import get_kernel

CLASS_LOSSES = ["squared", "tanh", "logistic", "exponential", "squared_hinge"]


def _two_moons(n=600, seed=0, flip=0.0):
    from sklearn.datasets import make_moons

    X, y = make_moons(n_samples=n, noise=0.2, random_state=seed)
    if flip:
        rng = np.random.default_rng(seed)
        y = np.where(rng.random(n) < flip, 1 - y, y)
    return X, y


def test_logistic_full_basis_matches_sklearn_logistic_regression():
    """All N atoms + bias, ridge = 1/(C N): the same objective as LogisticRegression(C)."""
    rng = np.random.default_rng(0)
    N, C, gamma = 40, 1e3, 0.5
    X = rng.normal(size=(N, 2))
    y = (X[:, 0] + 0.8 * rng.normal(size=N) > 0).astype(int)
    lr = LogisticRegression(C=C, solver="newton-cholesky", tol=1e-12, max_iter=1000).fit(rbf_kernel(X, X, gamma=gamma),
                                                                                          y)
    clf = KMPClassifier(n_basis=N + 1, candidates="all", loss="logistic", gamma=gamma, ridge=1 / (C * N),
                        client="sync").fit(X, y)
    assert clf.n_basis_ == N
    Xt = rng.normal(size=(50, 2))
    np.testing.assert_allclose(clf.decision_function(Xt), lr.decision_function(rbf_kernel(Xt, X, gamma=gamma)),
                               atol=1e-4)
    np.testing.assert_allclose(clf.predict_proba(Xt), lr.predict_proba(rbf_kernel(Xt, X, gamma=gamma)), atol=1e-5)


@pytest.mark.parametrize("loss", CLASS_LOSSES[1:])
@pytest.mark.parametrize("mode", ["basic", "backfit"])
def test_training_loss_never_increases(loss, mode):
    X, y = _two_moons(flip=0.1)
    clf = KMPClassifier(n_basis=25, loss=loss, fit_mode=mode, gamma=2.0, ridge=0.0, random_state=0,
                        client="sync").fit(X, y)
    losses = np.array([h["loss"] for h in clf.history_])
    assert np.all(np.isfinite(losses))
    assert np.all(np.diff(losses) <= 1e-9 * losses[0])
    assert clf.score(X, y) > 0.8


@pytest.mark.parametrize("loss", ["huber", "squared"])
def test_regression_losses(loss):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(800, 3))
    y = np.sin(X[:, 0]) + 0.05 * rng.normal(size=800)
    y[:40] += 20.0  # gross outliers: huber should shrug them off
    est = KMPRegressor(n_basis=30, loss=loss, gamma=0.5, random_state=0, client="sync").fit(X, y)
    clean = np.sin(X[40:, 0])
    err = np.mean((est.predict(X[40:]) - clean) ** 2)
    assert err < (0.05 if loss == "huber" else 2.0)
    if loss == "huber":
        ref = KMPRegressor(n_basis=30, loss="squared", gamma=0.5, random_state=0, client="sync").fit(X, y)
        assert err < np.mean((ref.predict(X[40:]) - clean) ** 2)


def test_bias_atom_is_selected_like_any_atom():
    """A large constant shift: the constant function is the best first atom."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 2))
    y = 50.0 + np.sin(X[:, 0])
    est = KMPRegressor(n_basis=15, loss="huber", loss_params={"delta": 100.0}, gamma=0.5, random_state=0,
                       client="sync").fit(X, y)
    assert est.history_[0]["index"] == -1
    assert -1 not in est.basis_indices_ and len(est.basis_indices_) == 14
    assert abs(est.intercept_[0] - 50.0) < 1.0
    no_bias = KMPRegressor(n_basis=15, loss="huber", loss_params={"delta": 100.0}, gamma=0.5, random_state=0,
                           fit_intercept=False, client="sync").fit(X, y)
    assert no_bias.intercept_[0] == 0.0 and -1 not in [h["index"] for h in no_bias.history_]


@pytest.mark.parametrize("loss", CLASS_LOSSES)
def test_early_stopping_with_every_loss(loss):
    X, y = _two_moons(n=1500, flip=0.2)
    clf = KMPClassifier(n_basis=200, loss=loss, gamma=2.0, validation_fraction=0.25, n_iter_no_change=6,
                        random_state=0, client="sync").fit(X, y)
    assert clf.stop_reason_ == "early_stopping"
    assert all(0.0 <= h["val_score"] <= 1.0 for h in clf.history_)
    assert clf.n_basis_ == len(clf.history_) - list(h["index"] for h in clf.history_).count(-1)
    best = max(h["val_score"] for h in clf.history_)
    assert clf.history_[-1]["val_score"] == best


def test_mixed_dictionary_records_and_uses_each_kernel():
    X, y = _two_moons()
    kernels = [get_kernel("rbf", gamma=0.2), get_kernel("rbf", gamma=5.0), get_kernel("laplacian", gamma=1.0)]
    clf = KMPClassifier(n_basis=30, kernel=kernels, random_state=0, client="sync").fit(X, y)
    assert clf.kernels_ == kernels
    assert set(clf.basis_kernels_) <= {0, 1, 2} and len(set(clf.basis_kernels_)) >= 2
    Xt = X[:25]
    blocks = [rbf_kernel(Xt, clf.basis_vectors_, gamma=0.2), rbf_kernel(Xt, clf.basis_vectors_, gamma=5.0),
              laplacian_kernel(Xt, clf.basis_vectors_, gamma=1.0)]
    K = np.stack([blocks[q][:, j] for j, q in enumerate(clf.basis_kernels_)], axis=1)
    np.testing.assert_allclose(clf.decision_function(Xt), K @ clf.dual_coef_[:, 0] + clf.intercept_[0], rtol=1e-10)


def test_gamma_list_builds_one_kernel_per_width():
    X, y = _two_moons()
    clf = KMPClassifier(n_basis=10, gamma=[0.5, 2.0], random_state=0, client="sync").fit(X, y)
    assert [k.get("gamma") for k in clf.kernels_] == [0.5, 2.0]


def test_prefit_refuses_other_losses():
    X, y = _two_moons(n=50)
    with pytest.raises(ValueError, match="prefit.*squared loss only"):
        KMPClassifier(loss="logistic", fit_mode="prefit", client="sync").fit(X, y)


def test_predict_proba_for_logistic_or_when_calibrated():
    """Without a calibration only the logistic loss gives probabilities; probability="auto"
    calibrates any loss when the fit holds rows out anyway (n_basis="auto")."""
    X, y = _two_moons(n=100)
    assert not hasattr(KMPClassifier(loss="tanh", n_basis=3, client="sync").fit(X, y), "predict_proba")
    assert not hasattr(KMPClassifier(loss="tanh", probability=False, client="sync").fit(X, y), "predict_proba")
    assert hasattr(KMPClassifier(loss="logistic", n_basis=3, client="sync").fit(X, y), "predict_proba")
    calibrated = KMPClassifier(loss="tanh", client="sync").fit(X, y)
    assert hasattr(calibrated, "predict_proba") and hasattr(calibrated, "calibrator_")


def test_binary_predict_proba_is_the_logistic_of_the_decision_function():
    X, y = _two_moons(n=300, flip=0.1)
    clf = KMPClassifier(loss="logistic", n_basis=15, gamma=2.0, random_state=0, client="sync").fit(X, y)
    f = clf.decision_function(X)
    P = clf.predict_proba(X)
    assert P.shape == (300, 2) and np.ptp(f) > 2.0  # not all near 1/2: the check below has teeth
    np.testing.assert_allclose(P[:, 1], expit(f), rtol=1e-12)
    np.testing.assert_allclose(P[:, 0], expit(-f), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(clf.classes_[(P[:, 1] > 0.5).astype(int)], clf.predict(X))


def test_multiclass_predict_proba_follows_the_one_vs_rest_decisions():
    """σ(f_k) per output, normalised over classes: ranks like the decision values, and predict
    (argmax f) is argmax P; on dask input chunk by chunk the same numbers."""
    import dask.array as da

    X, y = make_blobs(n_samples=450, centers=3, cluster_std=1.5, random_state=0)
    labels = np.array(["a", "b", "c"])[y]
    clf = KMPClassifier(loss="logistic", n_basis=20, gamma=0.1, ridge=1e-3, random_state=0,
                        client="sync").fit(X, labels)
    F = clf.decision_function(X)
    P = clf.predict_proba(X)
    assert np.abs(F).max() < 50  # predict_proba clips f to ±50 against overflow: not reached here
    S = expit(F)
    np.testing.assert_allclose(P, S / S.sum(axis=1, keepdims=True), rtol=1e-12)
    assert np.all((F[:, :, None] > F[:, None, :]) <= (P[:, :, None] >= P[:, None, :]))  # monotone in f
    assert np.mean(np.ptp(P, axis=1) > 0.5) > 0.5  # mostly confident rows: the checks have teeth
    np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], clf.predict(X))
    assert np.mean(clf.predict(X) == labels) > 0.75
    Pd = clf.predict_proba(da.from_array(X, chunks=100))
    assert isinstance(Pd, da.Array) and Pd.chunks == ((100,) * 4 + (50,), (3,))
    np.testing.assert_allclose(Pd.compute(), P, rtol=1e-12)


def test_refit_schedule_auto_is_geometric():
    from kmp_dask.greedy._newton import refit_due as _refit_due

    last, due = 0, []
    for t in range(400):
        n = t + 1
        if _refit_due("auto", t, n, last):
            last = n
            due.append(n)
    assert due[:10] == list(range(1, 11))
    gaps = np.diff(due)
    assert all(g == max(1, a // 10) for a, g in zip(due[:-1], gaps, strict=True))
    assert len(due) < 60  # about 10 + log(n/10)/log(1.1) (53 at n = 400), not n
    assert [t for t in range(9) if _refit_due(3, t, t + 1, 0)] == [2, 5, 8]
    assert not any(_refit_due(None, t, t + 1, 0) for t in range(20))


def test_refit_auto_counts_curvature_passes_and_keeps_quality():
    """"auto" spends far less curvature (BᵀHB, O(rows·n²)) work than refitting every iteration,
    and the final converged refit leaves both fits about as accurate."""
    from kmp_dask.blockops import _kmp as ops

    X, y = _two_moons(500)
    counts = {}
    real = ops.kmp_refit_stats

    def counting(part, msg):
        if msg.stats is not None:
            counts[key] = counts.get(key, 0) + part.state["kmp"].cache.n ** 2
        return real(part, msg)

    fits = {}
    for key in ("auto", 1):
        ops_counting = pytest.MonkeyPatch()
        ops_counting.setattr("kmp_dask.greedy._newton.kmp_refit_stats", counting)
        try:
            fits[key] = KMPClassifier(n_basis=80, candidates="all", loss="logistic", refit_every=key,
                                      gamma=1.0, client="sync", chunk_rows=500).fit(X, y)
        finally:
            ops_counting.undo()
    assert counts["auto"] < counts[1] / 2, counts  # 2.4x at n = 80 (the final refit dominates); grows ~n/20
    acc = {k: np.mean(f.predict(X) == y) for k, f in fits.items()}
    assert acc["auto"] >= acc[1] - 0.02, acc


def test_weighted_gram_matches_dense_product():
    from kmp_dask.blockops._kmp import _weighted_gram

    rng = np.random.default_rng(0)
    for B in (np.asfortranarray(rng.normal(size=(300, 40)))[:, :25], rng.normal(size=(300, 40))[:, :25]):
        for h in (rng.random(300), rng.normal(size=300)):  # h ≥ 0 (rank-k path) and mixed signs
            np.testing.assert_allclose(_weighted_gram(B, h), (B * h[:, None]).T @ B, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "sometimes", True])
def test_refit_every_rejects_bad_values(bad):
    X, y = _two_moons(100)
    with pytest.raises(ValueError, match="refit_every must be 'auto', None or a positive int; got"):
        KMPClassifier(loss="logistic", refit_every=bad, client="sync").fit(X, y)
