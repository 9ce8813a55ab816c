#!/usr/bin/env python
"""Quality benchmark: (stochastic) kernel matching pursuit vs a tuned SVC and Nyström + ridge.

For each task (KEEL banana, twonorm, letter A–M vs N–Z, letter 26 classes, satimage, optdigits):

* seeded 70/30 stratified train/test split; features standardised (scaler fit on the training
  split); a stratified 80/20 split of the training part ("tune" / "val") for model selection;
* SVC (RBF): C and gamma chosen on the validation split (grids grow while the optimum is on an
  edge), refit on the whole training split; test error, number of support vectors, fit time;
* basis-size grid [10, 25, 50, 100, ...] up to n_max = max(k*, 200), where k* = ⌊#SV/5⌋
  (the SVC's support vectors divided by five) is always a grid point;
* KMP (KMPClassifier, fit_mode="backfit", client="sync"): one gamma per task chosen on the
  validation split (SKMP s=59, seed 0, mean validation error over sizes in [k*/4, k*]); then, on the whole training
  split, SKMP with s=59 and s=228 for several seeds, and exact KMP (candidates="all") where its
  N_train² kernel values per iteration are affordable;
* Nyström + ridge (sklearn Nystroem with k centres + RidgeClassifier): one gamma per task
  (same criterion as KMP), alpha tuned on validation at every basis size; several seeds.

Test errors at the intermediate basis sizes come from *prefix models*: a backfitted KMP model
with k atoms is the least-squares fit of the (±1 one-vs-rest) targets on a constant and the first k
selected kernel columns, and the selection path of a seeded fit does not depend on n_basis.
So each (seed, s) is fitted once with n_basis = n_max and the k-atom models are the estimator's
own ``expansion_at(k)`` (from the fit's Cholesky factor; benchmarks/_harness.py). Every fit
checks the k = n_basis_ model against the estimator's own decision_function (the run fails above
1e-6), and one check per run compares a prefix model with a separate fit at that smaller size.

Outputs: benchmarks/results/quality_kmp.json and one PNG per task (quick mode:
$TMPDIR/kmp_dask_benchmarks/quality_kmp_quick*.{json,png}). Usage::

    python benchmarks/quality_kmp.py                      # full run (~30-40 min, 1 thread)
    python benchmarks/quality_kmp.py --quick              # smoke test (~2 min, subsampled data)
    python benchmarks/quality_kmp.py --datasets banana,twonorm --seeds 5
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from _harness import decide, log, ovr_targets  # noqa: E402

NAME = "quality_kmp"


def _arguments(p):
    p.add_argument("--quick", action="store_true",
                   help="smoke test: subsampled data, tiny grids, 3 seeds (~1-2 minutes)")
    p.add_argument("--datasets", default=None,
                   help="comma-separated tasks among banana,twonorm,satimage,optdigits,letter2,letter26 "
                        "('letter' = letter2,letter26); default: all")
    p.add_argument("--seeds", type=int, default=None,
                   help="SKMP / Nyström seeds per task (default 10; quick: 3). Budget caps for the "
                        "letter tasks still apply unless --no-budget-caps")
    p.add_argument("--no-budget-caps", action="store_true",
                   help="do not reduce seeds / gamma grid on the letter tasks and run exact KMP everywhere")
    p.add_argument("--replot", default=None, metavar="JSON",
                   help="only redraw the PNGs of an existing results JSON (no fitting)")
    p.add_argument("--kmp-commit", default=None, metavar="REV",
                   help="benchmark kmp_dask as committed at REV (e.g. HEAD): exported with git archive "
                        "to a temp dir and imported from there, so uncommitted edits in the work tree "
                        "do not leak into the numbers (default: the importable kmp_dask)")


def _use_kmp_snapshot(rev):
    """Export ``kmp_dask/`` at ``rev`` to a temp dir and put it first on sys.path; return the sha."""
    import io
    import subprocess
    import tarfile
    import tempfile

    root = H.ROOT
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=root, check=True,
                         capture_output=True, text=True).stdout.strip()
    snap = Path(tempfile.gettempdir()) / f"kmp_dask_snapshot_{sha[:12]}"
    if not (snap / "kmp_dask" / "__init__.py").exists():
        blob = subprocess.run(["git", "archive", "--format=tar", sha, "kmp_dask"], cwd=root, check=True,
                              capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
            tf.extractall(snap, filter="data")
    sys.path.insert(0, str(snap))
    return sha


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads
if ARGS is not None:
    KMP_SNAPSHOT = _use_kmp_snapshot(ARGS.kmp_commit) if ARGS.kmp_commit else None
else:
    KMP_SNAPSHOT = None

import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.kernel_approximation import Nystroem  # noqa: E402
from sklearn.linear_model import RidgeClassifier  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from kmp_dask import KMPClassifier  # noqa: E402
from kmp_dask.datasets import load_keel  # noqa: E402

# --------------------------------------------------------------------------------------------
# Protocol constants
# --------------------------------------------------------------------------------------------
TASKS = {
    "banana": {"keel": "banana", "label": "banana (2 classes)"},
    "twonorm": {"keel": "twonorm", "label": "twonorm (2 classes)"},
    "satimage": {"keel": "satimage", "label": "satimage (6 classes)"},
    "optdigits": {"keel": "optdigits", "label": "optdigits (10 classes)"},
    "letter2": {"keel": "letter", "binary_at": 13, "label": "letter A–M vs N–Z (2 classes)"},
    "letter26": {"keel": "letter", "label": "letter (26 classes)"},
}
SPLIT_SEED = 0  # outer 70/30 split
VAL_SEED = 1  # inner 80/20 split of the training part
TEST_SIZE = 0.30
VAL_SIZE = 0.20
S_VALUES = (59, 228)  # Popovici et al.: (eps, q) = (0.05, 0.95) and (0.01, 0.98)
RIDGE = 1e-10  # KMPClassifier default
BASE_GRID = (10, 25, 50, 100, 200, 400, 800, 1600, 3200)
MIN_NMAX = 200  # grid goes up to max(k*, MIN_NMAX)
GAMMA_FACTORS = tuple(2.0 ** e for e in range(-2, 4))  # × 1/n_features
C_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)
ALPHA_GRID = tuple(10.0 ** e for e in range(-6, 4))
EXACT_MAX_KERNEL_VALUES = 1e10  # exact KMP when N_train² · n_max ≤ this

FULL = {"seeds": 10, "subsample": None}
QUICK = {
    "seeds": 3, "subsample": 2000, "base_grid": (10, 25, 50), "max_nmax": 100, "min_nmax": 50,
    "gamma_factors": (0.5, 2.0), "c_grid": (1.0, 10.0), "alpha_grid": (1e-4, 1e-2, 1.0, 1e2),
}
# Full-run reductions that keep the whole run near 30-40 minutes on one core (see README).
BUDGET_CAPS = {
    "letter2": {"seeds": 3, "max_nmax": 1000, "c_grid": (1.0, 10.0, 100.0), "kmp_gamma_factors": (0.5, 1.0, 2.0),
                "kmp_max_ext": 1,
                "why": "the validation-best SVC keeps ~10k of 14k training rows as support vectors, so k*≈2000; "
                       "one SKMP fit to 2000 atoms takes ~3-4 min here (per-iteration cost grows with N·n), so "
                       "the basis grid is capped at 1000 atoms (the ≤SVC+1pp target is then checked at 1000 ≤ k*), "
                       "seeds 10→3, KMP gamma grid (1/d)·{1/2,1,2} with ≤1 extension step, C grid {1,10,100}"},
    "letter26": {"seeds": 3, "max_nmax": 800, "c_grid": (1.0, 10.0, 100.0), "kmp_gamma_factors": (0.5, 1.0, 2.0),
                 "kmp_max_ext": 1,
                 "why": "26 outputs and k*≈1300-2000: the backfit recomputes the residual (N·n·26 flops) every "
                        "iteration, so one fit to 1300 atoms takes ~2 min; basis grid capped at 800 atoms (target "
                        "checked at 800 ≤ k*), seeds 10→3, KMP gamma grid (1/d)·{1/2,1,2} with ≤1 extension "
                        "step, C grid {1,10,100}"},
}


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def load_task(task, subsample=None):
    spec = TASKS[task]
    ds = load_keel(spec["keel"])
    X, y = ds.X, ds.y.astype(np.int64)
    classes = list(ds.classes)
    if "binary_at" in spec:
        cut = spec["binary_at"]
        classes = [f"{classes[0]}-{classes[cut - 1]}", f"{classes[cut]}-{classes[-1]}"]
        y = (y >= cut).astype(np.int64)
    if subsample is not None and subsample < len(y):
        X, _, y, _ = train_test_split(X, y, train_size=subsample, stratify=y, random_state=SPLIT_SEED)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=TEST_SIZE, stratify=y, random_state=SPLIT_SEED)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    Xtu, Xva, ytu, yva = train_test_split(Xtr, ytr, test_size=VAL_SIZE, stratify=ytr, random_state=VAL_SEED)
    return {
        "X_train": Xtr, "y_train": ytr, "X_test": Xte, "y_test": yte,
        "X_tune": Xtu, "y_tune": ytu, "X_val": Xva, "y_val": yva,
        "classes": classes, "n_samples": int(len(X)), "n_features": int(X.shape[1]),
    }


# --------------------------------------------------------------------------------------------
# KMP: fit once, rebuild the prefix models
# --------------------------------------------------------------------------------------------
def fit_kmp(gamma, n_basis, candidates, seed, X, y):
    est = KMPClassifier(kernel="rbf", gamma=gamma, n_basis=int(n_basis), fit_mode="backfit",
                        candidates=candidates, ridge=RIDGE, random_state=seed, client="sync")
    est, secs, warns = H.timed_fit(est, X, y)
    return est, secs, sum(1 for m in warns if "dependent" in m or "stopped after" in m)


def gram_condition(est, X):
    """Condition number of the fit's regularised Gram ``[1 K]ᵀ[1 K] + λI`` (a diagnostic)."""
    B = np.hstack([np.ones((len(X), 1)), est.expansion_.kernel_matrix(X)])
    lam = float(est.ridge) * len(X)  # the driver's λ = ridge · N_train (on every column)
    return float(np.linalg.cond(B.T @ B + lam * np.eye(B.shape[1])))


