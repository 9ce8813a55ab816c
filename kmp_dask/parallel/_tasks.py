"""Generic task runners a family's driver is handed: a map over independent problems and a tree reduction.

The families' loops live in :mod:`kmp_dask.greedy` (no dask there); what they need from the
cluster comes through a :class:`Tasks` object built here, around a client (or None):

* :meth:`Tasks.map_problems` — ``fn(engine, *args)`` for each of several independent problems on
  engines over one store's rows: in turn on one engine (in-process without a cluster, actors on
  the workers with one), or one dask task each (an in-process engine over the rows inside the
  task), results handed to ``finished(k, result)`` on the driver as they complete;
* :meth:`Tasks.tree_reduce` — ``leaf(item)`` per item, then ``combine(*group)`` over groups of
  ``arity`` up a tree until one value is left, as dask tasks (or in this process);
* :func:`local_engine` — an in-process engine over rows held in memory (picklable by reference:
  a task builds its own).

Nothing here knows a family: the functions, the engine set-up effects and the messages come from
the caller.
"""

from __future__ import annotations

import numpy as np

from ..blockops import PartitionSpec, partition_bounds
from ..store import InMemoryStore
from ._engine import InProcessEngine, tune_worker_malloc
from ._setup import _SliceReader, make_engine
from ._waits import RESULT_TIMEOUT, wait_for

__all__ = ["Tasks", "in_process_specs", "local_engine", "IN_PROCESS_PARTITION_BYTES"]

IN_PROCESS_PARTITION_BYTES = 64 << 20
"""Partition size for a loop on an in-process engine (no cluster, or one problem as a task): a
core-set loop makes one pass per core vector, most of them over ~60 sampled rows, so a pass costs
mostly its per-partition overhead. The engine's usual split into ≥ 8 partitions (for parallel
workers) made letter's 14,000 rows 7 partitions; in one process that only adds overhead
(measured: see docs/cvm.md)."""


def in_process_specs(store):
    """Partitions of ``store`` for a loop on an in-process engine: row blocks within its storage
    chunks of up to :data:`IN_PROCESS_PARTITION_BYTES`, not split further for workers."""
    row_bytes = int(store.n_features) * np.dtype(store.dtype).itemsize
    ranges = partition_bounds(store.row_chunks, row_bytes, target_bytes=IN_PROCESS_PARTITION_BYTES,
                              min_partitions=1)
    row_bytes += 8 * int(np.prod(store.y_shape[1:] or (1,))) if store.has_y else 0
    if store.url is None:
        return [PartitionSpec(i, a, b, _SliceReader(a, *store.read_range(a, b)), row_bytes, None)
                for i, (a, b) in enumerate(ranges)]
    reader = store.reader()
    return [PartitionSpec(i, a, b, reader, row_bytes, None) for i, (a, b) in enumerate(ranges)]


def local_engine(rows):
    """An in-process engine over ``rows`` (an array held in this process), as
    :func:`~kmp_dask.parallel.make_engine` builds it without a client."""
    return make_engine(None, InMemoryStore(rows))


class Tasks:
    """The cluster as a family's driver sees it: ``client`` (None: everything in this process).

    ``distributed``: whether problems can run as dask tasks. ``local_engine``: :func:`local_engine`.
    """

    local_engine = staticmethod(local_engine)

    def __init__(self, client=None):
        self.client = client

    @property
    def distributed(self) -> bool:
        return self.client is not None

    def map_problems(self, store, fn, problems, *, finished, setup=(), as_tasks: bool = False,
                     timeout: float | None = RESULT_TIMEOUT, what: str = "problem") -> None:
        """``finished(k, fn(engine, *args))`` for each ``(k, args)`` of ``problems``.

        ``as_tasks=False`` (or no client): in turn on one engine over ``store`` — in-process
        (partitions :func:`in_process_specs`) without a client, one actor per worker with one.
        ``as_tasks=True``: one dask task each, on an in-process engine over the store's rows built
        inside the task; ``finished`` runs on the driver as each result arrives (in order of
        completion), and the tasks are cancelled if it fails or the wait ends: no result within
        ``timeout`` seconds (a :class:`TimeoutError` naming ``what``), the scheduler gone
        (``SchedulerLostError``), no live worker for ``kmp_dask.no-workers-wait`` seconds
        (``NoWorkersError``) — :func:`~._waits.wait_for`; a worker lost while others live only
        reruns its problem elsewhere. ``setup``: effects every engine receives before its first
        problem. ``fn`` and ``args`` travel to the workers.
        """
        if self.client is None or not as_tasks:
            self._in_turn(store, fn, problems, finished, setup)
        else:
            self._as_tasks(store, fn, problems, finished, setup, timeout, what)

    def _in_turn(self, store, fn, problems, finished, setup):
        engine = InProcessEngine(in_process_specs(store)) if self.client is None else make_engine(self.client, store)
        try:
            engine.run(None, None, list(setup))
            for k, args in problems:
                finished(k, fn(engine, *args))
        finally:
            engine.close()

    def _as_tasks(self, store, fn, problems, finished, setup, timeout, what):
        client = self.client
        specs = in_process_specs(store)
        # hash=False: keys of this call only (a cancelled earlier call must not release them)
        specs_f = client.scatter(specs, broadcast=True, hash=False) if store.url is None else specs
        keys = [k for k, _ in problems]
        futures = [client.submit(_problem_task, specs_f, list(setup), fn, args, pure=False) for _, args in problems]
        # each problem's result as it arrives; ``timeout``: the longest wait for the next one
        wait_for(futures, client, what=what, timeout=timeout, on_result=lambda i, r: finished(keys[i], r))

    def tree_reduce(self, leaf, items, combine, *, arity: int = 2, timeout: float | None = RESULT_TIMEOUT):
        """``leaf(item)`` for each of ``items``, then ``combine(*group)`` over consecutive groups of
        ``arity`` values, level by level, until one value is left; returns it. With a client every
        call is a dask task (pure functions: a worker lost mid-tree recomputes its part) and the
        driver only submits and waits (:func:`~._waits.wait_for`), at most ``timeout`` seconds (then a
        :class:`TimeoutError`, the tree cancelled; the scheduler or every worker gone: as
        :meth:`map_problems`); without one, the same calls in the same order in this process."""
        if self.client is None:
            nodes = [leaf(x) for x in items]
            while len(nodes) > 1:
                nodes = [combine(*nodes[i : i + arity]) for i in range(0, len(nodes), arity)]
            return nodes[0]
        client = self.client
        futures = [client.submit(leaf, x, pure=False) for x in items]
        while len(futures) > 1:
            futures = [client.submit(combine, *futures[i : i + arity], pure=False)
                       for i in range(0, len(futures), arity)]
        return wait_for(futures, client, what="tree reduction", timeout=timeout)[0]


def _problem_task(specs, setup, fn, args):
    # A worker's nanny makes every temporary above 128 KiB a fresh mmap (docs/engine.md): a loop's
    # per-iteration arrays (a core-set loop's growing K̃ and its factor, ~1 MB at 370 core rows)
    # then fault their pages in on every iteration.
    tune_worker_malloc()
    with InProcessEngine(specs) as engine:
        engine.run(None, None, setup)
        return fn(engine, *args)
