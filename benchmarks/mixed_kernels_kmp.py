#!/usr/bin/env python
"""Mixed-kernel benchmark: a dictionary of three RBF widths vs the best single width.

Acceptance question: does a dictionary mixing three RBF widths (a candidate is a (row, width)
pair) beat the best single width at equal basis size, or match it with fewer atoms, on at least
two of KEEL banana / letter (26 classes) / satimage?

Protocol, per dataset:

* 10 seeds; per seed: a seeded 70/30 stratified split (``train_test_split(stratify=y, random_state=seed)``),
  features standardised with the training split's mean/std. letter: the training part (14 000
  rows) is subsampled to a seeded stratified 6 000 rows to fit the time budget; the test part is
  the whole 30 % (6 000 rows);
* γ*: one width per dataset chosen once on seed 0's training part (80/20 stratified tune/val
  split): single-width SKMP (s=59, seed 0) for γ ∈ (1/d)·2^{-2..6}, the γ with the lowest mean
  validation error over the headline basis sizes; the γ grid grows by factors of 2 (at most two
  steps per edge) while the optimum is on an edge. The width grid is then {γ*/4, γ*, 4γ*};
* models (KMPClassifier, squared loss, fit_mode="backfit", candidates=59, ridge=1e-10,
  client="sync", random_state=seed): each single width, and the mixed dictionary
  gamma=[γ*/4, γ*, 4γ*]. The mixed dictionary scores 59 rows × 3 widths = 177 candidate columns
  per iteration, so a control is added: single width γ* with candidates=177 (the same number of
  scored columns, one width);
* errors at every basis size come from *prefix models*: with the squared loss in backfit mode
  the k-atom model is the ridge least-squares fit (λ = ridge·N_train) on a column of ones (the
  intercept) and the first k selected columns, and the selection path does not depend on
  n_basis. Each (model, seed) is fitted once at n_max and the k-atom models are the estimator's
  own ``expansion_at(k)`` (from the fit's Cholesky factor; benchmarks/_harness.py). Every fit
  checks the n_max prefix model against the estimator's own decision_function and the run fails
  when they differ by more than 1e-6; one check per dataset compares a prefix with a separate
  smaller fit;
* a correctness check of the mixed dictionary's greedy choice: exact KMP (candidates="all") on
  300 banana rows, whose every (row, width) choice must be the arg-max of the dense backfit
  criterion ⟨d, R⟩² / (‖d‖² + λ) over all (row, width) pairs.

Verdicts (per dataset; "best single" = the single width with the lowest median test error at
that basis size, an oracle choice that favours the single-width side):

* ``mixed_beats_best_single``: the mixed model's median (over seeds) test error is strictly lower
  than the best single width's at a majority of the headline basis sizes;
* ``mixed_matches_with_fewer_atoms``: target level e* = the best single width's median test error
  at n_max; the mixed model's median error curve reaches e* at a smaller basis size than the
  lower envelope of the single widths' median curves (evaluated every few atoms).

Sensitivity: when the single width that is best at n_max is not γ*, the comparison (without the
control) is repeated with the grid recentred on that width; ``verdicts`` reports whether the
criterion holds on both grids.

Usage::

    python benchmarks/mixed_kernels_kmp.py            # full run (~13 min on one core)
    python benchmarks/mixed_kernels_kmp.py --quick    # smoke test (20-50 s)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from _harness import log, ovr_targets, split  # noqa: E402

NAME = "mixed_kernels_kmp"


def _arguments(p):
    p.add_argument("--quick", action="store_true", help="smoke test: 2 seeds, subsampled data, small sizes")
    p.add_argument("--datasets", default=None, help="comma-separated among banana,satimage,letter (default: all)")
    p.add_argument("--no-recentre", action="store_true",
                   help="skip the sensitivity run with the width grid recentred on the width best at n_max")
    p.add_argument("--budget-note", default=None,
                   help="why this run leaves datasets or the sensitivity out (recorded under reductions)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from kmp_dask import KMPClassifier  # noqa: E402
from kmp_dask.datasets import load_keel  # noqa: E402

TEST_SIZE = 0.30
VAL_SIZE = 0.20
VAL_SEED = 1
GAMMA_SEED = 0
S = 59
RIDGE = 1e-10
WIDTH_FACTORS = (0.25, 1.0, 4.0)  # x gamma*
GAMMA_FACTORS = tuple(2.0 ** e for e in range(-2, 7))  # x 1/d, for choosing gamma*

FULL = {
    "banana": {"seeds": 10, "train_subsample": None, "headline": (10, 25, 50, 100, 200), "step": 5},
    "satimage": {"seeds": 10, "train_subsample": None, "headline": (25, 50, 100, 200, 300), "step": 10},
    "letter": {"seeds": 10, "train_subsample": 6000, "headline": (25, 50, 100, 200, 300), "step": 10},
}
QUICK = {
    "banana": {"seeds": 2, "train_subsample": 1500, "headline": (10, 25, 50), "step": 5},
    "satimage": {"seeds": 2, "train_subsample": 1500, "headline": (10, 25, 50), "step": 5},
    "letter": {"seeds": 2, "train_subsample": 2000, "headline": (25, 50), "step": 5},
}
QUICK_GAMMA_FACTORS = (0.5, 2.0, 8.0)
REDUCTIONS = [
    {"dataset": "letter", "what": "training part subsampled 14000 -> 6000 rows (seeded per seed, stratified); test "
     "part complete (6000 rows); basis sizes up to n_max=300 (the 26-class SVC needs thousands of support vectors)",
     "why": "26 outputs: a mixed fit at 300 atoms on 6000 rows takes ~5-9 s on one core, on 14000 rows and more "
            "atoms several times that; budget ~30 min for both scripts"},
    {"dataset": "satimage", "what": "basis sizes up to n_max=300", "why": "time budget"},
]
LABELS = {"banana": "banana (2 classes)", "satimage": "satimage (6 classes)", "letter": "letter (26 classes)"}


# --------------------------------------------------------------------------------------------
# Fitting and prefix models
# --------------------------------------------------------------------------------------------
def fit(gamma, n_basis, candidates, seed, X, y):
    est = KMPClassifier(kernel="rbf", gamma=gamma, n_basis=int(n_basis), fit_mode="backfit",
                        candidates=candidates, ridge=RIDGE, random_state=seed, client="sync")
    return H.timed_fit(est, X, y)


def run_model(gamma, n_max, candidates, seed, Xtr, ytr, Xe, ye, grid):
    """Fit once at n_max; test errors of the estimator's k-atom models for k in ``grid``. The
    n_max model is checked against the estimator's own decision function (raises above 1e-6)."""
    est, secs, warns = fit(gamma, n_max, candidates, seed, Xtr, ytr)
    pm = H.PrefixModels(est, Xe)
    out = {
        "seed": seed, "gamma": gamma, "candidates": candidates, "n_basis_fitted": int(est.n_basis_),
        "stop_reason": est.stop_reason_, "fit_seconds": secs, "warnings": warns,
        "errors": pm.errors(ye, grid),
        "basis_kernels": [int(q) for q in est.basis_kernels_],
        **pm.check(what=f"gamma={gamma} candidates={candidates} seed={seed}"),
    }
    return out, est, pm


