"""A per-feature affine view of a store: ``(X − offset) / scale``, applied as rows are read.

:class:`AffineStore` wraps any store; every read of ``X`` — ``read_range``, ``read_rows``,
``to_dask`` and the picklable :class:`AffineReader` it hands to the engine's partitions — returns
the transformed rows, so a fit sees standardised data without a second copy of it and without an
extra pass, workers apply the transform themselves, and a partition rebuilt after a lost worker
reads the same rows (the reader, with its two small vectors, is part of the partition spec).
Its ``mean`` / ``std`` attributes are the base store's, transformed (no pass). ``y`` is unchanged.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["AffineReader", "AffineStore", "affine_rows"]


def affine_rows(X: np.ndarray, offset: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(X − offset) / scale`` in float64, returned in ``X``'s floating dtype (float64 otherwise)."""
    X = np.asarray(X)
    out = (X.astype(np.float64, copy=False) - offset) / scale
    return out.astype(X.dtype, copy=False) if X.dtype.kind == "f" else out


class AffineReader:
    """Picklable reader: the base reader's rows, transformed (what a partition loads)."""

    def __init__(self, base, offset: np.ndarray, scale: np.ndarray):
        self.base, self.offset, self.scale = base, offset, scale

    def read_range(self, start: int, stop: int):
        X, y = self.base.read_range(start, stop)
        return affine_rows(X, self.offset, self.scale), y

    def read_rows(self, idx):
        X, y = self.base.read_rows(idx)
        return affine_rows(X, self.offset, self.scale), y


class AffineStore:
    """``base`` seen through ``x ↦ (x − offset) / scale`` (read-only).

    ``moments``: optional per-feature ``(mean, std)`` of the base rows to report (transformed) in
    :attr:`attrs` instead of the base store's own (e.g. weighted moments of a weighted fit).
    """

    def __init__(self, base, offset, scale, *, moments=None):
        offset = np.asarray(offset, dtype=np.float64).reshape(-1)
        scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        if offset.shape != (base.n_features,) or scale.shape != (base.n_features,) or not np.all(scale > 0):
            raise ValueError(f"offset and scale must be {base.n_features} numbers each (one per feature), scale > 0; "
                             f"got shapes {offset.shape} and {scale.shape}")
        self.base, self.offset, self.scale, self.moments = base, offset, scale, moments

    def __repr__(self) -> str:
        return f"AffineStore({self.base!r})"

    url = property(lambda self: self.base.url)
    n_rows = property(lambda self: self.base.n_rows)
    n_features = property(lambda self: self.base.n_features)
    dtype = property(lambda self: self.base.dtype)
    row_chunks = property(lambda self: self.base.row_chunks)
    has_y = property(lambda self: self.base.has_y)
    y_shape = property(lambda self: self.base.y_shape)

    @property
    def attrs(self) -> dict[str, Any]:
        """The base store's attributes, with ``mean`` and ``std`` those of the transformed rows."""
        attrs = dict(self.base.attrs)
        mean, std = self.moments if self.moments is not None else (attrs.get("mean"), attrs.get("std"))
        if mean is not None and std is not None and len(mean) == self.n_features:
            attrs["mean"] = ((np.asarray(mean, dtype=np.float64) - self.offset) / self.scale).tolist()
            attrs["std"] = (np.asarray(std, dtype=np.float64) / self.scale).tolist()
        return attrs

    def to_dask(self, name: str = "X", chunks: int | None = None):
        arr = self.base.to_dask(name, chunks)
        if name != "X":
            return arr
        return arr.map_blocks(affine_rows, self.offset, self.scale, dtype=arr.dtype if arr.dtype.kind == "f"
                              else np.float64)

    def read_range(self, start: int, stop: int):
        return self.reader().read_range(start, stop)

    def read_rows(self, idx: Sequence[int] | np.ndarray):
        return self.reader().read_rows(idx)

    def reader(self) -> AffineReader:
        return AffineReader(self.base.reader(), self.offset, self.scale)

    def append(self, X, y=None) -> None:
        raise TypeError("an AffineStore is a read-only view of a store; append to the base store instead")
