"""Failure catalogue rows, area "environment": every wait bounded, every foreseeable
environment failure one clear error (Python) or one ``Error:`` line (``kmp-dask``).

Faults come from ``tests/_environment_faults.py``: a TCP port that accepts and never speaks
dask, a scheduler with no workers, a disk that fills up / a read-only file system under the
workspace (simulated in this process). Commands whose writes happen on dask workers, the
restart loop of the embedded cluster and real tmpfs mounts are in
``tests/parallel/test_bounded_waits.py``.
"""

from __future__ import annotations

import errno
import time
from unittest import mock

import dask
import numpy as np
from _catalogue import Case, Command
from _environment_faults import SilentServer, failing_writes, zero_worker_scheduler

from kmp_dask import KMPClassifier, KMPRegressor, save
from kmp_dask.parallel import embedded_cluster
from kmp_dask.parallel._client import NoWorkersError
from kmp_dask.store import create_store

RNG = np.random.default_rng(29)
X = RNG.normal(size=(60, 3))
Y = (X[:, 0] > 0).astype(int)
_FIT = {}


def _fitted():
    if "m" not in _FIT:
        _FIT["m"] = KMPClassifier(n_basis=4, random_state=0).fit(X, Y)
    return _FIT["m"]


def _connect_in(seconds, fn):
    def run(ws):
        with dask.config.set({"distributed.comm.timeouts.connect": f"{seconds}s"}):
            return fn(ws)
    return run


def _fit_on_silent_port(ws):
    with SilentServer() as srv:
        KMPClassifier(client=srv.address).fit(X, Y)


def _silent_address() -> str:
    """One silent server for the command rows (the CLI runs after ``args`` returns), kept open."""
    if "silent" not in _FIT:
        _FIT["silent"] = SilentServer()
    return _FIT["silent"].address


def _train_on_silent_port(ws):
    return ["train", ws.good, "--model", str(ws.root / "m"), "--scheduler", _silent_address(),
            "--connect-timeout", "2"]


def _embedded(memory_limit):
    def run(ws):
        with embedded_cluster(1, memory_limit=memory_limit):
            raise AssertionError("the embedded cluster started")
    return run


def _no_live_workers(ws):
    """Every worker of the fit's cluster goes away mid-fit: the repair finds none (bounded)."""
    from distributed import Client, LocalCluster

    from kmp_dask.blockops import StatsQuery, kmp_stats
    from kmp_dask.parallel import ActorEngine, partition_specs
    from kmp_dask.store import InMemoryStore

    with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(1, timeout=180)
        eng = ActorEngine(client, partition_specs(InMemoryStore(X, X[:, 0], chunk_rows=30)), loss_timeout=2)
        try:
            cluster.scale(0)
            deadline = time.monotonic() + 180
            while client.scheduler_info(n_workers=-1)["workers"] and time.monotonic() < deadline:
                time.sleep(0.1)
            with dask.config.set({"kmp_dask.no-workers-wait": 1.0}):
                eng.run(kmp_stats, StatsQuery({"kind": "regression"}))
        finally:
            t0 = time.monotonic()
            eng.close()  # asks no holder of a gone worker (each such call waited out 30 s: 30.0 s measured)
            assert time.monotonic() - t0 < 15, f"close took {time.monotonic() - t0:.1f} s with no worker left"


def _no_workers_in_a_dask_pass(ws):
    """A pass over dask input (its feature moments) on a scheduler without workers: a plain
    ``dask.compute`` waited for a worker for ever; ``compute_bounded`` gives up after the wait."""
    from distributed import Client

    from kmp_dask.parallel._moments import feature_moments
    from kmp_dask.store import open_store

    X_dask = open_store(ws.good).to_dask("X")
    with Client(zero_worker_scheduler(), set_as_default=False) as client, client.as_current():
        with dask.config.set({"kmp_dask.no-workers-wait": 1.0}):
            feature_moments(X_dask)


def _vm_with(available):
    import psutil

    return psutil.virtual_memory()._replace(available=available)


def _factor_too_large(ws):
    with mock.patch("psutil.virtual_memory", return_value=_vm_with(16 * 1024)):
        KMPRegressor(n_basis=10**9, fit_mode="backfit").fit(X, X[:, 0])


def _store_with(code):
    def run(ws):
        with failing_writes(ws.root, code):
            create_store(ws.new, X, Y, chunk_rows=20, classes=["neg", "pos"])
    return run


