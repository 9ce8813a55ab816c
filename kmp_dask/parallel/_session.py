"""One fit's session with the engine: the client resolved and an engine over the store, closed at the end.

An estimator composes a family's loop (``kmp_dask.greedy``) with an engine; this is the one way
it gets that engine: ``with engine_session(client, store, in_memory=...) as engine`` resolves
``client`` (None, "sync", "embedded", an address or a ``distributed.Client``:
:func:`~kmp_dask.parallel.resolve_client`), builds the engine over the store's partitions
(:func:`~kmp_dask.parallel.make_engine`: in process without a client, one actor per worker
otherwise), hands it to the block and closes the engine, then the client it started, whatever
happens in the block. The estimator never names a partition query or a client itself (a
store's label set: :func:`kmp_dask.greedy._labels.store_labels` on the session's engine).

A family that runs independent problems as tasks (CVM / MMDA: ``fit_binary_problems``) gets its
:class:`~kmp_dask.parallel.Tasks` the same way: ``with task_session(client, in_memory=...) as tasks``.

Two smaller pieces for callers that hold the client longer than one engine: ``client_session``
(the resolved client alone: the CV estimators hand it to their inner fits, the compressor keeps it
open for its exchanges) and ``engine_on(resolved, store)`` (an engine on a client already resolved,
closed when its block ends). ``engine_session`` is the two composed.
"""

from __future__ import annotations

import contextlib

from ._client import resolve_client
from ._setup import make_engine
from ._tasks import Tasks

__all__ = ["client_session", "engine_on", "engine_session", "task_session"]


@contextlib.contextmanager
def client_session(client, *, in_memory: bool):
    """Yield the resolved ``client`` (None: in this process; :func:`resolve_client`: its errors and
    bounded waits), closing a client it started however the block ends."""
    with resolve_client(client, in_memory=in_memory) as resolved:
        yield resolved


@contextlib.contextmanager
def engine_on(resolved, store, sample_weight=None, **options):
    """Yield an engine over ``store`` on an already resolved client (from :func:`client_session`;
    None: in process), closed however the block ends (``sample_weight``, ``options``: as
    :func:`make_engine`)."""
    engine = make_engine(resolved, store, sample_weight, **options)
    try:
        yield engine
    finally:
        engine.close()


@contextlib.contextmanager
def engine_session(client, store, *, in_memory: bool, sample_weight=None, **options):
    """Yield an engine over ``store`` (``sample_weight``, ``options``: as :func:`make_engine`);
    ``in_memory``: the data are in this process (then ``client=None`` runs in process)."""
    with client_session(client, in_memory=in_memory) as resolved, \
            engine_on(resolved, store, sample_weight, **options) as engine:
        yield engine


@contextlib.contextmanager
def task_session(client, *, in_memory: bool):
    """Yield :class:`Tasks` over the resolved ``client`` (as :func:`engine_session`; the family builds
    its engines itself), closing the client it started however the block ends."""
    with client_session(client, in_memory=in_memory) as resolved:
        yield Tasks(resolved)
