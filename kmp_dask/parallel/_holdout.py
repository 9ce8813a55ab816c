"""A hash split of a store's rows: :class:`SplitStore`, the rows a fit trains on when it holds some
out (``CVMClassifier(probability=True)``: the held-out rows calibrate its probabilities).

A row belongs to the held-out side when ``split_mask(global row, fraction, seed)`` is True (the
same hash KMP's validation split uses: a pure function of the row's index and the seed, the same
whatever the chunking). :class:`SplitStore` shows the other rows only, as a read-only store: its
rows are the base store's in order with the held-out ones left out, chunked as the base store
(each base chunk's kept rows form one chunk; a chunk that keeps none is dropped). Every read —
``read_range``, ``read_rows``, ``to_dask`` and the picklable :class:`SplitReader` the engine's
partitions load through — reads whole base chunks and drops the held-out rows, so workers apply
the split themselves and a rebuilt partition reads the same rows. The driver keeps one count per
chunk, never a per-row index. :func:`held_out_rows` reads the held-out side (up to a cap) in this
process, chunk by chunk.

Its attributes are the base store's with ``n_rows`` the kept count (``mean`` / ``std`` stay those
of all rows: they describe the features' scales, not the labels).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..blockops._partition import split_mask

__all__ = ["SplitReader", "SplitStore", "held_out_rows"]


def _bounds(row_chunks) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(row_chunks, dtype=np.int64))])


class SplitReader:
    """Picklable reader of a :class:`SplitStore`: ``starts`` / ``stops`` the base rows of each of its
    chunks, ``offsets`` where each chunk starts among the kept rows."""

    def __init__(self, base, fraction: float, seed: int, starts, stops, offsets):
        self.base, self.fraction, self.seed = base, float(fraction), int(seed)
        self.starts, self.stops, self.offsets = starts, stops, offsets

    def _kept(self, j: int) -> np.ndarray:
        """Base row indices kept in chunk ``j``."""
        idx = np.arange(self.starts[j], self.stops[j], dtype=np.int64)
        return idx[~split_mask(idx, self.fraction, self.seed)]

    def base_index(self, idx) -> np.ndarray:
        """The base store's row index of each kept row ``idx``."""
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        chunk = np.searchsorted(self.offsets, idx, side="right") - 1
        out = np.empty(len(idx), dtype=np.int64)
        for j in np.unique(chunk):
            sel = chunk == j
            out[sel] = self._kept(int(j))[idx[sel] - self.offsets[j]]
        return out

    def read_range(self, start: int, stop: int):
        first = int(np.searchsorted(self.offsets, start, side="right") - 1)
        Xs, ys = [], []
        j = first
        while j < len(self.starts) and self.offsets[j] < stop:
            X, y = self.base.read_range(int(self.starts[j]), int(self.stops[j]))
            keep = ~split_mask(np.arange(self.starts[j], self.stops[j], dtype=np.int64), self.fraction, self.seed)
            lo, hi = max(start - self.offsets[j], 0), min(stop, self.offsets[j + 1]) - self.offsets[j]
            Xs.append(np.asarray(X)[keep][lo:hi])
            ys.append(None if y is None else np.asarray(y)[keep][lo:hi])
            j += 1
        X = np.concatenate(Xs) if Xs else self.base.read_range(0, 0)[0]
        return X, (None if not ys or ys[0] is None else np.concatenate(ys))

    def read_rows(self, idx):
        return self.base.read_rows(self.base_index(idx))


class SplitStore:
    """The rows of ``base`` that the hash split ``(fraction, seed)`` does not hold out (read-only)."""

    def __init__(self, base, fraction: float, seed: int):
        if not 0 < float(fraction) < 1:
            raise ValueError(f"fraction must be in (0, 1) (the share of rows held out); got {fraction!r}")
        self.base, self.fraction, self.seed = base, float(fraction), int(seed)
        bounds = _bounds(base.row_chunks)
        counts = np.array([int(np.count_nonzero(~split_mask(np.arange(a, b, dtype=np.int64), self.fraction,
                                                                    self.seed)))
                           for a, b in zip(bounds[:-1], bounds[1:], strict=True)], dtype=np.int64)
        used = counts > 0
        self._starts, self._stops = bounds[:-1][used], bounds[1:][used]
        self._counts = counts[used]
        self._offsets = _bounds(self._counts)
        if self.n_rows == 0:
            raise ValueError(f"holding out {self.fraction:.0%} of {base.n_rows} rows leaves none to train on; "
                             "pass more rows")

    def __repr__(self) -> str:
        return f"SplitStore({self.base!r}, fraction={self.fraction}, seed={self.seed})"

    url = property(lambda self: self.base.url)
    n_features = property(lambda self: self.base.n_features)
    dtype = property(lambda self: self.base.dtype)
    has_y = property(lambda self: self.base.has_y)
    n_rows = property(lambda self: int(self._offsets[-1]))
    row_chunks = property(lambda self: tuple(int(c) for c in self._counts))

    @property
    def y_shape(self):
        shape = self.base.y_shape
        return None if shape is None else (self.n_rows, *shape[1:])

    @property
    def attrs(self) -> dict[str, Any]:
        attrs = dict(self.base.attrs)
        attrs["n_rows"] = self.n_rows
        return attrs

    def to_dask(self, name: str = "X", chunks: int | None = None):
        import dask
        import dask.array as da

        reader = self.reader()
        pick = 0 if name == "X" else 1
        tail = (self.n_features,) if name == "X" else tuple(self.y_shape[1:])
        dtype = self.dtype if name == "X" else self.base.to_dask(name).dtype
        blocks = [da.from_delayed(dask.delayed(_read_part)(reader, int(a), int(b), pick), shape=(int(b - a), *tail),
                                  dtype=dtype)
                  for a, b in zip(self._offsets[:-1], self._offsets[1:], strict=True)]
        return da.concatenate(blocks, axis=0)

    def read_range(self, start: int, stop: int):
        return self.reader().read_range(start, stop)

    def read_rows(self, idx: Sequence[int] | np.ndarray):
        return self.reader().read_rows(idx)

    def base_index(self, idx) -> np.ndarray:
        """The base store's row index of each of this view's rows ``idx``."""
        return self.reader().base_index(idx)

    def reader(self) -> SplitReader:
        return SplitReader(self.base.reader(), self.fraction, self.seed, self._starts, self._stops, self._offsets)

    def append(self, X, y=None) -> None:
        raise TypeError("a SplitStore is a read-only view of a store's training rows; append to the base store")


def _read_part(reader, start: int, stop: int, pick: int):
    """``X`` (pick 0) or ``y`` (pick 1) of rows ``start:stop`` (a module-level function: dask pickles it)."""
    return reader.read_range(start, stop)[pick]


def held_out_rows(store, fraction: float, seed: int):
    """``(X, y)`` of the rows of ``store`` with ``split_mask(row, fraction, seed)`` True, read here
    chunk by chunk (one chunk and the held-out rows in memory at a time)."""
    bounds = _bounds(store.row_chunks)
    Xs, ys = [], []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        held = split_mask(np.arange(a, b, dtype=np.int64), float(fraction), int(seed))
        if held.any():
            X, y = store.read_range(int(a), int(b))
            Xs.append(np.asarray(X)[held])
            ys.append(None if y is None else np.asarray(y)[held])
    if not Xs:
        return np.empty((0, store.n_features)), None
    return np.concatenate(Xs), (None if ys[0] is None else np.concatenate(ys))
