"""Hyperplane matching pursuit on the engine against dense oracles (Weston & Bakır §3.1–3.2)."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask import KernelExpansion
from kmp_dask.greedy._hmp import pool_errors
from kmp_dask.greedy._hmp_setup import compress_on_pool, pool_rkhs_norms
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore


def _problem(n=120, d=3, m=2, gamma=2.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    alpha = rng.normal(size=(n, m))
    return X, alpha, get_kernel("rbf", gamma=gamma)


def _run(X, alpha, kernel, *, chunk_rows=37, outputs=None, pool=None, **kw):
    exp = KernelExpansion(X, alpha, 0.0, kernel)
    pool = X if pool is None else pool
    outputs = list(range(alpha.shape[1])) if outputs is None else outputs
    with make_engine(None, InMemoryStore(pool, chunk_rows=chunk_rows)) as engine:
        wsq, (res,) = compress_on_pool(engine, exp, alpha if pool is X else None, n_rows=len(pool),
                                       outputs_groups=[outputs], **kw)
        sse = pool_errors(engine, res, [1, res.n_levels - 1]) if res.backfit and res.n_levels > 1 else None
        n_calls = engine.n_calls
    return exp, wsq, res, sse, n_calls


def _rkhs_error(X, alpha, kernel, index, coef):
    """‖w − ŵ‖² per output, computed densely (independent of the pursuit's bookkeeping)."""
    K = kernel(X, X)
    f = K @ alpha
    Kss = K[np.ix_(index, index)]
    wsq = np.einsum("ij,ik,kj->j", alpha, K, alpha)
    return wsq - 2 * np.einsum("ij,ij->j", coef, f[index]) + np.einsum("ij,ik,kj->j", coef, Kss, coef)


def test_norms_from_the_pool_equal_the_dense_quadratic_form():
    X, alpha, k = _problem()
    exp = KernelExpansion(X, alpha, 0.0, k)
    with make_engine(None, InMemoryStore(X, chunk_rows=29)) as engine:
        wsq = pool_rkhs_norms(engine, exp, alpha)
    np.testing.assert_allclose(wsq, np.einsum("ij,ik,kj->j", alpha, k(X, X), alpha), rtol=1e-12)
    np.testing.assert_allclose(exp.rkhs_sqnorm(), wsq, rtol=1e-12)


def test_all_pool_points_allowed_reaches_zero_rkhs_error():
    X, alpha, k = _problem(n=80, gamma=3.0)
    _, wsq, res, _, _ = _run(X, alpha, k, n_vectors=80)
    dense = _rkhs_error(X, alpha, k, res.index, res.coef)
    assert np.all(dense <= 1e-9 * wsq), (dense, wsq, res.stop_reason)
    np.testing.assert_allclose(res.rkhs_error[-1], dense, atol=1e-9 * wsq.max())


@pytest.mark.parametrize("backfit", [True, False])
def test_rkhs_error_never_increases_and_matches_the_dense_error(backfit):
    X, alpha, k = _problem(gamma=0.5)
    _, wsq, res, _, _ = _run(X, alpha, k, n_vectors=30, backfit=backfit)
    err = res.rkhs_error.sum(axis=1)
    assert np.all(np.diff(err) <= 1e-12 * err[0])
    for level in (1, 5, res.n_levels - 1):
        index, coef = res.prefix_coef(level)
        np.testing.assert_allclose(res.rkhs_error[level], _rkhs_error(X, alpha, k, index, coef),
                                   rtol=1e-8, atol=1e-10 * wsq.max())


def test_backfitted_coefficients_equal_the_dense_solution():
    X, alpha, k = _problem(gamma=0.5)
    _, _, res, _, _ = _run(X, alpha, k, n_vectors=25)
    K = k(X, X)
    f = K @ alpha
    for level in (1, 7, 25):
        index, coef = res.prefix_coef(level)
        ref = np.linalg.solve(K[np.ix_(index, index)], f[index])  # K_zz⁻¹ K_z,: α
        np.testing.assert_allclose(coef, ref, rtol=1e-8, atol=1e-10)


def _dense_coupled_hmp(X, alpha, kernel, n):
    """Eq. 13 with backfitting, written directly from the paper with dense matrices."""
    K = kernel(X, X)
    f = K @ alpha
    sel = []
    for _ in range(n):
        if sel:
            beta = np.linalg.solve(K[np.ix_(sel, sel)], f[sel])
            r = f - K[:, sel] @ beta
        else:
            r = f.copy()
        score = np.einsum("ij,ij->i", r, r) / np.diag(K)
        score[sel] = -np.inf
        sel.append(int(np.argmax(score)))
    return np.asarray(sel), np.linalg.solve(K[np.ix_(sel, sel)], f[sel])


@pytest.mark.parametrize("m", [1, 3])
def test_coupled_selection_equals_a_dense_reference(m):
    X, alpha, k = _problem(m=m, gamma=0.7, seed=3)
    _, _, res, _, _ = _run(X, alpha, k, n_vectors=15)
    ref_index, ref_coef = _dense_coupled_hmp(X, alpha, k, 15)
    np.testing.assert_array_equal(res.index, ref_index)
    np.testing.assert_allclose(res.coef, ref_coef, rtol=1e-8, atol=1e-10)


def test_basic_pursuit_equals_algorithm_3_2():
    X, alpha, k = _problem(m=1, gamma=0.7, seed=4)
    K = k(X, X)
    beta = np.zeros(len(X))
    for _ in range(12):  # algorithm 3.2 in the dual: residual coefficients α − β
        r = K @ (alpha[:, 0] - beta)
        j = int(np.argmax(r * r / np.diag(K)))
        beta[j] += r[j] / K[j, j]
    _, _, res, _, _ = _run(X, alpha, k, n_vectors=len(np.flatnonzero(beta)), backfit=False)
    dense = np.zeros(len(X))
    dense[res.index] = res.coef[:, 0]
    np.testing.assert_allclose(dense, beta, rtol=1e-9, atol=1e-12)


def test_same_path_whatever_the_partitioning():
    X, alpha, k = _problem(n=150, gamma=0.5)
    runs = [_run(X, alpha, k, chunk_rows=c, n_vectors=20)[2] for c in (150, 41, 16)]
    for res in runs[1:]:
        np.testing.assert_array_equal(res.index, runs[0].index)
        np.testing.assert_allclose(res.coef, runs[0].coef, rtol=1e-12, atol=1e-14)


def test_one_pass_per_vector():
    X, alpha, k = _problem()
    _, _, res, _, n_calls = _run(X, alpha, k, n_vectors=10)
    assert res.n_passes == 11  # one scoring pass per vector, plus the one that finds the stop
    assert n_calls == 1 + res.n_passes + 1  # + the init pass, + pool_errors


def test_pool_errors_equal_the_dense_prediction_errors():
    X, alpha, k = _problem(gamma=0.5)
    _, _, res, sse, _ = _run(X, alpha, k, n_vectors=12)
    K = k(X, X)
    f = K @ alpha
    for row, level in zip(sse, (1, res.n_levels - 1), strict=True):
        index, coef = res.prefix_coef(level)
        np.testing.assert_allclose(row, ((f - K[:, index] @ coef) ** 2).sum(axis=0), rtol=1e-9)
    np.testing.assert_allclose(res.pool_sse[level], sse[-1], rtol=1e-9)


def test_probabilistic_search_is_seeded_and_exhaustive_when_s_covers_the_pool():
    X, alpha, k = _problem(gamma=0.5)
    a = _run(X, alpha, k, n_vectors=15, candidates=20, seed=5)[2]
    b = _run(X, alpha, k, n_vectors=15, candidates=20, seed=5)[2]
    full = _run(X, alpha, k, n_vectors=15)[2]
    np.testing.assert_array_equal(a.index, b.index)
    assert not np.array_equal(a.index, full.index)
    c = _run(X, alpha, k, n_vectors=15, candidates=10_000, seed=5)[2]
    np.testing.assert_array_equal(c.index, full.index)


def test_independent_pursuits_use_one_output_each():
    X, alpha, k = _problem(m=2, gamma=0.5)
    exp = KernelExpansion(X, alpha, 0.0, k)
    with make_engine(None, InMemoryStore(X, chunk_rows=50)) as engine:
        wsq, results = compress_on_pool(engine, exp, alpha, n_rows=len(X), outputs_groups=[[0], [1]], n_vectors=8)
    for j, res in enumerate(results):
        ref_index, ref_coef = _dense_coupled_hmp(X, alpha[:, [j]], k, 8)
        np.testing.assert_array_equal(res.index, ref_index)
        np.testing.assert_allclose(res.coef, ref_coef, rtol=1e-8, atol=1e-10)


def test_duplicate_pool_rows_are_skipped_as_dependent():
    X, alpha, k = _problem(n=40, gamma=0.5)
    pool = np.vstack([X, X[:10]])  # exact duplicates: never selected twice
    exp, wsq, res, _, _ = _run(X, alpha, k, pool=pool, n_vectors=45)
    assert len(np.unique(res.vectors, axis=0)) == len(res.vectors)
    assert res.stop_reason in ("converged", "linear_dependence", "exhausted")