def kmp_run(d, gamma, grid, candidates, seed, *, on="test"):
    """Fit at max(grid) and evaluate the prefix models on the test (or validation) split."""
    X, y = (d["X_train"], d["y_train"]) if on == "test" else (d["X_tune"], d["y_tune"])
    Xe, ye = (d["X_test"], d["y_test"]) if on == "test" else (d["X_val"], d["y_val"])
    est, secs, n_warn = fit_kmp(gamma, max(grid), candidates, seed, X, y)
    pm = H.PrefixModels(est, Xe)
    errs = pm.errors(ye, grid)
    hist_secs = np.array([h["seconds"] for h in est.history_], dtype=float)
    setup = secs - float(hist_secs.sum())
    cum = np.cumsum(hist_secs)
    out = {
        "seed": seed, "candidates": candidates, "gamma": gamma,
        "n_basis_fitted": int(est.n_basis_), "stop_reason": est.stop_reason_,
        "dependence_warnings": n_warn,
        "test_error" if on == "test" else "val_error": errs,
        "n_basis_effective": [int(min(k, est.n_basis_)) for k in grid],
        "fit_seconds": secs,
        "seconds_to_k": [float(setup + cum[min(k, len(cum)) - 1]) if len(cum) else secs for k in grid],
    }
    # the full-size prefix model vs the estimator itself (raises above H.RECON_TOL)
    out.update(pm.check(what=f"gamma={gamma} candidates={candidates} seed={seed} ({on})"))
    if on == "test":
        out["recon_gram_cond"] = gram_condition(est, X)
    return out, est, pm


