#!/usr/bin/env python
"""Is the width, not the size, what ``KMPClassifier()`` misses where it is short of the SVC?

Two measurements (one BLAS thread, in process; a shared 2-core machine: ``uptime`` at the start
and the end, seconds compare within a row):

- ``--check-sets`` (default wdbc, vowel, sonar: acceptance sets, a diagnosis only — nothing is
  chosen from it): ``KMPClassifier()`` against ``KMPClassifierCV()`` (which searches the width),
  rows and split as kmp_auto_acceptance.py (``--max-rows`` 5,000); for the default fit also why it
  stopped, its width, the last residual norm and the best candidate's last score.
- ``--tune-sets`` (kmp_auto_study.py's tuning sets, rows as there): the default fit against the
  same fit with a dictionary of three widths, ``gamma="scale"`` × ``--factors`` (the pursuit picks
  among the widths atom by atom: one pursuit, three kernel blocks per candidate), test accuracy,
  size and CPU seconds. Rule, fixed before measuring: take the dictionary only if its mean test
  accuracy is at least 0.5 points above the default's in at most 1.5 × its CPU time.

Usage::

    python benchmarks/kmp_auto_width.py --out benchmarks/results/kmp_auto_width.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_width"


def _arguments(p):
    p.add_argument("--check-sets", default="wdbc,vowel,sonar")
    p.add_argument("--tune-sets", default="banana,pima,german,vehicle,australian,segment,titanic,twonorm")
    p.add_argument("--factors", default="0.25,1,4")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def _fit(est, Xtr, ytr, Xte, yte):
    return est, H.scored_fit(est, Xtr, ytr, Xte, yte)


def check_set(name):
    from kmp_auto_acceptance import load_cls

    from kmp_dask import KMPClassifier, KMPClassifierCV

    Xtr, Xte, ytr, yte = load_cls(name, 5000)
    est, auto = _fit(KMPClassifier(random_state=0), Xtr, ytr, Xte, yte)
    last = est.history_[-1]
    auto.update(stop_reason=est.stop_reason_, gamma=float(dict(est.kernel_.params)["gamma"]),
                standardized=bool(est.standardized_), last_residual_norm=last["residual_norm"],
                last_best_score=last["best_score"])
    cv, row = _fit(KMPClassifierCV(random_state=0), Xtr, ytr, Xte, yte)
    row.update(best_params=cv.best_params_)
    H.log(f"{name}: auto {auto['test']:.4f} ({auto['n_basis']}, {auto['stop_reason']}) cv {row['test']:.4f} "
          f"({row['n_basis']}, gamma {cv.best_params_['gamma']:.4g})")
    return {"n_train": len(Xtr), "auto": auto, "cv": row}


def tune_set(name, factors):
    from kmp_auto_study import load

    from kmp_dask import KMPClassifier
    from kmp_dask.estimators import _kmp

    Xtr, Xte, ytr, yte = load(name, 3000, False)
    _, one = _fit(KMPClassifier(random_state=0), Xtr, ytr, Xte, yte)
    resolve = _kmp.resolve_gamma
    _kmp.resolve_gamma = lambda *a, **k: [g * f for g in resolve(*a, **k) for f in factors]
    try:
        _, multi = _fit(KMPClassifier(random_state=0), Xtr, ytr, Xte, yte)
    finally:
        _kmp.resolve_gamma = resolve
    H.log(f"{name}: one width {one['test']:.4f} ({one['n_basis']}), three {multi['test']:.4f} ({multi['n_basis']})")
    return {"n_train": len(Xtr), "one_width": one, "three_widths": multi}


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    factors = [float(f) for f in args.factors.split(",")]
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args), "uptime_start": H.uptime(),
              "protocol": __doc__.split("Usage::")[0].strip(), "check": {}, "tune": {}}
    for name in [s for s in args.check_sets.split(",") if s]:
        result["check"][name] = check_set(name)
    for name in [s for s in args.tune_sets.split(",") if s]:
        result["tune"][name] = tune_set(name, factors)
    if result["tune"]:
        rows = result["tune"].values()
        mean = {k: 100 * float(np.mean([r[k]["test"] for r in rows])) for k in ("one_width", "three_widths")}
        cpu = {k: float(sum(r[k]["cpu_seconds"] for r in rows)) for k in ("one_width", "three_widths")}
        result["summary"] = {"mean_test_points": mean, "summed_cpu_seconds": cpu,
                             "take_three_widths": mean["three_widths"] >= mean["one_width"] + 0.5
                             and cpu["three_widths"] <= 1.5 * cpu["one_width"]}
    result["uptime_end"] = H.uptime()
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
