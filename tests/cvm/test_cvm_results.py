"""CVM / MMDA's distance pass answers a typed record (:class:`~kmp_dask.blockops._results.CVMFurthest`)
per partition; the driver's total against dense numpy over all rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kmp_dask.blockops._cvm import CVMQuery, cvm_effects, cvm_furthest
from kmp_dask.blockops._results import CVMFurthest
from kmp_dask.greedy._cvm import _ranked
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore

C = 10.0


def _setup(n=57, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, 2, size=n)
    return X, y, get_kernel("rbf", gamma=0.7)


def _dense_dist(X, y, k, core, alpha):
    """‖c − φ̃(x_i)‖² for every row from the dense kernel (rows of the core set excluded: NaN)."""
    ys = np.where(y == 1, 1.0, -1.0)
    a = alpha * ys[core]
    Kt = np.outer(ys[core], ys[core]) * (k(X[core], X[core]) + 1.0) + np.eye(len(core)) / C
    kt = 1.0 + 1.0 + 1.0 / C
    dist = alpha @ Kt @ alpha - 2.0 * ys * (k(X, X[core]) @ a + a.sum()) + kt
    dist[core] = np.nan
    return dist, alpha @ Kt @ alpha, kt, a


def test_full_and_sampled_pass_totals_match_dense_distances():
    X, y, k = _setup()
    core, alpha = np.array([3, 40]), np.array([0.6, 0.4])
    dist, aKa, kt, a = _dense_dist(X, y, k, core, alpha)
    query = CVMQuery(S=X[core], a=a, PS=np.zeros((2, 0)), aKa=aKa, kappa=kt, exclude=np.sort(core), ids=core)
    with InProcessEngine(partition_specs(InMemoryStore(X, y, chunk_rows=10))) as eng:
        eng.run(None, None, [cvm_effects.init(k), cvm_effects.targets(1)])
        parts = eng.run(cvm_furthest, dataclasses.replace(query, cand=None, top=4))
        assert len(parts) == 6 and all(isinstance(p, CVMFurthest) for p in parts)
        with pytest.raises(dataclasses.FrozenInstanceError):
            parts[0].n = 0
        full = CVMFurthest.combine(parts)
        cand = np.array([0, 3, 11, 12, 39, 56])
        sampled = CVMFurthest.combine(eng.run(cvm_furthest, dataclasses.replace(query, cand=cand, top=3)))
    assert full.n == len(X) - 2 and isinstance(full.n, int)
    assert full.kernel_evals == 2 * len(X)  # the core rows' columns, computed once on every row and cached
    assert len(full.candidates()) == 6 and all(len(c["index"]) <= 4 for c in full.candidates())
    order = np.argsort(-np.nan_to_num(dist, nan=-np.inf), kind="stable")
    found = _ranked(full)
    np.testing.assert_array_equal(found["index"][:4], order[:4])
    np.testing.assert_allclose(found["dist"][:4], dist[order[:4]], rtol=1e-12)
    np.testing.assert_array_equal(found["rows"][:4], X[order[:4]])
    assert sampled.n == 5 and sampled.kernel_evals == 0  # 3 is in the core set; columns read from the cache
    want = [int(i) for i in cand[cand != 3][np.argsort(-dist[cand[cand != 3]], kind="stable")][:3]]
    assert _ranked(sampled)["index"][:3].tolist() == want
