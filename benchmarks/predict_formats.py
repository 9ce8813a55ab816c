"""Peak memory and time of ``predict_to_file`` per format over a store larger than the batches.

What is measured
----------------
A store of N rows × 20 float32 features (``make_classification_store``, 3 classes) and a
KMPClassifier (logistic loss, 20 basis functions, fitted on its first 5,000 rows) are made once.
Then, each in a fresh child process (its own peak RSS, read as ingest_memory.py does:
``RUSAGE_CHILDREN`` in an intermediate interpreter, since a child forked from this driver would
inherit its peak), the model loaded from disk writes its class names (``pred.csv`` /
``.parquet`` / ``.npy``) or probabilities (``proba.npy``) over the store with the synchronous scheduler, and a
``baseline`` child loads the model, opens the store and predicts its first 2 rows (imports,
model, one chunk). The store's X is N·20·4 bytes; the writer keeps one batch of 8 chunks, so the
peak above the baseline should be O(batch), not O(N). Results: benchmarks/results/predict_formats_<N>.json.

Usage: ``python benchmarks/predict_formats.py [--rows 2000000]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_memory import child_peak_rss  # noqa: E402

CHILD = """
import resource, sys, time, json
import numpy as np
from kmp_dask import load
from kmp_dask.store import open_store
from kmp_dask.evaluation import predict_to_file
model_path, store_path, out, what = sys.argv[1:5]
model, store = load(model_path), open_store(store_path)
t0 = time.perf_counter()
if what == "baseline":
    X, _ = store.read_range(0, 2)
    model.predict(np.asarray(X))
else:
    predict_to_file(model, store, out, output=what, client="sync")
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    args = ap.parse_args()
    from kmp_dask import KMPClassifier, save
    from kmp_dask.datasets import make_classification_store

    root = Path(tempfile.mkdtemp(prefix="kmp-dask-bench-predict-"))
    try:
        store = make_classification_store(root / "data.zarr", args.rows, n_features=20, n_classes=3,
                                          dtype="float32", random_state=0)
        X, y = store.read_range(0, 5000)
        names = np.asarray(store.attrs.get("classes") or ["c0", "c1", "c2"], dtype=object)
        model = KMPClassifier(n_basis=20, loss="logistic", client="sync", random_state=0).fit(
            np.asarray(X, dtype=np.float64), names[np.asarray(y, dtype=int)])
        save(model, root / "m.model")
        runs = {}
        for name, out, what in [("baseline", "-", "baseline"), ("csv", "pred.csv", "auto"),
                                ("parquet", "pred.parquet", "auto"), ("npy", "pred.npy", "auto"),
                                ("npy_proba", "proba.npy", "proba")]:
            peak, wall, stdout = child_peak_rss(CHILD, str(root / "m.model"), store.url, str(root / out), what)
            runs[name] = {**json.loads(stdout.splitlines()[-1]), "peak_rss_bytes": peak, "process_seconds": wall}
            if out != "-":
                runs[name]["file_bytes"] = (root / out).stat().st_size
            print(name, runs[name], flush=True)
        result = {"rows": args.rows, "features": 20, "x_bytes": args.rows * 20 * 4, "chunk_rows": store.chunk_rows,
                  "n_chunks": len(store.row_chunks), "batch_chunks": 8, "runs": runs,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        out = Path(__file__).resolve().parent / "results" / f"predict_formats_{args.rows}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print("written", out)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    import numpy as np

    main()
