"""Bounds of Hussain & Shawe-Taylor (NIPS 2008): sparse-KPCA compression bound and the KMP bound.

Hand computations are written out with ``math`` independently of ``kmp_dask.bounds``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kmp_dask.bounds import (
    kcca_bound,
    kmp_bound,
    kmp_bound_argmin,
    kmp_bound_from_count,
    kmp_bound_path,
    kpca_bound_argmin,
    kpca_bound_path,
    kpca_compression_bound,
)

E = math.e


# ------------------------------------------------------------------------------------------------
# formula checks against hand computations
# ------------------------------------------------------------------------------------------------

def test_kpca_bound_hand_computation():
    # m = 10, k = 2, R = 2 (R² = 4), δ = 0.1; 8 residuals outside the compression set, mean 12/8 = 1.5
    residuals = [1.0, 2.0, 3.0, 0.5, 0.5, 1.0, 2.0, 2.0]
    # 1.5 + 4·sqrt((2·ln(10e/2) + ln(2·10/0.1)) / (2·8))
    #   2·ln(5e) = 2·(1.609438 + 1) = 5.218876;  ln(200) = 5.298317;  sum/16 = 0.657325
    #   sqrt = 0.810756;  ×4 = 3.243022;  total ≈ 4.743022
    expected = 1.5 + 4.0 * math.sqrt((2 * math.log(10 * E / 2) + math.log(200.0)) / 16.0)
    assert expected == pytest.approx(4.743022, abs=1e-6)
    assert kpca_compression_bound(residuals, k=2, m=10, R=2.0, delta=0.1) == pytest.approx(expected, rel=1e-12)


def test_kpca_bound_k_zero_and_k_equals_m():
    # k = 0: the k·ln(em/k) term vanishes; mean 0.25, R = 1, m = 4, δ = 0.05
    expected = 0.25 + math.sqrt(math.log(2 * 4 / 0.05) / (2 * 4))
    assert kpca_compression_bound([0.0, 0.5, 0.25, 0.25], k=0, m=4, R=1.0) == pytest.approx(expected, rel=1e-12)
    assert kpca_compression_bound([], k=4, m=4, R=1.0) == math.inf


def test_kmp_bound_hand_computation():
    # m = 100, k = 3, t = 5, δ = 0.05: n = m − k − t = 92
    #   (k+1)·log2(4e·92/4) = 4·log2(250.08) ≈ 31.86
    #   k·log2(e·100/3)     = 3·log2(90.61)  ≈ 19.50
    #   t·log2(e·97/5)      = 5·log2(52.73)  ≈ 28.60
    #   2·log2(100) ≈ 13.29;  log2(2/0.05) = log2(40) ≈ 5.32;  sum ≈ 98.58;  ×2/92 ≈ 2.143
    n = 92
    total = (4 * math.log2(4 * E * n / 4) + 3 * math.log2(E * 100 / 3) + 5 * math.log2(E * 97 / 5)
             + 2 * math.log2(100) + math.log2(40))
    expected = 2.0 / n * total
    assert expected == pytest.approx(2.1431, abs=1e-4)
    assert kmp_bound_from_count(5, k=3, m=100, delta=0.05) == pytest.approx(expected, rel=1e-12)
    # the same from absolute errors: 5 of the 97 exceed γ = 0.5 (an error equal to γ is not an error)
    errors = np.full(97, 0.1)
    errors[:5] = [0.6, 1.0, 2.0, 0.51, 3.0]
    errors[5] = 0.5
    assert kmp_bound(errors, k=3, m=100, loss_threshold=0.5, delta=0.05) == pytest.approx(expected, rel=1e-12)


def test_kmp_bound_limits():
    # k = 0 and t = 0: only (k+1)·log2(4en/(k+1)) + 2·log2 m + log2(2/δ) remain; m = 1000, δ = 0.1
    expected = 2.0 / 1000 * (math.log2(4 * E * 1000) + 2 * math.log2(1000) + math.log2(20))
    assert kmp_bound_from_count(0, k=0, m=1000, delta=0.1) == pytest.approx(expected, rel=1e-12)
    # no clean point left: vacuous
    assert kmp_bound_from_count(2, k=8, m=10) == math.inf
    # 2(m − k − t) < k + 1: the dichotomy count falls back to 2^(2n); m = 101, k = 99, t = 0, n = 2
    expected = 2.0 / 2 * (2 * 2 + 99 * math.log2(E * 101 / 99) + 2 * math.log2(101) + math.log2(40))
    got = kmp_bound_from_count(0, k=99, m=101, delta=0.05)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got > 1.0  # vacuous but never negative (the paper's expression would be < 0 here)


# ------------------------------------------------------------------------------------------------
# properties the theorems imply
# ------------------------------------------------------------------------------------------------

def test_bounds_decrease_as_delta_grows():
    rng = np.random.default_rng(0)
    r = rng.uniform(0, 1, 90)
    kp = [kpca_compression_bound(r, 10, 100, 1.0, d) for d in (0.001, 0.01, 0.05, 0.1, 0.5, 0.9)]
    km = [kmp_bound_from_count(20, 10, 1000, d) for d in (0.001, 0.01, 0.05, 0.1, 0.5, 0.9)]
    assert np.all(np.diff(kp) < 0) and np.all(np.diff(km) < 0)


def test_bounds_grow_with_empirical_error():
    rng = np.random.default_rng(1)
    r = rng.uniform(0, 0.5, 190)
    kp = [kpca_compression_bound(r * s, 10, 200, 1.0) for s in (0.0, 0.5, 1.0, 1.5, 2.0)]
    assert np.all(np.diff(kp) > 0)
    km = [kmp_bound_from_count(t, 10, 10000) for t in range(0, 9000, 250)]
    assert np.all(np.diff(km) > 0)


def test_bounds_tighten_as_m_grows_at_fixed_empirical_error():
    ms = [50, 100, 200, 500, 1000, 5000, 20000, 100000]
    k = 5
    kp = [kpca_compression_bound(np.full(m - k, 0.3), k, m, 1.0) for m in ms]
    assert np.all(np.diff(kp) < 0)
    assert kp[-1] == pytest.approx(0.3, abs=0.02)  # the deviation term vanishes
    # KMP at a fixed error fraction t/(m − k) = 5 %
    km = [kmp_bound_from_count(round(0.05 * (m - k)), k, m) for m in ms]
    assert np.all(np.diff(km) < 0)


def test_bounds_are_above_the_empirical_error():
    rng = np.random.default_rng(2)
    for _ in range(50):
        m = int(rng.integers(2, 500))
        k = int(rng.integers(0, m))
        R = float(rng.uniform(0.5, 3))
        r = rng.uniform(0, R * R, m - k)
        assert kpca_compression_bound(r, k, m, R, float(rng.uniform(0.01, 0.99))) > r.mean()
        t = int(rng.integers(0, m - k + 1))
        assert kmp_bound_from_count(t, k, m, float(rng.uniform(0.01, 0.99))) >= t / (m - k)


# ------------------------------------------------------------------------------------------------
# path helpers
# ------------------------------------------------------------------------------------------------

def test_kpca_path_matches_scalar_and_argmin():
    rng = np.random.default_rng(3)
    m, R = 60, 1.5
    per_k = [rng.uniform(0, R * R * math.exp(-k / 5), m - k) for k in range(0, 20)]
    path = kpca_bound_path(per_k, m, R, 0.05)
    scalar = [kpca_compression_bound(r, k, m, R, 0.05) for k, r in enumerate(per_k)]
    np.testing.assert_allclose(path, scalar, rtol=1e-12)
    np.testing.assert_allclose(kpca_bound_path(per_k, m, R, ks=range(20)), path, rtol=1e-12)
    assert kpca_bound_argmin(per_k, m, R) == int(np.argmin(scalar))
    cm = kpca_bound_path(per_k, m, R, cumulative_min=True)
    np.testing.assert_allclose(cm, np.minimum.accumulate(scalar), rtol=1e-12)
    # a path starting at k = 3: k is read from the lengths
    assert kpca_bound_argmin(per_k[3:], m, R) == int(np.argmin(scalar[3:])) + 3


def test_kmp_path_matches_scalar_and_argmin():
    rng = np.random.default_rng(4)
    m, gamma = 400, 0.3
    per_k = [np.abs(rng.normal(0, math.exp(-k / 6), m - k)) for k in range(1, 40)]
    path = kmp_bound_path(per_k, m, gamma)
    scalar = [kmp_bound(e, k, m, gamma) for k, e in zip(range(1, 40), per_k, strict=True)]
    np.testing.assert_allclose(path, scalar, rtol=1e-12)
    assert kmp_bound_argmin(per_k, m, gamma) == 1 + int(np.argmin(scalar))
    assert kmp_bound_argmin(per_k, m, gamma, ks=range(1, 40)) == 1 + int(np.argmin(scalar))


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(delta=0.0), r"delta must be in the open interval \(0, 1\); got 0.0"),
    (dict(delta=1.0), r"delta.*\(0, 1\).*got 1.0"),
    (dict(delta=-0.2), r"delta.*got -0.2"),
    (dict(k=11, residuals_out=[]), r"k must satisfy 0 <= k <= m = 10; got 11"),
    (dict(k=-1), r"k must satisfy 0 <= k.*got -1"),
    (dict(k=2.5), r"k must be an integer; got 2.5"),
    (dict(m=0), r"m must satisfy 1 <= m; got 0"),
    (dict(R=0.0), r"R must be a finite real number > 0.*got 0.0"),
    (dict(R=-1.0), r"R must.*got -1.0"),
    (dict(residuals_out=[-0.5] + [1.0] * 7), r"residuals_out.*\[0, R²\].*negative value -0.5"),
    (dict(residuals_out=[4.5] + [1.0] * 7), r"residuals_out.*\[0, R²\] = \[0, 4.0\].*got 4.5"),
    (dict(residuals_out=[np.nan] + [1.0] * 7), r"residuals_out must be finite; got nan"),
    (dict(residuals_out=[1.0] * 7), r"residuals_out.*m − k = 10 − 2 = 8 values; got 7"),
])
def test_kpca_invalid_parameters(kwargs, match):
    args = dict(residuals_out=[1.0] * 8, k=2, m=10, R=2.0, delta=0.1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        kpca_compression_bound(**args)


def test_kpca_rounding_excursions_are_clipped():
    b = kpca_compression_bound([-1e-13, 1.0 + 1e-13, 0.5], k=1, m=4, R=1.0)
    assert b == pytest.approx(kpca_compression_bound([0.0, 1.0, 0.5], k=1, m=4, R=1.0), rel=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(loss_threshold=0.0), r"loss_threshold must be a finite real number > 0.*got 0.0"),
    (dict(loss_threshold=-1.0), r"loss_threshold.*got -1.0"),
    (dict(loss_threshold=math.inf), r"loss_threshold.*got inf"),
    (dict(delta=1.5), r"delta.*\(0, 1\).*got 1.5"),
    (dict(k=21, errors_out=[]), r"k must satisfy 0 <= k <= m = 20; got 21"),
    (dict(k=-3), r"k must satisfy.*got -3"),
    (dict(errors_out=[-0.1] + [0.0] * 14), r"errors_out must be absolute errors.*\[0, inf\).*-0.1"),
    (dict(errors_out=[0.0] * 3), r"errors_out.*m − k = 20 − 5 = 15 values; got 3"),
])
def test_kmp_invalid_parameters(kwargs, match):
    args = dict(errors_out=[0.0] * 15, k=5, m=20, loss_threshold=0.5, delta=0.05)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        kmp_bound(**args)


def test_kmp_count_and_path_validation():
    with pytest.raises(ValueError, match=r"t must satisfy 0 <= t <= m − k = 15; got 16"):
        kmp_bound_from_count(16, 5, 20)
    with pytest.raises(ValueError, match=r"t must satisfy 0 <= t.*got -1"):
        kmp_bound_from_count(-1, 5, 20)
    with pytest.raises(ValueError, match=r"ks must have one entry per array"):
        kmp_bound_path([[0.0] * 15], 20, 0.5, ks=[5, 6])
    with pytest.raises(ValueError, match=r"errors_out_per_k\[0\].*m − k = 20 − 4 = 16 values; got 15"):
        kmp_bound_path([[0.0] * 15], 20, 0.5, ks=[4])
    with pytest.raises(ValueError, match=r"residuals_out_per_k\[0\] has 25 values, more than m = 20"):
        kpca_bound_path([[0.0] * 25], 20, 1.0)
    with pytest.raises(ValueError, match=r"cumulative_min=True needs strictly increasing k"):
        kpca_bound_path([[0.0] * 15, [0.0] * 18], 20, 1.0, cumulative_min=True)


# ------------------------------------------------------------------------------------------------
# the paper's toy experiment (Figure 1, right), at the paper's size
# ------------------------------------------------------------------------------------------------

TOY_SCALE = 10.0  #: standard deviation of the 50 "large" dimensions (the others have 1); the paper
#: only says "considerably larger eigenvalues", so the factor is our choice (variance 100 vs 1)


def _greedy_sparse_kpca(K: np.ndarray, kmax: int):
    """Algorithm 1 densely: pick i maximising ‖K̃[:, i]‖² / K̃_ii, deflate K̃ ← K̃ − K̃[:, i]K̃[i, :]/K̃_ii.

    Returns the chosen indices and, for k = 0..kmax, the squared residuals diag(K̃) of the points
    outside the compression set.
    """
    Kt = K.copy()
    m = len(K)
    outside = np.ones(m, dtype=bool)
    chosen, residuals_per_k = [], []
    for k in range(kmax + 1):
        d = np.diag(Kt).copy()
        residuals_per_k.append(d[outside])
        if k == kmax:
            break
        score = np.full(m, -np.inf)
        ok = outside & (d > 1e-12 * d.max())
        score[ok] = (Kt[:, ok] ** 2).sum(axis=0) / d[ok]
        i = int(np.argmax(score))
        chosen.append(i)
        outside[i] = False
        col = Kt[:, i].copy()
        Kt -= np.outer(col, col) / col[i]
    return chosen, residuals_per_k


def test_toy_experiment_bound_picks_the_true_dimension():
    # 1000 points, 450 dimensions, N(0, 1) in every coordinate, 50 of them scaled up; linear kernel
    m, dim, true_dim, kmax, delta = 1000, 450, 50, 100, 0.05
    rng = np.random.default_rng(12)
    scales = np.ones(dim)
    scales[:true_dim] = TOY_SCALE
    X = rng.standard_normal((m, dim)) * scales
    K = X @ X.T
    R = math.sqrt(float(np.diag(K).max()))  # radius of the ball enclosing the training points
    chosen, residuals_per_k = _greedy_sparse_kpca(K, kmax)
    bounds = kpca_bound_path(residuals_per_k, m, R, delta)
    k_star = kpca_bound_argmin(residuals_per_k, m, R, delta)
    assert k_star == int(np.argmin(bounds))
    # measured over seeds 0..19: k* in 53..58 (the paper reports 46 with its own unstated scale);
    # a sparse KPCA made of data points needs a few more than 50 to cover the 50-dim signal subspace
    assert 45 <= k_star <= 62, k_star
    # the curve really has an interior minimum: well below its values at k = 0 and k = kmax
    assert bounds[k_star] < bounds[0] and bounds[k_star] < bounds[kmax]
    # it is an upper bound: above the training residual and above the residual of fresh points
    emp = residuals_per_k[k_star].mean()
    assert bounds[k_star] > emp
    X_test = rng.standard_normal((1000, dim)) * scales
    B = X[chosen[:k_star]]
    Q, _ = np.linalg.qr(B.T)  # orthonormal basis of span{x_i : i in the compression set}
    test_residual = ((X_test - (X_test @ Q) @ Q.T) ** 2).sum(axis=1)
    assert bounds[k_star] > test_residual.mean()


# ------------------------------------------------------------------------------------------------
# sparse KCCA: Theorem 4
# ------------------------------------------------------------------------------------------------

def _theorem_4_by_hand(t, k, m, delta):
    """Theorem 4's ε written out with ``math`` (valid when 2(m − k − t) >= k + 1, k >= 1, t >= 1)."""
    n = m - k - t
    total = ((k + 1) * math.log2(4 * E * n / (k + 1)) + k * math.log2(E * m / k) + t * math.log2(E * (m - k) / t)
             + 2 * math.log2(m) + math.log2(2 / delta))
    return 2.0 / n * total


