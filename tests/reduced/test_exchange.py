"""Single-vector exchanges (``exchange_vectors``, ``ReducedSetCompressor(exchange=...)``) against
brute force: no single swap left that lowers ‖w − ŵ‖², the best subset where the greedy path
misses it, exact coefficients K_SS⁻¹ f(S), and the compressor's contract around them."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.svm import SVC

from kmp_dask import KernelExpansion, load, save
from kmp_dask.greedy._exchange import exchange_vectors
from kmp_dask.greedy._hmp import dense_hyperplane_pursuit
from kmp_dask.kernels import get_kernel
from kmp_dask.reduced import ReducedSetClassifier, ReducedSetCompressor
from kmp_dask.reduced._build import level_error
from kmp_dask.store import create_store


def _small(n=14, m=2, seed=0, gamma=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    alpha = rng.normal(size=(n, m))
    k = get_kernel("rbf", gamma=gamma)
    K = k(X, X)
    F = K @ alpha
    return X, k, K, F, np.einsum("ij,ij->j", alpha, F)


def _err(K, F, wsq, S):
    S = list(S)
    beta = np.linalg.solve(K[np.ix_(S, S)], F[S])
    return wsq - np.einsum("ij,ij->j", F[S], beta), beta


@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("k", [2, 4, 6])
def test_no_single_swap_lowers_the_error_afterwards(m, k):
    X, kern, K, F, wsq = _small(m=m, seed=m)
    start = dense_hyperplane_pursuit(X, kernel=kern, F=F, wsq=wsq, n_vectors=k).index
    res = exchange_vectors(X, kernel=kern, F=F, wsq=wsq, index=start, max_sweeps=50)
    err, beta = _err(K, F, wsq, res.index)
    np.testing.assert_allclose(res.rkhs_error, err, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.coef, beta, rtol=1e-8, atol=1e-10)   # K_SS⁻¹ f(S)
    assert err.sum() <= _err(K, F, wsq, start)[0].sum() + 1e-12
    for i, z in itertools.product(range(k), range(len(X))):
        if z in res.index:
            continue
        T = res.index.copy()
        T[i] = z
        assert _err(K, F, wsq, T)[0].sum() >= err.sum() - 1e-9 * wsq.sum(), (i, z)


def test_exchanges_find_the_best_subset_the_greedy_path_misses():
    X, kern, K, F, wsq = _small(m=2, seed=0)
    greedy = dense_hyperplane_pursuit(X, kernel=kern, F=F, wsq=wsq, n_vectors=4).index
    best = min(itertools.combinations(range(len(X)), 4), key=lambda S: _err(K, F, wsq, S)[0].sum())
    best_err = _err(K, F, wsq, best)[0].sum()
    assert _err(K, F, wsq, greedy)[0].sum() > best_err * 1.05  # the case this test is about
    res = exchange_vectors(X, kernel=kern, F=F, wsq=wsq, index=greedy)
    assert sorted(res.index.tolist()) == sorted(best)
    assert res.n_swaps >= 1
    np.testing.assert_allclose(res.rkhs_error.sum(), best_err, rtol=1e-9)


def test_zero_sweeps_keep_the_start_and_bad_inputs_are_named():
    X, kern, K, F, wsq = _small()
    res = exchange_vectors(X, kernel=kern, F=F, wsq=wsq, index=[3, 5], max_sweeps=0)
    assert res.index.tolist() == [3, 5] and res.n_swaps == 0
    np.testing.assert_allclose(res.rkhs_error, _err(K, F, wsq, [3, 5])[0])
    with pytest.raises(ValueError, match="max_sweeps"):
        exchange_vectors(X, kernel=kern, F=F, wsq=wsq, index=[3], max_sweeps=-1)
    with pytest.raises(ValueError, match="distinct"):
        exchange_vectors(X, kernel=kern, F=F, wsq=wsq, index=[3, 3])


def test_duplicate_pool_rows_never_enter_twice():
    X, kern, _, _, _ = _small(n=30, m=1, seed=4)
    alpha = np.random.default_rng(1).normal(size=(30, 1))
    pool = np.vstack([X, X[:10]])  # ten rows twice
    F = kern(pool, X) @ alpha
    wsq = np.einsum("ij,ij->j", alpha, kern(X, X) @ alpha)
    start = dense_hyperplane_pursuit(pool, kernel=kern, F=F, wsq=wsq, n_vectors=12).index
    res = exchange_vectors(pool, kernel=kern, F=F, wsq=wsq, index=start)
    assert len(np.unique(pool[res.index], axis=0)) == len(res.index)
    assert np.all(np.isfinite(res.coef))


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=0)
    return X, y, SVC(kernel="rbf", gamma=0.3, C=10.0).fit(X, y)


def test_compressor_exchange_lowers_the_level_error_and_reports_the_models_own(binary):
    X, y, svc = binary
    plain = ReducedSetCompressor(n_vectors=12).fit(svc, X, y)
    comp = ReducedSetCompressor(n_vectors=12, exchange=10, exchange_guard=False).fit(svc, X, y)
    assert [p["rkhs_error"] for p in comp.path_] == [p["rkhs_error"] for p in plain.path_]  # the greedy path
    assert comp.n_vectors_ == 12
    assert comp.rkhs_error_.sum() < plain.rkhs_error_.sum()
    exp = comp.target_.expansion
    K = exp.kernels[0](X, X)
    F = exp.with_coef(exp.coef, 0.0).decision_function(X).reshape(len(X), -1)
    S = comp.support_index_
    err, beta = _err(K, F, comp.wsq_, S)
    np.testing.assert_allclose(comp.rkhs_error_, err, rtol=1e-8)
    np.testing.assert_allclose(comp.expansion_.coef, beta, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(comp.expansion_.support_vectors, X[S])
    five = comp.expansion_at(5)
    assert five.n_vectors == 5
    assert _err(K, F, comp.wsq_, [np.flatnonzero((X == v).all(1))[0] for v in five.support_vectors])[0].sum() <= \
        plain._levels[4].rkhs_error.sum() + 1e-12
    assert comp.score(X, y) > 0.8


def test_compressor_exchange_with_all_vectors_allowed_is_exact(binary):
    X, y, svc = binary
    n = len(svc.support_)
    comp = ReducedSetCompressor(n_vectors=n, exchange=5, criterion="decrease").fit(svc)  # pool = the SVs
    assert comp.rkhs_error_.sum() <= 1e-8 * comp.wsq_.sum()
    np.testing.assert_allclose(comp.decision_function(X), svc.decision_function(X), atol=1e-5)


def test_compressor_exchange_composes_with_refit_and_survives_save_and_pickle(binary, tmp_path):
    X, y, svc = binary
    comp = ReducedSetCompressor(n_vectors=10, exchange=3, refit="pool", criterion="decrease").fit(svc, X, y)
    exp = comp.target_.expansion
    F = exp.with_coef(exp.coef, 0.0).decision_function(X)
    Ks = exp.kernels[0](X, comp.expansion_.support_vectors)
    ls, *_ = np.linalg.lstsq(Ks, F, rcond=None)
    np.testing.assert_allclose(comp.expansion_.coef.ravel(), np.ravel(ls), rtol=1e-6, atol=1e-8)
    save(comp, tmp_path / "c")
    for other in (load(tmp_path / "c"), pickle.loads(pickle.dumps(comp))):
        np.testing.assert_array_equal(other.decision_function(X), comp.decision_function(X))
        np.testing.assert_array_equal(other.expansion_at(6).coef, comp.expansion_at(6).coef)


def test_meta_classifier_passes_exchange(binary):
    X, y, _ = binary
    clf = ReducedSetClassifier(SVC(gamma=0.3, C=10.0), n_vectors=10, exchange=4, exchange_guard=False).fit(X, y)
    assert clf.compressor_.exchange == 4 and clf.compressor_.exchange_guard is False
    assert clf.compressor_.rkhs_error_.sum() <= clf.compressor_._levels[9].rkhs_error.sum() + 1e-12


@pytest.mark.parametrize("kw, match", [
    (dict(exchange=-1), "exchange must be an int >= 0"),
    (dict(exchange=True), "exchange must be an int >= 0"),
    (dict(exchange=2.5), "exchange must be an int >= 0"),
    (dict(exchange=2, exchange_guard="yes"), "exchange_guard must be True or False"),
    (dict(exchange=3, method="l1"), "exchange works with method='hmp'"),
    (dict(exchange=3, backfit=False), "exchange works with method='hmp'"),
    (dict(exchange=3, chunk_vectors=40), "exchange works with method='hmp'"),
])
def test_bad_exchange_settings_are_named(binary, kw, match):
    X, y, svc = binary
    with pytest.raises(ValueError, match=match):
        ReducedSetCompressor(n_vectors=5, **kw).fit(svc, X, y)


def test_exchange_on_a_store_pool_runs_on_the_engine_and_independent_outputs_are_refused(binary, tmp_path):
    X, y, svc = binary
    pool = create_store(tmp_path / "pool.zarr", X, y, classes=[0, 1])
    on_store = ReducedSetCompressor(n_vectors=5, exchange=2, client="sync").fit(svc, pool)
    in_memory = ReducedSetCompressor(n_vectors=5, exchange=2, optimize_threshold=False).fit(svc, X)
    np.testing.assert_array_equal(on_store.support_index_, in_memory.support_index_)
    np.testing.assert_allclose(on_store.rkhs_error_, in_memory.rkhs_error_, rtol=1e-8, atol=1e-10)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    svc3 = SVC(gamma=0.3).fit(X, y3)
    with pytest.raises(ValueError, match="coupled=True"):
        ReducedSetCompressor(n_vectors=5, exchange=2, coupled=False).fit(svc3, X, y3)
    comp = ReducedSetCompressor(n_vectors=8, exchange=2).fit(svc3, X, y3)  # coupled: one shared set
    assert comp.n_vectors_ == 8 and comp.score(X, y3) > 0.5


def test_exchange_on_a_kernel_expansion_of_its_own_vectors():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 2))
    exp = KernelExpansion(X, rng.normal(size=(60, 1)), 0.0, get_kernel("rbf", gamma=1.0))
    comp = ReducedSetCompressor(n_vectors=60, exchange=3).fit(exp)
    assert comp.rkhs_error_.sum() <= 1e-8 * comp.wsq_.sum()
    np.testing.assert_allclose(comp.expansion_.decision_function(X), exp.decision_function(X), atol=1e-5)


def test_exchange_guard_keeps_the_greedy_level_where_the_labelled_pool_error_would_rise():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=1)
    svc = SVC(kernel="rbf", gamma=0.3, C=10.0).fit(X, y)
    guarded = ReducedSetCompressor(n_vectors=15, exchange=10, criterion="decrease").fit(svc, X, y)
    free = ReducedSetCompressor(n_vectors=15, exchange=10, criterion="decrease", exchange_guard=False).fit(svc, X, y)
    kept_greedy = swapped = 0
    for k in range(1, 16):
        g_lv, f_lv = guarded._levels[k - 1], free._levels[k - 1]
        err_greedy = level_error(guarded._route_state(), g_lv, X, X, y, y, exchange=False)
        err_free = level_error(free._route_state(), f_lv, X, X, y, y)
        err_kept = level_error(guarded._route_state(), g_lv, X, X, y, y)
        assert err_kept <= err_greedy  # never worse on the labelled pool than the greedy level
        if err_free > err_greedy:      # the guard's case: the greedy level, as the path has it
            kept_greedy += 1
            np.testing.assert_array_equal(g_lv.exchanged.index, g_lv.index)
            assert err_kept == err_greedy
        else:                          # otherwise the same exchanged vectors as without the guard
            np.testing.assert_array_equal(g_lv.exchanged.index, f_lv.exchanged.index)
            swapped += f_lv.exchanged.n_swaps > 0
    assert kept_greedy >= 1 and swapped >= 1  # both branches ran
    np.testing.assert_array_equal(guarded.expansion_at(15).support_vectors, guarded.expansion_.support_vectors)
