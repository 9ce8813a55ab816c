#!/usr/bin/env python
"""Sparse KPCA / KMP bounds / sparse KCCA / scale (Hussain & Shawe-Taylor, "Theory of
matching pursuit", Figs 1-2), measured.

Protocol:

1. **Toy (Fig. 1 right)**. Per seed: 1000 training and 1000 test points, 450 coordinates i.i.d.
   N(0, 1), the first 50 multiplied by 10 (variance 100 vs 1; the paper only says "considerably
   larger eigenvalues"), ``np.random.default_rng(seed)``, training rows drawn first. Linear kernel.
   ``SparseKernelPCA("bound", kernel="linear", max_components=150)`` (exact greedy, all
   candidates) gives ``bound_path_`` (Corollary 1, δ = 0.05, R² = max training k(x, x)) and
   ``trace_residual_path_``; the path is grown to 150 without a cut by the unrestricted fit
   ``SparseKernelPCA(150, kernel="linear")`` (same greedy choices). Test residual per k:
   ‖x − P_k x‖² averaged over the test points, P_k the orthogonal projection onto the span of the
   first k chosen training points (QR of those points, nested in k). Check: the training
   residual from that QR equals ``trace_residual_path_[k] / m``. Reported: argmin of the bound per
   seed (paper: 46; true dimension 50), the test residual at the argmin and at k = 50, and whether
   the bound lies above the test residual at every k.
2. **KMP bound (Fig. 2)**. Two regression sets, features standardised with the training
   mean/std, y standardised likewise: sklearn diabetes (442 rows, 70/30 split, seeded) and
   friedman1 (506 rows, noise 1, the paper's 450/56 split). RBF kernel, gamma = 0.1 (= 1/d).
   Per seed: ``KMPRegressor(n_basis=50, candidates="all", random_state=0)`` (no stopping) gives
   the k-atom models ``expansion_at(k)``, k = 0..50; γ = the standard deviation of that fit's
   training residual at k = 50 (a training-only quantity); then the same fit with
   ``stopping="bound", bound_threshold=γ`` gives ``bound_path_`` (Theorem 3, δ = 0.05). Per k: test
   error rate Pr(|f − y| > γ), test MSE. Reported: argmin of the bound vs argmin of the test error
   rate and of the test MSE, and the test MSE at the bound's argmin vs the best. The plot scales
   the bound by 1/5 as the paper did.
3. **Sparse KCCA on two views** of optdigits (``load_keel("optdigits")``, 5620 rows): columns 0-31
   vs 32-63, standardised by training mean/std (constant columns: sd 1). Per seed: a 70/30 split,
   then the training part subsampled to 1500 rows (seeded) so that the dense reference fits; the
   test part is complete (1686 rows). RBF, gamma = 1/32 per view, reg = 1e-3 (the default; a
   sensitivity with reg = 0.1 for the sparse and the dense model).
   ``SparseKCCA(k, candidates="auto")`` for k in (50, 100, 200) (exact candidates cost O(n²) per
   step: 653 s for k = 200 on 3900 rows in a probe, so the 59-candidate rule is used). Held-out
   canonical correlations of the first 5 pairs = corr(Fx[:, i], Fy[:, i]) on the test rows.
   Baseline: sklearn ``Nystroem(gamma=1/32, n_components=k, random_state=seed)`` per view, then
   ``CCA(n_components=5, max_iter=2000)`` on the two feature sets. Dense reference: regularised
   KCCA in the full kernel span of the 1500 rows, formulated as the sparse estimator does it with
   every row chosen (orthonormal coordinates of the span from the eigendecomposition of K,
   eigenvalues > 1e-10·max kept, centred covariances, reg · mean eigenvalue on the diagonal, SVD
   of C_aa^{-1/2} C_ab C_bb^{-1/2}). Fit times are reported.
4. **Scale**. A 10⁶ × 20 float32 zarr store written chunk by chunk
   (``kmp_dask.datasets.make_regression_store``, uniform [-1, 1] features, 100 000-row chunks);
   ``SparseKernelPCA(30, gamma=1/20, candidates="auto", random_state=0)`` on a process LocalCluster
   (2 workers × 1 thread, 127.0.0.1); fit time, seconds per component, seconds per engine pass
   (``n_passes_``). The same fit on the rows as an in-memory numpy array (the estimator's
   in-process engine) for comparison; whether both choose the same points.

Usage::

    python benchmarks/sparse_kpca.py            # full run (~15 min on the shared 2-core machine)
    python benchmarks/sparse_kpca.py --quick    # smoke test (< 3 min), writes to $TMPDIR
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from _harness import log  # noqa: E402

NAME = "sparse_kpca"


def _arguments(p):
    p.add_argument("--quick", action="store_true", help="smoke test: 1-2 seeds, small sizes, 10^5 rows")
    p.add_argument("--rows", type=int, default=None, help="rows of the scale store (default 10^6; quick 10^5)")
    p.add_argument("--skip-scale", action="store_true", help="leave out part 4")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402

from kmp_dask import KMPRegressor, SparseKCCA, SparseKernelPCA  # noqa: E402

FULL = {"toy_seeds": 10, "toy_kmax": 150, "kmp_seeds": 10, "kmp_nbasis": 50, "kcca_seeds": 3,
        "kcca_ntrain": 1500, "kcca_ks": (50, 100, 200), "scale_rows": 10**6, "scale_k": 30}
QUICK = {"toy_seeds": 1, "toy_kmax": 80, "kmp_seeds": 2, "kmp_nbasis": 30, "kcca_seeds": 1,
         "kcca_ntrain": 500, "kcca_ks": (20, 50), "scale_rows": 10**5, "scale_k": 10}
N_PAIRS = 5
DELTA = 0.05


# --------------------------------------------------------------------------------------------
# 1. toy
# --------------------------------------------------------------------------------------------
def toy(seed, kmax, m=1000, dim=450, true_dim=50, scale=10.0):
    rng = np.random.default_rng(seed)
    scales = np.ones(dim)
    scales[:true_dim] = scale
    X = rng.standard_normal((m, dim)) * scales
    Xte = rng.standard_normal((m, dim)) * scales
    t0 = time.perf_counter()
    eb = SparseKernelPCA("bound", kernel="linear", max_components=kmax).fit(X)
    t_bound = time.perf_counter() - t0
    t0 = time.perf_counter()
    ef = SparseKernelPCA(kmax, kernel="linear").fit(X)
    t_full = time.perf_counter() - t0
    idx = ef.components_index_
    Q, _ = np.linalg.qr(X[idx].T)  # column j: orthonormalised j-th chosen point (nested spans)
    def resid(Z):
        c = np.cumsum((Z @ Q) ** 2, axis=1).mean(axis=0)
        n2 = (Z ** 2).sum(axis=1).mean()
        return np.concatenate([[n2], n2 - c])
    test_res = resid(Xte)
    train_res = resid(X)
    trace = ef.trace_residual_path_
    check = float(np.max(np.abs(train_res[: len(trace)] - trace / m)) / (trace[0] / m))
    bound = np.asarray(eb.bound_path_)
    kb = int(np.argmin(bound))
    return {
        "seed": seed, "k_bound_argmin": kb, "n_components_bound_fit": int(eb.n_components_),
        "same_prefix_as_unrestricted_fit": bool(np.array_equal(eb.components_index_, idx[: eb.n_components_])),
        "bound_at_argmin": float(bound[kb]), "test_residual_at_argmin": float(test_res[kb]),
        "test_residual_at_50": float(test_res[50]), "test_residual_at_0": float(test_res[0]),
        "test_residual_at_kmax": float(test_res[-1]),
        "bound_above_test_residual_everywhere": bool(np.all(bound[: len(test_res)] >= test_res[: len(bound)])),
        "train_residual_vs_trace_path_max_rel_diff": check,
        "fit_seconds_bound": t_bound, "fit_seconds_unrestricted": t_full,
        "bound_path": bound, "test_residual_path": test_res, "train_residual_path": trace / m,
    }


# --------------------------------------------------------------------------------------------
# 2. KMP bound
# --------------------------------------------------------------------------------------------
def kmp_data(name, seed):
    from sklearn.datasets import load_diabetes, make_friedman1
    from sklearn.model_selection import train_test_split

    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.30, random_state=seed)
    else:
        X, y = make_friedman1(506, noise=1.0, random_state=seed)
        Xtr, Xte, ytr, yte = X[:450], X[450:], y[:450], y[450:]
    mu, sd = Xtr.mean(0), Xtr.std(0)
    ym, ys = ytr.mean(), ytr.std()
    return (Xtr - mu) / sd, (Xte - mu) / sd, (ytr - ym) / ys, (yte - ym) / ys


def kmp_run(name, seed, n_basis):
    Xtr, Xte, ytr, yte = kmp_data(name, seed)
    kw = dict(n_basis=n_basis, kernel="rbf", gamma=0.1, candidates="all", random_state=0, client="sync")
    full, t_full, w1 = H.timed_fit(KMPRegressor(**kw), Xtr, ytr)
    n = int(full.n_basis_)
    gamma_loss = float(np.std(ytr - full.predict(Xtr)))
    eb, t_b, w2 = H.timed_fit(KMPRegressor(stopping="bound", bound_threshold=gamma_loss, **kw), Xtr, ytr)
    err, mse, tr_err = [], [], []
    for k in range(n + 1):
        e = full.expansion_at(k)
        f = e.decision_function(Xte)[:, 0]
        err.append(float(np.mean(np.abs(f - yte) > gamma_loss)))
        mse.append(float(np.mean((f - yte) ** 2)))
        tr_err.append(int(np.sum(np.abs(e.decision_function(Xtr)[:, 0] - ytr) > gamma_loss)))
    recon = H.require_reconstruction(full.expansion_at(n).decision_function(Xte)[:, 0], full.predict(Xte),
                                     what=f"KMP {name} seed {seed}")
    bound = np.asarray(eb.bound_path_)
    kb, ke, km = int(np.argmin(bound)), int(np.argmin(err)), int(np.argmin(mse))
    nb = min(len(bound), len(tr_err))
    return {
        "dataset": name, "seed": seed, "m": len(ytr), "n_test": len(yte), "gamma_loss": gamma_loss,
        "n_basis_fitted": n, "k_bound_argmin": kb, "n_basis_bound_fit": int(eb.n_basis_),
        "k_test_error_argmin": ke, "k_test_mse_argmin": km,
        "test_error_at_bound_argmin": err[kb], "test_error_min": err[ke],
        "test_mse_at_bound_argmin": mse[kb], "test_mse_min": mse[km], "test_mse_at_nmax": mse[n],
        "bound_at_argmin": float(bound[kb]),
        "bound_errors_match_prefix_models": bool(np.array_equal(np.asarray(eb.bound_errors_[:nb]),
                                                                np.asarray(tr_err[:nb]))),
        "same_selection": bool(np.array_equal(eb.basis_indices_, full.basis_indices_[: eb.n_basis_])),
        "recon_max_abs_diff": recon, "fit_seconds": t_full, "fit_seconds_bound": t_b, "warnings": w1 + w2,
        "bound_path": bound, "bound_errors": eb.bound_errors_, "test_error_path": err, "test_mse_path": mse,
    }


# --------------------------------------------------------------------------------------------
# 3. KCCA
# --------------------------------------------------------------------------------------------
def held_out_corr(A, B, n=N_PAIRS):
    return [float(np.corrcoef(A[:, i], B[:, i])[0, 1]) for i in range(min(n, A.shape[1]))]


def dense_kcca(Xa, Xb, Ta, Tb, gamma, reg, n_pairs=N_PAIRS, tol=1e-10):
    """Regularised KCCA in the full kernel span (the sparse estimator's formulation, every row)."""
    from sklearn.metrics.pairwise import rbf_kernel

    def coords(X, T):
        K = rbf_kernel(X, X, gamma=gamma)
        w, U = np.linalg.eigh(K)
        keep = w > tol * w.max()
        w, U = w[keep], U[:, keep]
        P = U / np.sqrt(w)
        return K @ P, rbf_kernel(T, X, gamma=gamma) @ P  # orthonormal coordinates of the span

    A, At = coords(Xa, Ta)
    B, Bt = coords(Xb, Tb)
    ma, mb = A.mean(0), B.mean(0)
    n = len(A)
    Caa = A.T @ A / n - np.outer(ma, ma)
    Cbb = B.T @ B / n - np.outer(mb, mb)
    Cab = A.T @ B / n - np.outer(ma, mb)

    def inv_sqrt(C):
        C = (C + C.T) / 2
        lam = reg * np.trace(C) / len(C)
        w, U = np.linalg.eigh(C + lam * np.eye(len(C)))
        return (U / np.sqrt(np.maximum(w, 1e-300))) @ U.T

    Ra, Rb = inv_sqrt(Caa), inv_sqrt(Cbb)
    Uu, s, Wt = np.linalg.svd(Ra @ Cab @ Rb)
    Da, Db = Ra @ Uu[:, :n_pairs], Rb @ Wt.T[:, :n_pairs]
    return s[:n_pairs], (At - ma) @ Da, (Bt - mb) @ Db, (A.shape[1], B.shape[1])


def kcca_run(seed, n_train, ks, ds):
    from sklearn.cross_decomposition import CCA
    from sklearn.kernel_approximation import Nystroem
    from sklearn.model_selection import train_test_split

    Xtr, Xte = train_test_split(ds.X, test_size=0.30, random_state=seed)
    if n_train < len(Xtr):
        Xtr = np.random.default_rng(1000 + seed).permutation(Xtr)[:n_train]
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    xa, xb, ta, tb = Xtr[:, :32], Xtr[:, 32:], Xte[:, :32], Xte[:, 32:]
    g = 1.0 / 32
    out = {"seed": seed, "n_train": len(Xtr), "n_test": len(Xte), "sparse": {}, "nystroem_cca": {}}
    for k in ks:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            est = SparseKCCA(k, gamma_x=g, gamma_y=g, candidates="auto", random_state=seed).fit(xa, xb)
            secs = time.perf_counter() - t0
        Fx, Fy = est.transform(ta, tb)
        out["sparse"][k] = {"fit_seconds": secs, "n_components": int(est.n_components_),
                            "train_corr": est.correlations_[:N_PAIRS], "test_corr": held_out_corr(Fx, Fy),
                            "warnings": [str(x.message)[:200] for x in w]}
        est2 = SparseKCCA(k, gamma_x=g, gamma_y=g, reg=0.1, candidates="auto", random_state=seed).fit(xa, xb)
        Fx, Fy = est2.transform(ta, tb)
        out.setdefault("sparse_reg0.1", {})[k] = {"train_corr": est2.correlations_[:N_PAIRS],
                                                  "test_corr": held_out_corr(Fx, Fy)}
        t0 = time.perf_counter()
        na = Nystroem(gamma=g, n_components=k, random_state=seed).fit(xa)
        nb = Nystroem(gamma=g, n_components=k, random_state=seed).fit(xb)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cca = CCA(n_components=N_PAIRS, max_iter=2000).fit(na.transform(xa), nb.transform(xb))
        secs = time.perf_counter() - t0
        A, B = cca.transform(na.transform(ta), nb.transform(tb))
        At, Bt = cca.transform(na.transform(xa), nb.transform(xb))
        out["nystroem_cca"][k] = {"fit_seconds": secs, "train_corr": held_out_corr(At, Bt),
                                  "test_corr": held_out_corr(A, B), "warnings": [str(x.message)[:200] for x in w]}
        log(f"  kcca seed {seed} k={k}: sparse test {np.round(out['sparse'][k]['test_corr'][:3], 3)} "
            f"({out['sparse'][k]['fit_seconds']:.1f}s), "
            f"nystroem-cca {np.round(out['nystroem_cca'][k]['test_corr'][:3], 3)}")
    t0 = time.perf_counter()
    s, A, B, dims = dense_kcca(xa, xb, ta, tb, g, 1e-3)
    out["dense_kcca"] = {"fit_seconds": time.perf_counter() - t0, "span_dims": dims, "train_corr": s,
                         "test_corr": held_out_corr(A, B), "reg": 1e-3}
    s, A, B, dims = dense_kcca(xa, xb, ta, tb, g, 1e-1)
    out["dense_kcca_reg0.1"] = {"span_dims": dims, "train_corr": s, "test_corr": held_out_corr(A, B), "reg": 1e-1}
    log(f"  kcca seed {seed} dense: test {np.round(out['dense_kcca']['test_corr'][:3], 3)}, "
        f"reg 0.1: {np.round(out['dense_kcca_reg0.1']['test_corr'][:3], 3)}")
    return out


# --------------------------------------------------------------------------------------------
# 4. scale
# --------------------------------------------------------------------------------------------
def scale_run(n_rows, k, workdir):
    import logging

    from distributed import Client, LocalCluster

    from kmp_dask.datasets import make_regression_store, regression_rows

    path = str(Path(workdir) / "scale.zarr")
    t0 = time.perf_counter()
    make_regression_store(path, n_rows, n_features=20, chunk_rows=min(100_000, n_rows // 4), random_state=0)
    t_write = time.perf_counter() - t0
    log(f"  store {n_rows} x 20 written in {t_write:.1f}s")
    out = {"n_rows": n_rows, "n_features": 20, "dtype": "float32", "n_components": k, "candidates": "auto (59)",
           "gamma": 1 / 20, "store_write_seconds": t_write}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      memory_limit="4GB", silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        t0 = time.perf_counter()
        est = SparseKernelPCA(k, gamma=1 / 20, candidates="auto", random_state=0, client=client).fit(path)
        secs = time.perf_counter() - t0
    out["cluster"] = {"fit_seconds": secs, "seconds_per_component": secs / est.n_components_,
                      "n_passes": int(est.n_passes_), "seconds_per_pass": secs / est.n_passes_,
                      "n_components": int(est.n_components_), "stop_reason": est.stop_reason_,
                      "explained_variance_top5": est.explained_variance_[:5],
                      "trace_residual_fraction_at_k": float(est.trace_residual_path_[-1] / est.trace_residual_path_[0])}
    log(f"  cluster fit {secs:.1f}s ({secs / est.n_components_:.2f} s/component, {est.n_passes_} passes)")
    X = regression_rows(0, n_rows, n_features=20, random_state=0)[0]
    t0 = time.perf_counter()
    e2 = SparseKernelPCA(k, gamma=1 / 20, candidates="auto", random_state=0).fit(X)
    secs2 = time.perf_counter() - t0
    out["in_memory_numpy"] = {"fit_seconds": secs2, "seconds_per_component": secs2 / e2.n_components_,
                              "n_passes": int(e2.n_passes_), "seconds_per_pass": secs2 / e2.n_passes_,
                              "same_points_as_cluster_fit": bool(np.array_equal(e2.components_index_,
                                                                                est.components_index_))}
    out["cluster_over_in_memory"] = secs / secs2
    log(f"  in-memory fit {secs2:.1f}s; same points: {out['in_memory_numpy']['same_points_as_cluster_fit']}")
    return out


# --------------------------------------------------------------------------------------------
def summarise(res):
    s = {}
    if res.get("toy"):
        kb = [r["k_bound_argmin"] for r in res["toy"]]
        s["toy"] = {"k_bound_argmin_per_seed": kb, "k_bound_argmin_median": float(np.median(kb)),
                    "k_bound_argmin_range": [min(kb), max(kb)], "paper": 46, "true_dimension": 50,
                    "bound_above_test_residual_all_seeds": all(r["bound_above_test_residual_everywhere"]
                                                               for r in res["toy"])}
    if res.get("kmp"):
        s["kmp"] = {}
        for name in sorted({r["dataset"] for r in res["kmp"]}):
            rr = [r for r in res["kmp"] if r["dataset"] == name]
            s["kmp"][name] = {
                "k_bound_argmin": [r["k_bound_argmin"] for r in rr],
                "k_test_error_argmin": [r["k_test_error_argmin"] for r in rr],
                "k_test_mse_argmin": [r["k_test_mse_argmin"] for r in rr],
                "median_test_error_at_bound_argmin": float(np.median([r["test_error_at_bound_argmin"] for r in rr])),
                "median_test_error_min": float(np.median([r["test_error_min"] for r in rr])),
                "median_test_mse_at_bound_argmin": float(np.median([r["test_mse_at_bound_argmin"] for r in rr])),
                "median_test_mse_min": float(np.median([r["test_mse_min"] for r in rr])),
                "median_test_mse_at_nmax": float(np.median([r["test_mse_at_nmax"] for r in rr])),
                "median_bound_at_argmin": float(np.median([r["bound_at_argmin"] for r in rr])),
                "median_gamma_loss": float(np.median([r["gamma_loss"] for r in rr])),
            }
    if res.get("kcca"):
        ks = list(res["kcca"][0]["sparse"])
        def med(key, k=None, part="test_corr"):
            rows = [r[key][k][part] if k is not None else r[key][part] for r in res["kcca"]]
            return np.median(np.asarray(rows), axis=0)
        s["kcca"] = {"median_test_corr_first_pairs": {
            **{f"sparse_k{k}": med("sparse", k) for k in ks},
            **{f"nystroem_cca_k{k}": med("nystroem_cca", k) for k in ks},
            **{f"sparse_reg0.1_k{k}": med("sparse_reg0.1", k) for k in ks},
            "dense_kcca_reg1e-3": med("dense_kcca"), "dense_kcca_reg0.1": med("dense_kcca_reg0.1")},
            "median_fit_seconds": {
                **{f"sparse_k{k}": float(np.median([r["sparse"][k]["fit_seconds"] for r in res["kcca"]])) for k in ks},
                **{f"nystroem_cca_k{k}": float(np.median([r["nystroem_cca"][k]["fit_seconds"] for r in res["kcca"]]))
                   for k in ks},
                "dense_kcca": float(np.median([r["dense_kcca"]["fit_seconds"] for r in res["kcca"]]))}}
    return s


def plot(res, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 4, figsize=(22, 4.8))
    if res.get("toy"):
        r = res["toy"][0]
        a = ax[0]
        a.plot(r["bound_path"], label="compression bound (Cor. 1)")
        a.plot(r["test_residual_path"], label="test residual")
        a.plot(r["train_residual_path"], "--", label="training residual")
        a.axvline(r["k_bound_argmin"], color="k", ls=":", label=f"bound argmin k={r['k_bound_argmin']}")
        a.axvline(50, color="grey", ls="--", lw=0.7)
        a.set_yscale("log")
        a.set_xlabel("k (points chosen)")
        a.set_ylabel("mean squared residual")
        a.set_title(f"toy 1000x450 (50 coords x10), seed {r['seed']}")
        a.legend(fontsize=7)
    for j, name in enumerate(("diabetes", "friedman1")):
        rr = [r for r in res.get("kmp", []) if r["dataset"] == name]
        if not rr:
            continue
        r = rr[0]
        a = ax[1 + j]
        a.plot(np.asarray(r["bound_path"]) / 5, label="KMP bound (Thm 3) / 5")
        a.plot(r["test_error_path"], label=f"test Pr(|f-y|>γ), γ={r['gamma_loss']:.2f}")
        a.plot(r["test_mse_path"], label="test MSE (y standardised)")
        a.axvline(r["k_bound_argmin"], color="C0", ls=":")
        a.axvline(r["k_test_error_argmin"], color="C1", ls=":")
        a.set_ylim(0, max(1.2, min(3, np.nanmax(np.asarray(r["bound_path"]) / 5))))
        a.set_xlabel("basis size k")
        a.set_title(f"KMP {name} (m={r['m']}, test {r['n_test']}), seed {r['seed']}")
        a.legend(fontsize=7)
    if res.get("kcca"):
        a = ax[3]
        ks = list(res["kcca"][0]["sparse"])
        kk = [int(k) for k in ks]
        for p in range(N_PAIRS):
            a.plot(kk, [np.median([r["sparse"][k]["test_corr"][p] for r in res["kcca"]]) for k in ks], "o-",
                   color=f"C{p}", label=f"sparse KCCA pair {p + 1}")
            a.plot(kk, [np.median([r["nystroem_cca"][k]["test_corr"][p] for r in res["kcca"]]) for k in ks], "x--",
                   color=f"C{p}", label=f"Nystroem+CCA pair {p + 1}")
            a.axhline(np.median([r["dense_kcca"]["test_corr"][p] for r in res["kcca"]]), color=f"C{p}", lw=0.6)
        a.set_xlabel("k (sparse rows / Nystroem components)")
        a.set_ylabel("held-out canonical correlation")
        a.set_title("optdigits cols 0-31 vs 32-63 (thin lines: dense KCCA reg 1e-3)")
        a.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(args):
    t0 = time.perf_counter()
    cfg = QUICK if args.quick else FULL
    if args.rows:
        cfg = {**cfg, "scale_rows": args.rows}
    out = H.output_path(NAME, args.out, args.quick)
    res = {"benchmark": NAME, "quick": args.quick, "environment": H.environment(), "config": cfg,
           "protocol": __doc__, "partial": True}

    def save():
        res["summary"] = summarise(res)
        H.write_json(out, res)

    log("1. toy")
    res["toy"] = []
    for seed in range(cfg["toy_seeds"]):
        r = toy(seed, cfg["toy_kmax"])
        res["toy"].append(r)
        log(f"  seed {seed}: bound argmin {r['k_bound_argmin']}, "
            f"test residual there {r['test_residual_at_argmin']:.2f} (k=50: {r['test_residual_at_50']:.2f}), "
            f"trace check {r['train_residual_vs_trace_path_max_rel_diff']:.1e}")
    save()
    log("2. KMP bound")
    res["kmp"] = []
    for name in ("diabetes", "friedman1"):
        for seed in range(cfg["kmp_seeds"]):
            r = kmp_run(name, seed, cfg["kmp_nbasis"])
            res["kmp"].append(r)
            log(f"  {name} seed {seed}: bound argmin {r['k_bound_argmin']}, "
                f"test-error argmin {r['k_test_error_argmin']}, "
                f"MSE argmin {r['k_test_mse_argmin']}; t match {r['bound_errors_match_prefix_models']}")
    save()
    log("3. KCCA")
    from kmp_dask.datasets import load_keel

    ds = load_keel("optdigits")
    res["kcca"] = [kcca_run(seed, cfg["kcca_ntrain"], cfg["kcca_ks"], ds) for seed in range(cfg["kcca_seeds"])]
    save()
    if not args.skip_scale:
        log("4. scale")
        work = tempfile.mkdtemp(prefix="kmp-skpca-")
        try:
            res["scale"] = scale_run(cfg["scale_rows"], cfg["scale_k"], work)
        except Exception as exc:  # report what did not complete
            res["scale"] = {"error": repr(exc)[:500]}
            log(f"  scale failed: {exc!r}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    res["partial"] = False
    res["summary"] = summarise(res)
    H.finish(res, out, t0, None if args.no_plots else plot)


if __name__ == "__main__":
    main(ARGS)
