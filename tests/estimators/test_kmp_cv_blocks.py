"""KMPClassifierCV / KMPRegressorCV with ``atoms_per_pass = k > 1`` (several atoms per two passes).

Oracles: separately fitted ``KMPClassifier(atoms_per_pass=k)`` models of each size (a k > 1
pursuit admits its atoms one at a time, so every prefix is still an exact least-squares model),
the same search on another chunking / on 2 workers, the same search with every doubled-cap
pursuit run again from atom 1 (``EXTEND = False``), and a pursuit run to the larger cap from the start.
"""

import dask.array as da
import numpy as np
import pytest
from _cv_checks import assert_extension_is_the_rerun, assert_same_search, checkerboard
from sklearn.datasets import make_moons
from sklearn.metrics import accuracy_score
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from kmp_dask import KMPClassifier, KMPClassifierCV, KMPRegressor, KMPRegressorCV
from kmp_dask.estimators import _kmp_cv
from kmp_dask.store import create_store


@pytest.mark.parametrize("k", [3, 8])
def test_prefix_scores_equal_separately_fitted_k_models(k):
    """scores_[γ, fold, s − 1] is the held-out accuracy of KMPClassifier(n_basis=s, atoms_per_pass=k)
    fitted on the fold (its pursuit cut at s atoms, inside a batch or not); the refit is one of them."""
    X, y = make_moons(300, noise=0.3, random_state=0)
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    clf = KMPClassifierCV(gammas=[1.0], n_basis=20, cv=cv, random_state=0, client="sync", atoms_per_pass=k).fit(X, y)
    assert clf.atoms_per_pass_ == k and clf.best_estimator_.atoms_per_pass == k
    seed = clf.best_estimator_.random_state
    for f, (train, test) in enumerate(cv.split(X, y)):
        for s in (1, k + 1, 20):
            sep = KMPClassifier(gamma=1.0, n_basis=s, random_state=seed, client="sync", atoms_per_pass=k)
            sep.fit(X[train], y[train])
            assert clf.scores_[0, f, s - 1] == accuracy_score(y[test], sep.predict(X[test]))
    best = KMPClassifier(gamma=1.0, n_basis=clf.best_params_["n_basis"], random_state=seed, client="sync",
                         atoms_per_pass=k).fit(X, y)
    np.testing.assert_array_equal(clf.best_estimator_.basis_indices_, best.basis_indices_)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("kind", ["clf3", "reg2"])
def test_factor_scorer_values_are_every_prefix_model_for_k(kind, k):
    """The CV's scorer from the Gram factor of a k > 1 fit: the factor is extended one atom at a
    time, so its leading blocks are the k-atom models (oracle: ``expansion_at`` evaluated densely)."""
    from kmp_dask.greedy._cv_path import factor_prefix_scorer

    rng = np.random.default_rng(1)
    X, Xh = rng.standard_normal((300, 3)), rng.standard_normal((120, 3))
    if kind == "reg2":
        est = KMPRegressor(n_basis=30, random_state=0, client="sync", atoms_per_pass=k)
        est.fit(X, np.c_[np.sin(X[:, 0]), X[:, 1] ** 2])
    else:
        est = KMPClassifier(n_basis=30, random_state=0, client="sync", atoms_per_pass=k)
        est.fit(X, np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5]))
    n = est.expansion_.n_vectors
    assert n >= 25
    F = factor_prefix_scorer(est.expansion_, est._path, getattr(est, "classes_", None))._values(Xh)
    for size in range(n + 1):
        e = est.expansion_at(size)
        m = F.shape[2]
        dense = (e.kernel_matrix(Xh) @ np.reshape(e.coef, (size, m)) if size else np.zeros((len(Xh), m))) + e.intercept
        np.testing.assert_allclose(F[:, size], dense, rtol=1e-7, atol=1e-8)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_k_search_reads_the_kernel_table_as_computed_blocks(monkeypatch):
    """numpy input in process: the folds' k > 1 pursuits on the shared kernel table select the same
    atoms as with computed kernel blocks (USE_TABLE = False), scores to rounding."""
    X, y = make_moons(300, noise=0.3, random_state=0)
    make = lambda: KMPClassifierCV(gammas=[0.5, 4.0], n_basis=25, cv=3, random_state=0, atoms_per_pass=4)
    built, original = [], _kmp_cv.kernel_table
    monkeypatch.setattr(_kmp_cv, "kernel_table", lambda kernel, rows: built.append(1) or original(kernel, rows))
    tabled = make().fit(X, y)
    assert len(built) == 2  # the precondition: one table per width
    monkeypatch.setattr(_kmp_cv, "USE_TABLE", False)
    plain = make().fit(X, y)
    assert len(built) == 2
    np.testing.assert_allclose(tabled.scores_, plain.scores_, rtol=0, atol=1e-9)
    assert tabled.best_params_ == plain.best_params_
    np.testing.assert_array_equal(tabled.best_estimator_.basis_indices_, plain.best_estimator_.basis_indices_)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_one_atom_cap_is_the_same_search_for_any_k():
    """With n_basis=1 and every row a candidate (k·s random candidates would be another draw), a
    batch holds one atom, the best by the same score: k = 4 is the k = 1 search."""
    X, y = make_moons(200, noise=0.3, random_state=0)
    kw = {"gammas": [0.5, 2.0], "n_basis": 1, "cv": 3, "random_state": 0, "client": "sync", "candidates": "all"}
    one, four = KMPClassifierCV(**kw).fit(X, y), KMPClassifierCV(atoms_per_pass=4, **kw).fit(X, y)
    assert_same_search(one, four)


