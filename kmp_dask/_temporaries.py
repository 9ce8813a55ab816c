"""Temporaries of atomic writes: their names, the lock that says their writer is alive, their removal.

Every file or directory kmp_dask writes in place of a user's path (``predict --output``, a metrics
file, a report, a saved model) is first written to a temporary beside it and renamed over it when
complete. A process killed mid-write leaves that temporary; this module makes it findable and
removable:

* **name**: ``.NAME.tmp-<pid>-<8 hex>`` beside ``NAME``; when that would exceed the directory's
  limit on a name's length (255 bytes on most file systems), ``.<20 hex of SHA-256(NAME)>.tmp-<pid>-<8
  hex>`` instead, so that a target whose own name is at the limit can still be written;
* **alive**: the writer holds an exclusive ``flock`` on the temporary from its creation until the
  rename; the kernel drops it when the process ends, however it ends (a SIGKILL, a zombie not yet
  reaped);
* **stale**: a temporary whose lock can be taken and whose writer (the pid in its name) is gone —
  no such process, or a zombie — or that is older than :data:`GRACE_SECONDS` (a pid reused by another
  process); :func:`remove_stale` removes those, and the next write to the same path calls it, as does
  ``kmp-dask info TARGET --clean`` (which lists what it removes).

Standard library only (every layer may import it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Temporary", "GRACE_SECONDS", "check_name_fits", "name_max", "pid_alive", "remove_stale",
           "stale_temporaries", "temporary", "temporary_path"]

#: A temporary whose lock is free is stale once it is this old, even if a process with its pid exists.
GRACE_SECONDS = 60.0
_SUFFIX = re.compile(r"\.tmp-(\d+)-[0-9a-f]{8}$")


def name_max(directory) -> int:
    """The longest name (bytes) the file system of ``directory`` accepts (255 when it cannot say)."""
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _stems(path: Path) -> tuple[str, str]:
    """The two name stems a temporary of ``path`` may have: ``.NAME`` and ``.<hash of NAME>``."""
    return f".{path.name}", "." + hashlib.sha256(path.name.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def check_name_fits(path, option: str = "path") -> None:
    """Refuse, before any work, a ``path`` whose last component is longer than its file system allows."""
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    limit = name_max(parent if parent.is_dir() else ".")
    size = len(p.name.encode("utf-8", "surrogateescape"))
    if size > limit:
        raise ValueError(f"{option} {str(path)!r}: the name {p.name[:40]!r}... is {size} bytes long; the file system "
                         f"accepts at most {limit}. Use a shorter name.")


def temporary_path(path) -> Path:
    """A new temporary name beside ``path`` (see the module doc), short enough for its directory."""
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    tail = f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    full, short = _stems(p)
    fits = len((full + tail).encode("utf-8", "surrogateescape")) <= name_max(parent if parent.is_dir() else ".")
    return parent / ((full if fits else short) + tail)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running: it exists and is not a zombie (a killed process
    its parent has not reaped yet; it holds no file and writes nothing)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (not Linux): trust kill(0)
    return state not in ("Z", "X")


@contextlib.contextmanager
def temporary(path, *, directory: bool = False) -> Iterator[Path]:
    """Create a locked temporary beside ``path`` (a file, or with ``directory=True`` a directory) and
    yield its path; the caller writes it and renames it over ``path``. On an exception the temporary
    is removed; the lock is released when the block ends (the rename happens inside it)."""
    tmp = temporary_path(path)
    if directory:
        os.mkdir(tmp)
        fd = os.open(tmp, os.O_RDONLY)
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Temporary:
    """A temporary left beside a target, and whether it may be removed."""

    path: str
    stale: bool
    why: str
    nbytes: int


def _nbytes(p: Path) -> int:
    if p.is_dir() and not p.is_symlink():
        return sum(f.lstat().st_size for f in p.rglob("*") if f.is_file())
    return p.lstat().st_size


def _locked(p: Path) -> bool:
    """Whether a live writer holds the lock of ``p`` (taken and released at once when free)."""
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
    return False


def stale_temporaries(path) -> list[Temporary]:
    """The temporaries of atomic writes of ``path`` lying beside it, each with whether it is stale."""
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    out = []
    for entry in names:
        stem = next((s for s in _stems(p) if entry.startswith(s) and _SUFFIX.fullmatch(entry[len(s):])), None)
        if stem is None:
            continue
        tmp, pid = parent / entry, int(_SUFFIX.fullmatch(entry[len(stem):]).group(1))
        try:
            age = time.time() - tmp.lstat().st_mtime
        except OSError:
            continue
        if _locked(tmp):
            out.append(Temporary(str(tmp), False, f"its writer (pid {pid}) is still writing it", _nbytes(tmp)))
        elif not pid_alive(pid) or age > GRACE_SECONDS:
            why = f"pid {pid} has ended" if not pid_alive(pid) else f"unlocked for {age:.0f} s"
            out.append(Temporary(str(tmp), True, f"left by a killed write ({why})", _nbytes(tmp)))
        else:
            out.append(Temporary(str(tmp), False, f"pid {pid} is running and it is {age:.0f} s old", _nbytes(tmp)))
    return out


def _remove(p: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink()


def remove_stale(path) -> list[Temporary]:
    """Remove the stale temporaries of ``path`` (see the module doc); return what was removed."""
    removed = [t for t in stale_temporaries(path) if t.stale]
    for t in removed:
        _remove(Path(t.path))
    return removed
