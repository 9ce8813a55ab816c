"""Where a backfit pass with several atoms per pass spends its time, against this machine's roofline.

Data as benchmarks/svc_race.py (``make_classification(n_samples=7·10⁴, n_features=54,
n_informative=20, random_state=0)``, 5·10⁴ training rows, standardised, float32, RBF γ = 1/54).
One ``KMPClassifier(fit_mode="backfit", atoms_per_pass=k, n_basis=--n-basis, candidates="auto")``
fit in process (``--repeats`` fits, the median per step), each step timed by wrapping the
library's own functions (exclusive times: a kernel block inside the scoring pass counts as
"candidate kernel block", not as "candidate inner products"):

==========================  ===============================================================
step                        functions (module ``kmp_dask.blockops._kmp`` unless named)
==========================  ===============================================================
candidate kernel block      ``kernel_block`` called by ``_score_candidates``: k·s columns a pass
                            (``_score_factored`` with ``atoms_per_pass > 1``: kernel and reductions)
candidate inner products    ``_score_candidates`` itself: ``KᵀR`` and ``ΣK²`` over the block
block pass: columns         ``kernel_block`` called by ``kmp_block_stats`` (2k kept candidates)
block pass: products        ``kmp_block_stats`` itself: ``DᵀD``, ``DᵀB`` (float64), ``DᵀR``, ``DᵀY``
basis-column updates        ``pend_column`` + ``accept_column`` (the batch's columns into the
                            cache) and ``set_coef`` (the residual ``R = Y − Bα`` recomputed)
rest of the scoring pass    ``kmp_score`` minus the above (‖R‖², ΣR, row fetches)
driver                      ``greedy._kmp_blocks.admit_block`` minus its data pass (Cholesky
                            appends, solves, the exact in-batch scores)
other                       the fit's wall time minus all of the above (sampling, engine, setup)
==========================  ===============================================================

The roofline is measured in the same run, one thread: float32 GEMM GFlop/s at the candidate
block's shape (rows × d @ d × k·s), float64 GEMM GFlop/s at the block pass's shape
(2k × rows @ rows × n̄), the float32 ``exp`` rate (elements/s; numpy's SIMD exp, the kernel's
elementwise floor) and a memory copy's GB/s (a 256 MiB array). Each step's model counts (bytes
read or written in main memory and flops, per atom; N rows, d features, s candidates per atom,
k atoms per pass, c = 2k kept, n̄ mean basis size, m = 1 output) give the step's roofline time
``max(bytes / copy rate, flops / GEMM rate) + exp count / exp rate``; the JSON holds the counts,
the roofline time and the measured time per atom, and their ratio.

Usage: ``python benchmarks/kmp_roofline.py [--rows 70000] [--n-basis 400] [--atoms-per-pass 8] [--compare-exact]
[--repeats 1] [--quick]``. JSON: benchmarks/results/kmp_roofline.json.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from svc_race import data

NAME = "kmp_roofline"
STEPS = ("candidate kernel block", "candidate inner products", "block pass: columns", "block pass: products",
         "basis-column updates", "rest of the scoring pass", "driver", "other")


def add_arguments(p):
    p.add_argument("--rows", type=int, default=70_000)
    p.add_argument("--n-basis", type=int, default=400)
    p.add_argument("--atoms-per-pass", type=int, default=8)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="7,000 rows, 64 atoms (JSON to $TMPDIR)")
    p.add_argument("--compare-exact", action="store_true",
                   help="alternate each fit with one whose scoring pass uses the exact kernel block (A/B)")


# -- the machine ---------------------------------------------------------------------------------
def _best(f, repeats=7):
    """The fastest of ``repeats`` calls (the rate the machine gives when the load lets it)."""
    f()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts)


def machine(N, d, ks, c, nbar):
    """Measured rates: GEMM float32 / float64 GFlop/s, exp float32 elements/s, copy GB/s (best and median)."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = min(N, 5000)
    X = rng.standard_normal((rows, d)).astype(np.float32)
    Z = rng.standard_normal((ks, d)).astype(np.float32)
    K = np.empty((rows, ks), np.float32)
    g32 = _best(lambda: np.matmul(X, Z.T, out=K))
    D = rng.standard_normal((rows, c))
    B = rng.standard_normal((rows, max(nbar, 1)))
    g64 = _best(lambda: D.T @ B)
    E0 = -rng.random((rows, ks)).astype(np.float32) * 3
    E = np.empty_like(E0)
    ex = _best(lambda: np.exp(E0, out=E))
    A = np.ones(1 << 25)  # 256 MiB float64
    A2 = np.empty_like(A)
    cp = _best(lambda: np.copyto(A2, A), 5)
    out = {}
    for key, (best, med), scale in (("gemm_f32_gflops", g32, 2 * rows * d * ks / 1e9),
                                    ("gemm_f64_gflops", g64, 2 * rows * c * max(nbar, 1) / 1e9),
                                    ("exp_f32_gelements_per_s", ex, rows * ks / 1e9),
                                    ("copy_gbytes_per_s", cp, 2 * A.nbytes / 1e9)):
        out[key] = scale / best
        out[key + "_median"] = scale / med
    return out


