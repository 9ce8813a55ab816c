"""Driver kills: the fitting process SIGKILLed at random moments, resumed from its checkpoint.

Question (acceptance): a driver killed at any moment of a fit — while importing, before
its first checkpoint, between checkpoints, while writing one, after the fit while saving the model —
and restarted with ``resume=True`` until it completes (it may be killed again on the way): is the
saved model identical, every array bit for bit, to an uninterrupted fit's? For every family whose
``fit`` accepts ``checkpoint=`` (detected with :func:`inspect.signature`; the others are reported
"not supported").

Protocol
--------
* One synthetic zarr store (``make_classification_store``: ``--rows`` rows × 10 float32 features,
  2 classes, ``random_state=1``, written chunk by chunk in ``--chunk-rows`` chunks). The
  reduced-set family compresses a fixed source model (``KMPClassifier(n_basis=800,
  candidates=59, gamma=0.1, random_state=0)`` fitted once on the store, saved in the open format,
  loaded by each driver) with the store as its pool.
* The driver is this script with ``--child SPEC`` in its own process (session): it imports
  kmp_dask, builds the family's estimator (:data:`FAMILIES`), calls ``fit(store,
  checkpoint=DIR, checkpoint_every=k, resume=True)`` (``resume=True`` always: with no checkpoint in
  DIR the fit starts from scratch — the job a user re-runs after a crash), saves the model with
  ``kmp_dask.save`` and exits. It prints time-stamped markers (imported / fit started / fit
  returned / saved) and writes a small JSON record (the checkpoint header it resumed from).
  Client ``"sync"`` (in-process engine) for most runs; ``--embedded-runs`` more per family with
  ``client="embedded"`` (a process LocalCluster inside the driver).
* Reference: one uninterrupted driver without checkpoint (``--no-plain-reference``: skipped), and
  one uninterrupted driver with a checkpoint (control) — the two models must be identical. T, the
  window kills are drawn in, is the median wall time (process start to exit, imports included) of
  the family's complete uninterrupted drivers with a checkpoint: the control's at first, then also
  every driver that exited before its first kill (so T follows the load of a shared machine).
  Embedded runs are compared with the same (sync) reference; an embedded control measures their
  T.
* A run: start the driver in a fresh checkpoint directory; SIGKILL it at a time drawn uniformly
  in [0, T) after the process started ("any"), or uniformly in [t_c, T) where t_c is when the
  checkpoint file first appeared ("after_checkpoint"; each run draws its mode with probability ½).
  If the driver has already exited at that time nothing was killed: the run is discarded and
  redrawn (counted as ``redrawn``). Otherwise restart the driver (``resume=True``); each restart is
  killed again with probability ``--rekill`` (at a time uniform in [0, T), counted only if the
  driver was still running) up to ``--max-kills`` kills per run; then run to completion. The driver
  is killed with ``SIGKILL`` on its pid; the processes it started (an embedded cluster's nannies and
  workers, listed before the kill) are SIGKILLed right after, so nothing of the killed job lives on.
* Identity: the saved model directories are compared — every ``arrays/*.npy`` referenced by
  ``model.json`` (dtype, shape, bytes) and every other value of ``model.json`` exactly, except
  wall-clock fields (a key containing ``seconds`` or ``time``; ``created`` is outside the compared
  parts) and work counters (:data:`WORK_COUNTERS`: kernel evaluations, documented to include the
  partitions' rebuild after a resume), whose differences are listed per run. A difference between
  the plain reference and the control (checkpointing changed the model) is reported as such.
* Runs are named ``<client>_run<i>_<m>``: the i-th run of that family and client, m the number of
  first kills redrawn before it (listed under ``redrawn``).
* Recorded per kill: family, client, the kill time (seconds after the process start, fraction of
  T), the phase the driver was in (``startup``: importing / building; ``fit``; ``saving``;
  ``exiting``), whether a checkpoint existed and its iteration / completeness (what the next
  process resumes from); per run: number of kills, processes, the iteration each restart resumed
  from, identical or not (with the differing paths), wall time.
* The code under test is one commit (``--kmp-dask-rev``, default HEAD): ``kmp_dask/`` of that
  commit is extracted into the work directory and put first on ``PYTHONPATH`` of the harness and
  the drivers, so files edited in the working tree during the run change nothing
  (``worktree``: the kmp_dask this Python imports).

Usage: ``python benchmarks/driver_kills.py [--runs 9] [--embedded-runs 1] [--families kmp,skmp,...]
[--rekill 0.35] [--seed 0] [--kmp-dask-rev HEAD]``; ``--quick``: KMP and stochastic KMP, 2 runs
each, no embedded runs, JSON in $TMPDIR. Results: ``benchmarks/results/driver_kills.json``.
``tests/parallel/test_driver_kills.py`` runs :func:`run_driver_kills` with a few kills of KMP on
the working tree.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _harness as H  # noqa: E402

NAME = "driver_kills"

__all__ = ["FAMILIES", "GROUPS", "family_support", "make_store", "run_driver", "compare_models",
           "run_driver_kills", "summarize", "main"]

#: family → estimator (class in kmp_dask, constructor parameters), checkpoint_every, how fit is called
FAMILIES = {
    "kmp": {"label": "KMP, backfitting, exhaustive candidates", "class": "KMPClassifier",
            "params": {"n_basis": 30, "candidates": "all", "fit_mode": "backfit", "gamma": 0.1,
                       "random_state": 0}, "every": 3},
    "skmp": {"label": "stochastic KMP, candidates='auto' (59 per step)", "class": "KMPClassifier",
             "params": {"n_basis": 400, "candidates": "auto", "gamma": 0.1, "random_state": 0}, "every": 25},
    "reduced": {"label": "ReducedSetCompressor of an 800-atom KMP model over the store pool",
                "class": "ReducedSetCompressor", "params": {"n_vectors": 500, "random_state": 0}, "every": 25,
                "source": {"n_basis": 800, "candidates": 59, "gamma": 0.1, "random_state": 0}},
    "cvm": {"label": "CVMClassifier (core vector machine)", "class": "CVMClassifier",
            "params": {"gamma": 0.1, "random_state": 0}, "every": 25},
    "mmda": {"label": "MMDA, 2 features (CVMs on deflated kernels)", "class": "MMDA",
             "params": {"n_components": 2, "eps": 1e-3, "gamma": 0.1, "random_state": 0}, "every": 25},
    "kpca": {"label": "SparseKernelPCA, 300 components, candidates='auto'", "class": "SparseKernelPCA",
             "params": {"n_components": 300, "max_components": 300, "candidates": "auto", "gamma": 0.1,
                        "random_state": 0}, "every": 25},
}
#: the five families of the issue's acceptance (CVM and MMDA are one)
GROUPS = {"kmp": "KMP", "skmp": "stochastic KMP", "reduced": "reduced-set compression", "cvm": "CVM / MMDA",
          "mmda": "CVM / MMDA", "kpca": "sparse KPCA"}
SOURCE_MODEL = "source.model"
#: keys of model.json holding wall-clock measurements (never compared)
CLOCK_KEYS = ("seconds", "time")
#: keys of model.json counting the work a fit did, documented to include the work of rebuilding the
#: partitions after a resume (greedy/_cvm.py: "kernel_evaluations counts the rebuilt columns too"):
#: compared and reported, but not part of the model's identity
WORK_COUNTERS = ("kernel_evaluations", "training_kernel_evaluations_")
CHILD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: the script the drivers run (``main`` points it at a copy in the work directory, so edits of this
#: file during a run change nothing)
CHILD_SCRIPT = Path(__file__).resolve()


# --------------------------------------------------------------------------------------------
# Families: which fits accept a checkpoint
# --------------------------------------------------------------------------------------------
def _estimator_class(name):
    import kmp_dask

    return getattr(kmp_dask, FAMILIES[name]["class"])


def family_support(name) -> dict:
    """``{"supported": bool, "fit_parameters": [...]}``: does the family's ``fit`` take ``checkpoint``?"""
    params = inspect.signature(_estimator_class(name).fit).parameters
    ok = "checkpoint" in params
    out = {"supported": ok, "class": FAMILIES[name]["class"],
           "checkpoint_parameters": [p for p in ("checkpoint", "checkpoint_every", "resume") if p in params]}
    if not ok:
        out["reason"] = f"{FAMILIES[name]['class']}.fit has no checkpoint parameter (not supported yet)"
    return out


