"""The narrow data-store protocol and helpers shared by every implementation.

A store holds a feature matrix ``X`` of shape ``(n_rows, n_features)``, chunked
by rows only, and optionally targets ``y`` with the same row chunking. The
engine sees data only through :class:`DataStore` and the picklable
:class:`RowReader` it hands to workers.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DataStore",
    "RowReader",
    "StoreCorruptError",
    "chunk_bounds",
    "default_chunk_rows",
    "gather_rows",
    "row_partitions",
]

#: Target size of one storage chunk of ``X``.
TARGET_CHUNK_BYTES = 16 * 2**20
#: Smallest and largest default number of rows per chunk.
MIN_CHUNK_ROWS = 1024
MAX_CHUNK_ROWS = 2**20


class StoreCorruptError(ValueError):
    """A chunk of a store cannot be read back: its bytes do not decode to the stored array.

    The message names the store, the array, the chunk (index and row range) and its file.

    Attributes
    ----------
    url : str or None
        Location of the store.
    array : str or None
        ``"X"`` or ``"y"``.
    chunk : int or None
        Index of the chunk along rows.
    rows : tuple of int or None
        ``(start, stop)`` rows held by the chunk.
    key : str or None
        Path of the chunk inside the store (``"X/c/3/0"``).
    """

    def __init__(self, message: str, *, url: str | None = None, array: str | None = None,
                 chunk: int | None = None, rows: tuple[int, int] | None = None,
                 key: str | None = None):
        super().__init__(message)
        self.url, self.array, self.chunk, self.rows, self.key = url, array, chunk, rows, key


@runtime_checkable
class RowReader(Protocol):
    """Small picklable handle that reads rows of a store in any process."""

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Return ``(X[start:stop], y[start:stop] or None)``."""
        ...

    def read_rows(self, idx: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return the rows ``idx`` (any order, repeats allowed) of ``X`` and ``y``."""
        ...


@runtime_checkable
class DataStore(Protocol):
    """Row-chunked dataset: ``X`` of shape (n_rows, n_features) and optional ``y``.

    Implementations: :class:`~kmp_dask.store.ZarrStore` (persistent) and
    :class:`~kmp_dask.store.InMemoryStore` (NumPy, for tests and notebooks).
    """

    @property
    def url(self) -> str | None:
        """Location of the store, or None when it only lives in this process."""
        ...

    @property
    def n_rows(self) -> int:
        """Number of rows (samples)."""
        ...

    @property
    def n_features(self) -> int:
        """Number of columns of ``X``."""
        ...

    @property
    def dtype(self) -> np.dtype:
        """Floating dtype of ``X`` (float32 or float64)."""
        ...

    @property
    def row_chunks(self) -> tuple[int, ...]:
        """Sizes of the storage chunks along rows; they sum to ``n_rows``."""
        ...

    @property
    def attrs(self) -> dict[str, Any]:
        """Schema attributes (see docs/store.md), as a fresh dict."""
        ...

    @property
    def has_y(self) -> bool:
        """Whether the store holds targets ``y``."""
        ...

    @property
    def y_shape(self) -> tuple[int, ...] | None:
        """Shape of ``y`` ((n_rows,) or (n_rows, m)), or None without targets."""
        ...

    def to_dask(self, name: str = "X", chunks: int | None = None) -> Any:
        """Return ``X`` or ``y`` as a dask array chunked by whole storage chunks."""
        ...

    def read_rows(self, idx: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return the rows ``idx`` (any order, repeats allowed) of ``X`` and ``y``."""
        ...

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Return ``(X[start:stop], y[start:stop] or None)``."""
        ...

    def reader(self) -> RowReader:
        """Return a picklable :class:`RowReader` for worker processes."""
        ...

    def append(self, X: Any, y: Any = None) -> None:
        """Append rows, updating ``n_rows`` and the ``mean``/``std`` attributes."""
        ...


def default_chunk_rows(n_rows: int, n_features: int, itemsize: int) -> int:
    """Rows per chunk so that one chunk of ``X`` holds about 16 MiB.

    Parameters
    ----------
    n_rows : int
        Number of rows of the dataset (the result never exceeds it).
    n_features : int
        Number of columns of ``X``.
    itemsize : int
        Bytes per element of ``X``.

    Returns
    -------
    int
        ``TARGET_CHUNK_BYTES // (n_features * itemsize)`` clamped to
        ``[1024, 2**20]`` and then to ``[1, n_rows]``.
    """
    rows = TARGET_CHUNK_BYTES // max(1, n_features * itemsize)
    rows = min(max(rows, MIN_CHUNK_ROWS), MAX_CHUNK_ROWS)
    return max(1, min(rows, n_rows))


def regular_chunks(n_rows: int, chunk_rows: int) -> tuple[int, ...]:
    """Chunk sizes of ``n_rows`` rows cut every ``chunk_rows`` rows (last one ragged)."""
    full, rest = divmod(n_rows, chunk_rows)
    return (chunk_rows,) * full + ((rest,) if rest else ())


def dask_row_chunk(chunks: int | None, chunk_rows: int) -> int:
    """Validate the requested dask row-chunk size against the storage chunk size."""
    if chunks is None:
        return chunk_rows
    if int(chunks) < 1 or int(chunks) % chunk_rows:
        raise ValueError(
            f"chunks must be a positive whole multiple of the storage chunk ({chunk_rows} rows); "
            f"got {chunks}."
        )
    return int(chunks)


def chunk_bounds(row_chunks: Sequence[int]) -> np.ndarray:
    """Row offsets ``[0, c0, c0 + c1, ..., n_rows]`` of consecutive chunks."""
    return np.concatenate([[0], np.cumsum(np.asarray(row_chunks, dtype=np.int64))])


def check_row_indices(idx: Sequence[int] | np.ndarray, n_rows: int) -> np.ndarray:
    """Return ``idx`` as a 1-D int64 array, refusing out-of-range or non-integer values."""
    arr = np.asarray(idx)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(
            f"idx must be a 1-D sequence of integer row indices; got dtype {arr.dtype} "
            f"and shape {arr.shape}."
        )
    arr = arr.astype(np.int64, copy=False)
    if arr.min() < 0 or arr.max() >= n_rows:
        raise IndexError(
            f"row indices must lie in [0, {n_rows}); got min {arr.min()} and max {arr.max()}."
        )
    return arr


def check_range(start: int, stop: int, n_rows: int) -> tuple[int, int]:
    """Validate ``0 <= start <= stop <= n_rows`` and return the pair as ints."""
    start, stop = int(start), int(stop)
    if not 0 <= start <= stop <= n_rows:
        raise IndexError(
            f"row range [{start}, {stop}) is outside [0, {n_rows}]; "
            "pass 0 <= start <= stop <= n_rows."
        )
    return start, stop


ReadRange = Callable[[int, int], tuple[np.ndarray, "np.ndarray | None"]]


def gather_rows(
    read_range: ReadRange, idx: Sequence[int] | np.ndarray, row_chunks: Sequence[int]
) -> tuple[np.ndarray, np.ndarray | None]:
    """Read arbitrary rows by touching each storage chunk at most once.

    The unique indices are grouped by chunk; per chunk one contiguous range
    (from its smallest to its largest requested row) is read, and the rows are
    then scattered back into the requested order (repeats included).

    Parameters
    ----------
    read_range : callable
        ``read_range(start, stop) -> (X_rows, y_rows or None)``.
    idx : sequence of int
        Global row indices, in any order, possibly repeated.
    row_chunks : sequence of int
        Storage chunk sizes along rows.

    Returns
    -------
    X_rows : ndarray of shape (len(idx), n_features)
    y_rows : ndarray of shape (len(idx), ...) or None
    """
    bounds = chunk_bounds(row_chunks)
    idx = check_row_indices(idx, int(bounds[-1]))
    uniq, inverse = np.unique(idx, return_inverse=True)
    chunk_of = np.searchsorted(bounds, uniq, side="right") - 1
    x_parts, y_parts = [], []
    for c in np.unique(chunk_of):
        rows = uniq[chunk_of == c]
        X_blk, y_blk = read_range(int(rows[0]), int(rows[-1]) + 1)
        local = rows - rows[0]
        x_parts.append(X_blk[local])
        y_parts.append(None if y_blk is None else y_blk[local])
    return _assemble(x_parts, y_parts, inverse, read_range)


def _assemble(x_parts, y_parts, inverse, read_range):
    """Concatenate per-chunk rows and reorder them to the requested order."""
    if not x_parts:
        X0, y0 = read_range(0, 0)
        return X0, y0
    X = np.concatenate(x_parts)[inverse]
    y = None if y_parts[0] is None else np.concatenate(y_parts)[inverse]
    return X, y


def row_partitions(row_chunks: Sequence[int], n_partitions: int) -> list[tuple[int, int]]:
    """Group consecutive chunks into contiguous, chunk-aligned runs of similar size.

    Parameters
    ----------
    row_chunks : sequence of int
        Storage chunk sizes along rows.
    n_partitions : int
        Wanted number of partitions (at least 1). It is reduced to the number
        of chunks when there are fewer chunks than partitions.

    Returns
    -------
    list of (start, stop)
        Row ranges covering ``[0, n_rows)`` in order; every boundary is a
        chunk boundary and every range is non-empty.

    Examples
    --------
    >>> row_partitions([10, 10, 10, 10, 5], 2)
    [(0, 20), (20, 45)]
    """
    if int(n_partitions) < 1:
        raise ValueError(f"n_partitions must be >= 1; got {n_partitions}.")
    bounds = chunk_bounds(row_chunks)
    n_chunks = len(row_chunks)
    if n_chunks == 0:
        return []
    p = min(int(n_partitions), n_chunks)
    cuts = [0]
    for k in range(1, p):
        lo, hi = cuts[-1] + 1, n_chunks - (p - k)
        candidates = np.arange(lo, hi + 1)
        target = bounds[-1] * k / p
        cuts.append(int(candidates[np.argmin(np.abs(bounds[candidates] - target))]))
    cuts.append(n_chunks)
    return [(int(bounds[a]), int(bounds[b])) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
