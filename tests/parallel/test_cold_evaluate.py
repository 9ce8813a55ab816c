"""A cold worker's first ``evaluate`` (docs/engine.md, "A cold worker's first evaluate"): the model
travels to the workers once each, never through the scheduler, and the module of its class is
imported on every worker at once before it is sent.

Measured before the fix (benchmarks/cold_evaluate.py): the model was a literal of the graph, so
the scheduler unpickled it too — importing kmp_dask.estimators, scikit-learn, scipy.stats and
pandas in the scheduler process — and then the worker computing its key, and only after that
the others: three imports of 1.6-2.0 s each, one after the other, on the first evaluate.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np
import pytest

from kmp_dask.datasets import make_classification_store
from kmp_dask.evaluation import evaluate
from kmp_dask.parallel._evaluate import warm_workers

pytestmark = pytest.mark.timeout(300)

UNPICKLED = 0  #: how many times a _CountedModel was unpickled in this process


class _CountedModel:
    """A classifier (a fixed linear rule) that counts, per process, how often it is unpickled."""

    def __init__(self, w, classes):
        self.w, self.classes_, self.n_features_in_ = np.asarray(w, dtype=float), np.asarray(classes), len(w)

    def __setstate__(self, state):
        global UNPICKLED
        UNPICKLED += 1
        self.__dict__.update(state)

    def predict(self, X):
        return self.classes_[(np.asarray(X) @ self.w > 0).astype(int)]


def _count():
    return sys.modules[__name__].UNPICKLED


def _imported(name):
    return name in sys.modules


@pytest.mark.parametrize("current", [True, False], ids=["current-client", "client-argument-only"])
def test_the_model_is_unpickled_once_per_worker_and_never_by_the_scheduler(tmp_path, process_client, current):
    """40 row chunks on 2 workers: each worker unpickles the model once (not once per task: 20
    each), and the scheduler (in this process: a LocalCluster's) never; the metrics are those of
    the in-process pass. Up to 3 per worker: dask's active memory manager may drop a worker's
    replica when no task waits for it there, and a later task fetches it again (seen once in 5
    runs: 2).

    Before: with the client current (the CLI's), the scheduler unpickled it (the assertion below);
    with the client only passed as ``client=``, the pass ran in this process, not on its workers."""
    client = process_client
    store = make_classification_store(tmp_path / "s.zarr", 2000, n_features=4, n_classes=2, chunk_rows=50,
                                      random_state=0)
    model = _CountedModel([1.0, -0.5, 0.25, 0.0], [0, 1])
    here, workers = UNPICKLED, client.run(_count)
    with client.as_current() if current else contextlib.nullcontext():
        got = evaluate(model, store, client=client)
    assert UNPICKLED == here, "the scheduler unpickled the model: it travelled inside the graph"
    after = client.run(_count)
    per_worker = {w: after[w] - workers.get(w, 0) for w in after}
    assert all(1 <= n <= 3 for n in per_worker.values()), per_worker
    assert got == evaluate(model, store, client="sync")


def test_warm_workers_imports_a_module_on_every_worker(process_client):
    client = process_client
    assert not any(client.run(_imported, "wave").values()), "precondition: no worker has imported wave"
    warm_workers(client, "wave")
    assert all(client.run(_imported, "wave").values())
    warm_workers(client, "kmp_dask_no_such_module")  # left to the unpickling that follows: no error here
    warm_workers(client, "__main__")  # a class of the driver's script: nothing to import on a worker


@pytest.mark.parametrize("what", ["evaluate", "predict_to_file", "predict_to_store"])
def test_a_lost_model_is_shipped_again(tmp_path, process_client, monkeypatch, what):
    """The scattered model is not recomputed like a graph key: when it is lost (here: the first
    shipment cancelled before the pass, as when the one worker holding it dies), the pass runs
    again with the model shipped again, and gives what an undisturbed pass gives."""
    from kmp_dask import evaluation
    from kmp_dask.parallel import _evaluate

    store = make_classification_store(tmp_path / "s.zarr", 400, n_features=4, n_classes=2, chunk_rows=50,
                                      random_state=0)
    model = _CountedModel([1.0, -0.5, 0.25, 0.0], [0, 1])
    ship, shipped = _evaluate.ship_model, []

    def lost_first(m, client=None):
        future = ship(m, client)
        shipped.append(future)
        if len(shipped) == 1:
            process_client.cancel(future)  # gone before the pass reads it
        return future

    monkeypatch.setattr(_evaluate, "ship_model", lost_first)
    if what == "evaluate":
        got, want = evaluate(model, store, client=process_client), evaluate(model, store, client="sync")
    elif what == "predict_to_file":
        evaluation.predict_to_file(model, store, tmp_path / "p.csv", client=process_client)
        evaluation.predict_to_file(model, store, tmp_path / "q.csv", client="sync")
        got, want = (tmp_path / "p.csv").read_text(), (tmp_path / "q.csv").read_text()
    else:
        got, want = (np.asarray(evaluation.predict_to_store(model, store, tmp_path / name, client=c)
                                .read_range(0, 400)[1])
                     for name, c in (("p.zarr", process_client), ("q.zarr", "sync")))
    assert len(shipped) >= 2 and shipped[0].status == "cancelled"
    if isinstance(got, np.ndarray):
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want
