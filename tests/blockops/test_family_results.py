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
    got = {int(g): x for own, rows in tot.fetched for g, x in zip(own, rows, strict=True)}
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


def test_make_is_the_constructor_and_one_record_totals_as_a_reduction_over_one():
    """``PassResult.make`` builds the record the dataclass constructor builds (fields, order, values;
    unknown or missing fields refused); the total of one record (``_combine_one``) holds what the
    general path's ``np.add.reduce`` over a one-element list gives — ``-0.0`` summed to ``0.0``,
    integer arrays reduced, Python sums, gathered pieces in a tuple."""
    from kmp_dask.blockops._results import ColumnStats, ScoreStats

    values = {"rss": np.array([-0.0, 2.5]), "rsum": np.array([1.0, -0.0]), "n_above": 3,
              "corr": np.array([[-0.0, 1.0], [2.0, 3.0]]), "sqn": np.array([1.0, -0.0]), "val_n": 7.0,
              "fetched": (np.array([1, 2]), np.ones((2, 3)))}
    made, built = ScoreStats.make(values), ScoreStats(**values)
    assert list(made.__dict__) == list(built.__dict__) and made == built
    with pytest.raises(TypeError, match="missing"):
        ScoreStats.make({"rss": 1.0})
    with pytest.raises(TypeError, match="unknown"):
        ColumnStats.make({"sqn": 1.0, "corr": 2.0, "bogus": 3})
    one = ScoreStats.combine([made])
    for name, kind in ScoreStats._combine_plan():
        v = getattr(made, name)
        if kind == "gathered":
            assert getattr(one, name) == (v,) or getattr(one, name)[0] is v
        elif v is None:
            assert getattr(one, name) is None
        elif kind == "python":
            assert getattr(one, name) == sum([v]) and type(getattr(one, name)) is type(sum([v]))
        else:
            ref = np.add.reduce([v])
            assert getattr(one, name).tobytes() == ref.tobytes() and getattr(one, name).dtype == ref.dtype
    col = ColumnStats.combine([ColumnStats.make({"sqn": -0.0, "corr": np.array([-0.0]), "cross": np.arange(3)})])
    assert col.sqn == 0.0 and np.copysign(1.0, col.sqn) == 1.0 and type(col.sqn) is float
    assert np.copysign(1.0, col.corr[0]) == 1.0 and col.cross.dtype == np.add.reduce([np.arange(3)]).dtype
