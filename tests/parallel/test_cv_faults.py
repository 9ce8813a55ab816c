"""The cross-validated search on a store survives a killed worker and runs out of core.

``KMPClassifierCV`` on a zarr store runs one pursuit per (γ, fold) through the engine on the
client's workers, one pass scoring every prefix (``held_out_prefix_stats``: dask tasks), then a
refit. A worker SIGKILLed at one instant of that search — inside a (γ, fold) pursuit (from the
fit's own iteration listener) or as the scoring pass is submitted — is repaired (the engine replays
its journal; dask recomputes the lost tasks), and the search ends with the undisturbed search's
``scores_``, ``best_params_``, ``n_basis_`` and refitted model, bit for bit. The slow tests kill
workers of real ``dask scheduler`` + ``dask worker`` processes at random times, and run the search
on a store several times the workers' ``memory_limit``.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from _loaded_machine import WORKER_WAIT, wait_for_workers  # generous on a loaded machine (issue 29)

from kmp_dask import KMPClassifierCV
from kmp_dask.datasets import make_classification_store
from kmp_dask.estimators import _kmp_cv
from kmp_dask.estimators._progress import iteration_listener
from kmp_dask.parallel import _cv_scores, _engine

pytestmark = [pytest.mark.timeout(600),
              # the small grids put the best score at the cap / an end of the grid: the search says so
              pytest.mark.filterwarnings("ignore:KMPClassifierCV.*best mean held-out score:UserWarning"),
              pytest.mark.filterwarnings("ignore:KMPClassifierCV.*gamma of the grid:UserWarning")]

KW = dict(gammas=[0.02, 0.1], n_basis=24, cv=3, random_state=0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """20,000 rows × 10 features, 3 classes, in 4 chunks: ≥ 8 partitions, so both workers hold some."""
    path = tmp_path_factory.mktemp("cvfaults") / "train.zarr"
    return make_classification_store(str(path), 20_000, n_features=10, n_classes=3, chunk_rows=5_000,
                                     random_state=1)


@pytest.fixture(scope="module")
def reference(store):
    """The undisturbed search, in process (client="sync"): the oracle of every test here (the same
    search on the workers of a process LocalCluster gives it bit for bit: measured, and implied by
    every test here passing)."""
    return KMPClassifierCV(client="sync", **KW).fit(store)


def _assert_same_search(got, ref):
    """Bit for bit: the held-out scores of every (γ, fold, size), the choice, and the refitted model."""
    assert got.scores_.shape == ref.scores_.shape
    assert got.scores_.tobytes() == ref.scores_.tobytes()
    assert got.best_params_ == ref.best_params_
    assert got.n_basis_ == ref.n_basis_
    a, b = got.best_estimator_, ref.best_estimator_
    assert a.basis_indices_.tolist() == b.basis_indices_.tolist()
    assert a.dual_coef_.tobytes() == b.dual_coef_.tobytes()
    assert np.asarray(a.intercept_).tobytes() == np.asarray(b.intercept_).tobytes()


class _Restarts:
    """Records ``n_restarts`` of every engine the search closes (each (γ, fold) pursuit and the refit)."""

    def __init__(self, monkeypatch):
        self.seen = []
        close = _engine.ActorEngine.close

        def recording_close(engine):
            self.seen.append(engine.n_restarts)
            return close(engine)

        monkeypatch.setattr(_engine.ActorEngine, "close", recording_close)


def test_worker_killed_inside_a_fold_pursuit_gives_the_undisturbed_search(store, reference, process_client,
                                                                             monkeypatch):
    """One worker SIGKILLed from the iteration listener after the first pass of the 2nd (γ, fold)
    pursuit (of 3): the engine rebuilds the lost partitions and the search is the undisturbed one."""
    wait_for_workers(process_client, 2)
    pids = process_client.run(os.getpid)
    victim = sorted(pids)[0]
    fold_fit, pursuits, killed = _kmp_cv._BaseKMPCV._fold_fit, [0], []

    def counting_fold_fit(self, *a, **k):
        pursuits[0] += 1
        return fold_fit(self, *a, **k)

    def kill(desc, record):
        if pursuits[0] == 2 and not killed:  # its first record: atoms 1-8 admitted (8 a pass), 16 more to go
            os.kill(pids[victim], signal.SIGKILL)
            killed.append((pursuits[0], record["iteration"]))

    monkeypatch.setattr(_kmp_cv._BaseKMPCV, "_fold_fit", counting_fold_fit)
    restarts = _Restarts(monkeypatch)
    with iteration_listener(kill):
        got = KMPClassifierCV(client=process_client, **KW).fit(store)
    assert killed == [(2, 7)]
    assert restarts.seen[1] >= 1, restarts.seen  # the 2nd pursuit's engine did rebuild the lost worker's partitions
    wait_for_workers(process_client, 2)  # the nanny restarts it (or a new nanny replaces it)
    assert pids[victim] not in process_client.run(os.getpid).values()  # the kill did land
    _assert_same_search(got, reference)


def test_worker_killed_as_the_scoring_pass_starts_gives_the_undisturbed_search(store, reference, process_client,
                                                                                monkeypatch):
    """One worker SIGKILLed after the last (γ, fold) pursuit, just before the pass scoring every
    prefix is submitted (the scheduler may still give it tasks): dask recomputes the lost blocks."""
    wait_for_workers(process_client, 2)
    pids = process_client.run(os.getpid)
    victim = sorted(pids)[-1]
    row_block_sums, killed = _cv_scores.row_block_sums, []

    def kill_then_sum(*a, **k):
        if not killed:
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)
        return row_block_sums(*a, **k)

    monkeypatch.setattr(_cv_scores, "row_block_sums", kill_then_sum)
    got = KMPClassifierCV(client=process_client, **KW).fit(store)
    assert killed == [victim]
    wait_for_workers(process_client, 2)
    assert pids[victim] not in process_client.run(os.getpid).values()
    _assert_same_search(got, reference)