def _save_with(code):
    def run(ws):
        model = _fitted()
        with failing_writes(ws.root, code):
            save(model, ws.root / "model")
    return run


def WORKSPACE(root, ws):
    """A pipeline whose [run] table asks for a 1 KB memory limit per worker."""
    (root / "tiny_memory.toml").write_text(
        f'name = "tiny"\noutput = "{root / "runs" / "tiny"}"\n\n[run]\nmemory_limit = "1KB"\n\n'
        '[data.train]\nsource = "keel:banana"\npart = "train"\ntest_size = 0.3\nseed = 0\n\n'
        '[model]\nalgorithm = "kmp"\nparams = { n_basis = 5 }\n')
    ws.tiny_memory_pipeline = str(root / "tiny_memory.toml")


CASES = [
    Case("client=port-not-dask", _connect_in(2, _fit_on_silent_port), ConnectionError,
         ("within 2 s", "accepts connections but did not answer as a dask scheduler", "8786", "dashboard")),
    Case("client=scheduler-without-workers",
         _connect_in(1, lambda ws: KMPClassifier(client=zero_worker_scheduler()).fit(ws.good)), NoWorkersError,
         ("has 0 workers after waiting 1 s", "dask worker tcp://127.0.0.1:", "'embedded'")),
    Case("no-live-workers-mid-fit", _no_live_workers, NoWorkersError,
         ("no live dask workers left", "holding partitions [0, 1]", "within 1 s", "start workers again",
          "resume=True")),
    Case("no-live-workers-in-a-dask-pass", _no_workers_in_a_dask_pass, NoWorkersError,
         ("no live dask workers left", "feature moments pass", "within 1 s", "dask worker", "resume=True")),
    Case("memory_limit='1KB'", _embedded("1KB"), ValueError,
         ("memory_limit='1KB'", "below the smallest usable limit", "256.00 MiB", "'auto'")),
    Case("memory_limit='abc'", _embedded("abc"), ValueError,
         ("memory_limit='abc'", "is not a memory limit", "'2GB'", "'auto'")),
    Case("gamma=[]", lambda ws: KMPClassifier(gamma=[]).fit(X, Y), ValueError,
         ("gamma must be", "non-empty list", "got []")),
    Case("n_basis-factor-larger-than-memory", _factor_too_large, ValueError,
         ("n_basis=1000000000", "capped at 63", "Cholesky factor", "more than the 16.00 kiB", "smaller n_basis")),
    Case("store-disk-full", _store_with(errno.ENOSPC), OSError, ("No space left on device", "new.zarr")),
    Case("store-read-only-fs", _store_with(errno.EROFS), OSError, ("Read-only file system", "new.zarr")),
    Case("save-disk-full", _save_with(errno.ENOSPC), OSError, ("No space left on device", "model")),
    Case("save-read-only-fs", _save_with(errno.EROFS), OSError, ("Read-only file system", "model")),
]

COMMANDS = [
    Command("train-scheduler-port-not-dask", _train_on_silent_port, 1,
            ("Error: could not connect", "within 2 s", "did not answer as a dask scheduler", "--connect-timeout")),
    Command("train-scheduler-without-workers",
            lambda ws: ["train", ws.good, "--model", str(ws.root / "m"), "--scheduler", zero_worker_scheduler(),
                        "--connect-timeout", "1"], 1,
            ("has 0 workers after waiting 1 s", "Start workers for it (`dask worker tcp://", "no --scheduler")),
    Command("train-memory-limit-1KB",
            lambda ws: ["train", ws.good, "--model", str(ws.root / "m"), "--memory-limit", "1KB"], 2,
            ("--memory-limit='1KB'", "below the smallest usable limit", "256MiB", "'auto'")),
    Command("train-memory-limit-abc",
            lambda ws: ["train", ws.good, "--model", str(ws.root / "m"), "--memory-limit", "abc"], 2,
            ("--memory-limit='abc'", "is not a memory limit", "'2GB'")),
    Command("run-pipeline-memory-limit-1KB", lambda ws: ["run", ws.tiny_memory_pipeline], 1,
            ("memory_limit='1KB'", "below the smallest usable limit", "'256MiB'")),
    Command("train-gamma-empty",
            lambda ws: ["train", ws.good, "--model", str(ws.root / "m"), "--gamma", "[]"], 1,
            ("gamma must be", "non-empty list", "got []")),
]
