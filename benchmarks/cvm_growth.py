"""How CVMClassifier()'s fit time grows with N on the covertype-like data (acceptance: linear from 10⁵ to 10⁶).

Data: ``make_classification(n_features=54, n_informative=20, random_state=0)``, 2 classes, float32.
Default (**nested**): ONE draw of max(sizes) + test rows; the last ``--test-rows`` rows are the
held-out set of every size and each size trains on the first N rows of the rest (the generator
shuffles, so each prefix is a random sample of the same problem and the sizes are nested), each
standardised on its own training rows. ``--per-size-draw`` is the first protocol
(``cvm_speed._data``: a fresh draw of N + test rows per size) — scikit-learn's generator draws its
covariance transforms after the samples, so there each size is a *different* problem and accuracies
across sizes do not compare (the 2026-11-26 session-5 table fell from 0.96 to 0.87 that way).
For each size in ``--sizes`` (ascending), one in-process ``CVMClassifier(random_state=0)`` fit with
its defaults (``cvm_speed.fit_cvm``): fit seconds, core vectors, distance passes, full passes,
held-out accuracy, seconds per 10⁵ rows, and the growth exponent ``log(t₂/t₁) / log(N₂/N₁)``
between consecutive sizes and from the first size (1: linear). The JSON is written after every
size, so a run cut short keeps what it measured. The sizes run one after the other on a shared
machine: the load at each fit's start and end is recorded beside it.

``--reference``: beside each CVM fit, Nystroem(500) + RidgeClassifier on the same rows — the
generator's problem changes with the row count, so accuracies are compared against it.

``--seed S``: the generator's ``random_state`` (0, the default, is the benchmark's draw; probes of
the defaults tune on another seed). ``--C 1,0.5``: fit each size at each of these ``C`` (floats,
``auto``, ``default`` — the class default, the only fit without ``--C`` — or ``N0/N``, the float
``min(1, N0 / N)`` with ``--n0``); the exponents compare fits at the same ``C`` (with ``--C N0/N``
alone, all fits). ``--eps``: the same for eps (``1e-3*N0/N``: ``1e-3 · min(1, N0 / N)``).
``--draw-rows M``: the nested draw has M + test rows whatever ``--sizes`` is, so runs of different
sizes (e.g. in parallel) share one problem and one test set.

Usage: ``python benchmarks/cvm_growth.py [--sizes 100000,200000,400000,1000000] [--reference]
[--per-size-draw] [--seed 0] [--C default] [--quick]``
(``--quick``: 5,000 and 10,000 rows, JSON to $TMPDIR). JSON: benchmarks/results/cvm_growth.json.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from cvm_speed import _data, fit_cvm

NAME = "cvm_growth"


def add_arguments(p):
    p.add_argument("--sizes", default="100000,200000,400000,1000000", help="training rows, comma-separated")
    p.add_argument("--test-rows", type=int, default=20_000)
    p.add_argument("--quick", action="store_true", help="5,000 and 10,000 rows (smoke test, JSON to $TMPDIR)")
    p.add_argument("--per-size-draw", action="store_true",
                   help="a fresh draw of N + test rows per size (the first protocol; a different problem per size)")
    p.add_argument("--reference", action="store_true",
                   help="also fit Nystroem(500) + RidgeClassifier per size: how hard each size's draw is")
    p.add_argument("--reference-components", type=int, default=500,
                   help="Nystroem components of --reference (500: the first runs; the acceptance compares with 1000)")
    p.add_argument("--seed", type=int, default=0,
                   help="the generator's random_state (0: the benchmark's draw; tune on another, e.g. 1)")
    p.add_argument("--C", default="default",
                   help="comma-separated C values fitted at every size: 'default' (the class default), "
                        "'auto', floats (e.g. 1,0.5) or 'N0/N' (the float min(1, N0 / rows), N0 = --n0)")
    p.add_argument("--flip-y", type=float, default=0.01,
                   help="make_classification's label noise (its default 0.01; nested draws only): 0 asks whether "
                        "the fall of accuracy with N comes from the flipped labels")
    p.add_argument("--eps", default="default",
                   help="comma-separated eps values fitted at every size, as --C: 'default', floats or "
                        "'F*N0/N' (F · min(1, N0 / rows))")
    p.add_argument("--stopping", default="default",
                   help="comma-separated CVMClassifier stopping rules fitted at every size: 'default' (the class "
                        "default), 'auto', 'paper', 'sample' or an int (the certified sample's rows)")
    p.add_argument("--train-errors", action="store_true",
                   help="also count the training rows the model misclassifies (a predict over all N rows)")
    p.add_argument("--label-noise", type=float, default=0.0,
                   help="after the draw, flip the labels of this fraction of its rows (seeded; nested draws only): "
                        "with --flip-y 0, label noise whose rows are known (core vectors among them: "
                        "core_flipped)")
    p.add_argument("--n0", type=int, default=100_000, help="N0 of --C N0/N")
    p.add_argument("--draw-rows", type=int, default=None,
                   help="rows of the nested draw before the test rows (default max(sizes)): runs with other "
                        "--sizes and the same --draw-rows and --seed share one draw")


def rule_values(text, n, n0):
    """``--C``'s or ``--eps``'s list at ``n`` rows as ``(rule, value)`` pairs: ``default`` (value
    None: the class default), ``auto``, a float, ``N0/N`` (``min(1, n0 / n)``) or ``F*N0/N``
    (``F · min(1, n0 / n)``); repeated values at this size are fitted once."""
    out = []
    for part in (t.strip() for t in (text or "default").split(",") if t.strip()):
        if part in ("default", "auto"):
            value = None if part == "default" else part
        elif part.endswith("N0/N"):
            head = part[:-len("N0/N")].rstrip("*")
            value = (float(head) if head else 1.0) * min(1.0, n0 / n)
        else:
            value = float(part)
        if value not in [v for _, v in out]:
            out.append((part, value))
    return out


def reference_fit(X, y, Xte, yte, n_components=500):
    """Nystroem(n_components, γ = 1/54) + a ridge classifier (alpha 1, intercept) on the same rows: how
    hard the problem is at this size (with ``--per-size-draw`` each size is another problem, and only
    this reference makes the accuracies readable). The ridge is solved from ZᵀZ and Zᵀy summed over
    blocks of 50,000 rows (RidgeClassifier's solution, without the N × n_components matrix: 8 GB at
    10⁶ rows and 1,000 components)."""
    import numpy as np
    from sklearn.kernel_approximation import Nystroem

    t = time.perf_counter()
    ny = Nystroem(gamma=1 / 54, n_components=n_components, random_state=0).fit(X)
    t_ = np.where(y == y.max(), 1.0, -1.0)
    A, b, zs, n = 0.0, 0.0, 0.0, len(X)
    for i in range(0, n, 50_000):
        Z = ny.transform(X[i:i + 50_000])
        A, b, zs = A + Z.T @ Z, b + Z.T @ t_[i:i + 50_000], zs + Z.sum(0)
    mu, ybar = zs / n, t_.mean()
    w = np.linalg.solve(A - n * np.outer(mu, mu) + np.eye(len(mu)), b - n * mu * ybar)
    f = np.concatenate([ny.transform(Xte[i:i + 50_000]) @ w for i in range(0, len(Xte), 50_000)]) + ybar - mu @ w
    pred = np.where(f > 0, y.max(), y.min())
    return {"fit_s": time.perf_counter() - t, "accuracy": float((pred == yte).mean()), "n_components": n_components}


def nested_data(sizes, test_rows, seed=0, flip_y=0.01, label_noise=0.0):
    """One draw of max(sizes) + test rows; returns ``split(n) -> (X, y, Xte, yte)``: the first ``n``
    rows (standardised on themselves, float32) and the common last ``test_rows`` rows."""
    import numpy as np
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=max(sizes) + test_rows, n_features=54, n_informative=20, flip_y=flip_y,
                               random_state=seed)
    flipped = np.random.default_rng(seed + 1000).random(len(y)) < label_noise
    y = np.where(flipped, 1 - y, y)
    Xte_raw, yte = X[-test_rows:], y[-test_rows:]

    def split(n):
        mu, sd = X[:n].mean(0), X[:n].std(0)
        sd[sd == 0] = 1.0
        return (((X[:n] - mu) / sd).astype(np.float32), y[:n], ((Xte_raw - mu) / sd).astype(np.float32), yte)

    split.flipped = flipped  # the rows whose labels --label-noise flipped
    return split


def _exponent(a, b):
    return math.log(b["fit_s"] / a["fit_s"]) / math.log(b["rows"] / a["rows"])


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    sizes = [5_000, 10_000] if args.quick else sorted(int(s) for s in args.sizes.split(",") if s)
    out = H.output_path(NAME, args.out, args.quick)
    t0 = time.perf_counter()
    protocol = "per-size draw" if args.per_size_draw else "nested prefixes of one draw"
    if args.per_size_draw and (args.flip_y != 0.01 or args.label_noise):
        raise SystemExit(f"--flip-y {args.flip_y} needs the nested draw (drop --per-size-draw)")
    res = {"name": NAME, "environment": H.environment(), "uptime_at_start": H.uptime(), "test_rows": args.test_rows,
           "protocol": protocol,
           "seed": args.seed, "flip_y": args.flip_y, "label_noise": args.label_noise, "C": args.C, "n0": args.n0,
           "fits": []}
    draw = max(sizes) if args.draw_rows is None else max(args.draw_rows, max(sizes))
    res["draw_rows"] = None if args.per_size_draw else draw
    split = None if args.per_size_draw else nested_data([draw], args.test_rows, seed=args.seed, flip_y=args.flip_y,
                                                                  label_noise=args.label_noise)
    for n in sizes:
        X, y, Xte, yte = _data(n, args.test_rows, seed=args.seed) if split is None else split(n)
        for c in rule_values(args.C, n, args.n0):
            for eps in rule_values(args.eps, n, args.n0):
                for stop in _stopping_values(args.stopping):
                    flipped = None if split is None or not args.label_noise else split.flipped[:n]
                    _fit_one(res, args, (X, y, Xte, yte, flipped), n, c, eps, stop)
                    H.write_json(out, res)
    H.finish(res, out, t0)


def _stopping_values(text):
    """``--stopping``'s list: None (the class default), "auto", "paper", "sample" or ints."""
    out = []
    for part in (t.strip() for t in (text or "default").split(",") if t.strip()):
        out.append(None if part == "default" else part if part in ("paper", "sample", "auto") else int(part))
    return out


