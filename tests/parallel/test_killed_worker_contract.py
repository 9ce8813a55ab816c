"""The killed-worker contract, run over every family's driver loop on an ``ActorEngine``: a worker
process SIGKILLed mid-fit (from the loop's own callback) loses its partitions, the engine rebuilds
them on a live worker by replaying the journal, and the fit ends with the in-process engine's model.

KMP (squared, logistic with Newton refits, recomputed basis columns, growth by GCV, several atoms per pass):
basis, coefficients and intercept bit for bit, and every score and residual norm the driver saw
(the rebuilt residuals replay the rank-one moves since the last full recomputation). Sparse KPCA:
the chosen points, the trace path and the Gram of the projections (float32 rows: to rounding).
CVM: the core set, the dual coefficients to rounding. The reduced-set (hyperplane matching)
pursuit: the chosen vectors and their coefficients to rounding (tests/reduced/test_hmp_cluster.py
adds, with the same kill helper from ``tests/_contracts.py``, the streamed pool equal to the killed
run bit for bit and the ``criterion="decrease"`` resync)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from _contracts import kill_worker_at
from _loaded_machine import wait_for_workers  # generous on a loaded machine; replaces a nanny that gave up
from sklearn.datasets import make_classification

from kmp_dask import KernelExpansion
from kmp_dask.blockops._cvm import cvm_effects
from kmp_dask.greedy import kernel_matching_pursuit
from kmp_dask.greedy._cvm import core_vector_machine
from kmp_dask.greedy._hmp_setup import compress_on_pool
from kmp_dask.greedy._sparse_kpca import sparse_kernel_pca
from kmp_dask.kernels import get_kernel
from kmp_dask.losses import LogisticLoss
from kmp_dask.parallel import ActorEngine, InProcessEngine, partition_specs
from kmp_dask.store import create_store


@dataclass(frozen=True)
class Case:
    """``store(tmp_path)``: the data; ``fit(engine, callback)``: the driver loop; ``same(res, ref)``;
    ``at``: the iteration whose record kills the worker (``at_least``: the first record from it on)."""

    store: Callable
    fit: Callable
    same: Callable
    at: int
    at_least: bool = False
    setup: tuple = ()


def _kmp_store(tmp_path, classes=False):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 4))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.normal(size=6000)
    return create_store(tmp_path / "d.zarr", X, (y > 0).astype(int) if classes else y, chunk_rows=1000)


def _kmp(**kw):
    kw = {"targets": {"kind": "regression"}, **kw}

    def fit(engine, callback=None):
        return kernel_matching_pursuit(
            engine, kernel=get_kernel("rbf", gamma=0.5), n_rows=6000, n_features=4, dtype=np.float64, n_basis=20,
            candidates=59, random_state=np.random.default_rng(2), ridge=1e-10, callback=callback, **kw)
    return fit


def _same_kmp(res, ref):
    np.testing.assert_array_equal(res.basis_indices, ref.basis_indices)
    assert res.coef.tobytes() == ref.coef.tobytes()
    assert res.intercept.tobytes() == ref.intercept.tobytes()
    # the partitions' residuals too (rebuilt by replaying the rank-one updates since the last
    # full recomputation), through every score and norm the driver saw
    assert [(h["score"], h["residual_norm"]) for h in res.history] == \
        [(h["score"], h["residual_norm"]) for h in ref.history]


def _same_kmp_gcv(res, ref):
    """KMP growing by GCV: the model, and the GCV path that chose its size."""
    _same_kmp(res, ref)
    assert res.val_scores.tobytes() == ref.val_scores.tobytes()
    np.testing.assert_array_equal(res.val_sizes, ref.val_sizes)


def _blocks_store(tmp_path):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(3000, 3))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=3000)
    return create_store(tmp_path / "d.zarr", X, y, chunk_rows=500)


def _blocks(engine, callback=None):
    return kernel_matching_pursuit(
        engine, kernel=get_kernel("rbf", gamma=0.5), n_rows=3000, n_features=3, dtype=np.float64,
        targets={"kind": "regression"}, n_basis=24, fit_mode="backfit", candidates=40, ridge=1e-6,
        fit_intercept=True, atoms_per_pass=3, random_state=np.random.default_rng(2), callback=callback)


def _same_blocks(res, ref):
    assert res.basis_indices.tolist() == ref.basis_indices.tolist()
    assert res.coef.tobytes() == ref.coef.tobytes() and res.intercept.tobytes() == ref.intercept.tobytes()


def _kpca_store(tmp_path):
    X = np.random.default_rng(2).normal(size=(60_000, 8)).astype(np.float32)
    return create_store(str(tmp_path / "p.zarr"), X, None, chunk_rows=15_000)


def _kpca(engine, callback=None):
    return sparse_kernel_pca(engine, kernel=get_kernel("rbf", gamma=0.1), n_rows=60_000, n_features=8,
                             dtype=np.float32, n_components=20, candidates=59, random_state=np.random.default_rng(0),
                             callback=callback)


def _same_kpca(res, ref):
    assert res.index.tolist() == ref.index.tolist()
    np.testing.assert_allclose(res.trace, ref.trace, rtol=1e-6)
    g, g_ref = res.gram[(0, 0)], ref.gram[(0, 0)]
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-6 * np.abs(g_ref).max())


_CVM_KERNEL = get_kernel("rbf", gamma=0.1)


def _cvm_store(tmp_path):
    X, y = make_classification(40_000, n_features=8, random_state=3)
    return create_store(str(tmp_path / "c.zarr"), X, y, chunk_rows=10_000)


def _cvm(engine, callback=None):
    # one row per pass: enough iterations for the kill at iteration 10
    return core_vector_machine(engine, kernel=_CVM_KERNEL, kappa=1.0, C=10.0, eps=1e-2, n_rows=40_000, candidates=59,
                               points_per_pass=1, random_state=np.random.default_rng(0), callback=callback)


def _same_cvm(res, ref):
    assert res.core_index.tolist() == ref.core_index.tolist()
    np.testing.assert_allclose(res.alpha, ref.alpha, rtol=1e-9, atol=1e-12)


def _hmp_store(tmp_path):
    X = np.random.default_rng(7).normal(size=(20_000, 6))
    return create_store(str(tmp_path / "pool.zarr"), X, None, chunk_rows=5_000)


def _hmp(engine, callback=None):
    rng = np.random.default_rng(8)
    exp = KernelExpansion(rng.normal(size=(150, 6)), rng.normal(size=(150, 2)), 0.0, get_kernel("rbf", gamma=0.2))
    _, (res,) = compress_on_pool(engine, exp, None, n_rows=20_000, outputs_groups=[[0, 1]], n_vectors=30,
                                 callback=callback)
    return res


def _same_hmp(res, ref):
    np.testing.assert_array_equal(res.index, ref.index)
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-11, atol=1e-12 * np.abs(ref.coef).max())


CASES = {
    "kmp-squared": Case(_kmp_store, _kmp(), _same_kmp, 6),
    "kmp-logistic-backfit": Case(lambda p: _kmp_store(p, classes=True),
                                 _kmp(loss=LogisticLoss(), targets={"kind": "ovr", "classes": [0, 1]}, refit_every=3),
                                 _same_kmp, 6),
    "kmp-recomputed-columns": Case(_kmp_store, _kmp(basis_columns="recomputed"), _same_kmp, 6),
    "kmp-gcv-growth": Case(_kmp_store, _kmp(val_criterion="gcv", n_iter_no_change=(3, 0.1)), _same_kmp_gcv, 6),
    "kmp-atoms-per-pass": Case(_blocks_store, _blocks, _same_blocks, 8, at_least=True),
    "sparse-kpca": Case(_kpca_store, _kpca, _same_kpca, 8),
    "cvm": Case(_cvm_store, _cvm, _same_cvm, 10, setup=(cvm_effects.init(_CVM_KERNEL), cvm_effects.targets(1))),
    "reduced-set-hmp": Case(_hmp_store, _hmp, _same_hmp, 12),
}


@pytest.mark.timeout(900)  # a worker's restart under load, bounded by _loaded_machine.WORKER_WAIT
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "kmp-atoms-per-pass" else n
                                  for n in CASES])
def test_killed_worker_is_rebuilt_and_the_model_is_unchanged(tmp_path, process_client, name):
    """SIGKILL a worker mid-fit: its partitions are rebuilt from the driver's state. On the
    session's process cluster (its nanny restarts the worker; the test waits for it, and replaces
    a nanny that did not restart it, so the later tests of the session have both workers)."""
    case = CASES[name]
    specs = partition_specs(case.store(tmp_path))
    with InProcessEngine(specs) as eng:
        if case.setup:
            eng.run(None, None, list(case.setup))
        ref = case.fit(eng)
    try:
        with ActorEngine(process_client, specs) as eng:
            if case.setup:
                eng.run(None, None, list(case.setup))
            kill = kill_worker_at(process_client, eng, case.at, at_least=case.at_least)
            res = case.fit(eng, kill)
            assert kill.killed and eng.n_restarts >= 1
    finally:
        wait_for_workers(process_client, 2)
    case.same(res, ref)
