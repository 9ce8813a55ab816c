"""The factored RBF scoring of several atoms per pass (``ScoreQuery(factored=True)``) against a
dense float64 oracle: ``d_kᵀWR`` and ``‖d_k‖²_W`` for RBF candidate columns."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask.blockops import _kmp as B
from kmp_dask.blockops._state import Workspace
from kmp_dask.kernels import get_kernel


def _state(X, R, gamma, w=None):
    sq = np.einsum("ij,ij->i", X, X)
    return SimpleNamespace(kernels=[get_kernel("rbf", gamma=gamma)], views=SimpleNamespace(Xtr=X, sq_tr=sq),
                           fit=SimpleNamespace(R=R), wtr=w, work=Workspace(), cache=SimpleNamespace(n=0))


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-4)])
@pytest.mark.parametrize("weighted", [False, True])
def test_factored_scores_match_dense_float64(dtype, rtol, weighted):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(700, 6)).astype(dtype)  # more rows than one factored row block
    R = rng.normal(size=(700, 2))
    w = rng.uniform(0.0, 2.0, size=700) if weighted else None
    Z = np.vstack([X[[3, 50, 699]], rng.normal(size=(20, 6)).astype(dtype)])  # a row's own column too
    gamma = 0.3
    st = _state(X, R, gamma, w)
    Z_sq = np.einsum("ij,ij->i", Z, Z)
    assert B._factored_gamma(st, Z_sq) == gamma
    out = B._score_factored(st, Z, Z_sq, gamma)
    K = rbf_kernel(X.astype(np.float64), Z.astype(np.float64), gamma=gamma)
    ww = np.ones(len(X)) if w is None else w
    corr = K.T @ (ww[:, None] * R)
    sqn = np.einsum("ij,ij,i->j", K, K, ww)
    np.testing.assert_allclose(out["corr"], corr, rtol=0, atol=rtol * np.abs(corr).max())
    np.testing.assert_allclose(out["sqn"], sqn, rtol=rtol)
    # the exact path agrees with the oracle just as well
    exact = B._score_candidates(st, Z, Z_sq, False)
    np.testing.assert_allclose(exact["corr"], corr, rtol=0, atol=rtol * np.abs(corr).max())


def test_factored_scoring_falls_back_outside_its_exponent_range():
    X = np.random.default_rng(1).normal(size=(50, 3)) * 10.0  # γ·(max‖x‖² + max‖z‖²) far above the bound
    st = _state(X, np.ones((50, 1)), 1.0)
    assert B._factored_gamma(st, np.einsum("ij,ij->i", X[:4], X[:4])) is None
    st.kernels = [get_kernel("laplacian", gamma=0.1)]
    assert B._factored_gamma(st, np.zeros(2)) is None  # not an RBF kernel
