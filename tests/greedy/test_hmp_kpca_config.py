"""HMP's and sparse KPCA's one configuration record each: built once from the keywords, frozen,
validated before any pass, and the only thing that carries them to the loop objects."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kmp_dask import KernelExpansion
from kmp_dask.greedy import _hmp, _sparse_kpca
from kmp_dask.greedy._hmp import HMPConfig, dense_hyperplane_pursuit
from kmp_dask.greedy._hmp_setup import compress_on_pool
from kmp_dask.greedy._kpca_config import KPCAConfig
from kmp_dask.greedy._sparse_kpca import sparse_kernel_pca
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore

K = get_kernel("rbf", gamma=1.0)


def _problem(n=80, d=3, m=2, seed=0):
    rng = np.random.default_rng(seed)
    X, alpha = rng.normal(size=(n, d)), rng.normal(size=(n, m))
    return X, alpha, KernelExpansion(X, alpha, 0.0, K)


def test_hmp_config_is_frozen_and_normalised():
    c = HMPConfig(K, np.int64(50), 12.0, candidates=np.int32(7), rkhs_tol=0)
    assert (c.n_rows, c.n_vectors, c.candidates, c.rkhs_tol, c.top) == (50, 12, 7, 0.0, 4)
    assert type(c.n_vectors) is int and type(c.candidates) is int and type(c.rkhs_tol) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_vectors = 3


@pytest.mark.parametrize(("kw", "match"), [
    ({"criterion": "exact"}, "criterion must be one of"),
    ({"criterion": "decrease", "backfit": False}, "needs backfit=True"),
    ({"candidates": 0}, "candidates must be None"),
    ({"n_vectors": 2.5}, "n_vectors must be an int; got 2.5"),
    ({"n_vectors": True}, "n_vectors must be an int"),
    ({"rkhs_tol": "0.1"}, "rkhs_tol must be a float"),
])
def test_hmp_config_refuses_what_no_pursuit_runs(kw, match):
    with pytest.raises(ValueError, match=match):
        HMPConfig(**{"kernel": K, "n_rows": 40, "n_vectors": 5, **kw})


def test_engine_pursuit_from_a_config_equals_the_keywords_and_the_loop_holds_it(monkeypatch):
    X, alpha, exp = _problem()
    kw = {"n_vectors": 9, "candidates": 30, "criterion": "decrease"}
    seen = []
    real = _hmp._HMPModel.__init__
    monkeypatch.setattr(_hmp._HMPModel, "__init__", lambda self, config, wsq: seen.append(config) or
                        real(self, config, wsq))
    with make_engine(None, InMemoryStore(X, chunk_rows=23)) as engine:
        _, (by_kw,) = compress_on_pool(engine, exp, alpha, n_rows=len(X), outputs_groups=[[0, 1]], seed=3, **kw)
    config = HMPConfig(K, len(X), **kw)
    with make_engine(None, InMemoryStore(X, chunk_rows=23)) as engine:
        _, (by_cfg,) = compress_on_pool(engine, exp, alpha, outputs_groups=[[0, 1]], seed=3, config=config)
    assert seen == [config, config]  # the record reaches the loop's model, built once per pursuit
    assert by_kw.index.tolist() == by_cfg.index.tolist() and len(by_kw.index) == 9
    assert np.array_equal(by_kw.coef, by_cfg.coef) and np.array_equal(by_kw.rkhs_error, by_cfg.rkhs_error)


def test_compress_on_pool_and_dense_refuse_config_with_keywords():
    X, alpha, exp = _problem(n=20)
    config = HMPConfig(K, len(X), 4)
    with pytest.raises(ValueError, match="either config="):
        compress_on_pool(None, exp, alpha, n_rows=len(X), n_vectors=4, outputs_groups=[[0]], config=config)
    with pytest.raises(ValueError, match="needs n_rows= and n_vectors="):
        compress_on_pool(None, exp, alpha, outputs_groups=[[0]])
    F, wsq = K(X, X) @ alpha, np.einsum("ij,ik,kj->j", alpha, K(X, X), alpha)
    with pytest.raises(ValueError, match="either config="):
        dense_hyperplane_pursuit(X, kernel=K, F=F, wsq=wsq, config=config)
    with pytest.raises(ValueError, match="needs kernel= and n_vectors="):
        dense_hyperplane_pursuit(X, F=F, wsq=wsq)


def test_dense_pursuit_from_a_config_equals_the_keywords():
    X, alpha, _ = _problem(n=60)
    G = K(X, X)
    F, wsq = G @ alpha, np.einsum("ij,ik,kj->j", alpha, G, alpha)
    a = dense_hyperplane_pursuit(X, kernel=K, F=F, wsq=wsq, n_vectors=10, criterion="decrease")
    b = dense_hyperplane_pursuit(X, F=F, wsq=wsq, config=HMPConfig(K, len(X), 10, criterion="decrease"))
    assert a.index.tolist() == b.index.tolist() and np.array_equal(a.coef, b.coef)
    # the oracle: the final coefficients are the exact least-squares fit K_ss⁻¹ f(s)
    s = a.index
    np.testing.assert_allclose(a.coef, np.linalg.solve(G[np.ix_(s, s)], F[s]), rtol=1e-8, atol=1e-10)


def test_kpca_config_is_frozen_normalised_and_validated():
    c = KPCAConfig([K, K], np.int64(30), 4, "float32", 5, columns=[(0, 2), (2, 4)], candidates=np.int64(9))
    assert c.kernels == (K, K) and c.columns == ((0, 2), (2, 4)) and c.dtype == np.dtype(np.float32)
    assert (c.n_rows, c.candidates, c.exact) == (30, 9, False) and KPCAConfig(K, 3, 1, np.float64, 2).exact
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_components = 2
    with pytest.raises(ValueError, match="one feature slice per kernel"):
        KPCAConfig(K, 30, 4, np.float64, 5, columns=((0, 2), (2, 4)))
    with pytest.raises(ValueError, match="n_components must be an int; got 2.5"):
        KPCAConfig(K, 30, 4, np.float64, 2.5)
    with pytest.raises(ValueError, match="candidates must be None"):
        KPCAConfig(K, 30, 4, np.float64, 2, candidates=0)


def test_sparse_kpca_run_reads_its_config_and_selects_the_dense_greedy_points(monkeypatch):
    X = np.random.default_rng(1).normal(size=(70, 3))
    seen = []
    real = _sparse_kpca.KPCARun.__init__
    monkeypatch.setattr(_sparse_kpca.KPCARun, "__init__", lambda self, config: seen.append(config) or
                        real(self, config))
    with make_engine(None, InMemoryStore(X, chunk_rows=25)) as eng:
        res = sparse_kernel_pca(eng, kernel=K, n_rows=len(X), n_features=3, dtype=X.dtype, n_components=6)
    assert seen == [KPCAConfig(K, len(X), 3, X.dtype, 6)]
    # oracle: greedy pivoted Cholesky on the dense kernel matrix (largest residual diagonal drop)
    G, sel = K(X, X), []
    R = G.copy()
    for _ in range(6):
        score = np.einsum("ij,ij->j", R, R) / np.where(np.diag(R) > 1e-12, np.diag(R), np.inf)
        score[sel] = -np.inf
        j = int(np.argmax(score))
        sel.append(j)
        R = R - np.outer(R[:, j], R[j]) / R[j, j]
    assert res.index.tolist() == sel