def check_prefix_vs_separate_fit(d, gamma, k_small, k_big, seed=0, s=59):
    """A k_small-atom prefix of a k_big fit must equal a separate k_small fit (same seed)."""
    X, y, Xe = d["X_train"], d["y_train"], d["X_test"]
    big, _, _ = fit_kmp(gamma, k_big, s, seed, X, y)
    small, _, _ = fit_kmp(gamma, k_small, s, seed, X, y)
    return {"seed": seed, "candidates": s, **H.prefix_vs_separate_fit(big, small, Xe)}


# --------------------------------------------------------------------------------------------
# SVC and Nyström
# --------------------------------------------------------------------------------------------
def _extend(values, best, max_steps, done):
    """Next grid value beyond the edge ``best`` sits on (factor of the neighbouring ratio), or None."""
    v = sorted(values)
    if len(v) < 2 or done >= max_steps:
        return None
    if best == v[-1]:
        return v[-1] * (v[-1] / v[-2])
    if best == v[0]:
        return v[0] / (v[1] / v[0])
    return None


def tune_svc(d, gammas, c_grid, max_ext=2):
    """Grid search on the validation split; the grid grows (≤ max_ext steps per edge and
    parameter) while the best C or gamma lies on its edge."""
    rows, gammas, cs = [], list(gammas), list(c_grid)

    def fit(C, g):
        t0 = time.perf_counter()
        m = SVC(C=C, gamma=g).fit(d["X_tune"], d["y_tune"])
        rows.append({"C": C, "gamma": g, "val_error": float(1 - m.score(d["X_val"], d["y_val"])),
                     "n_support": int(m.n_support_.sum()), "fit_seconds": time.perf_counter() - t0})

    for g in gammas:
        for C in cs:
            fit(C, g)
    key = lambda r: (r["val_error"], r["n_support"])  # noqa: E731
    ext = {"gamma": 0, "C": 0}
    extended = []
    while True:
        best = min(rows, key=key)
        new_g = _extend(gammas, best["gamma"], max_ext, ext["gamma"])
        new_c = _extend(cs, best["C"], max_ext, ext["C"])
        if new_g is None and new_c is None:
            break
        for param, values, new in (("gamma", gammas, new_g), ("C", cs, new_c)):
            if new is None:
                continue
            ext[param] += 1
            values.append(new)
            extended.append((param, new))
            for C, g in ([(C, new) for C in cs] if param == "gamma" else [(new, g) for g in gammas]):
                fit(C, g)
    best = min(rows, key=key)
    t0 = time.perf_counter()
    m = SVC(C=best["C"], gamma=best["gamma"]).fit(d["X_train"], d["y_train"])
    fit_s = time.perf_counter() - t0
    return {
        "C": best["C"], "gamma": best["gamma"], "val_error": best["val_error"],
        "test_error": float(1 - m.score(d["X_test"], d["y_test"])),
        "n_support": int(m.n_support_.sum()), "fit_seconds": fit_s,
        "selection": "min validation error, ties → fewer support vectors; grid extended by factor steps "
                     f"(≤{max_ext} per edge) while the best C or gamma was on its edge",
        "grid_extended": extended,
        "best_at_grid_edge": bool(best["gamma"] in (min(gammas), max(gammas)) or best["C"] in (min(cs), max(cs))),
        "grid": rows,
    }


def _window(grid, k_star):
    """Grid sizes used for gamma selection: between k*/4 and k*."""
    return [i for i, k in enumerate(grid) if k_star / 4 <= k <= k_star]


def tune_gamma(evaluate, gammas, max_ext):
    """Pick gamma by ``evaluate(g) -> (score, record)`` (lower is better), extending an edge optimum."""
    gammas = sorted(gammas)
    table = {g: evaluate(g) for g in gammas}
    extended, n_ext = [], 0
    while True:
        best = min(gammas, key=lambda g: table[g][0])
        new = _extend(gammas, best, max_ext, n_ext)
        if new is None:
            break
        n_ext += 1
        extended.append(new)
        gammas = sorted(gammas + [new])
        table[new] = evaluate(new)
    best = min(gammas, key=lambda g: table[g][0])
    return best, table, extended, bool(len(gammas) > 1 and best in (gammas[0], gammas[-1]))


def ridge_path_errors(Ftr, ytr, Fva, yva, classes, alphas):
    """Validation errors of RidgeClassifier(alpha) for all alphas from one eigendecomposition."""
    xm = Ftr.mean(axis=0)
    Xc = Ftr - xm
    T = ovr_targets(ytr, classes)
    tm = T.mean(axis=0)
    e, V = np.linalg.eigh(Xc.T @ Xc)
    P = V.T @ (Xc.T @ (T - tm))
    Fv = (Fva - xm) @ V
    errs = []
    for a in alphas:
        D = Fv @ (P / (e + a)[:, None]) + tm
        errs.append(float(np.mean(decide(D, classes) != yva)))
    return errs


