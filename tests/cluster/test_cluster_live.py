"""cluster/start-scheduler.sh + start-worker.sh as subprocesses on 127.0.0.1 (free port, scheduler
file and scratch in tmp_path): their own version checks pass, check_versions.py passes, a small
KMP fit runs on the workers, the workers used the local directory, every socket is on loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _cluster_helpers import CLUSTER, scheduler_address, script_env

pytestmark = pytest.mark.timeout(900)


def _start_cluster(tmp_path, procs):
    """start-scheduler.sh + start-worker.sh (2 worker processes); their logs checked; the scheduler
    file, the workers' scratch directory and the two script processes."""
    sched_file = tmp_path / "scheduler.json"
    scratch = tmp_path / "scratch"
    sched = procs.start("start-scheduler.sh", "scheduler.log", KMP_SCHEDULER_PORT=0, KMP_SCHEDULER_FILE=sched_file)
    worker = procs.start("start-worker.sh", "worker.log", KMP_SCHEDULER_FILE=sched_file, KMP_NWORKERS=2,
                         KMP_NTHREADS=1, KMP_MEMORY_LIMIT="1.5GiB", KMP_LOCAL_DIRECTORY=scratch,
                         KMP_WORKER_NAME="t")
    # each script prints its command, then passes its version check before announcing readiness
    procs.wait_for_line(sched, "start-scheduler: ready", timeout=90)
    procs.wait_for_line(worker, "2 worker process(es)", timeout=90)
    log = (tmp_path / "worker.log").read_text()
    assert "dask worker --scheduler-file" in log and "--memory-limit 1.5GiB" in log
    assert f"--local-directory {scratch}" in log and "--nworkers 2 --nthreads 1" in log
    assert "check_versions: OK" in (tmp_path / "scheduler.log").read_text() and "check_versions: OK" in log
    return sched_file, scratch, sched, worker


def test_scripts_start_a_loopback_cluster_that_fits_kmp(tmp_path, procs):
    from kmp_dask import KMPClassifier
    from kmp_dask.datasets import make_classification_store

    sched_file, scratch, sched, worker = _start_cluster(tmp_path, procs)
    address = scheduler_address(sched_file)
    assert address.startswith("tcp://127.0.0.1:")

    out = subprocess.run([sys.executable, str(CLUSTER / "check_versions.py"), "--scheduler-file", str(sched_file),
                          "--min-workers", "2", "--timeout", "30"],
                         capture_output=True, text=True, timeout=120, env=script_env())
    assert out.returncode == 0, out.stderr
    assert "2 worker(s) match" in out.stderr and "MISMATCH" not in out.stderr

    store = make_classification_store(tmp_path / "train.zarr", 2000, n_features=4, n_classes=2, chunk_rows=500,
                                      random_state=0, dtype="float64")
    clf = KMPClassifier(n_basis=5, random_state=0, client=address).fit(store)
    assert len(clf.basis_indices_) == 5
    X, y = store.read_range(0, 2000)
    acc = np.mean(clf.predict(X) == np.asarray(clf.classes_)[y])
    assert acc > 0.6, acc
    # the workers' scratch went where --local-directory said
    assert any(scratch.iterdir()), "workers did not use KMP_LOCAL_DIRECTORY"

    # every listening socket of the scripts' processes is on 127.0.0.1 (HTTP servers included)
    pids = subprocess.run(["ps", "-o", "pid=", "-g", f"{sched.pid},{worker.pid}"], capture_output=True,
                          text=True, timeout=30).stdout.split()
    ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30)
    if ss.returncode != 0 or "pid=" not in ss.stdout:
        pytest.skip("ss -p not available to check the listening addresses")
    mine = [line for line in ss.stdout.splitlines() if any(f"pid={p}," in line for p in pids)]
    assert mine, ss.stdout
    assert all(line.split()[3].startswith("127.0.0.1:") for line in mine), "\n".join(mine)


@pytest.mark.slow  # in the default run: pipeline 1 (small) on an embedded cluster of 2 workers with their
# memory, tests/cli/test_pipelines.py::test_pipeline1_on_embedded_cluster; the CLI on a real `dask scheduler` +
# `dask worker` cluster by --scheduler-file, tests/cli/test_chain.py; these scripts' cluster, the test above
def test_pipeline1_on_the_scripts_cluster(tmp_path, procs):
    """Pipeline 1 (small) end to end through ``kmp-dask run`` on these scripts' cluster."""
    import json
    import shutil

    sched_file, _, _, _ = _start_cluster(tmp_path, procs)
    kmp = shutil.which("kmp-dask", path=str(Path(sys.executable).parent)) or "kmp-dask"
    run = subprocess.run([kmp, "run", str(CLUSTER.parent / "pipelines" / "covertype_skmp.toml"), "--small",
                          "--output", str(tmp_path / "run"), "--scheduler-file", str(sched_file)],
                         capture_output=True, text=True, timeout=600, env=script_env())
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"]["model"]["n_basis"] == 25 and summary["steps"]["evaluate"]["accuracy"] > 0.3
    assert len(summary["memory"]["workers_peak_rss_bytes"]) == 2

