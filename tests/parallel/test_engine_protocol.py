"""Both engines are :class:`kmp_dask.blockops.Engine`s: the members and the signatures the drivers use."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from kmp_dask.blockops import Engine, Journal, StatsQuery, kmp_stats
from kmp_dask.parallel import ActorEngine, InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore

ENGINES = (InProcessEngine, ActorEngine)


def _specs(n=400):
    X = np.random.default_rng(0).normal(size=(n, 3))
    return partition_specs(InMemoryStore(X, X[:, 0], chunk_rows=100))


def _params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", ENGINES, ids=lambda c: c.__name__)
def test_signatures_match_the_protocol(cls):
    """run(op, msg=None, effects=()) and close() with the protocol's parameters, names, kinds and defaults."""
    for name in ("run", "close"):
        assert _params(getattr(cls, name)) == _params(getattr(Engine, name)), name


def test_the_check_can_fail():
    class NoClose:
        journal = Journal()

        def run(self, op, msg=None, effects=()):
            return []

    class WrongRun:
        journal = Journal()

        def run(self, op, effects):
            return []

        def close(self):
            pass

    assert not isinstance(NoClose(), Engine)
    assert isinstance(WrongRun(), Engine)  # isinstance sees names only: hence the signature check
    assert _params(WrongRun.run) != _params(Engine.run)


def test_in_process_engine_is_an_engine():
    with InProcessEngine(_specs()) as eng:
        assert isinstance(eng, Engine)
        assert isinstance(eng.journal, Journal)
        assert len(eng.run(kmp_stats, StatsQuery({"kind": "regression"}))) == eng.n_partitions


def test_actor_engine_is_an_engine(thread_client):
    with ActorEngine(thread_client, _specs()) as eng:
        assert isinstance(eng, Engine)
        assert isinstance(eng.journal, Journal)
        assert len(eng.run(kmp_stats, StatsQuery({"kind": "regression"}))) == eng.n_partitions
