"""Out of core: a memory budget per worker and partitions paged to worker-local scratch.

A :class:`~kmp_dask.parallel.PartitionHolder` keeps *resident* the partitions that fit in its
budget — rows and algorithm state exactly as before — and *streams* the others: on every pass a
streamed partition is paged in (its rows re-read, its state read from scratch), gets the pass's
effects and query, and, if an effect changed it, is written back; the next streamed partition is
read on a background thread meanwhile, so reads overlap the kernel work.

What is written: the partition's ``state`` pickled with every large numpy array stored as a raw
file beside it (``pickle`` persistent ids), so any family's state pages without code of its own;
arrays that are the partition's own rows (``part.X``, ``part.y``) are not written but re-read,
and read-only arrays that carry a stable key (:class:`~kmp_dask.blockops._state.Paged`: views,
targets, full blocks of basis columns — state that never changes after init) are written once,
under file names made from their keys. Arrays without a key are written on every page-out:
positional names are not identities (a pending column that appears shifts the names after it;
reusing files by position once swapped two basis blocks — tests/parallel/test_out_of_core.py).
So a pass that changed the state writes the residual and the newest block of columns, not the
whole partition.
Files are read with ``readinto`` into freshly allocated arrays, never ``np.memmap``: mapped pages
count in the process RSS that dask's nanny watches, while explicit reads
leave RSS at what the arrays themselves take.

Rows of a streamed partition are read from a decompressed local copy written on its first page
out (``local_x=True``, default) or from the store each time; ``benchmarks/out_of_core.py``
measures both. Budget arithmetic (:func:`worker_budget`) and its defaults are in docs/engine.md
("Out of core").
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import tempfile

import numpy as np

from ..blockops import Partition, Workspace
from ..blockops._safe_pickle import RestrictedUnpickler
from ..blockops._state import Paged

__all__ = ["Pager", "worker_budget", "MemoryBudgetError", "MEMORY_FRACTION", "TRANSIENT_BYTES", "transient_bytes"]

MEMORY_FRACTION = 0.5
"""Share of a worker's ``memory_limit`` kmp_dask plans to use (process RSS included). dask
warns about unmanaged memory above 0.7 ("spill"), pauses a worker at 0.8 and restarts it at
0.95. Measured (3·10⁶ × 54 float32 on 2 × 1.5 GB workers): planning 0.6 gave a
peak RSS of 70% of the limit (allocator slack, result buffers) and one "unmanaged memory"
warning; 0.5 leaves that margin."""

TRANSIENT_BYTES = 48 << 20
"""At most this is reserved for a pass's transient arrays (kernel block buffer of at most
``BLOCK_ELEMENTS``, float64 casts, Bᵀd scratch) on top of the streamed partitions in flight;
:func:`transient_bytes` scales it down for small partitions."""

TRANSIENT_FACTOR = 4
"""A pass's temporaries per byte of the largest partition: a float64 cast of float32 rows (2×)
and a kernel block of ``rows × candidates`` float64 (2.2× for 54 float32 features and 59
candidates), capped by :data:`TRANSIENT_BYTES`."""

TRANSIENT_MIN_BYTES = 8 << 20


def transient_bytes(largest_partition_bytes: int) -> int:
    """Bytes reserved for a pass's temporaries on a worker whose largest partition holds
    ``largest_partition_bytes`` of rows: ``TRANSIENT_FACTOR ×`` that, between 8 MiB and
    :data:`TRANSIENT_BYTES` (the kernel block never exceeds ``BLOCK_ELEMENTS`` values)."""
    return int(min(TRANSIENT_BYTES, max(TRANSIENT_MIN_BYTES, TRANSIENT_FACTOR * int(largest_partition_bytes))))

_MIN_ARRAY_BYTES = 1 << 16  # smaller arrays stay inside the pickle


class MemoryBudgetError(MemoryError):
    """No budget can work: a worker's memory limit is too small for even one streamed partition."""


def worker_budget(fraction: float = MEMORY_FRACTION):
    """``(limit, baseline_rss, usable_bytes, local_directory)`` of the worker this runs on.

    ``usable = fraction · memory_limit − RSS now`` (the interpreter, imports and dask itself);
    ``None`` when the worker has no memory limit or this is not a dask worker.
    """
    try:
        from distributed import get_worker

        w = get_worker()
    except (ImportError, ValueError):
        return None, None, None, tempfile.gettempdir()
    limit = getattr(getattr(w, "memory_manager", None), "memory_limit", None)
    import psutil

    rss = psutil.Process(os.getpid()).memory_info().rss
    if not limit:
        return None, rss, None, w.local_directory
    return int(limit), int(rss), int(fraction * limit) - int(rss), w.local_directory


def _state_nbytes(part: Partition) -> int:
    return sum(getattr(v, "nbytes", 0) for v in part.state.values())


