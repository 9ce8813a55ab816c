"""Hyperplane matching pursuit on real clusters: a killed worker and a pool streamed out of core
give the in-process path bit for bit (pool partitions are rebuilt by replaying the journal),
with either selection criterion."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from _contracts import kill_worker_at
from _loaded_machine import wait_for_workers  # generous on a loaded machine

from kmp_dask import KernelExpansion
from kmp_dask.greedy._hmp_setup import compress_on_pool
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import ActorEngine, InProcessEngine, partition_specs
from kmp_dask.store import create_store


@pytest.fixture(scope="module")
def pool_store(tmp_path_factory):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(120_000, 12))
    path = tmp_path_factory.mktemp("rs") / "pool.zarr"
    return create_store(str(path), X, None, chunk_rows=30_000), X


def _expansion(X):
    rng = np.random.default_rng(8)
    idx = rng.choice(len(X), size=300, replace=False)
    return KernelExpansion(X[idx], rng.normal(size=(300, 3)), 0.0, get_kernel("rbf", gamma=0.08))


def _path(engine, exp, n_rows, callback=None):
    _, (res,) = compress_on_pool(engine, exp, None, n_rows=n_rows, outputs_groups=[[0, 1, 2]], n_vectors=40,
                                 callback=callback)
    return res


def test_killed_worker_and_streamed_pool_give_the_same_path(pool_store, process_client):
    store, X = pool_store
    exp = _expansion(X)
    specs = partition_specs(store)
    with InProcessEngine(specs) as eng:
        ref = _path(eng, exp, store.n_rows)
    # a worker SIGKILLed from the pursuit's own callback, mid-path
    with ActorEngine(process_client, specs) as eng:
        killed = _path(eng, exp, store.n_rows, callback=kill_worker_at(process_client, eng, 15))
        assert eng.n_restarts >= 1
    wait_for_workers(process_client, 2)
    # a per-worker budget far below the pool's state: partitions stream from scratch every pass
    with ActorEngine(process_client, specs, budget_bytes=24 << 20) as eng:
        streamed = _path(eng, exp, store.n_rows)
        reports = eng.memory_reports()
    assert all(r["streamed"] for r in reports.values()), reports
    _assert_same_paths(ref, killed, streamed)


def test_decrease_criterion_with_a_killed_worker_and_a_streamed_pool(tmp_path, process_client):
    """``criterion="decrease"``: the partitions' ``δ`` survives a SIGKILL after a residual resync
    (the replayed journal keeps every δ move, drops the residual moves before the last resync)
    and paging out of core; the path equals the in-process engine's and the in-process pursuit's."""
    from kmp_dask.greedy._hmp import dense_hyperplane_pursuit

    rng = np.random.default_rng(9)
    X = rng.normal(size=(20_000, 6))
    store = create_store(str(tmp_path / "pool.zarr"), X, None, chunk_rows=5_000)
    idx = rng.choice(len(X), size=200, replace=False)
    exp = KernelExpansion(X[idx], rng.normal(size=(200, 2)), 0.0, get_kernel("rbf", gamma=0.2))
    specs = partition_specs(store)

    def path(engine, callback=None):
        _, (res,) = compress_on_pool(engine, exp, None, n_rows=store.n_rows, outputs_groups=[[0, 1]], n_vectors=40,
                                     callback=callback, criterion="decrease")
        return res

    with InProcessEngine(specs) as eng:
        ref = path(eng)
    den = dense_hyperplane_pursuit(X, kernel=exp.kernels[0], F=exp.with_coef(exp.coef, 0.0).decision_function(X),
                                   wsq=exp.rkhs_sqnorm(), n_vectors=40, criterion="decrease")
    np.testing.assert_array_equal(ref.index, den.index)
    with ActorEngine(process_client, specs) as eng:
        killed = path(eng, callback=kill_worker_at(process_client, eng, 34))  # after the resync at 32 vectors
        assert eng.n_restarts >= 1
    wait_for_workers(process_client, 2)
    with ActorEngine(process_client, specs, budget_bytes=4 << 20) as eng:
        streamed = path(eng)
        reports = eng.memory_reports()
    assert all(r["streamed"] for r in reports.values()), reports
    _assert_same_paths(ref, killed, streamed)


def test_chunking_tree_on_workers_survives_a_killed_worker(process_client):
    """The §3.6 tree as dask tasks gives the in-process tree; a worker SIGKILLed while its pieces
    run is recomputed by dask (every task is a pure function of the expansion's pieces)."""
    import threading

    from kmp_dask.greedy._hmp_setup import chunked_compression
    from kmp_dask.parallel import Tasks

    rng = np.random.default_rng(11)
    X = rng.normal(size=(6000, 5))
    exp = KernelExpansion(X, rng.normal(size=(6000, 2)), 0.0, get_kernel("rbf", gamma=0.3))
    ref_vecs, ref_coef = chunked_compression(Tasks(None), exp, piece_vectors=750, keep=120)
    vecs, coef = chunked_compression(Tasks(process_client), exp, piece_vectors=750, keep=120, timeout=300)
    np.testing.assert_array_equal(vecs, ref_vecs)
    np.testing.assert_allclose(coef, ref_coef, rtol=1e-10, atol=1e-12 * np.abs(ref_coef).max())
    wait_for_workers(process_client, 2)
    by_addr = process_client.run(os.getpid)
    victim = sorted(by_addr)[0]
    pids = [by_addr[victim]]
    done = threading.Event()

    def kill_while_it_computes():  # the moment a piece runs on the victim (a fixed delay raced the tree)
        while not done.is_set():
            if process_client.processing().get(victim):
                os.kill(pids[0], signal.SIGKILL)
                return
            done.wait(0.005)

    killer = threading.Thread(target=kill_while_it_computes, daemon=True)
    killer.start()
    try:
        vecs2, coef2 = chunked_compression(Tasks(process_client), exp, piece_vectors=750, keep=120, timeout=300)
    finally:
        done.set()
        killer.join()
    np.testing.assert_array_equal(vecs2, ref_vecs)
    np.testing.assert_allclose(coef2, ref_coef, rtol=1e-10, atol=1e-12 * np.abs(ref_coef).max())
    wait_for_workers(process_client, 2)
    assert pids[0] not in process_client.run(os.getpid).values()  # the kill did land


def _assert_same_paths(ref, killed, streamed):
    """The killed-worker and streamed runs give the in-process path, bit for bit between them."""
    for res in (killed, streamed):
        np.testing.assert_array_equal(res.index, ref.index)
        np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-11, atol=1e-12 * np.abs(ref.coef).max())
        np.testing.assert_allclose(res.rkhs_error, ref.rkhs_error, rtol=1e-10, atol=1e-12 * ref.wsq.max())
    assert killed.coef.tobytes() == streamed.coef.tobytes()  # same worker-side arithmetic