def tune_nystroem(d, gammas, grid, k_star, alphas, classes, max_ext=2):
    win = _window(grid, k_star)

    def evaluate(g):
        per_k = []
        for k in grid:
            ny = Nystroem(kernel="rbf", gamma=g, n_components=k, random_state=0).fit(d["X_tune"])
            errs = ridge_path_errors(ny.transform(d["X_tune"]), d["y_tune"], ny.transform(d["X_val"]),
                                     d["y_val"], classes, alphas)
            j = int(np.argmin(errs))
            per_k.append({"k": k, "alpha": alphas[j], "val_error": errs[j],
                          "alpha_at_grid_edge": bool(j in (0, len(alphas) - 1))})
        score = float(np.mean([per_k[i]["val_error"] for i in win]))
        log(f"  tune Nyström gamma={g:.4g} mean val err over window={score:.4f}")
        return score, per_k

    best_g, table, extended, edge = tune_gamma(evaluate, gammas, max_ext)
    ks = list(grid).index(k_star)
    # one direct check of the closed-form ridge path against sklearn's RidgeClassifier
    r = table[best_g][1][ks]
    ny = Nystroem(kernel="rbf", gamma=best_g, n_components=k_star, random_state=0).fit(d["X_tune"])
    Ft, Fv = ny.transform(d["X_tune"]), ny.transform(d["X_val"])
    sk = RidgeClassifier(alpha=r["alpha"]).fit(Ft, d["y_tune"])
    sk_err = float(1 - sk.score(Fv, d["y_val"]))
    check = {"k": k_star, "alpha": r["alpha"], "closed_form_val_error": r["val_error"], "sklearn_val_error": sk_err}
    tuning = {"window_sizes": [grid[i] for i in win], "extended": extended, "at_grid_edge": edge,
              "table": {f"{g:.6g}": {"mean_val_error_window": v[0], "per_k": v[1]} for g, v in sorted(table.items())}}
    return best_g, [x["alpha"] for x in table[best_g][1]], tuning, check


def nystroem_run(d, gamma, grid, alphas_by_k, seed):
    errs, secs = [], []
    for k, a in zip(grid, alphas_by_k, strict=False):
        t0 = time.perf_counter()
        ny = Nystroem(kernel="rbf", gamma=gamma, n_components=k, random_state=seed).fit(d["X_train"])
        clf = RidgeClassifier(alpha=a).fit(ny.transform(d["X_train"]), d["y_train"])
        secs.append(time.perf_counter() - t0)
        errs.append(float(1 - clf.score(ny.transform(d["X_test"]), d["y_test"])))
    return {"seed": seed, "test_error": errs, "fit_seconds": secs}


# --------------------------------------------------------------------------------------------
# One task
# --------------------------------------------------------------------------------------------
def make_grid(k_star, base, min_nmax, max_nmax=None):
    n_max = max(k_star, min_nmax)
    if max_nmax is not None:
        n_max = min(n_max, max_nmax)
        k_star = min(k_star, n_max)
    grid = {b for b in base if b < n_max and abs(b - k_star) > 0.15 * k_star}
    grid |= {k_star, n_max}
    return sorted(grid), k_star


def median_over_seeds(runs, key="test_error"):
    return [float(v) for v in np.median(np.array([r[key] for r in runs]), axis=0)]


