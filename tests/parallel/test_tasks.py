"""The generic task runners a family's driver is handed (kmp_dask.parallel.Tasks): a map over
independent problems on engines over one store, and a tree reduction — the same results in this
process and as dask tasks."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kmp_dask.blockops import StatsQuery, kmp_stats
from kmp_dask.parallel import InProcessEngine, Tasks, in_process_specs, local_engine
from kmp_dask.store import InMemoryStore


def _store():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.integers(0, 4, size=300).astype(np.float64)
    return InMemoryStore(X, y, chunk_rows=70), y


def _labels_and_arg(engine, k, scale):
    """A problem: the engine's label set (one pass over its partitions) and its own arguments."""
    parts = engine.run(kmp_stats, StatsQuery(unique_labels=True))
    return np.unique(np.concatenate([p["labels"] for p in parts])), k * scale


def _fails(engine, k):
    raise ValueError(f"problem {k} fails")


def _slow(engine, k):
    time.sleep(1)
    return k


def _run(tasks, store, problems, **kw):
    got = []
    tasks.map_problems(store, _labels_and_arg, problems, finished=lambda k, r: got.append((k, r)), **kw)
    return got


def test_in_turn_runs_every_problem_in_order_on_one_engine():
    store, y = _store()
    got = _run(Tasks(None), store, [(2, (2, 10.0)), (0, (0, 10.0)), (1, (1, 10.0))])
    assert [k for k, _ in got] == [2, 0, 1]  # in the order given
    for k, (labels, value) in got:
        np.testing.assert_array_equal(labels, np.unique(y))
        assert value == k * 10.0


def test_as_tasks_without_a_client_runs_in_turn():
    store, y = _store()
    got = _run(Tasks(None), store, [(0, (0, 1.0)), (1, (1, 1.0))], as_tasks=True)
    assert [k for k, _ in got] == [0, 1]


def test_in_process_specs_are_the_storage_chunks():
    """Without workers to feed, the partitions are the store's chunks (70 rows), not split further."""
    store, _ = _store()
    specs = in_process_specs(store)
    assert [(s.start, s.stop) for s in specs] == [(a, min(a + 70, 300)) for a in range(0, 300, 70)]
    with InProcessEngine(specs) as engine:
        assert len(engine.run(kmp_stats, StatsQuery(unique_labels=True))) == len(specs)


def test_as_tasks_on_a_cluster_gives_every_result_to_the_driver(thread_client):
    store, y = _store()
    tasks = Tasks(thread_client)
    assert tasks.distributed and not Tasks(None).distributed
    got = _run(tasks, store, [(k, (k, 3.0)) for k in range(4)], as_tasks=True, timeout=120)
    assert sorted(k for k, _ in got) == [0, 1, 2, 3]  # in order of completion
    for k, (labels, value) in got:
        np.testing.assert_array_equal(labels, np.unique(y))
        assert value == k * 3.0


def test_a_failing_task_raises_on_the_driver(thread_client):
    store, _ = _store()
    with pytest.raises(ValueError, match="problem 1 fails"):
        Tasks(thread_client).map_problems(store, _fails, [(1, (1,))], finished=lambda k, r: None, as_tasks=True)


def test_no_result_within_the_timeout_names_the_problems(thread_client):
    store, _ = _store()
    with pytest.raises(TimeoutError, match="no widget problem finished within 0 s"):
        Tasks(thread_client).map_problems(store, _slow, [(0, (0,))], finished=lambda k, r: None, as_tasks=True,
                                          timeout=0.2, what="widget problem")


def _leaf(x):
    return x.upper()


def _combine(*group):
    return "(" + " ".join(group) + ")"


@pytest.mark.parametrize("arity, expected", [
    (2, "(((A B) (C D)) ((E)))"),  # a group of one is combined too, at every level it passes
    (3, "((A B C) (D E))"),
    (5, "(A B C D E)"),
])
def test_tree_reduce_combines_consecutive_groups_level_by_level(arity, expected):
    assert Tasks(None).tree_reduce(_leaf, list("abcde"), _combine, arity=arity) == expected


def test_tree_reduce_of_one_item_is_its_leaf():
    assert Tasks(None).tree_reduce(_leaf, ["z"], _combine) == "Z"


def test_tree_reduce_as_tasks_is_the_same_tree(thread_client):
    assert Tasks(thread_client).tree_reduce(_leaf, list("abcde"), _combine, arity=2, timeout=120) == \
        "(((A B) (C D)) ((E)))"


def test_local_engine_holds_the_rows():
    X = np.arange(12.0).reshape(6, 2)
    with local_engine(X) as engine:
        assert isinstance(engine, InProcessEngine)
        np.testing.assert_array_equal(np.concatenate([p.X for p in engine.partitions]), X)
