"""Build zarr stores from NumPy, dask, CSV, LIBSVM or a block function; open stores.

Every ingest writes into a temporary sibling of the target and renames it into
place only when complete (see :func:`~kmp_dask.store._zarr.atomic_target`).
Per-feature mean and std are accumulated in the same single pass as the write.

Temporaries of killed ingests (``TARGET.tmp-<32 hex>``): while an ingest writes one it holds the
marker file ``.kmp_dask-ingest`` (JSON: host, pid and the process's start time), removed just
before the rename. The next ingest of the same target removes every such sibling whose marker
names a process of this host that is gone (no such pid, or a pid reused by a later process) or,
for another host, a marker older than :data:`STALE_AFTER_SECONDS`; ``kmp-dask info`` lists them
(:func:`ingest_temporaries`). A sibling without the marker is never removed (not recognisably
ours), only reported.
"""
from __future__ import annotations

import csv
import functools
import json
import logging
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._temporaries import hashed_stem, pid_alive
from ..exceptions import DataValidationError
from ._base import DataStore, default_chunk_rows
from ._schema import (
    RunningStats,
    check_feature_names,
    json_safe_classes,
    make_attrs,
    make_provenance,
)
from ._validation import (
    as_numpy_X,
    as_numpy_y,
    check_dask_X,
    check_dask_y,
    check_numeric,
    first_nonfinite,
    raise_nonfinite,
    resolve_dtype,
)
from ._zarr import ZarrSink, ZarrStore, atomic_target, check_target_free

__all__ = [
    "as_store",
    "create_store",
    "open_store",
    "store_from_blocks",
    "store_from_csv",
    "store_from_dask",
    "store_from_libsvm",
]

Block = tuple[np.ndarray, "np.ndarray | None"]

INGEST_MARKER = ".kmp_dask-ingest"
#: A temporary whose marker names another host is stale once the marker is this old (24 h): the
#: writing process cannot be checked from here.
STALE_AFTER_SECONDS = 24 * 3600
_TMP_SUFFIX = re.compile(r"\.tmp-[0-9a-f]{32}$")
_log = logging.getLogger("kmp_dask")


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux ``/proc``), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _mark_in_use(tmp) -> None:
    """Create the temporary store ``tmp`` holding only the in-use marker (local locations only), before
    anything else is written there: a temporary of ours never lacks its marker (the sink then opens the
    directory without clearing it). A no-op when the marker is there."""
    if tmp.is_local:
        marker = os.path.join(tmp.url, INGEST_MARKER)
        if os.path.exists(marker):
            return
        os.makedirs(tmp.url, exist_ok=True)
        info = {"host": socket.gethostname(), "pid": os.getpid(), "start_time": _start_time(os.getpid()),
                "started": time.time()}
        with open(marker, "w", encoding="utf-8") as fh:
            json.dump(info, fh)


def _unmark(tmp) -> None:
    if tmp.is_local:
        try:
            os.unlink(os.path.join(tmp.url, INGEST_MARKER))
        except FileNotFoundError:
            pass


def _alive(pid: int, start_time) -> bool:
    """Whether the ingest ``pid`` started at ``start_time`` still runs: not a zombie (a killed ingest
    its parent has not reaped: it writes nothing more), not a pid reused by a later process."""
    if pid == os.getpid():
        return True
    if not pid_alive(pid):
        return False
    now = _start_time(pid)
    return start_time is None or now is None or now == start_time  # a different start time: pid reused


@dataclass(frozen=True)
class IngestTemporary:
    """A ``TARGET.tmp-<uuid>`` sibling left by an ingest, and whether it may be removed."""

    path: str
    stale: bool
    why: str
    nbytes: int


