"""``criterion="decrease"`` on the engine path: partitions track ``δ(z)`` (the part of φ(z)
orthogonal to the selected vectors) and score ``Σ_j r_j(z)² / δ(z)``. Checked against the
in-process pursuit (same indices, coefficients, RKHS errors; any chunking; with and without
random candidates), a brute-force exact greedy, the exact ``δ`` of every pool row, journal replay
(bit for bit), a float32 pool and the estimator's engine path."""

from __future__ import annotations

import numpy as np
import pytest
from test_dense_hmp import _dense, _dense_exact_greedy, binary  # noqa: F401 (fixture)
from test_hmp import _problem, _rkhs_error, _run

from kmp_dask import KernelExpansion
from kmp_dask.blockops import apply_effects
from kmp_dask.greedy._hmp import RESYNC_EVERY, hyperplane_pursuit
from kmp_dask.greedy._hmp_setup import compress_on_pool
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.store import InMemoryStore


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("candidates", [None, 25])
def test_engine_decrease_equals_the_in_process_pursuit_whatever_the_chunking(m, candidates):
    X, alpha, k = _problem(n=150, m=m, gamma=0.7, seed=3)
    den = _dense(X, alpha, k, n_vectors=45, candidates=candidates, random_state=np.random.default_rng(7),
                 criterion="decrease")
    eq13 = _run(X, alpha, k, n_vectors=45, candidates=candidates, seed=7)[2]
    assert not np.array_equal(den.index[:20], eq13.index[:20])  # the criterion changes the path here
    for chunk in (150, 41, 16):
        eng = _run(X, alpha, k, chunk_rows=chunk, n_vectors=45, candidates=candidates, seed=7,
                   criterion="decrease")[2]
        np.testing.assert_array_equal(eng.index, den.index)
        np.testing.assert_allclose(eng.coef, den.coef, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(eng.rkhs_error, den.rkhs_error, rtol=1e-9, atol=1e-12 * den.wsq.max())
        np.testing.assert_allclose(eng.pool_sse, den.pool_sse, rtol=1e-8, atol=1e-12)
        for lvl in (1, 33, 45):  # across a residual resync (every 32 vectors)
            np.testing.assert_allclose(eng.prefix_coef(lvl)[1], den.prefix_coef(lvl)[1], rtol=1e-8, atol=1e-10)
        assert eng.n_passes == 46  # still one pass per vector (+ the one that finds the stop)


@pytest.mark.parametrize("m", [1, 2])
def test_engine_decrease_is_the_exact_greedy_and_reaches_zero_error(m):
    X, alpha, k = _problem(n=60, m=m, gamma=0.7, seed=5)
    res = _run(X, alpha, k, chunk_rows=13, n_vectors=8, criterion="decrease")[2]
    np.testing.assert_array_equal(res.index, _dense_exact_greedy(X, alpha, k, 8))
    np.testing.assert_allclose(res.rkhs_error[-1], _rkhs_error(X, alpha, k, res.index, res.coef),
                               rtol=1e-8, atol=1e-10)
    eq13 = _run(X, alpha, k, chunk_rows=13, n_vectors=1)[2]  # one step: the exact decrease is at least eq. 13's
    assert res.rkhs_error[1].sum() <= eq13.rkhs_error[1].sum() * (1 + 1e-12)
    full = _run(X, alpha, k, chunk_rows=13, n_vectors=60, criterion="decrease")[2]
    assert np.all(np.diff(full.rkhs_error.sum(axis=1)) <= 1e-12 * full.wsq.sum())
    dense = _rkhs_error(X, alpha, k, full.index, full.coef)
    assert np.all(dense <= 1e-9 * full.wsq), (dense, full.stop_reason)


def _decrease_engine(X, alpha, k, chunk_rows, n_vectors):
    exp = KernelExpansion(X, alpha, 0.0, k)
    store = InMemoryStore(X, chunk_rows=chunk_rows)
    eng = InProcessEngine(partition_specs(store))
    _, (res,) = compress_on_pool(eng, exp, alpha, n_rows=len(X), outputs_groups=[list(range(alpha.shape[1]))],
                                 n_vectors=n_vectors, criterion="decrease")
    return store, eng, res


def test_partitions_track_the_exact_delta_and_the_journal_rebuilds_them_bit_for_bit():
    X, alpha, k = _problem(n=150, m=2, gamma=0.5, seed=1)
    n = 70  # past two residual resyncs: the moves before the last one leave the journal, δ's do not
    store, eng, res = _decrease_engine(X, alpha, k, 40, n)
    assert len(res.index) == n
    # δ(z) = k(z,z) − k_S(z)ᵀ K_SS⁻¹ k_S(z) on every pool row; a selected row is set to 0 when it
    # joins (later updates subtract only rounding there; its own update alone would leave ~1e-16)
    K = k(X, X)
    S = res.index
    exact = np.diag(K) - np.einsum("ij,ij->i", K[:, S], np.linalg.solve(K[np.ix_(S, S)], K[S]).T)
    delta = np.concatenate([p.state["rs"].delta for p in eng.partitions])
    np.testing.assert_allclose(delta, exact, rtol=0, atol=1e-9)
    assert np.all(np.abs(delta[S]) < 1e-20), delta[S]
    # the journal: init, start, 2 column effects + 1 δ move per vector, the last resync
    assert len(eng.journal) == 2 + 3 * n + 1
    assert sum(e.slot == "rs.fit.delta" for e in eng.journal) == n
    for spec, live in zip(partition_specs(store), eng.partitions, strict=True):
        fresh = spec.load()
        apply_effects(fresh, tuple(eng.journal))
        a, b = live.state["rs"], fresh.state["rs"]
        assert a.cache.n == b.cache.n == n
        assert np.array_equal(a.cache.train(), b.cache.train())
        assert np.array_equal(a.delta, b.delta)
        assert np.array_equal(a.fit.R, b.fit.R)
        assert np.array_equal(a.fit.coef, b.fit.coef)
    np.testing.assert_array_equal(eng.partitions[0].state["rs"].fit.coef, res.coef)  # the driver's, exactly
    assert eng.partitions[0].state["rs"].nbytes >= eng.partitions[0].state["rs"].delta.nbytes + 40 * n * 8
    eng.close()


def test_independent_pursuits_restart_delta_and_drop_the_previous_moves_from_the_journal():
    X, alpha, k = _problem(n=120, m=2, gamma=0.5, seed=2)
    exp = KernelExpansion(X, alpha, 0.0, k)
    store = InMemoryStore(X, chunk_rows=35)
    with InProcessEngine(partition_specs(store)) as eng:
        _, results = compress_on_pool(eng, exp, alpha, n_rows=len(X), outputs_groups=[[0], [1]], n_vectors=20,
                                      criterion="decrease")
        assert len(eng.journal) == 2 + 3 * 20  # init, the second start, its own 20 vectors only
        for spec, live in zip(partition_specs(store), eng.partitions, strict=True):
            fresh = spec.load()
            apply_effects(fresh, tuple(eng.journal))
            assert np.array_equal(live.state["rs"].delta, fresh.state["rs"].delta)
    for j, res in enumerate(results):
        den = _dense(X, alpha[:, [j]], k, n_vectors=20, criterion="decrease")
        np.testing.assert_array_equal(res.index, den.index)
        np.testing.assert_allclose(res.coef, den.coef, rtol=1e-8, atol=1e-10)


def test_float32_pool_keeps_near_dependent_rows_out_of_the_score():
    """A float32 cache puts ~1e-7 relative rounding into δ: rows with δ below ~3e-5·k(z,z) score 0
    there (DELTA_EPS_FACTOR). Without that floor this path picked rounding (true RKHS error 2e-3
    while the bookkeeping said 0)."""
    X, alpha, k = _problem(n=300, m=2, gamma=0.1, seed=3)
    r64 = _run(X, alpha, k, n_vectors=150, criterion="decrease")[2]
    r32 = _run(X, alpha, k, pool=X.astype(np.float32), n_vectors=150, criterion="decrease")[2]
    np.testing.assert_array_equal(r32.index[:40], r64.index[:40])
    true32 = _rkhs_error(X, alpha, k, r32.index, r32.coef.astype(np.float64)).sum() / r32.wsq.sum()
    assert true32 <= 5e-6, true32
    assert abs(true32 - r32.rkhs_error[-1].sum() / r32.wsq.sum()) <= 1e-6


def test_basic_pursuit_and_unknown_criteria_are_refused():
    X, alpha, k = _problem(n=40, m=1)
    with pytest.raises(ValueError, match="criterion='decrease' needs backfit=True"):
        _run(X, alpha, k, n_vectors=5, backfit=False, criterion="decrease")
    with pytest.raises(ValueError, match="criterion must be one of"):
        hyperplane_pursuit(None, kernel=k, n_rows=40, wsq=[1.0], outputs=[0], n_vectors=5, criterion="exact")


def test_estimator_engine_path_equals_the_in_process_path(binary):  # noqa: F811
    svc, X, y, Xte, _ = binary
    a = ReducedSetCompressor(n_vectors=0.4, criterion="decrease", dense=True).fit(svc, X, y)
    b = ReducedSetCompressor(n_vectors=0.4, criterion="decrease", dense=False).fit(svc, X, y)
    assert b.results_[0].n_passes > 0 and a.results_[0].n_passes == 0  # engine, in-process
    assert a.n_vectors_ > RESYNC_EVERY
    np.testing.assert_array_equal(a.support_index_, b.support_index_)
    np.testing.assert_allclose(a.decision_function(Xte), b.decision_function(Xte), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose([p["rkhs_error"] for p in a.path_], [p["rkhs_error"] for p in b.path_],
                               rtol=1e-8, atol=1e-12)
    eq13 = ReducedSetCompressor(n_vectors=0.4, criterion="eq13", dense=False).fit(svc, X, y)
    assert not np.array_equal(eq13.support_index_, b.support_index_)
