#!/usr/bin/env python
"""The papers' forms against the code's: §3.6 chunking (cyclic vs tree) and the lossy ℓ0 step.

Questions: (1) Weston & Bakır §3.6 compress one piece of the expansion at a time
against the *full* w with the other pieces fixed, cycling through the pieces
(``chunking="cyclic"``); the code's default compresses each piece against its own part of w and
merges up a tree (``chunking="tree"``). Which approximates w better, and at what cost? (2) The
paper's lossy ℓ0 step penalises ``γ Σ λ_i β_i``; the code's default ``γ ‖λ‖²``. What does each
give along the γ grid?

Protocol (one BLAS thread, this process, ``client=None``; wall times of ``fit``):

1. **Chunking.** Models: (a) ``KernelRidge(rbf, alpha=0.1, gamma=0.1)`` on
   ``make_friedman1(n_samples=N + 2000, noise=1.0, random_state=seed)`` (X standardised, y
   centred; N training rows = N terms, the rest for test MSE); (b) ``SVC(rbf, C=10, gamma=0.2)``
   on ``make_classification(n_samples=N + 2000, n_features=10, n_informative=6, flip_y=0.1,
   random_state=seed)`` (X standardised; every support vector a term; test accuracy). Each is
   compressed (pool = its own terms, default eq.-13 criterion) to ``keep`` = 5 % of its terms by
   one greedy run over all terms (``chunk_vectors=None``: the reference) and by
   ``chunk_vectors`` ∈ {N/6, N/3} (rounded) × ``chunking`` ∈ {tree, cyclic} × ``refine`` ∈
   {False, True}. Recorded: relative RKHS error ``Σ rkhs_error_ / Σ wsq_``, fit seconds, the
   test metric, and for the cyclic runs the error after each sweep from both starts of
   ``reduced._cyclic.cyclic_chunking`` (``"zero"``, the estimator's: ŵ = 0; ``"model"``: ŵ = w,
   the pieces not yet visited keep their α). Seeds ``--seeds``.
2. **ℓ0 lossy step.** An ``SVC(rbf, C=10, gamma=0.2)`` on ``make_classification(n_samples=600,
   n_features=8, random_state=seed)``; pool = its support vectors; ``method="l0"`` with
   ``l0_step`` ∈ {ridge, paper} on the default γ grid (ridge) and on the same grid for the paper's
   step; per step the path's levels (size, relative RKHS error) and the fit seconds.

Usage::

    python benchmarks/reduced_chunking.py             # full run (a few minutes on 2 cores)
    python benchmarks/reduced_chunking.py --quick     # smoke test, writes to $TMPDIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "reduced_chunking"


def _add_arguments(p):
    p.add_argument("--quick", action="store_true", help="small models, one seed")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--n-terms", type=int, default=3000, help="training rows of each model (default 3000)")


def _models(n, seed):
    from sklearn.datasets import make_classification, make_friedman1
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.svm import SVC

    X, y = make_friedman1(n_samples=n + 2000, noise=1.0, random_state=seed)
    X = (X - X[:n].mean(0)) / X[:n].std(0)
    y = y - y[:n].mean()
    krr = KernelRidge(kernel="rbf", alpha=0.1, gamma=0.1).fit(X[:n], y[:n])
    Xc, yc = make_classification(n_samples=n + 2000, n_features=10, n_informative=6, flip_y=0.1, random_state=seed)
    Xc = (Xc - Xc[:n].mean(0)) / Xc[:n].std(0)
    svc = SVC(kernel="rbf", C=10.0, gamma=0.2).fit(Xc[:n], yc[:n])
    return {"friedman_krr": (krr, X[n:], y[n:], "test_mse"), "classification_svc": (svc, Xc[n:], yc[n:], "test_acc")}


def _metric(comp, X, y, kind):
    import numpy as np

    if kind == "test_mse":
        return float(np.mean((comp.predict(X) - y) ** 2))
    return float(np.mean(comp.predict(X) == y))


def _one(model, X_test, y_test, kind, **params):
    from kmp_dask.reduced import ReducedSetCompressor

    t0 = time.perf_counter()
    comp = ReducedSetCompressor(**params).fit(model)
    seconds = time.perf_counter() - t0
    row = {**params, "seconds": seconds, "n_vectors_": int(comp.n_vectors_),
           "rkhs_error_rel": float(comp.rkhs_error_.sum() / comp.wsq_.sum()), kind: _metric(comp, X_test, y_test, kind)}
    return row


def _cyclic_history(model, piece, keep, start):
    """The cyclic form's relative error after each sweep and its seconds, from ``start``."""
    from kmp_dask.reduced import as_compression_target
    from kmp_dask.reduced._cyclic import cyclic_chunking

    exp = as_compression_target(model).expansion
    t0 = time.perf_counter()
    res = cyclic_chunking(exp, piece_vectors=piece, keep=keep, start=start)
    seconds = time.perf_counter() - t0
    wsq = float(exp.rkhs_sqnorm().sum())
    return [h / wsq for h in res.history], seconds