def test_k_search_does_not_depend_on_chunking_or_workers(tmp_path, process_client):
    X, y = make_moons(400, noise=0.3, random_state=0)
    a = create_store(tmp_path / "a.zarr", X, y, chunk_rows=64)
    b = create_store(tmp_path / "b.zarr", X, y, chunk_rows=150)
    kw = {"gammas": [0.5, 2.0], "n_basis": 14, "cv": 2, "random_state": 0, "atoms_per_pass": 4}
    ca, cb = KMPClassifierCV(client="sync", **kw).fit(a), KMPClassifierCV(client="sync", **kw).fit(b)
    assert_same_search(ca, cb)
    two = KMPClassifierCV(client=process_client, **kw).fit(a)
    assert_same_search(ca, two)
    dsk = KMPClassifierCV(client=process_client, **kw).fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100))
    assert_same_search(ca, dsk)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("store", [False, True])
def test_doubled_cap_continues_k_pursuits_bit_for_bit(monkeypatch, store):
    """Caps 10 → 20 → 40 with k = 4: the first cap cuts a batch after 2 of its atoms; the continued
    pursuit admits the rest of that batch as one run from atom 1 does (oracle: EXTEND = False)."""
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, 40))
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", None)
    X, y = checkerboard()
    if store:
        X, y = da.from_array(X, chunks=150), da.from_array(y, chunks=150)
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=3, random_state=0, client="sync", atoms_per_pass=4)
    assert_extension_is_the_rerun(monkeypatch, make, X, y, first_cap=10)


@pytest.mark.parametrize("k, first", [(3, 10), (4, 8), (5, 1)])
@pytest.mark.parametrize("estimator", [KMPClassifier, KMPRegressor])
def test_extension_equals_a_pursuit_to_the_larger_cap(k, first, estimator):
    """kernel_matching_pursuit continued by the extend hook from ``first`` to 23 atoms: the same atoms,
    coefficients and history as a fit to 23 from the start (a cut batch — 10 = 3·3 + 1 —, a cap at
    a batch boundary, a one-atom first cap)."""
    from kmp_dask.greedy._kmp import PursuitExtension, extending

    X, y = checkerboard(300)
    if estimator is KMPRegressor:
        y = np.sin(X[:, 0]) + 0.1 * y
    kw = {"gamma": 1.0, "random_state": 0, "client": "sync", "atoms_per_pass": k}
    hook = PursuitExtension()
    with extending(hook):
        estimator(n_basis=first, **kw).fit(X, y)
        assert hook.saved is not None
        long = estimator(n_basis=23, **kw).fit(X, y)
    assert hook.replays == 1
    fresh = estimator(n_basis=23, **kw).fit(X, y)
    np.testing.assert_array_equal(long.basis_indices_, fresh.basis_indices_)
    np.testing.assert_array_equal(long.expansion_.coef, fresh.expansion_.coef)
    assert [h["index"] for h in long.history_] == [h["index"] for h in fresh.history_]
    assert [h["residual_norm"] for h in long.history_] == [h["residual_norm"] for h in fresh.history_]


