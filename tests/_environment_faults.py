"""Environment faults for tests: a disk that fills up or a read-only file system under
one directory (simulated in this process), a TCP port that accepts connections but never speaks
dask, and a dask scheduler with no workers.

The simulated faults patch ``open`` (``builtins.open``, ``io.open`` — which ``pathlib``,
``tempfile`` and ``os.fdopen`` use) for paths under ``root`` only: ``ENOSPC`` opens the file
and fails its first write (the partial file exists, as on a full disk); ``EROFS`` fails the open
for writing (as a read-only mount does). Worker processes are not patched — commands whose
writes happen on dask workers are tested on a real tmpfs (root only; ``tests/parallel/
test_bounded_waits.py``).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import socket
import threading
from pathlib import Path

_WRITE_MODES = ("w", "a", "x", "+")


class _FullFile:
    """A file whose writes fail with ``ENOSPC`` (everything else is the real file's)."""

    def __init__(self, f, path):
        self._f, self._path = f, path

    def write(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path)

    writelines = write

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def __iter__(self):
        return iter(self._f)


def _path_of(file) -> str | None:
    if isinstance(file, int):
        with contextlib.suppress(OSError):
            return os.readlink(f"/proc/self/fd/{file}")
        return None
    with contextlib.suppress(TypeError):
        return os.path.abspath(os.fspath(file))
    return None


@contextlib.contextmanager
def failing_writes(root, code: int):
    """Inside the block, writing files under ``root`` fails with ``code`` (ENOSPC or EROFS)."""
    root = os.path.abspath(os.fspath(root)) + os.sep
    real_builtin, real_io = builtins.open, io.open

    def fake(real):
        def open_(file, mode="r", *args, **kwargs):
            path = _path_of(file)
            if path is None or not (path + os.sep).startswith(root) or not any(m in mode for m in _WRITE_MODES):
                return real(file, mode, *args, **kwargs)
            if code == errno.ENOSPC:
                return _FullFile(real(file, mode, *args, **kwargs), path)
            raise OSError(code, os.strerror(code), path)
        return open_

    builtins.open, io.open = fake(real_builtin), fake(real_io)
    try:
        yield
    finally:
        builtins.open, io.open = real_builtin, real_io


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte (what a
    dashboard or any non-dask service looks like to dask's handshake). Closed on exit."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{self.port}"
        self._conns: list = []
        self._thread = threading.Thread(target=self._accept, daemon=True, name="silent-server")
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self._conns.append(conn)

    def close(self):
        self.sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_EMPTY = {}


def zero_worker_scheduler() -> str:
    """The address of a dask scheduler (in this process, threads) that has no workers; started
    on first use and kept for the test session (it costs nothing while idle)."""
    if "cluster" not in _EMPTY:
        from distributed import LocalCluster

        _EMPTY["cluster"] = LocalCluster(n_workers=0, processes=False, host="127.0.0.1", protocol="tcp",
                                         dashboard_address=None)
    return _EMPTY["cluster"].scheduler_address


def tree(root) -> dict:
    """Every path under ``root`` with its size (files) — to compare before and after."""
    root = Path(root)
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else None) for p in sorted(root.rglob("*"))}
