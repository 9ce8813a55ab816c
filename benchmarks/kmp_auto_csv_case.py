#!/usr/bin/env python
"""A new user's CSV through the CLI with no flags: ``ingest`` → ``train`` → ``evaluate``, against ``SVC()``.

A copy of the case that showed the old default too small (``n_basis=100``): 20,000 rows, 3 string
classes, 12 features on scales from 1e-3 to 2.5e6, a non-linear boundary. Made here (seeded):
``Z ~ N(0, I₁₂)``; class scores ``s₀ = Z₀² + Z₁² − 1.2``, ``s₁ = sin(2 Z₂) + Z₃ Z₄``,
``s₂ = 0.8 Z₅ − 0.5 Z₆²`` plus N(0, 0.35²) noise each; the label is the argmax (names "alpha",
"beta", "gamma"); the columns written are ``Z_j · scale_j`` with ``scale`` log-spaced from 1e-3 to
2.5e6. The CSV is ingested with ``--label label --test-size 0.25 --seed 0``; ``kmp-dask train``
runs with no parameter flag (``--scheduler sync``: in process, as the CLI chooses for this size),
then ``evaluate``. Reference on the same split: ``make_pipeline(StandardScaler(), SVC())``.
``uptime`` before and after (a shared machine).

Usage::

    python benchmarks/kmp_auto_csv_case.py --out benchmarks/results/kmp_auto_csv_case.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_csv_case"


def _arguments(p):
    p.add_argument("--rows", type=int, default=20000)


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def make_csv(path, n):
    import pandas as pd

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(n, 12))
    s = np.stack([Z[:, 0] ** 2 + Z[:, 1] ** 2 - 1.2, np.sin(2 * Z[:, 2]) + Z[:, 3] * Z[:, 4],
                  0.8 * Z[:, 5] - 0.5 * Z[:, 6] ** 2], axis=1) + rng.normal(scale=0.35, size=(n, 3))
    scale = np.logspace(np.log10(1e-3), np.log10(2.5e6), 12)
    df = pd.DataFrame(Z * scale, columns=[f"f{j}" for j in range(12)])
    df["label"] = np.asarray(["alpha", "beta", "gamma"])[s.argmax(axis=1)]
    df.to_csv(path, index=False)


def cli(*args):
    t0 = time.perf_counter()
    p = subprocess.run(["kmp-dask", *map(str, args)], capture_output=True, text=True, timeout=3600)
    if p.returncode:
        raise SystemExit(f"kmp-dask {args} failed: {p.stdout}\n{p.stderr}")
    return p.stdout, time.perf_counter() - t0


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make_csv(tmp / "data.csv", args.rows)
        cli("ingest", tmp / "data.csv", tmp / "train.zarr", "--label", "label", "--test-size", 0.25, "--seed", 0)
        test = next(p for p in tmp.iterdir() if p.name.endswith(".zarr") and p.name != "train.zarr")
        train_out, train_s = cli("train", tmp / "train.zarr", "--model", tmp / "m.kmp", "--scheduler", "sync",
                                 "--quiet")
        train_out, train_s = train_out, train_s
        ev, _ = cli("evaluate", tmp / "m.kmp", test, "--json", "--scheduler", "sync")
        from kmp_dask import load
        from kmp_dask.store import open_store

        model = load(tmp / "m.kmp")
        tr, te = open_store(tmp / "train.zarr"), open_store(test)
        Xtr, ytr = tr.read_range(0, tr.n_rows)
        Xte, yte = te.read_range(0, te.n_rows)
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        from sklearn.svm import SVC

        t = time.perf_counter()
        svc = make_pipeline(StandardScaler(), SVC()).fit(Xtr, ytr)
        svc_s = time.perf_counter() - t
        svc_acc = float(svc.score(Xte, yte))
    from kmp_dask.estimators._kmp import growth_summary

    kmp_acc = json.loads(ev)["accuracy"]
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args), "uptime_start": up,
              "protocol": __doc__.split("Usage::")[0].strip(), "n_train": int(len(ytr)), "n_test": int(len(yte)),
              "kmp": {"accuracy": kmp_acc, "train_seconds_cli": train_s, "n_basis": int(model.n_basis_),
                      "stop_reason": model.stop_reason_, "growth": growth_summary(model),
                      "standardized": bool(getattr(model, "standardized_", False))},
              "svc": {"accuracy": svc_acc, "seconds": svc_s, "n_support_vectors": int(len(svc[-1].support_))},
              "gap_points": 100 * (kmp_acc - svc_acc),
              "uptime_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}
    H.log(f"kmp {kmp_acc:.4f} ({model.n_basis_} atoms, {train_s:.0f}s) svc {svc_acc:.4f} ({svc_s:.1f}s)")
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
