"""``dask.compute`` passes of ours on a real cluster whose only worker or whose scheduler dies
mid-pass: evaluate's and predict's passes, ``store_from_dask``, the moments and label set of dask
input, ``score``, and the start of the actor engine's partition holders.

Before ``_waits.compute_bounded`` these passes were plain ``dask.compute`` calls, which wait for as
long as the scheduler keeps a task waiting: a pass over dask input (its moments, its label set,
``store_from_dask``) whose only worker was SIGKILLed waited for ever (still waiting when these
tests' bound ran out), ``score`` whose scheduler died likewise, and the engine's holder start
waited up to ``start_timeout`` = 300 s with no live-worker check. Now each ends in
``NoWorkersError`` after ``kmp_dask.no-workers-wait`` seconds or in ``SchedulerLostError``.
``evaluate`` / ``predict`` (the command-line tests here) ended in one line before too — their model
is scattered, so losing its worker cancels the pass and the rerun's scatter waits for a live
worker —; they guard that the bounded pass keeps it so.

The cluster: ``dask scheduler`` + one ``dask worker --no-nanny`` (tests/_one_worker.py) whose
chunk reads wait at a gate (a ``--preload`` module), so the kill lands while the pass is running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
import dask  # noqa: E402
from _loaded_machine import WORKER_WAIT  # noqa: E402
from _one_worker import OneWorker, gate, gate_env, kmp_dask_cli, wait_for_file  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from kmp_dask.parallel._client import NoWorkersError  # noqa: E402
from kmp_dask.parallel._waits import SchedulerLostError  # noqa: E402
from kmp_dask.store import create_store  # noqa: E402

#: Seconds with no live worker before NoWorkersError, in these tests (default 60).
NO_WORKERS = 3
#: A wait must end this many seconds after the kill at most: NO_WORKERS, a few checks of the
#: scheduler, the client's reconnect bound for a lost scheduler, and room for a loaded machine.
BOUND = 90.0
_CONFIG = {"kmp_dask.no-workers-wait": NO_WORKERS, "distributed.comm.timeouts.connect": "10s"}


@pytest.fixture
def gated(tmp_path):
    """A one-worker cluster whose chunk reads wait until the test opens the gate."""
    module, reading, go = gate(tmp_path / "gate")
    cluster = OneWorker(tmp_path / "cluster", preload=module, worker_env=gate_env(tmp_path / "gate"))
    cluster.reading, cluster.go = reading, go
    try:
        yield cluster
    finally:
        go.touch()
        cluster.close()


def _data(tmp_path):
    X, y = make_classification(600, n_features=5, n_informative=4, n_redundant=0, n_classes=3,
                               n_clusters_per_class=1, random_state=3)
    return create_store(tmp_path / "d.zarr", X, y, chunk_rows=200, classes=[0, 1, 2]), X, y


def _model(tmp_path, store):
    out = subprocess.run(kmp_dask_cli() + ["train", store.url, "--model", str(tmp_path / "m"), "--scheduler", "sync",
                                           "--n-basis", "8", "-q"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return str(tmp_path / "m")


def _kill_when_reading(cluster, victim):
    """SIGKILL ``victim`` ("worker" / "scheduler") once the worker waits in a chunk read."""
    def run():
        wait_for_file(cluster.reading)
        proc = cluster.worker if victim == "worker" else cluster.scheduler
        os.kill(proc.pid, signal.SIGKILL)
        killed["time"] = time.monotonic()

    killed = {}
    threading.Thread(target=run, daemon=True).start()
    return killed


def _one_error_line(cmd, cluster, victim):
    env = {**os.environ, "DASK_KMP_DASK__NO_WORKERS_WAIT": str(NO_WORKERS), "OMP_NUM_THREADS": "1",
           **gate_env(cluster.reading.parent)}
    killed = _kill_when_reading(cluster, victim)
    proc = subprocess.Popen(cmd + ["--scheduler", cluster.scheduler_file, "--connect-timeout", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, _ = proc.communicate(timeout=WORKER_WAIT / 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=60)
        pytest.fail(f"still running {WORKER_WAIT / 2:.0f} s after it started ({victim} killed): {out[-2000:]}")
    assert "time" in killed, out
    elapsed = time.monotonic() - killed["time"]
    assert elapsed < BOUND, f"the command ended {elapsed:.1f} s after the kill:\n{out}"
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert proc.returncode == 1 and len(errors) == 1 and "Traceback" not in out, out
    return errors[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_evaluate_whose_only_worker_dies_mid_pass_prints_one_line(tmp_path, gated):
    store, _, _ = _data(tmp_path)
    model = _model(tmp_path, store)
    line = _one_error_line(kmp_dask_cli() + ["evaluate", model, store.url], gated, "worker")
    for words in ("no live dask workers left", f"within {NO_WORKERS} s", "dask worker"):
        assert words in line, (words, line)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("output, victim, words", [
    ("pred.zarr", "worker", ("no live dask workers left", f"within {NO_WORKERS} s")),
    ("pred.npy", "worker", ("no live dask workers left", f"within {NO_WORKERS} s")),
    ("pred.csv", "scheduler", ("the dask scheduler", "unreachable")),
])
def test_predict_whose_worker_or_scheduler_dies_mid_pass_prints_one_line(tmp_path, gated, output, victim, words):
    store, _, _ = _data(tmp_path)
    model = _model(tmp_path, store)
    line = _one_error_line(kmp_dask_cli() + ["predict", model, store.url, "--output", str(tmp_path / output)],
                           gated, victim)
    for w in words:
        assert w in line, (w, line)
    assert not (tmp_path / output).exists()


def _in_thread(fn, client=None):
    """``fn()`` in a daemon thread (``client`` current there: dask's current client is per thread),
    waited for at most half of WORKER_WAIT: (result, error)."""
    import contextlib

    box = {}

    def run():
        try:
            with client.as_current() if client is not None else contextlib.nullcontext():
                box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WORKER_WAIT / 2)
    assert not thread.is_alive(), f"still waiting {WORKER_WAIT / 2:.0f} s later"
    return box.get("result"), box.get("error")


def _dask_input(store):
    X = store.to_dask("X")
    return X, store.to_dask("y")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("what", [
    "feature_moments",
    pytest.param("entry_variance", marks=pytest.mark.slow),
    pytest.param("labels", marks=pytest.mark.slow),
    pytest.param("store_from_dask", marks=pytest.mark.slow),
])
def test_a_pass_over_dask_input_whose_only_worker_dies_ends_in_no_workers(tmp_path, gated, what):
    from distributed import Client

    from kmp_dask.parallel._labels import encode_dask_labels
    from kmp_dask.parallel._moments import entry_variance, feature_moments
    from kmp_dask.store import store_from_dask

    store, _, _ = _data(tmp_path)
    X, y = _dask_input(store)
    run = {"feature_moments": lambda: feature_moments(X),
           "entry_variance": lambda: entry_variance(X),
           "labels": lambda: encode_dask_labels(y.astype(str)),
           "store_from_dask": lambda: store_from_dask(tmp_path / "copy.zarr", X, y)}[what]
    killed = _kill_when_reading(gated, "worker")
    with dask.config.set(_CONFIG), Client(scheduler_file=gated.scheduler_file, set_as_default=False) as client:
        _, error = _in_thread(run, client)
    assert isinstance(error, NoWorkersError), repr(error)
    assert time.monotonic() - killed["time"] < BOUND
    assert f"within {NO_WORKERS} s" in str(error)
    assert not (tmp_path / "copy.zarr").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_score_whose_scheduler_dies_mid_pass_ends_in_scheduler_lost(tmp_path, gated):
    from distributed import Client

    from kmp_dask import KMPClassifier

    store, _, _ = _data(tmp_path)
    model = KMPClassifier(n_basis=8, client="sync", random_state=0).fit(store.url)
    killed = _kill_when_reading(gated, "scheduler")
    with dask.config.set(_CONFIG), Client(scheduler_file=gated.scheduler_file, set_as_default=False) as client:
        _, error = _in_thread(lambda: model.score(store.url), client)
    assert isinstance(error, SchedulerLostError), repr(error)
    assert time.monotonic() - killed["time"] < BOUND


@pytest.mark.timeout(900)
def test_engine_whose_only_worker_dies_while_its_holder_starts_ends_in_no_workers(tmp_path, gated):
    """The partition holder reads its partitions as it starts (through the gate): its worker
    SIGKILLed then, the start waited ``start_timeout`` (300 s) before; now NoWorkersError."""
    from kmp_dask import KMPClassifier

    store, _, _ = _data(tmp_path)
    killed = _kill_when_reading(gated, "worker")
    with dask.config.set(_CONFIG):
        _, error = _in_thread(lambda: KMPClassifier(n_basis=8, random_state=0, client=gated.scheduler_file)
                              .fit(store.url))
    assert isinstance(error, NoWorkersError), repr(error)
    assert time.monotonic() - killed["time"] < BOUND


@pytest.mark.timeout(900)
def test_compute_bounded_gives_what_dask_compute_gives(tmp_path):
    """The same values as ``dask.compute`` — on a process cluster (client.compute + wait_for), in
    process and with ``scheduler="sync"`` (dask.compute itself) — tuples and None traversed too."""
    import dask.array as da
    from distributed import Client, LocalCluster

    from kmp_dask.parallel._waits import compute_bounded

    X = da.from_array(np.random.default_rng(0).normal(size=(500, 4)), chunks=(100, 4))
    args = (X.mean(axis=0), X.var(), (X[:3], None), dask.delayed(sum)([1, 2]))
    expected = dask.compute(*args, scheduler="sync")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      host="127.0.0.1") as lc, Client(lc, set_as_default=False) as client:
        with client.as_current():
            on_cluster = compute_bounded(*args)
    for got in (on_cluster, compute_bounded(*args), compute_bounded(*args, scheduler="sync")):
        assert len(got) == len(expected)
        np.testing.assert_array_equal(got[0], expected[0])
        assert got[1] == expected[1]
        np.testing.assert_array_equal(got[2][0], expected[2][0])
        assert got[2][1] is None and got[3] == 3
