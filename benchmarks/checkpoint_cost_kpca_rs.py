"""What checkpoints cost sparse KPCA and reduced-set compression.

Question: with ``checkpoint_every=1`` (a save after every chosen point / vector, the worst case),
how long does a save take and how large is the file, and how much slower is the fit?

Protocol: in process (``client="sync"`` engine or the dense in-process pursuit), this machine.
* SparseKernelPCA on 20,000 × 10 standard-normal rows (float64), RBF gamma=0.1,
  ``n_components=200``, ``candidates="auto"`` (59 per step) and ``candidates=None`` on 2,000 rows.
* ReducedSetCompressor of an RBF SVC (C=10, gamma=0.5) fitted on 4,000 rows × 6 features of a
  noisy XOR problem, pool = the 4,000 training rows: ``n_vectors=200``, dense (in process) and
  engine (``client="sync"``, ``dense=False``).
Each configuration: one fit without a checkpoint, one with ``checkpoint_every=1`` (the
Checkpoint object's own counters: saves, seconds spent writing, final file size), best of
``--repeats`` for the fit times. Output: ``benchmarks/results/checkpoint_cost_kpca_rs.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import kmp_dask.estimators._kpca as est_kpca
import kmp_dask.reduced._compressor as rc
from kmp_dask import ReducedSetCompressor, SparseKernelPCA

OUT = Path(__file__).parent / "results" / "checkpoint_cost_kpca_rs.json"


def _capture(module):
    """Wrap ``module.open_checkpoint`` to keep the Checkpoint object (and time every save)."""
    seen, real = [], module.open_checkpoint

    def opened(*a, **k):
        ck = real(*a, **k)
        if ck is not None:
            write, ck.times = ck._write, []

            def timed(*wa, **wk):
                t0 = time.perf_counter()
                write(*wa, **wk)
                ck.times.append(time.perf_counter() - t0)
            ck._write = timed
            seen.append(ck)
        return ck

    module.open_checkpoint = opened
    return seen, real


def _run(fit, module, repeats):
    plain = min(_timed(lambda: fit(None)) for _ in range(repeats))
    seen, real = _capture(module)
    try:
        best, ck = None, None
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                seconds = _timed(lambda: fit(Path(tmp) / "ck"))
                if best is None or seconds < best:
                    best, ck = seconds, seen[-1]
                    size = (Path(tmp) / "ck" / "state.ckpt").stat().st_size
    finally:
        module.open_checkpoint = real
    return {"fit_seconds": round(plain, 3), "fit_seconds_checkpoint_every_1": round(best, 3),
            "saves": ck.n_saves, "save_ms_median": round(1e3 * statistics.median(ck.times), 2),
            "save_ms_max": round(1e3 * max(ck.times), 2), "final_file_bytes": size}


def _timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    out = {}
    X = rng.normal(size=(20_000, 10))
    for name, Xs, cand in (("kpca_auto_20000x10_k200", X, "auto"), ("kpca_exact_2000x10_k200", X[:2000], None)):
        fit = lambda ck, Xs=Xs, cand=cand: SparseKernelPCA(  # noqa: E731
            n_components=200, candidates=cand, gamma=0.1, random_state=0, client="sync").fit(
            Xs, checkpoint=ck, checkpoint_every=1)
        out[name] = _run(fit, est_kpca, args.repeats)
        print(name, out[name], flush=True)
    from sklearn.svm import SVC

    Xr = rng.normal(size=(4000, 6))
    yr = ((Xr[:, 0] * Xr[:, 1] + 0.3 * rng.normal(size=4000)) > 0).astype(int)
    svc = SVC(C=10.0, gamma=0.5).fit(Xr, yr)
    out["svc_n_support"] = int(svc.n_support_.sum())
    for name, kw in (("rs_dense_pool4000_v200", {}), ("rs_engine_pool4000_v200", {"client": "sync", "dense": False})):
        fit = lambda ck, kw=kw: ReducedSetCompressor(n_vectors=200, random_state=0, **kw).fit(  # noqa: E731
            svc, Xr, yr, checkpoint=ck, checkpoint_every=1)
        out[name] = _run(fit, rc, args.repeats)
        print(name, out[name], flush=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
