"""Read-only values sent once to the workers, outside any task graph (dask orchestration).

A value written into a graph goes through the scheduler, which unpickles every graph it receives
(a kmp_dask estimator there imports scikit-learn in the scheduler process), and dask warns above
10 MB ("Sending large graph"). :func:`scatter_value` scatters it instead (``client.scatter``): one
worker receives it and the tasks of other workers fetch it from there, unpickled by workers only.

Bounded and retried. ``client.scatter``'s own ``timeout`` bounds only the wait for a worker, not the
transfer: with ``broadcast=True`` to a worker SIGKILLed a moment before (the scheduler still listed
it) the call never returned (measured in tests/parallel/test_cv_faults.py; dask's replicate to the
dead worker), so the scatter here runs under ``callback_timeout`` = :data:`SCATTER_TIMEOUT` and sends
one copy (dask's active memory manager drops extra replicas no task waits for anyway). A scatter
that meets a worker the scheduler still lists but which has died fails with a ``KeyError``, a closed
comm or that timeout (``OSError``s): it is sent again after :data:`SCATTER_PAUSE`, at most
:data:`SCATTER_RETRIES` times.

A scattered value, unlike a graph key, is not recomputed: when the worker holding it dies, the
tasks reading it fail with ``CancelledError``. :func:`rerun_if_lost` runs such a pass again (it
scatters again), at most :data:`SCATTER_RETRIES` times.

Used by the held-out scoring pass of the CV estimators (``_rowsums``) and by evaluate / predict
(``_evaluate.ship_model``, ``kmp_dask.evaluation``).
"""

from __future__ import annotations

import time

__all__ = ["scatter_value", "rerun_if_lost", "SCATTER_RETRIES", "SCATTER_TIMEOUT", "SCATTER_PAUSE"]

SCATTER_RETRIES = 2
"""Times a scatter is sent again after a worker left while it was sent (and, in ``row_block_sums``,
after the worker holding it died before the pass ended)."""

SCATTER_TIMEOUT, SCATTER_PAUSE = 60.0, 1.0
"""Seconds one scatter may take (then ``TimeoutError``, an ``OSError``), and the pause before another."""


def scatter_value(client, value):
    """A future of ``value`` on ``client``'s workers (a key of this call only).

    Before each send it waits (bounded, :func:`~._waits.await_live_workers`) for a live worker: with
    none, dask's scatter raises a bare ``TimeoutError("No valid workers found")`` after its own wait;
    here that is :class:`~._client.NoWorkersError` (none back within ``kmp_dask.no-workers-wait``) or
    :class:`~._waits.SchedulerLostError` (the scheduler itself gone), each one line saying what to do."""
    from ._waits import await_live_workers, no_workers_message

    def message(seconds):
        return no_workers_message("sending a value to the workers", seconds)

    for attempt in range(SCATTER_RETRIES + 1):
        await_live_workers(client, message=message)
        try:
            [future] = client.sync(client._scatter, [value], hash=False, callback_timeout=SCATTER_TIMEOUT)
            return future
        except (KeyError, OSError):  # a worker left while the value was sent to it, or the send hung
            if attempt == SCATTER_RETRIES:
                await_live_workers(client, message=message)  # none left: NoWorkersError, not dask's bare error
                raise
            time.sleep(SCATTER_PAUSE)
    raise AssertionError("unreachable")


def rerun_if_lost(run):
    """``run()``, called again when it fails with ``CancelledError`` (the worker holding a value it
    scattered died before it ended), at most :data:`SCATTER_RETRIES` times. ``run`` scatters its
    values itself and must be pure or write atomically, so a repeated run gives the same result."""
    from concurrent.futures import CancelledError

    for attempt in range(SCATTER_RETRIES + 1):
        try:
            return run()
        except CancelledError:
            if attempt == SCATTER_RETRIES:
                raise
    raise AssertionError("unreachable")
