"""How CVMClassifier()'s fit time grows with N on issue 28's data (acceptance: linear from 10⁵ to 10⁶).

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

Usage: ``python benchmarks/cvm_growth.py [--sizes 100000,200000,400000,1000000] [--reference]
[--per-size-draw] [--quick]``
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


def reference_fit(X, y, Xte, yte):
    """Nystroem(500, γ = 1/54) + RidgeClassifier on the same rows: how hard the problem is at this
    size (with ``--per-size-draw`` each size is another problem, and only this reference makes the
    accuracies readable)."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline

    t = time.perf_counter()
    m = make_pipeline(Nystroem(gamma=1 / 54, n_components=500, random_state=0), RidgeClassifier()).fit(X, y)
    return {"fit_s": time.perf_counter() - t, "accuracy": float((m.predict(Xte) == yte).mean())}


def nested_data(sizes, test_rows, seed=0):
    """One draw of max(sizes) + test rows; returns ``split(n) -> (X, y, Xte, yte)``: the first ``n``
    rows (standardised on themselves, float32) and the common last ``test_rows`` rows."""
    import numpy as np
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=max(sizes) + test_rows, n_features=54, n_informative=20, random_state=seed)
    Xte_raw, yte = X[-test_rows:], y[-test_rows:]

    def split(n):
        mu, sd = X[:n].mean(0), X[:n].std(0)
        sd[sd == 0] = 1.0
        return (((X[:n] - mu) / sd).astype(np.float32), y[:n], ((Xte_raw - mu) / sd).astype(np.float32), yte)

    return split


def _exponent(a, b):
    return math.log(b["fit_s"] / a["fit_s"]) / math.log(b["rows"] / a["rows"])


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    sizes = [5_000, 10_000] if args.quick else sorted(int(s) for s in args.sizes.split(",") if s)
    out = H.output_path(NAME, args.out, args.quick)
    t0 = time.perf_counter()
    protocol = "per-size draw" if args.per_size_draw else "nested prefixes of one draw"
    res = {"name": NAME, "environment": H.environment(), "test_rows": args.test_rows, "protocol": protocol,
           "fits": []}
    split = None if args.per_size_draw else nested_data(sizes, args.test_rows)
    for n in sizes:
        X, y, Xte, yte = _data(n, args.test_rows) if split is None else split(n)
        load0 = list(os.getloadavg())
        H.log(f"CVMClassifier() on {n} rows")
        fit, _ = fit_cvm(X, y, Xte, yte)
        fit.update(rows=n, seconds_per_1e5_rows=fit["fit_s"] * 1e5 / n, load_at_start=load0,
                   load_at_end=list(os.getloadavg()))
        if args.reference:
            fit["reference_nystroem500"] = reference_fit(X, y, Xte, yte)
        fits = res["fits"]
        fits.append(fit)
        if len(fits) > 1:
            fit["exponent_from_previous"] = _exponent(fits[-2], fit)
            fit["exponent_from_first"] = _exponent(fits[0], fit)
        H.log(f"  {fit['fit_s']:.1f} s, {fit['n_core']} core vectors, accuracy {fit['accuracy']:.4f}, "
              f"exponent {fit.get('exponent_from_first', float('nan')):.2f}")
        H.write_json(out, res)
    H.finish(res, out, t0)


if __name__ == "__main__":
    main()
