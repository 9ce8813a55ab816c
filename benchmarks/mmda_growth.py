"""Do MMDA's features keep separating the classes as N grows? A linear classifier on them, per size.

Data: the nested test bed of ``cvm_growth.py`` (one draw of ``make_classification(n_features=54,
n_informative=20, flip_y=0.01)`` with ``--draw-rows`` + ``--test-rows`` rows, seed ``--seed``; each
size trains on the first N rows, standardised on them; one common held-out set). For each size and
each ``--stopping`` rule: one in-process ``MMDA(n_components=…, random_state=0)`` fit (defaults
otherwise: C = 1, eps = 1e-4, gamma "scale"), then ``LogisticRegression`` on its features of the
training rows (at most ``--clf-rows`` of them, the first ones), scored on the held-out rows. Fit
seconds, core-set sizes, vectors, held-out accuracy of the linear classifier; the machine's
``uptime`` at each fit's start and end (the machine is shared: seconds compare only roughly).

Usage: ``python benchmarks/mmda_growth.py [--sizes 50000,400000] [--stopping paper,default]``
JSON: benchmarks/results/mmda_growth.json (written after every fit).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from cvm_growth import _stopping_values, nested_data

NAME = "mmda_growth"


def add_arguments(p):
    p.add_argument("--sizes", default="50000,400000", help="training rows, comma-separated")
    p.add_argument("--test-rows", type=int, default=20_000)
    p.add_argument("--draw-rows", type=int, default=1_000_000, help="rows of the nested draw before the test rows")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-components", type=int, default=3)
    p.add_argument("--eps", type=float, default=None, help="MMDA's eps (default: the class default)")
    p.add_argument("--stopping", default="default", help="as cvm_growth.py --stopping")
    p.add_argument("--clf-rows", type=int, default=200_000, help="training rows the linear classifier is fitted on")


def fit_one(X, y, Xte, yte, args, stopping):
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from kmp_dask import MMDA

    params = {"n_components": args.n_components, "random_state": 0}
    params |= {} if stopping is None else {"stopping": stopping}
    params |= {} if args.eps is None else {"eps": args.eps}
    up0 = H.uptime()
    t = time.perf_counter()
    m = MMDA(**params).fit(X, y)
    fit_s = time.perf_counter() - t
    n = min(len(X), args.clf_rows)
    Z = np.concatenate([m.transform(X[i:min(i + 50_000, n)]) for i in range(0, n, 50_000)])
    Zte = m.transform(Xte)
    clf = LogisticRegression(max_iter=1000).fit(Z, y[:n])
    return {"rows": len(X), "stopping": "default" if stopping is None else stopping, "fit_s": fit_s,
            "core_sizes": [int(c) for c in m.core_sizes_], "n_vectors": int(m.expansion_.n_vectors),
            "linear_accuracy": float(clf.score(Zte, yte)), "linear_train_accuracy": float(clf.score(Z, y[:n])),
            "uptime_at_start": up0, "uptime_at_end": H.uptime()}


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    out = H.output_path(NAME, args.out)
    t0 = time.perf_counter()
    res = {"name": NAME, "environment": H.environment(), "settings": vars(args), "fits": []}
    split = nested_data([max(args.draw_rows, max(sizes))], args.test_rows, seed=args.seed)
    for n in sizes:
        X, y, Xte, yte = split(n)
        for stop in _stopping_values(args.stopping):
            H.log(f"MMDA on {n} rows, stopping={stop or 'default'}")
            fit = fit_one(X, y, Xte, yte, args, stop)
            res["fits"].append(fit)
            H.log(f"  {fit['fit_s']:.0f} s, core sets {fit['core_sizes']}, accuracy {fit['linear_accuracy']:.4f}")
            H.write_json(out, res)
    H.finish(res, out, t0)


if __name__ == "__main__":
    main()
