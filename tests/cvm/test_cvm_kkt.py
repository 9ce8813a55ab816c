"""Optimality of the core vector machine checked without the solver under test.

The exact minimum enclosing ball of all points comes from scipy's SLSQP on the MEB dual
(``min αᵀK̃α`` over the simplex), certified by the Frank–Wolfe duality gap computed here in numpy:
for a feasible α, ``f(α) − f* <= αᵀ∇f(α) − min_i ∇f(α)_i = 2(αᵀQα − min_i (Qα)_i)``, whatever
produced α. The core-set weights and ``simplex_qp`` are checked against the KKT conditions of the
simplex QP (α >= 0, Σα = 1, ``(Qα)_i = λ`` where α_i > 0 and ``>= λ`` elsewhere, λ = αᵀQα).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import make_classification

from kmp_dask import CVMClassifier
from kmp_dask.greedy._cvm import QP_EPS, simplex_qp
from kmp_dask.greedy._cvm_qp import SMOQP, ActiveSetQP
from kmp_dask.kernels import get_kernel

GAMMA, C, EPS = 0.3, 10.0, 1e-3


def _with_points_per_pass(k):
    """``ProblemConfig.__init__`` with ``points_per_pass=k`` (the estimators do not expose it)."""
    import kmp_dask.greedy._cvm_problems as gp

    real = gp.ProblemConfig.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        object.__setattr__(self, "points_per_pass", k)

    return init


def _meb_matrix(X, y, kernel, C):
    """K̃ = y yᵀ ∘ (K + 1) + I / C: the L2-SVM dual as a minimum enclosing ball."""
    yy = np.where(y == 1, 1.0, -1.0)
    return np.outer(yy, yy) * (kernel(X, X) + 1.0) + np.eye(len(X)) / C, yy


def _fw_gap(Q, alpha):
    """Certified upper bound on ``αᵀQα − min over the simplex`` for a feasible α."""
    g = Q @ alpha
    return 2.0 * (alpha @ g - g.min())


def _slsqp_meb(Q):
    """``argmin αᵀQα`` over the simplex by scipy (SLSQP), from the uniform point."""
    n = len(Q)
    res = minimize(lambda a: a @ Q @ a, np.full(n, 1.0 / n), jac=lambda a: 2.0 * Q @ a, method="SLSQP",
                   bounds=[(0.0, None)] * n, constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1.0,
                                                           "jac": lambda a: np.ones_like(a)}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    assert res.success, res.message
    alpha = np.clip(res.x, 0.0, None)
    return alpha / alpha.sum()


def _assert_kkt(Q, alpha, tol):
    """The simplex QP's KKT conditions, in numpy, scaled by the diagonal of Q."""
    scale = float(np.max(np.diag(Q)))
    assert alpha.min() >= 0.0 and abs(alpha.sum() - 1.0) <= 1e-12
    g = Q @ alpha
    lam = float(alpha @ g)
    support = alpha > 1e-10
    assert np.abs(g[support] - lam).max() <= tol * scale, np.abs(g[support] - lam).max()
    assert g[~support].min(initial=np.inf) >= lam - tol * scale


def test_simplex_qp_meets_the_kkt_conditions_and_an_independent_solver():
    X, y = make_classification(60, n_features=4, n_informative=3, n_redundant=0, random_state=7)
    Q, _ = _meb_matrix(X, y, get_kernel("rbf", gamma=GAMMA), C)
    alpha, _ = simplex_qp(Q, np.full(len(Q), 1.0 / len(Q)), 1e-12)
    _assert_kkt(Q, alpha, 1e-9)
    assert _fw_gap(Q, alpha) <= 1e-9 * Q[0, 0]
    ref = _slsqp_meb(Q)
    f, f_ref = alpha @ Q @ alpha, ref @ Q @ ref
    assert f <= f_ref * (1 + 1e-9)                          # never worse than scipy's optimum
    assert f_ref - _fw_gap(Q, ref) <= f                      # and not below its certified lower bound
    np.testing.assert_allclose(alpha, ref, atol=1e-5)       # the same minimiser (Q is positive definite)


@pytest.mark.parametrize("block", [1, 8])
def test_active_set_qp_in_blocks_and_with_removals_meets_the_kkt_conditions(block):
    """From the uniform point most weights leave the support (rank-one downdates of the factor);
    points then rejoin one at a time or ``block`` at a time (a block row of the factor)."""
    X, y = make_classification(120, n_features=4, n_informative=3, n_redundant=0, random_state=3)
    Q, _ = _meb_matrix(X, y, get_kernel("rbf", gamma=GAMMA), C)
    qp = ActiveSetQP(block=block)
    alpha, _ = qp.solve(Q[:60, :60], np.full(60, 1.0 / 60), 1e-12)
    assert qp.n_downdates > 0 and qp.n_refactors == 0
    _assert_kkt(Q[:60, :60], alpha, 1e-9)
    alpha, _ = qp.solve(Q, alpha, 1e-12)  # 60 more points join, weight 0: a warm start
    _assert_kkt(Q, alpha, 1e-9)
    np.testing.assert_allclose(alpha, _slsqp_meb(Q), atol=1e-5)
    L = qp.L
    np.testing.assert_allclose(L @ L.T, Q[np.ix_(qp.active, qp.active)], rtol=0, atol=1e-10 * Q[0, 0])
    np.testing.assert_allclose(qp.w, np.linalg.solve(L, np.ones(len(L))), rtol=1e-9)


