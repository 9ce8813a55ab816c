#!/usr/bin/env python
"""A shorter patience for ``n_basis="auto"``? Read off recorded held-out paths, no new rule fitted.

The default patience ``(20, 0.5)`` grows ``max(20, ⌈b/2⌉)`` atoms past the best size ``b`` before it
stops: on the acceptance sets with large best sizes (spambase 500 → 751 atoms) that last stretch is
the most expensive part of the fit (every atom costs more than the one before). A patience stops on
the held-out path the pursuit records, so a shorter one's stop, kept size and model are read off the
default's path (the pursuit and its prefix models are the same up to the stop):

- tuning sets: the paths of ``kmp_auto_study.json`` (grown to 800 atoms; held-out share 0.1, the
  −MSE criterion, seeds 0 and 1), test score of every prefix recorded there;
- acceptance sets (``kmp_auto_acceptance.py``'s data, raw, 75/25 split): one default fit each, its
  held-out path (``val_sizes_``, ``val_scores_``) up to the default's stop, the kept prefix scored on
  the test rows with ``expansion_at``. A patience that would not stop before the default's stop is
  reported at the default's size.

Decision rule, fixed before measuring: a patience replaces ``(20, 0.5)`` only if its mean test score
on the tuning sets is not lower (beyond 0.05 points) and no acceptance set's test score drops.

Usage::

    python benchmarks/kmp_auto_patience.py --out benchmarks/results/kmp_auto_patience.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_patience"
PATIENCES = [(20, 0.5), (20, 0.25), (20, 0.1), (15, 0.25), (10, 0.25)]
CLS_SETS = "wdbc,vowel,phoneme,spambase,ring,ionosphere,sonar,saheart"
REG_SETS = "diabetes,satimage,penbased,bupa"


def _arguments(p):
    p.add_argument("--sets", default=CLS_SETS)
    p.add_argument("--reg-sets", default=REG_SETS)


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def tuning(patience):
    """Mean test points and summed seconds to the stop on kmp_auto_study.json's share-0.1 paths."""
    from kmp_auto_study import simulate

    study = json.loads((H.RESULTS / "kmp_auto_study.json").read_text())
    tests, secs = [], 0.0
    for s in study["sets"].values():
        for r in s["runs"].values():
            if r["fraction"] == 0.1:
                sim = simulate(r, patience, "loss")
                tests.append(100 * sim["test"])
                secs += sim["seconds"]
    return {"mean_test_points": float(np.mean(tests)), "summed_seconds": secs}


def acceptance_set(name, regression):
    """The default fit's path and, for each patience, the kept size, its stop and its test score."""
    from kmp_auto_acceptance import load_cls, load_reg
    from kmp_auto_study import stop_on_path
    from sklearn.metrics import r2_score

    from kmp_dask import KMPClassifier, KMPRegressor

    Xtr, Xte, ytr, yte = (load_reg if regression else load_cls)(name, 5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = (KMPRegressor if regression else KMPClassifier)(random_state=0).fit(Xtr, ytr)
    sizes, scores = np.asarray(est.val_sizes_), np.asarray(est.val_scores_)
    out = {"default_size": int(est.n_basis_), "default_end": int(sizes[-1])}
    for p in PATIENCES:
        b, stop = stop_on_path(sizes, scores, p)
        k = int(sizes[b])
        F = np.asarray(est.expansion_at(k).decision_function(Xte))
        if regression:
            test = float(r2_score(yte, F.ravel()))
        else:
            F = F.reshape(len(Xte), -1)
            codes = (F[:, 0] > 0).astype(int) if F.shape[1] == 1 else np.argmax(F, axis=1)
            test = float(np.mean(est.classes_[codes] == yte))
        out[f"{p[0]}/{p[1]:g}"] = {"size": k, "stopped_at": int(sizes[stop]) if stop is not None else int(sizes[-1]),
                                   "test": test}
    return out


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args), "uptime_start": H.uptime(),
              "protocol": __doc__.split("Usage::")[0].strip(),
              "tuning": {f"{p[0]}/{p[1]:g}": tuning(p) for p in PATIENCES}, "acceptance": {}}
    jobs = [(n, False) for n in args.sets.split(",") if n] + [(n, True) for n in args.reg_sets.split(",") if n]
    for name, regression in jobs:
        result["acceptance"][name + ("_regression" if regression else "")] = acceptance_set(name, regression)
        H.write_json(out, result)
    base = result["acceptance"]
    for p in PATIENCES:
        key = f"{p[0]}/{p[1]:g}"
        drops = {n: r[key]["test"] - r["20/0.5"]["test"] for n, r in base.items()}
        result["tuning"][key]["acceptance_worst_change"] = float(min(drops.values()))
        result["tuning"][key]["passes_rule"] = bool(
            result["tuning"][key]["mean_test_points"] >= result["tuning"]["20/0.5"]["mean_test_points"] - 0.05
            and min(drops.values()) >= 0)
    result["uptime_end"] = H.uptime()
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
