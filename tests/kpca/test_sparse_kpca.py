"""Sparse kernel PCA by matching pursuit against dense oracles, KernelPCA and real clusters."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.utils.estimator_checks import parametrize_with_checks

from kmp_dask import SparseKernelPCA
from kmp_dask.exceptions import DegenerateFitWarning
from kmp_dask.greedy._sparse_kpca import sparse_kernel_pca
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import ActorEngine, InProcessEngine, make_engine, partition_specs
from kmp_dask.store import InMemoryStore, create_store


def _data(n=150, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _dense_greedy(K, n):
    """The greedy rule written from the paper: argmax ‖K̃[:, i]‖²/K̃_ii, then deflate."""
    Kt = K.copy()
    sel, trace = [], [np.trace(Kt)]
    for _ in range(n):
        d = np.diag(Kt).copy()
        score = np.where(d > 1e-10 * K.diagonal().max(), (Kt**2).sum(axis=0) / np.maximum(d, 1e-300), -np.inf)
        score[sel] = -np.inf
        i = int(np.argmax(score))
        sel.append(i)
        col = Kt[:, i] / np.sqrt(Kt[i, i])
        Kt = Kt - np.outer(col, col)
        trace.append(np.trace(Kt))
    return sel, np.asarray(trace)


@pytest.mark.parametrize("chunk_rows", [150, 41])
def test_exact_mode_selects_the_dense_greedy_points(chunk_rows):
    X = _data()
    k = get_kernel("rbf", gamma=0.3)
    with make_engine(None, InMemoryStore(X, chunk_rows=chunk_rows)) as eng:
        res = sparse_kernel_pca(eng, kernel=k, n_rows=len(X), n_features=4, dtype=X.dtype, n_components=25)
    sel, trace = _dense_greedy(k(X, X), 25)
    assert res.index.tolist() == sel
    np.testing.assert_allclose(res.trace[:, 0], trace, rtol=1e-10, atol=1e-10)
    assert res.n_passes == 25 + 3  # init, one per point, the last choice's, the moments


def test_trace_residual_decreases_to_zero_and_kernel_pca_is_reproduced():
    X = _data(n=120, d=5)
    est = SparseKernelPCA(n_components=120, gamma=0.2).fit(X)
    path = est.trace_residual_path_
    assert np.all(np.diff(path) <= 1e-12 * path[0])
    assert path[-1] <= 1e-8 * path[0]
    kp = KernelPCA(n_components=10, kernel="rbf", gamma=0.2).fit(X)
    ours = est.transform(X)[:, :10]
    signs = np.sign(np.sum(ours * kp.transform(X), axis=0))
    np.testing.assert_allclose(ours * signs, kp.transform(X), atol=1e-6)
    np.testing.assert_allclose(est.eigenvalues_[:10], kp.eigenvalues_, rtol=1e-6)
    Xnew = _data(n=30, d=5, seed=9)
    np.testing.assert_allclose(est.transform(Xnew)[:, :10] * signs, kp.transform(Xnew), atol=1e-6)


def test_random_candidates_are_seeded_and_monotone():
    X = _data(n=400, d=3)
    a = SparseKernelPCA(n_components=15, gamma=0.5, candidates="auto", random_state=3).fit(X)
    b = SparseKernelPCA(n_components=15, gamma=0.5, candidates="auto", random_state=3).fit(X)
    exact = SparseKernelPCA(n_components=15, gamma=0.5).fit(X)
    assert a.components_index_.tolist() == b.components_index_.tolist()
    assert np.all(np.diff(a.trace_residual_path_) <= 0)
    assert a.trace_residual_path_[-1] >= exact.trace_residual_path_[-1] * (1 - 1e-9)  # greedy exact is best here


def test_rank_reached_stops_with_a_named_warning():
    X = _data(n=80, d=3)
    with pytest.warns(DegenerateFitWarning, match="rank 3"):
        est = SparseKernelPCA(n_components=10, kernel="linear").fit(X)
    assert est.n_components_ == 3 and est.stop_reason_ == "rank"
    assert est.transform(X).shape == (80, 3)


def test_transform_of_a_store_equals_numpy(tmp_path):
    X = _data(n=300, d=4)
    est = SparseKernelPCA(n_components=12, gamma=0.3).fit(X)
    store = create_store(str(tmp_path / "x.zarr"), X, None, chunk_rows=64)
    lazy = est.transform(store)
    np.testing.assert_allclose(lazy.compute(), est.transform(X), rtol=1e-12)
    est2 = SparseKernelPCA(n_components=12, gamma=0.3, client="sync").fit(store)
    assert est2.components_index_.tolist() == est.components_index_.tolist()


@pytest.mark.parametrize("params, match", [
    ({"n_components": 0}, "n_components must be"), ({"candidates": "some"}, "candidates must be"),
    ({"rank_tol": 2.0}, "rank_tol must be"),
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises(ValueError, match=match):
        SparseKernelPCA(**params).fit(_data())


def test_cluster_fit_with_a_small_budget_streams_the_same_model(tmp_path, process_client):
    """A per-worker budget far below the partitions' state: every partition streams, the model is
    the in-process one (a killed worker: tests/parallel/test_killed_worker_contract.py)."""
    X = _data(n=60_000, d=8, seed=2).astype(np.float32)
    store = create_store(str(tmp_path / "p.zarr"), X, None, chunk_rows=15_000)
    specs = partition_specs(store)
    kw = dict(kernel=get_kernel("rbf", gamma=0.1), n_rows=store.n_rows, n_features=8, dtype=np.float32,
              n_components=20, candidates=59)
    with InProcessEngine(specs) as eng:
        ref = sparse_kernel_pca(eng, random_state=np.random.default_rng(0), **kw)
    with ActorEngine(process_client, specs, budget_bytes=6 << 20) as eng:
        streamed = sparse_kernel_pca(eng, random_state=np.random.default_rng(0), **kw)
        assert all(r["streamed"] for r in eng.memory_reports().values())
    assert streamed.index.tolist() == ref.index.tolist()
    np.testing.assert_allclose(streamed.trace, ref.trace, rtol=1e-6)
    g, g_ref = streamed.gram[(0, 0)], ref.gram[(0, 0)]
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-6 * np.abs(g_ref).max())


@parametrize_with_checks([SparseKernelPCA(n_components=3)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
