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

__all__ = ["Temporary", "GRACE_SECONDS", "check_name_fits", "check_output_path", "hashed_stem", "name_max", "pid_alive",
           "remove_stale", "sibling_name", "stale_temporaries", "temporary", "temporary_path"]

#: A temporary whose lock is free is stale once it is this old, even if a process with its pid exists.
GRACE_SECONDS = 60.0
_SUFFIX = re.compile(r"\.tmp-(\d+)-[0-9a-f]{8}$")
#: the names earlier versions gave these temporaries (no pid: stale once unlocked and GRACE_SECONDS old)
_LEGACY = re.compile(r"\.tmp-(?:[0-9a-f]{32}|[a-z0-9_]{8})$")


def name_max(directory) -> int:
    """The longest name (bytes) the file system of ``directory`` accepts (255 when it cannot say)."""
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _stems(path: Path) -> tuple[str, str]:
    """The two name stems a temporary of ``path`` may have: ``.NAME`` and ``.<hash of NAME>``."""
    return f".{path.name}", hashed_stem(path.name)


def sibling_name(path: str, suffix: str) -> str:
    """``path + suffix`` (a store's temporary ``NAME.tmp-<hex>``), or ``.<hash of NAME> + suffix`` beside
    it when that name would be longer than the directory accepts."""
    parent, name = os.path.split(path.rstrip(os.sep))
    if len((name + suffix).encode("utf-8", "surrogateescape")) <= name_max(parent or "."):
        return path.rstrip(os.sep) + suffix
    return os.path.join(parent, hashed_stem(name) + suffix)


def hashed_stem(name: str) -> str:
    """``.<20 hex of SHA-256(name)>``: the stem of the temporaries of a name at the length limit."""
    return "." + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def check_name_fits(path, option: str = "path") -> None:
    """Refuse, before any work, a ``path`` whose last component is longer than its file system allows."""
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    limit = name_max(parent if parent.is_dir() else ".")
    size = len(p.name.encode("utf-8", "surrogateescape"))
    if size > limit:
        shown = str(path) if len(str(path)) <= 80 else str(path)[:40] + "..." + str(path)[-20:]
        raise ValueError(f"{option} {shown!r}: its name is {size} bytes long; the file system there accepts at most "
                         f"{limit} bytes per name. Use a shorter name.")


def check_output_path(path, option: str = "path", *, file: bool = True) -> None:
    """Before any work: refuse an output ``path`` that cannot be written in place — a name longer than
    its file system allows, a symbolic link to nothing, or (``file=True``: a file is to be written) a
    directory. One line each, naming ``option``."""
    check_name_fits(path, option)
    p = Path(path).expanduser()
    if p.is_symlink() and not p.exists():
        raise ValueError(f"{option} {str(path)!r} is a symbolic link to {os.readlink(p)!r}, which does not exist; "
                         "kmp_dask replaces an output by renaming a complete temporary over it and does not write "
                         "through a dangling link: remove the link, or give another path.")
    if file and p.is_dir():
        raise IsADirectoryError(f"{option} {str(path)!r} is a directory; give the path of a file to write "
                                f"(e.g. {str(p / ('out' + (p.suffix or '.csv')))!r}).")


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
        stem = next((s for s in _stems(p) if entry.startswith(s) and (_SUFFIX.fullmatch(entry[len(s):])
                                                                       or _LEGACY.fullmatch(entry[len(s):]))), None)
        if stem is not None:
            found = _SUFFIX.fullmatch(entry[len(stem):])
            out += _judged(parent / entry, int(found.group(1)) if found else None)
    return out


def _judged(tmp: Path, pid: int | None) -> list[Temporary]:
    """``[Temporary]`` for ``tmp`` written by ``pid`` (None: an earlier version's name), or [] if gone."""
    try:
        age, size = time.time() - tmp.lstat().st_mtime, _nbytes(tmp)
    except OSError:
        return []
    who = "its writer" if pid is None else f"pid {pid}"
    if _locked(tmp):
        return [Temporary(str(tmp), False, f"{who} is still writing it", size)]
    gone = pid is not None and not pid_alive(pid)
    if gone or age > GRACE_SECONDS:
        why = f"pid {pid} has ended" if gone else f"unlocked for {age:.0f} s"
        return [Temporary(str(tmp), True, f"left by a killed write ({why})", size)]
    return [Temporary(str(tmp), False, f"{who} may still be writing it ({age:.0f} s old)", size)]


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
