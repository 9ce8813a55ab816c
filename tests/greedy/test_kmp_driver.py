"""The KMP driver against independent references: scikit-learn OMP, a dense numpy KMP, least squares."""

from __future__ import annotations

import numpy as np
import pytest
from _engines import NoisyScores, pursue
from sklearn.linear_model import orthogonal_mp
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask.blockops import split_mask
from kmp_dask.exceptions import PrematureStopWarning
from kmp_dask.greedy import dense_kmp, kernel_matching_pursuit, n_candidates_for
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore

GAMMA = 0.5


def _data(n=400, d=3, m=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.stack([np.sin(X[:, 0] + k) + 0.3 * X[:, 1] * k for k in range(m)], axis=1)
    Y += 0.1 * rng.normal(size=Y.shape)
    return X, Y[:, 0] if m == 1 else Y


def _fit(X, y, *, chunk_rows=97, client=None, **kw):
    kw = {"n_basis": 20, "fit_mode": "backfit", "candidates": "all", "ridge": 0.0,
          "fit_intercept": False, **kw}
    return pursue(X, y, chunk_rows=chunk_rows, gamma=GAMMA, client=client, **kw)


def test_s_formula():
    assert n_candidates_for(0.05, 0.95) == 59
    assert n_candidates_for(0.01, 0.98) == 228


def test_backfit_matches_sklearn_orthogonal_mp():
    X, y = _data()
    K = rbf_kernel(X, X, gamma=GAMMA)
    norms = np.linalg.norm(K, axis=0)
    coef_omp = orthogonal_mp(K / norms, y, n_nonzero_coefs=15)
    res = _fit(X, y, n_basis=15)
    assert set(res.basis_indices.tolist()) == set(np.flatnonzero(coef_omp).tolist())
    fitted_ours = K[:, res.basis_indices] @ res.coef[:, 0]
    np.testing.assert_allclose(fitted_ours, (K / norms) @ coef_omp, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("mode", ["basic", "backfit", "prefit"])
@pytest.mark.parametrize("m", [1, 3])
def test_matches_dense_reference_line_by_line(mode, m):
    X, Y = _data(m=m, seed=1)
    res = _fit(X, Y, fit_mode=mode)
    idx, coef, norms = dense_kmp(rbf_kernel(X, X, gamma=GAMMA), Y, n_basis=20, fit_mode=mode)
    assert res.basis_indices.tolist() == idx
    np.testing.assert_allclose(res.coef, coef, rtol=1e-8, atol=1e-12 * np.abs(coef).max())
    np.testing.assert_allclose([h["residual_norm"] for h in res.history], norms, rtol=1e-8)


def test_dense_reference_with_ridge_and_random_candidates():
    X, y = _data(seed=2)
    res = _fit(X, y, candidates=25, random_state=np.random.default_rng(5), ridge=1e-4, fit_mode="prefit")
    # replay the same candidate sets through the dense oracle
    rng = np.random.default_rng(5)
    from kmp_dask.greedy import RandomCandidates, validation_eligibility

    sampler = RandomCandidates(len(X), 25, validation_eligibility(0.0, 0), len(X))
    sets, excluded = [sampler.draw(rng, set())], set()
    for g in res.basis_indices[:-1]:
        excluded.add(int(g))
        sets.append(sampler.draw(rng, excluded))
    idx, coef, _ = dense_kmp(rbf_kernel(X, X, gamma=GAMMA), y, n_basis=20, fit_mode="prefit",
                             ridge=1e-4 * len(X), candidate_sets=sets)
    assert res.basis_indices.tolist() == idx
    np.testing.assert_allclose(res.coef[:, 0], coef[:, 0], rtol=1e-8)


def test_full_basis_reaches_least_squares():
    X, y = _data(n=60, seed=3)
    res = _fit(X, y, n_basis=60, chunk_rows=13)
    K = rbf_kernel(X, X, gamma=GAMMA)
    fitted = K[:, res.basis_indices] @ res.coef[:, 0]
    lstsq = K @ np.linalg.lstsq(K, y, rcond=None)[0]
    np.testing.assert_allclose(fitted, lstsq, atol=1e-6)
    assert res.stop_reason.value in ("n_basis", "converged")


@pytest.mark.parametrize("mode", ["backfit", "prefit"])
def test_residual_norm_never_increases(mode):
    X, y = _data(seed=4)
    res = _fit(X, y, n_basis=40, fit_mode=mode, candidates=30, random_state=np.random.default_rng(0))
    norms = np.array([h["residual_norm"] for h in res.history])
    assert np.all(np.diff(norms) <= 1e-12 * norms[0])


@pytest.mark.parametrize("chunk_rows", [400, 134, 61])
def test_chunking_invariance(chunk_rows):
    """One, three and ragged partitions: same basis, coefficients equal to rounding."""
    X, y = _data(seed=5)
    ref = _fit(X, y, chunk_rows=400, candidates=59, random_state=np.random.default_rng(3))
    res = _fit(X, y, chunk_rows=chunk_rows, candidates=59, random_state=np.random.default_rng(3))
    assert res.basis_indices.tolist() == ref.basis_indices.tolist()
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["backfit", "prefit"])
def test_duplicates_never_give_nan(dtype, mode):
    X, y = _data(n=200, seed=6)
    X = np.vstack([X, X[:100]]).astype(dtype)  # 100 exact duplicate rows
    y = np.concatenate([y, y[:100]])
    if dtype == np.float32:  # rounding lets a duplicate's column win the scoring: skipped (or, when
        # every one of the best candidates is a duplicate, the fit stops early), with a warning
        with pytest.warns(PrematureStopWarning, match="(numerically|linearly) dependent"):
            res = _fit(X, y, n_basis=150, fit_mode=mode, candidates="all")
    else:
        res = _fit(X, y, n_basis=150, fit_mode=mode, candidates="all")
    assert np.all(np.isfinite(res.coef))
    assert len(set(map(tuple, res.basis_vectors))) == len(res.basis_vectors)
    assert res.stop_reason.value in ("linear_dependence", "converged", "n_basis")


def test_dependent_candidates_are_skipped_then_stop_with_named_reason():
    X = np.ones((30, 2))
    y = np.arange(30.0)
    engine = NoisyScores(make_engine(None, InMemoryStore(X, y, chunk_rows=7)))
    with pytest.warns(PrematureStopWarning) as record:
        res = kernel_matching_pursuit(
            engine, kernel=get_kernel("rbf", gamma=GAMMA), n_rows=30, n_features=2, dtype=X.dtype,
            targets={"kind": "regression"}, n_basis=5, candidates="all", ridge=0.0, fit_intercept=False)
    messages = [str(w.message) for w in record]
    assert any("dependent on the current basis" in m for m in messages)
    assert any("stopped after 1 basis functions" in m for m in messages)
    assert res.stop_reason.value == "linear_dependence"
    assert len(res.basis_indices) == 1
    assert np.all(np.isfinite(res.coef))


def test_early_stopping_keeps_best_validation_size():
    """Noisy targets: validation error stops improving long before 150 atoms. The early-stopped
    model is the prefix of the uninterrupted run (same split, same draws) at that run's first
    validation maximum, with the coefficients of that prefix."""
    X, y = _data(n=600, seed=7)
    y = y + 0.5 * np.random.default_rng(3).normal(size=len(y))
    kw = dict(n_basis=150, candidates=40, validation_fraction=0.3, split_seed=11, fit_intercept=True)
    res = _fit(X, y, random_state=np.random.default_rng(1), n_iter_no_change=5, **kw)
    full = _fit(X, y, random_state=np.random.default_rng(1), **kw)
    val = [h["val_score"] for h in full.history]
    k = int(np.argmax(val)) + 1
    assert res.stop_reason.value == "early_stopping"
    assert k < 100 and len(res.basis_indices) == k
    assert res.basis_indices.tolist() == full.basis_indices[:k].tolist()
    assert len(res.history) == k
    np.testing.assert_allclose(res.coef, full.prefix_expansion(k).coef, rtol=1e-10, atol=1e-12)
    # validation rows never become basis rows
    assert not split_mask(full.basis_indices, 0.3, 11).any()
    assert res.n_val > 100 and res.n_train + res.n_val == 600


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw", [
    {"fit_mode": "backfit", "fit_intercept": True},
    {"fit_mode": "prefit"},
    {"fit_mode": "basic"},
    {"fit_mode": "backfit", "loss": "logistic", "refit_every": 7},
], ids=["backfit+bias", "prefit", "basic", "logistic"])
def test_rank_one_residual_updates_match_full_recomputation(monkeypatch, dtype, kw):
    """Residuals moved by rank-one updates (u = d − Bw) between full recomputations agree with
    recomputing R = Y − Bα every iteration: same basis, same residual norms to rounding."""
    from kmp_dask.greedy import _kmp as driver
    from kmp_dask.losses import get_loss

    X, y = _data(n=500, seed=7)
    X = X.astype(dtype)
    targets = {"kind": "regression"}
    if "loss" in kw:
        y = (y > 0).astype(int)
        kw = {**kw, "loss": get_loss(kw["loss"], kind="classification")}
        targets = {"kind": "ovr", "classes": [0, 1]}
    runs = {}
    for every in (10**9, 0):  # never / always a full recomputation
        monkeypatch.setattr(driver, "RESYNC_EVERY", every)
        engine = make_engine(None, InMemoryStore(X, y, chunk_rows=97))
        runs[every] = kernel_matching_pursuit(
            engine, kernel=get_kernel("rbf", gamma=GAMMA), n_rows=len(X), n_features=X.shape[1], dtype=X.dtype,
            targets=targets, n_basis=60, candidates=40, random_state=np.random.default_rng(1), ridge=1e-8,
            **{"fit_intercept": False, **kw})
    inc, full = runs[10**9], runs[0]
    np.testing.assert_array_equal(inc.basis_indices, full.basis_indices)
    rtol = 1e-9 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose([h["residual_norm"] for h in inc.history],
                               [h["residual_norm"] for h in full.history], rtol=rtol)
    # other losses: the final Newton refit stops on a relative-gain test, so two runs whose
    # rounding differs stop at iterates ~1e-6 apart (coefficients ~100: nearly separable data)
    crtol = max(rtol, 1e-5) if "loss" in kw else rtol
    np.testing.assert_allclose(inc.coef, full.coef, rtol=crtol, atol=crtol * np.abs(full.coef).max())


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("rows", [1, 2047, 5000])
def test_cross64_float32_cache_accumulates_in_float64(order, rows):
    from kmp_dask.blockops import cross64 as _cross64

    rng = np.random.default_rng(0)
    B = np.asarray(rng.random((rows, 40), dtype=np.float32), order=order)[:, :23]
    d = rng.normal(size=rows)
    expected = B.astype(np.float64).T @ d
    np.testing.assert_allclose(_cross64(B, d), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(_cross64(B, d, np.empty(7)), expected, rtol=1e-13, atol=1e-13)  # small scratch