def make_store(path, n_rows, chunk_rows):
    from kmp_dask.datasets import make_classification_store

    return make_classification_store(path, n_rows, n_features=10, n_classes=2, random_state=1,
                                     chunk_rows=chunk_rows, overwrite=True)


def make_source_model(workdir, store):
    """The model the reduced-set family compresses, fitted once and saved in the open format."""
    from kmp_dask import KMPClassifier, save

    path = Path(workdir) / SOURCE_MODEL
    if not path.exists():
        src = KMPClassifier(client="sync", **FAMILIES["reduced"]["source"]).fit(str(store))
        save(src, path)
    return path


# --------------------------------------------------------------------------------------------
# The driver (a child process)
# --------------------------------------------------------------------------------------------
def _mark(tag):
    print(f"{tag} {time.time()!r}", flush=True)


def _checkpoint_state(directory):
    """What a checkpoint directory holds now: files, and the header of a kmp_dask checkpoint
    (iteration, complete) if it has one."""
    d = Path(directory)
    files = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    out = {"files": files, "exists": any(not f.endswith(".tmp") for f in files)}
    try:
        from kmp_dask.greedy._checkpoint import checkpoint_info

        info = checkpoint_info(d) if d.is_dir() else None
    except Exception as exc:  # a checkpoint being replaced, or another family's format
        info = None
        out["header_error"] = f"{type(exc).__name__}: {exc}"
    if info is not None:
        out.update(iteration=info.get("iteration"), complete=info.get("complete"),
                   estimator=info.get("estimator"))
    parts = {}
    for f in files:  # a fit of several parts (CVM/MMDA problems) keeps a file per part, same header
        if f.endswith(".ckpt") and f != "state.ckpt":
            try:
                from kmp_dask.greedy._checkpoint import _read_header

                head = _read_header(d / f)[0]
                parts[f] = {"iteration": head.get("iteration"), "complete": head.get("complete")}
            except Exception as exc:
                parts[f] = {"error": f"{type(exc).__name__}: {exc}"}
    if parts:
        out["parts"] = parts
    return out


