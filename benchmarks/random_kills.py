"""Random kills: a worker (or the scheduler) SIGKILLed at a random moment of a fit on real processes.

Question ("Faults with real processes"): is a worker killed mid-fit at any moment —
before, during or between engine calls — repaired every time, with the identical model? And when
the scheduler is killed mid-fit, does the driver fail within a bounded time with a clear message
instead of hanging?

Protocol
--------
* A synthetic zarr store (``make_classification_store``, float32, 20 features, 3 classes,
  ``random_state=1``) in ``--chunk-rows`` chunks, so that every worker holds partitions.
* A real cluster, the commands a user types: ``dask scheduler --host 127.0.0.1 --port 0
  --scheduler-file F`` and ``--workers`` (3) separate ``dask worker --scheduler-file F --nthreads 1
  --nanny`` processes. The nanny restarts a worker process that dies.
* Every fit runs in a child process (this script with ``--child``), so a hang in the driver never
  hangs the benchmark: the child is killed after ``--fit-timeout`` seconds and the run recorded as
  a hang. The child prints a line when ``KMPClassifier(n_basis, candidates, random_state=0,
  client=F).fit(store)`` starts and when it returns, and records the times of the engine's calls
  (``ActorEngine.__init__``, ``run``, ``close`` are wrapped in the child only — instrumentation,
  kmp_dask itself is unchanged) and the engine's ``n_restarts``.
* Fits without faults: a warm-up (not timed), the reference (its model is the one every other
  fit must equal) and ``--controls`` (2) more; D is the median duration of the last ones.
* Worker kills: ``--kills`` times, a thread waits a uniformly random time t in [0, D) after the fit
  started and SIGKILLs one worker *process* chosen at random (its pid from ``client.run(os.getpid)``,
  checked to be a child of a nanny, never the nanny). If the fit has already returned at t (a fit
  can be faster than D on a machine whose load changes), nothing is killed and the draw is
  repeated in a new run, so every counted run had a kill land mid-fit; given that it landed, the
  kill time is uniform over that fit's own duration (``kill_fraction_of_this_fit``, whose deciles
  the JSON counts; ``kill_fraction`` is relative to D). Before the next run the script waits until
  the nanny's replacement worker has joined. Recorded per run: t/D, the fit's phase at t (client
  connection, engine start, inside an engine call, between calls, after the last call), success,
  whether ``basis_indices_``, ``dual_coef_`` and ``intercept_`` equal the reference bit for bit,
  ``n_restarts``, seconds.
* Kills between engine calls: ``--between-kills`` (10) more, each right after the k-th engine call
  returned (k uniform in 1..calls−1 of the reference): the driver waits until the worker is
  killed, then makes its next call. A gap between calls is milliseconds (the driver's own work),
  so uniformly random times almost never land in one; these runs make sure some do.
* Scheduler kills: ``--scheduler-kills`` times, on a fresh cluster each time (after a warm-up fit
  without faults, which must give the reference model), the scheduler is SIGKILLed at a uniformly
  random time in [0.1 D, 0.9 D); recorded: whether the driver raised, completed or hung
  (> ``--fit-timeout``), the seconds from the kill to the driver's end, the error.

* The code under test is one commit (``--kmp-dask-rev``, default HEAD): ``kmp_dask/`` of that
  commit is extracted into the work directory and put first on the ``PYTHONPATH`` of the driver,
  the scheduler and the workers (the JSON records where each imported it from), so files edited in
  the working tree during the ~20-minute run change nothing.

Usage: ``python benchmarks/random_kills.py [--kills 50] [--between-kills 10] [--scheduler-kills 3]
[--rows 60000] [--n-basis 60] [--seed 0] [--kmp-dask-rev HEAD]``; ``--quick``: 3 + 2 kills,
1 scheduler kill, 20,000 rows, 30 atoms, JSON in $TMPDIR. Results:
benchmarks/results/random_kills.json. ``tests/parallel/test_random_kills.py`` runs
:func:`run_random_kills` with fewer kills, on the working tree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _harness as H  # noqa: E402

NAME = "random_kills"

__all__ = ["CliCluster", "make_store", "run_fit", "run_random_kills", "summarize", "main"]


def _dask_cli():
    exe = shutil.which("dask", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "dask"]


# --------------------------------------------------------------------------------------------
# The cluster: real `dask scheduler` and `dask worker --nanny` processes
# --------------------------------------------------------------------------------------------
class CliCluster:
    """``dask scheduler`` + ``n_workers`` × ``dask worker --nanny`` on 127.0.0.1, logs in ``workdir``."""

    def __init__(self, workdir, n_workers=3, *, memory_limit="2GiB", death_timeout=300, start_timeout=90):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.n_workers = n_workers
        self.scheduler_file = str(self.dir / "scheduler.json")
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self._logs = []
        self.scheduler = None
        self.nannies = []
        self.client = None
        try:
            self._start(memory_limit, death_timeout, start_timeout)
        except BaseException:
            self.close()
            raise

    def _log(self, name):
        f = open(self.dir / name, "a")
        self._logs.append(f)
        return f

    def _start(self, memory_limit, death_timeout, start_timeout):
        from distributed import Client

        if os.path.exists(self.scheduler_file):
            os.remove(self.scheduler_file)
        log = self._log("scheduler.log")
        self.scheduler = subprocess.Popen(
            _dask_cli() + ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                           "--scheduler-file", self.scheduler_file],
            stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + start_timeout
        while not os.path.exists(self.scheduler_file):
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                raise RuntimeError(f"dask scheduler did not start; see {self.dir / 'scheduler.log'}")
            time.sleep(0.1)
        for k in range(self.n_workers):
            log = self._log(f"worker{k}.log")
            self.nannies.append(subprocess.Popen(
                _dask_cli() + ["worker", "--scheduler-file", self.scheduler_file, "--host", "127.0.0.1",
                               "--nthreads", "1", "--nanny", "--memory-limit", str(memory_limit),
                               "--no-dashboard", "--death-timeout", str(death_timeout), "--name", f"w{k}",
                               "--local-directory", str(self.dir / f"w{k}")],
                stdout=log, stderr=subprocess.STDOUT, env=self.env))
        self.client = Client(scheduler_file=self.scheduler_file, timeout="30s", set_as_default=False)
        self.wait_ready(timeout=start_timeout)

    def worker_pids(self) -> dict:
        """{worker address: pid of the worker process} (``client.run(os.getpid)``)."""
        return self.client.run(os.getpid)

    def nanny_of(self, pid):
        """The nanny process (``dask worker`` command) whose child ``pid`` is, else None."""
        import psutil

        try:
            parent = psutil.Process(pid).parent()
        except psutil.Error:
            return None
        nannies = {p.pid for p in self.nannies}
        return parent.pid if parent is not None and parent.pid in nannies else None

    def wait_ready(self, exclude=(), timeout=90, warm=True):
        """Wait until ``n_workers`` workers are registered, each a live child of a nanny and none
        of them a pid in ``exclude`` (a worker just killed), and (``warm``) have imported kmp_dask's
        engine, as a worker that has run a fit has: a fit must not pay a new worker's imports
        (several seconds on a loaded machine), or its duration would not be the reference's.
        Returns {address: pid}."""
        import psutil

        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                pids = self.worker_pids()
                last = pids
                if (len(pids) == self.n_workers and not set(pids.values()) & set(exclude)
                        and all(psutil.pid_exists(p) and self.nanny_of(p) for p in pids.values())):
                    if warm:
                        self.client.run(exec, "import kmp_dask.parallel._engine")
                        if self.worker_pids() != pids:
                            continue
                    return pids
            except Exception as exc:  # a worker that is being removed can fail client.run
                last = repr(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not ready after {timeout} s (workers: {last}); logs in {self.dir}")
            time.sleep(0.25)

    def kmp_dask_on_workers(self) -> dict:
        """{worker address: directory kmp_dask is imported from}."""
        return self.client.run(eval, "__import__('os').path.dirname(__import__('kmp_dask').__file__)")

    def close(self):
        procs = [p for p in self.nannies + [self.scheduler] if p is not None]
        if self.client is not None:
            try:
                if self.scheduler is not None and self.scheduler.poll() is None:
                    self.client.shutdown()  # scheduler, nannies and workers exit together (faster than SIGTERM)
                else:
                    self.client.close(timeout=10)
            except Exception:
                pass
            self.client = None
        deadline = time.monotonic() + 10
        for p in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.nannies, self.scheduler = [], None
        for f in self._logs:
            f.close()
        self._logs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------------------------
# The fit, in a child process
# --------------------------------------------------------------------------------------------
def make_store(path, n_rows, chunk_rows):
    from kmp_dask.datasets import make_classification_store

    return make_classification_store(path, n_rows, n_features=20, n_classes=3, random_state=1,
                                     chunk_rows=chunk_rows, overwrite=True)


def _child(spec_json):
    """Run one fit (``--child``): print ``START <time>`` / ``DONE <time>``, write the model (npz)
    and a JSON record (engine call times, n_restarts, error)."""
    spec = json.loads(spec_json)
    H.set_threads(1)
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    import numpy as np

    from kmp_dask import KMPClassifier
    from kmp_dask.parallel import _engine
    from kmp_dask.store import open_store

    rec = {"engine_init": None, "calls": [], "engines": []}
    Engine = _engine.ActorEngine
    orig_init, orig_run, orig_close = Engine.__init__, Engine.run, Engine.close

    def init(self, *a, **k):
        rec["engine_init"] = [time.time(), None]
        orig_init(self, *a, **k)
        rec["engine_init"][1] = time.time()
        rec["holders"] = [[h["addr"], [s.index for s in h["specs"]]] for h in self._holders]

    def run(self, *a, **k):
        t0 = time.time()
        try:
            return orig_run(self, *a, **k)
        finally:
            rec["calls"].append([t0, time.time()])
            if len(rec["calls"]) == spec.get("pause_after_call"):  # the parent kills a worker, then says GO
                print(f"PAUSE {time.time()!r}", flush=True)
                sys.stdin.readline()
                rec["paused"] = [rec["calls"][-1][1], time.time()]

    def close(self):
        rec["engines"].append({"n_restarts": self.n_restarts, "n_calls": self.n_calls, "closed_at": time.time()})
        return orig_close(self)

    Engine.__init__, Engine.run, Engine.close = init, run, close

    import kmp_dask

    rec["kmp_dask_file"] = kmp_dask.__file__
    store = open_store(spec["store"])
    est = KMPClassifier(n_basis=spec["n_basis"], candidates=spec["candidates"], random_state=0,
                        client=spec["client"])
    t0 = time.time()
    print(f"START {t0!r}", flush=True)
    try:
        est.fit(store)
        rec["ok"] = True
    except BaseException as exc:
        rec["ok"] = False
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["traceback"] = traceback.format_exc()
    t1 = time.time()
    print(f"DONE {t1!r}", flush=True)
    rec.update(start=t0, end=t1, seconds=t1 - t0)
    if rec["ok"]:
        np.savez(spec["out"] + ".npz", basis_indices=est.basis_indices_, dual_coef=est.dual_coef_,
                 intercept=est.intercept_)
        rec["n_basis"] = int(est.n_basis_)
    Path(spec["out"] + ".json").write_text(json.dumps(rec))
    sys.stdout.flush()
    os._exit(0 if rec["ok"] else 1)  # no interpreter teardown: the record is written, nothing else is timed


def _phase(rec, t):
    """Where the fit was at time ``t`` (the child's clock, same machine)."""
    init = rec.get("engine_init")
    calls = sorted(rec.get("calls") or [])
    if init is None or t < init[0]:
        return "connect"  # resolving the client, reading the store's metadata
    if init[1] is None or t < init[1]:
        return "engine_start"
    for a, b in calls:
        if a <= t <= b:
            return "in_call"
    if calls and t > calls[-1][1]:
        return "after_calls"
    return "between_calls"


def run_fit(store, client, out, *, n_basis, candidates, timeout, kill=None, kill_at=None, kill_after_call=None):
    """One fit in a child process. ``kill(start_time)`` (returning a dict describing the kill) is
    called ``kill_at`` seconds after the fit started, unless the fit has returned by then; or, with
    ``kill_after_call=k``, when the fit's k-th engine call has returned: the driver waits until the
    kill is done, then makes its next call. Returns the child's record plus ``status`` ("ok",
    "error", "hang", "crash"), ``started`` (the fit began) and ``kill``."""
    spec = json.dumps({"store": str(store), "client": client, "out": str(out), "n_basis": n_basis,
                       "candidates": candidates, "pause_after_call": kill_after_call})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    err = open(str(out) + ".stderr", "w")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", spec],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    started, done = threading.Event(), threading.Event()
    box = {}

    def reader():
        for line in proc.stdout:
            if line.startswith("START "):
                box["start"] = float(line.split()[1])
                started.set()
            elif line.startswith("PAUSE "):
                try:
                    box["kill"] = kill(box["start"])
                finally:
                    proc.stdin.write("GO\n")
                    proc.stdin.flush()
            elif line.startswith("DONE "):
                box["done"] = float(line.split()[1])
                done.set()
        started.set()  # EOF: child exited (perhaps before START)

    def killer():
        started.wait()
        if "start" not in box:
            return
        delay = box["start"] + kill_at - time.time()
        if done.wait(max(delay, 0.0)):
            box["kill"] = None  # the fit returned first: nothing killed
            return
        box["kill"] = kill(box["start"])

    threads = [threading.Thread(target=reader, daemon=True)]
    if kill is not None and kill_at is not None:
        threads.append(threading.Thread(target=killer, daemon=True))
    for t in threads:
        t.start()
    t0 = time.monotonic()
    try:
        proc.wait(timeout=timeout)
        hang = False
    except subprocess.TimeoutExpired:
        hang = True
    finally:  # a hang, or this process interrupted: the driver process does not outlive the run
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wall = time.monotonic() - t0
    done.set()  # release a killer still waiting
    for t in threads:
        t.join(timeout=30)
    err.close()
    stderr_tail = Path(str(out) + ".stderr").read_text(errors="replace")[-3000:]
    rec_path = Path(str(out) + ".json")
    if hang:
        rec = {"status": "hang", "ok": False,
               "error": f"no result after {timeout:.0f} s (the driver process was killed)"}
    elif rec_path.exists():
        rec = json.loads(rec_path.read_text())
        rec["status"] = "ok" if rec["ok"] else "error"
    else:
        rec = {"status": "crash", "ok": False,
               "error": f"driver process exited with code {proc.returncode} and no record"}
    rec.update(wall_seconds=wall, returncode=proc.returncode, kill=box.get("kill", "not scheduled"),
               started="start" in box,
               stderr_tail=stderr_tail if rec["status"] != "ok" else None)
    return rec


def _same_model(out, ref):
    import numpy as np

    if not Path(str(out) + ".npz").exists():
        return None
    got = np.load(str(out) + ".npz")
    return all(got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape
               and got[k].tobytes() == ref[k].tobytes() for k in ("basis_indices", "dual_coef", "intercept"))


# --------------------------------------------------------------------------------------------
# The experiment
# --------------------------------------------------------------------------------------------
def run_random_kills(workdir, *, kills=50, between_kills=10, scheduler_kills=3, rows=60_000, chunk_rows=5_000,
                     n_basis=60, candidates=59, workers=3, seed=0, fit_timeout=180.0, controls=2, warmup=True,
                     max_misses=None, log=H.log):
    """The whole experiment in ``workdir``; returns the result document (see :func:`summarize`).

    ``warmup``: one fit without faults before the reference, not timed; ``controls``: fits without
    faults after it (D is the median duration of reference and controls); ``max_misses``: how many
    kill draws may land after the fit has returned (redrawn) before the experiment gives up."""
    import numpy as np

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    store = workdir / "data.zarr"
    t0 = time.perf_counter()
    make_store(store, rows, chunk_rows)
    log(f"store {rows} x 20 rows in chunks of {chunk_rows}: {time.perf_counter() - t0:.1f} s")
    fit_kw = dict(n_basis=n_basis, candidates=candidates, timeout=fit_timeout)
    doc = {"protocol": {"rows": rows, "features": 20, "classes": 3, "chunk_rows": chunk_rows,
                        "partitions": -(-rows // chunk_rows), "n_basis": n_basis, "candidates": candidates,
                        "workers": workers, "seed": seed, "fit_timeout_seconds": fit_timeout,
                        "estimator": f"KMPClassifier(n_basis={n_basis}, candidates={candidates}, random_state=0, "
                                     "client=<scheduler file>)",
                        "cluster": f"dask scheduler --host 127.0.0.1 --port 0 --scheduler-file F; {workers} x "
                                   "dask worker --scheduler-file F --nthreads 1 --nanny --memory-limit 2GiB"},
           "worker_kills": [], "between_call_kills": [], "scheduler_kills": [], "redrawn": []}
    max_misses = kills if max_misses is None else max_misses
    misses = not_started = 0

    with CliCluster(workdir / "cluster", workers) as cluster:
        cluster.wait_ready()
        # a warm-up fit (workers import kmp_dask, caches fill), then the reference and ``controls``
        # more fits without faults: the same model each time, and the duration D (their median)
        recs = []
        for name in ["warmup"] * warmup + ["reference"] + [f"control{i}" for i in range(controls)]:
            rec = run_fit(store, cluster.scheduler_file, workdir / name, **fit_kw)
            if rec["status"] != "ok":
                raise RuntimeError(f"{name} fit (no fault) failed: {rec.get('error')}\n{rec.get('stderr_tail')}")
            log(f"{name} fit: {rec['seconds']:.2f} s, {rec['n_basis']} atoms, {len(rec['calls'])} engine calls")
            recs.append((name, rec))
        ref = dict(np.load(str(workdir / "reference") + ".npz"))
        doc["kmp_dask_imported_from"] = {"driver": str(Path(recs[0][1]["kmp_dask_file"]).parent),
                                         "workers": sorted(set(cluster.kmp_dask_on_workers().values()))}
        timed = [rec for name, rec in recs if name != "warmup"]
        D = float(np.median([rec["seconds"] for rec in timed]))
        ref_rec = dict(recs)["reference"]
        doc["reference"] = {
            "seconds_D": D, "seconds_no_fault_fits": {name: rec["seconds"] for name, rec in recs},
            "no_fault_fits_identical": all(_same_model(workdir / name, ref) for name, _ in recs),
            "n_basis": ref_rec["n_basis"], "engine_calls": len(ref_rec["calls"]),
            "engine_start_seconds": ref_rec["engine_init"][1] - ref_rec["engine_init"][0],
            "connect_seconds": ref_rec["engine_init"][0] - ref_rec["start"],
            "holders": ref_rec.get("holders")}
        log(f"D = {D:.2f} s; no-fault fits identical: {doc['reference']['no_fault_fits_identical']}")

        n_calls_ref = len(ref_rec["calls"])
        plans = [("time", None)] * kills + [("after_call", None)] * between_kills
        k = 0
        while k < len(plans):
            mode = plans[k][0]
            pids = cluster.wait_ready()
            if mode == "time":
                frac, after_call = rng.random(), None
            else:  # after a uniformly chosen engine call, before the next one
                frac, after_call = None, rng.randrange(1, n_calls_ref)
            addr = rng.choice(sorted(pids))
            victim = pids[addr]

            def kill(start, victim=victim, addr=addr):
                nanny = cluster.nanny_of(victim)
                if nanny is None:  # never kill anything but a nanny's worker process
                    return {"error": f"pid {victim} is not a worker process under a nanny"}
                t = time.time()
                os.kill(victim, signal.SIGKILL)
                return {"time": t, "after_seconds": t - start, "pid": victim, "nanny_pid": nanny, "address": addr}

            out = workdir / f"kill{k:03d}_{misses}"
            rec = run_fit(store, cluster.scheduler_file, out, kill=kill, **fit_kw,
                          **({"kill_at": frac * D} if mode == "time" else {"kill_after_call": after_call}))
            kinfo = rec["kill"]
            if isinstance(kinfo, dict) and "error" in kinfo:
                raise RuntimeError(kinfo["error"])
            if not rec["started"]:  # the driver failed before fit() (nothing was killed): not a kill's result
                not_started += 1
                doc.setdefault("driver_not_started", []).append(rec["stderr_tail"])
                log(f"  the driver process failed before the fit started ({rec['error']}); retried")
                if not_started > 3:
                    raise RuntimeError(f"the driver process fails before the fit starts:\n{rec['stderr_tail']}")
                continue
            if not isinstance(kinfo, dict) or "time" not in kinfo:
                misses += 1
                doc["redrawn"].append({"mode": mode, "kill_fraction": frac, "after_call": after_call,
                                       "fit_seconds": rec.get("seconds"), "status": rec["status"],
                                       "identical": _same_model(out, ref)})
                log(f"  {mode} draw {frac if mode == 'time' else after_call}: the fit returned before the kill "
                    f"({rec.get('seconds') or 0:.2f} s, {rec['status']}); redrawn")
                if misses > max_misses:
                    raise RuntimeError(f"{misses} kills landed after the fit had ended; the reference duration "
                                       f"{D:.2f} s does not represent the fits")
                continue
            same = _same_model(out, ref) if rec["status"] == "ok" else None
            engines = rec.get("engines") or [{}]
            run = {"run": k, "kill_fraction": kinfo["after_seconds"] / D, "kill_after_seconds": kinfo["after_seconds"],
                   "kill_fraction_of_this_fit": kinfo["after_seconds"] / rec["seconds"] if rec.get("seconds") else None,
                   "phase": _phase(rec, kinfo["time"]) if rec.get("start") else None,
                   "victim": {"address": addr, "pid": victim, "nanny_pid": kinfo["nanny_pid"],
                              "held_partitions": next((p for a, p in rec.get("holders") or [] if a == addr), None)},
                   "status": rec["status"], "identical": same, "n_restarts": engines[-1].get("n_restarts"),
                   "engine_calls": engines[-1].get("n_calls"), "seconds": rec.get("seconds"),
                   "wall_seconds": rec["wall_seconds"]}
            if mode == "time":
                run["drawn_fraction"] = frac
            else:
                run["after_call"] = after_call
            if rec["status"] != "ok":
                run.update(error=rec.get("error"), traceback=rec.get("traceback"), stderr_tail=rec.get("stderr_tail"))
            doc["worker_kills" if mode == "time" else "between_call_kills"].append(run)
            what = f"t={frac:.3f} D" if mode == "time" else f"after call {after_call}/{n_calls_ref}"
            i, n = (k, kills) if mode == "time" else (k - kills, between_kills)
            log(f"{'kill' if mode == 'time' else 'between-calls kill'} {i + 1}/{n}: {what} ({run['phase']}), "
                f"{addr} pid {victim}: {rec['status']}, identical={same}, n_restarts={run['n_restarts']}, "
                f"{rec.get('seconds') or 0:.2f} s" + (f" — {rec.get('error')}" if rec["status"] != "ok" else ""))
            if rec["status"] == "ok" and same:
                for p in Path(workdir).glob(f"{out.name}.*"):
                    p.unlink()
            cluster.wait_ready(exclude=[victim])  # the nanny's new worker process has joined
            k += 1
        doc["kills_redrawn_fit_already_returned"] = misses

    for k in range(scheduler_kills):
        with CliCluster(workdir / f"sched{k}", workers) as cluster:
            cluster.wait_ready()
            warm = run_fit(store, cluster.scheduler_file, workdir / f"sched{k}" / "warmup", **fit_kw)
            if warm["status"] != "ok" or not _same_model(workdir / f"sched{k}" / "warmup", ref):
                raise RuntimeError(f"warm-up fit on a new cluster failed or differs: {warm.get('error')}")
            sched = cluster.scheduler

            def kill(start, sched=sched):
                t = time.time()
                os.kill(sched.pid, signal.SIGKILL)
                return {"time": t, "after_seconds": t - start, "pid": sched.pid}

            for attempt in range(6):  # redrawn while the fit returns before the kill (cluster intact)
                frac = 0.1 + 0.8 * rng.random()
                out = workdir / f"sched{k}" / f"fit{attempt}"
                rec = run_fit(store, cluster.scheduler_file, out, kill_at=frac * D, kill=kill, **fit_kw)
                if isinstance(rec["kill"], dict):
                    break
                doc["redrawn"].append({"mode": "scheduler", "kill_fraction": frac, "fit_seconds": rec.get("seconds"),
                                       "status": rec["status"], "identical": _same_model(out, ref)})
                log(f"  scheduler draw {frac:.3f}: the fit returned before the kill ({rec.get('seconds') or 0:.2f} s, "
                    f"{rec['status']}); redrawn")
            else:
                raise RuntimeError("six scheduler-kill draws landed after the fit had ended")
            kinfo = rec["kill"]
            end = rec.get("end")
            run = {"run": k, "drawn_fraction": frac, "kill_after_seconds": kinfo["after_seconds"],
                   "phase": _phase(rec, kinfo["time"]) if rec.get("start") else None,
                   "outcome": {"ok": "completed", "error": "raised"}.get(rec["status"], rec["status"]),
                   "seconds_from_kill_to_driver_end": (end - kinfo["time"]) if end else None,
                   "fit_seconds": rec.get("seconds"), "wall_seconds": rec["wall_seconds"],
                   "error": rec.get("error"), "traceback": rec.get("traceback"),
                   "stderr_tail": rec.get("stderr_tail")}
            if rec["status"] == "ok":
                run["identical"] = _same_model(out, ref)
            doc["scheduler_kills"].append(run)
            log(f"scheduler kill {k + 1}/{scheduler_kills}: t={frac:.3f} D ({run['phase']}): {run['outcome']} "
                f"{run['seconds_from_kill_to_driver_end'] or 0:.1f} s after the kill — {rec.get('error')}")
    return summarize(doc, fit_timeout)


def _kill_counts(runs):
    failed = [r for r in runs if r["status"] != "ok"]
    phases = {}
    for r in runs:
        phases.setdefault(r["phase"], {"runs": 0, "identical": 0})
        phases[r["phase"]]["runs"] += 1
        phases[r["phase"]]["identical"] += bool(r["identical"])
    return {
        "runs": len(runs),
        "identical": sum(r["identical"] is True for r in runs),
        "different": sum(r["identical"] is False for r in runs),
        "failed": len(failed),
        "failures": [{"run": r["run"], "kill_fraction": r["kill_fraction"], "phase": r["phase"],
                      "status": r["status"], "error": r.get("error")} for r in failed],
        "by_phase": phases,
        "n_restarts": {str(n): sum(r["n_restarts"] == n for r in runs)
                       for n in sorted({r["n_restarts"] for r in runs if r["n_restarts"] is not None})},
        "fit_seconds_with_kill": _stats([r["seconds"] for r in runs if r["status"] == "ok"]),
        "kill_fraction_of_this_fit_deciles": _deciles([r.get("kill_fraction_of_this_fit") for r in runs]),
    }


def summarize(doc, fit_timeout):
    """Counts: identical / different / failed runs of each kind of worker kill (with the failures'
    messages); scheduler kills raised / completed / hung within ``fit_timeout``."""
    doc["counts"] = {"worker_kills_at_random_times": _kill_counts(doc["worker_kills"]),
                     "worker_kills_between_calls": _kill_counts(doc["between_call_kills"])}
    sk = doc["scheduler_kills"]
    doc["counts"]["scheduler_kills"] = {
        "runs": len(sk),
        "raised": sum(r["outcome"] == "raised" for r in sk),
        "completed": sum(r["outcome"] == "completed" for r in sk),
        "hang": sum(r["outcome"] == "hang" for r in sk),
        "other": sum(r["outcome"] not in ("raised", "completed", "hang") for r in sk),
        "max_seconds_from_kill_to_driver_end": max((r["seconds_from_kill_to_driver_end"] or 0 for r in sk),
                                                   default=None),
        "bound_seconds": fit_timeout,
        "errors": sorted({r["error"] for r in sk if r["error"]}),
    }
    runs = doc["worker_kills"] + doc["between_call_kills"]
    doc["all_identical"] = bool(runs) and all(r["identical"] is True for r in runs)
    doc["scheduler_kills_bounded"] = all(r["outcome"] in ("raised", "completed") for r in sk)
    return doc


def _deciles(xs):
    """How many values fall in [0, 0.1), [0.1, 0.2), ... [0.9, 1]."""
    xs = [x for x in xs if x is not None]
    return [sum(min(int(x * 10), 9) == i for x in xs) for i in range(10)] if xs else None


def _stats(xs):
    import numpy as np

    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"min": float(np.min(xs)), "median": float(np.median(xs)), "max": float(np.max(xs))}


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        return _child(argv[1])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--between-kills", type=int, default=10,
                   help="more worker kills, each right after a randomly chosen engine call (default 10)")
    p.add_argument("--scheduler-kills", type=int, default=3)
    p.add_argument("--rows", type=int, default=60_000)
    p.add_argument("--chunk-rows", type=int, default=5_000)
    p.add_argument("--n-basis", type=int, default=60)
    p.add_argument("--candidates", type=int, default=59)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--controls", type=int, default=2, help="fits without faults after the reference (default 2)")
    p.add_argument("--fit-timeout", type=float, default=180.0)
    p.add_argument("--workdir", default=None, help="keep logs and failed runs' records here (default: a temp dir)")
    p.add_argument("--kmp-dask-rev", default="HEAD",
                   help="git revision of kmp_dask/ to run (extracted into the work directory and put first on "
                        "PYTHONPATH of the driver, scheduler and workers, so files edited during the run change "
                        "nothing); 'worktree': the kmp_dask this Python imports (default HEAD)")
    p.add_argument("--quick", action="store_true", help="3 + 2 kills, 1 scheduler kill, 20,000 rows, 30 atoms")
    H.add_common_args(p, NAME, plots=False, threads=False)
    args = p.parse_args(argv)
    H.set_threads(1)
    if args.quick:
        args.kills, args.between_kills, args.scheduler_kills, args.rows, args.n_basis = 3, 2, 1, 20_000, 30
    out = H.output_path(NAME, args.out, args.quick)
    t0 = time.perf_counter()
    workdir, tmp = H.work_directory(args.workdir, "kmp_dask_random_kills_")
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # clean up clusters and drivers on kill
    H.log(f"work directory {workdir}")
    source = {"rev": args.kmp_dask_rev}
    if args.kmp_dask_rev != "worktree":
        source["commit"] = subprocess.run(["git", "rev-parse", args.kmp_dask_rev], cwd=H.ROOT, check=True,
                                          capture_output=True, text=True).stdout.strip()
        src = workdir / "kmp_dask_src"
        src.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", source["commit"], "kmp_dask"], cwd=H.ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        sys.path.insert(0, str(src))
        os.environ["PYTHONPATH"] = os.pathsep.join([str(src)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        H.log(f"kmp_dask from commit {source['commit'][:10]} ({args.kmp_dask_rev}), extracted to {src}")
    doc = run_random_kills(workdir, kills=args.kills, between_kills=args.between_kills,
                           scheduler_kills=args.scheduler_kills, rows=args.rows,
                           chunk_rows=args.chunk_rows, n_basis=args.n_basis, candidates=args.candidates,
                           workers=args.workers, seed=args.seed, fit_timeout=args.fit_timeout,
                           controls=args.controls)
    doc["kmp_dask_source"] = source
    doc["environment"] = H.environment()
    for key, c in doc["counts"].items():
        if key.startswith("worker"):
            H.log(f"{key}: {c['identical']} identical, {c['different']} different, {c['failed']} failed of {c['runs']}")
    H.log(f"scheduler kills: {doc['counts']['scheduler_kills']}")
    H.finish(doc, out, t0)
    if tmp is not None and doc["all_identical"] and doc["scheduler_kills_bounded"]:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if doc["all_identical"] and doc["scheduler_kills_bounded"] else 1


if __name__ == "__main__":
    sys.exit(main())
