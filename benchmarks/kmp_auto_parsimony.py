#!/usr/bin/env python
"""``n_basis="auto"``: keep the smallest size within a share of a standard error of the best held-out score.

Chooses ``AUTO_SE_SHARE`` (kmp_dask/estimators/_kmp.py) on the tuning sets of kmp_auto_study.py
(banana, pima, german, vehicle, australian, segment, titanic, twonorm; regression tasks made from
magic and texture). Never loads the acceptance sets (ring, phoneme, spambase, wdbc, vowel and the
``--extra`` sets of kmp_auto_acceptance.py): it refuses them.

Protocol, per set (one BLAS thread, in process; a shared 2-core machine: ``uptime`` is recorded
at the start and the end, and seconds compare within a set):

- Rows and split as kmp_auto_study.py (``--max-rows`` 3,000, a seeded 75/25 split).
- For each seed in ``--seeds``: ONE pursuit with the defaults (``validation_fraction`` 0.1 by a
  hash of the row index, the held-out −MSE on a classifier's ±1 targets deciding) but no patience,
  grown to ``min(n_train, --cap)`` atoms (kmp_auto_study.py's ``one_path``): the held-out score and
  its standard error (the held-out rows' spread, ``val_ses_``) at every size, the seconds to every
  size, and the test score of EVERY prefix size (the fit's own k-atom model).
- Offline, for each share f in ``SHARES`` and patience in ``PATIENCES``: where the default rule with
  them stops on that path — at each measured size the kept size is the smallest whose held-out
  score is at least ``best − f · SE(best)`` (:func:`within_se`, the cross-validation's "half_se" /
  "1se" rule on one split: ``KMPClassifierCV``'s ``one_standard_error`` takes the SE from the
  folds, this one from the held-out rows' spread), and the growth stops once
  ``max(min_atoms, ⌈share · k⌉)`` atoms have passed since the kept size k — the kept size, its
  test score and the seconds to the stop.
- Reference: ``make_pipeline(StandardScaler(), SVC())`` (``SVR()``): test score and support vectors.

Decision rules, each fixed before the run it decides:

1. ``chosen_share`` (the first run: shares 0, 0.25, 0.5, 1; patiences (20, 0.5), (20, 0.25), (10, 0.5)):
   with the patience kept at the default (20, 0.5), the largest share f whose mean test score over
   the sets and seeds (accuracy points; regression R² × 100) is within ``RULE["mean_points"]`` of
   f = 0's and whose per-set mean (over the seeds) is nowhere more than ``RULE["worst_set_points"]``
   below f = 0's. It chose f = 0: every share above 0 lost 0.9 points or more of mean test score.
2. ``chosen_config`` (the second run, the wider grid below, fixed after the first run and before
   the second): among all (share, patience), those whose mean test score is within
   ``RULE_CONFIG["mean_points"]`` of the best mean and whose per-set means are nowhere more than
   ``RULE_CONFIG["worst_set_points"]`` below the best-mean configuration's; of them the one with the
   smallest summed seconds to its stop (the acceptance's fit-time target is the one missed most).

Usage::

    python benchmarks/kmp_auto_parsimony.py --out benchmarks/results/kmp_auto_parsimony.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_parsimony"
SETS = "banana,pima,german,vehicle,australian,segment,titanic,twonorm"
REG_SETS = "magic,texture"
SHARES = [0.0, 0.1, 0.25, 0.5, 1.0]
PATIENCES = [(20, 0.5), (20, 0.25), (20, 0.1), (10, 0.5), (10, 0.25), (30, 0.25), (40, 0.25)]
DEFAULT_PATIENCE = (20, 0.5)
RULE = {"mean_points": 0.3, "worst_set_points": 1.5}
RULE_CONFIG = {"mean_points": 0.15, "worst_set_points": 1.0}


def _arguments(p):
    p.add_argument("--sets", default=SETS)
    p.add_argument("--reg-sets", default=REG_SETS)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--cap", type=int, default=1000, help="the pursuit's size (or n_train when fewer)")
    p.add_argument("--max-rows", type=int, default=3000)


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def within_se(scores, ses, share: float) -> int:
    """The index of the smallest size (scores in increasing size order, higher is better) whose
    score is at least ``best − share · SE(best)``, the best the first maximum; ``share`` 0: the best."""
    scores = np.asarray(scores, dtype=np.float64)
    best = int(np.argmax(scores))
    if not share:
        return best
    return int(np.flatnonzero(scores >= scores[best] - float(share) * float(ses[best]))[0])


def stop_with_share(sizes, scores, ses, share, patience):
    """(kept index, stop index or None) of the default rule with ``share`` and ``patience`` on a path."""
    from kmp_dask.greedy._record import patience_atoms

    kept = 0
    for i in range(len(scores)):
        kept = within_se(scores[: i + 1], ses[: i + 1], share)
        if sizes[i] - sizes[kept] >= patience_atoms(patience, int(sizes[kept])):
            return kept, i
    return kept, None


def simulate(path, share, patience):
    sizes, scores, ses = (np.asarray(path[k]) for k in ("val_sizes", "val_scores", "val_ses"))
    kept, stop = stop_with_share(sizes, scores, ses, share, patience)
    k = int(sizes[kept])
    at = int(sizes[stop]) if stop is not None else int(sizes[-1])
    secs = path["cum_seconds"][max(0, min(at, len(path["cum_seconds"])) - 1)] if at else 0.0
    test = path["test_by_size"][min(k, len(path["test_by_size"]) - 1)]
    return {"size": k, "stopped_at": at, "capped": stop is None, "seconds": float(secs), "test": float(test)}


def run_set(name, args, regression):
    from kmp_auto_study import load, one_path, reference

    from kmp_dask import KMPClassifier, KMPRegressor

    data = load(name, args.max_rows, regression)
    if data is None:
        return {"skipped": "no regression target"}
    Xtr, Xte, ytr, yte = data
    cls = KMPRegressor if regression else KMPClassifier
    cap = min(len(Xtr), args.cap)
    out = {"task": "regression" if regression else "classification", "n_train": len(Xtr), "n_test": len(Xte),
           "cap": cap, "svc": reference(Xtr, ytr, Xte, yte, regression), "runs": {}}
    for s in [int(x) for x in args.seeds.split(",")]:
        path = one_path(lambda s=s: cls(n_iter_no_change=None, random_state=s), Xtr, ytr, Xte, yte, cap)
        sims = {f"f{f:g} p{p[0]}/{p[1]:g}": simulate(path, f, p) for f in SHARES for p in PATIENCES}
        out["runs"][f"s{s}"] = {"seed": s, "wall_seconds": path["wall_seconds"], "val_sizes": path["val_sizes"],
                                "val_scores": path["val_scores"], "val_ses": path["val_ses"],
                                "test_by_size": path["test_by_size"], "cum_seconds": path["cum_seconds"],
                                "simulated": sims}
        H.log(f"{name} s={s}: " + ", ".join(f"{k}: {r['size']}/{r['stopped_at']} ({100 * r['test']:.2f})"
                                            for k, r in sims.items() if k.endswith("p20/0.5")))
    return out


def summarise(sets):
    table = {}
    for set_name, row in sets.items():
        for run in row.get("runs", {}).values():
            for key, r in run["simulated"].items():
                t = table.setdefault(key, {"tests": [], "seconds": 0.0, "sizes": 0, "ratios": [], "per_set": {}})
                t["tests"].append(100 * r["test"])
                t["per_set"].setdefault(set_name, []).append(100 * r["test"])
                t["seconds"] += r["seconds"]
                t["sizes"] += r["size"]
                t["ratios"].append(r["size"] / max(1, row["svc"]["n_support_vectors"]))
    summary = {k: {"mean_test_points": float(np.mean(t["tests"])), "summed_seconds": t["seconds"],
                   "summed_sizes": t["sizes"], "largest_size_ratio_to_svs": float(np.max(t["ratios"])),
                   "per_set_mean_test": {n: float(np.mean(v)) for n, v in t["per_set"].items()}}
               for k, t in table.items()}
    return {"by_config": summary, "chosen_share": _choose(summary), "rule": RULE,
            "chosen_config": _choose_config(summary), "rule_config": RULE_CONFIG}


def _choose_config(summary):
    best = max(summary, key=lambda k: summary[k]["mean_test_points"])
    ref = summary[best]
    near = [k for k, s in summary.items()
            if s["mean_test_points"] >= ref["mean_test_points"] - RULE_CONFIG["mean_points"]
            and all(v >= ref["per_set_mean_test"][n] - RULE_CONFIG["worst_set_points"]
                    for n, v in s["per_set_mean_test"].items())]
    return min(near, key=lambda k: summary[k]["summed_seconds"])


def _choose(summary):
    pat = f"p{DEFAULT_PATIENCE[0]}/{DEFAULT_PATIENCE[1]:g}"
    base = summary.get(f"f0 {pat}")
    if base is None:
        return None
    ok = [f for f in SHARES if f"f{f:g} {pat}" in summary and _passes(summary[f"f{f:g} {pat}"], base)]
    return max(ok) if ok else 0.0


def _passes(s, base):
    if s["mean_test_points"] < base["mean_test_points"] - RULE["mean_points"]:
        return False
    return all(v >= base["per_set_mean_test"][n] - RULE["worst_set_points"] for n, v in s["per_set_mean_test"].items())


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args), "uptime_start": H.uptime(),
              "protocol": __doc__.split("Usage::")[0].strip(), "shares": SHARES, "patiences": PATIENCES, "sets": {}}
    for regression, names in ((False, args.sets), (True, args.reg_sets)):
        for name in [s for s in names.split(",") if s]:
            result["sets"][f"{name}_regression" if regression else name] = run_set(name, args, regression)
            result["summary"] = summarise(result["sets"])
            H.write_json(out, result)
    result["uptime_end"] = H.uptime()
    H.log(f"chosen share: {result['summary']['chosen_share']}; chosen config: {result['summary']['chosen_config']}")
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
