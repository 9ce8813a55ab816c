"""CVMClassifier against scikit-learn's SVC on the covertype-like data, with a profile of the CVM fit.

Data: ``make_classification(n_features=54, n_informative=20)`` (covertype-like, 2 classes),
standardised on the training rows, float32; SVC(C=1, gamma=1/54) and ``CVMClassifier()`` with its
defaults (``gamma="scale"`` is 1/54 on standardised rows), fitted in the same run on the same rows:
fit seconds (median over ``--repeats``), their ratio, test accuracy, support / core vectors.

The CVM fit is profiled with timers around its parts (wrapped for the profiled fit only; the
timed fits run unwrapped): the core-set QP (``SMOQP.solve``), the core set's K̃ entries
(``_grow``: kernel values between the new core row and the others), distance passes split into
the per-partition work (``cvm_furthest``) and the engine's overhead around it, sampled vs full
passes, and the rest of the driver loop.

``--baseline REF``: the same CVM fit (and the many-class one) with kmp_dask as it is at git
revision REF, in a subprocess on a copy exported with ``git archive`` — before/after ratios in
one run. ``--classes K --class-rows N``: a K-class problem of N rows (50 classes at
N = 1,000 took 80 s).

    python benchmarks/cvm_speed.py                      # 2·10⁴ training rows
    python benchmarks/cvm_speed.py --rows 50000         # the issue's size
    python benchmarks/cvm_speed.py --baseline 7be3f54   # before/after in one run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "cvm_speed"


def _data(rows, test_rows, seed=0):
    import numpy as np
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(n_samples=rows + test_rows, n_features=54, n_informative=20, random_state=seed)
    sc = StandardScaler().fit(X[:rows])
    X = sc.transform(X).astype(np.float32)
    return X[:rows], y[:rows], X[rows:], y[rows:]


def _many_classes(rows, classes, seed=0):
    import numpy as np
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(n_samples=rows, n_features=54, n_informative=20, n_classes=classes,
                               n_clusters_per_class=1, random_state=seed)
    return StandardScaler().fit_transform(X).astype(np.float32), y


def _points_per_pass(k):
    """``core_vector_machine`` with ``points_per_pass=k`` (the estimators do not expose it; None:
    the default); returns the undo."""
    import kmp_dask.greedy._cvm_problems as gp

    real = gp.core_vector_machine
    if k is None:
        return lambda: None

    def cvm(*a, config, **kw):
        return real(*a, config=dataclasses.replace(config, points_per_pass=int(k)), **kw)

    gp.core_vector_machine = cvm
    return lambda: setattr(gp, "core_vector_machine", real)


def fit_cvm(X, y, Xte=None, yte=None, points_per_pass=None, **params):
    """One ``CVMClassifier(**params)`` fit: seconds, accuracy, core vectors, passes."""
    import numpy as np

    from kmp_dask import CVMClassifier

    est = CVMClassifier(random_state=0, **params)
    undo = _points_per_pass(points_per_pass)
    t = time.perf_counter()
    try:
        est.fit(X, y)
    finally:
        undo()
    sec = time.perf_counter() - t
    out = {"fit_s": sec, "n_core": int(est.expansion_.n_vectors), "stop_reason": list(np.atleast_1d(est.stop_reason_)),
           "n_full_passes": [int(r.n_full_passes) for r in est.results_][:5],
           "n_passes": int(sum(r.n_passes for r in est.results_))}
    if Xte is not None:
        out["accuracy"] = float((est.predict(Xte) == yte).mean())
    return out, est


class _Timers:
    """Accumulated seconds and calls per wrapped function (the profile)."""

    def __init__(self):
        self.sec, self.calls = {}, {}

    def wrap(self, owner, attr, key):
        real = getattr(owner, attr)
        timers = self

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                timers.sec[key] = timers.sec.get(key, 0.0) + time.perf_counter() - t
                timers.calls[key] = timers.calls.get(key, 0) + 1

        setattr(owner, attr, timed)
        return lambda: setattr(owner, attr, real)


def profiled_fit(X, y, points_per_pass=None):
    """The CVM fit with timers around its parts; seconds per part and what is left to the driver."""
    import kmp_dask.greedy._cvm as g
    from kmp_dask.greedy import _cvm_qp

    T = _Timers()
    undo = [T.wrap(g.SMOQP, "solve", "qp"), T.wrap(g, "_grow", "core_gram"),
            T.wrap(g._CoreSetLoop, "_sampled_pass", "sampled_passes"),
            T.wrap(g._CoreSetLoop, "_full_pass", "full_passes"), T.wrap(g, "cvm_furthest", "partition_work"),
            T.wrap(g._CoreSetLoop, "_pass", "passes")]
    qps = []
    real_init = _cvm_qp.SMOQP.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        qps.append(self)

    _cvm_qp.SMOQP.__init__ = init
    try:
        out, est = fit_cvm(X, y, points_per_pass=points_per_pass)
    finally:
        _cvm_qp.SMOQP.__init__ = real_init
        for u in undo:
            u()
    total = out["fit_s"]
    parts = {k: round(v, 3) for k, v in T.sec.items()}
    parts["pass_overhead"] = round(T.sec.get("passes", 0) - T.sec.get("partition_work", 0), 3)
    parts["driver_rest"] = round(total - T.sec.get("qp", 0) - T.sec.get("core_gram", 0)
                                 - T.sec.get("sampled_passes", 0) - T.sec.get("full_passes", 0), 3)
    return {"fit_s": total, "seconds": parts, "calls": T.calls,
            "qp_steps": sum(q.n_steps for q in qps), "qp_calls": sum(q.n_calls for q in qps),
            "n_core": out["n_core"], "iterations": int(sum(r.n_iter for r in est.results_))}


def keel_points_per_pass(names, ks=(1, 8)):
    """``CVMClassifier()`` with ``points_per_pass`` k on KEEL sets (standardised, 70/30 stratified
    split, seed 0) against SVC(C=1, gamma="scale"): the default's check on data it was not tuned on."""
    import numpy as np
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    from kmp_dask.datasets import load_keel

    out = {}
    for name in names:
        ds = load_keel(name)
        X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        t = time.perf_counter()
        svc = SVC(C=1.0, gamma="scale").fit(Xtr, ytr)
        r = {"rows": len(Xtr), "svc": {"fit_s": time.perf_counter() - t, "accuracy": float(svc.score(Xte, yte)),
                                       "n_sv": len(svc.support_)}}
        for k in ks:
            r[f"cvm_k{k}"] = fit_cvm(Xtr, ytr, Xte, yte, points_per_pass=k)[0]
        out[name] = r
        H.log(f"{name}: {r}")
    return out