def run_task(task, cfg, n_seeds, reductions, checks, do_separate_check):
    t_task = time.perf_counter()
    caps = {} if cfg["no_caps"] else BUDGET_CAPS.get(task, {})
    if caps and not cfg["quick"]:
        reductions.append({"task": task, **{k: v for k, v in caps.items()}})
        n_seeds = min(n_seeds, caps.get("seeds", n_seeds))
    seeds = list(range(n_seeds))
    d = load_task(task, cfg["subsample"])
    classes = sorted(set(d["y_train"].tolist()))
    n_train = len(d["y_train"])
    g0 = 1.0 / d["n_features"]
    gammas = [g0 * f for f in cfg["gamma_factors"]]
    info = {
        "label": TASKS[task]["label"], "keel_name": TASKS[task]["keel"], "n_samples": d["n_samples"],
        "n_features": d["n_features"], "n_classes": len(classes), "classes": d["classes"],
        "n_train": n_train, "n_test": len(d["y_test"]), "n_tune": len(d["y_tune"]), "n_val": len(d["y_val"]),
        "seeds": seeds,
    }
    log(f"{task}: N={d['n_samples']} d={d['n_features']} classes={len(classes)} train={n_train}")

    # 1. SVC
    svc = tune_svc(d, gammas, caps.get("c_grid", cfg["c_grid"]) if not cfg["quick"] else cfg["c_grid"])
    info["svc"] = svc
    log(f"{task}: SVC C={svc['C']} gamma={svc['gamma']:.4g} test err={svc['test_error']:.4f} "
        f"#SV={svc['n_support']} fit={svc['fit_seconds']:.1f}s")

    # 2. grid
    k_star_full = svc["n_support"] // 5
    max_nmax = cfg.get("max_nmax") if cfg["quick"] else caps.get("max_nmax")
    grid, k_star = make_grid(k_star_full, cfg["base_grid"], cfg["min_nmax"], max_nmax)
    info.update({"k_star_def": "floor(SVC #SV / 5)", "k_star": k_star, "k_star_uncapped": k_star_full,
                 "k_star_capped": bool(k_star < k_star_full), "basis_grid": grid, "n_max": max(grid)})
    ki = grid.index(k_star)

    # 3. KMP gamma on validation (SKMP s=59, seed 0, fitted up to k*)
    if caps.get("kmp_gamma_factors") and not cfg["quick"]:
        kgammas, kmax_ext = [g0 * f for f in caps["kmp_gamma_factors"]], caps.get("kmp_max_ext", 2)
    else:
        kgammas, kmax_ext = gammas, 2
    tune_grid = [k for k in grid if k <= k_star]
    win = _window(tune_grid, k_star)

    def kmp_eval(g):
        r, _, _ = kmp_run(d, g, tune_grid, S_VALUES[0], 0, on="val")
        score = float(np.mean([r["val_error"][i] for i in win]))
        log(f"{task}: tune KMP gamma={g:.4g} mean val err over window={score:.4f} "
            f"(@k*={r['val_error'][-1]:.4f}; n={r['n_basis_fitted']}, {r['stop_reason']}, {r['fit_seconds']:.1f}s)")
        return score, {"val_error": r["val_error"], "fit_seconds": r["fit_seconds"],
                       "n_basis_fitted": r["n_basis_fitted"], "stop_reason": r["stop_reason"]}

    g_kmp, ktab, kext, kedge = tune_gamma(kmp_eval, kgammas, kmax_ext)
    info["kmp_gamma"] = {
        "gamma": g_kmp,
        "criterion": "mean validation error of SKMP (s=59, seed 0; fit on the tune part) over the grid "
                     "sizes in [k*/4, k*]",
        "tune_grid": tune_grid, "window_sizes": [tune_grid[i] for i in win],
        "table": {f"{g:.6g}": {"mean_val_error_window": v[0], **v[1]} for g, v in sorted(ktab.items())},
        "extended": kext, "at_grid_edge": kedge,
    }

    # 4. SKMP (several seeds) and exact KMP on the training split
    skmp = {}
    for s in S_VALUES:
        runs = []
        for seed in seeds:
            r, _, _ = kmp_run(d, g_kmp, grid, s, seed)
            runs.append(r)
            log(f"{task}: SKMP s={s} seed={seed} err@k*={r['test_error'][ki]:.4f} n={r['n_basis_fitted']} "
                f"({r['stop_reason']}) fit={r['fit_seconds']:.1f}s recon diff={r['recon_max_abs_diff']:.1e}")
        skmp[str(s)] = {"runs": runs, "median_test_error": median_over_seeds(runs),
                        "median_fit_seconds": float(np.median([r["fit_seconds"] for r in runs])),
                        "median_seconds_to_k": median_over_seeds(runs, "seconds_to_k")}
    info["skmp"] = skmp
    exact_cost = float(n_train) ** 2 * max(grid)
    if exact_cost <= EXACT_MAX_KERNEL_VALUES or cfg["no_caps"]:
        r, _, _ = kmp_run(d, g_kmp, grid, "all", 0)
        info["exact_kmp"] = r
        log(f"{task}: exact KMP err@k*={r['test_error'][ki]:.4f} n={r['n_basis_fitted']} ({r['stop_reason']}) "
            f"fit={r['fit_seconds']:.1f}s")
    else:
        info["exact_kmp"] = {"skipped": True, "reason": (
            f"N_train²·n_max = {n_train}²·{max(grid)} = {exact_cost:.2g} kernel values > budget "
            f"{EXACT_MAX_KERNEL_VALUES:.0e} (≈{exact_cost / 1e8 / 60:.0f} min single-threaded at the ~1e8 "
            "kernel values/s measured for exact KMP on letter)")}
        reductions.append({"task": task, "exact_kmp": "skipped", "why": info["exact_kmp"]["reason"]})
        log(f"{task}: exact KMP skipped ({info['exact_kmp']['reason']})")
    if do_separate_check:
        k_small = grid[min(2, len(grid) - 1)]
        c = check_prefix_vs_separate_fit(d, g_kmp, k_small, max(grid))
        c["task"] = task
        checks["prefix_vs_separate_fit"] = c
        log(f"{task}: prefix-vs-separate-fit check {c}")

    # 5. Nyström + ridge
    alphas = list(cfg["alpha_grid"])
    g_ny, alphas_by_k, ntuning, rcheck = tune_nystroem(d, gammas, grid, k_star, alphas, classes)
    checks.setdefault("ridge_closed_form_vs_sklearn", []).append({"task": task, **rcheck})
    ny_runs = [nystroem_run(d, g_ny, grid, alphas_by_k, seed) for seed in seeds]
    info["nystroem"] = {
        "gamma": g_ny, "alpha_by_k": alphas_by_k,
        "criterion": "gamma: mean validation error over the grid sizes in [k*/4, k*] (alpha tuned per "
                     "size, centres seed 0, fit on the tune part); alpha: per basis size",
        "tuning": ntuning,
        "runs": ny_runs, "median_test_error": median_over_seeds(ny_runs),
        "median_fit_seconds": median_over_seeds(ny_runs, "fit_seconds"),
    }
    log(f"{task}: Nyström gamma={g_ny:.4g} median err@k*={info['nystroem']['median_test_error'][ki]:.4f}")

    # 6. targets
    svc_err = svc["test_error"]
    m59 = skmp["59"]["median_test_error"]
    m228 = skmp["228"]["median_test_error"]
    ny_med = info["nystroem"]["median_test_error"]
    within = [e <= svc_err + 0.01 for e in m59]
    first_within = next((k for k, w in zip(grid, within, strict=False) if w), None)
    per_size = [{"k": k, "skmp59_median": a, "skmp228_median": b, "nystroem_median": c,
                 "skmp59_beats": bool(a < c), "skmp228_beats": bool(b < c)}
                for k, a, b, c in zip(grid, m59, m228, ny_med, strict=False)]
    exact = info["exact_kmp"]
    met = bool(m59[ki] <= svc_err + 0.01)
    info["targets"] = {
        "svc_within_1pp_at_k_star": met,
        "svc_within_1pp_evaluated_at": k_star,
        "svc_within_1pp_conclusive": bool(met or not info["k_star_capped"]),
        "beats_nystroem_every_size": bool(all(p["skmp59_beats"] for p in per_size)),
        "definitions": {
            "svc_within_1pp_at_k_star": "median over seeds of SKMP (s=59) test error at k*=⌊#SV/5⌋ "
                                        "≤ SVC test error + 0.01; where the grid is capped below ⌊#SV/5⌋ "
                                        "(k_star_capped), checked at the cap: a True there is conclusive "
                                        "(fewer atoms than allowed), a False is not",
            "beats_nystroem_every_size": "median SKMP (s=59) test error < median Nyström+ridge test error "
                                         "at every grid size",
        },
        "numbers": {
            "svc_test_error": svc_err, "svc_n_support": svc["n_support"], "k_star": k_star,
            "skmp59_median_at_k_star": m59[ki], "skmp59_gap_pp_at_k_star": 100 * (m59[ki] - svc_err),
            "skmp59_range_at_k_star": [float(min(r["test_error"][ki] for r in skmp["59"]["runs"])),
                                       float(max(r["test_error"][ki] for r in skmp["59"]["runs"]))],
            "skmp228_median_at_k_star": m228[ki], "skmp228_within_1pp_at_k_star": bool(m228[ki] <= svc_err + 0.01),
            "exact_kmp_at_k_star": None if exact.get("skipped") else exact["test_error"][ki],
            "nystroem_median_at_k_star": ny_med[ki],
            "smallest_grid_size_skmp59_within_1pp": first_within,
            "skmp59_within_1pp_anywhere_on_grid": bool(any(within)),
            "n_sizes_skmp59_beats_nystroem": int(sum(p["skmp59_beats"] for p in per_size)),
            "n_sizes_skmp228_beats_nystroem": int(sum(p["skmp228_beats"] for p in per_size)),
            "n_sizes": len(grid),
            "per_size": per_size,
        },
    }
    # 7. timing
    s59 = skmp["59"]
    kmp_k = s59["median_seconds_to_k"][ki]
    info["timing"] = {
        "svc_fit_seconds": svc["fit_seconds"],
        "skmp59_fit_seconds_median": s59["median_fit_seconds"],
        "skmp228_fit_seconds_median": skmp["228"]["median_fit_seconds"],
        "fits_at_n_basis": max(grid),
        "skmp59_seconds_to_k_star_median": kmp_k,
        "skmp228_seconds_to_k_star_median": skmp["228"]["median_seconds_to_k"][ki],
        "exact_kmp_fit_seconds": None if exact.get("skipped") else exact["fit_seconds"],
        "exact_kmp_seconds_to_k_star": None if exact.get("skipped") else exact["seconds_to_k"][ki],
        "nystroem_fit_seconds_median_at_k_star": info["nystroem"]["median_fit_seconds"][ki],
        "ratio_skmp59_to_svc_at_k_star": kmp_k / svc["fit_seconds"],
        "ratio_skmp228_to_svc_at_k_star": skmp["228"]["median_seconds_to_k"][ki] / svc["fit_seconds"],
        "ratio_exact_to_svc_at_k_star": (None if exact.get("skipped")
                                         else exact["seconds_to_k"][ki] / svc["fit_seconds"]),
        "note": "seconds_to_k = fit setup + summed per-iteration seconds (history_) up to k atoms; "
                "all fits single-threaded, client='sync'; SVC = final fit on the training split",
    }
    recon = [r["recon_max_abs_diff"] for s in S_VALUES for r in skmp[str(s)]["runs"]]
    if not exact.get("skipped"):
        recon.append(exact["recon_max_abs_diff"])
    info["recon_max_abs_diff_over_fits"] = float(max(recon))
    info["task_seconds"] = time.perf_counter() - t_task
    log(f"{task}: done in {info['task_seconds']:.0f}s; "
        f"targets: within1pp={info['targets']['svc_within_1pp_at_k_star']} "
        f"beatsNystroem={info['targets']['beats_nystroem_every_size']}")
    return info


