"""Where each KMP fit mode belongs: held-out accuracy and fit time against the number of atoms
for ``basic`` (distinct atoms), ``basic_reselect`` (Vincent & Bengio's basic pursuit: a chosen
atom may be chosen again), ``refit`` and ``backfit``.

Data: the covertype-like set (``make_classification(n_features=54, n_informative=20)``,
standardised, float32, RBF γ = 1/54) at ``--n-train`` / ``--n-test`` rows, and two bundled KEEL
sets (``banana``, ``satimage``; 70/30 stratified split, standardised, γ = 1/n_features).
Every fit: ``KMPClassifier(candidates="auto")`` (59 random candidates, Popovici et al.),
``client="sync"``, one seed; on the KEEL sets also ``candidates="all"`` (``mode@all``: the paper's
pursuit over the whole dictionary, where re-selection can actually happen — with 59 random
candidates out of thousands a chosen atom is rarely among them).

How each curve is measured:

* ``backfit``: one fit at the largest size; the model at k atoms is ``expansion_at(k)`` (exact),
  its fit time the fit's set-up (total − Σ per-iteration seconds) plus the first k iterations'.
* ``basic``: one fit at the largest size; frozen coefficients make the first k atoms with their
  coefficients the model the fit had after k iterations (checked against the full model); time
  as for backfit.
* ``refit`` and ``basic_reselect``: no exact prefix models (refits move every coefficient;
  re-selection changes earlier ones), so one separate fit per size, timed whole. For
  ``basic_reselect`` the size is the number of iterations (``n_basis``) and the curve's x is the
  number of distinct atoms (``n_basis_``).
* ``basic_reselect@all`` (KEEL sets): one fit; the models after k iterations replayed from its
  own selection sequence, the replay checked against the estimator at full length
  (:func:`replay_curve`) — separate fits over the whole dictionary cost too much here.

Accuracy on the held-out rows; times are wall seconds on a shared machine (load in the JSON),
with ratios to backfit's time at the same size in the same run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_modes"
MODES = ("basic", "basic_reselect", "refit", "backfit")


def _arguments(p):
    p.add_argument("--n-train", type=int, default=20_000)
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--sizes", default="50,100,200,400,700", help="atoms (synthetic set)")
    p.add_argument("--keel-sizes", default="25,50,100,200,400", help="atoms (KEEL sets)")
    p.add_argument("--keel", default="banana,satimage")
    p.add_argument("--keel-all", default="basic,basic_reselect,backfit",
                   help="modes also run with candidates='all' (the paper's pursuit over the whole dictionary) on the "
                        "KEEL sets")
    p.add_argument("--keel-all-sizes", default="25,50,100", help="iterations of the candidates='all' runs")
    p.add_argument("--no-synthetic", action="store_true", help="the KEEL sets only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from kmp_dask import KMPClassifier  # noqa: E402
from kmp_dask.datasets import load_keel  # noqa: E402


def synthetic(n_train, n_test, seed):
    X, y = make_classification(n_samples=n_train + n_test, n_features=54, n_informative=20, random_state=seed)
    Xtr, Xte, ytr, yte = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    return ((Xtr - mu) / sd).astype(np.float32), ((Xte - mu) / sd).astype(np.float32), ytr, yte, 1 / 54


def keel(name, seed):
    ds = load_keel(name)
    X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (Xtr - mu) / sd, (Xte - mu) / sd, ytr, yte, 1 / X.shape[1]


def _fit(mode, n_basis, gamma, seed, X, y):
    mode, _, cands = mode.partition("@")
    est = KMPClassifier(kernel="rbf", gamma=gamma, n_basis=int(n_basis), fit_mode=mode, candidates=cands or "auto",
                        random_state=seed, client="sync")
    est, secs, _ = H.timed_fit(est, X, y)
    return est, secs


def _prefix_values(est, Xte, k):
    """Decision values of the first k atoms with their fitted coefficients (basic: the fit's own
    model after k iterations)."""
    e = est.expansion_
    K = e.kernel_matrix(Xte)[:, :k]
    return K @ e.coef[:k] + e.intercept


def _accuracy(est, F, yte):
    return float(np.mean(H.decide(F, est.classes_) == yte))


def one_fit_curve(mode, sizes, gamma, seed, Xtr, ytr, Xte, yte):
    """backfit / basic: one fit at max(sizes), the prefix models along its path."""
    est, secs = _fit(mode, max(sizes), gamma, seed, Xtr, ytr)
    it = np.array([h["seconds"] for h in est.history_], dtype=float)
    setup = secs - float(it.sum())
    rows = []
    for k in sizes:
        k = min(k, est.n_basis_)
        if mode.startswith("backfit"):
            e = est.expansion_at(k)
            F = e.kernel_matrix(Xte) @ e.coef + e.intercept
        else:
            F = _prefix_values(est, Xte, k)
        rows.append({"n_iter": int(k), "n_atoms": int(k), "accuracy": _accuracy(est, F, yte),
                     "fit_seconds": setup + float(it[:k].sum())})
    full = _prefix_values(est, Xte, est.n_basis_) if mode.startswith("basic") else None
    if full is not None:  # the prefix reconstruction is the estimator's model at full size
        H.require_reconstruction(full, H.own_decision(est, Xte), H.RECON_TOL, f"{mode} prefix (k={est.n_basis_})")
    return rows, {"total_fit_seconds": secs, "stop_reason": est.stop_reason_}


def separate_fits_curve(mode, sizes, gamma, seed, Xtr, ytr, Xte, yte):
    """refit / basic_reselect: one fit per size."""
    rows = []
    for k in sizes:
        est, secs = _fit(mode, k, gamma, seed, Xtr, ytr)
        idx = [h["index"] for h in est.history_]
        rows.append({"n_iter": len(idx), "n_atoms": int(est.n_basis_), "accuracy": float(est.score(Xte, yte)),
                     "fit_seconds": secs, "reselections": len(idx) - len(set(idx))})
        H.log(f"  {mode} n_basis={k}: atoms {est.n_basis_}, acc {rows[-1]['accuracy']:.4f}, {secs:.1f} s")
    return rows, {}


def replay_curve(mode, sizes, gamma, seed, Xtr, ytr, Xte, yte):
    """basic_reselect@all: one fit at max(sizes) iterations; the model after k iterations is
    replayed from the fit's own selection sequence (history ``index``): β_t = ⟨d_t, R⟩/‖d_t‖²,
    R −= d_t β_t over the training rows. The replay at full length must reproduce the estimator's
    model (:data:`_harness.RECON_TOL`), else the run stops."""
    est, secs = _fit(mode, max(sizes), gamma, seed, Xtr, ytr)
    it = np.array([h["seconds"] for h in est.history_], dtype=float)
    idx = np.array([h["index"] for h in est.history_], dtype=np.int64)
    e = est.expansion_
    Y = H.ovr_targets(ytr, est.classes_)
    R = Y - Y.mean(axis=0)
    pos = {int(g): j for j, g in enumerate(est.basis_indices_)}  # distinct atoms, first-selection order
    Dtr, Kte = e.kernel_matrix(Xtr), e.kernel_matrix(Xte)
    coef, rows, setup = np.zeros_like(e.coef), [], secs - float(it.sum())
    for t, g in enumerate(idx, start=1):
        d = Dtr[:, pos[int(g)]].astype(np.float64)
        beta = d @ R / (d @ d)
        R -= np.outer(d, beta)
        coef[pos[int(g)]] += beta
        if t in sizes or t == len(idx):
            n_atoms = len(set(idx[:t].tolist()))
            F = Kte @ coef + e.intercept
            rows.append({"n_iter": t, "n_atoms": n_atoms, "accuracy": _accuracy(est, F, yte),
                         "fit_seconds": setup + float(it[:t].sum()), "reselections": t - n_atoms})
    diff = H.require_reconstruction(Kte @ coef + e.intercept, H.own_decision(est, Xte), H.RECON_TOL,
                                    f"{mode} replay (k={len(idx)})")
    return rows, {"total_fit_seconds": secs, "stop_reason": est.stop_reason_, "recon_max_abs_diff": diff}


def run_set(label, data, sizes, seed, modes=MODES, all_sizes=None):
    Xtr, Xte, ytr, yte, gamma = data
    H.log(f"{label}: {len(Xtr)} train / {len(Xte)} test, d={Xtr.shape[1]}, gamma={gamma:.4g}")
    out = {"n_train": len(Xtr), "n_test": len(Xte), "n_features": int(Xtr.shape[1]), "gamma": gamma,
           "n_classes": int(len(np.unique(ytr))), "dtype": str(Xtr.dtype), "modes": {}}
    for mode in modes:
        curve = (one_fit_curve if mode.split("@")[0] in ("basic", "backfit")
                 else replay_curve if mode == "basic_reselect@all" else separate_fits_curve)
        t0 = time.perf_counter()
        grid = all_sizes if mode.endswith("@all") and all_sizes else sizes
        rows, extra = curve(mode, grid, gamma, seed, Xtr, ytr, Xte, yte)
        out["modes"][mode] = {"curve": rows, **extra, "wall_seconds": time.perf_counter() - t0}
        H.log(f" {mode}: " + ", ".join(f"{r['n_atoms']}:{r['accuracy']:.4f}/{r['fit_seconds']:.1f}s" for r in rows))
    for mode in modes:
        ref = "backfit@all" if mode.endswith("@all") and "backfit@all" in modes else "backfit"
        back = {r["n_iter"]: r["fit_seconds"] for r in out["modes"][ref]["curve"]}
        for r in out["modes"][mode]["curve"]:
            if r["n_iter"] in back and back[r["n_iter"]] > 0:
                r["time_vs_" + ref] = r["fit_seconds"] / back[r["n_iter"]]
    return out


def main(args):
    t0 = time.perf_counter()
    sizes = [int(s) for s in args.sizes.split(",")]
    keel_sizes = [int(s) for s in args.keel_sizes.split(",")]
    all_sizes = [int(s) for s in args.keel_all_sizes.split(",")]
    n_train, n_test = args.n_train, args.n_test
    if args.quick:
        sizes, keel_sizes, all_sizes, n_train, n_test = [10, 30], [10, 30], [10, 30], 2000, 1000
    results = {}
    if not args.no_synthetic:
        results["synthetic"] = run_set("synthetic", synthetic(n_train, n_test, args.seed), sizes, args.seed)
    for name in [k for k in args.keel.split(",") if k]:
        extra = tuple(f"{m}@all" for m in args.keel_all.split(",") if m)
        results[name] = run_set(f"keel:{name}", keel(name, args.seed), keel_sizes, args.seed, MODES + extra, all_sizes)
    doc = {"benchmark": NAME, "description": __doc__.split("\n\n")[0], "seed": args.seed,
           "results": results, "environment": H.environment()}
    H.finish(doc, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main(ARGS)
