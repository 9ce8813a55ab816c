#!/usr/bin/env python
"""``n_basis="auto"``: keep the prefix of the best held-out size, or refit that size on all rows?

The tuning sets of kmp_auto_study.py only (never an acceptance set). Per set and seed (one BLAS
thread, in process, a shared loaded machine: seconds compare within a row):

- ``keep``: ``KMPClassifier(random_state=s)`` (``KMPRegressor`` for a regression task): the
  defaults — the prefix of size b chosen on the held-out 20 %, fitted on the other 80 %;
- ``refit``: the same, then ``KMPClassifier(n_basis=b, random_state=s)`` on all training rows
  (no held-out rows): time = both fits.

Recorded: test score of each, sizes, seconds. Rule fixed before measuring: the estimator refits iff
the mean test score over sets and seeds gains at least 0.3 points (R² × 100 for regression) and
the summed time grows by at most 1.5 ×.

Usage::

    python benchmarks/kmp_auto_refit.py --out benchmarks/results/kmp_auto_refit.json
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_refit"
RULE = {"min_gain_points": 0.3, "max_time_ratio": 1.5}


def _arguments(p):
    p.add_argument("--sets", default="banana,pima,german,vehicle,australian,segment,titanic,twonorm")
    p.add_argument("--reg-sets", default="magic,texture")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--max-rows", type=int, default=3000)


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def timed(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(X, y)
        return est, time.perf_counter() - t0


def run_set(name, regression, args):
    from kmp_auto_study import load

    from kmp_dask import KMPClassifier, KMPRegressor

    Xtr, Xte, ytr, yte = load(name, args.max_rows, regression)
    cls = KMPRegressor if regression else KMPClassifier
    out = {}
    for s in [int(x) for x in args.seeds.split(",")]:
        keep, t_keep = timed(cls(random_state=s), Xtr, ytr)
        refit, t_refit = timed(cls(n_basis=int(keep.n_basis_), random_state=s), Xtr, ytr)
        out[f"s{s}"] = {"size": int(keep.n_basis_), "keep_test": float(keep.score(Xte, yte)),
                        "refit_test": float(refit.score(Xte, yte)), "keep_seconds": t_keep,
                        "refit_seconds": t_keep + t_refit}
        H.log(f"{name} s={s}: {out[f's{s}']}")
    return out


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args),
              "protocol": __doc__.split("Usage::")[0].strip(), "sets": {}}
    for regression, names in ((False, args.sets), (True, args.reg_sets)):
        for name in [n for n in names.split(",") if n]:
            result["sets"][name + ("_regression" if regression else "")] = run_set(name, regression, args)
            runs = [r for v in result["sets"].values() for r in v.values()]
            gain = 100 * float(np.mean([r["refit_test"] - r["keep_test"] for r in runs]))
            ratio = sum(r["refit_seconds"] for r in runs) / sum(r["keep_seconds"] for r in runs)
            result["summary"] = {"mean_gain_points": gain, "time_ratio": ratio, "rule": RULE,
                                 "refit": gain >= RULE["min_gain_points"] and ratio <= RULE["max_time_ratio"]}
            H.write_json(out, result)
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
