"""Helpers for the cluster/ recipe tests: run the start scripts as process groups, stop them.

Imported by path-less name (tests/cluster is on sys.path under pytest's default import mode);
the name is unique in the suite so it cannot clash with another directory's module."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"


def load_module(name: str):
    """A module of cluster/ by path (cluster/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"kmp_cluster_{name}", CLUSTER / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def script_env(**extra) -> dict:
    """The environment for the scripts: this venv's python/dask first on PATH, loopback defaults."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
           "KMP_PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Procs:
    """Start scripts in their own process groups; ``stop()`` ends every group (bounded waits)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, script: str, log: str, **env) -> subprocess.Popen:
        path = self.tmp / log
        with open(path, "w") as f:
            p = subprocess.Popen(["bash", str(CLUSTER / script)], stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=script_env(**env), start_new_session=True)
        self.procs.append((p, path))
        return p

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text()[-6000:]}" for _, path in self.procs)

    def wait_for_line(self, proc: subprocess.Popen, text: str, timeout: float) -> None:
        path = dict((id(p), lp) for p, lp in self.procs)[id(proc)]
        deadline = time.monotonic() + timeout
        while text not in path.read_text():
            if proc.poll() is not None:
                pytest.fail(f"{path.name}: exited ({proc.returncode}) before {text!r}\n{self.logs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{path.name}: no {text!r} after {timeout} s\n{self.logs()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """End the groups in the reverse order of their start (workers before their scheduler: a
        worker stopped together with its scheduler waits out its nannies' close timeout, ~8 s),
        each by SIGTERM, then SIGKILL after a bounded grace."""
        for p, _ in reversed(self.procs):
            for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                if not _group_alive(p.pid):
                    break
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + grace
                while _group_alive(p.pid) and time.monotonic() < deadline:
                    p.poll()
                    time.sleep(0.1)
        for p, _ in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def scheduler_address(sched_file: Path) -> str:
    return json.loads(sched_file.read_text())["address"]
