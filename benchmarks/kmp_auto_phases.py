#!/usr/bin/env python
"""Where a default ``KMPClassifier()`` fit spends its CPU time, phase by phase.

Each phase is timed by wrapping the function that does it (process CPU seconds, ``time.process_time``:
on a shared, loaded machine the wall clock mostly measures waiting for a core) — nothing else is
changed; the timers add a few µs per call. Phases (the keys of ``phases``):

- ``op:kmp_score`` the scoring pass's query per partition, inside it ``_score_candidates`` (the exact
  kernel blocks) or ``_score_factored`` (ranking by the factored RBF form), ``_validation`` (the
  held-out score), ``fetch_rows``; ``op:kmp_column_stats`` the commit pass (``Bᵀd``, ``dᵀR``);
- ``eff:*`` the effects a pass applies first (``pend_column`` the chosen column's kernel values,
  ``move_fit`` the rank-one residual update, ``accept_column``, ``set_coef``);
- the driver: ``_solve_lower`` / ``_solve_lower_strided`` (the forward solve of a Cholesky append),
  ``_cho_solve`` and ``FortranCopy.of`` (the coefficient solves), ``sampler.draw``,
  ``gather_fetched``, ``record_pass``, ``ScoreStats.combine``; ``_calibrate`` the probability map.

Run it once per code version with ``--label`` (e.g. on a checkout of the commit before a change with
``PYTHONPATH`` pointing at it, then on this one, alternating): results are merged by label into one
JSON. One warm-up fit per process (imports, thread pools) is not timed.

Usage::

    python benchmarks/kmp_auto_phases.py --label after --sets spambase,phoneme \\
        --out benchmarks/results/kmp_auto_phases.json
"""

from __future__ import annotations

import collections
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_phases"


def _arguments(p):
    p.add_argument("--sets", default="spambase,phoneme")
    p.add_argument("--label", default="current")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

CPU = collections.Counter()
CALLS = collections.Counter()


def _timed(owner, name, label=None):
    fn = getattr(owner, name, None)
    if fn is None:
        return
    label = label or name

    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            CPU[label] += time.process_time() - t0
            CALLS[label] += 1

    setattr(owner, name, wrapper)


def _engine_run(self, op, msg=None, effects=()):
    """InProcessEngine.run with each effect and the query timed (the same calls in the same order)."""
    from kmp_dask.blockops import apply_effects

    self.n_calls += 1
    effects = tuple(effects)
    self.journal.record(effects)
    out = []
    for p in self.partitions:
        for e in effects:
            t0 = time.process_time()
            apply_effects(p, (e,))
            CPU["eff:" + e.op.__name__] += time.process_time() - t0
        t0 = time.process_time()
        out.append(None if op is None else op(p, msg))
        CPU["op:" + getattr(op, "__name__", "none")] += time.process_time() - t0
    return out


def install():
    import kmp_dask.blockops._kmp as bk
    import kmp_dask.blockops._results as br
    import kmp_dask.estimators._kmp as ek
    import kmp_dask.greedy._kmp as gk
    import kmp_dask.greedy._record as rec
    import kmp_dask.greedy._sampling as sa
    import kmp_dask.linalg._cholesky as lc
    import kmp_dask.parallel._engine as en

    en.InProcessEngine.run = _engine_run
    for n in ("_score_candidates", "_score_factored", "_validation", "fetch_rows"):
        _timed(bk, n)
    for n in ("_solve_lower", "_solve_lower_strided", "_cho_solve"):
        _timed(lc, n)
    _timed(lc._FortranCopy, "of", "FortranCopy.of")
    _timed(sa.RandomCandidates, "draw", "sampler.draw")
    _timed(gk, "gather_fetched")
    _timed(rec.Recorder, "record_pass")
    _timed(br.ScoreStats, "combine", "ScoreStats.combine")
    _timed(ek._BaseKMP, "_calibrate")
    _timed(ek._BaseKMP, "_run_loop")


def one_set(name):
    from kmp_auto_acceptance import load_cls

    import kmp_dask
    from kmp_dask import KMPClassifier

    Xtr, Xte, ytr, yte = load_cls(name, 5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        KMPClassifier(random_state=0, n_basis=3).fit(Xtr[:200], ytr[:200])  # warm-up, not timed
        CPU.clear()
        CALLS.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        est = KMPClassifier(random_state=0).fit(Xtr, ytr)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {"fit_cpu_seconds": cpu, "fit_wall_seconds": wall, "n_basis": int(est.n_basis_),
            "last_size": int(est.val_sizes_[-1]), "test": float(est.score(Xte, yte)),
            "phases": {k: round(v, 4) for k, v in CPU.most_common()}, "calls": dict(CALLS),
            "kmp_dask_from": str(Path(kmp_dask.__file__).parent)}


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    install()
    doc = json.loads(out.read_text()) if out.exists() else {"benchmark": NAME, "protocol": __doc__.split(
        "Usage::")[0].strip(), "runs": []}
    run = {"label": args.label, "environment": H.environment(), "uptime_start": H.uptime(), "sets": {}}
    for name in [n for n in args.sets.split(",") if n]:
        run["sets"][name] = one_set(name)
        H.log(f"{args.label} {name}: {run['sets'][name]['fit_cpu_seconds']:.2f} CPU s")
    run["uptime_end"] = H.uptime()
    doc["runs"].append(run)
    H.finish(doc, out, t0)


if __name__ == "__main__":
    main(ARGS)
