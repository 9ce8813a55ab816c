"""Large N: what keeping the basis columns costs, and what each way of not keeping them gives up.

Question (issue "Out of core"): backfitting needs ``B·w`` and ``Bᵀd`` every iteration and B is
``rows × n`` (40 GB at 10⁷ rows and 1000 atoms). The large-N mode keeps only the atoms
(``basis_columns="recomputed"``: a pass that needs B recomputes it). On data where every variant
runs, against the resident stored-cache backfit fit, measure time per iteration and held-out
accuracy of:

* ``backfit/stored``     — the reference: B cached, resident;
* ``backfit/streamed``   — B cached but streamed from worker scratch (budget forced small);
* ``backfit/recomputed`` — B recomputed every pass that needs it (2 × rows·n·d flops per atom);
* ``basic/stored``, ``basic/recomputed`` — basic SKMP (no backfitting): B is needed only for the
  residual resync every 32 atoms and validation, so recomputing costs almost nothing.

Then ``--large-rows``: one large fit in the mode ``basis_columns="auto"`` picks on workers
whose budget cannot hold the columns (it must pick ``recomputed``), recording time per
iteration, worker and driver peak RSS, and held-out accuracy, and the cost extrapolated to
``--extrapolate-rows`` (linear in rows: every pass is a scan; marked as extrapolated).

Protocol: synthetic covertype-like stores (54 float32 features, 7 classes; held-out rows from
the same seeded sequence), LocalCluster(2 workers × 1 thread), ``KMPClassifier(candidates=59,
gamma=0.05)``. Seconds per iteration: median over iterations after the third (``history_``);
one fit per variant (the ratios are per-iteration medians within the same run).

Usage: ``python benchmarks/large_n.py [--rows 400000] [--n-basis 120] [--large-rows 10000000]``
Results: benchmarks/results/large_n.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "large_n"


def _args(p):
    p.add_argument("--rows", type=int, default=400_000, help="training rows of the mode comparison")
    p.add_argument("--test-rows", type=int, default=100_000)
    p.add_argument("--n-basis", type=int, default=120)
    p.add_argument("--large-rows", type=int, default=0, help="rows of the large run (0: skip it)")
    p.add_argument("--large-basis", type=int, default=100)
    p.add_argument("--large-memory-limit", default="2.5GB", help="per-worker memory_limit of the large run")
    p.add_argument("--extrapolate-rows", type=int, default=100_000_000)
    p.add_argument("--workdir", default=None, help="where the stores are written (default: a temp dir)")
    p.add_argument("--quick", action="store_true", help="small sizes, output in $TMPDIR (smoke test)")
    p.add_argument("--no-modes", action="store_true",
                   help="skip the mode comparison (keep the one already in the output JSON)")


def _median_iter(est, skip=3):
    import numpy as np

    secs = [h["seconds"] for h in est.history_][skip:]
    return float(np.median(secs)) if secs else float("nan")


def _peak_rss(dask_worker=None):
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _fit(train, test, client, config, **params):
    import dask

    from kmp_dask import KMPClassifier

    with dask.config.set({f"kmp_dask.{k}": v for k, v in config.items()}):
        est = KMPClassifier(candidates=59, gamma=0.05, random_state=0, client=client, **params)
        t0 = time.perf_counter()
        est.fit(train)
        fit_s = time.perf_counter() - t0
    acc = float(est.score(test))
    return est, fit_s, acc


def compare_modes(args, work, client):
    from kmp_dask.datasets import make_classification_store

    H.log(f"stores: {args.rows} training + {args.test_rows} held-out rows")
    train = make_classification_store(str(work / "cmp_train.zarr"), args.rows, random_state=7, overwrite=True,
                                      client=client)
    test = make_classification_store(str(work / "cmp_test.zarr"), args.test_rows, random_state=7,
                                     start_row=args.rows, overwrite=True, client=client)
    # a per-worker budget of ~3.4 partitions at the final basis size: every partition's rows and
    # state (with its basis columns) stream from scratch by the end of the fit
    from kmp_dask.parallel import partition_specs

    part_rows = max(s.stop - s.start for s in partition_specs(train))
    streamed_budget = int(3.4 * part_rows * (train.n_features * 4 + 8 + 16 * 7 + (args.n_basis + 2) * 4))
    variants = {
        "backfit/stored": ({}, {"fit_mode": "backfit", "basis_columns": "stored"}),
        "backfit/streamed": ({"budget-bytes": streamed_budget}, {"fit_mode": "backfit", "basis_columns": "stored"}),
        "backfit/recomputed": ({}, {"fit_mode": "backfit", "basis_columns": "recomputed"}),
        "basic/stored": ({}, {"fit_mode": "basic", "basis_columns": "stored"}),
        "basic/recomputed": ({}, {"fit_mode": "basic", "basis_columns": "recomputed"}),
        "basic/streamed": ({"budget-bytes": streamed_budget}, {"fit_mode": "basic", "basis_columns": "stored"}),
        # basic steps + least-squares refits (geometric schedule: every atom up to 10, then each
        # time the basis grew by a tenth; or every 20 atoms), and a final refit
        "refit-auto/recomputed": ({}, {"fit_mode": "refit", "refit_every": "auto", "basis_columns": "recomputed"}),
        "refit-20/recomputed": ({}, {"fit_mode": "refit", "refit_every": 20, "basis_columns": "recomputed"}),
    }
    out = {}
    for name, (config, params) in variants.items():
        est, fit_s, acc = _fit(train, test, client, config, n_basis=args.n_basis, **params)
        # the median hides a refit's occasional costly iteration: the mean (fit time / atoms) shows it
        out[name] = {"fit_seconds": fit_s, "seconds_per_iteration": _median_iter(est),
                     "mean_seconds_per_iteration": fit_s / max(int(est.n_basis_), 1), "test_accuracy": acc,
                     "n_basis": int(est.n_basis_), "basis_columns": est.basis_columns_, "config": config}
        H.log(f"{name:20s} {fit_s:7.1f} s  {out[name]['seconds_per_iteration']:.3f} s/it  acc {acc:.4f}")
    ref = out["backfit/stored"]
    for r in out.values():
        r["time_ratio_vs_backfit_stored"] = r["seconds_per_iteration"] / ref["seconds_per_iteration"]
        r["mean_time_ratio_vs_backfit_stored"] = r["mean_seconds_per_iteration"] / ref["mean_seconds_per_iteration"]
        r["accuracy_change_vs_backfit_stored"] = r["test_accuracy"] - ref["test_accuracy"]
    return out


def large_run(args, work):
    import numpy as np
    from distributed import Client, LocalCluster

    from kmp_dask.datasets import make_classification_store

    rows = args.large_rows
    H.log(f"large run: {rows} rows, {args.large_basis} atoms, memory_limit {args.large_memory_limit}")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="6GB",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        t0 = time.perf_counter()
        train = make_classification_store(str(work / "large_train.zarr"), rows, random_state=11, overwrite=True,
                                          client=client)
        test = make_classification_store(str(work / "large_test.zarr"), 200_000, random_state=11, start_row=rows,
                                         overwrite=True, client=client)
        gen_s = time.perf_counter() - t0
    columns_bytes = rows * (args.large_basis + 2) * 4
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=args.large_memory_limit,
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        est, fit_s, acc = _fit(train, test, client, {}, n_basis=args.large_basis, fit_mode="basic",
                               basis_columns="auto")
        worker_peak = client.run(_peak_rss)
    import resource

    per_it = _median_iter(est)
    factor = args.extrapolate_rows / rows
    return {
        "rows": rows, "n_features": 54, "store_gb": rows * 54 * 4 / 1e9, "n_basis": int(est.n_basis_),
        "fit_mode": "basic", "candidates": 59, "memory_limit_per_worker": args.large_memory_limit,
        "columns_bytes_if_stored": columns_bytes, "basis_columns_chosen_by_auto": est.basis_columns_,
        "store_generation_seconds": gen_s, "fit_seconds": fit_s, "seconds_per_iteration": per_it,
        "test_rows": 200_000, "test_accuracy": acc,
        "worker_peak_rss_mib": {k: v / 2**20 for k, v in worker_peak.items()},
        "driver_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "extrapolated": {
            "rows": args.extrapolate_rows, "marked": "EXTRAPOLATED, not measured: linear in rows",
            "seconds_per_iteration": per_it * factor,
            "fit_seconds_for_same_atoms": fit_s * factor,
            "columns_bytes_if_stored": args.extrapolate_rows * (args.large_basis + 2) * 4,
        },
        "history_seconds": [h["seconds"] for h in est.history_],
        "stop_reason": est.stop_reason_,
        "same_accuracy_scale_note": "held-out accuracy of a basic SKMP fit of this many atoms; no resident "
                                    "stored-cache reference at this size",
        "n_atoms_check": int(np.asarray(est.basis_indices_).size),
    }


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    import tempfile

    from distributed import Client, LocalCluster

    if args.quick:
        args.rows, args.test_rows, args.n_basis = 30_000, 5_000, 20
        args.large_rows = min(args.large_rows, 60_000) if args.large_rows else 0
    t0 = time.perf_counter()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kmp_large_n_"))
    work.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": NAME, "environment": H.environment(), "rows": args.rows, "test_rows": args.test_rows,
              "n_basis": args.n_basis, "workers": "LocalCluster(2 x 1 thread, memory_limit 4GB)"}
    out = H.output_path(NAME, args.out, args.quick)
    previous = json.loads(out.read_text()) if out.exists() else {}
    if args.no_modes:
        result = {**previous, **{k: v for k, v in result.items() if k == "environment"}}
    else:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="4GB",
                          dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
            result["modes"] = compare_modes(args, work, client)
        if "large_run" in previous and not args.large_rows:
            result["large_run"] = previous["large_run"]  # measured by an earlier --large-rows run
    if args.large_rows:
        result["large_run"] = large_run(args, work)
    H.finish(result, out, t0)


if __name__ == "__main__":
    main()
