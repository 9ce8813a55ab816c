"""The compressor's and the CV estimators' sessions: clients resolved, engines and tasks
built through ``parallel._session``, and everything they opened closed — engine first, then client —
however the fit ends (an error or a KeyboardInterrupt in the pursuit included)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.svm import SVC

import kmp_dask.estimators._kmp_cv as kmp_cv
import kmp_dask.parallel._session as session
import kmp_dask.reduced._routes as routes
from kmp_dask import KMPClassifierCV
from kmp_dask.parallel import Tasks
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.store import InMemoryStore

ERRORS = [RuntimeError("pursuit failed"), KeyboardInterrupt()]


@pytest.fixture(scope="module")
def svc_and_rows():
    X, y = make_classification(n_samples=80, n_features=3, n_informative=3, n_redundant=0, random_state=0)
    return SVC(C=10.0, gamma=0.5).fit(X, y), X, y


@pytest.fixture
def log(monkeypatch):
    """Every client session and engine the session helpers open, and their closing, in order."""
    events = []
    real_resolve, real_make = session.resolve_client, session.make_engine

    @contextlib.contextmanager
    def resolve(client, *, in_memory):
        with real_resolve(client, in_memory=in_memory) as resolved:
            events.append(("client", client))
            try:
                yield resolved
            finally:
                events.append(("client closed", client))

    def make(resolved, store, sample_weight=None, **options):
        engine = real_make(resolved, store, sample_weight, **options)
        events.append(("engine", engine))
        close = engine.close
        engine.close = lambda: (events.append(("engine closed", engine)), close())
        return engine

    monkeypatch.setattr(session, "resolve_client", resolve)
    monkeypatch.setattr(session, "make_engine", make)
    return events


def _opened_and_closed(events):
    """Each opened thing closed exactly once, in reverse order of opening."""
    stack = []
    for kind, what in events:
        if kind.endswith("closed"):
            assert stack and stack[-1] == (kind.split()[0], what), events
            stack.pop()
        else:
            stack.append((kind, what))
    assert not stack, events


@pytest.mark.parametrize("error", ERRORS)
def test_engine_session_closes_the_engine_then_the_client(log, error):
    store = InMemoryStore(np.zeros((10, 2)), np.zeros(10), chunk_rows=4)
    with pytest.raises(type(error)), session.engine_session("sync", store, in_memory=True) as engine:
        raise error
    assert [k for k, _ in log] == ["client", "engine", "engine closed", "client closed"]
    assert log[1][1] is engine
    _opened_and_closed(log)


@pytest.mark.parametrize("error", ERRORS)
def test_compressor_pursuit_on_the_engine_that_fails_closes_engine_and_client(log, monkeypatch, svc_and_rows, error):
    svc, X, _ = svc_and_rows
    seen = []

    def failing(engine, *a, **kw):
        seen.append(engine)
        raise error

    monkeypatch.setattr(routes, "compress_on_pool", failing)
    with pytest.raises(type(error)):
        ReducedSetCompressor(n_vectors=5, dense=False, client="sync", optimize_threshold=False).fit(svc, X)
    assert [k for k, _ in log] == ["client", "engine", "engine closed", "client closed"]
    assert seen == [log[1][1]]
    _opened_and_closed(log)


@pytest.mark.parametrize("error", ERRORS)
def test_compressor_chunking_tree_that_fails_closes_its_client(log, monkeypatch, svc_and_rows, error):
    svc, X, _ = svc_and_rows
    seen = []

    def failing(tasks, *a, **kw):
        seen.append(tasks)
        raise error

    monkeypatch.setattr(routes, "chunked_compression", failing)
    with pytest.raises(type(error)):
        ReducedSetCompressor(n_vectors=5, chunk_vectors=10, client="sync", optimize_threshold=False).fit(svc, X)
    assert len(seen) == 1 and isinstance(seen[0], Tasks) and seen[0].client is None
    assert [k for k, _ in log] == ["client", "client closed"]


def test_exchanges_on_a_store_pool_keep_the_engine_open_until_the_fit_ends(log, monkeypatch, svc_and_rows):
    svc, X, y = svc_and_rows
    pool = InMemoryStore(X, y, chunk_rows=23)
    real_levels, after_pursuit = routes.hmp_levels, []

    def levels(route, *a, **kw):
        out = real_levels(route, *a, **kw)
        after_pursuit.append(([k for k, _ in log], route.xengine is not None and route.xengine[0] is log[1][1]))
        return out

    monkeypatch.setattr("kmp_dask.reduced._compressor.hmp_levels", levels)
    comp = ReducedSetCompressor(n_vectors=6, exchange=5, client="sync", optimize_threshold=False).fit(svc, pool)
    assert after_pursuit == [(["client", "engine"], True)]  # open for the exchanges after the pursuit
    assert [k for k, _ in log] == ["client", "engine", "engine closed", "client closed"]
    _opened_and_closed(log)
    assert "_xengine" not in vars(comp)
    monkeypatch.undo()
    ref = ReducedSetCompressor(n_vectors=6, exchange=5, optimize_threshold=False).fit(svc, X)
    np.testing.assert_array_equal(comp.support_index_, ref.support_index_)


@pytest.mark.parametrize("error", ERRORS)
def test_cv_estimator_that_fails_closes_its_client(log, monkeypatch, svc_and_rows, error):
    _, X, y = svc_and_rows
    clients = []

    def failing(self, X, y, split_seed, fit_seed, client):
        clients.append(client)
        raise error

    monkeypatch.setattr(kmp_cv._CVSearch, "cv_arrays", failing)
    with pytest.raises(type(error)):
        KMPClassifierCV(n_basis=3, gammas=[0.5], cv=2, client="sync").fit(X, y)
    assert clients == ["sync"]  # the resolved in-process client, handed on as "sync" to the inner fits
    assert [k for k, _ in log] == ["client", "client closed"]
