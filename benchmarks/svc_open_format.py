"""Could a pipeline keep its scikit-learn SVC in the open format instead of a joblib pickle?

What is measured
----------------
For SVCs fitted on three bundled data sets (keel banana, 2 classes; scikit-learn iris, 3;
digits, 10; a seeded 70/30 split), the SVC's hyperplanes as a
:class:`~kmp_dask.reduced.CompressionTarget` — the form the open format can store (an allowed
class: a :class:`~kmp_dask.KernelExpansion` plus the prediction rule) — are saved with
``kmp_dask.save``, loaded back, and compared on the held-out rows with the SVC itself:

* ``max_abs_decision_diff``: the largest difference between the loaded target's decision values
  and ``SVC(decision_function_shape="ovo").decision_function`` (libsvm's own kernel sums vs
  kmp_dask's kernels: not bit-identical, so this is the number to judge);
* ``predict_mismatches``: rows where ``target.predict(F)`` differs from ``svc.predict``.

Why it matters: pipelines keep the SVC they train in exactly this form (``source_model/``, no
pickle; docs/pipelines.md), the compressor takes the target as its model and the evaluate step
predicts with ``target.predict`` — this measures that it gives the SVC's predictions.

Usage: ``python benchmarks/svc_open_format.py`` (a few seconds; results in
``benchmarks/results/svc_open_format.json``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "svc_open_format"
CASES = (("keel:banana", {"C": 10.0, "gamma": 0.5}), ("sklearn:iris", {"C": 1.0, "gamma": 0.5}),
         ("sklearn:digits", {"C": 10.0, "gamma": 0.001}))


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, lambda p: None, argv)
    import numpy as np
    from sklearn.svm import SVC

    from kmp_dask import load, save
    from kmp_dask.datasets import load as load_dataset
    from kmp_dask.reduced import as_compression_target

    t0 = time.perf_counter()
    rows = []
    for name, params in CASES:
        ds = load_dataset(name)
        Xtr, Xte, ytr, yte = H.split(ds.X, ds.y, seed=0)
        svc = SVC(**params, decision_function_shape="ovo").fit(Xtr, ytr)
        with tempfile.TemporaryDirectory() as d:
            save(as_compression_target(svc), Path(d) / "svc.model")
            target = load(Path(d) / "svc.model")
        F = target.expansion.decision_function(Xte)
        F_svc = svc.decision_function(Xte).reshape(F.shape)
        rows.append({"dataset": name, "params": params, "n_test": len(Xte), "n_classes": len(svc.classes_),
                     "n_support": int(svc.n_support_.sum()), "kind": target.kind,
                     "max_abs_decision_diff": float(np.abs(F - F_svc).max()),
                     "predict_mismatches": int((target.predict(F) != svc.predict(Xte)).sum())})
        H.log(f"{name}: {rows[-1]}")
    result = {"name": NAME, "environment": H.environment(), "cases": rows}
    H.finish(result, H.output_path(NAME, args.out), t0)


if __name__ == "__main__":
    main()