def fit_svc(X, y, Xte, yte):
    from sklearn.svm import SVC

    t = time.perf_counter()
    svc = SVC(C=1.0, gamma=1.0 / 54).fit(X, y)
    sec = time.perf_counter() - t
    return {"fit_s": sec, "accuracy": float(svc.score(Xte, yte)), "n_sv": int(svc.support_vectors_.shape[0])}


def _baseline(ref, args):
    """This script's ``--child`` run on kmp_dask at git revision ``ref`` (a subprocess)."""
    root = H.ROOT
    tmp = Path(tempfile.mkdtemp(prefix="cvm_speed_base_"))
    archive = subprocess.run(["git", "-C", str(root), "archive", ref, "kmp_dask"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    env = dict(os.environ, PYTHONPATH=str(tmp))
    cmd = [sys.executable, __file__, "--child", "--rows", str(args.rows), "--test-rows", str(args.test_rows),
           "--classes", str(args.classes), "--class-rows", str(args.class_rows), "--threads", str(args.threads)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=str(tmp))
    return json.loads(res.stdout.strip().splitlines()[-1])


def child(args):
    """The timed CVM fits only (no SVC, no profile) with whichever kmp_dask is on the path."""
    import kmp_dask

    X, y, Xte, yte = _data(args.rows, args.test_rows)
    out = {"kmp_dask": kmp_dask.__file__}
    out["cvm"], _ = fit_cvm(X, y, Xte, yte)
    if args.classes:
        Xm, ym = _many_classes(args.class_rows, args.classes)
        out["many_classes"], _ = fit_cvm(Xm, ym)
    print(json.dumps(out))


def _cvm_params(args):
    """The CVMClassifier parameters given on the command line (none: its defaults)."""
    out = {} if args.max_core is None else {"max_core": int(args.max_core)}
    return out if args.eps is None else {**out, "eps": float(args.eps)}


def _add_arguments(p):
    p.add_argument("--rows", type=int, default=20000, help="training rows (the large-N case: 50000)")
    p.add_argument("--test-rows", type=int, default=5000)
    p.add_argument("--repeats", type=int, default=1, help="timed fits of each method (median)")
    p.add_argument("--baseline", default=None, help="git revision to time the same CVM fits at (subprocess)")
    p.add_argument("--classes", type=int, default=50, help="classes of the many-class problem (0: skip)")
    p.add_argument("--class-rows", type=int, default=1000)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--no-svc", action="store_true", help="skip SVC (a side run of CVM settings)")
    p.add_argument("--max-core", type=int, default=None, help="CVMClassifier(max_core=) (default: its default, 5000)")
    p.add_argument("--eps", type=float, default=None, help="CVMClassifier(eps=) (default: its default)")
    p.add_argument("--qp-eps", type=float, default=None,
                   help="greedy._cvm.QP_EPS for this run: the core-set QP's tolerance as a fraction of eps·R²")
    p.add_argument("--keel", default=None, help="only: points_per_pass 1 vs 8 on these KEEL sets (comma-separated)")
    p.add_argument("--points-per-pass", type=int, default=None,
                   help="core_vector_machine's points_per_pass for the CVM fits (default: the library's)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def main(argv=None):
    p = H.add_common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), NAME, plots=False)
    _add_arguments(p)
    args = p.parse_args(argv)
    H.set_threads(args.threads)
    if args.qp_eps is not None:
        import kmp_dask.greedy._cvm as g

        g.QP_EPS = float(args.qp_eps)
    if args.child:
        return child(args)
    if args.keel:
        res = {"keel": keel_points_per_pass(args.keel.split(",")), "environment": H.environment()}
        return H.write_json(H.output_path(NAME + "_points_per_pass", args.out), res)
    import numpy as np

    import kmp_dask

    X, y, Xte, yte = _data(args.rows, args.test_rows)
    res = {"rows": args.rows, "test_rows": args.test_rows, "kmp_dask": kmp_dask.__file__,
           "points_per_pass": args.points_per_pass, "cvm_params": _cvm_params(args), "qp_eps": args.qp_eps,
           "environment": H.environment()}
    H.log(f"{args.rows} rows: SVC and CVMClassifier() × {args.repeats} (alternating)")
    svc, cvm = [], []
    for _ in range(args.repeats):  # alternating, so that both see the same load drift
        if not args.no_svc:
            svc.append(fit_svc(X, y, Xte, yte))
        cvm.append(fit_cvm(X, y, Xte, yte, points_per_pass=args.points_per_pass, **_cvm_params(args))[0])
    res["cvm"] = dict(cvm[-1], fit_s_all=[r["fit_s"] for r in cvm],
                      fit_s_median=float(np.median([r["fit_s"] for r in cvm])))
    if svc:
        res["svc"] = dict(svc[-1], fit_s_all=[r["fit_s"] for r in svc],
                          fit_s_median=float(np.median([r["fit_s"] for r in svc])))
        res["cvm_over_svc_time"] = res["cvm"]["fit_s_median"] / res["svc"]["fit_s_median"]
        res["cvm_over_svc_time_per_repeat"] = [c["fit_s"] / v["fit_s"] for c, v in zip(cvm, svc, strict=True)]
        res["accuracy_gap_points"] = 100 * (res["svc"]["accuracy"] - res["cvm"]["accuracy"])
    H.log(f"SVC {res.get('svc')}  CVM {res['cvm']}  ratio {res.get('cvm_over_svc_time')}")
    if not args.no_profile:
        res["profile"] = profiled_fit(X, y, args.points_per_pass)
        H.log(f"profile {res['profile']}")
    if args.classes:
        Xm, ym = _many_classes(args.class_rows, args.classes)
        res["many_classes"], _ = fit_cvm(Xm, ym)
        res["many_classes"].update(classes=args.classes, rows=args.class_rows)
        H.log(f"{args.classes} classes at {args.class_rows} rows: {res['many_classes']}")
    if args.baseline:
        H.log(f"baseline at {args.baseline} (subprocess)")
        base = _baseline(args.baseline, args)
        res["baseline"] = dict(base, ref=args.baseline)
        res["speedup_vs_baseline"] = base["cvm"]["fit_s"] / res["cvm"]["fit_s_median"]
        if args.classes:
            res["many_classes_speedup_vs_baseline"] = base["many_classes"]["fit_s"] / res["many_classes"]["fit_s"]
        H.log(f"baseline {base}")
    out = H.output_path(NAME, args.out)
    H.write_json(out, res)
    H.log(f"wrote {out}")


if __name__ == "__main__":
    main()