def _size(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def ingest_temporaries(target) -> list[IngestTemporary]:
    """The temporary siblings ``TARGET.tmp-<32 hex>`` of the local store path ``target``."""
    text = os.fspath(target)
    if "://" in text and not text.startswith("file://"):
        return []
    final = os.path.abspath(os.path.expanduser(text[len("file://"):] if text.startswith("file://") else text))
    parent, name = os.path.split(final.rstrip(os.sep))
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    out = []
    stems = (name, hashed_stem(name))  # a name at the length limit: its temporaries' names are hashed
    for entry in sorted(names):
        path = os.path.join(parent, entry)
        if not any(entry.startswith(s) and _TMP_SUFFIX.fullmatch(entry[len(s):]) for s in stems) \
                or not os.path.isdir(path) or os.path.islink(path):
            continue
        try:
            with open(os.path.join(path, INGEST_MARKER), encoding="utf-8") as fh:
                info = json.load(fh)
            host, pid, started = str(info["host"]), int(info["pid"]), float(info["started"])
        except (OSError, ValueError, KeyError, TypeError):
            out.append(IngestTemporary(path, False, f"no readable {INGEST_MARKER} marker: not removed", _size(path)))
            continue
        if host == socket.gethostname():
            stale = not _alive(pid, info.get("start_time"))
            why = f"pid {pid} on this host {'has ended' if stale else 'is still running'}"
        else:
            age = time.time() - started
            stale = age > STALE_AFTER_SECONDS
            why = f"written on host {host} {age / 3600:.1f} h ago"
        out.append(IngestTemporary(path, stale, why, _size(path)))
    return out


def clean_stale_temporaries(target, *, quiet: bool = False) -> list[IngestTemporary]:
    """Remove the stale temporaries of killed ingests of ``target`` (see the module doc); each is
    logged (a warning) unless ``quiet`` (the caller lists them)."""
    removed = []
    for t in ingest_temporaries(target):
        if t.stale:
            shutil.rmtree(t.path, ignore_errors=True)
            removed.append(t)
            if not quiet:
                _log.warning("removed %s, the temporary of a killed ingest (%s; %d bytes)", t.path, t.why, t.nbytes)
    return removed


@dataclass(frozen=True)
class _Meta:
    """Everything fixed before the first write: layout and descriptive attributes."""

    n_features: int
    dtype: np.dtype
    chunk_rows: int
    y_trailing: tuple | None
    y_dtype: np.dtype | None
    feature_names: list[str]
    classes: list | None
    provenance: dict

    def attrs(self, stats: RunningStats) -> dict:
        """Schema attributes once all rows are written."""
        return make_attrs(n_rows=stats.n, feature_names=self.feature_names, classes=self.classes,
                          stats=stats, provenance=self.provenance)


class _Progress:
    """Rows written so far, shown as a tqdm bar (``progress=True``) or passed to a callback.

    ``progress`` is False/None (silent), True (a bar on stderr) or a callable
    ``progress(rows_done, rows_total_or_None)``.
    """

    def __init__(self, progress, total: int | None, desc: str):
        self.total, self.done, self.bar, self.callback = total, 0, None, None
        if callable(progress):
            self.callback = progress
        elif progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="rows", unit_scale=True, file=sys.stderr,
                            dynamic_ncols=True)

    def update(self, n: int) -> None:
        self.done += int(n)
        if self.bar is not None:
            self.bar.update(int(n))
        if self.callback is not None:
            self.callback(self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _make_meta(X: np.ndarray, y: np.ndarray | None, *, n_rows: int, chunk_rows, dtype,
               feature_names, classes, provenance, source: str) -> _Meta:
    """Settle dtype, chunking and attributes from a representative block."""
    out_dtype = resolve_dtype(dtype, X.dtype)
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(n_rows, X.shape[1], out_dtype.itemsize)
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be a positive int; got {chunk_rows}.")
    return _Meta(
        n_features=X.shape[1],
        dtype=out_dtype,
        chunk_rows=int(chunk_rows),
        y_trailing=None if y is None else tuple(y.shape[1:]),
        y_dtype=None if y is None else y.dtype,
        feature_names=check_feature_names(feature_names, X.shape[1]),
        classes=json_safe_classes(classes),
        provenance=make_provenance(provenance, source),
    )


def _prepare_block(X: np.ndarray, y: np.ndarray | None, start: int, meta: _Meta) -> Block:
    """Check one block (width, finiteness with global row numbers) and cast it."""
    if X.shape[1] != meta.n_features:
        raise DataValidationError(
            f"rows starting at {start} have {X.shape[1]} features; expected {meta.n_features}."
        )
    found = first_nonfinite("X", X, start) or first_nonfinite("y", y, start)
    if found:
        raise_nonfinite(found)
    y = None if y is None else y.astype(meta.y_dtype, copy=False)
    return X.astype(meta.dtype, copy=False), y


def _rebatch(blocks: Iterable[Block], chunk_rows: int) -> Iterator[Block]:
    """Re-cut a stream of row blocks into blocks of exactly ``chunk_rows`` rows (last shorter)."""
    xs, ys, held = [], [], 0
    for X, y in blocks:
        xs.append(X)
        ys.append(y)
        held += X.shape[0]
        while held >= chunk_rows:
            Xa, ya = _concat(xs, ys)
            yield Xa[:chunk_rows], None if ya is None else ya[:chunk_rows]
            xs, ys = [Xa[chunk_rows:]], [None if ya is None else ya[chunk_rows:]]
            held -= chunk_rows
    if held:
        yield _concat(xs, ys)


def _concat(xs: list, ys: list) -> Block:
    X = xs[0] if len(xs) == 1 else np.concatenate(xs)
    if ys[0] is None:
        return X, None
    return X, (ys[0] if len(ys) == 1 else np.concatenate(ys))


def _write_stream(target, blocks: Iterable[Block], *, n_rows_hint: int, overwrite: bool,
                  storage_options, progress=None, n_rows_total: int | None = None,
                  **meta_kw) -> ZarrStore:
    """Serial single-writer ingest of a block stream; memory is bounded by one chunk."""
    it = iter(blocks)
    first = next(it, None)
    if first is None or first[0].shape[0] == 0:
        raise DataValidationError("no rows to store: the input is empty.")
    meta = _make_meta(*first, n_rows=n_rows_hint, **meta_kw)
    bar = _Progress(progress, n_rows_total, "ingest")
    clean_stale_temporaries(target)
    try:
        with atomic_target(target, overwrite=overwrite, storage_options=storage_options) as tmp:
            _write_batches(tmp, _rebatch(_chain(first, it), meta.chunk_rows), meta, bar)
            _unmark(tmp)
    finally:
        bar.close()
    return ZarrStore(target, storage_options=storage_options)


def _chain(first: Block, rest: Iterator[Block]) -> Iterator[Block]:
    yield first
    yield from rest


def _write_batches(tmp, batches: Iterator[Block], meta: _Meta,
                   bar: _Progress | None = None) -> RunningStats:
    """Create the arrays lazily (chunk_rows clamped to a lone short block) and write."""
    stats, start, sink = RunningStats.empty(meta.n_features), 0, None
    for X, y in batches:
        if sink is None:
            meta = _clamp_chunks(meta, X.shape[0])
            _mark_in_use(tmp)
            sink = ZarrSink(tmp, n_rows=0, n_features=meta.n_features, dtype=meta.dtype,
                            chunk_rows=meta.chunk_rows, y_trailing=meta.y_trailing,
                            y_dtype=meta.y_dtype)
        X, y = _prepare_block(X, y, start, meta)
        sink.write(start, X, y)
        stats = stats.merge(RunningStats.of_block(X))
        start += X.shape[0]
        if bar is not None:
            bar.update(X.shape[0])
    sink.finish(meta.attrs(stats))
    return stats


def _clamp_chunks(meta: _Meta, first_rows: int) -> _Meta:
    """A first batch shorter than chunk_rows is the whole data: never chunk beyond N."""
    if first_rows >= meta.chunk_rows:
        return meta
    return _Meta(**{**meta.__dict__, "chunk_rows": first_rows})


def _row_ranges(n_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    return [(a, min(a + chunk_rows, n_rows)) for a in range(0, n_rows, chunk_rows)]


def create_store(target, X, y=None, *, chunk_rows=None, overwrite=False, feature_names=None,
                 classes=None, provenance=None, dtype=None, storage_options=None,
                 progress=None) -> ZarrStore:
    """Write NumPy data to a new zarr store, atomically.

    Parameters
    ----------
    target : str or os.PathLike
        Local path or fsspec URL (``memory://``, ``file://``, ...) of the store.
    X : array-like of shape (n_samples, n_features)
        Numeric features, finite. Stored as float32 if float32, else float64.
    y : array-like of shape (n_samples,) or (n_samples, m), optional
        Numeric, finite targets (encode labels first and pass ``classes``).
    chunk_rows : int, optional
        Rows per storage chunk; default about 16 MiB per chunk of ``X``.
    overwrite : bool, default=False
        Replace an existing store (only after the new one is complete).
    feature_names : sequence of str, optional
        One name per column; default ``x0, x1, ...``.
    classes : sequence, optional
        Class labels that the integer codes in ``y`` refer to.
    provenance : dict, optional
        Extra provenance entries (merged over source, created, version).
    dtype : {"float32", "float64"}, optional
        Storage dtype of ``X``.
    storage_options : dict, optional
        fsspec options for URL targets.
    progress : bool or callable, optional
        True shows a tqdm bar of rows written (on stderr); a callable is called as
        ``progress(rows_done, rows_total)`` after each chunk. Default: silent.

    Returns
    -------
    ZarrStore

    Raises
    ------
    DataValidationError
        Bad shape, dtype, length, empty or non-finite data.
    StoreExistsError
        ``target`` exists and ``overwrite`` is False (checked before anything else).
    """
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    X = as_numpy_X(X)
    y = as_numpy_y(y, X.shape[0])
    chunk_rows = chunk_rows or default_chunk_rows(*X.shape, resolve_dtype(dtype, X.dtype).itemsize)
    blocks = ((X[a:b], None if y is None else y[a:b]) for a, b in _row_ranges(len(X), chunk_rows))
    return _write_stream(target, blocks, n_rows_hint=X.shape[0], overwrite=overwrite,
                         storage_options=storage_options, chunk_rows=chunk_rows, dtype=dtype,
                         feature_names=feature_names, classes=classes, provenance=provenance,
                         source="numpy", progress=progress, n_rows_total=X.shape[0])


@dataclass(frozen=True)
class _BlockResult:
    """What each parallel write task sends back: partial statistics or the first bad value."""

    stats: RunningStats
    bad: tuple | None


def _store_block(writer, start: int, X: np.ndarray, y: np.ndarray | None, dtype,
                 y_dtype) -> _BlockResult:
    """Task body: check and write one whole chunk, return its partial statistics."""
    bad = first_nonfinite("X", X, start) or first_nonfinite("y", y, start)
    if bad:
        return _BlockResult(RunningStats.empty(X.shape[1]), bad)
    X = X.astype(dtype, copy=False)
    writer(start, X, None if y is None else y.astype(y_dtype, copy=False))
    return _BlockResult(RunningStats.of_block(X), None)


def _generate_block(block_fn: Callable, start: int, stop: int, writer, dtype,
                    y_dtype) -> _BlockResult:
    """Task body for :func:`store_from_blocks`: make rows ``[start, stop)`` and write them."""
    X, y = block_fn(start, stop)
    return _store_block(writer, start, np.asarray(X), None if y is None else np.asarray(y),
                        dtype, y_dtype)


def _reduce_results(results: Iterable[_BlockResult], n_features: int) -> RunningStats:
    """Merge partial statistics in row order, raising for the earliest non-finite value."""
    results = list(results)
    bad = [r.bad for r in results if r.bad]
    if bad:
        raise_nonfinite(min(bad, key=lambda b: (b[1], b[0])))
    return functools.reduce(RunningStats.merge, (r.stats for r in results),
                            RunningStats.empty(n_features))


def _parallel_ingest(target, tasks_for, meta: _Meta, n_rows: int, *, overwrite, storage_options,
                     compute: Callable) -> ZarrStore:
    """Pre-size the arrays, run one write task per whole chunk, then write attributes."""
    clean_stale_temporaries(target)
    with atomic_target(target, overwrite=overwrite, storage_options=storage_options) as tmp:
        _mark_in_use(tmp)
        sink = ZarrSink(tmp, n_rows=n_rows, n_features=meta.n_features, dtype=meta.dtype,
                        chunk_rows=meta.chunk_rows, y_trailing=meta.y_trailing,
                        y_dtype=meta.y_dtype)
        results = compute(tasks_for(sink.block_writer()))
        sink.finish(meta.attrs(_reduce_results(results, meta.n_features)))
        _unmark(tmp)
    return ZarrStore(target, storage_options=storage_options)


def store_from_dask(target, X, y=None, *, chunk_rows=None, overwrite=False, feature_names=None,
                    classes=None, provenance=None, dtype=None, storage_options=None) -> ZarrStore:
    """Write dask arrays to a new zarr store in one dask pass, atomically.

    ``X`` is rechunked to storage chunks ``(chunk_rows, n_features)``; the zarr
    arrays are created first and each task writes exactly one whole chunk and
    returns that chunk's partial mean/variance, so store and statistics are one
    graph and one ``compute``. Under a distributed client, use a local path
    (zarr cannot receive distributed writes into ``memory://``).

    Parameters
    ----------
    target, chunk_rows, overwrite, feature_names, classes, provenance, dtype, storage_options
        As for :func:`create_store`.
    X : dask.array.Array of shape (n_samples, n_features)
        Known chunk sizes; one chunk along features.
    y : dask.array.Array or ndarray, optional
        Targets with ``n_samples`` rows.

    Returns
    -------
    ZarrStore
    """
    import dask
    import dask.array as da

    from ..parallel._waits import compute_bounded  # on a cluster: bounded, one clear error

    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    check_dask_X(X)
    n_rows = int(X.shape[0])
    if y is not None:
        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y))
        check_dask_y(y, n_rows)
    probe_y = None if y is None else np.empty((0, *y.shape[1:]), y.dtype)
    meta = _make_meta(np.empty((0, X.shape[1]), X.dtype), probe_y, n_rows=n_rows,
                      chunk_rows=chunk_rows, dtype=dtype, feature_names=feature_names,
                      classes=classes, provenance=provenance, source="dask")
    meta = _clamp_chunks(meta, n_rows)
    Xb = X.rechunk((meta.chunk_rows, -1)).to_delayed().ravel()
    yb = [None] * len(Xb) if y is None else y.rechunk((meta.chunk_rows,) + (-1,) * (y.ndim - 1)
                                                      ).to_delayed().ravel()
    starts = range(0, n_rows, meta.chunk_rows)
    task = dask.delayed(_store_block, pure=False)

    def tasks_for(writer):
        return [task(writer, s, xb, yv, meta.dtype, meta.y_dtype) for s, xb, yv in zip(starts, Xb, yb, strict=True)]

    return _parallel_ingest(target, tasks_for, meta, n_rows, overwrite=overwrite,
                            storage_options=storage_options,
                            compute=lambda t: compute_bounded(*t, what="chunk write of the store"))


