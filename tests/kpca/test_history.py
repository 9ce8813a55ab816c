"""Per-iteration records of sparse KPCA / KCCA and HMP (one PathRecorder per loop): the history
on the result and the estimator is what the callback and the ``--log-json`` listeners receive,
and its numbers agree with dense oracles."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask import KernelExpansion, SparseKCCA, SparseKernelPCA
from kmp_dask.estimators._progress import iteration_listener
from kmp_dask.greedy._hmp import dense_hyperplane_pursuit
from kmp_dask.greedy._hmp_setup import compress_on_pool
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore


def _data(n=80, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def test_kpca_history_is_what_listeners_receive_and_matches_dense_trace():
    X = _data()
    heard = []
    with iteration_listener(lambda desc, rec: heard.append((desc, rec))):
        est = SparseKernelPCA(n_components=6, gamma=0.5).fit(X)
    assert [r for _, r in heard] == est.history_
    assert {d for d, _ in heard} == {"sparse kpca"}
    assert [r["iteration"] for r in est.history_] == list(range(6))
    assert [r["index"] for r in est.history_] == est.components_index_.tolist()
    # oracle: the trace of the dense deflated kernel after each chosen point, relative to tr K
    K = get_kernel("rbf", gamma=0.5)(X, X)
    Kt, rel = K.copy(), []
    for i in est.components_index_:
        col = Kt[:, i] / np.sqrt(Kt[i, i])
        Kt = Kt - np.outer(col, col)
        rel.append(np.trace(Kt) / np.trace(K))
    np.testing.assert_allclose([r["residual_norm"] for r in est.history_], rel, rtol=1e-8, atol=1e-12)


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.BoundAtCapWarning")
def test_kpca_bound_cut_keeps_the_history_of_the_kept_points():
    est = SparseKernelPCA(n_components="bound", max_components=15, gamma=0.5).fit(_data())
    assert len(est.history_) == est.n_components_
    full = SparseKernelPCA(n_components=15, gamma=0.5).fit(_data())
    assert est.history_ == full.history_[: est.n_components_]


def test_kcca_history_one_record_per_row():
    X = _data()
    Y = np.sin(X[:, :2])
    est = SparseKCCA(n_components=4).fit(X, Y)
    assert [r["index"] for r in est.history_] == est.components_index_.tolist()
    assert all("residual_norm" not in r for r in est.history_)  # two views: no single trace


def test_hmp_history_matches_the_rkhs_error_path_and_the_callback():
    X = _data(60)
    alpha = np.random.default_rng(1).normal(size=(60, 2))
    kernel = get_kernel("rbf", gamma=1.0)
    exp = KernelExpansion(X, alpha, 0.0, kernel)
    seen = []
    with make_engine(None, InMemoryStore(X, chunk_rows=17)) as engine:
        _, (res,) = compress_on_pool(engine, exp, alpha, n_rows=len(X), outputs_groups=[[0, 1]], n_vectors=8,
                                     callback=seen.append)
    assert seen == res.history and len(res.history) == 8
    np.testing.assert_array_equal([r["rkhs_error"] for r in res.history], res.rkhs_error[1:].sum(axis=1))
    assert [r["n_vectors"] for r in res.history] == res.n_vectors_at[1:].tolist()
    # the dense twin keeps the same records, and its path agrees with the engine's to rounding
    F = exp.with_coef(exp.coef, 0.0).decision_function(X)
    dense = dense_hyperplane_pursuit(X, kernel=kernel, F=F, wsq=res.wsq, n_vectors=8)
    assert [r["iteration"] for r in dense.history] == list(range(8))
    np.testing.assert_allclose([r["rkhs_error"] for r in dense.history], [r["rkhs_error"] for r in res.history],
                               rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("dense", [True, False])
def test_compressor_history_is_what_listeners_receive(dense):
    from sklearn.svm import SVC

    from kmp_dask import ReducedSetCompressor

    X = _data(120)
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    svc = SVC(kernel="rbf", gamma=0.5).fit(X, y)
    heard = []
    with iteration_listener(lambda desc, rec: heard.append(rec) if desc == "reduced set" else None):
        est = ReducedSetCompressor(6, dense=dense, random_state=0).fit(svc, X, y)
    assert heard == est.history_ and len(est.history_) == len(est.results_[0].index)
    np.testing.assert_allclose([r["rkhs_error"] for r in est.history_], est.results_[0].rkhs_error[1:].sum(axis=1))
