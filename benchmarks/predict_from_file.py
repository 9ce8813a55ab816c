"""Scoring a CSV file: ``predict`` straight from the file against ``ingest --no-label`` + ``predict``
of the store (the only way before predict read files), in process (``client="sync"``).

Both write the same ``pred.csv`` (checked). Each repeat runs the two ways back to back, in
alternating order (interleaved), and the script reports medians and the spread (min–max) of the
wall times, with the machine's load (``os.getloadavg``) before and after: the machine is shared,
so the ratio measured in one run is the figure to read, not the seconds.

Usage: ``python benchmarks/predict_from_file.py [--rows 200000] [--features 12] [--repeats 3]``
Results: ``benchmarks/results/predict_from_file.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from kmp_dask import KMPClassifier
from kmp_dask.evaluation import predict_to_file
from kmp_dask.store import ingest

ROOT = Path(__file__).resolve().parent


def _data(rows, features, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features))
    names = [f"f{j}" for j in range(features)]
    return pd.DataFrame(X, columns=names), (X[:, 0] + X[:, 1] > 0).astype(int)


def _direct(model, csv, out):
    predict_to_file(model, csv, out, client="sync")


def _via_store(model, csv, out, tmp):
    store = ingest(csv, tmp / "s.zarr", label=None, overwrite=True)
    predict_to_file(model, store, out, client="sync")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kmp_predict_file_"))
    df, y = _data(args.rows, args.features)
    model = KMPClassifier(n_basis=30, gamma=0.1, random_state=0, client="sync").fit(df.iloc[:5000], y[:5000])
    csv = tmp / "new.csv"
    df[df.columns[::-1]].to_csv(csv, index=False)  # columns in another order: matched by name
    load_before = os.getloadavg()
    times = {"direct": [], "ingest_then_store": []}
    for r in range(args.repeats):
        order = ["direct", "ingest_then_store"] if r % 2 == 0 else ["ingest_then_store", "direct"]
        for way in order:
            out = tmp / f"{way}.csv"
            out.unlink(missing_ok=True)
            t0 = time.perf_counter()
            _direct(model, csv, out) if way == "direct" else _via_store(model, csv, out, tmp)
            times[way].append(time.perf_counter() - t0)
    same = pd.read_csv(tmp / "direct.csv").equals(pd.read_csv(tmp / "ingest_then_store.csv"))
    rec = {"rows": args.rows, "features": args.features, "csv_bytes": csv.stat().st_size, "repeats": args.repeats,
           "seconds": times, "median_seconds": {k: statistics.median(v) for k, v in times.items()},
           "ratio_direct_over_store": statistics.median(times["direct"])
           / statistics.median(times["ingest_then_store"]),
           "same_predictions": bool(same), "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
           "cpu_count": os.cpu_count(), "note": "shared, loaded machine: read the ratio, not the seconds"}
    (ROOT / "results").mkdir(exist_ok=True)
    (ROOT / "results" / "predict_from_file.json").write_text(json.dumps(rec, indent=2) + "\n")
    print(json.dumps(rec, indent=2))


if __name__ == "__main__":
    main()