def choose_gamma(Xtr, ytr, gammas, headline, n_features, max_extend=2):
    """Min mean validation error over the headline sizes; the grid grows by a factor 2 (at most
    ``max_extend`` steps per edge) while the optimum sits on an edge."""
    Xtu, Xva, ytu, yva = train_test_split(Xtr, ytr, test_size=VAL_SIZE, stratify=ytr, random_state=VAL_SEED)
    rows = {}

    def evaluate(g):
        r, _, _ = run_model(g, max(headline), S, GAMMA_SEED, Xtu, ytu, Xva, yva, list(headline))
        rows[g] = {"gamma": g, "gamma_times_d": g * n_features, "val_error": r["errors"],
                   "mean_val_error": float(np.mean(r["errors"])), "n_basis_fitted": r["n_basis_fitted"],
                   "stop_reason": r["stop_reason"], "fit_seconds": r["fit_seconds"],
                   "recon_max_abs_diff": r["recon_max_abs_diff"]}

    for g in gammas:
        evaluate(g)
    extended = {"low": 0, "high": 0}
    while True:
        grid = sorted(rows)
        best = min(rows.values(), key=lambda r: (r["mean_val_error"], r["gamma"]))["gamma"]
        if best == grid[0] and extended["low"] < max_extend:
            extended["low"] += 1
            evaluate(grid[0] / 2)
        elif best == grid[-1] and extended["high"] < max_extend:
            extended["high"] += 1
            evaluate(grid[-1] * 2)
        else:
            break
    grid = sorted(rows)
    return best, {
        "criterion": "single-width SKMP s=59 seed 0 on an 80/20 tune/val split of seed 0's training part: "
                     "min mean validation error over the headline sizes (ties -> smaller gamma); the grid is "
                     f"extended by factors of 2 (at most {max_extend} steps per edge) while the optimum is on an edge",
        "n_tune": int(len(ytu)), "n_val": int(len(yva)), "grid": [rows[g] for g in grid], "extensions": extended,
        "at_grid_edge": best in (grid[0], grid[-1]),
    }


def check_prefix_vs_separate(gamma, k_small, k_big, Xtr, ytr, Xe):
    big, _, _ = fit(gamma, k_big, S, 0, Xtr, ytr)
    small, _, _ = fit(gamma, k_small, S, 0, Xtr, ytr)
    return {"gamma": gamma, **H.prefix_vs_separate_fit(big, small, Xe)}


