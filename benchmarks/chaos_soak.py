"""Chaos soak: mixed ``kmp-dask`` jobs on a real cluster while workers, the scheduler and the
driver are SIGKILLed at random.

Question: does every job end in the result of an undisturbed run (resumed where it was killed) or
in one clear ``Error:`` line — never a hang, a traceback, a wrong result, a leftover temporary or
an orphan process?

Protocol
--------
* A real cluster, the commands a user types: ``dask scheduler --host 127.0.0.1 --port P
  --scheduler-file F --no-dashboard`` (P a free port chosen once, so a restarted scheduler comes
  back at the same address) and 3 × ``dask worker --scheduler-file F --nanny --nthreads 1
  --no-dashboard``; the nanny restarts a worker process that dies. A supervisor thread does what
  a service manager would: a scheduler or nanny process that exited (nannies exit when their
  scheduler is gone) is started again within a second.
* Small seeded data (scikit-learn generators written as ``.csv`` / ``.npz`` and ingested with ``kmp-dask
  ingest``; chunks of a few hundred rows so every worker holds partitions): 3-class and binary
  classification, regression, held-out stores of each.
* The jobs (:func:`job_catalogue`): ``train`` of every algorithm (KMP classifier and regressor,
  KMP with CV, CVM binary and 3-class, MMDA, sparse KPCA) with ``--checkpoint``; ``compress`` of
  a KMP and a CVM model; ``evaluate``; ``predict`` to .csv, .parquet, .npy and .zarr (classes,
  ``--proba``, ``--decision``, transformer features, regression); ``ingest``; two generated
  pipeline files through ``kmp-dask run``. Every command gets ``--scheduler-file F`` (``ingest``
  and in-memory compression use no cluster).
* References: every job runs once before the soak with no fault; its outputs are the reference.
  The jobs that read a model read the reference model, so their outputs must be identical too.
* The soak: for ``--duration`` seconds, jobs drawn at random (seeded) run one after the other,
  each ``kmp-dask`` a subprocess in its own session under a hard ``--job-timeout``. While an
  attempt runs, a chaos thread fires at exponential intervals (``--kill-rate`` per minute of job
  time) and SIGKILLs one random worker process (the nanny restarts it), or the scheduler
  (``--scheduler-share``; restarted at once on the same port and scheduler file), or the driver
  (``--driver-share``: the ``kmp-dask``
  process itself).
* An attempt that ends in an ``Error:`` line or was killed is run again — ``--resume`` for a
  ``train`` with ``--checkpoint`` and for ``run``, ``--overwrite`` for the others — up to
  ``--attempts`` times; the last attempt runs without faults. An attempt past ``--job-timeout``
  is a HANG: its stacks are dumped (``py-spy dump`` when installed) and its session killed.
* After each job: its outputs are compared with the reference (model directories: every array
  file byte for byte and ``model.json`` except its creation time; stores: every chunk file byte
  for byte and the metadata except times; .csv/.npy/.parquet byte for byte; metrics JSON
  equal), its job directory (outputs and checkpoint) is scanned for temporaries (``*.tmp``,
  ``*.tmp-*``, ``*.old-*``, ``.NAME.XXXXXXXX`` siblings of an atomic write), and processes left
  in its session are orphans. At the end the cluster is stopped and any process still running
  from the work directory is an orphan.
* Outcomes (the worst that applies): ``hang`` > ``traceback`` > ``wrong-result`` > ``leftover`` >
  ``orphan`` > ``unclear-error`` (non-zero exit with no ``Error:`` line, or a last attempt
  killed) > ``clear-error`` (the last attempt ended in one ``Error:`` line) >
  ``identical-after-resume`` (identical after a rerun) > ``identical``.

Usage: ``python benchmarks/chaos_soak.py [--duration 2400] [--seed 0] [--kill-rate 3]
[--out benchmarks/results/chaos_soak.json]``; ``--quick``: 180 s, JSON in $TMPDIR.
``tests/test_chaos_soak.py`` (marked slow) runs :func:`run_soak` for a short time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _harness as H  # noqa: E402

NAME = "chaos_soak"
OUTCOMES = ("identical", "identical-after-resume", "clear-error", "unclear-error", "orphan", "leftover",
            "wrong-result", "traceback", "hang")
#: The worst outcome first (a job with several problems is counted once, under the worst).
SEVERITY = {name: k for k, name in enumerate(OUTCOMES)}

__all__ = ["SoakCluster", "make_data", "job_catalogue", "run_soak", "summarize", "main"]


def _exe(name):
    found = shutil.which(name, path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [found] if found else [sys.executable, "-m", name.replace("-", "_")]


def _env():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONBREAKPOINT", None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------
class SoakCluster:
    """``dask scheduler`` on a fixed loopback port + ``n_workers`` × ``dask worker --nanny``."""

    def __init__(self, workdir, n_workers=3, *, memory_limit="1GiB", start_timeout=180):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.n_workers, self.memory_limit, self.start_timeout = n_workers, memory_limit, start_timeout
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler_file = str(self.dir / "scheduler.json")
        self.scheduler = None
        self.nannies = [None] * n_workers
        self.lock = threading.RLock()
        self.events = []  #: restarts and repairs, for the JSON
        self._logs = []
        self.start_scheduler()
        for k in range(n_workers):
            self.start_nanny(k)
        self._closing = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True, name="supervisor")
        self._supervisor.start()
        self.wait_ready(start_timeout)

    def _supervise(self):
        """What a service manager does: a scheduler or nanny process that exited is started again
        (nannies exit when their scheduler is gone; a restarted scheduler has the same address)."""
        while not self._closing.wait(1.0):
            with self.lock:
                if self._closing.is_set():
                    return
                if self.scheduler.poll() is not None:
                    self.events.append({"time": time.time(), "event": "scheduler exited: restarted"})
                    self.start_scheduler()
                for k, nanny in enumerate(self.nannies):
                    if nanny is not None and nanny.poll() is not None:
                        self.events.append({"time": time.time(), "event": f"nanny w{k} exited "
                                                                            f"({nanny.returncode}): restarted"})
                        self.start_nanny(k)

    def _log(self, name):
        f = open(self.dir / name, "a")
        self._logs.append(f)
        return f

    def start_scheduler(self):
        """Start the scheduler on :attr:`port`; it (re)writes the scheduler file, which is left in
        place meanwhile (a user's restart does not remove it either): ready when rewritten."""
        with self.lock:
            before = os.stat(self.scheduler_file).st_mtime_ns if os.path.exists(self.scheduler_file) else None
            deadline = time.monotonic() + self.start_timeout
            while True:
                self.scheduler = subprocess.Popen(
                    _exe("dask") + ["scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard",
                                    "--scheduler-file", self.scheduler_file],
                    stdout=self._log("scheduler.log"), stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
                while self.scheduler.poll() is None and not _rewritten(self.scheduler_file, before):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"dask scheduler did not start; see {self.dir / 'scheduler.log'}")
                    time.sleep(0.1)
                if self.scheduler.poll() is None:
                    return
                if time.monotonic() > deadline:  # the port not free yet: try again until the deadline
                    raise RuntimeError(f"dask scheduler exited at start; see {self.dir / 'scheduler.log'}")
                time.sleep(1.0)

    def start_nanny(self, k):
        with self.lock:
            self.nannies[k] = subprocess.Popen(
                _exe("dask") + ["worker", "--scheduler-file", self.scheduler_file, "--host", "127.0.0.1",
                                "--nthreads", "1", "--nanny", "--memory-limit", str(self.memory_limit),
                                "--no-dashboard", "--death-timeout", "120", "--name", f"w{k}",
                                "--local-directory", str(self.dir / f"w{k}")],
                stdout=self._log(f"worker{k}.log"), stderr=subprocess.STDOUT, env=_env(), start_new_session=True)

    def worker_pids(self) -> list:
        """pids of the worker processes (the nannies' ``spawn_main`` children)."""
        import psutil

        pids = []
        for nanny in self.nannies:
            if nanny is None or nanny.poll() is not None:
                continue
            try:
                for child in psutil.Process(nanny.pid).children():
                    line = " ".join(child.cmdline())
                    if "spawn_main" in line and "resource_tracker" not in line:
                        pids.append(child.pid)
            except psutil.Error:
                pass
        return pids

    def registered(self, timeout=10.0) -> int:
        """Workers the scheduler knows (a short-lived client; -1 when it cannot be reached)."""
        from distributed import Client

        try:
            with Client(self.address, timeout=timeout, set_as_default=False) as c:
                return len(c.scheduler_info(n_workers=-1)["workers"])
        except Exception:
            return -1

    def wait_ready(self, timeout=None) -> float:
        """Wait until the scheduler runs and all workers are registered; repairs what is gone
        (a dead scheduler or nanny is restarted; nannies whose workers do not rejoin within a
        third of ``timeout`` are restarted). Returns the seconds waited."""
        timeout = timeout or self.start_timeout
        t0 = time.monotonic()
        restarted = False
        while True:
            with self.lock:
                if self.scheduler.poll() is not None:
                    self.events.append({"time": time.time(), "event": "scheduler found dead: restarted"})
                    self.start_scheduler()
                for k, nanny in enumerate(self.nannies):
                    if nanny is None or nanny.poll() is not None:
                        self.events.append({"time": time.time(), "event": f"nanny w{k} exited: restarted"})
                        self.start_nanny(k)
            if self.registered() == self.n_workers and len(self.worker_pids()) == self.n_workers:
                return time.monotonic() - t0
            waited = time.monotonic() - t0
            if waited > timeout / 3 and not restarted:
                self.events.append({"time": time.time(), "event": "workers did not rejoin: nannies restarted"})
                self.restart_nannies()
                restarted = True
            if waited > timeout:
                raise RuntimeError(f"cluster not ready after {timeout:.0f} s ({self.registered()} workers); "
                                   f"logs in {self.dir}")
            time.sleep(0.5)

    def restart_nannies(self):
        with self.lock:
            for k, nanny in enumerate(self.nannies):
                _stop(nanny)
                self.start_nanny(k)

    def kill_worker(self, rng):
        pids = self.worker_pids()
        if not pids:
            return None
        pid = rng.choice(pids)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return pid

    def kill_scheduler(self):
        """SIGKILL the scheduler and start a new one at the same address; returns the old pid."""
        with self.lock:
            pid = self.scheduler.pid
            self.scheduler.kill()
            self.scheduler.wait()
            self.start_scheduler()
            return pid

    def pids(self) -> set:
        """Every process of the cluster (scheduler, nannies, their descendants)."""
        import psutil

        out = set()
        for p in [self.scheduler] + self.nannies:
            if p is None or p.poll() is not None:
                continue
            out.add(p.pid)
            try:
                out.update(c.pid for c in psutil.Process(p.pid).children(recursive=True))
            except psutil.Error:
                pass
        return out

    def close(self):
        self._closing.set()
        with self.lock:
            pass  # the supervisor is not restarting anything now
        for nanny in self.nannies:
            if nanny is not None and nanny.poll() is None:
                nanny.terminate()
        for nanny in self.nannies:
            _stop(nanny)
        _stop(self.scheduler)
        for f in self._logs:
            f.close()


def _rewritten(path, before) -> bool:
    try:
        return os.stat(path).st_mtime_ns != before
    except FileNotFoundError:
        return False


def _stop(proc, grace=20.0):
    """SIGTERM, wait up to ``grace`` s, then SIGKILL the process and its session."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=grace)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def make_data(directory, seed=0, rows=1600, chunk_rows=200, timeout=600) -> dict:
    """Seeded small stores (``kmp-dask ingest`` of ``.npz`` files): {name: store path}."""
    import numpy as np
    from sklearn.datasets import make_classification, make_regression

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    sets = {
        "multi": make_classification(2 * rows, n_features=8, n_informative=5, n_classes=3, random_state=seed),
        "binary": make_classification(2 * rows, n_features=6, n_informative=4, n_classes=2, random_state=seed + 1),
        "reg": make_regression(2 * rows, n_features=6, noise=5.0, random_state=seed + 2),
    }
    stores = {}
    for name, (X, y) in sets.items():
        X = X.astype(np.float32)
        for part, rows_ in (("train", slice(0, rows)), ("test", slice(rows, 2 * rows))):
            store = d / f"{name}_{part}.zarr"
            if name == "reg":  # numeric y: a regression store
                src = d / f"{name}_{part}.npz"
                np.savez(src, X=X[rows_], y=y[rows_].astype(np.float32))
            else:  # class names in a CSV label column: a classification store
                src = d / f"{name}_{part}.csv"
                _write_csv(src, X[rows_], [f"c{v}" for v in y[rows_]])
            if not store.exists():
                _check_run(_exe("kmp-dask") + ["ingest", str(src), str(store),
                                               *(["--label", "label"] if src.suffix == ".csv" else []),
                                               "--chunk-rows", str(chunk_rows), "--no-progress"], timeout)
            stores[f"{name}_{part}"] = str(store)
    stores["multi_csv"] = str(d / "multi_train.csv")
    return stores


def _write_csv(path, X, labels):
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"x{k}" for k in range(X.shape[1])] + ["label"])
        for row, label in zip(X.tolist(), labels, strict=True):
            w.writerow([repr(v) for v in row] + [label])


def _check_run(argv, timeout):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env())
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


# --------------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------------
@dataclass
class Job:
    """One kind of job: ``argv(out, ck, refs)`` is its command line writing under ``out`` (the
    job's output directory), ``outputs`` the names under ``out`` compared with the reference."""

    name: str
    argv: object
    outputs: tuple
    rerun: str = "--overwrite"  #: flag added when an attempt is run again: --resume or --overwrite
    cluster: bool = True  #: gets --scheduler-file
    needs: tuple = ()  #: reference jobs whose outputs it reads
    reference_seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def _train(store, algorithm, *params, ckpt=True):
    def argv(out, ck, refs):
        a = ["train", store, "--model", str(out / "model"), "--quiet"]
        if algorithm:
            a += ["--algorithm", algorithm]
        a += list(params)
        if ckpt:
            a += ["--checkpoint", str(ck), "--checkpoint-every", "2"]
        return a
    return argv


def _pipeline_toml(data, kind) -> str:
    if kind == "kmp":
        return f"""name = "soak-kmp"
[data.train]
source = "{data['binary_train']}"
[data.test]
source = "{data['binary_test']}"
[model]
algorithm = "kmp"
params = {{ n_basis = 12, candidates = 40, gamma = 0.1, random_state = 0 }}
[compress]
n_vectors = 8
data = "train"
[evaluate]
data = "test"
"""
    return f"""name = "soak-mmda"
[data.train]
source = "{data['multi_train']}"
[data.test]
source = "{data['multi_test']}"
[model]
algorithm = "mmda"
params = {{ n_components = 2, C = 10.0, gamma = 0.1, random_state = 0 }}
[features]
data = ["train", "test"]
[downstream]
estimator = "KNeighborsClassifier"
params = {{ n_neighbors = 1 }}
train = "train_features"
test = "test_features"
"""


#: predict jobs: (label, the train job whose reference model is read, store, output format, flags)
PREDICTIONS = [("kmp", "train-kmp", "multi_test", ".csv", ()), ("kmp", "train-kmp", "multi_test", ".parquet", ()),
               ("kmp", "train-kmp", "multi_test", ".npy", ()), ("kmp", "train-kmp", "multi_test", ".zarr", ()),
               ("kmp-logistic-proba", "train-kmp-logistic", "binary_test", ".csv", ("--proba",)),
               ("kmp-decision", "train-kmp", "multi_test", ".npy", ("--decision",)),
               ("cvm-multiclass", "train-cvm-multiclass", "multi_test", ".parquet", ()),
               ("mmda", "train-mmda", "multi_test", ".zarr", ()),
               ("skpca", "train-skpca", "multi_test", ".parquet", ()),
               ("regression", "train-kmp-regression", "reg_test", ".npy", ())]


def job_catalogue(data: dict, workdir) -> dict:
    """{name: Job}: every algorithm's train, CV, compress, evaluate, predict to every format,
    ingest and pipelines, on the stores of :func:`make_data`."""
    d = data
    jobs = [
        Job("train-kmp", _train(d["multi_train"], "kmp", "--n-basis", "16", "--candidates", "60", "--gamma", "0.1",
                                "--random-state", "0"), ("model",), "--resume"),
        Job("train-kmp-binary", _train(d["binary_train"], "kmp", "--n-basis", "16", "--gamma", "0.1",
                                       "--random-state", "1"), ("model",), "--resume"),
        Job("train-kmp-regression", _train(d["reg_train"], "kmp", "--n-basis", "16", "--candidates", "60",
                                           "--gamma", "0.05", "--random-state", "0"), ("model",), "--resume"),
        Job("train-kmp-logistic", _train(d["binary_train"], "kmp", "--n-basis", "10", "--loss", "logistic",
                                         "--gamma", "0.1", "--random-state", "0"), ("model",), "--resume"),
        Job("train-kmp-cv", _train(d["binary_train"], None, "--cv", "3", "--n-basis", "12", "--random-state", "0"),
            ("model",), "--resume"),
        Job("train-cvm-binary", _train(d["binary_train"], "cvm", "--C", "10", "--gamma", "0.1",
                                       "--random-state", "0"), ("model",), "--resume"),
        Job("train-cvm-multiclass", _train(d["multi_train"], "cvm", "--C", "10", "--gamma", "0.1",
                                           "--random-state", "0"), ("model",), "--resume"),
        Job("train-mmda", _train(d["multi_train"], "mmda", "--n-components", "2", "--C", "10", "--gamma", "0.1",
                                 "--random-state", "0"), ("model",), "--resume"),
        Job("train-skpca", _train(d["multi_train"], "skpca", "--n-components", "4", "--candidates", "40",
                                  "--gamma", "0.1", "--random-state", "0"), ("model",), "--resume"),
    ]
    ref = lambda refs, job: str(refs / job / "out" / "model")  # noqa: E731
    jobs += [
        Job("compress-kmp", lambda out, ck, refs: ["compress", ref(refs, "train-kmp"), "--n-vectors", "6", "--data",
                                                   d["multi_train"], "--model", str(out / "model"), "--quiet"],
            ("model",), needs=("train-kmp",)),
        Job("compress-cvm", lambda out, ck, refs: ["compress", ref(refs, "train-cvm-binary"), "--n-vectors", "8",
                                                   "--data", d["binary_train"], "--model", str(out / "model"),
                                                   "--candidates", "auto", "--quiet"],
            ("model",), needs=("train-cvm-binary",)),
        Job("evaluate-kmp", lambda out, ck, refs: ["evaluate", ref(refs, "train-kmp"), d["multi_test"], "--quiet",
                                                   "--output", str(out / "metrics.json")],
            ("metrics.json",), needs=("train-kmp",)),
        Job("evaluate-cvm-multiclass", lambda out, ck, refs: ["evaluate", ref(refs, "train-cvm-multiclass"),
                                                              d["multi_test"], "--quiet", "--output",
                                                              str(out / "metrics.json")],
            ("metrics.json",), needs=("train-cvm-multiclass",)),
        Job("evaluate-regression", lambda out, ck, refs: ["evaluate", ref(refs, "train-kmp-regression"),
                                                          d["reg_test"], "--quiet", "--output",
                                                          str(out / "metrics.json")],
            ("metrics.json",), needs=("train-kmp-regression",)),
        Job("ingest", lambda out, ck, refs: ["ingest", d["multi_csv"], str(out / "ingested.zarr"), "--label",
                                             "label", "--chunk-rows", "200", "--no-progress"],
            ("ingested.zarr",), cluster=False),
        Job("run-pipeline-kmp", _run_argv(data, workdir, "kmp"), ("run/model", "run/compressed",
                                                                  "run/steps/evaluate.json"), "--resume"),
        Job("run-pipeline-mmda", _run_argv(data, workdir, "mmda"), ("run/model", "run/data/train_features.zarr",
                                                                    "run/data/test_features.zarr",
                                                                    "run/steps/downstream.json"), "--resume"),
    ]
    for label, source, store, ext, flags in PREDICTIONS:
        jobs.append(Job(f"predict-{label}{ext.replace('.', '-')}", _predict_argv(source, d[store], ext, flags),
                        (f"pred{ext}",), needs=(source,)))
    return {j.name: j for j in jobs}


def _predict_argv(source, store, ext, flags):
    def argv(out, ck, refs):
        return ["predict", str(refs / source / "out" / "model"), store, "--output", str(out / f"pred{ext}"),
                "--quiet", *flags]
    return argv


def _run_argv(data, workdir, kind):
    path = Path(workdir) / f"pipeline_{kind}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_pipeline_toml(data, kind))

    def argv(out, ck, refs):
        return ["run", str(path), "--output", str(out / "run"), "--quiet"]
    return argv


# --------------------------------------------------------------------------------------------
# One attempt: a kmp-dask subprocess in its own session, under a hard timeout
# --------------------------------------------------------------------------------------------
class Attempt:
    """A running ``kmp-dask`` command; the chaos thread reads :attr:`proc` and appends to :attr:`kills`."""

    def __init__(self, argv, directory, timeout):
        self.argv, self.dir, self.timeout = argv, Path(directory), timeout
        self.kills = []
        self.start = time.time()
        self.stdout = open(self.dir / "stdout.txt", "w")
        self.stderr = open(self.dir / "stderr.txt", "w")
        self.proc = subprocess.Popen(argv, stdout=self.stdout, stderr=self.stderr, stdin=subprocess.DEVNULL,
                                     env=_env(), start_new_session=True)

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self) -> dict:
        """Wait for the end (at most ``timeout`` s: then a HANG, stacks dumped, session killed)."""
        timed_out = False
        try:
            self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stacks = _dump_stacks(self.proc.pid, self.dir / "stacks.txt")
            _kill_session(self.proc.pid)
            self.proc.wait(timeout=60)
        end = time.time()
        self.stdout.close()
        self.stderr.close()
        err = (self.dir / "stderr.txt").read_text(errors="replace")
        errors = [line for line in err.splitlines() if line.startswith("Error:")]
        record = {"argv": self.argv, "start": self.start, "seconds": round(end - self.start, 2),
                  "returncode": self.proc.returncode, "timed_out": timed_out, "kills": self.kills,
                  "traceback": "Traceback" in err, "error_lines": errors,
                  "stderr_lines": len(err.splitlines()), "stderr_tail": err.splitlines()[-12:]}
        if timed_out:
            record["stacks_file"] = str(self.dir / "stacks.txt")
            record["stacks_head"] = stacks[:6000]
        record["orphans"] = _session_leftovers(self.proc.pid)
        return record


def _dump_stacks(pid, path) -> str:
    """The stacks of ``pid`` and its descendants (``py-spy dump``), written to ``path``."""
    import psutil

    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    try:
        pids = [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        pids = [pid]
    parts = []
    for p in pids:
        if pyspy:
            r = subprocess.run([pyspy, "dump", "--pid", str(p)], capture_output=True, text=True, timeout=120)
            parts.append(f"== py-spy dump --pid {p}\n{r.stdout}{r.stderr}")
        else:
            parts.append(f"== pid {p}: py-spy not installed, no stacks")
    text = "\n".join(parts)
    Path(path).write_text(text)
    return text


def _session_members(sid) -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return out


def _session_leftovers(sid, grace=5.0) -> list:
    """Processes still alive in the attempt's session ``grace`` s after its driver ended: orphans
    (recorded, then SIGKILLed so the next job starts clean)."""
    deadline = time.monotonic() + grace
    while True:
        left = _session_members(sid)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    out = []
    for p in left:
        try:
            out.append({"pid": p.pid, "cmdline": " ".join(p.info["cmdline"] or [])[:300]})
            p.kill()
        except Exception:
            pass
    return out


def _kill_session(sid):
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --------------------------------------------------------------------------------------------
# The chaos thread
# --------------------------------------------------------------------------------------------
class Chaos(threading.Thread):
    """While an attempt runs, fires at exponential intervals (``rate`` per minute) and SIGKILLs a
    worker process, the scheduler (then restarted at once) or the driver."""

    def __init__(self, cluster, rng, rate, scheduler_share, driver_share):
        super().__init__(daemon=True, name="chaos")
        self.cluster, self.rng, self.rate = cluster, rng, rate
        self.shares = (scheduler_share, driver_share)
        self.attempt = None  #: the attempt to disturb (set by the main loop; None: calm)
        self.log = []
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            if self.rate <= 0:
                self.stop_event.wait(1.0)
                continue
            self.stop_event.wait(self.rng.expovariate(self.rate / 60.0))
            attempt = self.attempt
            if self.stop_event.is_set() or attempt is None or not attempt.running():
                continue
            try:
                self._fire(attempt)
            except Exception as exc:  # a failed kill is recorded, the soak goes on
                self.log.append({"time": time.time(), "kind": "error", "detail": repr(exc)})

    def _fire(self, attempt):
        u = self.rng.random()
        sched, driver = self.shares
        at = round(time.time() - attempt.start, 2)
        if u < driver:
            kind, pid = "driver", attempt.proc.pid
            os.kill(pid, signal.SIGKILL)
        elif u < driver + sched and not any(k["kind"] == "scheduler" for k in attempt.kills):
            kind, pid = "scheduler", self.cluster.kill_scheduler()
        else:
            kind, pid = "worker", self.cluster.kill_worker(self.rng)
            if pid is None:
                return
        rec = {"kind": kind, "pid": pid, "at_seconds": at, "time": time.time()}
        attempt.kills.append(rec)
        self.log.append(rec)

    def stop(self):
        self.stop_event.set()


# --------------------------------------------------------------------------------------------
# Results: identical to the reference? temporaries left?
# --------------------------------------------------------------------------------------------
#: JSON keys whose values are times or durations (differ between identical runs): ``created``,
#: ``seconds``, ``fit_seconds_``, ``mean_fit_time``, ``elapsed`` ...
_VOLATILE = re.compile(r"^(created|date|timestamp|started|finished|written)$|(seconds|time|elapsed|duration)_?$")
_ZARR_META = {".zattrs", ".zarray", ".zgroup", ".zmetadata", "zarr.json"}
#: Work counters saved with a model (not its numbers): a resumed fit counts the work it redid, so
#: a difference here is recorded as ``diagnostic`` beside the record, not as a wrong result.
_DIAGNOSTIC = re.compile(r"/\w*(kernel_evaluations|n_restarts|n_passes|n_saves)_?(\[|/|:)")


def _volatile(key) -> bool:
    return isinstance(key, str) and bool(_VOLATILE.search(key))


def _strip_volatile(doc):
    """``doc`` without volatile keys (plain JSON objects and the model codec's encoded dicts,
    ``{"__kind__": "dict", "items": [[key, value], ...]}``)."""
    if isinstance(doc, dict) and doc.get("__kind__") == "dict" and isinstance(doc.get("items"), list):
        return {**doc, "items": [_strip_volatile(kv) for kv in doc["items"]
                                 if not (isinstance(kv, list) and len(kv) == 2 and _volatile(kv[0]))]}
    if isinstance(doc, dict):
        return {k: _strip_volatile(v) for k, v in doc.items() if not _volatile(k)}
    if isinstance(doc, list):
        return [_strip_volatile(v) for v in doc]
    return doc


def _array_files(doc) -> set:
    """The array files (``{"__kind__": "array", "file": ...}``) referenced anywhere in ``doc``."""
    if isinstance(doc, dict):
        own = {doc["file"]} if doc.get("__kind__") == "array" and isinstance(doc.get("file"), str) else set()
        return own.union(*(_array_files(v) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(_array_files(v) for v in doc))
    return set()


def _volatile_files(model_dir: Path) -> set:
    """Array files of a model directory that hold times (referenced only under volatile keys)."""
    try:
        doc = json.loads((model_dir / "model.json").read_text())
    except (OSError, ValueError):
        return set()
    return _array_files(doc) - _array_files(_strip_volatile(doc))


def _json_diff(a, b, where="") -> list:
    """Paths where the JSON values ``a`` and ``b`` differ (at most a few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'reference' if k in a else 'result'}")
            else:
                out += _json_diff(a[k], b[k], f"{where}/{k}")
        return out[:10]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for x, y, k in zip(a, b, range(len(a)), strict=False)
                for d in _json_diff(x, y, f"{where}[{k}]")][:10]
    return [] if a == b else [f"{where}: {str(a)[:80]!r} != {str(b)[:80]!r}"]


def compare(result: Path, reference: Path) -> list:
    """Differences between the output ``result`` and the reference (empty: identical)."""
    if not result.exists():
        return [f"{result.name}: missing"]
    if reference.is_dir() != result.is_dir():
        return [f"{result.name}: a {'directory' if result.is_dir() else 'file'}, the reference is not"]
    if reference.is_dir():
        ref_files = sorted(p.relative_to(reference) for p in reference.rglob("*") if p.is_file())
        res_files = sorted(p.relative_to(result) for p in result.rglob("*") if p.is_file())
        if ref_files != res_files:
            only = sorted(set(map(str, ref_files)) ^ set(map(str, res_files)))
            return [f"{result.name}: files differ: {only[:8]}"]
        skip = _volatile_files(reference)
        return [d for rel in ref_files if str(rel) not in skip for d in _compare_file(result / rel, reference / rel)]
    return _compare_file(result, reference)


def _compare_file(result: Path, reference: Path) -> list:
    if result.suffix == ".json" or result.name in _ZARR_META:
        try:
            a, b = json.loads(reference.read_text()), json.loads(result.read_text())
        except ValueError as exc:
            return [f"{result}: not JSON ({exc})"]
        return [f"{result.name}{d}" for d in _json_diff(_strip_volatile(a), _strip_volatile(b))]
    if result.read_bytes() != reference.read_bytes():
        if result.suffix == ".parquet":
            return _compare_parquet(result, reference)
        return [f"{result.name}: bytes differ ({result.stat().st_size} vs {reference.stat().st_size} bytes)"]
    return []


def _compare_parquet(result, reference) -> list:
    import pyarrow.parquet as pq

    a, b = pq.read_table(reference), pq.read_table(result)
    if a.schema.remove_metadata() != b.schema.remove_metadata() or not a.equals(b):
        return [f"{result.name}: table differs"]
    return []  # the same table, metadata aside (recorded as identical)


#: Names of an atomic write's temporaries: ``x.tmp``, ``.x.tmp-<id>``, ``.x.old-<id>``, a
#: ``.tmp-<id>`` store sibling, ``.x.<8 chars>`` (``tempfile.mkstemp(prefix=".x.")``).
_TEMPORARY = re.compile(r"\.tmp$|\.tmp-|\.old-|^\.[^/]+\.[A-Za-z0-9_]{8}(\.tmp)?$")


def leftovers(directory) -> list:
    """Temporaries under ``directory`` (zarr's own dot files excepted)."""
    out = []
    for p in Path(directory).rglob("*"):
        if p.name not in _ZARR_META and _TEMPORARY.search(p.name):
            rel = p.relative_to(directory)
            if not any(_TEMPORARY.search(part) for part in rel.parts[:-1]):  # inside a listed temporary
                out.append(str(rel))
    return sorted(out)


# --------------------------------------------------------------------------------------------
# Jobs under chaos
# --------------------------------------------------------------------------------------------
def _argv(job, out, ck, refs, cluster):
    argv = _exe("kmp-dask") + job.argv(out, ck, refs)
    return argv + (["--scheduler-file", cluster.scheduler_file] if job.cluster else [])


def _rerun_flag(job, out, ck) -> list:
    if job.rerun == "--resume" and "--checkpoint" in job.argv(out, ck, Path(".")) and not ck.exists():
        return []  # killed before its checkpoint directory existed: nothing to resume, a fresh start
    return [job.rerun]


def run_job(job, n, cluster, chaos, refs, jobs_dir, *, timeout, max_attempts, ready_timeout) -> dict:
    """Run ``job`` (attempts until one succeeds, hangs or shows a traceback); classify it."""
    jdir = Path(jobs_dir) / f"{n:04d}-{job.name}"
    out, ck = jdir / "out", jdir / "ck"
    out.mkdir(parents=True)
    base = _argv(job, out, ck, refs, cluster)
    attempts = []
    for k in range(max_attempts):
        calm = k == max_attempts - 1
        waited = cluster.wait_ready(ready_timeout)
        if k > 0 and all((out / o).exists() for o in job.outputs) and attempts[-1]["returncode"] == -signal.SIGKILL:
            break  # the driver was killed after it wrote its outputs: check them as they are
        argv = base + (_rerun_flag(job, out, ck) if k > 0 else [])
        adir = jdir / f"attempt{k}"
        adir.mkdir()
        attempt = Attempt(argv, adir, timeout)
        chaos.attempt = None if calm else attempt
        try:
            rec = attempt.wait()
        finally:
            chaos.attempt = None
        rec.update(calm=calm, cluster_wait_before=round(waited, 2))
        attempts.append(rec)
        if rec["timed_out"] or rec["traceback"] or rec["returncode"] == 0:
            break
    return _classify(job, n, attempts, out, refs, jdir)


def _attempt_problem(rec) -> str | None:
    if rec["timed_out"]:
        return "hang"
    if rec["traceback"]:
        return "traceback"
    killed_driver = any(k["kind"] == "driver" for k in rec["kills"]) and rec["returncode"] == -signal.SIGKILL
    if rec["returncode"] not in (0,) and not killed_driver and len(rec["error_lines"]) != 1:
        return "unclear-error"
    return None


def _classify(job, n, attempts, out, refs, jdir) -> dict:
    final = attempts[-1]
    problems = {p for p in map(_attempt_problem, attempts) if p}
    diffs = []
    done = final["returncode"] == 0 or (final["returncode"] == -signal.SIGKILL
                                        and all((out / o).exists() for o in job.outputs))
    diagnostic = []
    if done and not final["timed_out"]:
        for o in job.outputs:
            diffs += compare(out / o, refs / job.name / "out" / o)
        diagnostic = [d for d in diffs if _DIAGNOSTIC.search(d)]
        diffs = [d for d in diffs if not _DIAGNOSTIC.search(d)]
        if diffs:
            problems.add("wrong-result")
    left = leftovers(jdir)
    if left:
        problems.add("leftover")
    orphans = [o for a in attempts for o in a["orphans"]]
    if orphans:
        problems.add("orphan")
    if problems:
        outcome = max(problems, key=SEVERITY.get)
    elif not done:
        outcome = "clear-error"
    else:
        outcome = "identical" if len(attempts) == 1 else "identical-after-resume"
    return {"n": n, "job": job.name, "outcome": outcome, "problems": sorted(problems, key=SEVERITY.get),
            "attempts": attempts, "n_attempts": len(attempts), "kills": [k for a in attempts for k in a["kills"]],
            "differences": diffs[:10], "diagnostic_differences": diagnostic[:10], "leftovers": left[:20],
            "orphans": orphans, "dir": str(jdir),
            "load": list(os.getloadavg())}


def run_references(catalogue, cluster, refs, *, timeout, ready_timeout, log=H.log) -> dict:
    """Every job once without faults (those that read a model after the job writing it): its
    outputs are the reference. A job whose reference fails is left out of the soak (recorded)."""
    failed = {}
    order = sorted(catalogue.values(), key=lambda j: bool(j.needs))
    for job in order:
        if any(dep in failed for dep in job.needs):
            failed[job.name] = f"needs {job.needs}, whose reference failed"
            continue
        jdir = Path(refs) / job.name
        out = jdir / "out"
        out.mkdir(parents=True)
        cluster.wait_ready(ready_timeout)
        adir = jdir / "attempt0"
        adir.mkdir()
        rec = Attempt(_argv(job, out, jdir / "ck", refs, cluster), adir, timeout).wait()
        missing = [o for o in job.outputs if not (out / o).exists()]
        if rec["returncode"] != 0 or missing or rec["orphans"]:
            failed[job.name] = {"returncode": rec["returncode"], "missing": missing, "stderr_tail": rec["stderr_tail"],
                                "timed_out": rec["timed_out"], "orphans": rec["orphans"], "argv": rec["argv"]}
            log(f"reference {job.name} FAILED: {failed[job.name]}")
            continue
        job.reference_seconds = rec["seconds"]
        log(f"reference {job.name}: {rec['seconds']:.1f} s")
    return failed


def summarize(records, kills, failed_refs, end_orphans) -> dict:
    counts = {o: 0 for o in OUTCOMES}
    per_job = {}
    for r in records:
        counts[r["outcome"]] += 1
        per_job.setdefault(r["job"], {}).setdefault(r["outcome"], 0)
        per_job[r["job"]][r["outcome"]] += 1
    errors = {}
    for r in records:
        for a in r["attempts"]:
            for line in a["error_lines"]:
                key = re.sub(r"\d+(\.\d+)?", "N", re.sub(r"'[^']*'", "'…'", line))[:200]
                errors[key] = errors.get(key, 0) + 1
    kills = [k for k in kills if k["kind"] != "error"]
    by_kind = {}
    for k in kills:
        by_kind[k["kind"]] = by_kind.get(k["kind"], 0) + 1
    return {"jobs": len(records), "outcomes": counts,
            "jobs_with_diagnostic_differences": sum(bool(r.get("diagnostic_differences")) for r in records),
            "kills": len(kills), "kills_by_kind": by_kind,
            "jobs_with_kills": sum(bool(r["kills"]) for r in records),
            "attempts": sum(r["n_attempts"] for r in records), "per_job": per_job,
            "error_lines": dict(sorted(errors.items(), key=lambda kv: -kv[1])),
            "references_failed": failed_refs, "orphans_at_end": end_orphans,
            "acceptance": {"jobs>=200": len(records) >= 200, "kills>=50": len(kills) >= 50,
                           "hangs==0": counts["hang"] == 0, "wrong_results==0": counts["wrong-result"] == 0,
                           "leftovers==0": counts["leftover"] == 0}}


def _processes_under(workdir) -> list:
    """Processes whose command line names ``workdir`` (the soak's cluster, jobs, references)."""
    import psutil

    out = []
    mine = {os.getpid()} | {p.pid for p in psutil.Process().parents()}  # this script and what started it
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if str(workdir) in cmd and p.pid not in mine and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append({"pid": p.pid, "cmdline": cmd[:300]})
        except psutil.Error:
            pass
    return out


def run_soak(workdir, *, duration=180.0, seed=0, kill_rate=3.0, scheduler_share=0.1, driver_share=0.2,
             job_timeout=300.0, max_attempts=3, ready_timeout=300.0, out=None, only=None, log=H.log) -> dict:
    """The soak (module docstring); returns the JSON document (also written to ``out`` after every job)."""
    workdir = Path(workdir).resolve()
    rng = random.Random(seed)
    doc = {"name": NAME, "protocol": __doc__.split("Protocol\n--------\n")[1].split("\nUsage")[0],
           "config": {"duration": duration, "seed": seed, "kill_rate_per_min": kill_rate,
                      "scheduler_share": scheduler_share, "driver_share": driver_share, "job_timeout": job_timeout,
                      "max_attempts": max_attempts, "workers": 3, "workdir": str(workdir)},
           "uptime_start": H.uptime(), "environment": H.environment()}
    t0 = time.time()
    cluster = SoakCluster(workdir / "cluster")
    chaos = None
    records = []
    try:
        data = make_data(workdir / "data", seed)
        catalogue = job_catalogue(data, workdir)
        if only:
            unknown = sorted(set(only) - set(catalogue))
            if unknown:
                raise ValueError(f"unknown jobs {unknown}; the jobs are {sorted(catalogue)}")
            catalogue = {k: v for k, v in catalogue.items() if k in only or any(k in catalogue[o].needs for o in only)}
        refs = workdir / "refs"
        failed = run_references(catalogue, cluster, refs, timeout=job_timeout, ready_timeout=ready_timeout, log=log)
        names = sorted(k for k in catalogue if k not in failed and (not only or k in only))
        doc["reference_seconds"] = {k: catalogue[k].reference_seconds for k in names}
        chaos = Chaos(cluster, random.Random(seed + 1), kill_rate, scheduler_share, driver_share)
        chaos.start()
        deadline = time.time() + duration
        loads = []
        while time.time() < deadline and names:
            job = catalogue[rng.choice(names)]
            rec = run_job(job, len(records), cluster, chaos, refs, workdir / "jobs", timeout=job_timeout,
                          max_attempts=max_attempts, ready_timeout=ready_timeout)
            records.append(rec)
            loads.append(os.getloadavg()[0])
            log(f"job {rec['n']} {job.name}: {rec['outcome']} ({rec['n_attempts']} attempts, "
                f"kills {[k['kind'] for k in rec['kills']]}, load {loads[-1]:.1f})")
            if rec["outcome"] in ("identical", "identical-after-resume"):
                shutil.rmtree(rec["dir"], ignore_errors=True)  # keep only the jobs worth a look
            if out:
                _write(doc, records, chaos, failed, cluster, [], loads, t0, out)
    finally:
        if chaos is not None:
            chaos.stop()
        cluster.close()
    time.sleep(2.0)
    end_orphans = _processes_under(workdir)
    for o in end_orphans:
        try:
            os.kill(o["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    doc = _write(doc, records, chaos, failed, cluster, end_orphans, loads, t0, out)
    return doc


def _write(doc, records, chaos, failed, cluster, end_orphans, loads, t0, out):
    import statistics

    doc = dict(doc)
    doc["summary"] = summarize(records, chaos.log if chaos else [], failed, end_orphans)
    doc["chaos_errors"] = [k for k in (chaos.log if chaos else []) if k["kind"] == "error"]
    doc["cluster_events"] = cluster.events
    doc["load_1min"] = ({"median": statistics.median(loads), "min": min(loads), "max": max(loads)}
                        if loads else None)
    doc["uptime_end"] = H.uptime()
    doc["total_seconds"] = round(time.time() - t0, 1)
    doc["records"] = records
    if out:
        H.write_json(out, doc)
    return doc


def reclassify(path, workdir) -> dict:
    """Compare again, with this script's comparison, the outputs of the jobs of the JSON ``path``
    classified ``wrong-result`` whose directories are still in ``workdir`` (a run with
    ``--keep``), e.g. after a timing field was found that the comparison did not skip yet; the
    records changed are marked ``reclassified`` and the summary is recounted."""
    import collections
    import tempfile

    doc = json.loads(Path(path).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        catalogue = job_catalogue(collections.defaultdict(str), tmp)
    changed = []
    for r in doc["records"]:
        if r["outcome"] == "wrong-result" and Path(r["dir"]).exists():
            new = _classify(catalogue[r["job"]], r["n"], r["attempts"], Path(r["dir"]) / "out",
                            Path(workdir) / "refs", Path(r["dir"]))
            if new["outcome"] != r["outcome"]:
                changed.append({"n": r["n"], "was": r["outcome"], "now": new["outcome"],
                                "differences_before": r["differences"]})
                r.update(outcome=new["outcome"], problems=new["problems"], differences=new["differences"],
                         diagnostic_differences=new["diagnostic_differences"], reclassified=True)
    old = doc["summary"]
    doc["summary"] = summarize(doc["records"], [k for r in doc["records"] for a in r["attempts"] for k in a["kills"]],
                               old["references_failed"], old["orphans_at_end"])
    doc["reclassified"] = changed
    H.write_json(path, doc)
    return doc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=2400.0, help="seconds of jobs under chaos (default 2400)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kill-rate", type=float, default=3.0, help="kills per minute of job time (default 3)")
    p.add_argument("--scheduler-share", type=float, default=0.1, help="share of kills that hit the scheduler")
    p.add_argument("--driver-share", type=float, default=0.2, help="share of kills that hit the driver")
    p.add_argument("--job-timeout", type=float, default=300.0, help="seconds before an attempt is a HANG")
    p.add_argument("--attempts", type=int, default=3, help="attempts per job (the last without faults)")
    p.add_argument("--jobs", default=None, help="comma-separated job names (default: all)")
    p.add_argument("--workdir", default=None, help="work directory (default: a new temporary one, removed)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--quick", action="store_true", help="180 s, JSON in $TMPDIR")
    p.add_argument("--out", default=None, help="output JSON (default benchmarks/results/chaos_soak.json)")
    p.add_argument("--reclassify", default=None, metavar="JSON",
                   help="compare again the wrong results of JSON (a run kept with --keep in --workdir), then exit")
    args = p.parse_args(argv)
    if args.reclassify:
        doc = reclassify(args.reclassify, args.workdir)
        H.log(f"{len(doc['reclassified'])} records reclassified: {json.dumps(doc['summary']['outcomes'])}")
        return doc
    H.set_threads(1)
    out = H.output_path(NAME, args.out, args.quick)
    workdir, tmp = H.work_directory(args.workdir, "kmp_dask_chaos_")
    try:
        doc = run_soak(workdir, duration=180.0 if args.quick else args.duration, seed=args.seed,
                       kill_rate=args.kill_rate, scheduler_share=args.scheduler_share,
                       driver_share=args.driver_share, job_timeout=args.job_timeout, max_attempts=args.attempts,
                       out=out, only=args.jobs.split(",") if args.jobs else None)
    finally:
        if tmp and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    H.log(f"wrote {out}: {json.dumps(doc['summary']['outcomes'])}, kills {doc['summary']['kills_by_kind']}")
    return doc


if __name__ == "__main__":
    main()
