"""Sparse kernel CCA (§4): the greedy rule against a dense reference, full KCCA with all rows."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask import SparseKCCA
from kmp_dask.kernels import get_kernel


def _views(n=80, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.normal(size=(n, 2))
    X = np.hstack([t, rng.normal(size=(n, 2))]) + 0.1 * rng.normal(size=(n, 4))
    Y = np.hstack([t[:, ::-1] ** 2, rng.normal(size=(n, 1))])
    return X, Y


def _dense_greedy(Kx, Ky, n):
    """§4's rule from the paper: argmax (K̃x K̃y)_ii / √((K̃x²)_ii (K̃y²)_ii), deflate both kernels."""
    Kx, Ky = Kx.copy(), Ky.copy()
    sel = []
    for _ in range(n):
        den = np.sqrt(np.einsum("ij,ij->j", Kx, Kx) * np.einsum("ij,ij->j", Ky, Ky))
        score = np.full(len(Kx), -np.inf)
        live = den > 0  # chosen rows have zero deflated columns
        score[live] = np.einsum("ij,ij->j", Kx, Ky)[live] / den[live]
        score[sel] = -np.inf
        i = int(np.argmax(score))
        sel.append(i)
        for K in (Kx, Ky):
            col = K[:, i] / np.sqrt(K[i, i])
            K -= np.outer(col, col)
    return sel


def _full_kcca(X, Y, kx, ky, reg):
    """Regularised KCCA on feature-space coordinates from the eigendecomposition of each kernel."""
    def coords(K):
        w, U = np.linalg.eigh(K)
        return U * np.sqrt(np.maximum(w, 0))

    A, B = coords(kx(X, X)), coords(ky(Y, Y))
    A, B = A - A.mean(0), B - B.mean(0)
    N = len(A)

    def inv_sqrt(C):
        lam = reg * np.trace(C) / len(C)
        w, U = np.linalg.eigh(C + lam * np.eye(len(C)))
        return (U / np.sqrt(w)) @ U.T

    return np.linalg.svd(inv_sqrt(A.T @ A / N) @ (A.T @ B / N) @ inv_sqrt(B.T @ B / N), compute_uv=False)


def test_greedy_rows_equal_the_dense_rule():
    X, Y = _views()
    k = get_kernel("rbf", gamma=0.5)
    est = SparseKCCA(12, gamma_x=0.5, gamma_y=0.5).fit(X, Y)
    assert est.components_index_.tolist() == _dense_greedy(k(X, X), k(Y, Y), 12)
    assert np.all(np.diff(est.trace_residual_path_, axis=0) <= 1e-12)


def test_all_rows_give_the_full_regularised_kcca():
    X, Y = _views()
    est = SparseKCCA(80, gamma_x=0.5, gamma_y=0.5, reg=1e-2).fit(X, Y)
    k = get_kernel("rbf", gamma=0.5)
    np.testing.assert_allclose(est.correlations_[:10], _full_kcca(X, Y, k, k, 1e-2)[:10], rtol=1e-6)


def test_transform_gives_correlated_variates_and_shapes():
    X, Y = _views(n=200, seed=1)
    est = SparseKCCA(15, gamma_x=0.5, gamma_y=0.5, candidates="auto", random_state=0).fit(X, Y)
    Fx, Fy = est.transform(X, Y)
    assert Fx.shape == Fy.shape == (200, 15)
    assert est.transform(X).shape == (200, 15)
    assert np.corrcoef(Fx[:, 0], Fy[:, 0])[0, 1] > 0.9
    assert np.all(np.diff(est.correlations_) <= 1e-12)


def test_views_with_different_row_counts_are_refused():
    X, Y = _views()
    with pytest.raises(ValueError, match="X has 80 rows, Y has 79"):
        SparseKCCA(5).fit(X, Y[:-1])