def check_mixed_greedy_choice(n_rows=300, n_basis=15, widths=(0.5, 2.0, 8.0)):
    """Exact mixed-dictionary KMP on a small set: each choice = dense arg-max over (row, width)."""
    ds = load_keel("banana")
    rng = np.random.default_rng(0)
    idx = rng.choice(len(ds.y), size=n_rows, replace=False)
    X, y = ds.X[idx], ds.y[idx].astype(np.int64)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    est = KMPClassifier(kernel="rbf", gamma=list(widths), n_basis=n_basis, fit_mode="backfit", candidates="all",
                        ridge=RIDGE, random_state=0, client="sync").fit(X, y)
    Ks = [k(X, X) for k in est.kernels_]
    T = ovr_targets(y, est.classes_)
    lam = RIDGE * n_rows
    chosen, mismatches, margins = [], [], []
    for t, h in enumerate(est.history_):
        # the squared-loss backfit refits a column of ones (the intercept) with every atom
        B = np.stack([np.ones(n_rows)] + [Ks[q][:, i] for i, q in chosen], axis=1)
        R = T - B @ np.linalg.solve(B.T @ B + lam * np.eye(B.shape[1]), B.T @ T)
        sc = np.stack([((K.T @ R) ** 2).sum(axis=1) / ((K * K).sum(axis=0) + lam) for K in Ks])  # (width, row)
        for i, _ in chosen:
            sc[:, i] = -np.inf
        q, i = np.unravel_index(np.argmax(sc), sc.shape)
        top = np.sort(sc.ravel())[-2:]
        margins.append(float((top[1] - top[0]) / top[1]))
        if (int(i), int(q)) != (int(h["index"]), int(h["kernel"])):
            mismatches.append({"iteration": t, "kmp": [int(h["index"]), int(h["kernel"])], "dense": [int(i), int(q)],
                               "score_ratio": float(sc[h["kernel"], h["index"]] / sc[q, i])})
        chosen.append((int(h["index"]), int(h["kernel"])))
    return {"n_rows": n_rows, "n_basis": n_basis, "widths": list(widths), "n_mismatches": len(mismatches),
            "mismatches": mismatches, "min_relative_margin_top2": float(min(margins)),
            "widths_selected": np.bincount(est.basis_kernels_, minlength=len(widths)).tolist(),
            "passed": not mismatches}


# --------------------------------------------------------------------------------------------
# One dataset
# --------------------------------------------------------------------------------------------
def first_reach(grid, curve, level):
    for k, e in zip(grid, curve, strict=False):
        if e <= level + 1e-12:
            return int(k)
    return None