def store_from_blocks(target, n_rows: int, block_fn: Callable[[int, int], Block], *,
                      chunk_rows=None, overwrite=False, feature_names=None, classes=None,
                      provenance=None, dtype=None, storage_options=None, client=None,
                      progress=None) -> ZarrStore:
    """Write a store whose rows ``[start, stop)`` are produced by ``block_fn(start, stop)``.

    Without ``client`` the chunks are produced and written one after another
    (memory bounded by one chunk). With a ``distributed.Client`` one task per
    whole chunk generates and writes it; the target must then be a local path.

    Parameters
    ----------
    target, chunk_rows, overwrite, feature_names, classes, provenance, dtype, storage_options
        As for :func:`create_store`.
    n_rows : int
        Total number of rows.
    block_fn : callable
        ``block_fn(start, stop) -> (X_rows, y_rows or None)``; picklable when
        ``client`` is given.
    client : distributed.Client, optional
        Write chunks in parallel on the cluster.
    progress : bool or callable, optional
        As for :func:`create_store` (serial writes only; ignored with ``client``).

    Returns
    -------
    ZarrStore
    """
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    if int(n_rows) < 1:
        raise DataValidationError(f"n_rows must be >= 1; got {n_rows}.")
    meta_kw = dict(chunk_rows=chunk_rows, dtype=dtype, feature_names=feature_names,
                   classes=classes, provenance=provenance, storage_options=storage_options)
    if chunk_rows is None:
        X0, _ = block_fn(0, 1)
        meta_kw["chunk_rows"] = default_chunk_rows(int(n_rows), np.shape(X0)[1],
                                                   resolve_dtype(dtype, np.asarray(X0).dtype).itemsize)
    if client is None:
        blocks = (block_fn(a, b) for a, b in _row_ranges(int(n_rows), meta_kw["chunk_rows"]))
        return _write_stream(target, blocks, n_rows_hint=int(n_rows), overwrite=overwrite,
                             source="block function", progress=progress,
                             n_rows_total=int(n_rows), **meta_kw)
    return _client_ingest(target, int(n_rows), block_fn, client, overwrite, meta_kw)


