"""A real cluster of one ``dask scheduler`` and one ``dask worker --no-nanny`` on 127.0.0.1, each a
subprocess: a SIGKILLed worker is gone for good (no nanny restarts it), a SIGKILLed scheduler too.

The worker can get its own environment (``worker_env``, added to this process's; a value None
removes the variable: e.g. no object-store credentials, another endpoint) and a dask ``--preload``
module (``preload``: code run in the worker process as it starts, e.g. a pause before each chunk
read), so a test can make the worker fail or wait exactly where it wants while the driver runs as
a user's would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _loaded_machine import CLUSTER_CONFIG, WORKER_WAIT, cluster_env, stop_in_order


def dask_cli() -> list:
    exe = shutil.which("dask", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "dask"]


def kmp_dask_cli() -> list:
    exe = shutil.which("kmp-dask", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "kmp_dask.cli"]


class OneWorker:
    """``dask scheduler`` + one ``dask worker --no-nanny --nthreads 1`` started in ``root``."""

    def __init__(self, root: Path, *, worker_env: dict | None = None, preload: str | None = None):
        self.root, self.procs, self.logs = Path(root), [], []
        self.root.mkdir(parents=True, exist_ok=True)
        self.scheduler_file = str(self.root / "scheduler.json")
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", **cluster_env()}
        self.worker_env = {k: v for k, v in {**self.env, **(worker_env or {})}.items() if v is not None}
        self.preload = preload
        self.scheduler = self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                      "--scheduler-file", self.scheduler_file], "scheduler.log", self.env)
        deadline = time.monotonic() + WORKER_WAIT
        while not os.path.exists(self.scheduler_file):
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                raise RuntimeError(f"dask scheduler did not start: {(self.root / 'scheduler.log').read_text()}")
            time.sleep(0.1)
        self.worker = self.add_worker()

    def _start(self, args, log, env):
        f = open(self.root / log, "a")
        self.logs.append(f)
        proc = subprocess.Popen(dask_cli() + args, stdout=f, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        return proc

    def add_worker(self):
        """Start one worker and wait until the scheduler lists one."""
        from distributed import Client

        args = ["worker", "--scheduler-file", self.scheduler_file, "--host", "127.0.0.1", "--nthreads", "1",
                "--no-nanny", "--no-dashboard", "--memory-limit", "2GiB",
                "--local-directory", str(self.root / f"w{len(self.procs)}")]
        if self.preload:
            args += ["--preload", self.preload]
        worker = self._start(args, "worker.log", self.worker_env)
        with Client(scheduler_file=self.scheduler_file, set_as_default=False,
                    timeout=CLUSTER_CONFIG["distributed.comm.timeouts.connect"]) as c:
            c.wait_for_workers(1, timeout=WORKER_WAIT)
        self.worker = worker
        return worker

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.root.glob("*.log")))

    def close(self):
        stop_in_order([p for p in reversed(self.procs) if p is not self.scheduler] + [self.scheduler])
        for f in self.logs:
            f.close()


GATE_PRELOAD = '''"""dask worker preload: every read of a store's chunks first writes {reading!r} and then waits
(at most 600 s) until {go!r} exists, so a test acts while the worker is mid-pass."""
import os
import time

import kmp_dask.store._zarr as _zarr

_read = _zarr.read_checked


def read_checked(*args, **kwargs):
    open({reading!r}, "a").close()
    deadline = time.monotonic() + 600
    while not os.path.exists({go!r}) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _read(*args, **kwargs)


_zarr.read_checked = read_checked
'''


def gate(root: Path) -> tuple[str, Path, Path]:
    """A preload module holding every chunk read of the worker until ``go`` exists: (the module's
    name — importable with ``root`` on ``PYTHONPATH``: see :func:`gate_env` —, the ``reading`` file
    the worker creates when a read waits, the ``go`` file that releases it).

    By name, not by file: an error raised through the gate's frame reaches the client with a
    traceback naming the module, which ``distributed`` cannot rebuild there unless it is importable
    (a preload given by file path left the client's future pending for good)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    reading, go = root / "reading", root / "go"
    (root / "kmp_chunk_gate.py").write_text(GATE_PRELOAD.format(reading=str(reading), go=str(go)))
    return "kmp_chunk_gate", reading, go


def gate_env(root: Path) -> dict:
    """``PYTHONPATH`` with the gate's directory first (for the worker and any driver process)."""
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}


def wait_for_file(path: Path, proc=None, timeout: float = WORKER_WAIT) -> None:
    """Wait until ``path`` exists (bounded; a ``proc`` that ends first fails the wait)."""
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:.0f} s")
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process ended (status {proc.returncode}) before {path} appeared")
        time.sleep(0.05)