def compare(name, X, y, cfg, widths, *, with_control, tag=""):
    """Fit the single widths, the mixed dictionary (and the s=177 control) for every seed; analyse."""
    headline = list(cfg["headline"])
    n_max = max(headline)
    grid = sorted(set(range(cfg["step"], n_max + 1, cfg["step"])) | set(headline))
    seeds = list(range(cfg["seeds"]))
    centre = widths[WIDTH_FACTORS.index(1.0)]
    models = {f"single_{f:g}x": (w, S) for f, w in zip(WIDTH_FACTORS, widths, strict=True)}
    models["mixed"] = (list(widths), S)
    if with_control:
        models["single_1x_s177"] = (centre, S * len(widths))
    runs = {m: [] for m in models}
    n_test = None
    for seed in seeds:
        Xtr, Xte, ytr, yte = split(X, y, seed, cfg["train_subsample"])
        n_test = len(yte)
        for m, (g, s) in models.items():
            r, _, _ = run_model(g, n_max, s, seed, Xtr, ytr, Xte, yte, grid)
            runs[m].append(r)
        log(f"{name}{tag} seed {seed}: err@{n_max} " + ", ".join(f"{m} {runs[m][-1]['errors'][-1]:.4f}" for m in models)
            + f"; mixed widths {np.bincount(runs['mixed'][-1]['basis_kernels'], minlength=3).tolist()}"
            + "; fit s " + ", ".join(f"{runs[m][-1]['fit_seconds']:.1f}" for m in models))

    E = {m: np.array([r["errors"] for r in runs[m]]) for m in models}  # (seeds, grid)
    med = {m: np.median(E[m], axis=0) for m in models}
    singles = [f"single_{f:g}x" for f in WIDTH_FACTORS]
    gi = {k: grid.index(k) for k in headline}

    # equal basis size
    per_size = {}
    for k in headline:
        j = gi[k]
        best = min(singles, key=lambda m: (med[m][j], m))
        diff = E["mixed"][:, j] - E[best][:, j]
        row = {
            "median_test_error": {m: float(med[m][j]) for m in models},
            "mean_test_error": {m: float(E[m][:, j].mean()) for m in models},
            "std_test_error": {m: float(E[m][:, j].std(ddof=1)) if len(seeds) > 1 else 0.0 for m in models},
            "best_single": best,
            "mixed_minus_best_single_median": float(med["mixed"][j] - med[best][j]),
            "mixed_minus_best_single_per_seed": [float(v) for v in diff],
            "mixed_wins_ties_losses_vs_best_single": [int((diff < 0).sum()), int((diff == 0).sum()),
                                                      int((diff > 0).sum())],
            "mixed_beats_best_single": bool(med["mixed"][j] < med[best][j]),
            "mixed_minus_centre_width_single_1x_median": float(med["mixed"][j] - med["single_1x"][j]),
        }
        if with_control:
            row["mixed_minus_single_1x_s177_median"] = float(med["mixed"][j] - med["single_1x_s177"][j])
        per_size[str(k)] = row
    n_beats = sum(v["mixed_beats_best_single"] for v in per_size.values())
    beats = n_beats > len(headline) / 2

    # fewer atoms to reach an error level
    env_single = np.min(np.stack([med[m] for m in singles]), axis=0)
    best_at_max = min(singles, key=lambda m: (med[m][-1], m))
    level = float(med[best_at_max][-1])
    k_single = first_reach(grid, env_single, level)
    k_mixed = first_reach(grid, med["mixed"], level)
    fewer = k_mixed is not None and k_single is not None and k_mixed < k_single
    # per seed: atoms needed to reach e* by the mixed model vs by the width best at n_max
    per_seed_reach = []
    for i in range(len(seeds)):
        per_seed_reach.append({"seed": seeds[i], "k_mixed": first_reach(grid, E["mixed"][i], level),
                               "k_single_best_at_nmax": first_reach(grid, E[best_at_max][i], level)})
    n_mixed_first = sum(1 for r in per_seed_reach if r["k_mixed"] is not None and
                        (r["k_single_best_at_nmax"] is None or r["k_mixed"] < r["k_single_best_at_nmax"]))
    n_single_first = sum(1 for r in per_seed_reach if r["k_single_best_at_nmax"] is not None and
                         (r["k_mixed"] is None or r["k_single_best_at_nmax"] < r["k_mixed"]))
    levels = []
    for k in headline:  # reach the best single width's median error at each headline size
        lv = float(env_single[gi[k]])
        row = {"level_from_best_single_at": k, "level": lv, "k_single_envelope": first_reach(grid, env_single, lv),
               "k_mixed": first_reach(grid, med["mixed"], lv)}
        if with_control:
            row["k_single_1x_s177"] = first_reach(grid, med["single_1x_s177"], lv)
        levels.append(row)
    fewer_atoms = {
        "level": level,
        "level_definition": f"median test error of the best single width ({best_at_max}) at n_max={n_max}",
        "best_single_at_n_max": best_at_max, "k_single_envelope": k_single, "k_mixed": k_mixed,
        "atoms_saved_fraction": (None if k_mixed is None or k_single is None else float(1 - k_mixed / k_single)),
        "by_level": levels, "per_seed": per_seed_reach,
        "per_seed_summary": f"mixed reaches e* first on {n_mixed_first}/{len(seeds)} seeds, the single width "
                            f"{best_at_max} first on {n_single_first}/{len(seeds)} (rest: ties or neither)",
    }
    if with_control:
        fewer_atoms["k_single_1x_s177"] = first_reach(grid, med["single_1x_s177"], level)

    # which widths the mixed model selected
    bk = [np.asarray(r["basis_kernels"], dtype=np.int64) for r in runs["mixed"]]  # per seed, n_basis_ long
    nw = len(widths)
    hist_total = np.bincount(np.concatenate(bk), minlength=nw).tolist()
    per_position = [np.bincount(np.array([b[p] for b in bk if len(b) > p], dtype=np.int64), minlength=nw).tolist()
                    for p in range(max(len(b) for b in bk))]
    return {
        "widths": list(widths), "width_factors": list(WIDTH_FACTORS), "centre_width": centre,
        "seeds": seeds, "headline_sizes": headline, "eval_grid": grid, "n_max": n_max, "n_test": int(n_test),
        "models": {m: {"gamma": g, "candidates": s} for m, (g, s) in models.items()},
        "median_error_curve": {m: [float(v) for v in med[m]] for m in models},
        "single_envelope_median_curve": [float(v) for v in env_single],
        "equal_size": per_size,
        "mixed_beats_best_single": bool(beats),
        "mixed_beats_best_single_at_sizes": f"{n_beats}/{len(headline)}",
        "fewer_atoms": fewer_atoms,
        "mixed_matches_with_fewer_atoms": bool(fewer),
        "mixed_width_selection": {
            "widths": list(widths), "counts_all_seeds": hist_total,
            "fraction": [c / max(sum(hist_total), 1) for c in hist_total],
            "mean_counts_in_first_k_atoms": {
                str(k): np.stack([np.bincount(b[:k], minlength=nw) for b in bk]).mean(axis=0).tolist()
                for k in headline},
            "per_seed_counts": [np.bincount(b, minlength=nw).tolist() for b in bk],
            "per_position_counts": per_position,
        },
        "fit_seconds_median": {m: float(np.median([r["fit_seconds"] for r in runs[m]])) for m in models},
        "recon_max_abs_diff": max(r["recon_max_abs_diff"] for m in models for r in runs[m]),
        "recon_min_pred_agreement": min(r["recon_pred_agreement"] for m in models for r in runs[m]),
        "n_fits_with_warnings": int(sum(1 for m in models for r in runs[m] if r["warnings"])),
        "runs": {m: [{k: v for k, v in r.items() if k != "basis_kernels"} for r in runs[m]] for m in models},
    }


