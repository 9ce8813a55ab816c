"""The in-process engine runs its partitions on a thread pool (``KMP_DASK_IN_PROCESS_THREADS``):
every family's model is the same bit for bit as with the plain loop, results come back in
partition order, an error in one partition reaches the caller, the pool ends with the engine,
and a bad setting is refused with what to set."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _contracts import same_cvm, same_kmp, same_kpca

from kmp_dask import CVMClassifier, KMPClassifier, KMPRegressor, SparseKernelPCA
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.parallel._engine import IN_PROCESS_THREADS_ENV, in_process_threads
from kmp_dask.store import InMemoryStore

pytestmark = pytest.mark.timeout(300)


def _data(n=5000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=n)


FITS = {
    "kmp-auto": (lambda: KMPRegressor(random_state=0), lambda X, y: (X, y), same_kmp),
    "kmp-int": (lambda: KMPClassifier(n_basis=40, random_state=0), lambda X, y: (X, y > 0), same_kmp),
    "kmp-gcv": (lambda: KMPRegressor(validation_fraction=0, random_state=1), lambda X, y: (X, y), same_kmp),
    "cvm": (lambda: CVMClassifier(random_state=0, gamma=0.5), lambda X, y: (X, y > 0), same_cvm),
    "sparse-kpca": (lambda: SparseKernelPCA(n_components=6, candidates=40, gamma=0.3, random_state=0),
                    lambda X, y: (X,), same_kpca),
}


@pytest.mark.parametrize("name", list(FITS))
def test_threaded_partitions_give_the_loops_model_bit_for_bit(name, monkeypatch):
    X, y = _data()
    make, args, same = FITS[name]
    monkeypatch.setenv(IN_PROCESS_THREADS_ENV, "1")
    ref = make().fit(*args(X, y))
    monkeypatch.setenv(IN_PROCESS_THREADS_ENV, "2")
    est = make().fit(*args(X, y))
    same(est, ref, X)


def _engine(threads, monkeypatch, n=9000):
    monkeypatch.setenv(IN_PROCESS_THREADS_ENV, str(threads))
    X = np.arange(n * 2, dtype=np.float64).reshape(n, 2)
    return InProcessEngine(partition_specs(InMemoryStore(X)))


def test_results_come_back_in_partition_order_from_several_threads(monkeypatch):
    eng = _engine(3, monkeypatch)
    assert eng.n_partitions >= 3 and eng.n_threads == 3
    names = set()

    def op(p, msg):
        names.add(threading.current_thread().name)
        return p.X[0, 0]

    with eng:
        firsts = eng.run(op)
        assert firsts == sorted(firsts) and len(firsts) == eng.n_partitions
        pool = eng._pool
    assert any(n.startswith("kmp-dask-partition") for n in names)
    assert pool._shutdown and eng._pool is None  # closing the engine ends its threads


def test_an_error_in_one_partition_reaches_the_caller(monkeypatch):
    eng = _engine(2, monkeypatch)

    def op(p, msg):
        if p.X[0, 0] > 0:
            raise RuntimeError(f"partition at row {int(p.X[0, 0]) // 2}")
        return 0

    with eng, pytest.raises(RuntimeError, match="partition at row"):
        eng.run(op)


def test_one_partition_or_one_thread_runs_the_plain_loop(monkeypatch):
    assert _engine(4, monkeypatch, n=1000).n_threads == 1  # one partition
    eng = _engine(1, monkeypatch)
    eng.run(lambda p, m: None)
    assert eng.n_threads == 1 and eng._pool is None


@pytest.mark.parametrize("value", ["0", "two", "-3"])
def test_a_bad_thread_count_is_refused_with_what_to_set(value, monkeypatch):
    monkeypatch.setenv(IN_PROCESS_THREADS_ENV, value)
    with pytest.raises(ValueError, match=f"{IN_PROCESS_THREADS_ENV} must be a positive int"):
        in_process_threads(8)


def test_default_is_the_cpus_available_capped_by_the_partitions(monkeypatch):
    import os

    monkeypatch.delenv(IN_PROCESS_THREADS_ENV, raising=False)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert in_process_threads(64) == min(cpus, 8)
    assert in_process_threads(1) == 1
