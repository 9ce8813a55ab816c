"""How long do the environment's failures take to become an error (docs/engine.md
"Bounded waits and the environment's failures")?

What is measured
----------------
* ``silent_port``: ``kmp_dask.parallel.connect`` (the path of ``client="tcp://..."`` and of
  ``--scheduler``) to a TCP server on 127.0.0.1 that accepts and never answers, with a connect
  timeout of ``--connect-timeout`` seconds (5: the issue's probe, which hung past 130 s): seconds
  until the ``ConnectionError``, ``--repeats`` times.
* ``zero_workers``: ``connect`` to a scheduler with no workers (in this process), same timeout:
  seconds until ``NoWorkersError``.
* ``restart_loop``: ``embedded_cluster(2, memory_limit="1KB")`` with the 256 MiB floor lowered
  to reach dask's restart loop (the issue's 281 restarts) and a KMP fit inside: seconds until
  ``WorkerRestartLoopError``, and how many worker starts the nannies made, ``--loop-runs`` times.

The machine's load average is recorded with each measurement (the bounds are meant to hold on
a loaded machine). Results go to ``benchmarks/results/bounded_waits.json`` (``--quick``: one
repeat of each, written to ``$TMPDIR/kmp_dask_benchmarks/``).

Usage: ``python benchmarks/bounded_waits.py [--connect-timeout 5] [--repeats 3] [--loop-runs 3] [--quick]``
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import _harness as H  # noqa: E402

NAME = "bounded_waits"


def _args(p):
    p.add_argument("--connect-timeout", type=float, default=5.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--loop-runs", type=int, default=3)
    p.add_argument("--quick", action="store_true")


def _timed(fn):
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # the error is the point: record its type and first words
        return time.perf_counter() - t0, type(exc).__name__, " ".join(str(exc).split())[:160]
    return time.perf_counter() - t0, None, "no error"


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    import numpy as np
    from _environment_faults import SilentServer, zero_worker_scheduler

    import kmp_dask.parallel._client as C
    from kmp_dask import KMPClassifier
    from kmp_dask.parallel import connect
    from kmp_dask.store import create_store

    repeats, loops = (1, 1) if args.quick else (args.repeats, args.loop_runs)
    t0 = time.perf_counter()
    result = {"environment": H.environment(), "connect_timeout": args.connect_timeout,
              "silent_port": [], "zero_workers": [], "restart_loop": []}

    def enter(cm):
        with cm:
            pass

    for _ in range(repeats):
        with SilentServer() as srv:
            s, err, msg = _timed(lambda: enter(connect(srv.address, timeout=args.connect_timeout)))
        result["silent_port"].append({"seconds": s, "error": err, "message": msg, "load": os.getloadavg()[0]})
        H.log(f"silent port: {err} after {s:.2f}s")
        address = zero_worker_scheduler()
        s, err, msg = _timed(lambda address=address: enter(connect(address, timeout=args.connect_timeout)))
        result["zero_workers"].append({"seconds": s, "error": err, "message": msg, "load": os.getloadavg()[0]})
        H.log(f"zero workers: {err} after {s:.2f}s")

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    with tempfile.TemporaryDirectory() as tmp:
        store = create_store(Path(tmp) / "s.zarr", X, (X[:, 0] > 0).astype(int), chunk_rows=500, classes=["a", "b"])
        C.MIN_MEMORY_LIMIT = 1  # reach the loop the floor now prevents
        for _ in range(loops):
            made = []
            real = C._RestartWatch.__init__

            def init(self, *a, _real=real, _made=made, **kw):
                _real(self, *a, **kw)
                _made.append(self)

            C._RestartWatch.__init__ = init

            def fit():
                with C.embedded_cluster(2, memory_limit="1KB", dashboard=False) as client:
                    KMPClassifier(n_basis=5, client=client).fit(store.url)

            try:
                s, err, msg = _timed(fit)
            finally:
                C._RestartWatch.__init__ = real
            starts = sum(len(v) for v in made[0].starts.values()) if made else None
            result["restart_loop"].append({"seconds": s, "error": err, "message": msg, "worker_starts": starts,
                                           "load": os.getloadavg()[0]})
            H.log(f"restart loop: {err} after {s:.1f}s, {starts} worker starts")
    H.finish(result, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
