#!/usr/bin/env python
"""How close can a KMP model with at most 1/3 of the tuned SVC's support vectors get?

The target asks ``KMPClassifierCV()`` for test accuracy within 1.5 points of an expert-tuned SVC *and*
at most 1/3 of its support vectors. This script measures the best any KMP model of that size reaches
on a set's test split — an upper bound of what any choice of (γ, size) can give, a diagnosis and not
a tuning: nothing here sets a default (the acceptance sets are never used for that), and choosing
by the test split is exactly what a real search cannot do.

Protocol: keel_cv.py's split and its SVC numbers (``benchmarks/results/keel_cv.json``: test accuracy,
support vectors); the features standardised (``StandardScaler`` on the training rows, so γ is a
multiple of ``scale_gamma`` = 1/d); for each γ factor, ``KMPClassifier(gamma=factor/d,
n_basis=⌊#SV/3⌋, random_state=0)`` (squared loss, backfitting, stochastic candidates: the estimator
behind ``KMPClassifierCV``), and the test accuracy of every prefix (``staged_predict``). Reported
per set: per width the accuracy at the cap and the best over sizes ≤ cap; overall the best (width,
size) and its gap to the SVC in points.

Usage::

    python benchmarks/kmp_sparsity_limit.py --sets phoneme,spambase
    python benchmarks/kmp_sparsity_limit.py --sets phoneme,spambase,vowel --share 5   # the plain-default target
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_sparsity_limit"
FACTORS = "0.0625,0.25,1,4,8,16,32,64"


def _arguments(p):
    p.add_argument("--sets", default="phoneme,spambase", help="comma-separated keel_cv.py sets")
    p.add_argument("--factors", default=FACTORS, help="γ as multiples of 1/d on standardised features")
    p.add_argument("--share", type=int, default=3, help="the cap: ⌊#SV / share⌋ atoms (3: the CV target; 5: the "
                   "plain-default target, KMPClassifier(n_basis=#SV/5) within 3 points)")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402


def run_set(name, factors, svc, share):
    from keel_cv import load_split
    from sklearn.preprocessing import StandardScaler

    from kmp_dask import KMPClassifier

    Xtr, Xte, ytr, yte = load_split(name)
    scaler = StandardScaler().fit(Xtr)
    Ztr, Zte = scaler.transform(Xtr), scaler.transform(Xte)
    cap = int(svc["n_support_vectors"]) // share
    widths = {}
    for f in factors:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = KMPClassifier(gamma=f / Ztr.shape[1], n_basis=cap, random_state=0).fit(Ztr, ytr)
        acc = [float(np.mean(p == yte)) for p in est.staged_predict(Zte)]
        k = int(np.argmax(acc))
        widths[str(f)] = {"atoms": len(acc), "accuracy_at_cap": acc[-1], "best_accuracy": acc[k], "best_size": k + 1,
                          "seconds": time.perf_counter() - t0}
        H.log(f"{name} γ={f}/d: {len(acc)} atoms, at cap {acc[-1]:.4f}, best {acc[k]:.4f} at {k + 1}")
    best_f = max(widths, key=lambda f: widths[f]["best_accuracy"])
    best = widths[best_f]
    return {"svc_accuracy": svc["accuracy"], "svc_support_vectors": svc["n_support_vectors"], "cap": cap,
            "widths": widths, "best_width_factor": float(best_f), "best_size": best["best_size"],
            "best_accuracy": best["best_accuracy"],
            "best_gap_points": 100 * (best["best_accuracy"] - svc["accuracy"]),
            "within_1.5_points_possible": bool(100 * (svc["accuracy"] - best["best_accuracy"]) <= 1.5),
            "within_3_points_possible": bool(100 * (svc["accuracy"] - best["best_accuracy"]) <= 3.0)}


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME if args.share == 3 else f"{NAME}_share{args.share}", args.out, quick=args.quick)
    keel = json.loads((Path(__file__).resolve().parent / "results" / "keel_cv.json").read_text())
    factors = [float(f) for f in args.factors.split(",")]
    result = {"environment": H.environment(), "protocol": __doc__, "factors": factors, "share": args.share,
              "svc_from": keel["environment"].get("git_commit"), "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        result["sets"][name] = run_set(name, factors, keel["sets"][name]["svc"], args.share)
        H.write_json(out, result)
        r = result["sets"][name]
        H.log(f"{name}: best {r['best_accuracy']:.4f} (γ={r['best_width_factor']}/d, {r['best_size']} atoms ≤ "
              f"{r['cap']}) vs SVC {r['svc_accuracy']:.4f}: {r['best_gap_points']:+.2f} points")
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
