"""The estimators' sessions: a store's label set from greedy/, the engine closed however a
KMP fit ends, CVM's tasks through task_session."""

from __future__ import annotations

import numpy as np
import pytest

import kmp_dask.estimators._kmp as est_kmp
from kmp_dask import CVMClassifier, KMPClassifier
from kmp_dask.greedy import partition_labels, store_labels
from kmp_dask.parallel import InProcessEngine, Tasks
from kmp_dask.parallel._session import engine_session, task_session
from kmp_dask.store import InMemoryStore


def test_store_labels_are_numpys_label_sets():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 2)), rng.choice([3, 7, 11], size=40)
    y[:12] = 7  # a partition holding one class only
    store = InMemoryStore(X, y, chunk_rows=12)
    with engine_session(None, store, in_memory=True) as engine:
        parts = partition_labels(engine)
        merged = store_labels(engine)
    bounds = [(0, 12), (12, 24), (24, 36), (36, 40)]
    assert [p.tolist() for p in parts] == [np.unique(y[a:b]).tolist() for a, b in bounds]
    np.testing.assert_array_equal(merged, np.unique(y))


def _closing_spy(monkeypatch):
    closed = []
    original = InProcessEngine.close
    monkeypatch.setattr(InProcessEngine, "close", lambda self: (closed.append(self), original(self)))
    return closed


@pytest.mark.parametrize("error", [RuntimeError("pursuit failed"), KeyboardInterrupt()])
def test_kmp_fit_that_fails_or_is_interrupted_closes_its_engine(monkeypatch, error):
    closed = _closing_spy(monkeypatch)
    seen = []

    def failing(engine, *args, **kw):  # (engine, config, *, random_state, ...)
        seen.append(engine)
        raise error

    monkeypatch.setattr(est_kmp, "kernel_matching_pursuit", failing)
    X, y = np.random.default_rng(1).standard_normal((30, 2)), np.arange(30) % 2
    with pytest.raises(type(error)):
        KMPClassifier(n_basis=3, gamma=1.0, client="sync").fit(X, y)
    assert len(seen) == 1 and closed == seen


def test_task_session_yields_tasks_in_process_for_sync():
    with task_session("sync", in_memory=False) as tasks:
        assert isinstance(tasks, Tasks) and tasks.client is None and not tasks.distributed


def test_cvm_on_a_store_without_class_names_reads_its_labels(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 2))
    y = np.where(X[:, 0] > 0, 5, 2)
    clf = CVMClassifier(gamma=1.0, random_state=0, client="sync").fit(InMemoryStore(X, y, chunk_rows=16))
    np.testing.assert_array_equal(clf.classes_, [2, 5])
    assert (clf.predict(X) == y).mean() > 0.9