def test_kcca_bound_hand_computation():
    # m = 12, k = 2: 10 pairs outside the basis; γ = 0.5 and |f_x − f_y| > 0.5 at exactly 3 of them
    fx = np.array([0.0, 1.0, -1.0, 0.2, 0.3, 2.0, 0.0, 0.1, -0.5, 0.4])
    fy = np.array([0.1, 0.2, -1.0, 0.2, 0.3, 0.5, 0.5, 0.1, 0.5, 0.4])   # |diff| 0.1 .8 0 0 0 1.5 .5 0 1 0
    # n = 12 − 2 − 3 = 7: 3·log2(4e·7/3) + 2·log2(6e) + 3·log2(10e/3) + 2·log2(12) + log2(40), × 2/7
    expected = _theorem_4_by_hand(3, 2, 12, 0.05)
    assert expected == pytest.approx(2.0 / 7 * (3 * math.log2(4 * E * 7 / 3) + 2 * math.log2(6 * E)
                                                + 3 * math.log2(10 * E / 3) + 2 * math.log2(12) + math.log2(40)))
    assert kcca_bound(fx, fy, k=2, m=12, loss_threshold=0.5) == pytest.approx(expected, rel=1e-12)


def test_kcca_bound_invariances():
    rng = np.random.default_rng(3)
    fx, fy = rng.normal(size=200), rng.normal(size=200)
    b = kcca_bound(fx, fy, k=5, m=205, loss_threshold=1.0, delta=0.1)
    perm = rng.permutation(200)
    assert kcca_bound(fy, fx, k=5, m=205, loss_threshold=1.0, delta=0.1) == b            # the two views swapped
    assert kcca_bound(fx[perm], fy[perm], k=5, m=205, loss_threshold=1.0, delta=0.1) == b  # points reordered
    assert kcca_bound(-fx, -fy, k=5, m=205, loss_threshold=1.0, delta=0.1) == b           # a canonical pair's sign
    assert kcca_bound(fx + 3.0, fy + 3.0, k=5, m=205, loss_threshold=1.0, delta=0.1) == pytest.approx(b)  # offsets
    # and it is Theorem 3's expression with the views' disagreement as the error
    assert b == kmp_bound(np.abs(fx - fy), k=5, m=205, loss_threshold=1.0, delta=0.1)
    # more disagreement, a larger bound
    assert kcca_bound(fx, 2 * fy, k=5, m=205, loss_threshold=1.0, delta=0.1) > b


