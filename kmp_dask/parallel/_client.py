"""Choosing where a fit runs: in-process, an existing dask client, or an embedded LocalCluster.

The ``client`` argument of every estimator goes through :func:`resolve_client`:

``None`` (default)
    Use the active ``distributed`` client if there is one. Otherwise numpy input runs
    in-process (small data, no cluster needed) and store / dask input starts an embedded
    ``LocalCluster`` of processes (one single-threaded worker per core, the laptop default),
    closed again when the fit ends.
``"sync"``
    Always in-process, whatever the input.
``"embedded"``
    Always an embedded ``LocalCluster`` of processes.
a ``distributed.Client``
    Used as is; never closed by us.
a string address (``"tcp://host:8786"``) or a scheduler-file path ending in ``.json``
    A client is connected for the fit and closed afterwards (the cluster stays).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["resolve_client", "embedded_cluster"]


@contextlib.contextmanager
def embedded_cluster(n_workers: int | None = None):
    """A process ``LocalCluster`` with single-threaded workers and its client, closed on exit."""
    from distributed import Client, LocalCluster

    n = n_workers or max(1, min(os.cpu_count() or 1, 8))
    with LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
    ) as cluster, Client(cluster) as client:
        yield client


@contextlib.contextmanager
def resolve_client(client, *, in_memory: bool):
    """Context manager yielding a ``distributed.Client`` or ``None`` (run in-process)."""
    if isinstance(client, str) and client == "sync":
        yield None
        return
    if isinstance(client, str) and client == "embedded":
        with embedded_cluster() as c:
            yield c
        return
    if isinstance(client, str):
        from distributed import Client

        kwargs = {"scheduler_file": client} if client.endswith(".json") else {"address": client}
        with Client(timeout="30s", **kwargs) as c:
            yield c
        return
    if client is not None:
        if not hasattr(client, "submit") or not hasattr(client, "scheduler_info"):
            raise TypeError(
                "client must be None, 'sync', 'embedded', a scheduler address or a "
                f"distributed.Client; got {type(client).__name__}"
            )
        yield client
        return
    active = _active_client()
    if active is not None:
        yield active
    elif in_memory:
        yield None
    else:
        with embedded_cluster() as c:
            yield c


def _active_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None