def _client_ingest(target, n_rows, block_fn, client, overwrite, meta_kw) -> ZarrStore:
    """Parallel :func:`store_from_blocks`: one generate-and-write task per chunk."""
    from ._zarr import Location

    storage_options = meta_kw.pop("storage_options")
    if not Location.parse(target, storage_options).is_local:
        raise ValueError(f"parallel writes with client= need a local path target; got {target!r}.")
    X0, y0 = block_fn(0, min(n_rows, 1))
    meta = _clamp_chunks(_make_meta(np.asarray(X0), None if y0 is None else np.asarray(y0),
                                    n_rows=n_rows, source="block function", **meta_kw), n_rows)
    ranges = _row_ranges(n_rows, meta.chunk_rows)

    def tasks_for(writer):
        return [client.submit(_generate_block, block_fn, a, b, writer, meta.dtype, meta.y_dtype,
                              pure=False) for a, b in ranges]

    def gather(futures):  # bounded: the scheduler or every worker gone is a clear error (parallel._waits)
        from ..parallel._waits import wait_for

        return wait_for(futures, client, what="chunk of the ingest")

    return _parallel_ingest(target, tasks_for, meta, n_rows, overwrite=overwrite,
                            storage_options=storage_options, compute=gather)


def resolve_column(columns: list, value, *, what: str, where: str, option: str) -> Any:
    """The column of ``columns`` that ``value`` names: a column name, else a 0-based position
    (an int, or a string of digits such as ``"0"`` from the command line)."""
    if value in columns and not isinstance(value, bool):
        return value
    idx = None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        idx = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        idx = int(value)
    shown = [str(c) for c in columns[:30]] + (["..."] if len(columns) > 30 else [])
    if idx is None:
        raise ValueError(f"{what} {value!r} is not a column of {where}; its columns are {shown}. Pass {option} a "
                         "column name or a 0-based position.")
    if not -len(columns) <= idx < len(columns):
        raise ValueError(f"{what} {value!r} is out of range: {where} has {len(columns)} columns (positions 0 to "
                         f"{len(columns) - 1}; names {shown}). Pass {option} a column name or a 0-based position.")
    return columns[idx]


#: ``label_column`` of a CSV / Parquet plan when neither a label column nor "no label" was given:
#: the plan refuses the file listing its columns (the label is never guessed: docs/store.md).
LABEL_REQUIRED = object()


def _resolve_label(columns: list, label_column, where: str = "the file") -> Any:
    """Column label of the target column (None for no target)."""
    if label_column is None:
        return None
    if label_column is LABEL_REQUIRED:
        shown = [str(c) for c in columns[:30]] + (["..."] if len(columns) > 30 else [])
        raise ValueError(f"which column of {where} is the label? Its columns are {shown}. Pass --label COL (a name or "
                         "0-based position; label= in Python and pipeline files), or --no-label (label=None; "
                         "no_label = true in a pipeline) for a store of the features only, to score with predict.")
    return resolve_column(columns, label_column, what="label column", where=where,
                          option="--label (label= in Python and pipeline files)")


def _resolve_drop(columns: list, drop, label, where: str) -> list:
    """The columns named by ``drop`` (names or positions), refusing unknown ones and the label."""
    if drop is None:
        return []
    if isinstance(drop, (str, int, np.integer)):
        drop = [drop]
    out = []
    for value in drop:
        col = resolve_column(columns, value, what="drop column", where=where,
                             option="--drop (drop= in Python and pipeline files)")
        if label is not None and col == label:
            raise ValueError(f"drop column {value!r} is the label column {str(label)!r} of {where}; drop feature "
                             "columns only (or pass no label).")
        out.append(col)
    return out


#: Delimiters the CSV sniffer chooses from (``csv.Sniffer`` on the first lines of the file).
DELIMITERS = ",;\t|"


def _first_lines(path, n: int = 20) -> list[str]:
    import fsspec

    with fsspec.open(path, mode="rt", encoding="utf-8", errors="replace", newline="") as fh:
        lines = []
        for line in fh:
            if line.strip():
                lines.append(line)
            if len(lines) >= n:
                break
    return lines


