"""The large run as a user runs it: the CLI on a real ``dask scheduler`` with ``dask worker`` processes.

Question (issue "Faster than the SVMs", "the 10⁸ run, executed"): does a fit on 10⁸ × 54 float32
rows run out of core on this machine's two cores, and what does each atom cost, how much memory do
the workers and the driver take, and how accurate is the model on held-out rows?

Protocol, every step a subprocess a user would type:

1. ``dask scheduler --scheduler-file F`` and ``--workers`` × ``dask worker --nthreads 1
   --memory-limit M --local-directory D`` on 127.0.0.1;
2. the training and held-out stores written chunk by chunk on that cluster by
   ``kmp_dask.datasets.make_classification_store`` (covertype-like: 54 float32 features, 7
   classes; the held-out rows continue the same seeded sequence; ``kmp-dask ingest
   synthetic:classification`` writes the same rows, but in one process);
3. ``kmp-dask train train.zarr --scheduler-file F --n-basis B --fit-mode basic --candidates 59
   --gamma 0.05 --log-json L`` (basic stochastic KMP: the large-N mode ``docs/engine.md`` "Large N"
   recommends, ``basis_columns="auto"`` choosing recomputed columns; ``--fit-mode``,
   ``--atoms-per-pass`` and ``--basis-columns`` change it, e.g. ``--fit-mode backfit
   --atoms-per-pass 8 --basis-columns recomputed``: 8 atoms a pass, no stored N × n columns);
4. ``kmp-dask evaluate model test.zarr --scheduler-file F --json``.

While each step runs, a sampler polls every process's resident set size (psutil, every 2 s) and
keeps the peak of the scheduler, each worker (with its children) and the CLI driver. Seconds per
iteration come from the ``--log-json`` lines the fit appends (median after the third). The JSON is
rewritten after every step, and the fit is stopped after ``--max-fit-seconds`` (then the
iterations done are what was measured, and the JSON says so): nothing in it is extrapolated.

Usage: ``python benchmarks/large_run_cli.py --rows 100000000 --workdir /work/large`` (the store
takes rows × 216 bytes of disk). Results: benchmarks/results/large_run_cli.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "large_run_cli"
BIN = Path(sys.executable).parent


def _args(p):
    p.add_argument("--rows", type=int, default=10_000_000, help="training rows")
    p.add_argument("--test-rows", type=int, default=200_000)
    p.add_argument("--n-basis", type=int, default=100)
    p.add_argument("--fit-mode", default="basic", help="kmp-dask train --fit-mode (basic: no basis columns kept)")
    p.add_argument("--atoms-per-pass", type=int, default=1, help="kmp-dask train --atoms-per-pass (backfit only)")
    p.add_argument("--basis-columns", default="auto", help="kmp-dask train --basis-columns (auto/stored/recomputed)")
    p.add_argument("--candidates", type=int, default=59,
                   help="kmp-dask train --candidates: random candidates scored per atom (Popovici's s = "
                        "ceil(log eps / log q); 59: eps=0.05, q=0.95; 16: eps=0.2, q=0.9)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="2.5GB", help="per dask worker")
    p.add_argument("--max-fit-seconds", type=float, default=3 * 3600.0,
                   help="stop the fit after this long and record the iterations done")
    p.add_argument("--workdir", default=None, help="where the stores, scratch and logs go")
    p.add_argument("--checkpoint", action="store_true",
                   help="train with --checkpoint WORKDIR/checkpoint (every 5 atoms) and --resume when one exists: a "
                        "fit stopped by --max-fit-seconds continues in a later run")
    p.add_argument("--reuse-stores", action="store_true",
                   help="keep WORKDIR's train.zarr / test.zarr when they exist (a later run of the same size)")
    p.add_argument("--quick", action="store_true", help="small sizes, output in $TMPDIR (smoke test)")


class PeakRSS:
    """Poll the resident set size of named processes (and their children) every ``period`` s."""

    def __init__(self, period=2.0):
        self.procs, self.peak, self.period = {}, {}, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, name, pid):
        import psutil

        self.procs[name] = psutil.Process(pid)

    def _rss(self, proc):
        import psutil

        try:
            return proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
        except psutil.Error:
            return 0

    def _run(self):
        while not self._stop.wait(self.period):
            for name, proc in list(self.procs.items()):
                self.peak[name] = max(self.peak.get(name, 0), self._rss(proc))

    def mib(self, prefix):
        return {k: v / 2**20 for k, v in self.peak.items() if k.startswith(prefix)}

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)


def _mode_flags(args):
    """The pursuit's mode flags of ``kmp-dask train`` (the defaults reproduce the first 10⁸ attempts)."""
    flags = ["--fit-mode", args.fit_mode]
    if args.atoms_per_pass != 1:
        flags += ["--atoms-per-pass", str(args.atoms_per_pass)]
    if args.basis_columns != "auto":
        flags += ["--basis-columns", args.basis_columns]
    return flags


def _log(path):
    """A log file a subprocess writes to (closed when this process exits)."""
    return open(path, "w")


def _start_cluster(args, work, rss):
    sched_file = work / "scheduler.json"
    sched_file.unlink(missing_ok=True)
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=_log(work / "scheduler.log"), env=env)]
    rss.watch("scheduler", procs[0].pid)
    deadline = time.monotonic() + 60
    while not sched_file.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"dask scheduler wrote no {sched_file} within 60 s: see {work / 'scheduler.log'}")
        time.sleep(0.2)
    for i in range(args.workers):
        procs.append(subprocess.Popen(
            [str(BIN / "dask"), "worker", "--scheduler-file", str(sched_file), "--nthreads", "1", "--nworkers", "1",
             "--memory-limit", args.memory_limit, "--local-directory", str(work / f"scratch{i}"),
             "--dashboard-address", "127.0.0.1:0", "--no-nanny"],
            stdout=subprocess.DEVNULL, stderr=_log(work / f"worker{i}.log"), env=env))
        rss.watch(f"worker{i}", procs[-1].pid)
    return sched_file, procs