def _fit_one(res, args, data, n, c_rule, eps_rule, stopping=None):
    """One CVM fit of ``n`` rows at ``C`` and ``eps`` (``(rule, value)``; value None: the class
    default) appended to ``res["fits"]``, with its growth exponents against the earlier fits of the
    same rules."""
    X, y, Xte, yte, flipped = data
    (c_text, c), (eps_text, eps) = c_rule, eps_rule
    load0, uptime0 = list(os.getloadavg()), H.uptime()
    params = (({} if c is None else {"C": c}) | ({} if eps is None else {"eps": eps})
              | ({} if stopping is None else {"stopping": stopping}))
    H.log(f"CVMClassifier({params}) on {n} rows")
    cpu0 = time.process_time()
    fit, est = fit_cvm(X, y, Xte, yte, **params)
    fit["cpu_s"] = time.process_time() - cpu0  # this process's CPU seconds (one BLAS thread, in process):
    fit["cpu_s_before_fit"] = cpu0              # less sensitive to the machine's load than fit_s
    fit.update(rows=n, C="default" if c is None else c, C_=float(est.C_), eps=float(est.eps), C_rule=c_text,
               eps_rule=eps_text, stopping="default" if stopping is None else stopping,
               seconds_per_1e5_rows=fit["fit_s"] * 1e5 / n, load_at_start=load0, load_at_end=list(os.getloadavg()),
               uptime_at_start=uptime0, uptime_at_end=H.uptime())
    fit.update(_mechanism(est, X, y, args.train_errors))
    if flipped is not None:
        r, on = est.results_[0], flipped[est.core_indices_]
        fit.update(flipped_rows=int(flipped.sum()), core_flipped=int(on.sum()),
                   core_flipped_alpha=float(r.alpha[on].sum()))  # their share of the simplex's weight 1
    if args.reference:
        k = args.reference_components
        fit[f"reference_nystroem{k}"] = reference_fit(X, y, Xte, yte, k)
    same = [f for f in res["fits"] if f["C_rule"] == c_text and f["eps_rule"] == eps_text
            and f.get("stopping") == fit["stopping"]]
    if same:
        fit["exponent_from_previous"] = _exponent(same[-1], fit)
        fit["exponent_from_first"] = _exponent(same[0], fit)
    res["fits"].append(fit)
    H.log(f"  {fit['fit_s']:.1f} s, C_={fit['C_']:.4g}, {fit['n_core']} core vectors, {fit['n_passes']} passes, "
          f"accuracy {fit['accuracy']:.4f}, exponent {fit.get('exponent_from_first', float('nan')):.2f}")