def _sniff_delimiter(path) -> str:
    """The delimiter of a CSV/TSV file: ``csv.Sniffer`` on its first 20 non-blank lines, choosing
    among ``, ; TAB |``; if that finds none, TAB for ``.tsv``/``.tab`` files and ``,`` otherwise."""
    name = os.fspath(path).lower()
    fallback = "\t" if name.endswith((".tsv", ".tab", ".tsv.gz")) else ","
    try:
        sample = "".join(_first_lines(path))
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except (OSError, csv.Error, UnicodeError):
        return fallback


@dataclass(frozen=True)
class SourcePlan:
    """A source read as a stream of row blocks, with what is fixed before the first row:
    ``blocks()`` starts a fresh pass over the source each call."""

    blocks: Callable[[], Iterator[Block]]
    feature_names: list | None
    classes: list | None
    provenance: dict
    source: str
    chunk_rows: int
    n_rows: int | None = None  # total rows, when known without a pass
    n_features: int | None = None  # columns, when known without names (a LIBSVM file's scan)


def write_plan(target, plan: SourcePlan, *, select=None, overwrite=False, storage_options=None, progress=None,
               dtype=None) -> ZarrStore:
    """Write ``plan``'s rows (``select(blocks)`` of them, if given) to a new store at ``target``."""
    blocks = plan.blocks() if select is None else select(plan.blocks())
    return _write_stream(target, blocks, n_rows_hint=plan.n_rows or 2**31, overwrite=overwrite,
                         storage_options=storage_options, chunk_rows=plan.chunk_rows, dtype=dtype,
                         feature_names=plan.feature_names, classes=plan.classes, provenance=plan.provenance,
                         source=plan.source, progress=progress, n_rows_total=plan.n_rows if select is None else None)


class _CsvSource:
    """A CSV file read in chunks by pandas, with errors that name the row, line and value.

    Rows are numbered from 0 among the data rows (as in the other ingest messages);
    lines are the file's physical 1-based line numbers, as an editor shows them.
    """

    _TOKENIZE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")

    def __init__(self, path, delimiter: str | None, header):
        self.path, self.name = path, os.fspath(path)
        self.given_delimiter = delimiter
        self.delimiter = delimiter if delimiter is not None else _sniff_delimiter(path)
        self.read_kw = dict(sep=self.delimiter, header=header, float_precision="round_trip")  # exact decimals
        if header is None:
            self.header_lines = 0
        elif header == "infer":
            self.header_lines = 1
        else:
            self.header_lines = int(max(np.atleast_1d(header))) + 1
        self.n_columns = None
        self.label = None

    def read(self, **kw):
        """``pandas.read_csv`` of the whole file (or ``nrows``), tokenizer errors translated."""
        import pandas as pd

        try:
            return pd.read_csv(self.path, **self.read_kw, **kw)
        except pd.errors.ParserError as exc:
            raise self._parser_error(exc) from None
        except pd.errors.EmptyDataError:
            raise DataValidationError(f"CSV file {self.name!r} is empty (no header line, no rows): there is nothing "
                                      "to read; check the path, or write the data into it first.") from None

    @property
    def where(self) -> str:
        return f"CSV file {self.name!r} (delimiter {self.delimiter!r})"

    def probe(self):
        """The first two rows, checked: a readable header, not one column by a wrong delimiter,
        at least one data row (a header-only file is refused as such, not as "not numeric")."""
        probe = self.read(nrows=2)
        self.check_probe(probe)
        columns = list(probe.columns)
        self.check_columns(columns)
        self.n_columns = len(columns)
        if probe.empty:
            raise DataValidationError(
                f"{self.where} has a header line {[str(c) for c in columns][:30]} but no data rows: there is nothing "
                "to read; give a file with rows below its header (or --no-header if that line is data).")
        return probe

    def frames(self, chunk_rows: int, **kw) -> Iterator:
        """Chunks of ``chunk_rows`` rows (continuing row index), tokenizer errors translated."""
        import pandas as pd

        try:
            with pd.read_csv(self.path, chunksize=chunk_rows, **self.read_kw, **kw) as parts:
                yield from parts
        except pd.errors.ParserError as exc:
            raise self._parser_error(exc) from None

    def _parser_error(self, exc) -> DataValidationError:
        found = self._TOKENIZE.search(str(exc))
        if not found:
            return DataValidationError(f"cannot parse CSV file {self.name!r}: {str(exc).strip()}")
        want, line, saw = map(int, found.groups())
        row = self._row_of_line(line)
        where = f"line {line}" + (f" (data row {row})" if row is not None else "")
        return DataValidationError(
            f"{where} of CSV file {self.name!r} is too long: it has {saw} fields but the file "
            f"has {want} columns; fix or drop that line (a stray delimiter or an unquoted text "
            "field with a comma?)."
        )

    def _data_lines(self) -> Iterator[tuple[int, int, str]]:
        """``(row, line_number, text)`` of the non-blank data lines."""
        import fsspec

        with fsspec.open(self.path, mode="rt", encoding="utf-8", errors="replace", newline="") as fh:
            row, skipped = 0, 0
            for lineno, text in enumerate(fh, start=1):
                if not text.strip():
                    continue
                if skipped < self.header_lines:
                    skipped += 1
                    continue
                yield row, lineno, text.rstrip("\r\n")
                row += 1

    def _row_of_line(self, line: int) -> int | None:
        for row, lineno, _ in self._data_lines():
            if lineno == line:
                return row
            if lineno > line:
                break
        return None

    def line_of_row(self, row: int) -> tuple[int | None, str | None]:
        """Physical line number and text of data row ``row`` (None if not found)."""
        for r, lineno, text in self._data_lines():
            if r == row:
                return lineno, text
        return None, None

    def check_probe(self, probe) -> None:
        """pandas silently turns the first column into the index when the first data row is
        longer than the header; report that row instead."""
        import pandas as pd

        if isinstance(probe.index, pd.RangeIndex):
            return
        line, text = self.line_of_row(0)
        n_fields = len(next(csv.reader([text], delimiter=self.delimiter))) if text else "more"
        raise DataValidationError(
            f"{self._where(0, line)} is too long: it has {n_fields} fields but the file has "
            f"{len(probe.columns)} columns; fix or drop that line (a stray delimiter or an "
            "unquoted text field with a comma?)."
        )

    def _where(self, row: int, line: int | None) -> str:
        return f"row {row}" + (f" (line {line} of {self.name!r})" if line else f" of {self.name!r}")

    def check_missing(self, df) -> None:
        """Refuse empty / NA cells, telling a short row apart from a missing value."""
        missing = df.isna().to_numpy()
        if not missing.any():
            return
        i, j = np.argwhere(missing)[0]
        row, column = int(df.index[i]), df.columns[j]
        line, text = self.line_of_row(row)
        if text is not None:
            n_fields = len(next(csv.reader([text], delimiter=self.delimiter)))
            if n_fields < self.n_columns:
                raise DataValidationError(
                    f"{self._where(row, line)} is short: it has {n_fields} field"
                    f"{'s' if n_fields != 1 else ''} but the file has {self.n_columns} columns "
                    f"({text[:80]!r}); complete or drop that line."
                )
        raise DataValidationError(
            f"column {str(column)!r} has a missing value (empty, NA or NaN) at "
            f"{self._where(row, line)}; fill in or drop missing values before ingest."
        )

    def check_numeric(self, feats) -> None:
        """Refuse non-numeric feature columns, naming the first bad cell (column, row, value)."""
        import pandas as pd

        bad = [c for c in feats.columns if not pd.api.types.is_numeric_dtype(feats[c])]
        if not bad:
            return
        col = feats[bad[0]]
        as_num = pd.to_numeric(col, errors="coerce")
        cells = col[as_num.isna() & col.notna()]
        detail = ""
        if len(cells):
            row = int(cells.index[0])
            line, _ = self.line_of_row(row)
            detail = (f": column {str(bad[0])!r} holds {cells.iloc[0]!r} at row {row}"
                      + (f" (line {line})" if line else ""))
        raise DataValidationError(
            f"column(s) {[str(c) for c in bad]} of {self.name!r} are not numeric{detail}. Fix "
            "that value, or encode the column(s) (e.g. pandas.get_dummies) before ingest, or "
            f"drop them (--drop {bad[0]}, drop= in Python). If column {str(bad[0])!r} is the label, "
            f"name it: --label {bad[0]} (label= in Python; the label column is "
            f"{'none' if self.label is None else repr(str(self.label))} now)."
        )

    def check_columns(self, columns: list) -> None:
        """Refuse a file that reads as one column while its first line holds another delimiter."""
        if len(columns) != 1:
            return
        first = (_first_lines(self.path, 1) or [""])[0].rstrip("\r\n")
        others = [d for d in DELIMITERS if d != self.delimiter and d in first]
        if others:
            how = "the given" if self.given_delimiter is not None else "the detected"
            raise DataValidationError(
                f"CSV file {self.name!r} reads as a single column with {how} delimiter {self.delimiter!r}, but its "
                f"first line {first[:80]!r} holds {others[0]!r}: pass --delimiter {others[0]!r} "
                f"(delimiter= in Python).")


