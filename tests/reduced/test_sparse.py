"""ℓ1 / ℓ0 reduced-set paths (kmp_dask.reduced._sparse) against dense, independent computations.

The expansion w_j = Σ_i α_ij φ(x_i) has its own points x_i inside the pool, so f = Kzz[:, sv] α
and wsq = αᵀ K_sv,sv α are exact and an exact reduced set exists.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from kmp_dask.reduced._sparse import SparseLevel, l0_path, l1_path, refit_on_support, rkhs_error

# a lasso or rescaling run that stops at max_iter is a test failure unless the test expects it
pytestmark = pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")

# ℓ0 sweeps: a γ at which a vector is marginal can need ~100 rescaling sweeps (the default is 50,
# after the paper's "10–20 steps"); the ConvergenceWarning at 50 is tested separately
L0_ITER = 300


def _rbf(X, Y, gamma):
    d = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2.0 * X @ Y.T
    return np.exp(-gamma * np.maximum(d, 0.0))


def _problem(P=80, n_sv=20, m=1, seed=0, gamma=1.0, dim=3):
    """Pool Z (P points), the first n_sv of which carry the expansion; returns Kzz, f, wsq, alpha."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(P, dim))
    K = _rbf(Z, Z, gamma)
    alpha = rng.normal(size=(n_sv, m))
    f = K[:, :n_sv] @ alpha
    wsq = np.einsum("ij,ik,kj->j", alpha, K[:n_sv, :n_sv], alpha)
    return K, f, wsq, alpha


@pytest.fixture(scope="module")
def one():
    return _problem(m=1, seed=0)


@pytest.fixture(scope="module")
def multi():
    return _problem(m=3, seed=1)


def _lam_grid(f, group, lo=1e-9, n=60):
    row = np.linalg.norm(f, axis=1) if group else np.abs(f).max(axis=1)
    return 2.0 * row.max() * np.geomspace(1.0, lo, n)


# ---------------------------------------------------------------------------------------------
# the dense quantities
# ---------------------------------------------------------------------------------------------


def test_refit_on_support_equals_dense_solve(multi):
    K, f, _, _ = multi
    S = np.array([0, 3, 7, 11, 40, 41, 79])
    np.testing.assert_allclose(refit_on_support(K, f, S), np.linalg.solve(K[np.ix_(S, S)], f[S]), rtol=1e-9, atol=1e-12)
    # one-output f as a vector gives an (k, 1) result
    one_out = refit_on_support(K, f[:, 0], S)
    assert one_out.shape == (len(S), 1)
    np.testing.assert_allclose(one_out[:, 0], np.linalg.solve(K[np.ix_(S, S)], f[S, 0]), rtol=1e-9)


def test_refit_on_a_singular_support_is_still_the_projection():
    K, f, wsq, _ = _problem(P=40, n_sv=10, m=2, seed=3)
    S = np.arange(10)
    Sd = np.concatenate([S, S[:3] + 0])  # duplicates are rejected ...
    with pytest.raises(ValueError, match="repeated"):
        refit_on_support(K, f, Sd)
    # ... but duplicate *points* (identical rows of K) are fine: pool + a copy of three sv points
    Kd = np.block([[K, K[:, :3]], [K[:3, :], K[:3, :3]]])
    fd = np.vstack([f, f[:3]])
    S2 = np.concatenate([S, [40, 41, 42]])
    beta = refit_on_support(Kd, fd, S2)
    np.testing.assert_allclose(rkhs_error(Kd, fd, wsq, S2, beta), 0.0, atol=1e-9 * wsq.max())


def test_rkhs_error_matches_an_explicit_norm(multi):
    K, f, wsq, alpha = multi
    n_sv = alpha.shape[0]
    S = np.array([2, 5, 30, 60])
    beta = np.random.default_rng(5).normal(size=(len(S), f.shape[1]))
    # ‖Σ α φ(x_sv) − Σ β φ(z_S)‖² with the stacked coefficient vector on [sv, S]
    idx = np.concatenate([np.arange(n_sv), S])
    c = np.vstack([alpha, -beta])
    explicit = np.einsum("ij,ik,kj->j", c, K[np.ix_(idx, idx)], c)
    np.testing.assert_allclose(rkhs_error(K, f, wsq, S, beta), explicit, rtol=1e-10)
    np.testing.assert_allclose(rkhs_error(K, f, wsq, np.arange(n_sv), alpha), 0.0, atol=1e-10 * wsq.max())


# ---------------------------------------------------------------------------------------------
# ℓ1
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("coupled", [True, False])
def test_l1_largest_level_is_exact(multi, coupled):
    K, f, wsq, _ = multi
    levels = l1_path(K, f, wsq, alphas=_lam_grid(f, coupled), n_levels=None, coupled=coupled)
    last = levels[-1]
    assert isinstance(last, SparseLevel)
    assert np.all(last.rkhs_error / wsq < 1e-8)
    assert last.n_vectors <= K.shape[0]


