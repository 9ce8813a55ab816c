"""What checkpoints cost CVMClassifier and MMDA.

Question: how long does a save take, how large do the files get, and how much slower is the fit,
with ``checkpoint_every=1`` (a save after every core vector: the worst case) and the default 10?

Protocol: in process (no cluster: the core-set loops run on one in-process engine), this machine,
float64 rows, RBF kernel.
* ``cvm_binary``: CVMClassifier(C=10, eps=1e-3, gamma=0.1) on 20,000 × 10 standard-normal rows,
  y = sign(x0 + x1² − 1 + noise).
* ``cvm_ovr``: the same estimator one-vs-rest on 6,000 × 10 rows of 8 Gaussian classes.
* ``mmda_binary``: MMDA(3, same C/eps/gamma) on the binary data's first 10,000 rows.
Each configuration: fits without a checkpoint and with ``checkpoint_every`` 1 and 10 (fresh
directory each), best of ``--repeats`` by fit time; every write (main file and problem parts) is
timed by wrapping ``Checkpoint._write``; the largest file seen and the number of saves are kept.
The models with and without checkpoints are compared bit for bit (``identical``).
Output: ``benchmarks/results/checkpoint_cost_cvm.json`` (``--quick``: a tenth of the rows, written to
``$TMPDIR/kmp_dask_benchmarks/``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from kmp_dask import MMDA, CVMClassifier
from kmp_dask.greedy import _checkpoint

OUT = Path(__file__).parent / "results" / "checkpoint_cost_cvm.json"


def _data(scale=1.0):
    rng = np.random.default_rng(0)
    n, nc = int(20_000 * scale), int(6_000 * scale)
    X = rng.normal(size=(n, 10))
    y = (X[:, 0] + X[:, 1] ** 2 - 1 + 0.3 * rng.normal(size=len(X)) > 0).astype(int)
    centres = rng.normal(scale=2.0, size=(8, 10))
    yc = rng.integers(0, 8, size=nc)
    Xc = centres[yc] + rng.normal(size=(nc, 10))
    return {"cvm_binary": (lambda: CVMClassifier(C=10, eps=1e-3, gamma=0.1, random_state=0), X, y),
            "cvm_ovr": (lambda: CVMClassifier(C=10, eps=1e-3, gamma=0.1, random_state=0), Xc, yc),
            "mmda_binary": (lambda: MMDA(3, C=10, eps=1e-3, gamma=0.1, random_state=0), X[: n // 2], y[: n // 2])}


class _Timer:
    def __init__(self):
        self.times, self.max_bytes = [], 0
        self.real = _checkpoint.Checkpoint._write

    def __enter__(self):
        timer = self

        def timed(ck, payload, **status):
            t0 = time.perf_counter()
            timer.real(ck, payload, **status)
            timer.times.append(time.perf_counter() - t0)
            timer.max_bytes = max(timer.max_bytes, ck.path.stat().st_size)

        _checkpoint.Checkpoint._write = timed
        return self

    def __exit__(self, *exc):
        _checkpoint.Checkpoint._write = self.real


def _model_bytes(est):
    e = est.expansion_
    return e.support_vectors.tobytes() + e.coef.tobytes() + np.asarray(e.intercept).tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="a tenth of the rows; output to $TMPDIR")
    args = ap.parse_args()
    out_path = Path(tempfile.gettempdir(), "kmp_dask_benchmarks", OUT.name) if args.quick else OUT
    out = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "loadavg_start": os.getloadavg()}, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "configs": {}}
    for name, (make, X, y) in _data(0.1 if args.quick else 1.0).items():
        row = {"rows": int(len(X))}
        t0 = time.perf_counter()
        ref = make().fit(X, y)
        plain = [time.perf_counter() - t0]
        for _ in range(args.repeats - 1):
            t0 = time.perf_counter()
            make().fit(X, y)
            plain.append(time.perf_counter() - t0)
        row["fit_seconds_plain"] = min(plain)
        row["core_vectors"] = int(ref.expansion_.n_vectors)
        for every in (1, 10):
            best = None
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as tmp, _Timer() as timer:
                    t0 = time.perf_counter()
                    est = make().fit(X, y, checkpoint=Path(tmp, "ck"), checkpoint_every=every)
                    secs = time.perf_counter() - t0
                if best is None or secs < best["fit_seconds"]:
                    best = {"fit_seconds": secs, "saves": len(timer.times),
                            "save_seconds_total": sum(timer.times),
                            "save_seconds_median": statistics.median(timer.times),
                            "save_seconds_max": max(timer.times), "largest_file_bytes": timer.max_bytes,
                            "identical": _model_bytes(est) == _model_bytes(ref)}
            row[f"every_{every}"] = best
        row["loadavg_end"] = os.getloadavg()
        out["configs"][name] = row
        print(name, json.dumps(row), flush=True)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    print("wrote", out_path)


if __name__ == "__main__":
    main()