def _cli(argv, rss, name, timeout):
    """Run ``kmp-dask argv``; return (seconds, stdout, returncode or None when stopped at timeout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "kmp-dask"), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rss.watch(name, proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        return time.perf_counter() - t0, out, None
    if proc.returncode:
        raise RuntimeError(f"kmp-dask {' '.join(argv)} exited {proc.returncode}:\n{err[-3000:]}")
    return time.perf_counter() - t0, out, proc.returncode


GENERATE = """
import sys
from distributed import Client
from kmp_dask.datasets import make_classification_store
with Client(scheduler_file=sys.argv[4], timeout=60) as client:
    make_classification_store(sys.argv[1], int(sys.argv[2]), random_state=11, start_row=int(sys.argv[3]),
                              overwrite=True, client=client)
"""


def _generate(target, rows, start_row, sched_file, rss, name):
    """Write ``rows`` rows of the seeded covertype-like sequence from ``start_row`` into ``target``,
    one task per chunk on the running cluster (the library's ``make_classification_store``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", GENERATE, str(target), str(rows), str(start_row), str(sched_file)],
                            stderr=subprocess.PIPE, text=True)
    rss.watch(name, proc.pid)
    _, err = proc.communicate(timeout=4 * 3600)
    if proc.returncode:
        raise RuntimeError(f"generating {target} exited {proc.returncode}:\n{err[-3000:]}")
    return time.perf_counter() - t0


def _iterations(log_path):
    if not log_path.exists():
        return []
    return [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]


def _fit_record(log_path, fit_s, finished):
    import numpy as np

    its = _iterations(log_path)
    secs = [float(r["seconds"]) for r in its if "seconds" in r]
    return {"fit_seconds": fit_s, "finished": finished, "iterations_logged": len(its),
            "seconds_per_iteration_median_after_3": float(np.median(secs[3:])) if len(secs) > 3 else None,
            "seconds_per_iteration": secs, "last_record": its[-1] if its else None}


def run(args, work, result, out):
    rss = PeakRSS()
    sched_file, procs = _start_cluster(args, work, rss)
    where = ["--scheduler-file", str(sched_file)]
    try:
        train, test, model = work / "train.zarr", work / "test.zarr", work / "model"
        if args.reuse_stores and train.exists() and test.exists():
            gen_s = 0.0
        else:
            gen_s = _generate(train, args.rows, 0, sched_file, rss, "driver_generate_train")
            gen_s += _generate(test, args.test_rows, args.rows, sched_file, rss, "driver_generate_test")
        result["generate"] = {"seconds": gen_s, "driver_peak_rss_mib": rss.mib("driver_generate")}
        result["store_bytes_on_disk"] = sum(f.stat().st_size for f in train.rglob("*") if f.is_file())
        H.write_json(out, result)
        H.log(f"generate {gen_s:.0f} s, store {result['store_bytes_on_disk'] / 1e9:.2f} GB")
        log_path = work / "fit.jsonl"
        ckpt = ["--checkpoint", str(work / "checkpoint"), "--checkpoint-every", "5"] if args.checkpoint else []
        if ckpt and (work / "checkpoint").exists():
            ckpt.append("--resume")  # the log keeps the earlier run's lines: seconds per iteration of both
        else:
            log_path.unlink(missing_ok=True)
        fit_s, _, rc = _cli(["train", str(train), "--model", str(model), "--overwrite", *ckpt, "--n-basis",
                             str(args.n_basis), *_mode_flags(args), "--candidates", str(args.candidates),
                             "--gamma", "0.05", "--random-state", "0", "--quiet", "--log-json", str(log_path), *where],
                            rss, "driver_train", timeout=args.max_fit_seconds)
        result["fit"] = _fit_record(log_path, fit_s, rc is not None)
        result["fit"]["driver_peak_rss_mib"] = rss.mib("driver_train")
        result["fit"]["worker_peak_rss_mib"] = rss.mib("worker")
        H.write_json(out, result)
        H.log(f"fit {fit_s:.0f} s, finished={rc is not None}, {result['fit']['iterations_logged']} iterations")
        if rc is not None:
            ev_s, text, _ = _cli(["evaluate", str(model), str(test), "--json", *where], rss, "driver_evaluate",
                                 timeout=3600)
            result["evaluate"] = {"seconds": ev_s, "metrics": json.loads(text)}
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        rss.stop()
        result["peak_rss_mib_all_steps"] = rss.mib("")


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    import tempfile

    if args.quick:
        args.rows, args.test_rows, args.n_basis = 100_000, 10_000, 10
    t0 = time.perf_counter()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kmp_large_cli_"))
    work.mkdir(parents=True, exist_ok=True)
    out = H.output_path(NAME, args.out, args.quick)
    result = {"benchmark": NAME, "environment": H.environment(), "rows": args.rows, "test_rows": args.test_rows,
              "n_features": 54, "n_classes": 7, "n_basis": args.n_basis, "fit_mode": args.fit_mode,
              "atoms_per_pass": args.atoms_per_pass, "basis_columns": args.basis_columns, "candidates": args.candidates,
              "gamma": 0.05, "cluster": f"dask scheduler + {args.workers} x dask worker (--nthreads 1, "
                                       f"--memory-limit {args.memory_limit}) on 127.0.0.1",
              "disk_free_bytes_at_start": shutil.disk_usage(work).free}
    run(args, work, result, out)
    H.finish(result, out, t0)


if __name__ == "__main__":
    main()