def test_l1_one_output_default_grid(one):
    K, f, wsq, _ = one
    levels = l1_path(K, f, wsq, n_levels=None, tol=1e-8)
    # the first vector to enter the lasso is the one with the largest |gradient| = 2|f|
    assert levels[0].n_vectors == 1 and levels[0].support[0] == int(np.argmax(np.abs(f[:, 0])))
    assert levels[0].param > levels[-1].param  # the path runs from large to small λ
    assert all(lev.coef.shape == (lev.n_vectors, 1) and lev.rkhs_error.shape == (1,) for lev in levels)
    assert all(np.all(np.diff(lev.support) > 0) for lev in levels)


def _assert_monotone(levels):
    """Sizes strictly increase and the total error does not (the returned front is Pareto)."""
    sizes = [lev.n_vectors for lev in levels]
    assert sizes == sorted(set(sizes)), sizes
    total = np.array([lev.rkhs_error.sum() for lev in levels])
    assert np.all(np.diff(total) <= 1e-12 * total[0]), total


@pytest.mark.parametrize("coupled", [True, False])
def test_refit_paths_error_non_increasing(multi, coupled):
    K, f, wsq, _ = multi
    _assert_monotone(l1_path(K, f, wsq, n_levels=None, coupled=coupled, tol=1e-8))
    _assert_monotone(l0_path(K, f, wsq, n_levels=None, coupled=coupled, max_iter=L0_ITER))