def _csv_classes(source: _CsvSource, label, n_rows=None) -> list:
    """Extra pass over the label column only: sorted, stripped text labels."""
    labels: set = set()
    for part in source.frames(100_000, usecols=[label], dtype={label: str}, nrows=n_rows):
        labels.update(part[label].dropna().str.strip())
    return sorted(labels)


def _csv_blocks(source: _CsvSource, label, features: list, classes, chunk_rows: int, n_rows=None) -> Iterator[Block]:
    """Stream ``(X, y)`` blocks of ``chunk_rows`` rows from a CSV file: the columns ``features``
    in that order (any other column but the label is left out)."""
    codes = None if classes is None else {c: i for i, c in enumerate(classes)}
    for df in source.frames(chunk_rows, nrows=n_rows):
        yield _csv_frame_block(df, label, features, codes, source)


def _csv_frame_block(df, label, features: list, codes: dict | None, source: _CsvSource) -> Block:
    """``(X, y)`` of one CSV chunk, refusing short rows, missing and non-numeric values (of the
    columns kept: ``features`` and the label)."""
    df = df[list(features) + ([] if label is None else [label])]
    source.check_missing(df)
    feats = df[list(features)]
    source.check_numeric(feats)
    return feats.to_numpy(), None if label is None else _encode_labels(df[label], codes)


def _encode_labels(col, codes: dict | None) -> np.ndarray:
    """Numeric labels as they are; string labels mapped to class codes (int32)."""
    if codes is None:
        y = col.to_numpy()
        check_numeric("y", y.dtype, "The label column must be numeric or consistently text.")
        return y
    return col.astype(str).str.strip().map(codes).to_numpy(dtype=np.int32)


class _PushWriter:
    """Rows pushed block by block into the temporary store ``tmp``, written in whole chunks of
    ``meta.chunk_rows`` (the push twin of :func:`_write_batches`, for writing two stores in one
    pass over a source)."""

    def __init__(self, tmp, meta: _Meta, bar: _Progress | None = None):
        self.tmp, self.meta, self.bar = tmp, meta, bar
        self.xs, self.ys, self.held, self.start, self.sink = [], [], 0, 0, None
        self.stats = RunningStats.empty(meta.n_features)

    def push(self, X: np.ndarray, y) -> None:
        if not len(X):
            return
        self.xs.append(X)
        self.ys.append(y)
        self.held += X.shape[0]
        while self.held >= self.meta.chunk_rows:
            Xa, ya = _concat(self.xs, self.ys)
            n = self.meta.chunk_rows
            self._write(Xa[:n], None if ya is None else ya[:n])
            self.xs, self.ys = [Xa[n:]], [None if ya is None else ya[n:]]
            self.held -= n

    def _write(self, X, y) -> None:
        if self.sink is None:
            self.meta = _clamp_chunks(self.meta, X.shape[0])
            m = self.meta
            _mark_in_use(self.tmp)
            self.sink = ZarrSink(self.tmp, n_rows=0, n_features=m.n_features, dtype=m.dtype, chunk_rows=m.chunk_rows,
                                 y_trailing=m.y_trailing, y_dtype=m.y_dtype)
        X, y = _prepare_block(X, y, self.start, self.meta)
        self.sink.write(self.start, X, y)
        self.stats = self.stats.merge(RunningStats.of_block(X))
        self.start += X.shape[0]
        if self.bar is not None:
            self.bar.update(X.shape[0])

    def finish(self, what: str) -> None:
        if self.held:
            self._write(*_concat(self.xs, self.ys))
        if self.sink is None:
            raise DataValidationError(f"no rows to store in {what}: the split left it empty; use a larger "
                                      "test_size (or a smaller one), or more rows.")
        self.sink.finish(self.meta.attrs(self.stats))
        _unmark(self.tmp)


