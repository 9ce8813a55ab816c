"""The state one row partition keeps on the worker that holds it.

A :class:`Partition` is plain NumPy: the rows ``X`` (and labels ``y``) of one contiguous,
chunk-aligned run of the data set, plus a dictionary ``state`` in which each algorithm keeps
what it caches between passes (residuals, basis columns, masks). Operations on partitions are
module-level functions ``op(partition, msg) -> result`` (see :mod:`kmp_dask.blockops._kmp`), so
the same code runs in-process (the test oracle, numpy input) and inside a dask worker.

Design rule (docs/engine.md, failure model): everything in ``state`` must be rebuildable from the data and a
message the driver can produce from its own small state, so a partition lost with its worker is
rebuilt instead of replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Partition", "PartitionSpec", "split_mask", "fetch_rows", "zero_weight_rows", "partition_bounds",
           "PARTITION_BYTES", "MIN_PARTITIONS", "MIN_PARTITION_ROWS"]

PARTITION_BYTES = 4 << 20
"""Target bytes of X per partition, the same on every cluster: small enough that three streamed
partitions and a pass's temporaries fit the budget of a 300 MB worker (docs/engine.md, "Out of
core") and to spread a small store over every worker, large enough that a pass's per-partition
overhead stays small (``benchmarks/small_workers.py`` measures 16, 4 and 2 MiB)."""

MIN_PARTITIONS = 8
"""Stores of at least ``MIN_PARTITIONS × MIN_PARTITION_ROWS`` rows get at least this many
partitions, so up to 8 workers have work whatever the storage chunking."""

MIN_PARTITION_ROWS = 2048


def partition_bounds(row_chunks, row_bytes: int, *, target_bytes: int | None = None,
                     min_partitions: int = MIN_PARTITIONS, min_rows: int = MIN_PARTITION_ROWS) -> list:
    """Row ranges ``[(start, stop), ...]`` of the partitions: the unit of every reduction.

    A pure function of the data (the storage chunking and the bytes per row) — never of the
    number of workers or of their memory — so a fit sums the same per-partition results in the
    same order, bit for bit, on any cluster. Each storage chunk is split into near-equal row
    blocks of at most ``max(min_rows, min(target_bytes / row_bytes, N / min_partitions))`` rows
    (a partition never straddles two chunks, so loading it decompresses one chunk at most).
    ``target_bytes`` defaults to :data:`PARTITION_BYTES` (read when called).
    """
    target_bytes = PARTITION_BYTES if target_bytes is None else target_bytes
    chunks = [int(c) for c in row_chunks]
    n = sum(chunks)
    rows = min(max(1, target_bytes // max(1, int(row_bytes))), -(-n // max(1, min_partitions)))
    rows = max(int(min_rows), int(rows))
    out, start = [], 0
    for c in chunks:
        k = max(1, -(-c // rows))
        edges = [start + (c * i) // k for i in range(k + 1)]
        out.extend(zip(edges[:-1], edges[1:], strict=True))
        start += c
    return [(a, b) for a, b in out if b > a]


@dataclass
class PartitionSpec:
    """Where a partition's rows come from: a picklable reader and a global row range."""

    index: int
    start: int
    stop: int
    reader: object  # has .read_range(start, stop) -> (X, y)
    row_bytes: int = 0  #: bytes per row of X and y (sizing before the rows are read)
    w: np.ndarray | None = None  #: the rows' sample weights (float64, stop − start), or None: all 1

    @property
    def nbytes(self) -> int:
        return (self.stop - self.start) * self.row_bytes

    def load(self) -> Partition:
        X, y = self.reader.read_range(self.start, self.stop)
        return Partition(self.index, self.start, self.stop, np.asarray(X), None if y is None else np.asarray(y),
                         w=self.w)


@dataclass
class Partition:
    """Rows ``[start, stop)`` of the data set and the algorithm state kept with them."""

    index: int
    start: int
    stop: int
    X: np.ndarray
    y: np.ndarray | None
    state: dict = field(default_factory=dict)
    w: np.ndarray | None = None  #: sample weights of the rows (None: every row weighs 1)
    paged: dict = field(default_factory=dict, repr=False)  #: a pager's file name -> array it loaded

    @property
    def n_rows(self) -> int:
        return self.stop - self.start


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A vectorised 64-bit mixing function (splitmix64 finaliser) on uint64 arrays."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def split_mask(global_index: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Return True for the rows that belong to the validation split.

    Membership is a pure function of (global row index, seed), so the driver and every
    partition agree without the driver ever holding an O(N) index array, and the split is the
    same whatever the chunking.
    """
    idx = np.asarray(global_index, dtype=np.uint64)
    if fraction <= 0:
        return np.zeros(idx.shape, dtype=bool)
    h = _splitmix64(idx ^ _splitmix64(np.full(idx.shape, seed, dtype=np.uint64)))
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return u < fraction


def fetch_rows(part: Partition, global_idx) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``part.X`` whose global indices are in ``global_idx`` (those this partition owns)."""
    if global_idx is None:
        return np.empty(0, dtype=np.int64), part.X[:0]
    g = np.asarray(global_idx, dtype=np.int64)
    own = g[(g >= part.start) & (g < part.stop)]
    return own, part.X[own - part.start]


def zero_weight_rows(part: Partition, global_idx) -> np.ndarray:
    """Global indices among ``global_idx`` (this partition's) whose sample weight is 0."""
    if global_idx is None or part.w is None:
        return np.empty(0, dtype=np.int64)
    g = np.asarray(global_idx, dtype=np.int64)
    own = g[(g >= part.start) & (g < part.stop)]
    return own[part.w[own - part.start] == 0]
