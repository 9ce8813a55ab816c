"""When does ``kmp-dask``'s default ``--scheduler auto`` start the embedded process cluster?

The CLI runs a command in process (the Python API's ``client="sync"``) unless the data are
larger than ``kmp_dask.cli._where.AUTO_CLUSTER_BYTES``; this script measures the two costs that
threshold weighs on this machine:

1. ``cluster_start``: seconds to start the embedded ``LocalCluster`` the CLI uses (all workers
   arrived) and to stop it again — paid by every command that starts one.
2. ``fits``: for stores of growing size (synthetic classification, 20 float32 features, 7
   classes), the default ``kmp-dask train`` fit (``KMPClassifier`` with its default
   parameters, ``n_basis`` capped by ``--n-basis``) in process and on the already started
   cluster.

The cluster pays when ``sync_seconds > cluster_seconds + start_seconds``; the JSON records,
for each size, both sides and that verdict. Usage::

    python benchmarks/cli_scheduler_threshold.py [--sizes-mib 1 4 16 64] [--workers 2] [--quick]

Measured 2026-11-25 (results/cli_scheduler_threshold.json; 2 cores shared with other jobs, load
~9): the cluster's start and stop took 4.4–5.2 s; the in-process fit was no slower than the
cluster's at every size (1, 4, 16, 64 MiB: 2.4 / 4.3 / 27 / 125 s in process, 8.4 / 13.5 / 27 /
285 s on the started 2-worker cluster). Speed alone never asks for the cluster on such a machine;
64 MiB is where the CLI starts it anyway, because the in-process engine holds every partition and
the fit's per-row state in the one process (no memory limit, no out-of-core paging), and a fit
on more data runs minutes, so the ~5 s start costs little there.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from _harness import log  # noqa: E402

NAME = "cli_scheduler_threshold"
N_FEATURES = 20


def _args(p):
    p.add_argument("--sizes-mib", type=float, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--n-basis", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3, help="cluster starts measured")
    p.add_argument("--quick", action="store_true", help="sizes 1 and 4 MiB, 20 basis functions, 1 start")


def _cluster_start(workers: int) -> dict:
    from kmp_dask.parallel import embedded_cluster

    t0 = time.perf_counter()
    with embedded_cluster(workers) as client:
        up = time.perf_counter() - t0
        client.submit(sum, [1, 2]).result()
        t1 = time.perf_counter()
    return {"start_seconds": up, "stop_seconds": time.perf_counter() - t1, "total_seconds": time.perf_counter() - t0}


def _fit_seconds(url, client, n_basis) -> float:
    from kmp_dask import KMPClassifier

    est = KMPClassifier(n_basis=n_basis, random_state=0, client=client)
    t0 = time.perf_counter()
    est.fit(url)
    return time.perf_counter() - t0


def conclusion(result: dict) -> dict:
    """What the measurements say about the threshold: the sizes at which the in-process fit was no
    slower than the cluster's fit plus its start, and the largest of them."""
    in_process_wins = [f["store_mib"] for f in result["fits"] if not f["cluster_pays"]]
    return {"in_process_no_slower_at_mib": in_process_wins,
            "largest_measured_mib_where_in_process_wins": max(in_process_wins) if in_process_wins else None,
            "cluster_pays_at_mib": [f["store_mib"] for f in result["fits"] if f["cluster_pays"]]}


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    t_all = time.perf_counter()
    if args.quick:
        args.sizes_mib, args.n_basis, args.repeats = [1, 4], 20, 1
    from kmp_dask.datasets import make_classification_store
    from kmp_dask.parallel import embedded_cluster

    starts = []
    for i in range(args.repeats):
        starts.append(_cluster_start(args.workers))
        log(f"cluster start {i + 1}: {starts[-1]}")
    start = sorted(s["total_seconds"] for s in starts)[len(starts) // 2]
    fits = []
    with tempfile.TemporaryDirectory() as tmp, embedded_cluster(args.workers) as client:
        for mib in args.sizes_mib:
            n_rows = int(mib * 2**20 / (N_FEATURES * 4))
            st = make_classification_store(Path(tmp) / f"s{mib}.zarr", n_rows, n_features=N_FEATURES,
                                           random_state=0)
            sync = _fit_seconds(st.url, "sync", args.n_basis)
            on_cluster = _fit_seconds(st.url, client, args.n_basis)
            row = {"store_mib": mib, "n_rows": n_rows, "sync_seconds": sync, "cluster_seconds": on_cluster,
                   "cluster_with_start_seconds": on_cluster + start,
                   "cluster_pays": bool(sync > on_cluster + start)}
            log(str(row))
            fits.append(row)
    result = {"name": NAME, "workers": args.workers, "n_basis": args.n_basis, "n_features": N_FEATURES,
              "cluster_starts": starts, "median_cluster_start_and_stop_seconds": start, "fits": fits,
              "environment": H.environment()}
    result["conclusion"] = conclusion(result)
    H.finish(result, H.output_path(NAME, args.out, args.quick), t_all)


if __name__ == "__main__":
    main()
