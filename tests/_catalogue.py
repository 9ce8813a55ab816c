"""The failure catalogue's machinery, shared by ``test_failure_catalogue.py`` and the per-area row
modules ``tests/_catalogue_*.py`` (each exports ``CASES`` and ``COMMANDS`` lists of the rows below;
``test_failure_catalogue.py`` runs them all in the same fresh workspace and checks docs/store.md lists
every one).

A row module may add files to the workspace: ``WORKSPACE(root, ws)`` (optional) is called after the
common workspace is built, and may set attributes on ``ws``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import dask


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` with size and mtime, plus kmp_dask's temporary fit directories."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.stat(p)
            state[os.path.relpath(p, root)] = (st.st_size if name in filenames else None, st.st_mtime_ns)
    tmp = tempfile.gettempdir()
    state["<tmp>"] = sorted(n for n in os.listdir(tmp) if n.startswith("kmp-dask-fit-"))
    return state


@dataclass(frozen=True)
class Case:
    """One row: ``run(ws)`` must raise ``exc`` whose message contains every one of ``words``."""

    id: str
    run: Callable[[SimpleNamespace], object]
    exc: type[BaseException]
    words: tuple[str, ...]
    absent: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    """One row for ``kmp-dask``: ``args(ws)`` exits with ``exit_code`` and one ``Error:`` line."""

    id: str
    args: Callable[[SimpleNamespace], list[str]]
    exit_code: int
    words: tuple[str, ...]
    absent: tuple[str, ...] = ()


def _short_timeout(fn):
    def run(ws):
        with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
            return fn(ws)
    return run


FIX_ADDRESS = "tcp://127.0.0.1:8786"
