"""A kernel read from a table of precomputed values: the rows are given by their index.

Cross-validation along the path (``KMPClassifierCV`` / ``KMPRegressorCV`` on in-memory data)
runs one pursuit per (γ, fold), and every fold's pursuit of one γ evaluates the SAME kernel
values ``k(x_i, x_j)`` between training rows. :func:`kernel_table` computes them once, in fixed
row blocks (independent of any chunking or fold), as an N × N matrix; :func:`row_tables`
makes it readable by name; and the registered kernel ``"row_table"`` looks values up in it: its
"rows" are one-column arrays holding row indices (as floats), so the engine, the pursuit and the
prefix scoring run unchanged on ``X = index[:, None]`` and read table entries instead of
computing kernel blocks.

A table lives in this process only (a module-level dictionary keyed by a token, removed when the
``with row_tables(...)`` block ends): the kernel works in process, never on a dask worker.
Pure NumPy.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import mmap
import weakref

import numpy as np

from ._registry import register_kernel

__all__ = ["TABLE_BLOCK_ROWS", "kernel_table", "row_table", "row_table_diag", "row_tables", "table_token"]

TABLE_BLOCK_ROWS = 512
"""Rows per block when a table is computed: fixed, so the table's values depend on the rows only
(not on chunking or folds); 512 rows × N columns of float64 is 22 MiB at N = 5,500."""

_TABLES: dict[str, np.ndarray] = {}
_TOKENS = itertools.count()
GATHER_AFTER = 8
"""A partition's columns of a table are gathered at its ``GATHER_AFTER + 1``-th block (the gather
costs about as much as 25 blocks read without it: titanic's folds, whose pursuits stop after a few
atoms, were slower with it at the first block)."""

_COLUMNS: dict[str, collections.OrderedDict] = {}
"""Per table: its columns of a partition's rows, ``T[:, rows]``, keyed by the partition's (read-only)
index array — a pursuit reads the same rows' columns at every atom (:func:`_partition_columns`).
An entry is ``(X, columns, reads, buffer, row_sqnorms)``: ``columns`` a C-ordered view of the flat
``buffer`` (both None while the entry only counts reads); ``row_sqnorms`` the sums of squares of
its rows once :func:`row_table_column_sqnorms` asked for them (else None)."""

SMALL_PAGES_FROM = 4 << 20
"""Arrays of at least this many bytes are mapped in 4 KiB pages by :func:`fresh_array`."""

_MAP_PRIVATE = getattr(mmap, "MAP_PRIVATE", None)
"""None where ``mmap`` has no flags (Windows): there every array is ``np.empty``'s."""

_SPARES: dict[str, list] = {}
"""Per table: flat buffers of dropped entries, reused by the next gathers (:func:`_column_buffer`)."""

_POOL: list = []
"""Column buffers of tables whose ``row_tables`` block ended, for the next table registered (a CV
registers one table per width, one after the other): kept while a table that was registered is
alive (:data:`_POOL_OWNERS`: the CV keeps its tables until its search ends), at most one table's
size; emptied when the last of those tables is freed."""

_FREED_TABLES: list = []
"""The memory (an anonymous map) of a table freed while a registered table lives — a CV drops the
tables of the widths it does not keep — reused by the next :func:`kernel_table` of its size; emptied
with the pool."""

_POOL_OWNERS: set = set()
"""``id`` of every registered table still alive (a ``weakref.finalize`` removes it)."""

SPARE_COLUMNS = 4
"""Columns of slack in a new column buffer (or 1/32 of its columns, when that is more): a later
fold's partition a few rows larger still fits in it."""


