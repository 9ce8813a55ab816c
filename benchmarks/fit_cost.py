"""Where a fit's time goes: the engine choices of 2026-11-23, each against its alternative.

Every comparison runs both sides in the same process, single-threaded, client="sync", medians
over ``--repeats``; results go to benchmarks/results/fit_cost.json.

1. ``newton_refit``: other losses on satimage (6 classes, 385 atoms, γ = 4/d, SKMP s = 59,
   fit on the tuning part of quality_kmp.py's split): ``refit_every=1`` (a Newton refit each
   iteration, O(N·n²·m) each) vs ``"auto"`` (geometric schedule). Fit seconds and validation
   error.
2. ``residual_update``: squared loss on letter (26 classes, 400 atoms, γ = 0.125, s = 59, whole
   training split): rank-one residual updates (default, full recomputation every 32) vs a full
   recomputation ``R = Y − Bα`` every iteration (``RESYNC_EVERY = 0``). Fit seconds, and
   whether the basis and the test predictions agree.
3. ``cache_layout``: one partition's backfit products on 77,000 × 131 float32 columns —
   ``Bᵀd`` (float64 accumulation, :func:`_cross64`) and ``Bw`` — for a row-major cache at
   capacity 130 and 260 and a column-major cache at capacity 260.
4. ``satimage_regularisation``: squared-loss validation error at 385 atoms, γ = 4/d, for
   ridge ∈ {1e-10, 1e-6, 1e-5, 1e-4} (the side experiment quoted in benchmarks/notes/studies.md).

Usage: ``python benchmarks/fit_cost.py [--repeats 3] [--quick]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from _harness import log  # noqa: E402

H.set_threads(1, keep_existing=True)  # before numpy is imported

import numpy as np  # noqa: E402
from quality_kmp import load_task  # noqa: E402

from kmp_dask import KMPClassifier  # noqa: E402
from kmp_dask.blockops import cross64 as _cross64  # noqa: E402
from kmp_dask.greedy import _kmp as driver  # noqa: E402

NAME = "fit_cost"


def _fit(X, y, **kw):
    est, secs, _ = H.timed_fit(KMPClassifier(candidates=59, random_state=0, client="sync", **kw), X, y)
    return est, secs


def newton_refit(task, n_basis, repeats):
    out = {}
    gamma = 4.0 / task["X_tune"].shape[1]
    for loss in ("logistic", "squared_hinge"):
        for every in (1, "auto"):
            secs = []
            for _ in range(repeats):
                est, s = _fit(task["X_tune"], task["y_tune"], loss=loss, gamma=gamma, n_basis=n_basis,
                              refit_every=every)
                secs.append(s)
            err = float(np.mean(est.predict(task["X_val"]) != task["y_val"]))
            out[f"{loss}/refit_every={every}"] = {"fit_seconds": secs, "median_s": float(np.median(secs)),
                                                   "val_error": err, "n_basis_": int(est.n_basis_)}
            log(f"{loss} refit_every={every}: {np.median(secs):.1f} s, val error {err:.4f}")
        a, b = out[f"{loss}/refit_every=1"], out[f"{loss}/refit_every=auto"]
        out[f"{loss}/speedup_auto"] = a["median_s"] / b["median_s"]
    return out


def residual_update(task, n_basis, repeats):
    out = {}
    fits = {}
    for name, every in (("full_every_iteration", 0), ("rank_one_updates", driver.RESYNC_EVERY)):
        saved = driver.RESYNC_EVERY
        driver.RESYNC_EVERY = every
        try:
            secs = []
            for _ in range(repeats):
                est, s = _fit(task["X_train"], task["y_train"], gamma=0.125, n_basis=n_basis)
                secs.append(s)
        finally:
            driver.RESYNC_EVERY = saved
        fits[name] = est
        err = float(np.mean(est.predict(task["X_test"]) != task["y_test"]))
        out[name] = {"resync_every": every, "fit_seconds": secs, "median_s": float(np.median(secs)),
                     "test_error": err}
        log(f"letter26 {name}: {np.median(secs):.2f} s, test error {err:.4f}")
    a, b = fits["full_every_iteration"], fits["rank_one_updates"]
    out["same_basis"] = bool(np.array_equal(a.basis_indices_, b.basis_indices_))
    out["max_abs_decision_diff"] = float(np.abs(a.decision_function(task["X_test"])
                                                - b.decision_function(task["X_test"])).max())
    out["speedup"] = out["full_every_iteration"]["median_s"] / out["rank_one_updates"]["median_s"]
    return out


def _time(fn, repeats=20):
    fn()
    t = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t) / repeats


def cache_layout(rows=77_000, n=131):
    rng = np.random.default_rng(0)
    d = rng.random(rows)
    w = rng.random(n).astype(np.float32)
    out = {}
    for order, cap in (("C", 130), ("C", 260), ("F", 260)):
        ncol = min(n, cap)
        full = np.empty((rows, cap), dtype=np.float32, order=order)
        full[:] = rng.random((rows, cap), dtype=np.float32)
        B = full[:, :ncol]
        scratch = np.empty(2048 * cap)
        key = f"{'row' if order == 'C' else 'column'}-major, capacity {cap}, {ncol} columns"
        out[key] = {"cross64_ms": 1e3 * _time(lambda B=B, scratch=scratch: _cross64(B, d, scratch)),
                    "gemv_ms": 1e3 * _time(lambda B=B, ncol=ncol: B @ w[:ncol])}
        log(f"{key}: Bᵀd {out[key]['cross64_ms']:.1f} ms, Bw {out[key]['gemv_ms']:.1f} ms")
    return out


def satimage_regularisation(task, n_basis):
    out = {}
    gamma = 4.0 / task["X_tune"].shape[1]
    for ridge in (1e-10, 1e-6, 1e-5, 1e-4):
        est, s = _fit(task["X_tune"], task["y_tune"], gamma=gamma, n_basis=n_basis, ridge=ridge)
        out[str(ridge)] = float(np.mean(est.predict(task["X_val"]) != task["y_val"]))
        log(f"satimage squared ridge={ridge:g}: val error {out[str(ridge)]:.4f}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repeat (smoke test)")
    H.add_common_args(p, NAME, plots=False, threads=False)
    args = p.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    sat_n, let_n = (60, 60) if args.quick else (385, 400)
    out_path = H.output_path(NAME, args.out, args.quick)
    t0 = time.perf_counter()
    sat, let = load_task("satimage"), load_task("letter26")
    res = {
        "benchmark": NAME,
        "environment": H.environment(),
        "protocol": __doc__,
        "repeats": repeats,
        "newton_refit": newton_refit(sat, sat_n, repeats),
        "residual_update": residual_update(let, let_n, repeats),
        "cache_layout": cache_layout(),
        "satimage_regularisation": satimage_regularisation(sat, sat_n),
    }
    res["total_seconds"] = time.perf_counter() - t0
    H.write_json(out_path, res)
    log(f"wrote {out_path} in {res['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
