"""Speed of one stochastic-KMP iteration on the engine vs the in-memory numpy pass.

Issue target: one SKMP iteration (s = 59) at N = 10⁶, d = 54 on LocalCluster(2 workers ×
1 thread) costs at most 1.5× the in-memory numpy pass over the same data, measured in the same
run: kernel block (GEMM + exp) + reductions (Kᵀ R, Σ K²) + residual update R = Y − B α.
Per-iteration time vs iteration number must stay flat apart from the O(N·n) residual term.

What is timed
-------------
* ``numpy``: the driver process holds X (N × d float32) and Y (N × m) in memory and runs the
  pass above with plain numpy (its BLAS may use both cores), at basis sizes n = 1 and n = n_max
  (the residual update is the only part that grows with n). Median over repeats.
* ``engine``: ``KMPClassifier(candidates=59)`` fitted from a zarr store on a process
  LocalCluster (2 workers × 1 thread), per-iteration wall time from ``history_`` (the step pass,
  the commit call and the driver's Cholesky update). Median over the iterations near n = 1 and
  near n = n_max, and a linear fit of time vs iteration.

Both run the same data in the same process tree, so the ratio is what the machine says, not a
guess. Results go to benchmarks/results/speed_kmp.json and speed_kmp.png (``--quick``: a smoke
test on 50,000 rows, 10 atoms, written to $TMPDIR/kmp_dask_benchmarks/).

Usage: ``python benchmarks/speed_kmp.py [--rows 1000000] [--n-basis 60] [--repeats 5] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "speed_kmp"
QUICK = {"rows": 50_000, "n_basis": 10, "repeats": 2}


def numpy_pass(X, X_sq, Y, Z, B, coef, gamma):
    """The in-memory reference: kernel block, reductions and residual update, plain numpy."""
    R = Y - B @ coef.astype(B.dtype) if B.shape[1] else Y.copy()
    Z_sq = np.einsum("ij,ij->i", Z, Z)
    K = X @ Z.T
    K *= -2.0
    K += X_sq[:, None]
    K += Z_sq[None, :]
    np.maximum(K, 0.0, out=K)
    K *= -gamma
    np.exp(K, out=K)
    corr = K.T @ R.astype(K.dtype)
    sqn = np.einsum("ij,ij->j", K, K)
    return corr, sqn


def time_numpy(X, Y, n_basis_list, s, gamma, repeats, rng):
    X_sq = np.einsum("ij,ij->i", X, X)
    out = {}
    for n in n_basis_list:
        B = np.exp(-rng.random((X.shape[0], n), dtype=np.float32))
        coef = rng.normal(size=(n, Y.shape[1]))
        times = []
        for _ in range(repeats):
            Z = X[rng.choice(X.shape[0], s, replace=False)]
            t0 = time.perf_counter()
            numpy_pass(X, X_sq, Y, Z, B, coef, gamma)
            times.append(time.perf_counter() - t0)
        out[n] = {"median_s": float(np.median(times)), "all_s": times}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=54)
    ap.add_argument("--n-basis", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--store", default=None, help="reuse/create the synthetic store here")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke test: {QUICK['rows']:,} rows, {QUICK['n_basis']} atoms, {QUICK['repeats']} repeats")
    H.add_common_args(ap, NAME, plots=False, threads=False)
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    out = H.output_path(NAME, args.out, args.quick)

    from distributed import Client, LocalCluster

    from kmp_dask import KMPClassifier
    from kmp_dask.datasets import make_classification_store
    from kmp_dask.store import open_store

    s = 59
    tmp = tempfile.TemporaryDirectory(prefix="kmp-speed-")
    path = args.store or os.path.join(tmp.name, "synthetic.zarr")
    t0 = time.perf_counter()
    if args.store and os.path.exists(path):
        store = open_store(path)
    else:
        store = make_classification_store(path, args.rows, n_features=args.features, n_classes=7,
                                          random_state=0, dtype="float32")
    ingest_s = time.perf_counter() - t0
    print(f"store: {store!r}, {len(store.row_chunks)} chunks, written in {ingest_s:.1f} s")
    gamma = 1.0 / args.features

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        clf = KMPClassifier(n_basis=args.n_basis, candidates=s, gamma=gamma, random_state=0, client=client)
        t0 = time.perf_counter()
        clf.fit(store)
        fit_s = time.perf_counter() - t0
    secs = np.array([h["seconds"] for h in clf.history_])
    m = len(clf.classes_)
    print(f"engine fit: {fit_s:.1f} s total, {len(secs)} iterations, median {np.median(secs):.3f} s/iter")

    X, y = store.read_range(0, store.n_rows)
    Y = np.where(y[:, None] == np.arange(m)[None, :], 1.0, -1.0)
    rng = np.random.default_rng(0)
    ref = time_numpy(X, Y, [1, args.n_basis], s, gamma, args.repeats, rng)
    del X

    k = max(3, len(secs) // 6)
    early, late = float(np.median(secs[1 : 1 + k])), float(np.median(secs[-k:]))
    slope, intercept = np.polyfit(np.arange(len(secs)), secs, 1)
    ratio_early = early / ref[1]["median_s"]
    ratio_late = late / ref[args.n_basis]["median_s"]
    result = {
        "benchmark": "speed_kmp",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "environment": H.environment(),
        "quick": bool(args.quick),
        "data": {"rows": store.n_rows, "features": store.n_features, "dtype": str(store.dtype),
                 "chunks": len(store.row_chunks), "classes": m, "ingest_seconds": ingest_s},
        "engine": {"workers": args.workers, "threads_per_worker": 1, "s": s, "n_basis": args.n_basis,
                   "fit_seconds": fit_s, "iteration_seconds": secs.tolist(),
                   "median_first_iters_s": early, "median_last_iters_s": late,
                   "linear_fit_s_per_iteration": float(slope), "linear_fit_intercept_s": float(intercept)},
        "numpy_reference": {str(n): v for n, v in ref.items()},
        "ratio_engine_vs_numpy_at_n1": ratio_early,
        "ratio_engine_vs_numpy_at_nmax": ratio_late,
        "target_ratio": 1.5,
        "target_met": bool(max(ratio_early, ratio_late) <= 1.5),
    }
    H.write_json(out, result)
    H.log(f"wrote {out}: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in result.items() if k.startswith(("ratio", "target"))))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(secs) + 1), secs, ".-", label=f"engine ({args.workers} workers × 1 thread)")
    ax.plot([1, args.n_basis], [ref[1]["median_s"], ref[args.n_basis]["median_s"]], "s--",
            label="in-memory numpy pass (same run)")
    ax.set_xlabel("iteration (basis size n)")
    ax.set_ylabel("seconds per iteration")
    ax.set_title(f"SKMP s={s}, N={store.n_rows:,}, d={store.n_features}, m={m}")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    tmp.cleanup()


if __name__ == "__main__":
    main()
