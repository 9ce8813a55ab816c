"""Core vector machines on the cluster: one-vs-rest binary problems as parallel tasks of one graph.

A binary problem on a store with a cluster runs on an :class:`~kmp_dask.parallel.ActorEngine`
(its distance passes on the workers that hold the rows). The binary problems of a one-vs-rest
multi-class fit are independent: with a cluster each is one dask task that runs the core-set loop
on an in-process engine over the store's rows (read by the task), so a cluster with more workers
finishes a many-class problem sooner; without one they run in turn on one engine.
"""

from __future__ import annotations

import numpy as np

from ..blockops._cvm import cvm_effects
from ..greedy._cvm import core_vector_machine, mmda_feature
from ..blockops import PartitionSpec, partition_bounds
from ._engine import InProcessEngine, tune_worker_malloc
from ._setup import _SliceReader, make_engine

__all__ = ["fit_binary_problems", "run_problem", "in_process_specs"]

IN_PROCESS_PARTITION_BYTES = 64 << 20
"""Partition size for a core-set loop on an in-process engine (no cluster, or one one-vs-rest
problem as a task): the loop makes one pass per core vector, most of them over ~60 sampled rows,
so a pass costs mostly its per-partition overhead. The engine's usual split into ≥ 8 partitions
(for parallel workers) made letter's 14,000 rows 7 partitions; in one process that only adds
overhead (measured: see docs/cvm.md)."""


def in_process_specs(store):
    """Partitions of ``store`` for an in-process core-set loop: row blocks within its storage
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


def run_problem(engine, positive, *, kernel, kappa, C, eps, n_rows, candidates, seed, max_core, n_components=0):
    """One binary problem ("label == positive") on ``engine``: the CVM (a :class:`CVMResult`), or
    with ``n_components`` the MMDA features — each a CVM on the kernel deflated by the earlier
    ones, sent to the partitions as a new projection column — as a list of ``(CVMResult,
    feature)`` with ``feature = (S, a, PSa, norm)`` (:func:`~kmp_dask.greedy._cvm.mmda_feature`)."""
    engine.run(None, None, [cvm_effects.targets(positive), cvm_effects.clear_features()])
    rng = np.random.default_rng(seed)
    if not n_components:
        return core_vector_machine(engine, kernel=kernel, kappa=kappa, C=C, eps=eps, n_rows=n_rows,
                                   candidates=candidates, random_state=rng, max_core=max_core)
    out = []
    for q in range(n_components):
        res = core_vector_machine(engine, kernel=kernel, kappa=kappa, C=C, eps=eps, n_rows=n_rows,
                                  candidates=candidates, random_state=rng, max_core=max_core, n_features_deflated=q)
        feature = mmda_feature(kernel, res)
        if feature is None:  # w = 0: the deflated problem has no direction left
            break
        engine.run(None, None, [cvm_effects.add_feature(*feature)])
        out.append((res, feature))
    return out


def _task(specs, positive, kw):
    # A worker's nanny makes every temporary above 128 KiB a fresh mmap (docs/engine.md): the loop's
    # per-iteration core-sized arrays (the growing K̃ and its factor, ~1 MB at 370 core rows) then
    # fault their pages in on every iteration.
    tune_worker_malloc()
    with InProcessEngine(specs) as engine:
        engine.run(None, None, [cvm_effects.init(kw["kernel"])])
        return run_problem(engine, positive, **kw)


def _engine(client, store):
    return InProcessEngine(in_process_specs(store)) if client is None else make_engine(client, store)


def fit_binary_problems(client, store, positives, *, seeds, timeout: float = 3600.0, **kw):
    """Run one binary problem per entry of ``positives``; returns their results in order.

    ``client=None``: one in-process engine, problems in turn. One problem and a client: an actor
    engine (passes on the workers). Several problems and a client: one task each.
    """
    if client is None or len(positives) == 1:
        engine = _engine(client, store)
        try:
            engine.run(None, None, [cvm_effects.init(kw["kernel"])])
            return [run_problem(engine, p, seed=s, **kw) for p, s in zip(positives, seeds)]
        finally:
            engine.close()
    specs = in_process_specs(store)
    specs_f = client.scatter(specs, broadcast=True) if store.url is None else specs
    futures = [client.submit(_task, specs_f, p, {**kw, "seed": s}, pure=False) for p, s in zip(positives, seeds)]
    try:
        return client.gather(futures, errors="raise", direct=None, asynchronous=False) if timeout is None else [
            f.result(timeout=timeout) for f in futures]
    except TimeoutError:
        for f in futures:
            f.cancel()
        raise TimeoutError(f"the one-vs-rest problems did not finish within {timeout:.0f} s (kmp_dask.pass-timeout)"
                           ) from None