def partition_nbytes(part: Partition) -> int:
    """Bytes a partition holds (rows + state, reserved cache capacity included)."""
    rows = part.X.nbytes + (0 if part.y is None else part.y.nbytes) + (0 if part.w is None else part.w.nbytes)
    return rows + _state_nbytes(part)


def streamed_nbytes(part: Partition) -> int:
    """:func:`partition_nbytes` of a partition once it streams: its own scratch buffers
    (:class:`~kmp_dask.blockops.Workspace`: a resident partition's kernel blocks) are not paged —
    a paged-in partition borrows the process's shared scratch — so they are no part of what a
    streamed partition brings into memory. Counting them made a partition evicted after a
    scoring pass look ``rows × candidates × 8`` bytes larger than it is (2.3× at 5,000 rows and
    40 candidates) and refused a budget that fits."""
    scratch = sum(v.nbytes for st in part.state.values() for v in getattr(st, "__dict__", {}).values()
                  if isinstance(v, Workspace))
    return partition_nbytes(part) - scratch


def _write_array(path: str, arr: np.ndarray) -> str:
    if arr.flags.c_contiguous:
        order, data = "C", arr
    elif arr.flags.f_contiguous:
        order, data = "F", arr.T
    else:
        order, data = "C", np.ascontiguousarray(arr)
    view = memoryview(data).cast("B")
    try:  # overwrite in place when the size is unchanged: truncating frees and re-faults the pages
        same = os.path.getsize(path) == len(view)
    except OSError:
        same = False
    with open(path, "r+b" if same else "wb", buffering=0) as f:
        f.write(view)
    return order


def _read_array(path: str, dtype: str, shape: tuple, order: str, pool=None) -> np.ndarray:
    arr = pool.take(dtype, shape, order) if pool is not None else None
    if arr is None:
        arr = np.empty(shape, dtype=np.dtype(dtype), order=order)
    buf = memoryview(arr.T if order == "F" else arr).cast("B")
    with open(path, "rb", buffering=0) as f:
        got = 0
        while got < len(buf):
            k = f.readinto(buf[got:])
            if not k:
                raise OSError(f"spilled array {path} is truncated ({got} of {len(buf)} bytes)")
            got += k
    return arr


class _Pickler(pickle.Pickler):
    """Pickles a partition's state with large arrays as raw files; a read-only array already
    written under the same key (same dtype, shape, order) is not written again."""

    def __init__(self, file, part, directory, previous, unchanged=None):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.part, self.directory, self.previous = part, directory, previous
        self.unchanged = unchanged or {}  #: file name -> the array loaded from it, not modified since
        self.k, self.seen, self.written, self.keys, self.objects = 0, {}, 0, {}, []

    def persistent_id(self, obj):
        key = None
        if isinstance(obj, Paged):  # a stable key: a read-only array is written once
            key, obj = obj.key, obj.array
        if not isinstance(obj, np.ndarray) or obj.nbytes < _MIN_ARRAY_BYTES:
            return None if key is None else self._inline(obj)
        if obj is self.part.X:
            return ("X",)
        if self.part.y is not None and obj is self.part.y:
            return ("y",)
        if id(obj) in self.seen:
            return self.seen[id(obj)]
        self.objects.append(obj)
        if key is None:
            name = f"a{self.k}.bin"
            self.k += 1
        else:
            name = "k" + "".join(c if c.isalnum() or c in "._-" else "_" for c in key) + ".bin"
        meta = (obj.dtype.str, obj.shape, not obj.flags.writeable)
        prev = self.previous.get(name)
        if key is not None and prev is not None and prev[:3] == meta and (meta[2] or self.unchanged.get(name) is obj):
            order = prev[3]  # immutable (or loaded from there and not modified since): already on disk
        else:  # in place: scratch is not crash-safe storage (a lost worker is rebuilt from the journal)
            order = _write_array(os.path.join(self.directory, name), obj)
            self.written += obj.nbytes
        self.keys[name] = (*meta, order)
        pid = ("a", name, obj.dtype.str, obj.shape, order, meta[2])
        self.seen[id(obj)] = pid
        return pid

    def _inline(self, obj):
        """A small keyed array stays inside the pickle (as a plain array)."""
        return ("inline", obj)


class BufferPool:
    """Arrays of paged-out partitions kept for the next page-in of the same shape.

    A fresh array of more than a few hundred KiB is a fresh ``mmap`` in a streaming worker, whose
    pages fault in (and are zeroed) on first touch; reusing the arrays of the partition that was
    just written back avoids that for every streamed partition of every pass. Bounded by
    ``max_bytes`` (the budget's in-flight share).
    """

    def __init__(self, max_bytes: int):
        self.max_bytes, self.bytes, self._free = int(max_bytes), 0, {}

    def give(self, arrays) -> None:
        for a in arrays:
            if (a.base is None and (a.flags.c_contiguous or a.flags.f_contiguous)
                    and self.bytes + a.nbytes <= self.max_bytes):
                key = (a.dtype.str, a.shape, "C" if a.flags.c_contiguous else "F")
                a.flags.writeable = True
                self._free.setdefault(key, []).append(a)
                self.bytes += a.nbytes

    def take(self, dtype, shape, order):
        free = self._free.get((np.dtype(dtype).str, tuple(shape), order))
        if not free:
            return None
        a = free.pop()
        self.bytes -= a.nbytes
        return a


