"""The in-process (dense) pursuit against the engine path and the dense oracles; refit='pool'."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.svm import SVC
from test_hmp import _dense_coupled_hmp, _problem, _rkhs_error, _run

from kmp_dask import KernelExpansion
from kmp_dask.greedy._hmp import dense_hyperplane_pursuit
from kmp_dask.reduced import ReducedSetCompressor


def _dense(X, alpha, kernel, pool=None, **kw):
    pool = X if pool is None else pool
    exp = KernelExpansion(X, alpha, 0.0, kernel)
    F = kernel(pool, X) @ alpha
    return dense_hyperplane_pursuit(pool, kernel=kernel, F=F, wsq=exp.rkhs_sqnorm(), **kw)


@pytest.mark.parametrize("m, candidates", [(1, None), (3, None), (2, 25)])
def test_dense_path_equals_the_engine_path(m, candidates):
    X, alpha, k = _problem(m=m, gamma=0.7, seed=3)
    eng = _run(X, alpha, k, n_vectors=40, candidates=candidates, seed=7)[2]
    den = _dense(X, alpha, k, n_vectors=40, candidates=candidates, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(den.index, eng.index)
    np.testing.assert_allclose(den.coef, eng.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(den.rkhs_error, eng.rkhs_error, rtol=1e-9, atol=1e-12 * eng.wsq.max())
    np.testing.assert_allclose(den.pool_sse, eng.pool_sse, rtol=1e-8, atol=1e-12)
    for lvl in (1, 10, 40):
        np.testing.assert_allclose(den.prefix_coef(lvl)[1], eng.prefix_coef(lvl)[1], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("m", [1, 3])
def test_dense_path_equals_the_dense_reference_and_backfit_solution(m):
    X, alpha, k = _problem(m=m, gamma=0.7, seed=3)
    res = _dense(X, alpha, k, n_vectors=15)
    ref_index, ref_coef = _dense_coupled_hmp(X, alpha, k, 15)
    np.testing.assert_array_equal(res.index, ref_index)
    np.testing.assert_allclose(res.coef, ref_coef, rtol=1e-8, atol=1e-10)
    K = k(X, X)  # backfit: K_ss⁻¹ K_s: α at every level
    for lvl in (3, 9, 15):
        s = res.index[:lvl]
        np.testing.assert_allclose(res.prefix_coef(lvl)[1], np.linalg.solve(K[np.ix_(s, s)], K[s] @ alpha),
                                   rtol=1e-8, atol=1e-10)


def test_dense_path_reaches_zero_rkhs_error_and_is_monotone():
    X, alpha, k = _problem(n=80, gamma=3.0)
    res = _dense(X, alpha, k, n_vectors=80)
    wsq = res.wsq
    dense = _rkhs_error(X, alpha, k, res.index, res.coef)
    assert np.all(dense <= 1e-9 * wsq), (dense, wsq, res.stop_reason)
    assert np.all(np.diff(res.rkhs_error.sum(axis=1)) <= 1e-12 * wsq.sum())


def test_dense_path_skips_duplicates():
    X, alpha, k = _problem(n=40, gamma=0.5)
    pool = np.vstack([X, X[:10]])
    res = _dense(X, alpha, k, pool=pool, n_vectors=45)
    assert len(np.unique(res.vectors, axis=0)) == len(res.vectors)
    assert res.stop_reason in ("converged", "linear_dependence", "exhausted")


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0, random_state=0)
    svc = SVC(C=10.0, gamma=0.3).fit(X[:200], y[:200])
    return svc, X[:200], y[:200], X[200:], y[200:]


def test_estimator_dense_and_engine_give_the_same_model(binary):
    svc, X, y, Xte, _ = binary
    a = ReducedSetCompressor(n_vectors=0.3, dense=True).fit(svc, X, y)
    b = ReducedSetCompressor(n_vectors=0.3, dense=False).fit(svc, X, y)
    np.testing.assert_array_equal(a.support_index_, b.support_index_)
    np.testing.assert_allclose(a.decision_function(Xte), b.decision_function(Xte), rtol=1e-8, atol=1e-9)
    assert [p["n_vectors"] for p in a.path_] == [p["n_vectors"] for p in b.path_]
    np.testing.assert_allclose([p["rkhs_error"] for p in a.path_], [p["rkhs_error"] for p in b.path_],
                               rtol=1e-8, atol=1e-12)


def test_refit_on_the_pool_is_least_squares_and_exact_with_all_vectors(binary):
    svc, X, y, Xte, _ = binary
    comp = ReducedSetCompressor(n_vectors=12, refit="pool", optimize_threshold=False).fit(svc, X, y)
    exp = comp.expansion_
    k = svc.get_params()["gamma"]
    from sklearn.metrics.pairwise import rbf_kernel

    f = svc.decision_function(X) - svc.intercept_[0]
    beta, *_ = np.linalg.lstsq(rbf_kernel(X, exp.support_vectors, gamma=k), f, rcond=None)
    np.testing.assert_allclose(exp.coef[:, 0], beta, rtol=1e-7, atol=1e-9)
    base = ReducedSetCompressor(n_vectors=12, optimize_threshold=False).fit(svc, X, y)
    np.testing.assert_array_equal(comp.support_index_, base.support_index_)  # same selection
    fit_pool = np.sum((exp.decision_function(X)[:, 0] - svc.intercept_[0] - f) ** 2)
    fit_base = np.sum((base.expansion_.decision_function(X)[:, 0] - svc.intercept_[0] - f) ** 2)
    assert fit_pool <= fit_base + 1e-9
    assert np.all(comp.rkhs_error_ >= base.rkhs_error_ - 1e-9)  # the RKHS optimum is the backfit one
    n_sv = len(svc.support_)
    full = ReducedSetCompressor(n_vectors=n_sv, refit="pool", optimize_threshold=False).fit(svc, svc.support_vectors_)
    np.testing.assert_allclose(full.decision_function(Xte), svc.decision_function(Xte), atol=1e-4)


def test_refit_pool_needs_numpy_rows_and_bad_values_are_named(binary, tmp_path):
    svc, X, y, _, _ = binary
    with pytest.raises(ValueError, match="refit"):
        ReducedSetCompressor(refit="nope").fit(svc, X, y)
    with pytest.raises(ValueError, match="dense"):
        ReducedSetCompressor(dense="maybe").fit(svc, X, y)


def test_meta_classifier_passes_refit(binary):
    from kmp_dask.reduced import ReducedSetClassifier

    _, X, y, Xte, _ = binary
    clf = ReducedSetClassifier(SVC(C=10.0, gamma=0.3), n_vectors=0.2, refit="pool").fit(X, y)
    assert clf.compressor_.refit == "pool"
    assert clf.score(X, y) > 0.8


def _dense_exact_greedy(X, alpha, kernel, n):
    """Backfitted greedy choosing the vector that lowers ‖w − ŵ‖² most (dense reference)."""
    K = kernel(X, X)
    f = K @ alpha
    wsq = np.einsum("ij,ik,kj->j", alpha, K, alpha).sum()
    sel = []
    for _ in range(n):
        best, arg = -np.inf, None
        for z in range(len(X)):
            if z in sel:
                continue
            s = sel + [z]
            beta = np.linalg.solve(K[np.ix_(s, s)], f[s])
            dec = wsq - (wsq - np.einsum("ij,ij->", beta, f[s]))  # ‖ŵ‖² = βᵀ f_S at the optimum
            if dec > best + 1e-12:
                best, arg = dec, z
        sel.append(arg)
    return np.asarray(sel)


@pytest.mark.parametrize("m", [1, 2])
def test_decrease_criterion_is_the_exact_greedy_and_keeps_the_oracles(m):
    X, alpha, k = _problem(n=60, m=m, gamma=0.7, seed=5)
    res = _dense(X, alpha, k, n_vectors=8, criterion="decrease")
    np.testing.assert_array_equal(res.index, _dense_exact_greedy(X, alpha, k, 8))
    np.testing.assert_allclose(res.rkhs_error[-1], _rkhs_error(X, alpha, k, res.index, res.coef),
                               rtol=1e-8, atol=1e-10)
    eq13 = _dense(X, alpha, k, n_vectors=1)  # one step: the exact decrease is at least eq. 13's
    assert res.rkhs_error[1].sum() <= eq13.rkhs_error[1].sum() * (1 + 1e-12)
    full = _dense(X, alpha, k, n_vectors=60, criterion="decrease")
    assert np.all(np.diff(full.rkhs_error.sum(axis=1)) <= 1e-12 * full.wsq.sum())
    assert full.rkhs_error[-1].sum() <= 1e-9 * full.wsq.sum()


def test_decrease_criterion_without_backfitting_is_eq13(binary):
    """The default criterion ("decrease") with the basic pursuit (backfit=False) scores eq. 13, which
    is that step's exact decrease: the same path as criterion="eq13"."""
    svc, X, y, _, _ = binary
    basic = {c: ReducedSetCompressor(n_vectors=8, criterion=c, backfit=False).fit(svc, X, y) for c in ("eq13",
                                                                                                   "decrease")}
    np.testing.assert_array_equal(basic["eq13"].support_index_, basic["decrease"].support_index_)
    np.testing.assert_array_equal(basic["eq13"].expansion_.coef, basic["decrease"].expansion_.coef)
    with pytest.raises(ValueError, match="criterion"):
        ReducedSetCompressor(criterion="nope").fit(svc, X, y)
    comp = ReducedSetCompressor(n_vectors=10, criterion="decrease").fit(svc, X, y)
    assert comp.n_vectors_ == 10
