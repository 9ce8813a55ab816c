"""The paper's lossy ℓ0 step (``l0_step="paper"``: ``γ Σ λ_i β_i``) against dense oracles: a generic
minimiser of the step's objective, and Algorithm 3.4 written out in numpy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.svm import SVC

from kmp_dask.kernels import get_kernel
from kmp_dask.reduced import ReducedSetCompressor, l0_path
from kmp_dask.reduced._sparse import _l0_step


def _problem(P=8, m=1, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(P, 3))
    K = get_kernel("rbf", gamma=0.5)(Z, Z)
    alpha = rng.normal(size=(P, m))
    return K, K @ alpha, np.einsum("ij,ik,kj->j", alpha, K, alpha)


@pytest.mark.parametrize("m", [1, 2])
def test_paper_step_minimises_its_objective(m):
    K, F, wsq = _problem(m=m)
    s = np.random.default_rng(1).uniform(0.3, 2.0, size=len(K))
    gamma = 0.7

    def objective(x):  # ‖w − Σ λ_i s_i φ(z_i)‖² + γ Σ_ij λ_ij s_i, from pool quantities
        B = s[:, None] * x.reshape(len(K), m)
        return float(np.sum(wsq - 2 * np.einsum("ij,ij->j", B, F) + np.einsum("ij,ik,kj->j", B, K, B))
                     + gamma * np.sum(B))

    ref = minimize(objective, np.zeros(len(K) * m), method="BFGS", options={"gtol": 1e-10}).x.reshape(len(K), m)
    got = _l0_step(K, F, s, gamma, "paper")
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)
    assert objective(got.ravel()) <= objective(ref.ravel()) + 1e-9


def test_paper_lossy_l0_is_algorithm_3_4_with_the_papers_step():
    K, F, wsq = _problem(P=10, seed=3)
    gamma = 0.2
    levels = l0_path(K, F, wsq, gammas=[gamma], refit=False, n_levels=None, step="paper", max_iter=50)
    s, beta = np.ones(len(K)), None  # Algorithm 3.4: rescale by the step's λ until nothing moves
    for _ in range(50):
        D = np.diag(s)
        lam = np.linalg.solve(D @ K @ D, D @ (F - gamma / 2))
        new = s[:, None] * lam
        if beta is not None and np.linalg.norm(new - beta) <= 1e-8 * np.linalg.norm(new):
            break
        beta, s = new, s * np.abs(lam[:, 0])
    assert len(levels) == 1
    np.testing.assert_array_equal(levels[0].support, np.arange(len(K)))  # nothing is dropped
    np.testing.assert_allclose(levels[0].coef, beta, rtol=1e-8)
    np.testing.assert_allclose(beta, np.linalg.solve(K, F - gamma / 2), rtol=1e-8)  # K⁻¹(f − γ/2)


def test_compressor_l0_step_option():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    svc = SVC(C=1.0, gamma=0.5).fit(X, y)
    ridge = ReducedSetCompressor(0.5, method="l0").fit(svc)
    again = ReducedSetCompressor(0.5, method="l0", l0_step="ridge").fit(svc)
    assert ridge.expansion_.coef.tobytes() == again.expansion_.coef.tobytes()  # the default is the ridge step
    paper = ReducedSetCompressor(0.5, method="l0", l0_step="paper", l0_gammas=[0.0, 1e-3]).fit(svc)
    assert paper.n_vectors_ >= 1
    with pytest.raises(ValueError, match="l0_step must be one of"):
        ReducedSetCompressor(method="l0", l0_step="linear").fit(svc)