class _Unpickler(RestrictedUnpickler):
    def __init__(self, file, part, directory, pool=None):
        super().__init__(file)
        self.part, self.directory, self.pool = part, directory, pool
        self.loaded: dict[str, np.ndarray] = {}

    def persistent_load(self, pid):
        if pid[0] == "X":
            return self.part.X
        if pid[0] == "y":
            return self.part.y
        if pid[0] == "inline":
            return pid[1]
        _, name, dtype, shape, order, readonly = pid
        arr = _read_array(os.path.join(self.directory, name), dtype, shape, order, self.pool)
        arr.flags.writeable = not readonly
        self.loaded[name] = arr
        return arr


class Pager:
    """Writes and reads whole partitions under ``directory`` (one sub-directory each)."""

    def __init__(self, directory: str, *, local_x: bool = True, pool_bytes: int = 0):
        os.makedirs(directory, exist_ok=True)
        self.root = tempfile.mkdtemp(prefix="kmp-dask-pages-", dir=directory)
        self.local_x = local_x
        self.has_state: set[int] = set()
        self.has_x: set[int] = set()
        self.manifests: dict[int, dict] = {}  # per partition: file name -> (dtype, shape, readonly, order)
        self.pool = BufferPool(pool_bytes)
        self.bytes_written = 0
        self.bytes_read = 0

    def _dir(self, index: int) -> str:
        return os.path.join(self.root, f"p{index:06d}")

    def save(self, part: Partition, clean: bool = False) -> None:
        """Write ``part.state`` (and, once, a raw copy of its rows) to scratch.

        Arrays that changed are rewritten in place, then the pickle; keyed read-only arrays
        written before are kept (:class:`_Pickler`), and with ``clean`` (the pass's effects
        modified no array in place: ``Effect.in_place``) so are keyed arrays still the very
        objects loaded from their files. Renaming fresh files into place was measured at
        ~3 ms per file here, more than writing them.
        """
        d = self._dir(part.index)
        os.makedirs(d, exist_ok=True)
        previous = self.manifests.get(part.index, {})
        buf = io.BytesIO()
        pk = _Pickler(buf, part, d, previous, part.paged if clean else None)
        pk.dump(part.state)
        with open(os.path.join(d, "state.pkl"), "wb") as f:
            f.write(buf.getbuffer())
        for name in set(previous) - set(pk.keys):
            os.remove(os.path.join(d, name))
        self.manifests[part.index] = pk.keys
        self.bytes_written += pk.written + buf.tell()
        if self.local_x and part.index not in self.has_x:
            self._save_rows(part, d)
            self.bytes_written += part.X.nbytes
        self.has_state.add(part.index)
        return [obj for obj in pk.objects if obj is not part.X and obj is not part.y]

    def release(self, part: Partition, arrays) -> None:
        """``part`` (just saved) will not be used again: its arrays may serve the next page-in."""
        if self.local_x and part.index in self.has_x:
            arrays = [*arrays, part.X] + ([] if part.y is None else [part.y])
        part.state, part.paged = {}, {}
        self.pool.give(arrays)

    def _save_rows(self, part: Partition, d: str) -> None:
        meta = {"X": (part.X.dtype.str, part.X.shape, _write_array(os.path.join(d, "X.bin"), part.X)), "y": None}
        if part.y is not None:
            meta["y"] = (part.y.dtype.str, part.y.shape, _write_array(os.path.join(d, "y.bin"), part.y))
        with open(os.path.join(d, "rows.pkl"), "wb") as f:
            pickle.dump(meta, f)
        self.has_x.add(part.index)

    def load(self, spec) -> Partition:
        """The partition of ``spec`` with its rows and (if it was saved) its state."""
        d = self._dir(spec.index)
        if spec.index in self.has_x:
            with open(os.path.join(d, "rows.pkl"), "rb") as f:
                meta = RestrictedUnpickler(f).load()
            X = _read_array(os.path.join(d, "X.bin"), *meta["X"], self.pool)
            y = None if meta["y"] is None else _read_array(os.path.join(d, "y.bin"), *meta["y"], self.pool)
            part = Partition(spec.index, spec.start, spec.stop, X, y, w=spec.w)
        else:
            part = spec.load()
        if spec.index in self.has_state:
            with open(os.path.join(d, "state.pkl"), "rb") as f:
                up = _Unpickler(f, part, d, self.pool)
                part.state, part.paged = up.load(), up.loaded
        self.bytes_read += partition_nbytes(part)
        return part

    def discard(self, index: int) -> None:
        shutil.rmtree(self._dir(index), ignore_errors=True)
        self.has_state.discard(index)
        self.has_x.discard(index)
        self.manifests.pop(index, None)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
