"""Several atoms per pass: time per atom and accuracy vs ``atoms_per_pass`` k on the SVC-race data.

Data as benchmarks/svc_race.py (``make_classification(n_samples=7·10⁴, n_features=54,
n_informative=20, random_state=0)``, 5·10⁴ train / 2·10⁴ test, standardised, float32, RBF
γ = 1/54). For each k in ``--ks`` (default 1 2 4 8) one ``KMPClassifier(fit_mode="backfit",
n_basis=--n-basis, candidates="auto" (s = 59), atoms_per_pass=k, random_state=0)`` is fitted in
process; the fits are interleaved over ``--repeats`` rounds (k = 1, 2, 4, 8, 1, 2, ...) so load
changes on the shared machine hit every k alike, and the median fit time is reported with its
ratio to k = 1 in the same run.

Roofline (per atom, stored float32 columns, N training rows, d features, s candidates, n̄ the
mean basis size, m outputs): one atom per pass reads the basis twice per atom (the residual move
``Bw`` and the commit pass's ``Bᵀd``): 2·N·n̄·4 bytes and 4·N·n̄ flops, plus the kernel block of
the s candidates (N·s·d·2 flops) and X once per pass (N·d·4 bytes, 2 passes). With k per pass a
batch reads the basis twice (the residual ``B α`` and the block pass's ``DᵀB`` for 2k
candidates): 2·N·n̄·4/k bytes and (2·N·n̄·m + 2·N·2k·n̄)/k flops per atom, the same kernel block
per atom, the 2k candidate columns (N·2k·d·2 flops per batch) and X over 2 passes per batch. The
JSON holds these counts and the times they imply at ``--bandwidth`` GB/s and ``--gflops``
GFlop/s (assumed machine figures, stated in the JSON; the measured times are the result).

Usage: ``python benchmarks/kmp_atoms_per_pass.py [--rows 70000] [--n-basis 400] [--ks 1 2 4 8]
[--repeats 1] [--quick]``. JSON: benchmarks/results/kmp_atoms_per_pass.json.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from svc_race import data

NAME = "kmp_atoms_per_pass"


def add_arguments(p):
    p.add_argument("--rows", type=int, default=70_000)
    p.add_argument("--n-basis", type=int, default=400)
    p.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--candidates", default="auto", help="'auto' (s = 59), 'all' or an int")
    p.add_argument("--bandwidth", type=float, default=10.0, help="assumed memory bandwidth, GB/s (roofline)")
    p.add_argument("--gflops", type=float, default=30.0, help="assumed float64 GFlop/s (roofline)")
    p.add_argument("--quick", action="store_true", help="7,000 rows, 60 atoms (JSON to $TMPDIR)")


def roofline(N, d, s, n_basis, k, m, bandwidth, gflops):
    """Bytes and flops per atom (see the module doc) and the time they take at the assumed rates."""
    nbar = n_basis / 2
    if k == 1:
        by = 2 * N * nbar * 4 + 2 * N * d * 4
        fl = 4 * N * nbar + 2 * N * s * d
    else:
        by = (2 * N * nbar * 4 + 2 * N * d * 4) / k
        fl = (2 * N * nbar * m + 2 * N * 2 * k * nbar + 2 * N * 2 * k * d) / k + 2 * N * s * d
    return {"bytes_per_atom": by, "flops_per_atom": fl, "mean_basis_size": nbar,
            "seconds_per_atom_memory": by / (bandwidth * 1e9), "seconds_per_atom_compute": fl / (gflops * 1e9),
            "seconds_per_atom_roofline": max(by / (bandwidth * 1e9), fl / (gflops * 1e9))}


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    import numpy as np

    from kmp_dask import KMPClassifier

    rows, n_basis = (7_000, 60) if args.quick else (args.rows, args.n_basis)
    cand = args.candidates if args.candidates in ("auto", "all") else int(args.candidates)
    t0 = time.perf_counter()
    Xtr, Xte, ytr, yte = data(rows)
    res = {"name": NAME, "environment": H.environment(), "rows_train": len(ytr), "rows_test": len(yte),
           "n_basis": n_basis, "candidates": cand, "assumed_bandwidth_GBps": args.bandwidth,
           "assumed_GFlops": args.gflops, "runs": []}
    for rep in range(args.repeats):
        for k in args.ks:
            est = KMPClassifier(fit_mode="backfit", n_basis=n_basis, gamma=1 / 54, candidates=cand,
                                atoms_per_pass=k, random_state=0)
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            fit_s = time.perf_counter() - t
            acc = float(np.mean(est.predict(Xte) == yte))
            res["runs"].append({"k": k, "repeat": rep, "fit_seconds": fit_s, "accuracy": acc,
                                "n_basis": int(est.n_basis_), "load_average": list(os.getloadavg())})
            H.log(f"k={k} rep={rep}: fit {fit_s:.1f}s ({1e3 * fit_s / n_basis:.1f} ms/atom), accuracy {acc:.4f}")
    s = 59 if cand == "auto" else (len(ytr) if cand == "all" else cand)
    summary = {}
    for k in args.ks:
        runs = [r for r in res["runs"] if r["k"] == k]
        med = statistics.median(r["fit_seconds"] for r in runs)
        summary[str(k)] = {"median_fit_seconds": med, "seconds_per_atom": med / n_basis,
                           "accuracy": runs[0]["accuracy"],
                           "roofline": roofline(len(ytr), Xtr.shape[1], s, n_basis, k, 1, args.bandwidth, args.gflops)}
    base = summary[str(args.ks[0])]["median_fit_seconds"]
    for v in summary.values():
        v["fit_ratio_to_first_k"] = v["median_fit_seconds"] / base
    res["summary"] = summary
    res["load_average_at_end"] = list(os.getloadavg())
    H.finish(res, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
