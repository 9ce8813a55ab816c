"""Building an engine for a store: partitions = row blocks chosen from the data, placed on workers."""

from __future__ import annotations

import numpy as np

from ..blockops import PartitionSpec, partition_bounds
from ._engine import ActorEngine, InProcessEngine

__all__ = ["partition_specs", "make_engine", "check_store_visible", "StoreNotVisibleError"]


class StoreNotVisibleError(ValueError):
    """The store lives where the client's workers cannot read it (``memory://`` of this process)."""


def check_store_visible(client, store) -> None:
    """Refuse, before any work, a store the workers of ``client`` cannot open: a ``memory://`` store
    lives in this process's memory (fsspec's memory file system), so worker processes find nothing
    there (zarr's ``ArrayNotFoundError`` mid-pass). Worker threads of this process (a
    ``LocalCluster(processes=False)``: workers with this process's pid) see it, and so does a fit in process."""
    url = getattr(store, "url", None)
    if client is None or not isinstance(url, str) or not url.startswith("memory://"):
        return
    if _workers_in_this_process(client):
        return
    elsewhere = next(iter(_worker_addresses(client)), "the cluster's")
    raise StoreNotVisibleError(
        f"the store {url!r} lives in this process's memory (memory://), which the dask workers (e.g. {elsewhere}) "
        "— other processes — cannot see. Write the store to a local path or a file "
        "system the workers share (create_store('data.zarr', ...)) or to object storage (s3://...), or run in this "
        "process (client='sync').")


def _workers_in_this_process(client) -> bool:
    """Whether every worker of ``client`` is a thread of this process: a ``LocalCluster(processes=False)``
    made here (its workers are ``Worker`` objects, not the ``Nanny`` of a worker process)."""
    from distributed import Worker

    workers = getattr(getattr(client, "cluster", None), "workers", None)
    return bool(workers) and all(isinstance(w, Worker) for w in workers.values())


def _worker_addresses(client) -> list:
    try:
        return list(client.scheduler_info().get("workers", {}))
    except Exception:  # noqa: BLE001 - only for the message
        return []


def partition_specs(store, sample_weight=None) -> list[PartitionSpec]:
    """The partitions of ``store``: row blocks within its storage chunks (:func:`partition_bounds`).

    The partition is the unit of every reduction, and partitions are summed in order on the
    driver; choosing them from the data alone (not from the number of workers or their memory)
    is what makes a fit bit-for-bit identical on 1 or many workers.

    ``sample_weight`` (float64, one per row, or None) travels with the specs: each carries its
    own rows' weights (8 bytes a row), so a weighted fit's partitions are rebuilt with them.
    """
    row_bytes = int(store.n_features) * np.dtype(store.dtype).itemsize
    ranges = partition_bounds(store.row_chunks, row_bytes)
    row_bytes += 8 * int(np.prod(store.y_shape[1:] or (1,))) if store.has_y else 0
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    row_bytes += 0 if w is None else 8

    def weights(a, b):
        return None if w is None else np.ascontiguousarray(w[a:b])

    if store.url is None:  # in-memory data: ship each worker only its own rows
        return [PartitionSpec(i, a, b, _SliceReader(a, *store.read_range(a, b)), row_bytes, weights(a, b))
                for i, (a, b) in enumerate(ranges)]
    reader = store.reader()
    return [PartitionSpec(i, a, b, reader, row_bytes, weights(a, b)) for i, (a, b) in enumerate(ranges)]


class _SliceReader:
    """Rows ``[offset, offset + len(X))`` of an in-memory data set (picklable, carries only them)."""

    def __init__(self, offset, X, y):
        self.offset, self.X, self.y = offset, X, y

    def read_range(self, start, stop):
        a, b = start - self.offset, stop - self.offset
        return self.X[a:b], None if self.y is None else self.y[a:b]


def make_engine(client, store, sample_weight=None, **options):
    """In-process engine when ``client`` is None, else one actor per dask worker.

    ``sample_weight``: per-row weights carried by the partitions (see :func:`partition_specs`).
    ``options`` go to :class:`ActorEngine` (``memory_fraction``, ``pass_timeout``, ...).
    """
    check_store_visible(client, store)
    specs = partition_specs(store, sample_weight)
    if client is None:
        return InProcessEngine(specs)
    return ActorEngine(client, specs, **{**engine_config(), **options})


def engine_config() -> dict:
    """Engine options from dask's configuration (``kmp_dask.*`` keys; YAML, env or ``dask.config.set``).

    ``kmp_dask.memory-fraction`` (default 0.5), ``kmp_dask.budget-bytes`` (per-worker bytes for
    partitions, overrides the fraction), ``kmp_dask.local-x`` (stream rows from a raw local copy,
    default true), ``kmp_dask.pass-timeout`` (s, default 3600), ``kmp_dask.pause-timeout`` (s, 120).
    """
    import dask

    keys = {"memory-fraction": "memory_fraction", "budget-bytes": "budget_bytes", "local-x": "local_x",
            "pass-timeout": "pass_timeout", "pause-timeout": "pause_timeout"}
    out = {}
    for key, arg in keys.items():
        value = dask.config.get(f"kmp_dask.{key}", None)
        if value is not None:
            out[arg] = value
    return out
