"""Generous, configurable waits for tests that start dask clusters (a test that passes
alone failed on a machine with load 10 — ``Only 1/2 workers arrived after 120``).

On a loaded machine a worker process (re)started by its nanny after a SIGKILL can take minutes to
import and register, and a worker whose connection to the scheduler times out (dask's default
``distributed.comm.timeouts.connect`` is 30 s) fails to start and is never restarted — the cluster
stays one worker short. So the clusters the tests start get:

* :data:`CLUSTER_CONFIG` — dask config set while a cluster is made; nannies snapshot the config
  at creation and hand it to every worker process they (re)start, and ``cli_cluster`` passes it
  to its ``dask scheduler`` / ``dask worker`` subprocesses as environment variables;
* :data:`WORKER_WAIT` — seconds to wait for workers (to arrive, or to come back after a kill):
  ``KMP_TEST_WORKER_WAIT`` in the environment, default 600.

A correct run never waits that long: these are bounds, not sleeps.
"""

from __future__ import annotations

import os
import subprocess

#: Seconds a test waits for a cluster's workers (to start or to come back after a kill).
WORKER_WAIT = float(os.environ.get("KMP_TEST_WORKER_WAIT", "600"))

#: dask config for the clusters the tests start (connections under load take longer).
CLUSTER_CONFIG = {
    "distributed.comm.timeouts.connect": f"{max(180.0, WORKER_WAIT / 3):g}s",
    "distributed.comm.timeouts.tcp": f"{max(180.0, WORKER_WAIT / 3):g}s",
}


def cluster_env() -> dict:
    """:data:`CLUSTER_CONFIG` as the environment variables dask reads in subprocesses."""
    return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): value
            for key, value in CLUSTER_CONFIG.items()}


def wait_for_workers(client, n: int, cluster=None) -> None:
    """``client.wait_for_workers(n)`` with the generous :data:`WORKER_WAIT` bound.

    With ``cluster`` (a ``LocalCluster``; by default the one the client was made from): if the
    workers are still short after a third of that, the nannies whose worker is gone are replaced by
    new ones (:func:`replace_lost_workers`) and the rest of the bound is waited — a nanny that does
    not restart its SIGKILLed worker (seen once on Python 3.12 at load 12) does not fail every later
    test of the session."""
    cluster = cluster if cluster is not None else getattr(client, "cluster", None)
    if cluster is None or not hasattr(cluster, "worker_spec"):
        client.wait_for_workers(n, timeout=WORKER_WAIT)
        return
    try:
        client.wait_for_workers(n, timeout=WORKER_WAIT / 3)
    except TimeoutError:
        replace_lost_workers(cluster, client)
        client.wait_for_workers(n, timeout=2 * WORKER_WAIT / 3)


def replace_lost_workers(cluster, client) -> list:
    """Close the nannies of ``cluster`` whose worker the scheduler does not know and start new
    ones in their place (``SpecCluster`` re-creates missing specs on ``scale``); returns the names."""
    alive = {w.get("name") for w in client.scheduler_info(n_workers=-1)["workers"].values()}
    lost = [name for name in list(cluster.worker_spec) if name not in alive]
    n = len(cluster.worker_spec)
    for name in lost:
        del cluster.worker_spec[name]
    cluster.sync(cluster._correct_state)  # closes the nannies no longer in the spec
    cluster.scale(n)
    return lost


def stop_in_order(procs, grace: float = 20.0) -> None:
    """Stop ``procs`` one after the other: SIGTERM, wait up to ``grace`` s, then SIGKILL.

    Give workers before their scheduler. A ``dask worker`` told to stop while its scheduler is
    stopping too cannot say goodbye: its nannies wait out their close timeout and kill the worker
    processes (measured: 8.3 s for ``--nworkers 2``, against 0.7 s for the worker alone and then
    1.0 s for both). Every wait is bounded."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace)
