#!/usr/bin/env python
"""Run a kmp-dask job on SLURM workers (dask-jobqueue ``SLURMCluster``).

The launcher runs where you submit jobs (a login node): it starts the dask scheduler in this
process, submits ``--jobs`` batch jobs of workers (each job: ``cores`` CPUs, ``memory``,
``processes`` single-threaded worker processes), waits for them, checks that their versions
match this environment (cluster/check_versions.py), runs the command after ``--`` with
``--scheduler <address>`` appended, and cancels the jobs when it ends (also on Ctrl-C)::

    python cluster/slurm_launcher.py --config cluster/jobqueue.yaml --jobs 4 -- \\
        kmp-dask train /shared/data/train.zarr --model /shared/models/kmp.model --n-basis 500
    python cluster/slurm_launcher.py --jobs 2          # no command: print the address, keep the
                                                       # cluster until Ctrl-C (connect a notebook)
    python cluster/slurm_launcher.py --render          # print the batch script; submit nothing

Settings come from ``--config`` (a dask-jobqueue YAML, default cluster/jobqueue.yaml, section
``jobqueue.slurm``), then from the options below, which override single keys. ``--render`` only
builds the cluster object and prints ``cluster.job_script()``: constructing a ``SLURMCluster``
starts a local scheduler and calls no SLURM command (checked by tests/cluster), so it works on any
machine — use it to review the script before a real submission.

The store and model paths must be reachable from the compute nodes (a shared file system or an
fsspec URL), and the workers' python (``python`` key, default: this interpreter) must exist there.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIG = HERE / "jobqueue.yaml"

# option name -> SLURMCluster keyword
_OVERRIDES = {
    "cores": "cores", "processes": "processes", "memory": "memory", "walltime": "walltime",
    "queue": "queue", "account": "account", "interface": "interface",
    "local_directory": "local_directory", "log_directory": "log_directory", "python": "python",
    "job_name": "job_name",
}


def load_config(path) -> dict:
    """The ``jobqueue.slurm`` section of a dask-jobqueue YAML file (empty if it has none)."""
    import yaml

    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    section = (doc.get("jobqueue") or {}).get("slurm") or {}
    if not isinstance(section, dict):
        raise SystemExit(f"slurm_launcher: {path}: jobqueue.slurm must be a mapping")
    return section


def make_cluster(args):
    """A ``SLURMCluster`` from the config file and the overriding options (nothing submitted)."""
    import dask.config
    from dask_jobqueue import SLURMCluster

    section = load_config(args.config) if args.config else {}
    kwargs = {kw: getattr(args, opt) for opt, kw in _OVERRIDES.items() if getattr(args, opt) is not None}
    if args.worker_extra_args is not None:
        kwargs["worker_extra_args"] = args.worker_extra_args
    scheduler_options = dict(section.get("scheduler-options") or section.get("scheduler_options") or {})
    if args.scheduler_host:
        scheduler_options["host"] = args.scheduler_host
    dashboard = args.dashboard_address
    if dashboard is None:  # the scheduler's HTTP server on the scheduler's interface, a free port
        dashboard = f"{args.scheduler_host}:0" if args.scheduler_host else ":0"
    scheduler_options.setdefault("dashboard_address", dashboard)
    kwargs["scheduler_options"] = scheduler_options
    # the file's keys as dask config, one key at a time (the package defaults stay for the rest);
    # kept for the process's lifetime: the cluster reads them again whenever it makes a job
    dask.config.set({f"jobqueue.slurm.{k}": v for k, v in section.items()})
    return SLURMCluster(**kwargs)


def _wait_for_workers(client, n, timeout):
    deadline = time.monotonic() + timeout
    while True:
        have = len(client.scheduler_info(n_workers=-1)["workers"])
        if have >= n:
            return have
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {have} of {n} workers after {timeout:g} s (queue wait? see squeue)")
        time.sleep(2)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(DEFAULT_CONFIG),
                   help="dask-jobqueue YAML with a jobqueue.slurm section [cluster/jobqueue.yaml]; '' for none")
    p.add_argument("--jobs", type=int, default=1, help="batch jobs to keep running [1]")
    p.add_argument("--cores", type=int, help="CPUs per job")
    p.add_argument("--processes", type=int, help="worker processes per job (one per core is advised)")
    p.add_argument("--memory", help="memory per job, e.g. 32GiB (each worker: memory / processes)")
    p.add_argument("--walltime", help="e.g. 02:00:00")
    p.add_argument("--queue", help="SLURM partition")
    p.add_argument("--account", help="SLURM account")
    p.add_argument("--interface", help="network interface for scheduler and workers, e.g. ib0")
    p.add_argument("--local-directory", help="node-local scratch for the workers, e.g. $TMPDIR or /scratch")
    p.add_argument("--log-directory", help="where the jobs' output goes")
    p.add_argument("--python", help="the workers' python executable")
    p.add_argument("--job-name", help="#SBATCH -J")
    p.add_argument("--worker-extra-args", nargs="*", help="replace the worker's extra arguments")
    p.add_argument("--scheduler-host", help="address the scheduler listens on (default: dask-jobqueue's choice)")
    p.add_argument("--dashboard-address", default=None,
                   help="scheduler HTTP/dashboard address [a free port on --scheduler-host]")
    p.add_argument("--wait-timeout", type=float, default=3600.0,
                   help="seconds to wait for all workers to join (queue time included) [3600]")
    p.add_argument("--render", action="store_true", help="print the batch job script and exit; submit nothing")
    p.add_argument("--skip-version-check", action="store_true")
    args = p.parse_args(argv)

    cluster = make_cluster(args)
    try:
        if args.render:
            print(cluster.job_script())
            return 0
        if shutil.which("sbatch") is None:
            print("slurm_launcher: sbatch not found: run this on a SLURM submit node (--render works anywhere)",
                  file=sys.stderr)
            return 2
        return _run(cluster, args, command)
    finally:
        cluster.close()


def _run(cluster, args, command) -> int:
    from distributed import Client

    sys.path.insert(0, str(HERE))
    import check_versions

    # adapt with minimum = maximum keeps --jobs jobs: a job that ends (walltime, --lifetime) is replaced
    cluster.adapt(minimum_jobs=args.jobs, maximum_jobs=args.jobs)
    per_job = getattr(getattr(cluster, "_dummy_job", None), "worker_processes", None) or 1
    n_workers = args.jobs * per_job
    print(f"slurm_launcher: scheduler {cluster.scheduler_address}; {args.jobs} job(s) submitted, "
          f"waiting for {n_workers} workers (at most {args.wait_timeout:g} s)", file=sys.stderr)
    with Client(cluster, set_as_default=False) as client:
        _wait_for_workers(client, n_workers, args.wait_timeout)
        if not args.skip_version_check:
            lines = check_versions.compare(*check_versions.collect(client))
            for line in lines:
                print(line, file=sys.stderr)
            if lines:
                print("slurm_launcher: version mismatch between this environment and the workers; "
                      "nothing was run", file=sys.stderr)
                return 1
        if not command:
            print(f"slurm_launcher: cluster ready at {cluster.scheduler_address} — "
                  f"Client({cluster.scheduler_address!r}); Ctrl-C to stop", file=sys.stderr)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
            return 0
        full = [*command, "--scheduler", cluster.scheduler_address]
        print(f"slurm_launcher: running {' '.join(full)}", file=sys.stderr)
        return subprocess.run(full, env={**os.environ, "OMP_NUM_THREADS": "1"}).returncode


if __name__ == "__main__":
    sys.exit(main())
