"""How long does ``evaluate`` take on fresh dask workers, the first, second and third time
(docs/engine.md, "A cold worker's first evaluate")?

What is measured
----------------
A KMPClassifier (25 basis functions, 54 features, 7 classes: pipeline 1's ``--small`` model) is
fitted in process on 6,000 generated rows and saved; ``kmp_dask.evaluation.evaluate`` scores it
on a 2,000-row store (one row chunk) three times in a row on a **fresh** cluster of 2 worker
processes with 1 thread each, in a child process whose ``PYTHONPATH`` is the code under test:

* ``local``: an embedded ``LocalCluster`` (scheduler in the child process, the CLI's
  ``--scheduler local``);
* ``separate``: ``dask scheduler`` and ``dask worker --nworkers 2`` subprocesses on 127.0.0.1
  (the scheduler in a process of its own, as ``large_run_cli.py`` and the cluster/ scripts run it).

Before the evaluations each child times ``client.gather(client.map(inc, range(4)))`` on the same
fresh workers (``trivial``: the cluster is up and answering; nothing of kmp_dask runs), and after
them it records which processes imported scikit-learn. Every code (``--before DIR``: another
checkout, e.g. ``git archive main``; and this checkout) runs ``--repeats`` fresh clusters per
mode, interleaved, so both see the same machine load; the JSON gives each run, the medians, the
ratios ``evaluate_k / trivial`` of each run and ``after / before`` of the medians. The metrics
of every evaluation are hashed: all must be equal (before, after, first, third).

Usage: ``python benchmarks/cold_evaluate.py [--before DIR] [--repeats 3] [--modes local,separate] [--quick]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "cold_evaluate"
PHASES = ("trivial", "evaluate_1", "evaluate_2", "evaluate_3")


def _args(p):
    p.add_argument("--before", default=None, help="a checkout of the code before the change (its root directory)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--modes", default="local,separate")
    p.add_argument("--workdir", default=None)
    p.add_argument("--quick", action="store_true", help="one repeat, local mode only")
    p.add_argument("--child", nargs=3, metavar=("MODE", "MODEL", "STORE"), help=argparse.SUPPRESS)


def _inc(x):
    return x + 1


def _imported_sklearn():
    return "sklearn" in sys.modules


def _measure(client, model, store) -> dict:
    """The child's timings on ``client``'s fresh workers."""
    from kmp_dask.evaluation import evaluate

    out, hashes = {}, []
    t0 = time.perf_counter()
    client.gather(client.map(_inc, range(4)))
    out["trivial"] = time.perf_counter() - t0
    for k in (1, 2, 3):
        t0 = time.perf_counter()
        metrics = evaluate(model, store, client=client)
        out[f"evaluate_{k}"] = time.perf_counter() - t0
        hashes.append(hashlib.sha256(json.dumps(metrics, sort_keys=True).encode()).hexdigest()[:16])
    out["metrics_sha"] = sorted(set(hashes))
    out["sklearn_imported"] = {"workers": sorted(client.run(_imported_sklearn).values()),
                               "scheduler": client.run_on_scheduler(_imported_sklearn)}
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(mode, model_path, store_path) -> dict:
    import dask.array  # noqa: F401 - the driver's own imports are not what is measured
    from distributed import Client, LocalCluster

    from kmp_dask import load

    model = load(model_path)
    if mode == "local":
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
                Client(cl) as client:
            return _measure(client, model, store_path)
    exe = Path(sys.executable).parent / "dask"
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs = [subprocess.Popen([str(exe), "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                               "--dashboard-address", "127.0.0.1:0"],
                              stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen([str(exe), "worker", address, "--nthreads", "1", "--nworkers", "2",
                                       "--no-dashboard"], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            return _measure(client, model, store_path)
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=60)


def _prepare(workdir: Path):
    """The model (saved, open format) and the 2,000-row test store, made once by this checkout."""
    from kmp_dask import KMPClassifier, save
    from kmp_dask.datasets import make_classification_store

    train = make_classification_store(workdir / "train.zarr", 6000, random_state=0, overwrite=True)
    test = make_classification_store(workdir / "test.zarr", 2000, random_state=0, start_row=6000, overwrite=True)
    X, y = train.read_range(0, train.n_rows)
    model = KMPClassifier(n_basis=25, gamma=0.02, random_state=0).fit(X, y)
    save(model, workdir / "model", overwrite=True)
    return workdir / "model", test.url


def _run_child(code: Path, mode, model, store) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(model), str(store)], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"child ({code}, {mode}) exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(code=str(code), load_average=list(os.getloadavg()), child_seconds=time.perf_counter() - t0)
    return out


def _summary(runs) -> dict:
    import numpy as np

    med = {p: float(np.median([r[p] for r in runs])) for p in PHASES}
    ratios = {p: float(np.median([r[p] / r["trivial"] for r in runs])) for p in PHASES[1:]}
    return {"median_seconds": med, "median_ratio_to_trivial": ratios}


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return None
    workdir, _ = H.work_directory(args.workdir, "kmp_dask_cold_evaluate_")
    model, store = _prepare(workdir)
    codes = {"after": H.ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    modes = ["local"] if args.quick else [m for m in args.modes.split(",") if m]
    repeats = 1 if args.quick else args.repeats
    out = H.output_path(NAME, args.out, quick=args.quick)
    t0 = time.perf_counter()
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args),
              "protocol": __doc__.split("Usage:")[0].strip(), "modes": {}}
    for mode in modes:
        runs = {name: [] for name in codes}
        for i in range(repeats):
            for name, code in sorted(codes.items()):  # interleaved: both codes see the same load
                r = _run_child(code, mode, model, store)
                runs[name].append(r)
                H.log(f"{mode} {name} #{i + 1}: " + ", ".join(f"{p} {r[p]:.2f}s" for p in PHASES))
        doc = {name: {"runs": rs, **_summary(rs)} for name, rs in runs.items()}
        if "before" in doc:
            b, a = doc["before"]["median_seconds"], doc["after"]["median_seconds"]
            doc["after_over_before"] = {p: a[p] / b[p] for p in PHASES}
        doc["metrics_equal"] = len({s for rs in runs.values() for r in rs for s in r["metrics_sha"]}) == 1
        result["modes"][mode] = doc
        H.write_json(out, result)
    H.finish(result, out, t0)
    return result


if __name__ == "__main__":
    main()
