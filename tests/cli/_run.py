"""Run ``kmp-dask`` as a subprocess (the installed console script), bounded in time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def dask_cmd() -> list[str]:
    exe = shutil.which("dask", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "dask"]


def kmp_dask_cmd() -> list[str]:
    exe = shutil.which("kmp-dask", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-c", "from kmp_dask.cli import main; main()"]


def run_cli(*args, cwd=None, timeout=300, check=True) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(kmp_dask_cmd() + [str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"kmp-dask {' '.join(map(str, args))} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc
