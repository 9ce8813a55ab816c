"""InMemoryStore: the DataStore protocol over NumPy arrays (tests, notebooks)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._base import (
    check_range,
    dask_row_chunk,
    default_chunk_rows,
    gather_rows,
    regular_chunks,
)
from ._schema import (
    RunningStats,
    check_feature_names,
    json_safe_classes,
    make_attrs,
    make_provenance,
)
from ._validation import (
    ContentCheck,
    as_numpy_X,
    as_numpy_y,
    check_append_shapes,
    first_nonfinite,
    raise_nonfinite,
    resolve_dtype,
)

__all__ = ["InMemoryStore", "MemoryRowReader"]


@dataclass(frozen=True)
class MemoryRowReader:
    """Picklable reader over NumPy arrays (the arrays travel with it)."""

    X: np.ndarray
    y: np.ndarray | None
    row_chunks: tuple[int, ...]

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Return copies of ``X[start:stop]`` and ``y[start:stop]`` (or None)."""
        start, stop = check_range(start, stop, self.X.shape[0])
        y = None if self.y is None else self.y[start:stop].copy()
        return self.X[start:stop].copy(), y

    def read_rows(self, idx: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return the rows ``idx`` (any order, repeats allowed)."""
        return gather_rows(self.read_range, idx, self.row_chunks)


class InMemoryStore:
    """A :class:`~kmp_dask.store.DataStore` holding NumPy arrays in this process.

    Parameters
    ----------
    X : array-like of shape (n_rows, n_features)
        Numeric features; stored as float32 if given as float32, else float64
        (or as ``dtype``).
    y : array-like of shape (n_rows,) or (n_rows, m), optional
        Numeric targets.
    chunk_rows : int, optional
        Rows per (virtual) chunk; default as for zarr stores (about 16 MiB).
    feature_names, classes, provenance, dtype
        As for :func:`~kmp_dask.store.create_store`.

    Examples
    --------
    >>> import numpy as np
    >>> s = InMemoryStore(np.ones((5, 2)), chunk_rows=2)
    >>> s.row_chunks
    (2, 2, 1)
    """

    def __init__(self, X, y=None, *, chunk_rows=None, feature_names=None, classes=None,
                 provenance=None, dtype=None):
        X = as_numpy_X(X)
        y = as_numpy_y(y, X.shape[0])
        self._dtype = resolve_dtype(dtype, X.dtype)
        self._X = np.ascontiguousarray(X, dtype=self._dtype)
        self._y = None if y is None else np.ascontiguousarray(y)
        self._check_finite(self._X, self._y, 0)
        self._chunk_rows = int(chunk_rows or default_chunk_rows(*self._X.shape, self._dtype.itemsize))
        if self._chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1; got {chunk_rows}.")
        self._stats = RunningStats.of_block(self._X)
        self._attrs = make_attrs(
            n_rows=self._X.shape[0],
            feature_names=check_feature_names(feature_names, self._X.shape[1]),
            classes=json_safe_classes(classes),
            stats=self._stats,
            provenance=make_provenance(provenance, source="numpy (in memory)"),
        )
        self._check_codes(self._y, 0)

    def _check_codes(self, y: np.ndarray | None, offset: int) -> None:
        """Label codes within ``classes`` (checked once, here: the rows never change)."""
        if y is not None and self._attrs["classes"] is not None:
            chunks = regular_chunks(offset + len(y), self._chunk_rows)
            ContentCheck(None, chunks, self._attrs["classes"]).y(y, offset)

    @staticmethod
    def _check_finite(X: np.ndarray, y: np.ndarray | None, offset: int) -> None:
        found = first_nonfinite("X", X, offset) or first_nonfinite("y", y, offset)
        if found:
            raise_nonfinite(found)

    def __repr__(self) -> str:
        return f"InMemoryStore(n_rows={self.n_rows}, n_features={self.n_features}, dtype={self.dtype})"

    @property
    def url(self) -> None:
        """Always None: the data lives only in this process."""
        return None

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self._X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns of ``X``."""
        return int(self._X.shape[1])

    @property
    def dtype(self) -> np.dtype:
        """dtype of ``X``."""
        return self._dtype

    @property
    def chunk_rows(self) -> int:
        """Rows per chunk (the last chunk may be shorter)."""
        return self._chunk_rows

    @property
    def row_chunks(self) -> tuple[int, ...]:
        """Chunk sizes along rows."""
        return regular_chunks(self.n_rows, self._chunk_rows)

    @property
    def attrs(self) -> dict[str, Any]:
        """A copy of the schema attributes."""
        return dict(self._attrs)

    @property
    def has_y(self) -> bool:
        """Whether targets are present."""
        return self._y is not None

    @property
    def y_shape(self) -> tuple[int, ...] | None:
        """Shape of ``y`` or None."""
        return None if self._y is None else tuple(self._y.shape)

    def to_dask(self, name: str = "X", chunks: int | None = None):
        """``X`` or ``y`` as a dask array with row chunks of ``chunks`` rows.

        ``chunks`` must be a whole multiple of :attr:`chunk_rows` (default: equal).
        """
        import dask.array as da

        arr = _named_array(self, name)
        rows = dask_row_chunk(chunks, self._chunk_rows)
        return da.from_array(arr, chunks=(rows,) + arr.shape[1:], name=False)

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Return copies of ``X[start:stop]`` and ``y[start:stop]`` (or None)."""
        return self.reader().read_range(start, stop)

    def read_rows(self, idx: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return the rows ``idx`` (any order, repeats allowed)."""
        return self.reader().read_rows(idx)

    def reader(self) -> MemoryRowReader:
        """A picklable reader holding the arrays themselves."""
        return MemoryRowReader(self._X, self._y, self.row_chunks)

    def append(self, X, y=None) -> None:
        """Append rows and update ``n_rows``, ``mean`` and ``std``."""
        X = as_numpy_X(X)
        y = as_numpy_y(y, X.shape[0])
        y_trailing = () if self._y is None else self._y.shape[1:]
        check_append_shapes(self.n_features, self.has_y, y_trailing, X, y)
        self._check_finite(X, y, self.n_rows)
        self._check_codes(y, self.n_rows)
        X = X.astype(self._dtype, copy=False)
        self._stats = self._stats.merge(RunningStats.of_block(X))
        self._X = np.concatenate([self._X, X])
        if y is not None:
            self._y = np.concatenate([self._y, y.astype(self._y.dtype, copy=False)])
        self._attrs.update(n_rows=self.n_rows, mean=[float(v) for v in self._stats.mean],
                           std=[float(v) for v in self._stats.std])


def _named_array(store: InMemoryStore, name: str) -> np.ndarray:
    """The array called ``name`` ('X' or 'y')."""
    if name == "X":
        return store._X
    if name == "y" and store._y is not None:
        return store._y
    raise KeyError(f"store has no array {name!r}; available: {['X'] + (['y'] if store.has_y else [])}.")