@pytest.mark.parametrize("kwargs, match", [
    (dict(projections_y_out=np.zeros(4)), "same points"),
    (dict(k=3), "m − k"),
    (dict(loss_threshold=0.0), "loss_threshold"),
    (dict(delta=1.0), "delta"),
    (dict(projections_x_out=[0.0, np.nan, 0.0, 0.0, 0.0]), "finite"),
])
def test_kcca_bound_invalid_parameters(kwargs, match):
    args = dict(projections_x_out=np.zeros(5), projections_y_out=np.zeros(5), k=2, m=7, loss_threshold=0.5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        kcca_bound(**args)


def _two_views(m=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3))
    Y = np.c_[np.sin(X[:, 0]) + 0.1 * rng.normal(size=m), X[:, 1] * X[:, 2]]
    return X, Y


def _rbf(A, B, gamma):
    return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


def test_sparse_kcca_bound_matches_a_dense_oracle():
    """The estimator's Theorem-4 bound against the terms computed here in dense numpy: the chosen
    rows' subspaces (coordinates from an eigendecomposition, not the estimator's Cholesky), the
    regularised CCA inside them, t counted by hand and ε written out with ``math``."""
    from kmp_dask import SparseKCCA

    X, Y = _two_views()
    m, gx, gy, reg = len(X), 0.5, 0.7, 0.1
    est = SparseKCCA(n_components=6, gamma_x=gx, gamma_y=gy, reg=reg, random_state=0).fit(X, Y)
    S = np.asarray(est.components_index_)
    k = len(S)

    def coordinates(Z, gamma):   # orthonormal coordinates of φ(z) in span{φ(z_s) : s in S}
        w, V = np.linalg.eigh(_rbf(Z[S], Z[S], gamma))
        return _rbf(Z, Z[S], gamma) @ V / np.sqrt(w)

    a, b = coordinates(X, gx), coordinates(Y, gy)
    a, b = a - a.mean(0), b - b.mean(0)

    def whiten(C):
        w, V = np.linalg.eigh(C + reg * np.trace(C) / len(C) * np.eye(len(C)))
        return V @ np.diag(w ** -0.5) @ V.T

    Ra, Rb = whiten(a.T @ a / m), whiten(b.T @ b / m)
    U, s, Wt = np.linalg.svd(Ra @ (a.T @ b / m) @ Rb)
    np.testing.assert_allclose(est.correlations_, s, rtol=1e-6)
    outside = np.setdiff1d(np.arange(m), S)
    for component, gamma in [(0, 0.2), (1, 0.3)]:
        fx, fy = a @ Ra @ U[:, component], b @ Rb @ Wt[component]
        t = int(np.count_nonzero(np.abs(fx - fy)[outside] > gamma))
        assert 1 <= t < m - k - (k + 1) / 2, t   # a count that can move, in the formula's main branch
        expected = _theorem_4_by_hand(t, k, m, 0.05)
        assert est.bound(X, Y, gamma, component=component) == pytest.approx(expected, rel=1e-12)


def test_sparse_kcca_bound_is_symmetric_in_the_views_and_refuses_other_data():
    from kmp_dask import SparseKCCA

    X, Y = _two_views(seed=1)
    xy = SparseKCCA(n_components=5, gamma_x=0.5, gamma_y=0.7, random_state=0).fit(X, Y)
    yx = SparseKCCA(n_components=5, gamma_x=0.7, gamma_y=0.5, random_state=0).fit(Y, X)
    assert sorted(xy.components_index_) == sorted(yx.components_index_)
    assert xy.bound(X, Y, 0.25) == yx.bound(Y, X, 0.25)
    with pytest.raises(ValueError, match="training view passed to fit"):
        xy.bound(X[::-1], Y[::-1], 0.25)
    with pytest.raises(ValueError, match="component must be an int"):
        xy.bound(X, Y, 0.25, component=5)
