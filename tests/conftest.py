"""Shared fixtures: real dask clusters of three kinds.

* ``thread_client`` — in-process LocalCluster (threads): fastest, no pickling.
* ``process_client`` — LocalCluster of 2 single-threaded worker processes (spawned), the
  laptop default; session-scoped because it takes ~1–2 s to start.
* ``cli_cluster`` — a real ``dask scheduler`` + two ``dask worker`` subprocesses on 127.0.0.1
  (the commands a user types), yielding the scheduler-file path; module-scoped, used by the
  end-to-end tests.

Every cluster here is made with ``_loaded_machine.CLUSTER_CONFIG`` (generous connection timeouts
that its worker processes inherit) and waits ``_loaded_machine.WORKER_WAIT`` seconds for its
workers, so the tests pass on a loaded machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _loaded_machine import CLUSTER_CONFIG, WORKER_WAIT, cluster_env, stop_in_order, wait_for_workers

os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
    """Every warning class of kmp_dask.exceptions is an error unless a test expects it.

    pyproject.toml names the classes (``error::kmp_dask.exceptions.…``); this adds any class it
    does not name yet, so a newly added warning is covered from its first commit on.
    """
    from kmp_dask import exceptions

    listed = "\n".join(config.getini("filterwarnings"))
    for name, obj in sorted(vars(exceptions).items()):
        if isinstance(obj, type) and issubclass(obj, Warning) and obj.__module__ == exceptions.__name__:
            if f"::{exceptions.__name__}.{name}" not in listed:
                config.addinivalue_line("filterwarnings", f"error::{exceptions.__name__}.{name}")


@pytest.fixture(scope="session")
def thread_cluster():
    import dask
    from distributed import LocalCluster

    with dask.config.set(CLUSTER_CONFIG):
        cluster = LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0",
                               worker_dashboard_address="127.0.0.1:0")
    with cluster:
        yield cluster


@pytest.fixture
def thread_client(thread_cluster):
    from distributed import Client

    with Client(thread_cluster, set_as_default=False) as client:
        yield client


@pytest.fixture(scope="session")
def process_cluster():
    import dask
    from distributed import LocalCluster

    with dask.config.set(CLUSTER_CONFIG):  # the nannies hand it to every worker they (re)start
        cluster = LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
            dashboard_address=None, memory_limit="3GiB",
        )
    with cluster:
        yield cluster


@pytest.fixture
def process_client(process_cluster):
    from distributed import Client

    with Client(process_cluster, set_as_default=False) as client:
        wait_for_workers(client, 2, process_cluster)  # back after an earlier test killed one
        yield client


def _dask_cli():
    exe = shutil.which("dask", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "dask"]


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory):
    """``dask scheduler`` + ``dask worker --nworkers 2`` on loopback; yields the scheduler file."""
    from distributed import Client

    tmp = tmp_path_factory.mktemp("cli-cluster")
    sched_file = tmp / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", **cluster_env()}
    logs = [open(tmp / "scheduler.log", "w"), open(tmp / "worker.log", "w")]
    sched = subprocess.Popen(
        _dask_cli() + ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                       "--scheduler-file", str(sched_file), "--idle-timeout", "600"],
        stdout=logs[0], stderr=subprocess.STDOUT, env=env,
    )
    deadline = time.monotonic() + WORKER_WAIT
    while not sched_file.exists():
        if time.monotonic() > deadline or sched.poll() is not None:
            sched.kill()
            pytest.fail(f"dask scheduler did not start: {(tmp / 'scheduler.log').read_text()}")
        time.sleep(0.1)
    worker = subprocess.Popen(
        _dask_cli() + ["worker", "--scheduler-file", str(sched_file), "--host", "127.0.0.1",
                       "--nworkers", "2", "--nthreads", "1", "--memory-limit", "3GiB",
                       "--no-dashboard", "--death-timeout", f"{WORKER_WAIT:g}", "--name", "w"],
        stdout=logs[1], stderr=subprocess.STDOUT, env=env,
    )
    try:
        with Client(scheduler_file=str(sched_file), timeout=CLUSTER_CONFIG["distributed.comm.timeouts.connect"]) as c:
            c.wait_for_workers(2, timeout=WORKER_WAIT)
        yield str(sched_file)
    finally:
        stop_in_order([worker, sched])  # the workers first: 1 s instead of 8 (see stop_in_order)
        for f in logs:
            f.close()