def _child(spec_json):
    """One driver: fit with checkpoint (resume=True), save the model, write a record."""
    spec = json.loads(spec_json)
    H.set_threads(1)
    rec = {"pid": os.getpid()}
    import kmp_dask
    from kmp_dask import load, save

    rec["kmp_dask_file"] = kmp_dask.__file__
    fam = FAMILIES[spec["family"]]
    est = getattr(kmp_dask, fam["class"])(client=spec["client"], **spec["params"])
    args = [spec["store"]]
    if spec["family"] == "reduced":
        args = [load(spec["source"]), spec["store"]]
    kw = {}
    if spec["checkpoint"] is not None:
        params = inspect.signature(type(est).fit).parameters
        kw = {"checkpoint": spec["checkpoint"], "resume": True}
        if "checkpoint_every" in params:
            kw["checkpoint_every"] = spec["every"]
        rec["resumed_from"] = _checkpoint_state(spec["checkpoint"])
    _mark("FIT")
    t0 = time.time()
    est.fit(*args, **kw)
    rec["fit_seconds"] = time.time() - t0
    _mark("FITTED")
    save(est, spec["model"], overwrite=True)
    _mark("SAVED")
    Path(spec["record"]).write_text(json.dumps(rec))
    _mark("EXIT")
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: the model and the record are written


def _descendants(pid):
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _kill_driver(proc):
    """SIGKILL the driver, then the processes it had started (an embedded cluster). Returns the
    kill time and how many of its processes were swept."""
    import psutil

    kids = _descendants(proc.pid)
    t = time.time()
    os.kill(proc.pid, signal.SIGKILL)
    swept = 0
    for k in kids:
        try:
            k.kill()
            swept += 1
        except psutil.Error:
            pass
    return t, swept