# --------------------------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------------------------
def plot_task(task, info, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    grid = info["basis_grid"]
    x = np.arange(len(grid))
    svc = info["svc"]
    ki = grid.index(info["k_star"])
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2), gridspec_kw={"width_ratios": [1.35, 1]})
    zoom_from = max(0, min(ki, len(grid) - 1) - 3)
    colors = {"59": "tab:blue", "228": "tab:orange"}
    for ax, lo, logy in ((axes[0], 0, True), (axes[1], zoom_from, False)):
        sel = slice(lo, len(grid))
        xs = x[sel]
        for off, s in ((-0.18, "59"), (0.18, "228")):
            data = [[100 * r["test_error"][i] for r in info["skmp"][s]["runs"]] for i in range(len(grid))][sel]
            bp = ax.boxplot(data, positions=xs + off, widths=0.3, patch_artist=True, showfliers=True,
                            medianprops={"color": "black"}, flierprops={"markersize": 3})
            for b in bp["boxes"]:
                b.set_facecolor(colors[s])
                b.set_alpha(0.55)
        ex = info["exact_kmp"]
        handles = [Patch(facecolor=colors["59"], alpha=0.55, label=f"SKMP s=59 ({len(info['seeds'])} seeds)"),
                   Patch(facecolor=colors["228"], alpha=0.55, label=f"SKMP s=228 ({len(info['seeds'])} seeds)")]
        if not ex.get("skipped"):
            (h,) = ax.plot(xs, 100 * np.array(ex["test_error"])[sel], "k-o", ms=4, label="exact KMP")
            handles.append(h)
        ny = np.array([r["test_error"] for r in info["nystroem"]["runs"]]) * 100
        (h,) = ax.plot(xs, np.median(ny, axis=0)[sel], "-s", color="tab:green", ms=4,
                       label="Nyström + ridge (median)")
        ax.fill_between(xs, ny.min(axis=0)[sel], ny.max(axis=0)[sel], color="tab:green", alpha=0.15)
        handles.append(h)
        h = ax.axhline(100 * svc["test_error"], color="tab:red", ls="--",
                       label=f"SVC: {100 * svc['test_error']:.2f}%, #SV={svc['n_support']}")
        handles.append(h)
        if not logy:
            h = ax.axhspan(100 * svc["test_error"], 100 * svc["test_error"] + 1, color="tab:red", alpha=0.07,
                           label="SVC error + 1 pp (target band)")
            handles.append(h)
        ax.axvline(ki, color="gray", ls=":", lw=1)
        klabel = (f"grid cap (#SV/5 = {info['k_star_uncapped']})" if info.get("k_star_capped")
                  else "k* = #SV/5")
        ax.text(ki - 0.05, 0.01, klabel, transform=ax.get_xaxis_transform(), color="gray", fontsize=8,
                va="bottom", ha="right")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(grid[i]) for i in xs])
        ax.set_xlim(xs[0] - 0.6, xs[-1] + 0.6)
        ax.set_xlabel("number of basis functions")
        ax.set_ylabel("test error (%)")
        ax.grid(axis="y", alpha=0.3)
        if logy:
            from matplotlib.ticker import FuncFormatter
            ax.set_yscale("log")
            fmt = FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(fmt)
            ax.yaxis.set_minor_formatter(fmt)
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.legend(handles=handles, fontsize=8, loc="upper right")
        else:
            ax.legend(handles=handles[-2:], fontsize=8, loc="upper right")
            vals = [100 * svc["test_error"]]
            for s in ("59", "228"):
                vals += [100 * r["test_error"][i] for r in info["skmp"][s]["runs"] for i in xs]
            vals += list(np.median(ny, axis=0)[sel])
            if not ex.get("skipped"):
                vals += list(100 * np.array(ex["test_error"])[sel])
            lo_y, hi_y = min(vals), max(vals + [100 * svc["test_error"] + 1.2])
            ax.set_ylim(max(0, lo_y - 0.15 * (hi_y - lo_y)), hi_y + 0.08 * (hi_y - lo_y))
    t = info["targets"]
    axes[0].set_title(f"{info['label']}: all sizes (log scale)", fontsize=10)
    axes[1].set_title(f"zoom; SKMP59 within 1pp of SVC at k*: {t['svc_within_1pp_at_k_star']}, "
                      f"beats Nyström at every size: {t['beats_nystroem_every_size']}", fontsize=9)
    fig.suptitle(f"{info['label']} — N_train={info['n_train']}, N_test={info['n_test']}, d={info['n_features']}; "
                 f"γ_KMP={info['kmp_gamma']['gamma']:.3g}, γ_Nys={info['nystroem']['gamma']:.3g}, "
                 f"SVC C={svc['C']:g} γ={svc['gamma']:.3g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Environment and main
# --------------------------------------------------------------------------------------------
def environment():
    return H.environment({
        "kmp_dask_snapshot_commit": KMP_SNAPSHOT,
        "note": ("kmp_dask_snapshot_commit set: the numbers are for kmp_dask exactly at that commit "
                 "(work-tree changes listed above were not used)" if KMP_SNAPSHOT else
                 "kmp_dask imported from the work tree: numbers include any uncommitted changes listed"),
    })


def replot(path):
    path = Path(path)
    doc = json.loads(path.read_text())
    for task, info in doc["tasks"].items():
        png = path.with_name(f"{path.stem}_{task}.png")
        plot_task(task, info, png)
        log(f"wrote {png}")


def main(args):
    if args.replot:
        return replot(args.replot)
    t_start = time.perf_counter()
    if args.datasets is None:
        tasks = list(TASKS)
    else:
        tasks = []
        for t in args.datasets.split(","):
            t = t.strip()
            expand = ["letter2", "letter26"] if t == "letter" else [t]
            for u in expand:
                if u not in TASKS:
                    sys.exit(f"unknown task {u!r}; choose from {', '.join(TASKS)} or 'letter'")
                if u not in tasks:
                    tasks.append(u)
    base = QUICK if args.quick else FULL
    cfg = {
        "quick": args.quick, "no_caps": args.no_budget_caps, "subsample": base["subsample"],
        "base_grid": base.get("base_grid", BASE_GRID), "min_nmax": base.get("min_nmax", MIN_NMAX),
        "max_nmax": base.get("max_nmax"), "gamma_factors": base.get("gamma_factors", GAMMA_FACTORS),
        "c_grid": base.get("c_grid", C_GRID), "alpha_grid": base.get("alpha_grid", ALPHA_GRID),
    }
    n_seeds = args.seeds if args.seeds is not None else base["seeds"]
    # smoke-test output stays out of benchmarks/results (and out of commits)
    name = NAME if args.datasets is None or args.quick else f"{NAME}_{'_'.join(tasks)}"
    out = H.output_path(name, args.out, args.quick)

    reductions, checks, results = [], {}, {}
    if args.quick:
        reductions.append({"all_tasks": f"quick mode: data subsampled to {cfg['subsample']} rows, grid "
                                        f"capped at {cfg['max_nmax']} (k* capped too), {n_seeds} seeds, "
                                        "small C/gamma/alpha grids — smoke test only, numbers not meaningful"})
    env = environment()
    log(f"tasks={tasks} seeds={n_seeds} quick={args.quick} threads={args.threads} -> {out}")
    for i, task in enumerate(tasks):
        results[task] = run_task(task, cfg, n_seeds, reductions, checks, do_separate_check=(i == 0))
        if not args.no_plots:
            png = out.with_name(f"{out.stem}_{task}.png")
            plot_task(task, results[task], png)
            results[task]["plot"] = H.display_path(png)
        _write(out, env, cfg, n_seeds, reductions, checks, results, t_start, partial=(i < len(tasks) - 1))
    _write(out, env, cfg, n_seeds, reductions, checks, results, t_start, partial=False)
    _print_summary(results)
    log(f"total {time.perf_counter() - t_start:.0f}s; wrote {out}")


def _write(out, env, cfg, n_seeds, reductions, checks, results, t_start, partial):
    recon = {t: r["recon_max_abs_diff_over_fits"] for t, r in results.items()}
    doc = {
        "benchmark": "quality_kmp",
        "description": "Test error vs number of basis functions: exact KMP, stochastic KMP (s=59, 228) vs "
                       "tuned RBF SVC and Nyström+RidgeClassifier (see benchmarks/notes/studies.md)",
        "partial": partial,
        "environment": env,
        "protocol": {
            "split": f"stratified train/test {1 - TEST_SIZE:.0%}/{TEST_SIZE:.0%}, random_state={SPLIT_SEED}; "
                     f"validation = stratified {VAL_SIZE:.0%} of the training split, random_state={VAL_SEED}; "
                     "tuning models are fit on the other 80%, final models on the whole training split",
            "scaling": "StandardScaler fit on the training split (70%), applied to all rows",
            "kmp": {"estimator": "kmp_dask.KMPClassifier", "kernel": "rbf", "fit_mode": "backfit",
                    "ridge": RIDGE, "fit_intercept": True, "client": "sync", "s_values": list(S_VALUES),
                    "exact": "candidates='all', random_state=0, only when N_train²·n_max ≤ "
                             f"{EXACT_MAX_KERNEL_VALUES:.0e} kernel values",
                    "prefix_models": "one fit per (seed, s) at n_basis=n_max; the k-atom models are the "
                                     "estimator's own est.expansion_at(k): ridge-LS (λ=ridge·N_train) of the ±1 "
                                     "OvR targets on a column of ones and the first k kernel columns, from the "
                                     "fit's Cholesky factor; every fit checks k=n_basis_ against "
                                     "est.decision_function and the run fails above recon_tolerance; if a fit "
                                     "stops early (stop_reason 'converged'/'linear_dependence'), larger grid "
                                     "sizes use all its atoms (see n_basis_effective)"},
            "gamma_grid": "factors × 1/n_features: " + ", ".join(f"{f:g}" for f in cfg["gamma_factors"]),
            "svc_C_grid": list(cfg["c_grid"]), "ridge_alpha_grid": list(cfg["alpha_grid"]),
            "basis_grid": f"{list(cfg['base_grid'])} below n_max=max(k*, {cfg['min_nmax']}), plus k* and n_max "
                          "(base values within 15% of k* dropped)",
            "seeds_default": n_seeds, "quick": cfg["quick"], "subsample": cfg["subsample"],
        },
        "reductions": reductions,
        "checks": {**checks, "recon_max_abs_diff_per_task": recon,
                   "recon_tolerance": H.RECON_TOL},
        "summary": {t: {
            "svc_test_error": r["svc"]["test_error"], "svc_n_support": r["svc"]["n_support"],
            "k_star": r["k_star"], "k_star_uncapped": r["k_star_uncapped"], "k_star_capped": r["k_star_capped"],
            "skmp59_median_test_error_at_k_star": r["targets"]["numbers"]["skmp59_median_at_k_star"],
            "skmp228_median_test_error_at_k_star": r["targets"]["numbers"]["skmp228_median_at_k_star"],
            "exact_kmp_test_error_at_k_star": r["targets"]["numbers"]["exact_kmp_at_k_star"],
            "nystroem_median_test_error_at_k_star": r["targets"]["numbers"]["nystroem_median_at_k_star"],
            "target_svc_within_1pp_at_k_star": r["targets"]["svc_within_1pp_at_k_star"],
            "target_svc_within_1pp_conclusive": r["targets"]["svc_within_1pp_conclusive"],
            "target_beats_nystroem_every_size": r["targets"]["beats_nystroem_every_size"],
            "ratio_skmp59_to_svc_fit_time_at_k_star": r["timing"]["ratio_skmp59_to_svc_at_k_star"],
        } for t, r in results.items()},
        "tasks": results,
        "total_seconds": time.perf_counter() - t_start,
    }
    H.write_json(out, doc)


def _print_summary(results):
    print()
    hdr = f"{'task':10s} {'SVC err':>8s} {'#SV':>6s} {'k*':>5s} {'SKMP59':>7s} {'SKMP228':>7s} {'exact':>7s} " \
          f"{'Nys':>7s} {'≤SVC+1pp':>9s} {'>Nys all':>9s} {'t59/tSVC':>9s}"
    print(hdr)
    for t, r in results.items():
        n = r["targets"]["numbers"]
        ex = "   -   " if n["exact_kmp_at_k_star"] is None else f"{100 * n['exact_kmp_at_k_star']:6.2f}%"
        kst = f"{n['k_star']}{'c' if r.get('k_star_capped') else ''}"
        print(f"{t:10s} {100 * n['svc_test_error']:7.2f}% {n['svc_n_support']:6d} {kst:>5s} "
              f"{100 * n['skmp59_median_at_k_star']:6.2f}% {100 * n['skmp228_median_at_k_star']:6.2f}% {ex} "
              f"{100 * n['nystroem_median_at_k_star']:6.2f}% {str(r['targets']['svc_within_1pp_at_k_star']):>9s} "
              f"{str(r['targets']['beats_nystroem_every_size']):>9s} "
              f"{r['timing']['ratio_skmp59_to_svc_at_k_star']:9.1f}")


if __name__ == "__main__":
    main(ARGS)
