"""cluster/slurm_launcher.py end to end against a fake SLURM on this machine: ``sbatch`` runs the
rendered job script as a local process group, ``scancel`` ends it. The launcher must submit,
wait for the workers, pass the version check, run the command after ``--`` with ``--scheduler
ADDRESS`` appended (here a small script fitting KMP on that scheduler, so the test does not
depend on the CLI's state), and cancel its job at the end. (No real SLURM here: this checks the launcher's own
logic and that the job script it renders really starts a worker.)"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cluster_helpers import CLUSTER, ROOT, script_env

pytestmark = pytest.mark.timeout(240)

SBATCH = """#!/usr/bin/env bash
# fake sbatch: run the job script (a temporary file: copy it first) as its own process group
set -e
state={state}
n=$(date +%s%N)
cp "$1" "$state/job.$n.sh"
setsid bash "$state/job.$n.sh" > "$state/job.$n.log" 2>&1 < /dev/null &
echo "$!" >> "$state/jobs"
echo "Submitted batch job $!"
"""
SCANCEL = """#!/usr/bin/env bash
echo "$1" >> {state}/cancelled
kill -TERM -- "-$1" 2>/dev/null || true
"""
SQUEUE = """#!/usr/bin/env bash
exit 0
"""


def _install_fakes(tmp_path):
    bindir, state = tmp_path / "fakebin", tmp_path / "slurm"
    bindir.mkdir()
    state.mkdir()
    for name, body in (("sbatch", SBATCH), ("scancel", SCANCEL), ("squeue", SQUEUE)):
        f = bindir / name
        f.write_text(body.format(state=state))
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    return bindir, state


def _end_jobs(state: Path):
    """Whatever the launcher left running: end the fake jobs' process groups (bounded)."""
    jobs = [int(x) for x in (state / "jobs").read_text().split()] if (state / "jobs").exists() else []
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        alive = []
        for pgid in jobs:
            try:
                os.killpg(pgid, sig)
                alive.append(pgid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            alive = [g for g in alive if _alive(g)]
            time.sleep(0.2)


def _alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_launcher_submits_checks_runs_and_cancels(tmp_path):
    from kmp_dask.datasets import make_classification_store

    bindir, state = _install_fakes(tmp_path)
    make_classification_store(tmp_path / "train.zarr", 1000, n_features=4, n_classes=2, chunk_rows=250,
                              random_state=0, dtype="float64")
    job = tmp_path / "job.py"
    job.write_text(
        "import sys\n"
        "from kmp_dask import KMPClassifier\n"
        "assert sys.argv[2] == '--scheduler', sys.argv\n"
        "clf = KMPClassifier(n_basis=3, random_state=0, client=sys.argv[3]).fit(sys.argv[1])\n"
        "open(sys.argv[1] + '.fitted', 'w').write(str(len(clf.basis_indices_)))\n")
    env = script_env(TMPDIR=tmp_path)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    launcher = [sys.executable, str(CLUSTER / "slurm_launcher.py"), "--jobs", "1", "--cores", "2", "--processes", "2",
                "--memory", "3GiB", "--walltime", "00:10:00", "--worker-extra-args", "--local-directory",
                str(tmp_path / "scratch"), "--scheduler-host", "127.0.0.1", "--wait-timeout", "90", "--",
                sys.executable, str(job), str(tmp_path / "train.zarr")]
    try:
        out = subprocess.run(launcher, capture_output=True, text=True, timeout=200, env=env, cwd=str(ROOT))
        logs = "".join(p.read_text()[-3000:] for p in state.glob("job.*.log"))
        assert out.returncode == 0, out.stderr[-4000:] + logs
        assert "1 job(s) submitted, waiting for 2 workers" in out.stderr
        assert "--scheduler tcp://127.0.0.1:" in out.stderr and "MISMATCH" not in out.stderr
        assert (tmp_path / "train.zarr.fitted").read_text() == "3"
        jobs = (state / "jobs").read_text().split()
        assert len(jobs) == 1
        deadline = time.monotonic() + 30  # the launcher cancelled its job on the way out
        while not (state / "cancelled").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (state / "cancelled").read_text().split() == jobs
        script = next(state.glob("job.*.sh")).read_text()
        assert "-m distributed.cli.dask_worker tcp://127.0.0.1:" in script and "--nworkers 2" in script
    finally:
        _end_jobs(state)