def run_driver(spec, *, kill_at=None, kill_after_checkpoint=False, expected=None, timeout=600.0):
    """Start one driver (``spec``: family, client, store, checkpoint, model, record, ...). With
    ``kill_at`` (seconds after the start) SIGKILL it then, unless it has exited; with
    ``kill_after_checkpoint``, ``kill_at`` is drawn by ``kill_at(t_c)`` once the checkpoint file
    first exists (t_c: seconds after the start). Returns a dict: ``status`` ("ok", "killed",
    "error", "hang"), ``wall_seconds``, ``markers`` (seconds after the start), ``kill`` (time,
    phase, checkpoint state at the kill), the driver's record, stderr tail on failure."""
    spec = dict(spec)
    env = {**os.environ, **CHILD_ENV}
    err_path = Path(spec["record"] + ".stderr")
    err = open(err_path, "w")
    for p in (Path(spec["record"]),):
        if p.exists():
            p.unlink()
    t_start = time.time()
    proc = subprocess.Popen([sys.executable, str(CHILD_SCRIPT), "--child", json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=err, text=True, env=env, start_new_session=True)
    markers = {}

    def reader():
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 2 and parts[0] in ("FIT", "FITTED", "SAVED", "EXIT"):
                markers[parts[0]] = float(parts[1]) - t_start

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    kill = None
    deadline = t_start + timeout
    if kill_at is not None:
        at = kill_at
        if kill_after_checkpoint:  # wait for the first checkpoint file, then draw in [t_c, T)
            ckpt = Path(spec["checkpoint"])
            while proc.poll() is None and time.time() < deadline:
                if ckpt.is_dir() and any(not f.name.endswith(".tmp") for f in ckpt.iterdir()):
                    break
                time.sleep(0.005)
            t_c = time.time() - t_start
            at = kill_at(t_c) if proc.poll() is None else None
            kill = {"checkpoint_appeared_after_seconds": t_c}
        if at is not None:
            while proc.poll() is None and time.time() < t_start + at:
                time.sleep(min(0.005, max(t_start + at - time.time(), 0)))
            landed = False
            if proc.poll() is None:
                t_kill, swept = _kill_driver(proc)
                proc.wait()
                th.join(timeout=10)
                landed = proc.returncode == -signal.SIGKILL  # else it had exited on its own just before
            if landed:
                phase = ("startup" if "FIT" not in markers else "fit" if "FITTED" not in markers
                         else "saving" if "SAVED" not in markers else "exiting")
                kill = {**(kill or {}), "drawn_seconds": at, "after_seconds": t_kill - t_start, "phase": phase,
                        "returncode": proc.returncode, "swept_processes": swept,
                        "checkpoint": _checkpoint_state(spec["checkpoint"]) if spec.get("checkpoint") else None,
                        "model_dir_existed": Path(spec["model"]).exists()}
            else:
                kill = None
    hang = False
    try:
        proc.wait(timeout=max(deadline - time.time(), 1.0))
    except subprocess.TimeoutExpired:
        hang = True
        _kill_driver(proc)
        proc.wait()
    wall = time.time() - t_start
    th.join(timeout=10)
    err.close()
    out = {"wall_seconds": wall, "markers": dict(markers), "returncode": proc.returncode}
    if kill is not None and "after_seconds" in kill:
        out.update(status="killed", kill=kill)
    elif hang:
        out.update(status="hang", error=f"no exit after {timeout:.0f} s (killed)")
    elif proc.returncode == 0 and Path(spec["record"]).exists():
        out.update(status="ok", record=json.loads(Path(spec["record"]).read_text()))
    else:
        out.update(status="error", error=f"driver exited with code {proc.returncode}")
    if out["status"] in ("error", "hang"):
        out["stderr_tail"] = err_path.read_text(errors="replace")[-3000:]
    return out


# --------------------------------------------------------------------------------------------
# Comparing two saved models
# --------------------------------------------------------------------------------------------
def _leaves(v, path, root, out):
    """Flatten an encoded model.json value into ``out`` (path → comparable value); arrays are
    replaced by (dtype, shape, bytes) of their .npy file."""
    import numpy as np

    if isinstance(v, list):
        for i, x in enumerate(v):
            _leaves(x, f"{path}[{i}]", root, out)
    elif isinstance(v, dict):
        kind = v.get("__kind__")
        if kind == "array":
            a = np.load(root / v["file"], allow_pickle=False)
            out[path] = ("array", a.dtype.str, a.shape, a.tobytes())
        elif kind == "dict":
            for k, x in v["items"]:
                _leaves(x, f"{path}[{json.dumps(k)}]", root, out)
        elif kind in ("tuple",):
            for i, x in enumerate(v["items"]):
                _leaves(x, f"{path}[{i}]", root, out)
        elif kind == "object":
            out[path + ".__class__"] = v["class"]
            _leaves(v["state"], path, root, out)
        elif kind is None:
            for k, x in v.items():
                _leaves(x, f"{path}.{k}", root, out)
        else:  # scalar, enum, objarray: compared as JSON
            out[path] = json.dumps(v, sort_keys=True)
    else:
        out[path] = json.dumps(v)


def _key(path):
    return path.rsplit(".", 1)[-1].rsplit("[", 1)[-1].strip('"]')


def _is_clock(path):
    return any(k in _key(path).lower() for k in CLOCK_KEYS)


def _flatten(model_dir):
    root = Path(model_dir)
    doc = json.loads((root / "model.json").read_text())
    out = {}
    for part in ("class", "params", "state", "dropped"):
        _leaves(doc.get(part), part, root, out)
    return out


def compare_models(a, b) -> dict:
    """Compare two saved models: ``identical`` (every array bit for bit, every other value
    exactly — wall-clock fields skipped, work counters (:data:`WORK_COUNTERS`) reported apart in
    ``work_counter_differences``), how many ``arrays`` and ``values`` were compared,
    ``clock_fields`` skipped, and up to 10 ``differences`` (paths)."""
    fa, fb = _flatten(a), _flatten(b)
    diffs, work, n_arr, n_val, clock = [], [], 0, 0, 0
    for path in sorted(set(fa) | set(fb)):
        va, vb = fa.get(path), fb.get(path)
        is_array = isinstance(va, tuple) or isinstance(vb, tuple)
        if _is_clock(path) and not is_array:
            clock += 1
            continue
        if not is_array and _key(path) in WORK_COUNTERS:
            if va != vb:
                work.append({"path": path, "a": va, "b": vb})
            continue
        if is_array:
            n_arr += 1
        else:
            n_val += 1
        if va != vb:
            diffs.append(path)
    return {"identical": not diffs, "arrays": n_arr, "values": n_val, "clock_fields": clock,
            "n_differences": len(diffs), "differences": diffs[:10], "work_counter_differences": work}


# --------------------------------------------------------------------------------------------
# The experiment
# --------------------------------------------------------------------------------------------
def _family(name, overrides=None):
    """The family's settings with ``overrides`` (``{"params": {...}, "every": k}``) applied."""
    fam = {**FAMILIES[name], "params": dict(FAMILIES[name]["params"])}
    o = (overrides or {}).get(name, {})
    fam["params"].update(o.get("params", {}))
    if "every" in o:
        fam["every"] = o["every"]
    return fam


def _spec(workdir, family, client, name, store, source, checkpoint=True, overrides=None):
    d = Path(workdir) / family / name
    d.mkdir(parents=True, exist_ok=True)
    fam = _family(family, overrides)
    return {"family": family, "params": fam["params"], "every": fam["every"], "client": client,
            "store": str(store), "source": str(source) if source else None,
            "checkpoint": str(d / "ckpt") if checkpoint else None, "model": str(d / "model"),
            "record": str(d / "record.json")}


def _ckpt_str(c):
    """The checkpoint at a kill, for the log: its iteration (and its parts' iterations)."""
    if not c or not c["exists"]:
        return "no ckpt"
    out = f"ckpt it {c.get('iteration')}" + (" complete" if c.get("complete") else "")
    if c.get("parts"):
        out += " parts " + ",".join(str(p.get("iteration")) + ("c" if p.get("complete") else "")
                                    for p in c["parts"].values())
    return out


def _kill_run(workdir, family, client, name, store, source, T, rng, *, rekill, max_kills, timeout, mode=None,
              overrides=None):
    """One run: a driver killed at a random moment, restarted (maybe killed again) until it
    completes. Returns ``(the run's record, the first driver's record)``; the run's record is None
    if the first kill missed (the driver had exited). ``mode``: "any", "after_checkpoint" or
    None (drawn, ½ each)."""
    spec = _spec(workdir, family, client, name, store, source, overrides=overrides)
    draw = rng.random()
    mode = mode or ("after_checkpoint" if draw < 0.5 else "any")
    u = rng.random()
    if mode == "any":
        first = run_driver(spec, kill_at=u * T, timeout=timeout)
    else:
        first = run_driver(spec, kill_at=lambda t_c: t_c + u * max(T - t_c, 0.0), kill_after_checkpoint=True,
                           timeout=timeout)
    if first["status"] != "killed":
        return None, first
    kills = [{"process": 0, "mode": mode, "drawn_uniform": u, **first["kill"],
              "fraction_of_T": first["kill"]["after_seconds"] / T}]
    processes = [first]
    status = None
    while True:
        k = len(processes)
        again = len(kills) < max_kills and rng.random() < rekill
        v = rng.random()
        rec = run_driver(spec, kill_at=v * T if again else None, timeout=timeout)
        processes.append(rec)
        if rec["status"] == "killed":
            kills.append({"process": k, "mode": "any (restart)", "drawn_uniform": v, **rec["kill"],
                          "fraction_of_T": rec["kill"]["after_seconds"] / T})
            continue
        status = rec["status"]
        break
    run = {"family": family, "group": GROUPS[family], "client": client, "run": name, "mode": mode,
           "n_kills": len(kills), "n_processes": len(processes), "kills": kills, "status": status,
           "resumed_from": [p.get("record", {}).get("resumed_from") for p in processes if p["status"] == "ok"],
           "wall_seconds": sum(p["wall_seconds"] for p in processes),
           "restart_wall_seconds": [p["wall_seconds"] for p in processes[1:]]}
    if status != "ok":
        run.update(identical=False, error=processes[-1].get("error"), stderr_tail=processes[-1].get("stderr_tail"))
    return run, first


def _reference(workdir, family, client, store, source, *, checkpoint, timeout, name, overrides=None):
    spec = _spec(workdir, family, client, name, store, source, checkpoint=checkpoint, overrides=overrides)
    rec = run_driver(spec, timeout=timeout)
    if rec["status"] != "ok":
        raise RuntimeError(f"{family} {name} fit ({client}) failed: {rec.get('error')}\n{rec.get('stderr_tail')}")
    return spec, rec


def run_driver_kills(workdir, *, families=tuple(FAMILIES), runs=9, embedded_runs=1, rows=4000, chunk_rows=500,
                     rekill=0.35, max_kills=3, seed=0, timeout=600.0, plain_reference=True, max_redraws=None,
                     keep=False, modes=None, overrides=None, log=H.log):
    """The whole experiment in ``workdir``; returns the result document (see :func:`summarize`).
    ``runs`` kill runs per family on ``client="sync"`` and ``embedded_runs`` on
    ``client="embedded"``; ``plain_reference``: also fit once without a checkpoint and require the
    same model; ``max_redraws`` (default ``3 + 2 runs``): per family and client, how many first kills may
    miss (driver already exited) before giving up; ``keep``: keep the model directories of
    identical runs; ``modes``: the first kill's mode of each run, cycled ("any",
    "after_checkpoint"; default: drawn); ``overrides``: ``{family: {"params": {...}, "every": k}}``."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    store = workdir / "data.zarr"
    t0 = time.perf_counter()
    make_store(store, rows, chunk_rows)
    log(f"store {rows} x 10 rows in chunks of {chunk_rows}: {time.perf_counter() - t0:.1f} s")
    doc = {"protocol": {"rows": rows, "features": 10, "classes": 2, "chunk_rows": chunk_rows,
                        "partitions": -(-rows // chunk_rows), "runs_per_family_sync": runs,
                        "runs_per_family_embedded": embedded_runs, "rekill_probability": rekill,
                        "max_kills_per_run": max_kills, "seed": seed, "driver_timeout_seconds": timeout,
                        "plain_reference": plain_reference,
                        "families": {f: {"label": FAMILIES[f]["label"], "class": FAMILIES[f]["class"],
                                         "params": _family(f, overrides)["params"],
                                         "checkpoint_every": _family(f, overrides)["every"],
                                         **({"source": FAMILIES[f]["source"]} if "source" in FAMILIES[f] else {})}
                                     for f in families},
                        "fit_call": "est.fit(store, checkpoint=DIR, checkpoint_every=k, resume=True) (reduced: "
                                    "est.fit(source_model, store, ...)); kmp_dask.save(est, MODEL, overwrite=True)"},
           "support": {}, "references": {}, "runs": [], "redrawn": [],
           "load_average_at_start": list(os.getloadavg())}
    source = None
    for fam in families:
        sup = family_support(fam)
        doc["support"][fam] = sup
        if not sup["supported"]:
            log(f"{fam}: {sup['reason']}")
            continue
        if fam == "reduced" and source is None:
            t = time.perf_counter()
            source = make_source_model(workdir, store)
            log(f"source model for the reduced-set family: {time.perf_counter() - t:.1f} s")
        clients = [("sync", runs)] + ([("embedded", embedded_runs)] if embedded_runs else [])
        ref_dir = None
        for client, n_runs in clients:
            refs = {}
            if client == "sync" and plain_reference:
                spec, rec = _reference(workdir, fam, client, store, source, checkpoint=False, timeout=timeout,
                                       name="reference_plain", overrides=overrides)
                refs["plain"] = (spec, rec)
                ref_dir = spec["model"]
            spec, rec = _reference(workdir, fam, client, store, source, checkpoint=True, timeout=timeout,
                                   name=f"control_{client}", overrides=overrides)
            if ref_dir is None:
                ref_dir = spec["model"]
            # T: the median wall time of this family's complete uninterrupted drivers with a checkpoint
            # (the control, then every driver whose first kill missed): it follows the machine's load
            durations = [rec["wall_seconds"]]
            T = rec["wall_seconds"]
            same = compare_models(spec["model"], ref_dir)
            entry = {"T_seconds_initial": T, "uninterrupted_wall_seconds": durations,
                     "control_fit_seconds": rec["record"]["fit_seconds"],
                     "control_markers": rec["markers"], "control_vs_reference": same,
                     "control_checkpoint": _checkpoint_state(spec["checkpoint"])}
            if "plain" in refs:
                entry["plain_wall_seconds"] = refs["plain"][1]["wall_seconds"]
                entry["plain_fit_seconds"] = refs["plain"][1]["record"]["fit_seconds"]
            doc["references"][f"{fam}/{client}"] = entry
            log(f"{fam} ({client}): T = {T:.2f} s (fit {rec['record']['fit_seconds']:.2f} s), control identical to "
                f"the reference: {same['identical']} ({same['arrays']} arrays, {same['values']} values)")
            if not same["identical"]:
                log(f"  differences: {same['differences']}")
            misses, i = 0, 0
            while i < n_runs:
                name = f"{client}_run{i:02d}_{misses}"
                mode = modes[len(doc["runs"]) % len(modes)] if modes else None
                run, first = _kill_run(workdir, fam, client, name, store, source, T, rng, rekill=rekill,
                                       max_kills=max_kills, timeout=timeout, mode=mode, overrides=overrides)
                if run is None:
                    misses += 1
                    doc["redrawn"].append({"family": fam, "client": client, "run": name, "status": first["status"],
                                           "wall_seconds": first["wall_seconds"], "error": first.get("error"),
                                           "stderr_tail": first.get("stderr_tail")})
                    log(f"  {name}: the driver exited before the kill ({first['status']}, "
                        f"{first['wall_seconds']:.2f} s); redrawn")
                    if first["status"] != "ok" or misses > (3 + 2 * n_runs if max_redraws is None else max_redraws):
                        raise RuntimeError(f"{fam} ({client}): {misses} first kills missed; last driver: "
                                           f"{first['status']} {first.get('error')}\n{first.get('stderr_tail')}")
                    durations.append(first["wall_seconds"])
                    T = statistics.median(durations)
                    shutil.rmtree(workdir / fam / name, ignore_errors=True)
                    continue
                run["T_seconds"] = T
                model = Path(workdir) / fam / name / "model"
                if run["status"] == "ok":
                    run["comparison"] = compare_models(model, ref_dir)
                    run["identical"] = run["comparison"]["identical"]
                doc["runs"].append(run)
                ks = ", ".join(f"{k['after_seconds']:.2f}s/{k['phase']}/{_ckpt_str(k['checkpoint'])}"
                               for k in run["kills"])
                log(f"  {fam} {client} run {i + 1}/{n_runs} ({run['mode']}): {run['n_kills']} kill(s) [{ks}] -> "
                    f"{run['status']}, identical={run['identical']}")
                if run["identical"] and not keep:
                    shutil.rmtree(workdir / fam / name, ignore_errors=True)
                i += 1
    doc["load_average_at_end"] = list(os.getloadavg())
    return summarize(doc)


def summarize(doc):
    """Counts: kills (total, per family and group, per phase, with / without a checkpoint),
    runs identical / different / failed, and whether every run ended with the identical model."""
    runs = doc["runs"]
    kills = [k for r in runs for k in r["kills"]]

    def count(rs):
        ks = [k for r in rs for k in r["kills"]]
        return {"runs": len(rs), "kills": len(ks),
                "identical": sum(r["identical"] is True for r in rs),
                "different": sum(r["status"] == "ok" and r["identical"] is False for r in rs),
                "failed": sum(r["status"] != "ok" for r in rs),
                "runs_killed_more_than_once": sum(r["n_kills"] > 1 for r in rs),
                "runs_with_work_counter_differences": sum(
                    bool(r.get("comparison", {}).get("work_counter_differences")) for r in rs),
                "kills_with_checkpoint": sum(bool(k["checkpoint"] and k["checkpoint"]["exists"]) for k in ks),
                "kills_without_checkpoint": sum(not (k["checkpoint"] and k["checkpoint"]["exists"]) for k in ks)}

    by_family = {f: count([r for r in runs if r["family"] == f]) for f in dict.fromkeys(r["family"] for r in runs)}
    by_group = {g: count([r for r in runs if r["group"] == g]) for g in dict.fromkeys(r["group"] for r in runs)}
    by_client = {c: count([r for r in runs if r["client"] == c]) for c in dict.fromkeys(r["client"] for r in runs)}
    phases = {}
    for k in kills:
        phases[k["phase"]] = phases.get(k["phase"], 0) + 1
    fr = [k["fraction_of_T"] for k in kills]
    doc["counts"] = {
        "total": count(runs), "by_family": by_family, "by_group": by_group, "by_client": by_client,
        "kills_by_phase": phases,
        "kills_by_mode": {m: sum(k["mode"] == m for k in kills) for m in dict.fromkeys(k["mode"] for k in kills)},
        "kill_fraction_of_T_deciles": [sum(min(int(x * 10), 9) == i for x in fr) for i in range(10)] if fr else None,
        "redrawn_first_kills": len(doc["redrawn"]),
        "families_not_supported": [f for f, s in doc["support"].items() if not s["supported"]],
    }
    doc["controls_identical"] = all(r["control_vs_reference"]["identical"] for r in doc["references"].values())
    doc["all_identical"] = bool(runs) and all(r["identical"] is True for r in runs) and doc["controls_identical"]
    return doc


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        return _child(argv[1])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {', '.join(FAMILIES)}")
    p.add_argument("--runs", type=int, default=9, help="kill runs per family on client='sync' (default 9)")
    p.add_argument("--embedded-runs", type=int, default=1,
                   help="kill runs per family on client='embedded' (a process cluster in the driver; default 1)")
    p.add_argument("--rows", type=int, default=4000)
    p.add_argument("--chunk-rows", type=int, default=500)
    p.add_argument("--rekill", type=float, default=0.35, help="probability that a restarted driver is killed again")
    p.add_argument("--max-kills", type=int, default=3, help="kills per run at most (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="a driver still running after this is a hang")
    p.add_argument("--workdir", default=None, help="keep logs and failed runs here (default: a temp dir)")
    p.add_argument("--kmp-dask-rev", default="HEAD",
                   help="git revision of kmp_dask/ to run (extracted into the work directory and put first on "
                        "PYTHONPATH of the harness and the drivers); 'worktree': the kmp_dask this Python imports")
    p.add_argument("--quick", action="store_true", help="kmp and skmp, 2 runs each, no embedded runs")
    H.add_common_args(p, NAME, plots=False, threads=False)
    args = p.parse_args(argv)
    H.set_threads(1)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        p.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    if args.quick:
        families, args.runs, args.embedded_runs = ["kmp", "skmp"], 2, 0
    out = H.output_path(NAME, args.out, args.quick)
    t0 = time.perf_counter()
    workdir, tmp = H.work_directory(args.workdir, "kmp_dask_driver_kills_")
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    H.log(f"work directory {workdir}")
    source = {"rev": args.kmp_dask_rev}
    if args.kmp_dask_rev != "worktree":
        source["commit"] = subprocess.run(["git", "rev-parse", args.kmp_dask_rev], cwd=H.ROOT, check=True,
                                          capture_output=True, text=True).stdout.strip()
        src = workdir / "kmp_dask_src"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", source["commit"], "kmp_dask"], cwd=H.ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        sys.path.insert(0, str(src))
        os.environ["PYTHONPATH"] = os.pathsep.join([str(src)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        H.log(f"kmp_dask from commit {source['commit'][:10]} ({args.kmp_dask_rev}), extracted to {src}")
    global CHILD_SCRIPT
    bench = workdir / "bench"
    bench.mkdir(exist_ok=True)
    for f in (Path(__file__).resolve(), HERE / "_harness.py"):
        shutil.copy2(f, bench / f.name)
    CHILD_SCRIPT = bench / Path(__file__).name
    try:
        doc = run_driver_kills(workdir, families=families, runs=args.runs, embedded_runs=args.embedded_runs,
                               rows=args.rows, chunk_rows=args.chunk_rows, rekill=args.rekill,
                               max_kills=args.max_kills, seed=args.seed, timeout=args.timeout)
    except Exception:
        traceback.print_exc()
        H.log(f"failed; work directory kept: {workdir}")
        return 1
    doc["kmp_dask_source"] = source
    doc["environment"] = H.environment()
    c = doc["counts"]
    for fam, fc in c["by_family"].items():
        H.log(f"{fam}: {fc['kills']} kills in {fc['runs']} runs, {fc['identical']} identical, "
              f"{fc['different']} different, {fc['failed']} failed")
    for fam in c["families_not_supported"]:
        H.log(f"{fam}: not supported yet ({doc['support'][fam]['reason']})")
    H.log(f"total: {c['total']['kills']} kills, {c['total']['identical']}/{c['total']['runs']} runs identical; "
          f"all identical: {doc['all_identical']}")
    H.finish(doc, out, t0)
    if tmp is not None and doc["all_identical"]:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if doc["all_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