# -- the model -------------------------------------------------------------------------------------
def model(N, d, s, k, nbar, m=1):
    """Bytes (main memory) and flops per atom of each step, and the exp count (see the module doc)."""
    c = 2 * k
    ks = k * s
    return {
        # GEMM X·Zᵀ (X read once a pass), the block written, read and written by the elementwise
        # pass (~10 flops an element besides exp), read by KᵀR and ΣK²
        "candidate kernel block": {"bytes": (N * d * 4 + 3 * N * ks * 4) / k,
                                   "flops": (2 * N * d * ks + 10 * N * ks) / k, "exp": N * ks / k, "gemm": "f32"},
        "candidate inner products": {"bytes": N * ks * 4 / k, "flops": (2 * N * ks * m + 2 * N * ks) / k, "exp": 0,
                                     "gemm": "f32"},
        # c columns one kernel call each (a GEMV over X each), then c x (c + n̄ + 2m) products; B
        # read in float32 and copied to float64 scratch (written, read)
        "block pass: columns": {"bytes": c * N * d * 4 / k, "flops": c * (2 * N * d + 10 * N) / k, "exp": c * N / k,
                                "gemm": "f32"},
        "block pass: products": {"bytes": (N * nbar * (4 + 8 + 8) + N * c * 8) / k,
                                 "flops": 2 * N * c * (c + nbar + 2 * m) / k, "exp": 0, "gemm": "f64"},
        # k columns pended (a kernel GEMV each over X), copied into the cache; R = Y − Bα reads B once a pass
        "basis-column updates": {"bytes": (N * d * 4 + 2 * N * 4) + N * nbar * 4 / k,
                                 "flops": 2 * N * d + 10 * N + 2 * N * nbar * m / k, "exp": N, "gemm": "f32"},
        "rest of the scoring pass": {"bytes": 2 * N * m * 8 / k, "flops": 3 * N * m / k, "exp": 0, "gemm": "f64"},
        "driver": {"bytes": 0, "flops": (nbar * nbar * (1 + m) + c * (nbar + c) * m), "exp": 0, "gemm": "f64"},
    }


def roofline_seconds(step, rates):
    gf = rates["gemm_f32_gflops"] if step["gemm"] == "f32" else rates["gemm_f64_gflops"]
    return max(step["bytes"] / (rates["copy_gbytes_per_s"] * 1e9), step["flops"] / (gf * 1e9)) \
        + step["exp"] / (rates["exp_f32_gelements_per_s"] * 1e9)


# -- the timers ------------------------------------------------------------------------------------
class Timers:
    """Exclusive seconds per label for wrapped functions (a stack of running timers)."""

    def __init__(self):
        self.seconds, self.stack, self.undo = {}, [], []

    def wrap(self, module, name, label):
        f = getattr(module, name)

        @functools.wraps(f)
        def timed(*a, **kw):
            lab = label(self.stack) if callable(label) else label
            self.stack.append([lab, 0.0])
            t = time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                dt = time.perf_counter() - t
                _, inner = self.stack.pop()
                self.seconds[lab] = self.seconds.get(lab, 0.0) + dt - inner
                if self.stack:
                    self.stack[-1][1] += dt

        setattr(module, name, timed)
        self.undo.append((module, name, f))

    def restore(self):
        for module, name, f in reversed(self.undo):
            setattr(module, name, f)
        self.undo = []


def _kernel_label(stack):
    outer = stack[-1][0] if stack else None
    return {"candidate inner products": "candidate kernel block", "block pass: products": "block pass: columns",
            }.get(outer, "basis-column updates")