def write_plan_split(train_target, test_target, plan: SourcePlan, select, in_test, *, train_provenance: dict,
                     test_provenance: dict, overwrite=False, storage_options=None, progress=None,
                     dtype=None) -> tuple[ZarrStore, ZarrStore]:
    """One pass over ``plan``'s rows (``select(blocks)``), each row written to the train or the
    test store as ``in_test(start, n)`` (a boolean mask of the block's rows) says. Both stores are
    written to temporaries and published only when both are complete."""
    import contextlib
    from dataclasses import replace

    it = select(plan.blocks())
    first = next(it, None)
    if first is None or first[0].shape[0] == 0:
        raise DataValidationError("no rows to store: the input is empty.")
    kw = dict(n_rows=plan.n_rows or 2**31, chunk_rows=plan.chunk_rows, dtype=dtype,
              feature_names=plan.feature_names, classes=plan.classes, source=plan.source)
    meta_train = _make_meta(*first, provenance=train_provenance, **kw)
    meta_test = replace(meta_train, provenance=make_provenance(test_provenance, plan.source))
    bar = _Progress(progress, plan.n_rows, "ingest")
    clean_stale_temporaries(train_target)
    clean_stale_temporaries(test_target)
    try:
        with contextlib.ExitStack() as stack:
            tmp_train = stack.enter_context(atomic_target(train_target, overwrite=overwrite,
                                                          storage_options=storage_options))
            tmp_test = stack.enter_context(atomic_target(test_target, overwrite=overwrite,
                                                         storage_options=storage_options))
            train, test = _PushWriter(tmp_train, meta_train, bar), _PushWriter(tmp_test, meta_test, bar)
            start = 0
            for X, y in _chain(first, it):
                mask = in_test(start, X.shape[0])
                train.push(X[~mask], None if y is None else y[~mask])
                test.push(X[mask], None if y is None else y[mask])
                start += X.shape[0]
            train.finish(f"the train store {os.fspath(train_target)!r}")
            test.finish(f"the test store {os.fspath(test_target)!r}")
    finally:
        bar.close()
    return (ZarrStore(train_target, storage_options=storage_options),
            ZarrStore(test_target, storage_options=storage_options))


def _check_file(path, kind: str) -> None:
    text = os.fspath(path)
    if "://" in text:
        return
    if os.path.isdir(text):
        raise IsADirectoryError(f"source {text!r} is a directory, not a {kind} file.")
    if not os.path.isfile(text):
        raise FileNotFoundError(f"source {text!r}: no such {kind} file.")
    if not os.access(text, os.R_OK):
        raise PermissionError(f"source {text!r}: the {kind} file is not readable (permission denied).")


def csv_plan(path, *, label_column=-1, drop=None, delimiter=None, header="infer", chunk_rows=None,
             feature_names=None, dtype=None, n_rows=None, provenance=None, features=None) -> SourcePlan:
    """Read a CSV file's header and settle its columns (label, dropped, features): a
    :class:`SourcePlan` that streams it. Raises before any row is stored for a bad delimiter,
    label or drop column, or no feature column left. ``features``, if given, is called with the
    feature columns (those neither label nor dropped, in the file's order) and returns the ones
    to read, in the order to read them (scoring: the columns a model was fitted on, by name)."""
    import pandas as pd

    _check_file(path, "CSV")
    source = _CsvSource(path, delimiter, header)
    probe = source.probe()
    columns = list(probe.columns)
    where = source.where
    label = _resolve_label(columns, label_column, where)
    source.label = label
    dropped = _resolve_drop(columns, drop, label, where)
    feat_cols = [c for c in columns if c != label and c not in dropped]
    if features is not None and feat_cols:
        feat_cols = list(features(feat_cols))
    if not feat_cols:
        raise DataValidationError(
            f"{where} has no feature column left (columns {[str(c) for c in columns]}, label {str(label)!r}, "
            f"dropped {[str(c) for c in dropped]}); if the file uses another delimiter pass --delimiter "
            "(delimiter= in Python).")
    if feature_names is None and header is not None:
        feature_names = [str(c) for c in feat_cols]
    text_labels = label is not None and not pd.api.types.is_numeric_dtype(probe[label])
    classes = _csv_classes(source, label, n_rows) if text_labels else None
    itemsize = resolve_dtype(dtype, np.dtype(np.float64)).itemsize
    chunk_rows = chunk_rows or default_chunk_rows(2**31, max(1, len(feat_cols)), itemsize)
    prov = {"path": os.fspath(path), "label_column": str(label), "delimiter": source.delimiter,
            **({"dropped": [str(c) for c in dropped]} if dropped else {}), **(provenance or {})}
    return SourcePlan(blocks=lambda: _csv_blocks(source, label, feat_cols, classes, chunk_rows, n_rows),
                      feature_names=feature_names, classes=classes, provenance=prov, source="csv",
                      chunk_rows=chunk_rows)


def store_from_csv(target, path, *, label_column=-1, delimiter=None, header="infer",
                   chunk_rows=None, overwrite=False, feature_names=None, provenance=None,
                   dtype=None, storage_options=None, progress=None, drop=None, n_rows=None) -> ZarrStore:
    """Stream a CSV (or TSV) file into a new store; memory is bounded by one chunk.

    Parameters
    ----------
    target, chunk_rows, overwrite, provenance, dtype, storage_options, progress
        As for :func:`create_store`. An existing ``target`` is reported before the file
        is read.
    path : str or os.PathLike
        CSV file.
    label_column : int, str or None, default=-1
        Name or 0-based position (negative from the end) of the target column; None for
        unsupervised data. Non-numeric labels are stripped and encoded as integer codes into
        the sorted ``classes`` attribute (one extra pass over that column).
    delimiter : str, optional
        Default: detected by :class:`csv.Sniffer` on the first 20 lines among ``, ; TAB |``
        (TAB for a ``.tsv`` file it cannot decide). A file that reads as one column while its
        first line holds another of those delimiters is refused.
    header : "infer", int or None, default="infer"
        As for :func:`pandas.read_csv`.
    feature_names : sequence of str, optional
        Default: the header names (or ``x0, x1, ...`` without a header).
    drop : column name, position or a list of them, optional
        Columns left out of the store (ids, free text, ...).
    n_rows : int, optional
        Store only the first ``n_rows`` data rows.

    Returns
    -------
    ZarrStore

    Raises
    ------
    StoreExistsError
        ``target`` exists and ``overwrite`` is False.
    FileNotFoundError
        No file at ``path``.
    ValueError
        ``label_column`` or a ``drop`` entry names no column (the message lists the columns).
    DataValidationError
        A short or long row, a missing or non-numeric value: the message names the row, the
        file's line number, the column and the value; no feature column left; a wrong delimiter.
    """
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    plan = csv_plan(path, label_column=label_column, drop=drop, delimiter=delimiter, header=header,
                    chunk_rows=chunk_rows, feature_names=feature_names, dtype=dtype, n_rows=n_rows,
                    provenance=provenance)
    return write_plan(target, plan, overwrite=overwrite, storage_options=storage_options, progress=progress,
                      dtype=dtype)