def test_regressor_cv_takes_k():
    X, y = make_moons(200, noise=0.3, random_state=0)
    t = np.sin(2 * X[:, 0]) + 0.3 * y
    est = KMPRegressorCV(gammas=[1.0], n_basis=12, cv=3, random_state=0, client="sync", atoms_per_pass=4).fit(X, t)
    assert est.atoms_per_pass_ == 4 and est.best_estimator_.atoms_per_pass == 4


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_auto_is_one_on_the_kernel_table_else_k(monkeypatch):
    """The default "auto": 1 when the folds' pursuits read the in-process kernel table (numpy input
    in process), k = AUTO_ATOMS_PER_PASS when they compute their kernel blocks (dask input; numpy
    input whose table is over TABLE_BYTES); 1 with fit_mode="prefit" and for KMPRegressorCV."""
    X, y = make_moons(150, noise=0.3, random_state=0)
    Xd, yd = da.from_array(X, chunks=50), da.from_array(y, chunks=50)
    kw = {"gammas": [1.0], "n_basis": 6, "cv": 3, "random_state": 0, "client": "sync"}
    k = _kmp_cv.AUTO_ATOMS_PER_PASS
    assert k > 1 and KMPClassifierCV().atoms_per_pass == KMPRegressorCV().atoms_per_pass == "auto"
    assert KMPClassifierCV(**kw).fit(X, y).atoms_per_pass_ == 1
    dsk = KMPClassifierCV(**kw).fit(Xd, yd)
    assert dsk.atoms_per_pass_ == k and dsk.best_estimator_.atoms_per_pass == k
    assert KMPClassifierCV(fit_mode="prefit", **kw).fit(Xd, yd).atoms_per_pass_ == 1  # k > 1 is backfit only
    assert KMPRegressorCV(**kw).fit(Xd, yd.astype(float)).atoms_per_pass_ == 1
    monkeypatch.setattr(_kmp_cv, "TABLE_BYTES", 150 * 150 * 8 - 1)  # numpy input, the table over its budget
    assert KMPClassifierCV(**kw).fit(X, y).atoms_per_pass_ == k


@pytest.mark.parametrize("params, match", [
    ({"atoms_per_pass": 0}, r"atoms_per_pass must be 'auto'.*got atoms_per_pass=0\. E\.g\."),
    ({"atoms_per_pass": "fast"}, r"atoms_per_pass must be 'auto'.*got atoms_per_pass='fast'"),
    ({"atoms_per_pass": 2.0}, r"atoms_per_pass must be 'auto'.*got atoms_per_pass=2\.0"),
    ({"atoms_per_pass": True}, r"atoms_per_pass must be 'auto'.*got atoms_per_pass=True"),
    ({"atoms_per_pass": 4, "fit_mode": "prefit"}, r"atoms_per_pass=4 needs fit_mode='backfit'.*'prefit'"),
])
def test_bad_atoms_per_pass_is_named_before_any_cluster(params, match, monkeypatch):
    def no_cluster(*a, **k):
        raise AssertionError("a cluster was asked for before the arguments were checked")

    monkeypatch.setattr(_kmp_cv, "client_session", no_cluster)
    X, y = make_moons(60, noise=0.3, random_state=0)
    with pytest.raises(ValueError, match=match):
        KMPClassifierCV(client="embedded", **params).fit(X, y)


@parametrize_with_checks([KMPClassifierCV(n_basis=8, cv=3, atoms_per_pass=3)])
def test_sklearn_compatible_with_k(estimator, check):
    check(estimator)