def chunking_part(args):
    rows = []
    for seed in args.seeds:
        for name, (model, Xt, yt, kind) in _models(args.n_terms, seed).items():
            n_terms = as_terms(model)
            keep = max(2, round(0.05 * n_terms))
            H.log(f"{name} seed {seed}: {n_terms} terms -> {keep}")
            base = {"model": name, "seed": seed, "n_terms": n_terms}
            rows.append({**base, **_one(model, Xt, yt, kind, n_vectors=keep)})
            for piece in sorted({round(n_terms / 6), round(n_terms / 3)}):
                if piece <= keep:
                    continue
                for chunking in ("tree", "cyclic"):
                    for refine in (False, True):
                        row = _one(model, Xt, yt, kind, n_vectors=keep, chunk_vectors=piece, chunking=chunking,
                                   refine=refine)
                        if chunking == "cyclic" and not refine:
                            for start in ("zero", "model"):
                                hist, secs = _cyclic_history(model, piece, keep, start)
                                row[f"start_{start}"] = {"sweeps_rkhs_error_rel": hist, "seconds": secs}
                        rows.append({**base, **row})
                        H.log(f"  {chunking:6s} piece {piece} refine {refine}: rel {row['rkhs_error_rel']:.4f} "
                              f"{row['seconds']:.2f}s")
    return rows


def as_terms(model):
    from kmp_dask.reduced import as_compression_target

    return int(as_compression_target(model).expansion.n_vectors)


def l0_part(args):
    import numpy as np
    from sklearn.datasets import make_classification
    from sklearn.svm import SVC

    from kmp_dask.reduced import ReducedSetCompressor, as_compression_target, l0_path

    out = []
    for seed in args.seeds:
        X, y = make_classification(n_samples=300 if args.quick else 600, n_features=8, random_state=seed)
        X = (X - X.mean(0)) / X.std(0)
        svc = SVC(kernel="rbf", C=10.0, gamma=0.2).fit(X, y)
        exp = as_compression_target(svc).expansion
        Z = exp.support_vectors
        K = exp.kernels[0](Z, Z)
        f = exp.with_coef(exp.coef, 0.0).decision_function(Z)
        wsq = np.einsum("ij,ij->j", exp.coef, f)
        for step in ("ridge", "paper"):
            t0 = time.perf_counter()
            levels = l0_path(K, f, wsq, n_levels=None, max_iter=300, step=step)
            seconds = time.perf_counter() - t0
            comp = ReducedSetCompressor(1.0 - 1e-9, method="l0", l0_step=step).fit(svc)
            out.append({"seed": seed, "step": step, "n_terms": len(Z), "seconds": seconds,
                        "levels": [{"n_vectors": lv.n_vectors, "param": lv.param,
                                    "rkhs_error_rel": float(lv.rkhs_error.sum() / wsq.sum())} for lv in levels],
                        "compressor_n_levels": len(comp.path_)})
            H.log(f"l0 {step} seed {seed}: sizes {[lv.n_vectors for lv in levels]}")
    return out


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _add_arguments, argv)
    if args.quick:
        args.seeds, args.n_terms = args.seeds[:1], 900
    t0 = time.perf_counter()
    result = {"environment": H.environment(), "protocol": __doc__.split("Usage::")[0].strip(),
              "chunking": chunking_part(args), "l0": l0_part(args)}
    H.finish(result, H.output_path(NAME, args.out, args.quick), t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