def timed_fit(Xtr, ytr, n_basis, k, exact=False):
    import kmp_dask.blockops._kmp as B
    import kmp_dask.greedy._kmp as G
    import kmp_dask.greedy._kmp_blocks as KB
    from kmp_dask import KMPClassifier

    T = Timers()
    T.wrap(G, "kmp_score", "rest of the scoring pass")  # the pursuit sends its own reference
    T.wrap(B, "_score_candidates", "candidate inner products")
    T.wrap(B, "_score_factored", "candidate kernel block")  # factored scoring: the reductions are fused in
    T.wrap(KB, "kmp_block_stats", "block pass: products")
    T.wrap(B, "kernel_block", _kernel_label)
    for name in ("pend_column", "accept_column", "set_coef"):
        T.wrap(B, name, "basis-column updates")
    T.wrap(KB, "admit_block", "driver")
    if exact:  # the exact kernel block in the scoring pass (as with one atom per pass), for the A/B
        T.undo.append((B, "_factored_gamma", B._factored_gamma))
        B._factored_gamma = lambda st, Z_sq: None
    try:
        est = KMPClassifier(fit_mode="backfit", n_basis=n_basis, gamma=1 / 54, atoms_per_pass=k, random_state=0)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        total = time.perf_counter() - t
    finally:
        T.restore()
    sec = dict(T.seconds)
    sec["other"] = total - sum(sec.values())
    return total, sec, int(est.n_basis_)


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    rows, n_basis = (7_000, 64) if args.quick else (args.rows, args.n_basis)
    k, s = args.atoms_per_pass, 59
    t0 = time.perf_counter()
    Xtr, _, ytr, _ = data(rows)
    N, d = Xtr.shape
    res = {"name": NAME, "environment": H.environment(), "rows_train": N, "features": d, "n_basis": n_basis,
           "atoms_per_pass": k, "candidates_per_atom": s, "fits": [], "fits_exact_scoring": []}
    rates_before = machine(N, d, k * s, 2 * k, n_basis // 2)
    for rep in range(args.repeats):
        for exact in (False, True) if args.compare_exact else (False,):
            total, sec, nb = timed_fit(Xtr, ytr, n_basis, k, exact)
            res["fits" if not exact else "fits_exact_scoring"].append(
                {"fit_seconds": total, "seconds": sec, "n_basis": nb, "load_average": list(os.getloadavg())})
            H.log(f"fit {rep}{' (exact scoring)' if exact else ''}: {total:.1f}s "
                  + ", ".join(f"{a} {b:.1f}s" for a, b in sec.items()))
    if args.compare_exact:
        ex = res["fits_exact_scoring"]
        res["exact_scoring"] = {"median_fit_seconds": statistics.median(f["fit_seconds"] for f in ex),
                                "steps_ms_per_atom": {n: 1e3 * statistics.median(f["seconds"].get(n, 0.0) for f in ex)
                                                      / n_basis for n in STEPS}}
    rates_after = machine(N, d, k * s, 2 * k, n_basis // 2)
    rates = {key: max(rates_before[key], rates_after[key]) for key in rates_before}
    res["machine"] = {"before_fits": rates_before, "after_fits": rates_after, "used": rates}
    mdl = model(N, d, s, k, n_basis / 2)
    fit_med = statistics.median(f["fit_seconds"] for f in res["fits"])
    steps = {}
    for name in STEPS:
        t = statistics.median(f["seconds"].get(name, 0.0) for f in res["fits"]) / n_basis
        row = {"measured_seconds_per_atom": t, "share_of_fit": t * n_basis / fit_med}
        if name in mdl:
            m = mdl[name]
            row.update({"bytes_per_atom": m["bytes"], "flops_per_atom": m["flops"], "exp_per_atom": m["exp"],
                        "roofline_seconds_per_atom": roofline_seconds(m, rates)})
            row["measured_over_roofline"] = (t / row["roofline_seconds_per_atom"]
                                             if row["roofline_seconds_per_atom"] else None)
        steps[name] = row
        H.log(f"{name:26s} {1e3 * t:8.2f} ms/atom ({100 * row['share_of_fit']:4.1f}%)"
              + (f", roofline {1e3 * row['roofline_seconds_per_atom']:.2f} ms"
                 if "roofline_seconds_per_atom" in row else ""))
    res["steps"] = steps
    res["median_fit_seconds"] = fit_med
    if args.compare_exact:
        res["factored_over_exact_fit"] = fit_med / res["exact_scoring"]["median_fit_seconds"]
        H.log(f"factored / exact scoring fit time: {res['factored_over_exact_fit']:.3f}")
    res["seconds_per_atom"] = fit_med / n_basis
    res["roofline_seconds_per_atom"] = sum(v.get("roofline_seconds_per_atom", 0.0) for v in steps.values())
    res["load_average_at_end"] = list(os.getloadavg())
    H.log(f"machine: {rates}")
    H.finish(res, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
