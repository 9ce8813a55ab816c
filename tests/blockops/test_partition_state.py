"""Per-partition numerics against dense quantities; the restore journal against the live state.

Each reduction a pass returns is a sum over partitions; here the sums are checked against the
same quantity computed densely on the whole data set (numpy / scikit-learn kernels), for several
chunkings, so the partition machinery (views, column cache, residual, effects) is tested apart
from any driver.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask.blockops import (
    Atom,
    ColumnStats,
    Effect,
    Journal,
    KMPSetup,
    ScoreQuery,
    ScoreStats,
    apply_effects,
    kmp_column_stats,
    kmp_effects,
    kmp_score,
)
from kmp_dask.greedy import kernel_matching_pursuit
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore

GAMMA = 0.3


def _engine(X, y, chunk_rows):
    return InProcessEngine(partition_specs(InMemoryStore(X, y, chunk_rows=chunk_rows)))


def _data(n=257, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


def _setup(kernels, capacity=8):
    return KMPSetup(tuple(kernels), None, {"kind": "regression"}, np.zeros(1), 0.0, 0, capacity)


def _sum(results, key):
    return getattr(ScoreStats.combine(results), key)


@pytest.mark.parametrize("chunk_rows", [1000, 64, 7])
def test_score_pass_sums_equal_dense_products(chunk_rows):
    """After two accepted columns and coefficients, KᵀR, ΣK², KᵀB and ‖R‖² summed over
    partitions equal the dense products, whatever the chunking."""
    X, y = _data()
    k = get_kernel("rbf", gamma=GAMMA)
    K = rbf_kernel(X, X, gamma=GAMMA)
    eng = _engine(X, y, chunk_rows)
    basis, coef = [5, 100], np.array([[0.7], [-0.2]])
    effects = [kmp_effects.init(_setup([k]))]
    for j in basis:
        effects += [kmp_effects.pend(Atom(X[j], 0, j)), kmp_effects.accept()]
    effects.append(kmp_effects.set_coef(coef))
    cand = X[[3, 50, 200]]
    res = eng.run(kmp_score, ScoreQuery(cand, np.einsum("ij,ij->i", cand, cand), True), effects)
    R = y - K[:, basis] @ coef[:, 0]
    Kc = K[:, [3, 50, 200]]
    np.testing.assert_allclose(_sum(res, "corr")[:, 0], Kc.T @ R, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_sum(res, "sqn"), (Kc**2).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(_sum(res, "cross"), Kc.T @ K[:, basis], rtol=1e-12)
    np.testing.assert_allclose(_sum(res, "rss")[0], R @ R, rtol=1e-12)
    np.testing.assert_allclose(_sum(res, "rsum")[0], R.sum(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunk_rows", [1000, 31])
def test_column_stats_and_rank_one_move_equal_dense(chunk_rows):
    """Bᵀd, ‖d‖², dᵀR, dᵀY of a pending column, then a rank-one move R −= (d − Bw)βᵀ, equal the
    dense algebra; the move equals a full recomputation with the moved coefficients."""
    X, y = _data(seed=1)
    k = get_kernel("rbf", gamma=GAMMA)
    K = rbf_kernel(X, X, gamma=GAMMA)
    eng = _engine(X, y, chunk_rows)
    c0 = np.array([[0.4]])
    eng.run(None, None, [kmp_effects.init(_setup([k])), kmp_effects.pend(Atom(X[9], 0, 9)),
                         kmp_effects.accept(), kmp_effects.set_coef(c0)])
    col = ColumnStats.combine(eng.run(kmp_column_stats, None, [kmp_effects.pend(Atom(X[77], 0, 77))]))
    d, B = K[:, 77], K[:, [9]]
    R = y - B @ c0[:, 0]
    np.testing.assert_allclose(col.cross, B.T @ d, rtol=1e-12)
    np.testing.assert_allclose(col.sqn, d @ d, rtol=1e-12)
    np.testing.assert_allclose(col.corr[0], d @ R, rtol=1e-12)
    np.testing.assert_allclose(col.ytd[0], d @ y, rtol=1e-12)
    assert col.loss is None  # squared loss: no line-search statistics
    w, beta = np.array([0.25]), np.array([1.5])
    moved = np.array([[0.4 - 0.25 * 1.5], [1.5]])
    after_move = eng.run(kmp_score, ScoreQuery(), [kmp_effects.accept(), kmp_effects.move(w, beta, moved)])
    full = eng.run(kmp_score, ScoreQuery(), [kmp_effects.set_coef(moved)])
    R_new = y - K[:, [9, 77]] @ moved[:, 0]
    np.testing.assert_allclose(_sum(after_move, "rss")[0], R_new @ R_new, rtol=1e-10)
    np.testing.assert_allclose(_sum(full, "rss")[0], R_new @ R_new, rtol=1e-12)


def test_mixed_dictionary_scores_are_per_kernel_blocks():
    """A dictionary of two RBF widths and a Laplacian: candidates are ordered kernel-major."""
    X, y = _data(n=120, d=3, seed=2)
    ks = [get_kernel("rbf", gamma=0.1), get_kernel("rbf", gamma=2.0), get_kernel("laplacian", gamma=0.5)]
    eng = _engine(X, y, 50)
    cand = X[[1, 60]]
    res = eng.run(kmp_score, ScoreQuery(cand, np.einsum("ij,ij->i", cand, cand)), [kmp_effects.init(_setup(ks))])
    R = y.copy()
    expected = np.concatenate([k(X, cand).T @ R for k in ks])
    np.testing.assert_allclose(_sum(res, "corr")[:, 0], expected, rtol=1e-12)


def _probe(part, msg):
    return {"n": part.state["log"][:]}


def _log(part, msg):
    part.state.setdefault("log", []).append(msg)


def test_journal_compacts_by_slot_and_composes_nested_scopes():
    j = Journal()
    j.record([Effect(_log, "init-a", "a", True), Effect(_log, "a1", "a.res"), Effect(_log, "b-init", "b", True),
              Effect(_log, "a2", "a.res", True), Effect(_log, "a3", "a.res"), Effect(_log, "b1", "b.col")])
    assert [e.msg for e in j] == ["init-a", "b-init", "a2", "a3", "b1"]
    j.record([Effect(_log, "init-a again", "a", True)])  # a driver restarts: its own entries go, b's stay
    assert [e.msg for e in j] == ["b-init", "b1", "init-a again"]


@pytest.mark.parametrize("kw", [{"fit_mode": "backfit"}, {"fit_mode": "basic"}, {"fit_mode": "prefit"}])
def test_journal_replay_rebuilds_each_partition_bit_for_bit(kw):
    """After a fit, a partition loaded afresh and given the journal equals the live one exactly,
    and the journal stays O(n) (columns) + O(RESYNC_EVERY) (residual moves)."""
    X, y = _data(n=300, seed=3)
    eng = _engine(X, y, 64)
    res = kernel_matching_pursuit(eng, kernel=get_kernel("rbf", gamma=GAMMA), n_rows=len(X), n_features=X.shape[1],
                                  dtype=X.dtype, targets={"kind": "regression"}, n_basis=70, candidates=40,
                                  random_state=0, **kw)
    n = len(res.basis_indices) + 1  # + the intercept column (backfit / prefit)
    assert len(eng.journal) <= 1 + 2 * n + 33
    for spec, live in zip(partition_specs(InMemoryStore(X, y, chunk_rows=64)), eng.partitions, strict=True):
        fresh = spec.load()
        apply_effects(fresh, tuple(eng.journal))
        a, b = live.state["kmp"], fresh.state["kmp"]
        assert a.cache.n == b.cache.n
        assert np.array_equal(a.cache.train(), b.cache.train())
        assert np.array_equal(a.fit.R, b.fit.R)
        assert np.array_equal(a.fit.coef, b.fit.coef)


def test_pass_results_combine_in_partition_order_bit_for_bit():
    """``combine`` sums each field exactly as ``np.add.reduce`` over the list in partition order (the
    order the drivers summed string-keyed dicts in), keeps absent fields None, and gives the scalar
    ``sqn`` as a Python float; reordering the partitions changes the bits (the order is the contract)."""
    from kmp_dask.blockops import GramStats, LineStats

    rng = np.random.default_rng(5)
    parts = [ColumnStats(float(s), c, yt, x) for s, c, yt, x in zip(
        rng.normal(size=11) * 10.0 ** rng.integers(-8, 8, size=11), rng.normal(size=(11, 3)),
        rng.normal(size=(11, 3)) * 1e6, rng.normal(size=(11, 4)), strict=True)]
    tot = ColumnStats.combine(parts)
    assert type(tot.sqn) is float and tot.sqn == float(np.add.reduce([p.sqn for p in parts]))
    for name in ("corr", "ytd", "cross"):
        assert getattr(tot, name).tobytes() == np.add.reduce([getattr(p, name) for p in parts]).tobytes()
    assert tot.loss is tot.grad is tot.hess is None
    assert any(ColumnStats.combine(parts[k:] + parts[:k]).sqn != tot.sqn for k in range(1, 11)), \
        "test data too tame: no rotation changes the rounding"
    line = LineStats.combine([LineStats(np.ones((2, 1)) * k) for k in range(4)])
    assert line.loss.tolist() == [[6.0], [6.0]] and line.grad is None
    gram = GramStats.combine([GramStats(np.eye(2), np.ones((2, 1))), GramStats(np.eye(2), np.ones((2, 1)))])
    assert gram.gram.tolist() == [[2.0, 0.0], [0.0, 2.0]] and gram.bty.tolist() == [[2.0], [2.0]]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tot.sqn = 0.0


def test_score_stats_total_sums_counts_in_python_and_gathers_fetched_rows():
    """The scoring pass's total: arrays by np.add.reduce, counts and validation sums by the builtin
    ``sum`` (left to right, as the driver summed them), fetched rows and zero-weight rows kept per
    partition in partition order; a field no partition answered stays None."""
    vals = [1e16, 1.0, -1e16, 1.0, 0.5, 0.25, 0.125, 3.0, 1e-3]  # ≥ 8: np.add.reduce sums pairwise
    parts = [ScoreStats(np.array([float(k)]), np.array([1.0]), n_above=k, val_n=k + 1, val_sse=v,
                        fetched=(np.array([k]), np.full((1, 2), k)), zero_weight=None if k % 2 else np.array([k]))
             for k, v in enumerate(vals)]
    tot = ScoreStats.combine(parts)
    assert tot.val_sse == sum(vals) and tot.val_sse != float(np.add.reduce(vals))  # the order is the contract
    assert (tot.n_above, tot.val_n) == (36, 45) and tot.rss.tolist() == [36.0] and tot.rsum.tolist() == [9.0]
    assert [int(own[0]) for own, _ in tot.fetched] == list(range(9))
    assert [z is None for z in tot.zero_weight] == [False, True] * 4 + [False]
    assert tot.corr is tot.val_loss is tot.val_correct is None
