"""Single-vector exchanges on the engine (:func:`~kmp_dask.greedy._exchange.engine_exchange`):
the same swaps in the same order as the in-process :func:`~kmp_dask.greedy.exchange_vectors` on
the same rows, whatever the chunking; journal replay rebuilds a partition mid-exchange exactly;
the compressor on a zarr store pool equals the compressor on the numpy rows; a SIGKILLed worker
during the exchange and partitions paged out of core change nothing."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from _loaded_machine import WORKER_WAIT  # generous on a loaded machine
from test_dense_hmp import binary  # noqa: F401 (fixture)

from kmp_dask import KernelExpansion
from kmp_dask.blockops import apply_effects
from kmp_dask.greedy._exchange import engine_exchange, exchange_vectors
from kmp_dask.greedy._hmp_setup import compress_on_pool
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.store import InMemoryStore, create_store


def _problem(n=200, m=1, gamma=0.7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    alpha = rng.normal(size=(n, m))
    return X, alpha, get_kernel("rbf", gamma=gamma)


def _pursuit(engine, X, alpha, kernel, n_vectors):
    exp = KernelExpansion(X, alpha, 0.0, kernel)
    wsq, (res,) = compress_on_pool(engine, exp, alpha, n_rows=len(X), outputs_groups=[list(range(alpha.shape[1]))],
                                   n_vectors=n_vectors)
    return exp, wsq, res


def _reference(exp, X, wsq, index, sweeps):
    F = exp.decision_function(X).reshape(len(X), -1)
    return exchange_vectors(X, kernel=exp.kernels[0], F=F, wsq=wsq, index=index, max_sweeps=sweeps)


def _assert_same(eng, ref, X):
    assert ref is not None and eng is not None
    np.testing.assert_array_equal(eng.index, ref.index)
    assert (eng.n_swaps, eng.n_sweeps) == (ref.n_swaps, ref.n_sweeps)
    np.testing.assert_allclose(eng.coef, ref.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(eng.rkhs_error, ref.rkhs_error, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(eng.vectors, X[eng.index])  # the chosen rows, read from the partitions


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("level,sweeps", [(12, 10), (30, 10), (30, 1)])
def test_engine_exchange_equals_the_in_process_exchange_whatever_the_chunking(m, level, sweeps):
    X, alpha, k = _problem(m=m, seed=3)
    ref = None
    for chunk in (200, 37, 16):
        with InProcessEngine(partition_specs(InMemoryStore(X, chunk_rows=chunk))) as eng:
            exp, wsq, res = _pursuit(eng, X, alpha, k, 30)
            cache_before = [p.state["rs"].cache.train().copy() for p in eng.partitions]
            got = engine_exchange(eng, kernel=k, wsq=wsq, index=res.index[:level], vectors=res.vectors[:level],
                                  n_rows=len(X), max_sweeps=sweeps)
            for p, c in zip(eng.partitions, cache_before, strict=True):  # the pursuit's cache is left as it was
                assert np.array_equal(p.state["rs"].cache.train(), c)
        if ref is None:
            ref = _reference(exp, X, wsq, res.index[:level], sweeps)
            assert ref.n_swaps > 0  # a level where swaps happen
            assert ref.rkhs_error.sum() < res.rkhs_error[level].sum()
        _assert_same(got, ref, X)
        # passes: the start (rows of K_SS), one screening per sweep, one per tried position, resyncs
        assert got.n_passes >= 1 + got.n_sweeps + got.n_swaps


def test_engine_exchange_of_zero_sweeps_and_of_the_whole_pool_returns_the_start():
    X, alpha, k = _problem(n=40, m=2, seed=1)
    with InProcessEngine(partition_specs(InMemoryStore(X, chunk_rows=13))) as eng:
        exp, wsq, res = _pursuit(eng, X, alpha, k, 40)
        for level, sweeps in ((10, 0), (40, 5)):
            got = engine_exchange(eng, kernel=k, wsq=wsq, index=res.index[:level], vectors=res.vectors[:level],
                                  n_rows=len(X), max_sweeps=sweeps)
            _assert_same(got, _reference(exp, X, wsq, res.index[:level], sweeps), X)
            np.testing.assert_array_equal(got.index, res.index[:level])
            assert got.n_swaps == 0
        with pytest.raises(ValueError, match="max_sweeps must be >= 0"):
            engine_exchange(eng, kernel=k, wsq=wsq, index=res.index[:3], vectors=res.vectors[:3], n_rows=40,
                            max_sweeps=-1)


class _Rebuilding:
    """An in-process engine whose partition ``which`` is thrown away before pass ``at`` and
    rebuilt from its rows by replaying the journal (a worker lost mid-exchange)."""

    def __init__(self, eng, specs, which, at):
        self.eng, self.specs, self.which, self.at, self.calls, self.rebuilt = eng, specs, which, at, 0, 0

    def run(self, op, msg=None, effects=()):
        self.calls += 1
        if self.calls == self.at:
            fresh = self.specs[self.which].load()
            apply_effects(fresh, tuple(self.eng.journal))
            self.eng.partitions[self.which] = fresh
            self.rebuilt += 1
        return self.eng.run(op, msg, effects)


@pytest.mark.parametrize("at", [2, 5, 9])
def test_a_partition_rebuilt_mid_exchange_gives_the_same_result(at):
    X, alpha, k = _problem(m=2, seed=3)
    store = InMemoryStore(X, chunk_rows=45)
    specs = partition_specs(store)
    with InProcessEngine(specs) as eng:
        _, wsq, res = _pursuit(eng, X, alpha, k, 30)
        live = engine_exchange(eng, kernel=k, wsq=wsq, index=res.index[:30], vectors=res.vectors[:30],
                               n_rows=len(X))
        assert live.n_swaps > 0
        # the journal rebuilds the exchange state bit for bit: start, every column, moves since the resync
        assert any(e.slot == "rs.xch.cols" for e in eng.journal)
        for spec, part in zip(specs, eng.partitions, strict=True):
            fresh = spec.load()
            apply_effects(fresh, tuple(eng.journal))
            a, b = part.state["rs"].xch, fresh.state["rs"].xch
            for key in ("B", "M", "r", "d"):
                assert np.array_equal(getattr(a, key), getattr(b, key)), key
        assert part.state["rs"].nbytes >= part.state["rs"].xch.nbytes > 0
    with InProcessEngine(specs) as eng:
        _, wsq, res = _pursuit(eng, X, alpha, k, 30)
        wrapped = _Rebuilding(eng, specs, which=1, at=at)
        again = engine_exchange(wrapped, kernel=k, wsq=wsq, index=res.index[:30], vectors=res.vectors[:30],
                                n_rows=len(X))
        assert wrapped.rebuilt == 1
    np.testing.assert_array_equal(again.index, live.index)
    np.testing.assert_array_equal(again.coef, live.coef)
    np.testing.assert_array_equal(again.rkhs_error, live.rkhs_error)


def test_compressor_on_a_store_pool_equals_the_numpy_pool(binary, tmp_path):  # noqa: F811
    svc, X, y, _, _ = binary
    pool = create_store(tmp_path / "pool.zarr", X, y, classes=[0, 1], chunk_rows=23)
    a = ReducedSetCompressor(n_vectors=12, exchange=10, optimize_threshold=False).fit(svc, X)
    b = ReducedSetCompressor(n_vectors=12, exchange=10, client="sync").fit(svc, pool)
    greedy = ReducedSetCompressor(n_vectors=12, client="sync").fit(svc, pool)
    assert a._levels[-1].exchanged.n_swaps > 0
    assert b._levels[-1].exchanged.n_swaps == a._levels[-1].exchanged.n_swaps
    np.testing.assert_array_equal(b.support_index_, a.support_index_)
    np.testing.assert_allclose(b.expansion_.coef, a.expansion_.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b.rkhs_error_, a.rkhs_error_, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(b.expansion_.support_vectors, X[b.support_index_])
    assert b.rkhs_error_.sum() < greedy.rkhs_error_.sum()
    assert "_xengine" not in vars(b)  # the engine is closed after fit, never pickled
    np.testing.assert_array_equal(b.expansion_at(12).support_vectors, b.expansion_.support_vectors)
    with pytest.raises(ValueError, match="was not exchanged then"):
        b.expansion_at(5)
    import pickle

    c = pickle.loads(pickle.dumps(b))
    np.testing.assert_array_equal(c.decision_function(X), b.decision_function(X))
    np.testing.assert_array_equal(c.expansion_at(12).coef, b.expansion_.coef)


def test_a_start_set_that_is_not_positive_definite_is_left_as_it_is():
    class _Singular:  # answers the start's K_SS read with a singular Gram
        def run(self, op, msg=None, effects=()):
            k = len(msg.index)
            return [{"pos": np.arange(k), "B": np.ones((k, k)), "F": np.ones((k, 1))}]

    X, _, k = _problem(n=10)
    assert engine_exchange(_Singular(), kernel=k, wsq=[1.0], index=[0, 1, 2], vectors=X[:3], n_rows=10) is None


def test_compressor_on_a_store_pool_with_three_outputs(tmp_path):
    from sklearn.svm import SVC

    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    svc = SVC(gamma=0.5, C=10.0, decision_function_shape="ovo").fit(X, y)
    sv = svc.support_vectors_
    pool = create_store(tmp_path / "pool.zarr", sv, None, chunk_rows=17)
    a = ReducedSetCompressor(n_vectors=15, exchange=5).fit(svc)
    b = ReducedSetCompressor(n_vectors=15, exchange=5, client="sync").fit(svc, pool)
    assert a.expansion_.n_outputs == 3
    assert b._levels[-1].exchanged.n_swaps == a._levels[-1].exchanged.n_swaps > 0
    np.testing.assert_array_equal(b.support_index_, a.support_index_)
    np.testing.assert_allclose(b.expansion_.coef, a.expansion_.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b.rkhs_error_, a.rkhs_error_, rtol=1e-8, atol=1e-10)


def test_killed_worker_during_the_exchange(tmp_path, process_client):
    from kmp_dask.parallel import ActorEngine

    X, alpha, k = _problem(n=3000, m=2, gamma=0.7, seed=5)
    store = create_store(str(tmp_path / "pool.zarr"), X, None, chunk_rows=750)
    specs = partition_specs(store)
    with InProcessEngine(specs) as eng:
        exp, wsq, res = _pursuit(eng, X, alpha, k, 25)
        ref = engine_exchange(eng, kernel=k, wsq=wsq, index=res.index, vectors=res.vectors, n_rows=len(X))
    assert ref.n_swaps > 0
    pids = process_client.run(os.getpid)
    with ActorEngine(process_client, specs) as eng:
        _, wsq2, res2 = _pursuit(eng, X, alpha, k, 25)
        np.testing.assert_array_equal(res2.index, res.index)
        victim = eng._holders[0]["addr"]

        class _Kill:
            calls = 0

            def run(self, op, msg=None, effects=()):
                self.calls += 1
                if self.calls == 4:  # after the start and a few exchange passes
                    os.kill(pids[victim], signal.SIGKILL)
                return eng.run(op, msg, effects)

        got = engine_exchange(_Kill(), kernel=k, wsq=wsq2, index=res2.index, vectors=res2.vectors, n_rows=len(X))
        assert eng.n_restarts >= 1
    process_client.wait_for_workers(2, timeout=WORKER_WAIT)
    # partitions paged out of core every pass: the exchange state pages like any other
    with ActorEngine(process_client, specs, budget_bytes=(17 << 20) // 10) as eng:
        _, wsq3, res3 = _pursuit(eng, X, alpha, k, 25)
        streamed = engine_exchange(eng, kernel=k, wsq=wsq3, index=res3.index, vectors=res3.vectors,
                                   n_rows=len(X))
        reports = eng.memory_reports()
    assert all(r["streamed"] for r in reports.values()), reports
    for other in (got, streamed):
        np.testing.assert_array_equal(other.index, ref.index)
        np.testing.assert_allclose(other.coef, ref.coef, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(other.rkhs_error, ref.rkhs_error, rtol=1e-10, atol=1e-12)