def kernel_table(kernel, X: np.ndarray) -> np.ndarray:
    """The matrix ``T[i, j] = kernel(X[i], X[j])`` (float64, N × N), computed in blocks of
    :data:`TABLE_BLOCK_ROWS` full rows (each block written in place where the kernel can)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = len(X)
    sq = np.einsum("ij,ij->i", X, X)
    T = _table_memory(n * n).reshape(n, n)
    for a in range(0, n, TABLE_BLOCK_ROWS):
        b = min(a + TABLE_BLOCK_ROWS, n)
        block = kernel.block(X[a:b], X, X_sqnorm=sq[a:b], Y_sqnorm=sq, out=T[a:b])
        if not np.shares_memory(block, T):  # a kernel without out= returned a new block
            T[a:b] = block
    return T


def fresh_array(n_elements: int, dtype) -> np.ndarray:
    """``np.empty(n_elements, dtype)``, in 4 KiB pages when it is large (:data:`SMALL_PAGES_FROM` bytes).

    numpy asks the kernel for transparent huge pages (``madvise``) for every array of 4 MiB or
    more; where free memory is fragmented (a machine whose page cache holds most of it) the kernel
    compacts memory to provide them at the first write of each page, and a fresh 126 MB table then
    took 20–700 ms to fault in (banana's, N = 3,975) against ~100 ms in 4 KiB pages, every time
    (benchmarks/notes/kmp_cv_speed.md, "Mid-size"). A private anonymous map is never advised: the
    values, the dtype and the C layout are np.empty's; the memory is unmapped when the array is freed."""
    dtype = np.dtype(dtype)
    memory = _fresh_map(int(n_elements) * dtype.itemsize)
    if memory is None:
        return np.empty(n_elements, dtype=dtype)
    return np.frombuffer(memory, dtype=dtype, count=int(n_elements))


def _fresh_map(nbytes: int):
    """A private anonymous map of ``nbytes`` (4 KiB pages), or None below :data:`SMALL_PAGES_FROM`
    or where ``mmap`` has no ``MAP_PRIVATE``: then the caller uses ``np.empty``."""
    if nbytes < SMALL_PAGES_FROM or _MAP_PRIVATE is None:
        return None
    return mmap.mmap(-1, nbytes, flags=_MAP_PRIVATE)


def _table_memory(n_elements: int) -> np.ndarray:
    """A flat float64 array for a table: the memory of a table freed earlier in the search when one
    of this size is there (:data:`_FREED_TABLES`), else :func:`fresh_array`'s."""
    nbytes = int(n_elements) * 8
    freed = next((m for m in _FREED_TABLES if len(m) == nbytes), None)
    if freed is None:
        freed = _fresh_map(nbytes)
        if freed is None:
            return np.empty(n_elements)
    _FREED_TABLES[:] = [m for m in _FREED_TABLES if m is not freed]
    flat = np.frombuffer(freed, dtype=np.float64, count=int(n_elements))
    weakref.finalize(flat, _table_freed, freed)  # every view of the table has ``flat`` as its base
    return flat


def _table_freed(memory) -> None:
    """A table's memory, no longer used by any array: kept for the next table while a registered
    table lives (at most one)."""
    if _POOL_OWNERS:
        _FREED_TABLES[:] = [memory]


def table_token() -> str:
    """A new token, unique in this process (:func:`row_tables` draws one unless given)."""
    return f"row-table-{next(_TOKENS)}"


@contextlib.contextmanager
def row_tables(table: np.ndarray, token: str | None = None):
    """Yield the token under which ``table`` is readable by the ``"row_table"`` kernel
    (``Kernel("row_table", {"table": token})``); the table is dropped when the block ends.
    ``token``: register under this one (from :func:`table_token`; a kept pursuit whose kernel names
    it reads the new table, recomputed with the same values), else a new one."""
    token = table_token() if token is None else token
    if token in _TABLES:
        raise ValueError(f"the kernel table token {token!r} is registered already (a table is registered once "
                         "at a time); draw a new one with table_token()")
    _TABLES[token] = table
    _claim_pool(token, table)
    try:
        yield token
    finally:
        _TABLES.pop(token, None)
        _release_to_pool(token, table)


def _claim_pool(token: str, table: np.ndarray) -> None:
    """Give the table the pool's buffers (its spares, up to ``table.nbytes``) and have the pool
    emptied when the last table that was registered is freed."""
    if id(table) not in _POOL_OWNERS:
        _POOL_OWNERS.add(id(table))
        weakref.finalize(table, _owner_freed, id(table))
    _SPARES[token] = _bounded([b for b in _POOL if b.dtype == table.dtype], table.nbytes)
    _POOL.clear()


def _release_to_pool(token: str, table: np.ndarray) -> None:
    """The table's column buffers (its entries' and spares) go to the pool, up to ``table.nbytes``."""
    cache = _COLUMNS.pop(token, None) or {}
    buffers = _SPARES.pop(token, []) + [e[3] for e in cache.values() if e[3] is not None]
    _POOL[:] = _bounded(buffers + _POOL, table.nbytes)


def _owner_freed(key: int) -> None:
    _POOL_OWNERS.discard(key)
    if not _POOL_OWNERS:
        _POOL.clear()
        _FREED_TABLES.clear()


def _bounded(buffers: list, nbytes: int) -> list:
    """The largest of ``buffers`` that hold at most ``nbytes`` together."""
    kept, held = [], 0
    for b in sorted(buffers, key=len, reverse=True):
        if held + b.nbytes <= nbytes:
            kept.append(b)
            held += b.nbytes
    return kept


def _lookup(table: str) -> np.ndarray:
    try:
        return _TABLES[table]
    except KeyError:
        raise ValueError(f"The 'row_table' kernel reads a table registered in this process by "
                         f"kmp_dask.kernels._table.row_tables; got table={table!r}, which is not (or no "
                         "longer) registered. It is used inside KMPClassifierCV / KMPRegressorCV in "
                         "process only; use a kernel name such as 'rbf' elsewhere.") from None


def _indices(X) -> np.ndarray:
    X = np.asarray(X)
    return (X[:, 0] if X.ndim == 2 else X.ravel()).astype(np.intp)


def row_table(X, Y, *, table):
    """Kernel block ``K[i, j] = T[Y[j, 0], X[i, 0]]`` from the registered table ``T``.

    The basis / candidate row is the table's row, the data row its column: the ``s`` table rows
    are gathered over the span of the data rows' indices, then the data rows' columns, and the
    block is returned as the transpose of that (s × n) array (Fortran-ordered, no copy).

    Parameters
    ----------
    X : ndarray of shape (n_samples, 1)
        Row indices into the table (float or int).
    Y : ndarray of shape (n_basis, 1)
        Row indices of the basis / candidate rows.
    table : str
        Token of a table registered by :func:`row_tables`.

    Returns
    -------
    K : ndarray of shape (n_samples, n_basis), float64
    """
    T = _lookup(table)
    yi = _indices(Y)
    if not len(X):
        return np.empty((0, len(yi)))
    columns = _partition_columns(table, T, X)
    if columns is not None:  # the same values and layout as below: a row gather of the cached columns
        return columns.take(yi, axis=0).T
    xi = _indices(X)
    lo, hi = int(xi.min()), int(xi.max()) + 1  # a partition's rows span part of the table: read only that
    rows = T[yi, lo:hi]
    if hi - lo == len(xi) and xi[0] == lo and np.all(np.diff(xi) == 1):
        return rows.T
    return np.take(rows, xi - lo, axis=1).T


def _partition_columns(token: str, T: np.ndarray, X) -> np.ndarray | None:
    """``T[:, rows of X]`` (C-ordered) for a read-only ``X`` (a partition's rows: read at every atom of a
    pursuit), computed once and kept while the table is registered; None for a writeable ``X``.

    A fold's rows are not contiguous in the table, so without it every kernel block gathered the
    candidates' rows over the fold's span and then the fold's columns of them — a column gather of
    ``s × n`` values that was the largest single cost of a small-data CV fit
    (benchmarks/notes/kmp_cv_speed.md); with it a block is a row gather of ``s`` cached rows. Keyed
    by the address, shape and strides of ``X``'s data, with ``X`` kept referenced (its memory
    cannot be reused while the entry lives) and read-only (its values cannot change). At most the
    table's own size is kept per table (:func:`_column_buffer`), oldest entries dropped first (a
    fold's partitions hold fewer rows than the table: the next fold's replace them, in their
    memory). Until a partition has been read :data:`GATHER_AFTER` times its entry only counts (no
    columns)."""
    if not isinstance(X, np.ndarray) or X.flags.writeable or len(X) * T.shape[0] * 8 > T.nbytes:
        return None
    cache = _COLUMNS.setdefault(token, collections.OrderedDict())
    key = _key(X)
    hit = cache.get(key)
    if hit is not None and hit[1] is not None:
        cache.move_to_end(key)
        return hit[1]
    if hit is None or hit[2] < GATHER_AFTER:  # a pursuit that stops after a few atoms: not worth the gather
        cache[key] = (X, None, 1 if hit is None else hit[2] + 1, None, None)
        return None
    del cache[key]
    idx = _indices(X)
    if idx.min() < -T.shape[1] or idx.max() >= T.shape[1]:
        return T.take(idx, axis=1)  # raises the IndexError of an index outside the table
    buffer = _column_buffer(token, cache, T, len(idx))
    columns = buffer[: T.shape[0] * len(idx)].reshape(T.shape[0], len(idx))
    np.take(T, idx, axis=1, out=columns, mode="wrap")  # T.take(idx, axis=1)'s values (indices checked above)
    cache[key] = (X, columns, GATHER_AFTER, buffer, None)
    return columns


_KEYS: dict = {}
"""``id(X) -> (X, key)``: the cache key of an array object seen before (a partition reads through the
same array object at every atom; :data:`_KEYS` keeps it, so its ``id`` is not reused meanwhile)."""

KEYS_KEPT = 64
"""At most this many array objects in :data:`_KEYS` (emptied when full)."""


def _key(X: np.ndarray) -> tuple:
    """The columns' cache key of a read-only ``X``: its data's address, shape, strides and dtype.
    Read from ``__array_interface__`` (a dict built at every access, ~4 µs) once per array object,
    then found by the object's identity: an array object's data address never changes, and its
    shape, strides and dtype are checked (cheap attributes)."""
    seen = _KEYS.get(id(X))
    if seen is not None and seen[0] is X and X.dtype is seen[2] and X.shape == seen[1][1] and X.strides == seen[1][2]:
        return seen[1]
    key = (X.__array_interface__["data"][0], X.shape, X.strides, X.dtype.str)
    if len(_KEYS) >= KEYS_KEPT:
        _KEYS.clear()
    _KEYS[id(X)] = (X, key, X.dtype)
    return key


def _column_buffer(token: str, cache: collections.OrderedDict, T: np.ndarray, n_columns: int) -> np.ndarray:
    """A flat buffer of ``T``'s dtype for ``T.shape[0] × n_columns`` values: a buffer of an entry
    dropped earlier when one is large enough, else a new one, with :data:`SPARE_COLUMNS` of slack
    (the next fold's partitions may hold a row or two more) where the bound allows.

    Bound: the buffers of the table's entries and the spare ones hold at most ``T.nbytes``; oldest
    entries are dropped first (their buffers become spares), spares too small for this gather are
    freed. Why reuse: a new buffer of tens of MB is fresh memory whose pages fault in on first
    write — 8 ms to over 200 ms for 50 MB (huge-page compaction), against ~9 ms for the gather
    itself (benchmarks/notes/kmp_cv_speed.md, "Mid-size")."""
    spares = _SPARES.setdefault(token, [])
    rows, need = T.shape[0], T.shape[0] * n_columns
    while True:
        fits = [b for b in spares if b.size >= need and b.dtype == T.dtype]
        if fits:
            best = min(fits, key=len)
            spares[:] = [b for b in spares if b is not best]
            return best
        held = sum(e[3].nbytes for e in cache.values() if e[3] is not None) + sum(b.nbytes for b in spares)
        for size in (min(need + rows * max(SPARE_COLUMNS, n_columns // 32), T.size), need):
            if held + size * T.itemsize <= T.nbytes:
                return fresh_array(size, T.dtype)
        if spares:
            spares.remove(min(spares, key=len))
        else:  # the oldest entry goes; its buffer, if it has one, is a spare now
            buffer = cache.popitem(last=False)[1][3]
            if buffer is not None:
                spares.append(buffer)


def row_table_column_sqnorms(X, Y, *, table):
    """``Σ_i T[Y[j, 0], X[i, 0]]²`` (float64, one per row of ``Y``) when ``X``'s columns of the table
    are cached (:func:`_partition_columns`), else None: the sums of squares of every table row over
    the partition's columns, computed once per cache entry by the einsum the scoring pass ran on
    each block — each sum reduces the same contiguous values in the same order, so the values are
    bit for bit the block's ``np.einsum("ij,ij->j", K, K)``; a pass reads ``s`` of them instead of
    ``s × rows`` products."""
    cache = _COLUMNS.get(table)
    if cache is None or not isinstance(X, np.ndarray) or X.flags.writeable:
        return None
    key = _key(X)
    hit = cache.get(key)
    if hit is None or hit[1] is None:
        return None
    if hit[4] is None:
        hit = cache[key] = hit[:4] + (np.einsum("ij,ij->i", hit[1], hit[1]),)
    return hit[4].take(_indices(Y))


def row_table_diag(X, *, table):
    """Diagonal ``T[X[i, 0], X[i, 0]]``."""
    T = _lookup(table)
    i = _indices(X)
    return T[i, i]


register_kernel("row_table", row_table, row_table_diag, {"table": None}, column_sqnorms=row_table_column_sqnorms)