@pytest.mark.parametrize("points_per_pass", [1, 8])
def test_cvm_ball_is_within_the_paper_guarantee_of_an_independent_exact_meb(points_per_pass, monkeypatch):
    import kmp_dask.greedy._cvm_problems as gp

    monkeypatch.setattr(gp.ProblemConfig, "__init__", _with_points_per_pass(points_per_pass))
    X, y = make_classification(250, n_features=5, n_informative=4, n_redundant=0, random_state=0)
    k = get_kernel("rbf", gamma=GAMMA)
    est = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=0).fit(X, y)
    res = est.results_[0]
    if points_per_pass > 1:
        assert res.n_iter < len(res.core_index) - 1  # some iterations admitted several rows
    Q, yy = _meb_matrix(X, y, k, C)
    kt = 1.0 + 1.0 + 1.0 / C
    ref = _slsqp_meb(Q)
    f_hi = ref @ Q @ ref
    f_lo = f_hi - _fw_gap(Q, ref)
    assert 0.0 <= f_hi - f_lo <= 1e-7 * kt                   # certified tight: far inside the ε margin
    R2_hi = kt - f_lo                                        # the exact ball's R² lies in [kt − f_hi, R2_hi]
    assert res.R2 <= R2_hi * (1 + 1e-9)                      # the core set's ball is never larger
    assert R2_hi <= (1 + EPS) ** 2 * res.R2                   # and within the (1+ε)² guarantee
    # the weights on the core set solve the core-set QP to the loop's tolerance (the support's
    # gradients within ε R² of the smallest: docs/cvm.md "The QP"), and R² is κ̃ − αᵀK̃_Sα
    S = res.core_index
    QS = Q[np.ix_(S, S)]
    g = QS @ res.alpha
    assert res.alpha.min() >= 0.0 and abs(res.alpha.sum() - 1.0) <= 1e-12
    assert g[res.alpha > 0].max() - g.min() <= QP_EPS * EPS * res.R2 * (1 + 1e-6)
    assert _fw_gap(QS, res.alpha) <= 2 * QP_EPS * EPS * res.R2 * (1 + 1e-6)
    assert abs(res.R2 - (kt - res.alpha @ Q[np.ix_(S, S)] @ res.alpha)) <= 1e-12 * kt
    # every training point within (1+ε)R of the centre
    alpha = np.zeros(len(X))
    alpha[S] = res.alpha
    dist2 = alpha @ Q @ alpha - 2 * Q @ alpha + kt
    assert dist2.max() <= (1 + EPS) ** 2 * res.R2 * (1 + 1e-9)
    # the decision function is the primal of the ball: f(x) = Σ α y (k + 1)
    F = k(X, X[S]) @ (res.alpha * yy[S]) + np.sum(res.alpha * yy[S])
    np.testing.assert_allclose(est.decision_function(X), F, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_smo_qp_from_scratch_and_warm_started_against_an_independent_solver(seed):
    """The loop's QP (pairwise SMO steps on the kept gradient) against scipy's SLSQP on random
    simplex QPs: feasible, its stopping rule met (support gradients within tol of the smallest),
    the objective within the Frank–Wolfe bound of scipy's, and the kept gradient equal to ``Qα``
    when the points join one at a time (the core-set loop's warm starts)."""
    rng = np.random.default_rng(seed)
    X, y = make_classification(80, n_features=4, n_informative=3, n_redundant=0, random_state=seed)
    Q, _ = _meb_matrix(X, y, get_kernel("rbf", gamma=float(rng.uniform(0.1, 1.0))), float(rng.uniform(0.5, 20)))
    ref = _slsqp_meb(Q)
    f_ref = ref @ Q @ ref
    tol = 1e-10 * Q[0, 0]
    alpha, steps = SMOQP().solve(Q, np.full(len(Q), 1.0 / len(Q)), tol)
    assert steps > 0 and alpha.min() >= 0.0 and abs(alpha.sum() - 1.0) <= 1e-12
    g = Q @ alpha
    assert g[alpha > 0].max() - g.min() <= tol * (1 + 1e-6)
    assert abs(alpha @ Q @ alpha - f_ref) <= 2 * tol + 1e-9 * f_ref
    qp, a = SMOQP(), np.ones(1)
    for n in range(1, len(Q) + 1):  # one point joins per call, weight 0
        a, _ = qp.solve(Q[:n, :n], a, 0.0, rel=1e-3, kappa=Q[0, 0])
        np.testing.assert_allclose(qp.g, Q[:n, :n] @ a, rtol=0, atol=1e-12 * Q[0, 0])
        assert abs(qp.level - a @ Q[:n, :n] @ a) <= 1e-12 * Q[0, 0]
    assert a.min() >= 0.0 and abs(a.sum() - 1.0) <= 1e-12
    f = a @ Q @ a
    assert f_ref * (1 - 1e-9) <= f <= f_ref + _fw_gap(Q, a)  # the FW bound holds for whatever produced a
    assert _fw_gap(Q, a) <= 2e-3 * (Q[0, 0] - qp.level) * (1 + 1e-6)  # the relative stopping rule
