"""Choosing KMP's settings for the SVC race without the race's test rows.

The race (benchmarks/svc_race.py) draws ``make_classification(n_samples=7·10⁴, n_features=54,
n_informative=20, random_state=0)``. This script draws the same generator with another seed
(``--seed``, default 1), splits it 5·10⁴ train / 2·10⁴ validation exactly as the race does
(standardised on the training rows, float32), and fits ``KMPClassifier(fit_mode="backfit",
n_basis=--n-basis)`` for each setting in ``--settings`` — ``gamma_factor:atoms_per_pass:candidates``
(γ = gamma_factor / 54; candidates "auto" = 59 per atom, or an int) — in process, in the order
given, recording fit seconds and validation accuracy. The race's own rows are never read: the
chosen setting is then used by ``svc_race.py --gamma-factor/--candidates/--atoms-per-pass``.

Usage: ``python benchmarks/kmp_race_tuning.py [--seed 1] [--n-basis 1144]
[--settings 1:8:auto 0.5:8:auto 2:8:auto 1:16:auto]``. JSON: benchmarks/results/kmp_race_tuning.json.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from svc_race import data

NAME = "kmp_race_tuning"


def add_arguments(p):
    p.add_argument("--rows", type=int, default=70_000)
    p.add_argument("--seed", type=int, default=1, help="make_classification random_state (the race uses 0)")
    p.add_argument("--n-basis", type=int, default=1144)
    p.add_argument("--settings", nargs="+", default=["1:8:auto", "0.5:8:auto", "2:8:auto", "1:16:auto"],
                   help="gamma_factor:atoms_per_pass:candidates (gamma = gamma_factor / 54)")


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    import numpy as np

    from kmp_dask import KMPClassifier

    t0 = time.perf_counter()
    Xtr, Xva, ytr, yva = data(args.rows, random_state=args.seed)
    res = {"name": NAME, "environment": H.environment(), "seed": args.seed, "rows_train": len(ytr),
           "rows_validation": len(yva), "n_basis": args.n_basis, "runs": []}
    out = H.output_path(NAME, args.out)
    for s in args.settings:
        gf, k, cand = s.split(":")
        cand = cand if cand in ("auto", "all") else int(cand)
        est = KMPClassifier(fit_mode="backfit", n_basis=args.n_basis, gamma=float(gf) / 54, candidates=cand,
                            atoms_per_pass=int(k), random_state=0)
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t
        acc = float(np.mean(est.predict(Xva) == yva))
        res["runs"].append({"gamma_factor": float(gf), "gamma": float(gf) / 54, "atoms_per_pass": int(k),
                            "candidates": cand, "fit_seconds": fit_s, "validation_accuracy": acc,
                            "load_average": list(os.getloadavg())})
        H.log(f"{s}: fit {fit_s:.1f}s, validation accuracy {acc:.4f}")
        H.write_json(out, res)
    res["load_average_at_end"] = list(os.getloadavg())
    H.finish(res, out, t0)


if __name__ == "__main__":
    main()
