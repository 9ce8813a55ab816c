"""The paper's chunking (§3.6, ``chunking="cyclic"``) against a dense numpy implementation of its
update: each piece compressed in turn against the full w with the other pieces fixed."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.svm import SVC

from kmp_dask import KernelExpansion
from kmp_dask.kernels import get_kernel
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.reduced._cyclic import cyclic_chunking, piece_budgets


def _oracle_hmp(K, pool, t, tsq, budget):
    """Backfitted eq.-13 pursuit on ``pool`` against the target with values ``t`` on the pool
    (K_pool,pool = K[pool][:, pool]): explicit solves, no incremental factor."""
    S = []
    for _ in range(budget):
        if S:
            Kss = K[np.ix_(pool[S], pool[S])]
            r = t - K[np.ix_(pool, pool[S])] @ np.linalg.solve(Kss, t[S])
        else:
            r = t.copy()
        score = np.sum(r ** 2, axis=1) / np.diag(K)[pool]
        score[S] = -np.inf
        S.append(int(np.argmax(score)))
    Kss = K[np.ix_(pool[S], pool[S])]
    beta = np.linalg.solve(Kss, t[S])
    return pool[S], beta, tsq - np.einsum("ij,ij->j", t[S], beta)


def _oracle_cycle(X, alpha, K, piece, keep, sweeps, start):
    """The paper's cycle, written out: ŵ = Σ_j ŵ_j, piece j re-chosen against t_j = w − Σ_{i≠j} ŵ_i."""
    N = len(X)
    pieces = [np.arange(a, min(a + piece, N)) for a in range(0, N, piece)]
    budget = keep // len(pieces)
    beta = alpha.copy() if start == "model" else np.zeros_like(alpha)  # ŵ = w or ŵ = 0 at the start
    history = []
    for sweep in range(sweeps):
        for rows in pieces:
            other = beta.copy()
            other[rows] = 0.0
            d = alpha - other                       # t_j = w − ŵ_{−j} as coefficients on all points
            t, tsq = K[rows] @ d, np.einsum("ij,ik,kj->j", d, K, d)
            idx, b, err = _oracle_hmp(K, rows, t, tsq, budget)
            cur = alpha - beta
            if sweep == 0 or err.sum() < np.einsum("ij,ik,kj->j", cur, K, cur).sum() * (1 - 1e-12):
                beta[rows] = 0.0
                beta[idx] = b
        d = alpha - beta
        history.append(float(np.einsum("ij,ik,kj->j", d, K, d).sum()))
    return beta, history


@pytest.mark.parametrize("start", ["zero", "model"])
@pytest.mark.parametrize("m", [1, 2])
def test_cyclic_chunking_is_the_papers_update(m, start):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    alpha = rng.normal(size=(60, m))
    k = get_kernel("rbf", gamma=0.4)
    K = k(X, X)
    exp = KernelExpansion(X, alpha, 0.0, k)
    got = cyclic_chunking(exp, piece_vectors=20, keep=9, max_sweeps=3, tol=0.0, start=start)
    beta, history = _oracle_cycle(X, alpha, K, 20, 9, 3, start)
    kept = np.flatnonzero(np.any(beta != 0, axis=1))
    assert len(got.vectors) == len(kept) == 9
    order = [int(np.flatnonzero(np.all(X == v, axis=1))[0]) for v in got.vectors]
    np.testing.assert_array_equal(np.sort(order), kept)
    np.testing.assert_allclose(got.coef, beta[order], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got.history, history, rtol=1e-8)
    d = alpha.copy()
    d[order] -= got.coef
    np.testing.assert_allclose(got.rkhs_error, np.einsum("ij,ik,kj->j", d, K, d), rtol=1e-8)
    assert history[-1] < history[0]  # the later sweeps improve on the first
    assert got.rkhs_error.sum() < np.einsum("ij,ik,kj->j", alpha, K, alpha).sum()  # better than ŵ = 0


def test_piece_budgets_share_keep_in_proportion():
    assert piece_budgets([20, 20, 20], 9).tolist() == [3, 3, 3]
    assert piece_budgets([30, 30, 10], 10).tolist() == [4, 4, 2]  # 4.29, 4.29, 1.43: the one left to .43
    assert piece_budgets([5, 5], 3).sum() == 3


def test_compressor_cyclic_chunking_and_its_checks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    svc = SVC(C=10.0, gamma=0.5).fit(X, y)
    plain = ReducedSetCompressor(12, chunk_vectors=60, chunking="cyclic", refine=False).fit(svc)
    ref = cyclic_chunking(plain.target_.expansion, piece_vectors=60, keep=12, criterion=plain.criterion)
    np.testing.assert_array_equal(plain.expansion_.support_vectors, ref.vectors)
    np.testing.assert_allclose(plain.rkhs_error_, ref.rkhs_error, rtol=1e-6)  # exact error = tracked one
    assert plain.stop_reason_ == "chunk_cyclic"
    refined = ReducedSetCompressor(12, chunk_vectors=60, chunking="cyclic").fit(svc)
    assert refined.rkhs_error_.sum() <= plain.rkhs_error_.sum() * (1 + 1e-9)  # exact coefficients on the set
    with pytest.raises(ValueError, match="chunking must be one of"):
        ReducedSetCompressor(12, chunk_vectors=60, chunking="paper").fit(svc)
