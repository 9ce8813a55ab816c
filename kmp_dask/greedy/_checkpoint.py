"""Checkpoints of a KMP fit: the driver's state on disk, so a killed fit resumes where it was.

What a checkpoint at the end of iteration ``t`` holds — everything the rest of the fit depends
on, and nothing more:

* the :class:`~kmp_dask.greedy._kmp.Pursuit` without its engine and callback (atoms,
  coefficients, Cholesky factor, ``BᵀY``, excluded rows, sampler, history and validation
  snapshots, intercept offset, the effects queued for the next pass, strategy state);
* the loop position ``t`` and the next iteration's candidates (drawn during iteration ``t``);
* the RNG's ``bit_generator.state``;
* the engine's journal: the effects that bring freshly loaded partitions to their state at
  that moment. Resuming builds a new engine over the same data and replays it with
  ``engine.run(None, None, journal)`` — the same mechanism that rebuilds a lost worker's
  partitions — so the partitions are bit for bit those of the interrupted fit and the resumed
  fit ends with the identical model.

Storage: one file ``<directory>/state.ckpt``, rewritten every ``every`` iterations, after the
last iteration of the loop, and when the fit is complete (then it holds the finished result, and
resuming it returns that result at once). Each write goes to ``state.tmp``, is flushed to disk,
and replaces the old file with ``os.replace``: the previous checkpoint stays valid until the new
one is complete. The file is a magic line, a JSON header line and a pickle, read back with a
restricted unpickler (``blockops/_safe_pickle.py``: only kmp_dask's algorithm-state classes, the
blockops functions a journal names and NumPy arrays resolve; ``os.system`` and the like are
refused before they run). Still, a checkpoint is written and read by the same user on their own
disk, like a scratch file, and should not be accepted from anyone else (models are saved in the
open format instead). The header — format version, kmp_dask version, the estimator's parameters, a
fingerprint of the data, a SHA-256 of the pickle — is checked *before* anything is unpickled; a
mismatch is a ``ValueError`` naming what differs.

**Other families** (CVM / MMDA here; any fit whose state is not a ``Pursuit``) use the generic
calls, which keep every guarantee above (header checked before unpickling, atomic writes, never
overwritten without ``resume``)::

    ckpt = open_checkpoint(directory, every=k, resume=resume, estimator=..., params=..., store=store)
    if ckpt is not None and ckpt.result is not None: ...        # complete: return ckpt.result at once
    state = ckpt.restore_payload() if ckpt is not None else None  # the dict last saved, or None
    ckpt.save_payload({"my": state, ...}, iteration=t)            # any picklable dict of kmp_dask
                                                                  # state classes / NumPy / builtins
    ckpt.save_payload({"result": result}, iteration=t, complete=True)   # the fit is done

A fit made of several parts (one-vs-rest problems) may keep a file per part in the same
directory: ``part = ckpt.part("problem-0003")`` is a :class:`Checkpoint` on
``<directory>/problem-0003.ckpt`` with the same header (its saved payload is loaded, after the
header check, only when the fit resumes); ``part.save_payload(...)``, ``part.restore_payload()``,
``part.discard()`` (remove the file once the part's result is in the main file).
``part.detached()`` is a copy without the loaded payload, small enough to send to a worker that
writes the part itself (the directory must then be on a file system the workers share).
``open_checkpoint`` refuses (without ``resume``) a directory holding any ``*.ckpt`` file.

No data access here beyond the fingerprint (a few chunks read through the store's own reader),
no dask.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import threading
import time
from pathlib import Path

import numpy as np

from .._version import __version__
from ..blockops._engine import Engine
from ..blockops._safe_pickle import UnsafePickleError, restricted_loads

__all__ = ["Checkpoint", "CheckpointInUseError", "NO_CHECKPOINT", "open_checkpoint", "checkpoint_info",
           "data_fingerprint", "FORMAT_VERSION", "STATE_FILE"]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 4
"""2: sparse KPCA/KCCA and reduced-set loops keep their records in a PathRecorder, the CVM's QP grows
its buffers in place. 3: the CVM QP's factor is an IncrementalCholesky, the HMP and sparse KPCA loops
keep a frozen HMPConfig / KPCAConfig. 4: the CVM's QP is an SMOQP (its kept gradient, no factor).
States of an earlier layout cannot be resumed: the header check refuses them with a clear message
(start the fit again)."""
STATE_FILE, TMP_FILE = "state.ckpt", "state.tmp"
_MAGIC = b"kmp_dask checkpoint\n"
#: where and how loudly a fit runs do not change its model; a resumed fit keeps the basis_columns mode it began with
_UNCHECKED_PARAMS = ("client", "verbose", "basis_columns")


class _NoCheckpoint:
    """What a fit without ``checkpoint=`` saves: nothing."""

    def maybe_save(self, loop, t: int, rng, *, cands=None, first: int | None = None, last: bool = False) -> None:
        pass


NO_CHECKPOINT = _NoCheckpoint()


class Checkpoint:
    """A fit's checkpoint directory: saves the driver's state, and holds the state to resume.

    Made by :func:`open_checkpoint`. ``header`` identifies the fit (``estimator``, ``params``,
    ``data``); ``saved`` is the loaded payload when resuming (None: start from scratch).
    """

    def __init__(self, directory, every: int, header: dict, saved: dict | None = None, *, resuming: bool = False,
                 name: str = "state"):
        self.directory, self.every, self.header, self.saved = Path(directory), int(every), header, saved
        self.resuming, self.name = bool(resuming or saved is not None), str(name)
        self.n_saves, self.seconds, self.nbytes = 0, 0.0, 0  #: measured, for benchmarks and logs
        self._lock = None  #: the directory's lock (open_checkpoint's checkpoint only; never pickled)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_lock": None}

    def release(self) -> None:
        """Release the directory's lock (also done when this object is collected or the process ends)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def path(self) -> Path:
        return self.directory / (STATE_FILE if self.name == "state" else f"{self.name}.ckpt")

    @property
    def _tmp(self) -> Path:
        if self.name == "state":
            return self.directory / TMP_FILE
        # a part may be written by a worker task that outlived its driver while a resumed fit's
        # task writes the same part: each writer its own temporary, so every replace is whole
        return self.directory / f"{self.name}.{os.getpid()}-{threading.get_ident()}.tmp"

    # -- generic payloads (any family) --------------------------------------------------------------
    def save_payload(self, payload: dict, *, iteration: int = -1, complete: bool = False, **status) -> None:
        """Save ``payload`` (a dict of picklable kmp_dask state classes, NumPy arrays and builtins)
        atomically; ``complete=True`` marks the fit done (store its result as ``{"result": ...}`` so
        that :attr:`result` returns it). ``status`` adds JSON values to the header."""
        self._write(payload, iteration=int(iteration), complete=bool(complete), **status)

    def restore_payload(self) -> dict | None:
        """The payload this checkpoint was opened with (None: nothing saved, start from scratch)."""
        return self.saved

    def part(self, name: str) -> Checkpoint:
        """The checkpoint file ``<directory>/<name>.ckpt`` of one part of this fit (same header);
        its payload is loaded — after the header check — only when this fit resumes."""
        if not name or name == "state" or not all(c.isalnum() or c in "-_" for c in name):
            raise ValueError(f"a checkpoint part name must be letters, digits, '-' or '_' (not 'state'); got {name!r}")
        part = Checkpoint(self.directory, self.every, self.header, resuming=self.resuming, name=name)
        if self.resuming and part.path.exists():
            part.saved = _load(part.path, self.header)
        return part

    def detached(self) -> Checkpoint:
        """This checkpoint without its loaded payload (to send to the process that writes it; its
        directory made absolute, as that process may run elsewhere)."""
        return Checkpoint(self.directory.absolute(), self.every, self.header, resuming=self.resuming, name=self.name)

    def discard(self) -> None:
        """Remove this checkpoint's file (a part whose result is kept elsewhere)."""
        self.path.unlink(missing_ok=True)
        for tmp in self.directory.glob(f"{self.name}.*.tmp"):  # temporaries of writers killed mid-write
            tmp.unlink(missing_ok=True)
        self.saved = None

    @property
    def result(self):
        """The finished result of a complete checkpoint, else None."""
        return None if self.saved is None else self.saved.get("result")

    def maybe_save(self, loop, t: int, rng, *, cands=None, first: int | None = None, last: bool = False) -> None:
        """At the end of iteration ``t`` (a step that ran iterations ``first`` to ``t``; default: ``t``
        alone): save when the step crossed a multiple of ``every``, and after the loop's ``last`` one.

        The one signature every loop's checkpoint hook has (a KMP pursuit, sparse KPCA / KCCA, HMP,
        the CVM's problem parts, the in-memory extension hook): ``loop`` is the driver state saved,
        ``cands`` the next iteration's candidates when the loop draws them before the save."""
        first = t if first is None else first
        if last or (t + 1) // self.every > first // self.every:
            self.save_state(loop, t, cands, rng)

    def save_state(self, pursuit, t: int, cands, rng) -> None:
        payload = {"pursuit": pursuit, "t": int(t), "cands": cands, "rng": rng.bit_generator.state,
                   "journal": tuple(pursuit.engine.journal)}
        self._write(payload, iteration=int(t), complete=False)

    def save_result(self, result) -> None:
        """The fit is complete: keep its result (resuming returns it without any pass)."""
        self._write({"result": result}, iteration=len(result.history) - 1, complete=True,
                    stop_reason=result.stop_reason.value)

    def restore(self, engine: Engine, rng):
        """Replay the saved journal on ``engine``'s partitions, set ``rng``; return
        ``(pursuit state, t, cands)`` with the pursuit not yet attached to the engine."""
        s = self.saved
        engine.run(None, None, s["journal"])  # fresh partitions → the state they had at iteration t
        rng.bit_generator.state = s["rng"]
        return s["pursuit"], s["t"], s["cands"]

    def _write(self, payload: dict, **status) -> None:
        t0 = time.perf_counter()
        blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        head = {**self.header, **status, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "payload_bytes": len(blob), "payload_sha256": hashlib.sha256(blob).hexdigest()}
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self._tmp
        with open(tmp, "wb") as f:
            f.write(_MAGIC)
            f.write(json.dumps(head, sort_keys=True).encode() + b"\n")
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)  # atomic: the old checkpoint is valid until this line
        _fsync_dir(self.directory)
        self.n_saves += 1
        self.seconds += time.perf_counter() - t0
        self.nbytes = self.path.stat().st_size


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a checkpoint file and the offset of its payload."""
    with open(path, "rb") as f:
        magic = f.read(len(_MAGIC))
        line = f.readline()
        offset = f.tell()
    if magic != _MAGIC:
        raise ValueError(f"{path} is not a kmp_dask checkpoint (it does not start with {_MAGIC!r}); "
                         "remove it, or pass another checkpoint directory")
    try:
        return json.loads(line), offset
    except ValueError as exc:
        raise ValueError(f"the checkpoint {path} has an unreadable header ({exc}); remove it to start again") from None


def checkpoint_info(directory) -> dict | None:
    """The header of the checkpoint in ``directory`` (iteration, complete, params, data, ...), or
    None if there is none. Reads no pickle."""
    path = Path(directory) / STATE_FILE
    return _read_header(path)[0] if path.exists() else None


def _differences(saved: dict, now: dict, prefix: str) -> list[str]:
    keys = sorted(set(saved) | set(now))
    return [f"{prefix}{k}: checkpoint {saved.get(k)!r}, now {now.get(k)!r}" for k in keys if saved.get(k) != now.get(k)]


def _check_header(path: Path, saved: dict, header: dict) -> None:
    """Refuse a checkpoint written by another version, or for other parameters or data."""
    if saved.get("format") != FORMAT_VERSION or saved.get("kmp_dask_version") != __version__:
        raise ValueError(
            f"the checkpoint {path} was written by kmp_dask {saved.get('kmp_dask_version')} (format "
            f"{saved.get('format')}); this is kmp_dask {__version__} (format {FORMAT_VERSION}). Resume it with "
            "that version, or remove it to start again.")
    diffs = (_differences({"estimator": saved.get("estimator")}, {"estimator": header["estimator"]}, "")
             + _differences(saved.get("params", {}), header["params"], "parameter ")
             + _differences(saved.get("data", {}), header["data"], "data "))
    _check_data_files(path, saved.get("data", {}), header["data"], diffs)
    if diffs:
        raise ValueError(
            f"the checkpoint {path} is of another fit; resume needs the same estimator, parameters and data. "
            "Differences: " + "; ".join(diffs) + ". Fit with the checkpoint's settings, or remove it / pass "
            "another checkpoint directory to start a new fit.")


def _check_data_files(path: Path, saved: dict, now: dict, diffs: list) -> None:
    """Refuse a resume whose store changed in place (its file listing differs), or whose file
    listing cannot tell (checkpoint or store without one): a fit resumed on other data would end in
    a model of neither."""
    if "files" not in now and "files" not in saved:
        return  # in-memory input: every row is hashed (rows_sha256); a fit's own copy of dask input
    if now.get("files") is None or saved.get("files") is None:
        which = "the store" if now.get("files") is None else "the checkpoint"
        raise ValueError(
            f"the checkpoint {path} cannot be resumed safely: {which} has no listing of the store's files with "
            "their sizes and modification times / ETags, so a chunk changed in place could not be seen. Remove the "
            "checkpoint to start again, or resume from a local or S3 store.")
    if saved.get("files") != now.get("files") and len(diffs) == 1:
        diffs[0] = ("data files: the store's chunk files changed since the checkpoint was written (a size, a "
                    "modification time or an ETag differs; the data was rewritten in place, or the store was copied)")


def _load(path: Path, header: dict) -> dict:
    saved, offset = _read_header(path)
    _check_header(path, saved, header)
    with open(path, "rb") as f:
        f.seek(offset)
        blob = f.read()
    if len(blob) != saved.get("payload_bytes") or hashlib.sha256(blob).hexdigest() != saved.get("payload_sha256"):
        raise ValueError(f"the checkpoint {path} is damaged (its payload does not match the header's length and "
                         "SHA-256); remove it to start again")
    try:  # only kmp_dask's state classes and NumPy resolve (blockops/_safe_pickle.py)
        payload = restricted_loads(blob)
    except UnsafePickleError as e:
        raise ValueError(f"the checkpoint {path} cannot be resumed: {e}") from None
    logger.info("resuming the fit from %s (iteration %s%s)", path, saved.get("iteration"),
                ", complete" if saved.get("complete") else "")
    return payload


def open_checkpoint(directory, *, every=10, resume=False, estimator: str, params: dict, store,
                    store_is_input: bool = True) -> Checkpoint | None:
    """The checkpoint of a fit (None without ``directory``), checked against this fit.

    * a checkpoint in ``directory`` and ``resume=False`` → ``FileExistsError`` (never overwritten);
    * ``resume=True`` and a checkpoint → loaded, after its header is checked against ``estimator``,
      ``params`` (``client`` and ``verbose`` ignored) and the data's fingerprint (``ValueError``
      naming every difference);
    * ``resume=True`` and no checkpoint → the fit starts from scratch (logged, no warning: a job
      that always passes ``resume=True`` is the intended use).

    ``store_is_input``: the store is the user's own (its URL is part of the fingerprint), not a
    temporary copy of array input.
    """
    if directory is None:
        if resume:
            raise ValueError("resume=True needs checkpoint=<directory> (where the interrupted fit saved its state)")
        return None
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"checkpoint_every must be a positive int (iterations between saves); got {every!r}")
    path = Path(directory) / STATE_FILE
    if not resume:
        found = path if path.exists() else next(iter(sorted(Path(directory).glob("*.ckpt"))), None) \
            if Path(directory).is_dir() else None
        if found is not None:
            raise FileExistsError(
                f"a checkpoint already exists at {found}; pass resume=True to continue it, or remove it to start a "
                "new fit")
    header = {"format": FORMAT_VERSION, "kmp_dask_version": __version__, "estimator": estimator,
              "params": _jsonable_params(params), "data": data_fingerprint(store, with_location=store_is_input)}
    lock = _DirectoryLock.acquire(Path(directory))  # before the state is read: one writer per directory
    try:
        saved = _load(path, header) if path.exists() else None
    except BaseException:
        lock.release()
        raise
    if resume and saved is None:
        logger.info("no checkpoint at %s: the fit starts from scratch", path)
    ckpt = Checkpoint(directory, int(every), header, saved, resuming=bool(resume))
    ckpt._lock = lock
    return ckpt


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


class CheckpointInUseError(FileExistsError):
    """Another process holds the lock of a checkpoint directory: it is fitting into it now."""


class _DirectoryLock:
    """An exclusive ``flock`` on the checkpoint directory itself (no file is added to it), held by the
    fit that writes the directory: a second process opening it is refused at once (two writers would
    replace each other's ``state.ckpt``); the kernel releases it when the process ends, however it
    ends. Within one process the lock is shared (counted): a fit may open its own directory again."""

    _held: dict = {}  #: resolved directory -> [fd, count], this process's locks

    def __init__(self, key: str):
        self.key = key

    @classmethod
    def acquire(cls, directory: Path) -> _DirectoryLock:
        import fcntl

        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        key = str(directory.resolve())
        if key in cls._held:
            cls._held[key][1] += 1
            return cls(key)
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            if created:
                _remove_if_empty(directory)
            raise CheckpointInUseError(
                f"the checkpoint directory {str(directory)!r} is in use by another fit (another process holds its "
                "lock): two fits cannot write one checkpoint. Wait for that fit to end (then resume=True / --resume "
                "continues it), or give this fit another checkpoint directory.") from None
        cls._held[key] = [fd, 1, directory if created else None]
        return cls(key)

    def release(self) -> None:
        entry = self._held.get(self.key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self._held[self.key]
            if entry[2] is not None:  # made for this fit and nothing saved in it: leave nothing behind
                _remove_if_empty(entry[2])
            os.close(entry[0])  # closing the descriptor releases the flock
        self.key = None

    def __del__(self):
        if getattr(self, "key", None) is not None:
            try:
                self.release()
            except Exception:  # noqa: BLE001 - at interpreter exit; the kernel drops the lock anyway
                pass


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (np.random.RandomState, np.random.Generator)):
        return f"<{type(v).__name__}>"  # its state moved on since; the checkpoint holds the fit's own RNG
    return repr(v)


def _jsonable_params(params: dict) -> dict:
    out = {k: _jsonable(v) for k, v in params.items() if k not in _UNCHECKED_PARAMS}
    return json.loads(json.dumps(out, sort_keys=True))  # tuples → lists, as read back


def data_fingerprint(store, *, with_location: bool = True) -> dict:
    """What identifies the data of a fit: location, shape, dtype, chunking, the store's summary
    statistics (mean / std of every column over all rows) and a SHA-256 of rows — all of them for
    a store without a location (in memory), else the first and the last storage chunk — and, for a
    store with a location, a SHA-256 of its file listing (``files``: every chunk's and metadata
    file's name, size and modification time or ETag, :meth:`ZarrStore.file_manifest`): a chunk
    rewritten in place anywhere changes it, at the cost of one listing (no chunk is read;
    benchmarks/resume_fingerprint.py measures it). A store whose listing cannot tell (no
    ``file_manifest``, or a file system reporting neither modification times nor ETags) gets
    ``files: None``, and resuming on it is refused (:func:`_check_header`)."""
    attrs = store.attrs
    summary = {k: attrs.get(k) for k in ("n_rows", "mean", "std", "classes", "feature_names")}
    sizes = [int(c) for c in store.row_chunks]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    chunks = range(len(sizes)) if store.url is None else sorted({0, len(sizes) - 1})
    h = hashlib.sha256()
    for c in chunks if sizes else ():
        X, y = store.read_range(starts[c], starts[c + 1])
        h.update(np.ascontiguousarray(X).tobytes())
        if y is not None:
            h.update(np.ascontiguousarray(y).tobytes())
    return {
        "location": store.url if with_location else None,
        "n_rows": int(store.n_rows), "n_features": int(store.n_features), "dtype": str(np.dtype(store.dtype)),
        "y_shape": list(store.y_shape or ()), "row_chunks": hashlib.sha256(str(sizes).encode()).hexdigest()[:16],
        "summary_sha256": hashlib.sha256(json.dumps(_jsonable(summary), sort_keys=True).encode()).hexdigest(),
        "rows_sha256": h.hexdigest(),
        **({"files": _files_digest(store)} if store.url is not None and with_location else {}),
    }


def _files_digest(store) -> str | None:
    """SHA-256 of the store's file listing (name, size, version of every file), or None when the
    store cannot list its files with a version."""
    manifest = getattr(store, "file_manifest", None)
    listing = manifest() if callable(manifest) else None
    if listing is None:
        return None
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()