def _libsvm_records(path) -> Iterator[tuple[int, str]]:
    """``(line_number, data)`` for each non-empty, non-comment line of a LIBSVM file."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            data = line.split("#", 1)[0].strip()
            if data:
                yield lineno, data


def _parse_libsvm_line(lineno: int, data: str) -> tuple[float, list[int], list[float]]:
    """Label, 1-based feature indices and values of one line (``qid:`` entries ignored)."""
    label, *pairs = data.split()
    idx, vals = [], []
    try:
        y = float(label)
        for pair in pairs:
            key, value = pair.split(":", 1)
            if key == "qid":
                continue
            idx.append(int(key))
            vals.append(float(value))
    except ValueError as exc:
        raise DataValidationError(f"cannot parse LIBSVM line {lineno}: {data[:80]!r} ({exc}).") from exc
    if idx and min(idx) < 1:
        raise DataValidationError(
            f"LIBSVM line {lineno} has feature index {min(idx)}; indices are 1-based."
        )
    return y, idx, vals


def _libsvm_scan(path, progress=None) -> tuple[int, int, bool]:
    """First pass: number of rows, largest feature index, whether all labels are integers."""
    n_rows, max_idx, integral = 0, 0, True
    bar = _Progress(progress is True, None, "scan")  # a callback sees the write pass only
    try:
        for lineno, data in _libsvm_records(path):
            y, idx, _ = _parse_libsvm_line(lineno, data)
            n_rows += 1
            max_idx = max([max_idx, *idx])
            integral = integral and float(y).is_integer()
            if n_rows % 10_000 == 0:
                bar.update(10_000)
    finally:
        bar.close()
    return n_rows, max_idx, integral


def _libsvm_blocks(path, n_features: int, chunk_rows: int, y_dtype) -> Iterator[Block]:
    """Second pass: dense ``(X, y)`` blocks of ``chunk_rows`` rows."""
    records = _libsvm_records(path)
    while True:
        batch = [_parse_libsvm_line(n, d) for n, d in _take(records, chunk_rows)]
        if not batch:
            return
        X = np.zeros((len(batch), n_features))
        for i, (_, idx, vals) in enumerate(batch):
            X[i, np.asarray(idx, dtype=np.int64) - 1] = vals
        yield X, np.array([b[0] for b in batch], dtype=y_dtype)


def _take(it: Iterator, n: int) -> list:
    return [item for _, item in zip(range(n), it, strict=False)]


def store_from_libsvm(target, path, *, n_features=None, chunk_rows=None, overwrite=False,
                      feature_names=None, provenance=None, dtype=None,
                      storage_options=None, progress=None) -> ZarrStore:
    """Stream a LIBSVM/svmlight text file into a new store (two passes over the file).

    The first pass finds the number of rows, the number of features (largest
    1-based index, unless ``n_features`` is given) and whether every label is
    an integer (then ``y`` is int64, else float64); the second writes dense
    chunks. Memory is bounded by one chunk.

    Parameters
    ----------
    target, chunk_rows, overwrite, feature_names, provenance, dtype, storage_options, progress
        As for :func:`create_store`. An existing ``target`` is reported before the file
        is read.
    path : str or os.PathLike
        LIBSVM file (``label idx:value idx:value ...``, 1-based indices).
    n_features : int, optional
        Number of columns; must be at least the largest index in the file.

    Returns
    -------
    ZarrStore
    """
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    n_rows, max_idx, integral = _libsvm_scan(path, progress)
    if n_rows == 0:
        raise DataValidationError(f"no rows to store: {os.fspath(path)!r} has no data lines.")
    if n_features is None:
        n_features = max_idx
    elif max_idx > n_features:
        raise DataValidationError(
            f"n_features={n_features} but {os.fspath(path)!r} uses feature index {max_idx}; "
            f"pass n_features >= {max_idx} or None."
        )
    if n_features < 1:
        raise DataValidationError(f"{os.fspath(path)!r} has no features (X would have 0 columns).")
    itemsize = resolve_dtype(dtype, np.dtype(np.float64)).itemsize
    chunk_rows = chunk_rows or default_chunk_rows(n_rows, n_features, itemsize)
    y_dtype = np.int64 if integral else np.float64
    prov = {"path": os.fspath(path), **(provenance or {})}
    return _write_stream(target, _libsvm_blocks(path, n_features, chunk_rows, y_dtype),
                         n_rows_hint=n_rows, overwrite=overwrite, storage_options=storage_options,
                         chunk_rows=chunk_rows, dtype=dtype, feature_names=feature_names,
                         classes=None, provenance=prov, source="libsvm", progress=progress,
                         n_rows_total=n_rows)


def open_store(target, *, storage_options=None) -> ZarrStore:
    """Open an existing store, checking its schema.

    Raises
    ------
    FileNotFoundError
        Nothing exists at ``target``.
    StoreSchemaError
        The location is not a kmp_dask store; the message names what is missing.
    """
    return ZarrStore(target, storage_options=storage_options)


def as_store(obj, *, storage_options=None) -> DataStore:
    """Return ``obj`` if it is a :class:`DataStore`, else open the path or URL it names.

    Raises
    ------
    TypeError
        ``obj`` is neither a store nor a path/URL (e.g. a NumPy array).
    """
    if isinstance(obj, (str, os.PathLike)):
        return open_store(obj, storage_options=storage_options)
    if isinstance(obj, DataStore):
        return obj
    raise TypeError(
        f"expected a DataStore, a path or a URL; got {type(obj).__name__}. "
        "Wrap in-memory arrays with InMemoryStore(X, y)."
    )

