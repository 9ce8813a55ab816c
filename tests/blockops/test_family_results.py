"""Typed pass results of sparse KPCA and the reduced-set pursuit: each partition answers one
frozen record, the driver's total (``combine``) against dense numpy over all rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kmp_dask.blockops import RSSetup, rs_effects, rs_score, rs_stats
from kmp_dask.blockops._kpca import KPCAScoreQuery, kpca_effects, kpca_moments, kpca_score
from kmp_dask.blockops._reduced import RSScoreQuery
from kmp_dask.blockops._results import KPCAMoments, KPCAScoreStats, RSScoreStats, RSStats
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore


def _rows(n=57, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def test_kpca_score_total_matches_dense_kernel():
    X, k = _rows(), get_kernel("rbf", gamma=0.7)
    K = k(X, X)
    Z = X[[3, 40]]
    with make_engine(None, InMemoryStore(X, chunk_rows=10)) as engine:
        parts = engine.run(kpca_score, KPCAScoreQuery(Z, (np.zeros((2, 0)),), np.array([5, 33])),
                           (kpca_effects.init((k,)),))
        assert len(parts) == 6 and all(isinstance(p, KPCAScoreStats) for p in parts)
        with pytest.raises(dataclasses.FrozenInstanceError):
            parts[0].n = 0
        tot = KPCAScoreStats.combine(parts)
        mom = KPCAMoments.combine(engine.run(kpca_moments))
    assert tot.n == len(X) and tot.cross is None
    np.testing.assert_allclose(tot.trace, [np.trace(K)])
    np.testing.assert_allclose(tot.dmax, [K.diagonal().max()])  # the maximum, not a sum
    np.testing.assert_allclose(tot.sq[0], (K[:, [3, 40]] ** 2).sum(axis=0))
    got = {int(g): x for own, rows in tot.fetched for g, x in zip(own, rows)}
    np.testing.assert_array_equal(got[5], X[5])
    np.testing.assert_array_equal(got[33], X[33])
    assert mom.n == len(X) and mom.sums[0].shape == (0,) and mom.gram[(0, 0)].shape == (0, 0)


def test_rs_score_total_holds_every_partitions_candidates():
    X, k = _rows(), get_kernel("rbf", gamma=0.7)
    alpha = np.random.default_rng(1).normal(size=(len(X), 2))
    F = k(X, X) @ alpha
    with make_engine(None, InMemoryStore(X, chunk_rows=10)) as engine:
        stats = RSStats.combine(engine.run(rs_stats, None, [rs_effects.init(RSSetup(X, alpha, k, alpha))]))
        tot = RSScoreStats.combine(engine.run(rs_score, RSScoreQuery(None, None, 2, "eq13", 1e-10),
                                              [rs_effects.start([0, 1], 4)]))
    assert stats.n == len(X) and all(stats.own)
    np.testing.assert_allclose(np.add.reduce(list(stats.wsq)), np.einsum("ij,ij->j", alpha, F))
    np.testing.assert_allclose(tot.rss, (F**2).sum(axis=0))  # nothing selected: R = F
    cands = tot.candidates()
    assert len(cands) == 6 and all(len(c["index"]) == 2 for c in cands)
    best = int(np.argmax((F**2).sum(axis=1) / k.diag(X)))
    assert best in np.concatenate([c["index"] for c in cands]).tolist()