def test_refit_coefficients_are_the_projection(multi):
    K, f, wsq, _ = multi
    for lev in l1_path(K, f, wsq, coupled=True) + l0_path(K, f, wsq, coupled=True, max_iter=L0_ITER):
        np.testing.assert_allclose(lev.coef, np.linalg.solve(K[np.ix_(lev.support, lev.support)], f[lev.support]),
                                   rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(lev.rkhs_error, rkhs_error(K, f, wsq, lev.support, lev.coef), rtol=1e-12)


@pytest.mark.parametrize("path", [l1_path, lambda *a, **k: l0_path(*a, **k, max_iter=L0_ITER)], ids=["l1", "l0"])
def test_coupled_shares_and_independent_unites_supports(multi, path):
    K, f, wsq, _ = multi
    # coupled without refit: the group penalty / shared scales zero whole rows, so every output
    # uses every support vector
    for lev in path(K, f, wsq, coupled=True, refit=False, n_levels=None):
        assert np.all(lev.coef != 0)
    # independent: support = union of the outputs' own supports; each output's coefficients are
    # the projection of w_j on its own vectors (zero elsewhere)
    indep = path(K, f, wsq, coupled=False, n_levels=None)
    assert any(np.any(lev.coef == 0) for lev in indep)  # the outputs really differ somewhere
    for lev in indep:
        used = lev.coef != 0
        assert np.all(used.any(axis=1))  # union: no vector is used by no output
        for j in range(f.shape[1]):
            Sj = lev.support[used[:, j]]
            own = refit_on_support(K, f[:, j], Sj)[:, 0]
            np.testing.assert_allclose(lev.coef[used[:, j], j], own, rtol=1e-7, atol=1e-9)


def test_l1_solution_satisfies_kkt_of_the_rkhs_problem(one, multi):
    """min_β βᵀKβ − 2βᵀf + λ Σ_i ‖β_i·‖: gradient g = 2(Kβ − f); on the support
    g_i = −λ β_i/‖β_i‖, off it ‖g_i‖ ≤ λ. Checked on Kzz itself, not on the transformed
    (Lᵀ, L⁻¹f) problem, with λ = the reported param: this also checks the 2P scaling."""
    for (K, f, wsq, _), coupled in [(one, True), (multi, True), (multi, False)]:
        group = coupled and f.shape[1] > 1
        levels = l1_path(K, f, wsq, refit=False, n_levels=None, coupled=coupled, tol=1e-12, max_iter=100_000,
                         alphas=_lam_grid(f, group, lo=1e-3, n=30))
        assert len(levels) >= 5
        for lev in levels:
            lam = lev.param
            beta = np.zeros_like(f)
            beta[lev.support] = lev.coef
            g = 2.0 * (K @ beta - f)
            if group:
                on = np.zeros(len(f), dtype=bool)
                on[lev.support] = True
                nb = np.linalg.norm(beta[on], axis=1, keepdims=True)
                np.testing.assert_allclose(g[on], -lam * beta[on] / nb, atol=1e-5 * lam)
                assert np.all(np.linalg.norm(g[~on], axis=1) <= lam * (1 + 1e-5))
            else:
                on = beta != 0
                np.testing.assert_allclose(g[on], -lam * np.sign(beta[on]), atol=1e-5 * lam)
                assert np.all(np.abs(g[~on]) <= lam * (1 + 1e-5))


def test_n_levels_thins_evenly_and_keeps_the_ends(multi):
    K, f, wsq, _ = multi
    full = l1_path(K, f, wsq, n_levels=None)
    thin = l1_path(K, f, wsq, n_levels=4)
    assert len(full) > 4 and len(thin) == 4
    assert thin[0].n_vectors == full[0].n_vectors and thin[-1].n_vectors == full[-1].n_vectors
    assert {lev.n_vectors for lev in thin} <= {lev.n_vectors for lev in full}


# ---------------------------------------------------------------------------------------------
# ℓ0
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("duplicates", [False, True])
def test_l0_lossless_finds_the_rank(m, duplicates):
    """Linear kernel in 3-D: 50 points span a 3-dimensional feature space, so 3 vectors suffice."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(50, 3))
    if duplicates:
        X[40:] = X[:10]  # exact duplicates: a symmetric fixed point of the rescaling unless merged
    K = X @ X.T
    alpha = rng.normal(size=(50, m))
    f = K @ alpha
    wsq = np.einsum("ij,ik,kj->j", alpha, K, alpha)
    levels = l0_path(K, f, wsq, gammas=[0.0], n_levels=None)
    assert len(levels) == 1
    lev = levels[0]
    assert lev.param == 0.0 and 1 <= lev.n_vectors <= 3
    assert np.all(lev.rkhs_error / wsq < 1e-10)
    unrefit = l0_path(K, f, wsq, gammas=[0.0], refit=False)[0]
    assert np.all(unrefit.rkhs_error / wsq < 1e-10)


def test_l0_default_grid_spans_sizes_and_reaches_lossless(one):
    K, f, wsq, _ = one
    levels = l0_path(K, f, wsq, n_levels=None, max_iter=L0_ITER)
    sizes = [lev.n_vectors for lev in levels]
    assert sizes[0] <= 3 and sizes[-1] >= 15
    assert levels[-1].rkhs_error[0] / wsq[0] < 1e-6
    assert levels[0].param > levels[-1].param  # larger γ, fewer vectors


def test_convergence_problems_are_reported():
    K, f, wsq, _ = _problem(P=60, n_sv=20, seed=2, gamma=0.05)  # ill-conditioned
    with pytest.warns(ConvergenceWarning, match="l1_path: coordinate descent stopped at max_iter=2"):
        l1_path(K, f, wsq, max_iter=2)
    with pytest.warns(ConvergenceWarning, match="l0_path: in .* rescaling runs"):
        l0_path(K, f, wsq, max_iter=2, refit=False)


def test_zero_function_gives_no_levels(one):
    K, f, _, _ = one
    assert l1_path(K, 0 * f, [0.0]) == [] and l0_path(K, 0 * f, [0.0]) == []


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def test_bad_inputs_raise(multi):
    K, f, wsq, _ = multi
    asym = K.copy()
    asym[0, 1] += 0.1
    nan = K.copy()
    nan[2, 2] = np.nan
    indefinite = K - 2.0 * np.eye(len(K))
    cases = [
        (lambda: l1_path(K[:, :-1], f, wsq), "Kzz must be the square"),
        (lambda: l0_path(asym, f, wsq), "Kzz must be symmetric"),
        (lambda: l1_path(nan, f, wsq), "Kzz contains 1 non-finite"),
        (lambda: l1_path(indefinite, f, wsq), "not positive semi-definite|negative diagonal"),
        (lambda: l1_path(K, f[:-1], wsq), r"f must have shape \(P, m\) = \(80, m\)"),
        (lambda: l0_path(K, f, wsq[:2]), r"wsq must have shape \(m,\) = \(3,\)"),
        (lambda: l1_path(K, f, -wsq), "wsq must be finite and ≥ 0"),
        (lambda: l1_path(K, f, 1e-3 * wsq), "smaller than the squared norm"),
        (lambda: l1_path(K, f, wsq, alphas=[1.0, -1.0]), "alphas must be"),
        (lambda: l0_path(K, f, wsq, gammas=[np.inf]), "gammas must be"),
        (lambda: l1_path(K, f, wsq, n_levels=0), "n_levels must be a positive integer"),
        (lambda: l0_path(K, f, wsq, max_iter=1.5), "max_iter must be a positive integer"),
        (lambda: refit_on_support(K, f, [0, 80]), r"support indices must lie in \[0, 80\)"),
        (lambda: refit_on_support(K, f, [0.0, 1.0]), "integer pool indices"),
        (lambda: rkhs_error(K, f, wsq, [0, 1], np.zeros((3, 3))), r"coef must have shape \(len\(support\), m\) = \(2"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()
