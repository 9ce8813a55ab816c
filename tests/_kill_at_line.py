"""Run a fit script in a subprocess and SIGKILL it when it prints a given line (the driver-kill
tests of every family's checkpoints share this)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time


def run_and_kill_at(tmp_path, script: str, params: dict, args, line: str = "iteration 5", timeout: float = 180):
    """Write ``script`` (``PARAMS`` replaced by ``repr(params)``), run it with ``args``, SIGKILL it
    once it prints ``line`` (or after ``timeout`` seconds); return the lines it printed."""
    path = tmp_path / "driver.py"
    path.write_text(textwrap.dedent(script).replace("PARAMS", repr(params)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(path), *map(str, args)], stdout=subprocess.PIPE, text=True, env=env)
    seen, deadline = [], time.monotonic() + timeout
    try:
        for out in proc.stdout:
            seen.append(out.strip())
            if out.strip() == line or time.monotonic() > deadline:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    return seen
