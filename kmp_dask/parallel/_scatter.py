"""Read-only values sent once to every worker, outside any task graph (dask orchestration).

A value written into a graph goes through the scheduler, which unpickles every graph it receives
(a kmp_dask estimator there imports scikit-learn in the scheduler process), and dask warns above
10 MB ("Sending large graph"). :func:`scatter_to_all` sends it to every worker directly instead:
``client.scatter(..., broadcast=True)``, so a killed worker leaves copies on the others. A scatter
that meets a worker the scheduler still lists but which has just died fails with a ``KeyError`` (or
a closed comm, an ``OSError``): it is sent again after :data:`SCATTER_PAUSE`, at most
:data:`SCATTER_RETRIES` times, each bounded by :data:`SCATTER_TIMEOUT`.

Used by the held-out scoring pass of the CV estimators (``_rowsums``) and by evaluate / predict
(``_evaluate.ship_model``).
"""

from __future__ import annotations

import time

__all__ = ["scatter_to_all", "SCATTER_RETRIES", "SCATTER_TIMEOUT", "SCATTER_PAUSE"]

SCATTER_RETRIES = 2
"""Times a scatter is sent again after a worker left while it was sent (and, in ``row_block_sums``,
after every worker holding it died before the pass ended)."""

SCATTER_TIMEOUT, SCATTER_PAUSE = 120.0, 1.0
"""Seconds a scatter may take (then ``TimeoutError``, an ``OSError``), and the pause before another."""


def scatter_to_all(client, value):
    """A future of ``value`` held by every worker of ``client`` (a key of this call only)."""
    for attempt in range(SCATTER_RETRIES + 1):
        try:
            [future] = client.scatter([value], broadcast=True, hash=False, timeout=SCATTER_TIMEOUT)
            return future
        except (KeyError, OSError):  # a worker left while the value was sent to it
            if attempt == SCATTER_RETRIES:
                raise
            time.sleep(SCATTER_PAUSE)
    raise AssertionError("unreachable")