def run_dataset(name, cfg, gamma_factors, recentre=True):
    t_ds = time.perf_counter()
    ds = load_keel(name)
    X, y = ds.X, ds.y.astype(np.int64)
    d = X.shape[1]
    headline = list(cfg["headline"])
    Xtr0, _, ytr0, _ = split(X, y, GAMMA_SEED, cfg["train_subsample"])
    gamma_star, gsel = choose_gamma(Xtr0, ytr0, [f / d for f in gamma_factors], headline, d)
    widths = [gamma_star * f for f in WIDTH_FACTORS]
    log(f"{name}: d={d} classes={len(ds.classes)} train={len(ytr0)} gamma*={gamma_star:.4g} (={gamma_star * d:g}/d, "
        f"edge={gsel['at_grid_edge']}) widths={[round(w, 5) for w in widths]}")
    main = compare(name, X, y, cfg, widths, with_control=True)

    # checks
    Xtr, Xte, ytr, _ = split(X, y, 0, cfg["train_subsample"])
    sep = check_prefix_vs_separate(widths, headline[len(headline) // 2], max(headline), Xtr, ytr, Xte)

    out = {
        "label": LABELS[name], "keel_name": name, "n_samples": int(len(y)), "n_features": int(d),
        "n_classes": len(ds.classes), "n_train": int(len(ytr0)), "train_subsample": cfg["train_subsample"],
        "gamma_star": gamma_star, "gamma_selection": gsel,
        **main,
        "checks": {"recon_max_abs_diff": main.pop("recon_max_abs_diff"),
                   "recon_max_abs_diff_gamma_selection": max(r["recon_max_abs_diff"] for r in gsel["grid"]),
                   "recon_min_pred_agreement": main.pop("recon_min_pred_agreement"),
                   "prefix_vs_separate_fit_mixed": sep, "n_fits_with_warnings": main.pop("n_fits_with_warnings")},
    }
    for k in ("recon_max_abs_diff", "recon_min_pred_agreement", "n_fits_with_warnings"):
        out.pop(k, None)

    # sensitivity: the same comparison with the grid centred on the width that is best at n_max
    best_at_max = main["fewer_atoms"]["best_single_at_n_max"]
    g_best = main["models"][best_at_max]["gamma"]
    if recentre and best_at_max != "single_1x":
        w2 = [g_best * f for f in WIDTH_FACTORS]
        log(f"{name}: sensitivity, width grid recentred on the best single width at n_max "
            f"({best_at_max} = {g_best:.4g}): {[round(w, 5) for w in w2]}")
        alt = compare(name, X, y, cfg, w2, with_control=False, tag=" [recentred]")
        out["recentred"] = {
            "why": f"the width best at n_max ({best_at_max}) is not the validation choice gamma*: the comparison is "
                   "repeated with {g/4, g, 4g} around it (no s=177 control)",
            **{k: alt[k] for k in ("widths", "centre_width", "median_error_curve", "single_envelope_median_curve",
                                   "equal_size", "mixed_beats_best_single", "mixed_beats_best_single_at_sizes",
                                   "fewer_atoms", "mixed_matches_with_fewer_atoms", "mixed_width_selection",
                                   "fit_seconds_median", "recon_max_abs_diff", "runs")},
        }
    else:
        out["recentred"] = {"why": "not run: the validation choice gamma* is also the best single width at n_max"
                            if best_at_max == "single_1x" else "not run (disabled)"}
    out["checks"]["recon_max_abs_diff_all_fits"] = max(
        out["checks"]["recon_max_abs_diff"], out["checks"]["recon_max_abs_diff_gamma_selection"],
        out["recentred"].get("recon_max_abs_diff", 0.0))
    out["dataset_seconds"] = time.perf_counter() - t_ds
    return out


# --------------------------------------------------------------------------------------------
# Environment, plotting, main
# --------------------------------------------------------------------------------------------
STYLE = {
    "single_0.25x": {"color": "tab:blue", "ls": "-", "label": "single, centre/4 (wide)"},
    "single_1x": {"color": "tab:orange", "ls": "-", "label": "single, centre"},
    "single_4x": {"color": "tab:green", "ls": "-", "label": "single, 4·centre (narrow)"},
    "mixed": {"color": "black", "ls": "-", "label": "mixed, all three"},
    "single_1x_s177": {"color": "tab:orange", "ls": ":", "label": "single centre, s=177 (control)"},
}


def _error_panel(ax, R, title, legend):
    grid = np.array(R["eval_grid"])
    for m, st in STYLE.items():
        if m not in R["runs"]:
            continue
        errs = np.array([r["errors"] for r in R["runs"][m]]) * 100
        q1, q2, q3 = np.percentile(errs, [25, 50, 75], axis=0)
        g = R["models"][m]["gamma"] if "models" in R else None
        label = st["label"] if g is None else f"{st['label']}" + (f" ={g:.3g}" if not isinstance(g, list) else "")
        mixed = m == "mixed"  # drawn wide and underneath: a single width it coincides with stays visible
        ax.plot(grid, q2, color=st["color"], ls=st["ls"], lw=3.2 if mixed else 1.4, alpha=0.55 if mixed else 1.0,
                zorder=1 if mixed else 2, label=label)
        if m in ("mixed", "single_1x"):
            ax.fill_between(grid, q1, q3, color=st["color"], alpha=0.12, lw=0)
    ax.axhline(R["fewer_atoms"]["level"] * 100, color="gray", lw=0.8, ls="--", label="e* (best single @ n_max)")
    ax.set_xscale("log")
    ax.set_xticks(R["headline_sizes"])
    ax.set_xticklabels([str(k) for k in R["headline_sizes"]])
    ax.minorticks_off()
    ax.set_xlabel("basis size (atoms)")
    ax.set_ylabel("test error (%), median over seeds")
    curves = [np.array(v) * 100 for v in R["median_error_curve"].values()]
    lo = min(c.min() for c in curves)
    hi = max(np.percentile(np.array(R["median_error_curve"]["mixed"]) * 100, 60),
             np.percentile(np.array(R["single_envelope_median_curve"]) * 100, 60))
    ax.set_ylim(lo * 0.9, max(hi * 1.6, lo * 1.6))
    v = "yes" if R["mixed_beats_best_single"] else "no"
    f = "yes" if R["mixed_matches_with_fewer_atoms"] else "no"
    ax.set_title(f"{title}\nmixed beats best single: {v} ({R['mixed_beats_best_single_at_sizes']} sizes); "
                 f"fewer atoms: {f}", fontsize=8.5)
    ax.grid(alpha=0.3, which="both")
    if legend:
        ax.legend(fontsize=7, loc="best", framealpha=0.85)


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["datasets"])
    fig, axes = plt.subplots(3, len(names), figsize=(5.4 * len(names), 11.5), squeeze=False,
                             gridspec_kw={"height_ratios": [2.2, 2.2, 1]})
    for c, name in enumerate(names):
        R = result["datasets"][name]
        sub = f", train subsample {R['train_subsample']}" if R["train_subsample"] else ""
        _error_panel(axes[0, c], R, f"{R['label']}, {len(R['seeds'])} seeds{sub}\n"
                     f"widths γ*·{{¼, 1, 4}}, γ*={R['gamma_star']:.3g} from validation", legend=True)
        rc = R["recentred"]
        if "runs" in rc:
            rr = {**rc, "eval_grid": R["eval_grid"], "headline_sizes": R["headline_sizes"],
                  "models": {m: {"gamma": (rc["widths"] if m == "mixed" else
                                           rc["widths"][["single_0.25x", "single_1x", "single_4x"].index(m)])}
                             for m in rc["runs"]}}
            _error_panel(axes[1, c], rr, f"{name}, sensitivity: widths g·{{¼, 1, 4}} recentred on\n"
                         f"the best single width at n_max, g={rc['centre_width']:.3g}", legend=True)
        else:
            axes[1, c].axis("off")
            axes[1, c].text(0.5, 0.5, f"{name}: recentred-grid sensitivity not run\n({rc['why']})", ha="center",
                            va="center", fontsize=9, wrap=True, transform=axes[1, c].transAxes)
        # widths chosen by the mixed model (validation grid), by position in the selection order
        ax2 = axes[2, c]
        bk = np.array(R["mixed_width_selection"]["per_position_counts"])  # (n_max, widths)
        pos = np.arange(1, bk.shape[0] + 1)
        frac = bk / np.maximum(bk.sum(axis=1, keepdims=True), 1)
        bottom = np.zeros(len(pos))
        for q, m in enumerate(("single_0.25x", "single_1x", "single_4x")):
            ax2.bar(pos, frac[:, q], bottom=bottom, width=1.0, color=STYLE[m]["color"], alpha=0.8,
                    label=f"{['γ*/4', 'γ*', '4γ*'][q]}: {R['mixed_width_selection']['counts_all_seeds'][q]}")
            bottom += frac[:, q]
        ax2.set_xscale("log")
        ax2.set_xlim(0.8, len(pos) + 0.5)
        n_max = max(R["headline_sizes"])
        ticks = [1] + [k for k in R["headline_sizes"] if k == n_max or k * 1.6 < n_max]
        ax2.set_xticks(ticks)
        ax2.set_xticklabels([str(k) for k in ticks])
        ax2.minorticks_off()
        ax2.set_ylim(0, 1)
        ax2.set_xlabel("position in the mixed model's selection order (validation grid)")
        ax2.set_ylabel("fraction of seeds")
        ax2.set_title("width chosen by the mixed model at each iteration (totals over seeds in legend)", fontsize=9)
        ax2.legend(fontsize=7.5, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=105)
    plt.close(fig)


def reductions(args, names, all_names):
    if args.quick:
        return [{"what": "quick mode: train subsample, 2 seeds, small sizes, 3 gammas"}]
    out = [r for r in REDUCTIONS if r["dataset"] in names]
    why = args.budget_note or "chosen on the command line"
    if names != all_names:
        out.append({"what": f"datasets run: {', '.join(names)}; not run: "
                            f"{', '.join(n for n in all_names if n not in names)} (--datasets)", "why": why})
    if args.no_recentre:
        out.append({"what": "recentred-grid sensitivity not run (--no-recentre)", "why": why})
    return out


def summarise(result):
    """Reconstruction maxima and the verdicts over the datasets in ``result`` so far."""
    result["checks"]["recon_tolerance"] = H.RECON_TOL
    result["checks"]["recon_max_abs_diff_per_dataset"] = {
        n: R["checks"]["recon_max_abs_diff_all_fits"] for n, R in result["datasets"].items()}
    log(f"reconstruction (every fit's n_max prefix model vs its decision_function): max |diff| "
        f"{result['checks']['recon_max_abs_diff_per_dataset']} (tolerance {H.RECON_TOL:g})")
    V = {}
    for n, R in result["datasets"].items():
        v = {"mixed_beats_best_single": R["mixed_beats_best_single"],
             "mixed_beats_best_single_at_sizes": R["mixed_beats_best_single_at_sizes"],
             "mixed_matches_with_fewer_atoms": R["mixed_matches_with_fewer_atoms"],
             "atoms_to_reach_e*": {"mixed": R["fewer_atoms"]["k_mixed"],
                                   "single": R["fewer_atoms"]["k_single_envelope"]},
             "either": R["mixed_beats_best_single"] or R["mixed_matches_with_fewer_atoms"]}
        rc = R.get("recentred", {})
        if "mixed_beats_best_single" in rc:
            v["recentred_grid"] = {
                "widths": rc["widths"], "mixed_beats_best_single": rc["mixed_beats_best_single"],
                "mixed_beats_best_single_at_sizes": rc["mixed_beats_best_single_at_sizes"],
                "mixed_matches_with_fewer_atoms": rc["mixed_matches_with_fewer_atoms"],
                "atoms_to_reach_e*": {"mixed": rc["fewer_atoms"]["k_mixed"],
                                      "single": rc["fewer_atoms"]["k_single_envelope"]},
                "either": rc["mixed_beats_best_single"] or rc["mixed_matches_with_fewer_atoms"]}
            v["holds_on_both_grids"] = v["either"] and v["recentred_grid"]["either"]
        else:
            v["holds_on_both_grids"] = v["either"]
        V[n] = v
    n_ok = sum(v["either"] for v in V.values())
    n_robust = sum(v["holds_on_both_grids"] for v in V.values())
    names_ok = ", ".join(n for n, v in V.items() if v["either"]) or "none"
    names_robust = ", ".join(n for n, v in V.items() if v["holds_on_both_grids"]) or "none"
    result["verdicts"] = {
        "per_dataset": V, "datasets_where_mixed_helps": n_ok,
        "acceptance_met": bool(n_ok >= 2),
        "datasets_where_mixed_helps_on_both_width_grids": n_robust,
        "acceptance_met_on_both_width_grids": bool(n_robust >= 2),
        "statement": (f"With the validation-chosen width grid the three-width dictionary beats the best single width "
                      f"or matches it with fewer atoms on {n_ok} of {len(V)} datasets ({names_ok}): the acceptance "
                      f"criterion (>= 2) is {'met' if n_ok >= 2 else 'NOT met'}. Counting only datasets where this "
                      f"also holds with the grid recentred on the width best at n_max: {n_robust} ({names_robust}), "
                      f"so the criterion is {'met' if n_robust >= 2 else 'NOT met'} robustly."),
    }


def main(args):
    cfgs = QUICK if args.quick else FULL
    names = args.datasets.split(",") if args.datasets else list(cfgs)
    gamma_factors = QUICK_GAMMA_FACTORS if args.quick else GAMMA_FACTORS
    out = H.output_path(NAME, args.out, args.quick)
    t0 = time.perf_counter()
    env = H.environment()
    log(f"mixed-kernel benchmark: datasets={names} quick={args.quick}")
    result = {
        "benchmark": "mixed_kernels_kmp", "issue": 4,
        "description": "Three-width RBF dictionary vs each single width (and a same-candidate-count control), "
                       "squared-loss backfitted SKMP, test error vs basis size.",
        "environment": env,
        "protocol": {
            "split": f"train_test_split(test_size={TEST_SIZE}, stratify=y, random_state=seed); standardised by "
                     "training mean/std; KMP random_state=seed",
            "gamma_star": "see each dataset's gamma_selection; candidates (1/d) x gamma_factors",
            "gamma_factors": list(gamma_factors), "width_factors": list(WIDTH_FACTORS),
            "kmp": {"loss": "squared", "fit_mode": "backfit", "candidates": S, "ridge": RIDGE, "fit_intercept": True,
                    "client": "sync"},
            "control": "single_1x_s177: width gamma* with candidates=177 = 59 rows x 3 widths, the number of "
                       "candidate columns the mixed dictionary scores per iteration",
            "prefix_models": "errors at every grid size from the estimator's own k-atom model est.expansion_at(k) "
                             "of one fit at n_max (exact for squared-loss backfit: ridge least squares on a column "
                             "of ones and the first k kernel columns, from the fit's Cholesky factor); every fit "
                             "checks the n_max model against est.decision_function on the evaluation rows and the "
                             f"run fails when they differ by more than {H.RECON_TOL:g}",
            "best_single": "per basis size, the single width (of the three; not the s=177 control) with the lowest "
                           "median test error: an oracle choice favouring the single-width side",
            "mixed_beats_best_single": "median mixed error < median best-single error at a strict majority of the "
                                       "headline sizes",
            "mixed_matches_with_fewer_atoms": "level e* = best single width's median error at n_max; smallest grid "
                                              "size where the mixed median curve <= e* is smaller than the smallest "
                                              "where the single widths' lower envelope <= e*",
            "recentred_sensitivity": "when the single width best at n_max (median) is not gamma*, the whole comparison "
                                     "(without the s=177 control) is repeated with widths {g/4, g, 4g} around that "
                                     "width g; verdicts are reported for both grids",
            "configs": {n: cfgs[n] for n in names}, "quick": bool(args.quick),
        },
        "reductions": reductions(args, names, list(cfgs)),
        "checks": {},
        "datasets": {},
    }
    result["checks"]["mixed_greedy_choice_vs_dense"] = chk = check_mixed_greedy_choice()
    log(f"check: exact mixed KMP choices vs dense arg-max: {chk['n_mismatches']} mismatches in {chk['n_basis']} "
        f"iterations (widths chosen {chk['widths_selected']})")
    for i, name in enumerate(names):
        result["datasets"][name] = run_dataset(name, cfgs[name], gamma_factors, recentre=not args.no_recentre)
        summarise(result)
        # written after every dataset: a run cut short keeps what it did and says what it did not reach
        result["partial"], result["datasets_pending"] = i < len(names) - 1, names[i + 1:]
        H.finish(result, out, t0, None if args.no_plots else plot)
    for name, R in result["datasets"].items():
        for k, v in R["equal_size"].items():
            me = v["median_test_error"]
            log(f"{name} k={k}: " + ", ".join(f"{m} {100 * e:.2f}" for m, e in me.items())
                + f" | best single {v['best_single']}, "
                  f"mixed-best {100 * v['mixed_minus_best_single_median']:+.2f} pts, "
                  f"W/T/L {v['mixed_wins_ties_losses_vs_best_single']}")
        fa = R["fewer_atoms"]
        log(f"{name}: beats={R['mixed_beats_best_single']} ({R['mixed_beats_best_single_at_sizes']}), "
            f"fewer atoms={R['mixed_matches_with_fewer_atoms']} (e*={100 * fa['level']:.2f}%: "
            f"single k={fa['k_single_envelope']}, "
            f"mixed k={fa['k_mixed']}, control k={fa['k_single_1x_s177']}; {fa['per_seed_summary']}); widths chosen "
            f"{R['mixed_width_selection']['counts_all_seeds']}")
        rc = R["recentred"]
        if "equal_size" in rc:
            for k, v in rc["equal_size"].items():
                me = v["median_test_error"]
                log(f"{name} [recentred {[round(w, 5) for w in rc['widths']]}] k={k}: "
                    + ", ".join(f"{m} {100 * e:.2f}" for m, e in me.items())
                    + f" | best single {v['best_single']}, "
                      f"mixed-best {100 * v['mixed_minus_best_single_median']:+.2f} pts, "
                      f"W/T/L {v['mixed_wins_ties_losses_vs_best_single']}")
            fa = rc["fewer_atoms"]
            log(f"{name} [recentred]: beats={rc['mixed_beats_best_single']} "
                f"({rc['mixed_beats_best_single_at_sizes']}), "
                f"fewer atoms={rc['mixed_matches_with_fewer_atoms']} (e*={100 * fa['level']:.2f}%: single "
                f"k={fa['k_single_envelope']}, mixed k={fa['k_mixed']}); widths chosen "
                f"{rc['mixed_width_selection']['counts_all_seeds']}")
    log(result["verdicts"]["statement"])


if __name__ == "__main__":
    main(ARGS)
