"""The task path under bounded waits: a multi-class CVM / MMDA (one dask task per one-vs-rest
problem) and the compressor's tree on a real ``dask scheduler`` + ``dask worker --no-nanny`` on
127.0.0.1, whose only worker or whose scheduler is SIGKILLed mid-fit.

Before ``parallel/_waits.py`` the driver waited up to 3,600 s per result with no live-worker
check: with the only worker killed it printed nothing and waited (still waiting when these tests'
bound ran out), and with the scheduler killed it ended in a ``FutureCancelledError`` traceback.
Now the first ends in ``NoWorkersError`` after ``kmp_dask.no-workers-wait`` seconds, the second in
``SchedulerLostError``; the command line prints one ``Error:`` line; and the fit resumes from its
checkpoint once a worker is back, to the model of an uninterrupted fit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")
import dask  # noqa: E402
from _loaded_machine import CLUSTER_CONFIG, WORKER_WAIT, cluster_env, stop_in_order  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from kmp_dask import MMDA, CVMClassifier  # noqa: E402
from kmp_dask.parallel import Tasks  # noqa: E402
from kmp_dask.parallel._client import NoWorkersError  # noqa: E402
from kmp_dask.parallel._waits import SchedulerLostError  # noqa: E402
from kmp_dask.store import create_store  # noqa: E402

#: Seconds with no live worker before NoWorkersError, in these tests (default 60).
NO_WORKERS = 3
#: The driver must end this many seconds after the kill at most: NO_WORKERS plus a few checks of
#: the scheduler (and, for a lost scheduler, the client's reconnect bound: a 10 s connect timeout),
#: with room for a loaded machine.
BOUND = 90.0


def _dask_cli():
    exe = shutil.which("dask", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "dask"]


class OneWorkerCluster:
    """``dask scheduler`` and ``dask worker --no-nanny`` (one process: SIGKILLed, it is gone)."""

    def __init__(self, root: Path):
        self.root, self.procs, self.logs = root, [], []
        root.mkdir(parents=True, exist_ok=True)
        self.scheduler_file = str(root / "scheduler.json")
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", **cluster_env()}
        self.scheduler = self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                      "--scheduler-file", self.scheduler_file], "scheduler.log")
        deadline = time.monotonic() + WORKER_WAIT
        while not os.path.exists(self.scheduler_file):
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                raise RuntimeError(f"dask scheduler did not start: {(root / 'scheduler.log').read_text()}")
            time.sleep(0.1)
        self.worker = self.add_worker()

    def _start(self, args, log):
        f = open(self.root / log, "a")
        self.logs.append(f)
        proc = subprocess.Popen(_dask_cli() + args, stdout=f, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(proc)
        return proc

    def add_worker(self):
        """Start one worker and wait until the scheduler lists it (and nothing else)."""
        from distributed import Client

        worker = self._start(["worker", "--scheduler-file", self.scheduler_file, "--host", "127.0.0.1",
                              "--nthreads", "1", "--no-nanny", "--no-dashboard", "--memory-limit", "2GiB",
                              "--local-directory", str(self.root / f"w{len(self.procs)}")], "worker.log")
        with Client(scheduler_file=self.scheduler_file, set_as_default=False,
                    timeout=CLUSTER_CONFIG["distributed.comm.timeouts.connect"]) as c:
            c.wait_for_workers(1, timeout=WORKER_WAIT)
        self.worker = worker
        return worker

    def close(self):
        stop_in_order([p for p in reversed(self.procs) if p is not self.scheduler] + [self.scheduler])
        for f in self.logs:
            f.close()


@pytest.fixture
def one_worker(tmp_path):
    cluster = OneWorkerCluster(tmp_path / "cluster")
    try:
        yield cluster
    finally:
        cluster.close()


def _store(tmp_path, n=1500, classes=3):
    X, y = make_classification(n, n_features=6, n_informative=5, n_redundant=0, n_classes=classes,
                               n_clusters_per_class=1, random_state=4)
    return create_store(tmp_path / "d.zarr", X, y, chunk_rows=500, classes=list(range(classes))), X


def _kill_when_a_problem_saved(checkpoint: Path, proc, killed: dict, after: float = 0.0):
    """SIGKILL ``proc`` once a problem's checkpoint part exists (its task is mid-loop on the worker)."""
    def run():
        deadline = time.monotonic() + WORKER_WAIT
        while not list(checkpoint.glob("problem-*.ckpt")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(after)
        killed["time"] = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


_CONFIG = {"kmp_dask.no-workers-wait": NO_WORKERS, "distributed.comm.timeouts.connect": "10s"}


@pytest.mark.timeout(600)
def test_cvm_whose_only_worker_is_killed_ends_in_no_workers_and_resumes(tmp_path, one_worker):
    store, X = _store(tmp_path)
    ck = tmp_path / "ck"
    params = dict(eps=1e-3, random_state=0)
    killed = {}
    _kill_when_a_problem_saved(ck, one_worker.worker, killed)
    with dask.config.set(_CONFIG):
        with pytest.raises(NoWorkersError) as info:
            CVMClassifier(client=one_worker.scheduler_file, **params).fit(store.url, checkpoint=ck,
                                                                          checkpoint_every=1)
    elapsed = time.monotonic() - killed["time"]
    assert elapsed < BOUND, f"the driver ended {elapsed:.1f} s after the kill"
    message = str(info.value)
    for words in ("no live dask workers left", "one-vs-rest problem", f"within {NO_WORKERS} s",
                  "dask worker", "checkpoint=DIR", "resume=True", "--resume"):
        assert words in message, (words, message)
    one_worker.add_worker()  # the fit continues from its checkpoint on a new worker
    with dask.config.set(_CONFIG):
        resumed = CVMClassifier(client=one_worker.scheduler_file, **params).fit(store.url, checkpoint=ck, resume=True)
    reference = CVMClassifier(client="sync", **params).fit(store.url)
    np.testing.assert_array_equal(resumed.decision_function(X), reference.decision_function(X))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_mmda_whose_scheduler_is_killed_ends_in_scheduler_lost(tmp_path, one_worker):
    store, _ = _store(tmp_path)
    ck = tmp_path / "ck"
    killed = {}
    _kill_when_a_problem_saved(ck, one_worker.scheduler, killed)
    with dask.config.set(_CONFIG):
        with pytest.raises(SchedulerLostError) as info:
            MMDA(n_components=2, eps=1e-3, random_state=0, client=one_worker.scheduler_file).fit(
                store.url, checkpoint=ck, checkpoint_every=1)
    elapsed = time.monotonic() - killed["time"]
    assert elapsed < BOUND, f"the driver ended {elapsed:.1f} s after the kill"
    for words in ("dask scheduler", "unreachable", "stopped or killed", "checkpoint=DIR", "--resume"):
        assert words in str(info.value), (words, str(info.value))


def _kmp_dask():
    exe = shutil.which("kmp-dask", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "kmp_dask.cli"]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("algorithm, victim, words", [
    ("cvm", "scheduler", ("Error: the dask scheduler", "unreachable", "--resume")),
    ("mmda", "worker", ("Error: no live dask workers left", f"within {NO_WORKERS} s", "--resume")),
])
def test_train_on_a_cluster_that_loses_its_worker_or_scheduler_prints_one_line(tmp_path, one_worker, algorithm,
                                                                               victim, words):
    store, _ = _store(tmp_path)
    ck = tmp_path / "ck"
    env = {**os.environ, "DASK_KMP_DASK__NO_WORKERS_WAIT": str(NO_WORKERS), "OMP_NUM_THREADS": "1"}
    cmd = _kmp_dask() + ["train", store.url, "--model", str(tmp_path / "m"), "--algorithm", algorithm,
                         "--scheduler-file", one_worker.scheduler_file, "--connect-timeout", "10", "--eps", "1e-3",
                         "--checkpoint", str(ck), "--checkpoint-every", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    killed = {}
    _kill_when_a_problem_saved(ck, one_worker.worker if victim == "worker" else one_worker.scheduler, killed)
    try:
        out, _ = proc.communicate(timeout=WORKER_WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
    elapsed = time.monotonic() - killed["time"]
    assert elapsed < BOUND, f"the command ended {elapsed:.1f} s after the kill:\n{out}"
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert proc.returncode == 1 and len(errors) == 1 and "Traceback" not in out, out
    for w in words:
        assert w in errors[0], (w, errors[0])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tree_reduce_whose_only_worker_is_killed_ends_in_no_workers(one_worker):
    from distributed import Client

    def slow_leaf(x):  # a local function: pickled by value for the worker
        import time

        time.sleep(30)
        return x

    with Client(scheduler_file=one_worker.scheduler_file, set_as_default=False) as client:
        def kill():
            deadline = time.monotonic() + WORKER_WAIT
            while not any(client.processing().values()) and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(one_worker.worker.pid, signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()
        t0 = time.monotonic()
        with dask.config.set({"kmp_dask.no-workers-wait": NO_WORKERS}):
            with pytest.raises(NoWorkersError, match=r"tree reduction.*within 3 s"):
                Tasks(client).tree_reduce(slow_leaf, [1, 2, 3], max, timeout=120)
        assert time.monotonic() - t0 < BOUND
