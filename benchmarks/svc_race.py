"""The SVC race: KMP against scikit-learn's SVC, Nystroem + ridge and the CVM, one run.

Data: ``make_classification(n_samples=7·10⁴, n_features=54, n_informative=20, random_state=0)``
split into 5·10⁴ training and 2·10⁴ test rows, standardised on the training rows, float32;
every kernel method uses the RBF kernel with γ = 1/54 and C = 1 where there is one.

Rows of the table (each fitted once, in this order, in this process; timings are wall seconds):

* ``svc``: ``sklearn.svm.SVC(C=1, gamma=1/54)`` — fit, test accuracy, number of support vectors,
  predict time on the test rows;
* ``kmp``: ``KMPClassifier(fit_mode="backfit", n_basis=n_SV/10, gamma=1/54)`` in process (the
  data as a numpy array, ``client=None``), its ``atoms_per_pass`` given by ``--atoms-per-pass``
  (when the installed library has the parameter), its γ by ``--kmp-gamma-factor`` (γ = factor/54;
  chosen by ``kmp_race_tuning.py`` on another draw of the generator, not on these test rows) and
  its ``candidates`` by ``--candidates``;
* ``kmp_baseline`` (``--with-baseline``): the previous run's KMP (``atoms_per_pass=8``, γ = 1/54),
  for comparison in the same run;
* ``nystroem``: ``Nystroem(n_components=1000, gamma=1/54) + RidgeClassifier``;
* ``cvm`` (``--with-cvm``, slow): ``CVMClassifier()`` defaults with ``gamma=1/54``.

The ratios the issue's acceptance names are computed in the same run: KMP fit / SVC fit (target
≤ 1/3), accuracy gap SVC − KMP (target ≤ 0.7 pt), predict speed-up SVC / KMP (target ≥ 50×).
The machine is shared: the load average at the start and at the end is recorded.

Usage: ``python benchmarks/svc_race.py [--rows 70000] [--quick] [--with-cvm] [--atoms-per-pass 1]
[--kmp-gamma-factor 1] [--candidates auto]``
(``--quick``: 7,000 rows, a smoke test written to $TMPDIR). JSON: benchmarks/results/svc_race.json.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "svc_race"


def add_arguments(p):
    p.add_argument("--rows", type=int, default=70_000, help="total rows (5/7 train, 2/7 test; default 70000)")
    p.add_argument("--quick", action="store_true", help="7,000 rows: a smoke test (JSON to $TMPDIR)")
    p.add_argument("--with-cvm", action="store_true", help="also fit CVMClassifier() defaults (slow)")
    p.add_argument("--atoms-per-pass", type=int, default=None, help="KMPClassifier(atoms_per_pass=...) if given")
    p.add_argument("--n-basis", type=int, default=None, help="KMP n_basis (default: SVC's n_SV / 10)")
    p.add_argument("--kmp-gamma-factor", type=float, default=1.0,
                   help="KMP's gamma = this / 54 (SVC keeps 1/54; choose it with kmp_race_tuning.py, never on the "
                        "race's test rows)")
    p.add_argument("--candidates", default="auto", help="KMP candidates: 'auto' (s = 59 per atom), 'all' or an int")
    p.add_argument("--with-baseline", action="store_true",
                   help="also fit the previous run's KMP (backfit, atoms_per_pass=8, gamma=1/54, candidates='auto') as "
                        "row 'kmp_baseline' (the acceptance ratios stay those of row 'kmp')")
    p.add_argument("--skip-svc", type=int, default=None, metavar="N_SV",
                   help="do not fit SVC; take n_SV from here (KMP only; no ratios)")


def data(rows, random_state=0):
    import numpy as np
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=rows, n_features=54, n_informative=20, random_state=random_state)
    n_train = rows * 5 // 7
    Xtr, Xte, ytr, yte = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return ((Xtr - mu) / sd).astype(np.float32), ((Xte - mu) / sd).astype(np.float32), ytr, yte


def timed(f, *a):
    t0 = time.perf_counter()
    out = f(*a)
    return out, time.perf_counter() - t0


def row(est, Xtr, ytr, Xte, yte, extra=None):
    import numpy as np

    _, fit_s = timed(est.fit, Xtr, ytr)
    pred, pred_s = timed(est.predict, Xte)
    out = {"fit_seconds": fit_s, "accuracy": float(np.mean(pred == yte)), "predict_seconds": pred_s}
    out.update(extra(est) if extra else {})
    H.log(f"  {type(est).__name__}: fit {fit_s:.1f}s, accuracy {out['accuracy']:.4f}, predict {pred_s:.2f}s")
    return out


def start(name, args):
    """A race run's start: the clock, the data (``--rows``, 7,000 with ``--quick``), γ = 1/54 and
    the result's header with an empty ``methods``."""
    t0 = time.perf_counter()
    Xtr, Xte, ytr, yte = data(7_000 if args.quick else args.rows)
    gamma = 1.0 / 54
    res = {"name": name, "environment": H.environment(), "rows_train": len(ytr), "rows_test": len(yte),
           "gamma": gamma, "C": 1.0, "load_average_at_start": list(os.getloadavg()), "methods": {}}
    return t0, (Xtr, Xte, ytr, yte), gamma, res


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC

    from kmp_dask import CVMClassifier, KMPClassifier

    t0, (Xtr, Xte, ytr, yte), gamma, res = start(NAME, args)
    M = res["methods"]
    if args.skip_svc is None:
        H.log(f"SVC on {len(ytr)} rows")
        M["svc"] = row(SVC(C=1.0, gamma=gamma), Xtr, ytr, Xte, yte,
                       lambda e: {"n_kernel_functions": int(e.n_support_.sum())})
        n_sv = M["svc"]["n_kernel_functions"]
    else:
        n_sv = args.skip_svc
    n_basis = args.n_basis or max(1, n_sv // 10)
    kw = {} if args.atoms_per_pass is None else {"atoms_per_pass": args.atoms_per_pass}
    if args.candidates != "auto":
        kw["candidates"] = args.candidates if args.candidates == "all" else int(args.candidates)
    kmp_gamma = args.kmp_gamma_factor / 54
    res["kmp_gamma"] = kmp_gamma
    H.log(f"KMPClassifier backfit, n_basis={n_basis}, gamma={kmp_gamma:.5g} {kw}")
    kmp = KMPClassifier(fit_mode="backfit", n_basis=n_basis, gamma=kmp_gamma, random_state=0, **kw)
    M["kmp"] = row(kmp, Xtr, ytr, Xte, yte, lambda e: {"n_kernel_functions": int(e.n_basis_), "params": kw,
                                                          "n_basis_requested": n_basis, "stop_reason": e.stop_reason_})
    if args.with_baseline:
        H.log(f"KMPClassifier backfit baseline, n_basis={n_basis}, gamma=1/54, atoms_per_pass=8")
        base = KMPClassifier(fit_mode="backfit", n_basis=n_basis, gamma=gamma, random_state=0, atoms_per_pass=8)
        M["kmp_baseline"] = row(base, Xtr, ytr, Xte, yte, lambda e: {"n_kernel_functions": int(e.n_basis_),
                                                                      "params": {"atoms_per_pass": 8}})
    H.log("Nystroem(1000) + RidgeClassifier")
    M["nystroem"] = row(make_pipeline(Nystroem(gamma=gamma, n_components=1000, random_state=0), RidgeClassifier()),
                        Xtr, ytr, Xte, yte, lambda e: {"n_kernel_functions": 1000})
    if args.with_cvm:
        H.log("CVMClassifier() defaults")
        M["cvm"] = row(CVMClassifier(gamma=gamma), Xtr, ytr, Xte, yte,
                       lambda e: {"n_kernel_functions": len(e.expansion_.support_vectors)})
    if "svc" in M:
        s, k = M["svc"], M["kmp"]
        res["ratios"] = {
            "kmp_fit_over_svc_fit": k["fit_seconds"] / s["fit_seconds"], "target_kmp_fit_over_svc_fit": 1 / 3,
            "accuracy_gap_points": 100 * (s["accuracy"] - k["accuracy"]), "target_accuracy_gap_points": 0.7,
            "predict_speedup_svc_over_kmp": s["predict_seconds"] / k["predict_seconds"],
            "target_predict_speedup": 50,
        }
        if "kmp_baseline" in M:
            res["ratios"]["kmp_baseline_fit_over_svc_fit"] = M["kmp_baseline"]["fit_seconds"] / s["fit_seconds"]
            res["ratios"]["kmp_baseline_accuracy_gap_points"] = 100 * (s["accuracy"] - M["kmp_baseline"]["accuracy"])
        if "cvm" in M:
            res["ratios"]["cvm_fit_over_svc_fit"] = M["cvm"]["fit_seconds"] / s["fit_seconds"]
            res["ratios"]["cvm_accuracy_gap_points"] = 100 * (s["accuracy"] - M["cvm"]["accuracy"])
        H.log(f"ratios: {res['ratios']}")
    res["load_average_at_end"] = list(os.getloadavg())
    H.finish(res, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