def _mechanism(est, X, y, train_errors):
    """benchmarks/notes/cvm_measurements.md "Growth with N": the stopping tolerance eps·R² against the
    margin ρ = αᵀK̃α (a
    row outside the core set passes the full pass's certificate iff ``y f(x) ≥ ρ − (eps + eps²/2)·R²``),
    and the training errors among the core vectors (each core vector holds α = C·(ρ − y f) of the
    simplex's total 1, so at most 1 / (C·ρ) of them are errors); with ``train_errors`` the margins
    ``y f(x)`` of all N rows (in units of ρ: the lowest, quantiles, the fraction inside the margin)
    and the training errors."""
    import numpy as np

    r = est.results_[0]
    rho, R2, eps = float(r.objective), float(r.R2), float(est.eps)
    core = np.asarray(est.core_indices_)
    out = {"R2": R2, "rho": rho, "eps_R2_over_rho": eps * R2 / rho,
           "certificate_threshold_over_rho": 1.0 - (eps + eps * eps / 2) * R2 / rho,
           "core_training_errors": int((est.predict(X[core]) != y[core]).sum()),
           "error_capacity_1_over_C_rho": 1.0 / (float(est.C_) * rho),
           # stopping="auto": (sample rows, errors, rows measured) per validated sample, and the sample chosen
           "validation": [list(v) for v in getattr(r, "validation", ())],
           "sample_rows": getattr(r, "sample_rows", None)}
    if train_errors:
        f = np.concatenate([est.decision_function(X[i:i + 50_000]) for i in range(0, len(X), 50_000)])
        m = np.where(y == est.classes_[1], 1.0, -1.0) * f / rho
        out.update(training_errors=int((m < 0).sum()), margin_min_over_rho=float(m.min()),
                   margin_quantiles_over_rho={q: float(np.quantile(m, q)) for q in (0.01, 0.05, 0.5, 0.95, 0.99)},
                   fraction_inside_margin=float((m < 1).mean()))
    return out


if __name__ == "__main__":
    main()
