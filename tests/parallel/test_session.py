"""engine_session: the estimators' one way to an engine; it closes the engine however the block ends."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask.parallel import InProcessEngine
from kmp_dask.parallel._session import engine_session
from kmp_dask.store import InMemoryStore


def _closing_spy(monkeypatch):
    closed = []
    original = InProcessEngine.close
    monkeypatch.setattr(InProcessEngine, "close", lambda self: (closed.append(self), original(self)))
    return closed


def test_yields_an_engine_over_the_store_and_closes_it(monkeypatch):
    closed = _closing_spy(monkeypatch)
    X = np.arange(30.0).reshape(15, 2)
    with engine_session(None, InMemoryStore(X, chunk_rows=4), in_memory=True) as engine:
        assert isinstance(engine, InProcessEngine) and engine.n_partitions == 4
    assert closed == [engine]


def test_closes_the_engine_when_the_fit_fails(monkeypatch):
    closed = _closing_spy(monkeypatch)
    with pytest.raises(RuntimeError, match="fit failed"):
        with engine_session(None, InMemoryStore(np.ones((6, 2))), in_memory=True) as engine:
            raise RuntimeError("fit failed")
    assert closed == [engine]
