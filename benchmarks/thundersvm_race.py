"""ThunderSVM beside scikit-learn's SVC on the 5·10⁴-row race data (svc_race.py), in one run.

The race (``svc_race.py``) compares KMP with scikit-learn's SVC and Nystroem; the issue's table also
has a ThunderSVM (CPU build) row. This script fits, in this process and in this order, on the same
data (``svc_race.data``: 5·10⁴ training and 2·10⁴ test rows of ``make_classification(n_features=54,
n_informative=20, random_state=0)``, standardised, float32) with RBF γ = 1/54 and C = 1:

* ``svc``: ``sklearn.svm.SVC(C=1, gamma=1/54)`` (one thread: libsvm is single-threaded);
* ``thundersvm``: ``thundersvm.SVC(C=1, gamma=1/54)`` with its default ``n_jobs=-1`` (every core) —
  skipped, with the reason recorded, when the ``thundersvm`` module cannot be imported
  (``pip install thundersvm-cpu``: an optional benchmark dependency, not one of kmp_dask's).

Each row records fit seconds, test accuracy, support vectors and predict seconds on the test rows;
``thundersvm_over_svc`` holds the ratios measured in the same run (the machine is shared, so only
the ratios compare across runs). ``--quick``: 7,000 rows, JSON to $TMPDIR.

Usage: ``python benchmarks/thundersvm_race.py [--rows 70000] [--quick]``.
JSON: benchmarks/results/thundersvm_race.json.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from svc_race import row, start

NAME = "thundersvm_race"


def add_arguments(p):
    p.add_argument("--rows", type=int, default=70_000, help="total rows (5/7 train, 2/7 test; default 70000)")
    p.add_argument("--quick", action="store_true", help="7,000 rows: a smoke test (JSON to $TMPDIR)")


def _n_sv(est):
    return {"n_kernel_functions": int(sum(est.n_support_))}


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    from sklearn.svm import SVC

    t0, (Xtr, Xte, ytr, yte), gamma, res = start(NAME, args)
    M = res["methods"]
    H.log(f"SVC on {len(ytr)} rows")
    M["svc"] = row(SVC(C=1.0, gamma=gamma), Xtr, ytr, Xte, yte, _n_sv)
    try:
        import thundersvm
    except ImportError as exc:  # optional: pip install thundersvm-cpu
        res["thundersvm_skipped"] = f"cannot import thundersvm ({exc}); pip install thundersvm-cpu"
        H.log(res["thundersvm_skipped"])
    else:
        H.log("ThunderSVM SVC (CPU build, n_jobs=-1)")
        M["thundersvm"] = row(thundersvm.SVC(C=1.0, gamma=gamma), Xtr, ytr, Xte, yte, _n_sv)
        s, t = M["svc"], M["thundersvm"]
        res["thundersvm_over_svc"] = {"fit": t["fit_seconds"] / s["fit_seconds"],
                                      "predict": t["predict_seconds"] / s["predict_seconds"],
                                      "accuracy_points": 100 * (t["accuracy"] - s["accuracy"])}
        H.log(f"ratios: {res['thundersvm_over_svc']}")
    res["load_average_at_end"] = list(os.getloadavg())
    H.finish(res, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
