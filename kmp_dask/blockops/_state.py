"""Generic per-partition state that every pursuit composes (NumPy only).

* :class:`Views` — the partition's training / validation rows and their squared norms (the
  split is a hash of the global row index, :func:`~kmp_dask.blockops.split_mask`);
* :class:`ColumnCache` — cached basis columns ``k(X, z_j)`` over both views, column-major with
  capacity reserved up front, plus one *pending* column waiting to be accepted;
* :class:`Residual` — targets, fit ``F = B·coef`` and residual (``Y − F``, or ``−∂L/∂f`` for a
  loss), set from coefficients (no drift) or moved by a rank-one update;
* :class:`Workspace` — scratch buffers kept with the partition and reused across passes;
* :func:`kernel_block`, :func:`cross64`, :func:`sqnorm` — the numerics they share.

Everything here is rebuildable from the rows and the effects the driver sent (see
:mod:`~kmp_dask.blockops._journal`). docs/engine.md explains the memory layout choices.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ._partition import Partition, split_mask

__all__ = [
    "Views", "split_views", "ColumnCache", "RecomputedColumns", "Residual", "Workspace", "kernel_block", "cross64",
    "sqnorm", "readonly",
    "CROSS_BLOCK_ROWS", "CACHE_BYTES_UP_FRONT",
]

CROSS_BLOCK_ROWS = 2048
"""Row block of :func:`cross64` (its float64 scratch is CROSS_BLOCK_ROWS × basis capacity)."""

PAGE_COLUMNS = 32
"""Basis columns per block when a cache is paged out (see :meth:`ColumnCache.__getstate__`)."""

CACHE_BYTES_UP_FRONT = 1 << 31
"""Basis-cache capacity reserved at init (virtual until written): the requested columns unless
that exceeds this many bytes per partition; beyond it the cache doubles as it fills."""


class Paged:
    """An array with a *stable key* for a pager (``parallel/_paging.py``): a read-only array is
    written to scratch once under its key and reused on later page-outs while the key's file
    holds the same dtype and shape. Arrays without a key are rewritten on every page-out: a
    positional name is not an identity (an array that appears or disappears — a pending column —
    shifts the names of the ones after it), so reusing files by position could swap two blocks.
    Plain pickling stores the bare array."""

    __slots__ = ("key", "array")

    def __init__(self, key: str, array: np.ndarray):
        self.key, self.array = key, array

    def __reduce__(self):
        return self.array.__reduce__()


def _uid() -> str:
    """A key prefix unique to one state object (two caches in one partition never collide)."""
    import secrets

    return secrets.token_hex(6)


def keyed_state(obj, names) -> dict:
    """``obj.__dict__`` for pickling with the read-only arrays among ``names`` keyed
    (:class:`Paged`) under a prefix unique to ``obj`` (kept in ``obj.__dict__["uid"]``)."""
    uid = obj.__dict__.setdefault("uid", _uid())
    state = dict(obj.__dict__)
    for name in names:
        a = state.get(name)
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            state[name] = Paged(f"{uid}.{name}", a)
    return state


def sqnorm(X: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row, in the dtype of ``X``."""
    return np.einsum("ij,ij->i", X, X)


def kernel_block(kernel, X, X_sq, Z, Z_sq, out=None):
    """``kernel(X, Z)`` with cached squared norms, written into ``out`` where the kernel can."""
    return kernel.block(X, Z, X_sqnorm=X_sq, Y_sqnorm=Z_sq, out=out)


@dataclass
class Views:
    """Training and validation rows of one partition (views when nothing is held out)."""

    Xtr: np.ndarray
    Xva: np.ndarray
    sq_tr: np.ndarray
    sq_va: np.ndarray
    val: np.ndarray  #: bool mask over the partition's rows: True = validation

    def split(self, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of ``A`` (aligned with the partition) for the training and validation views."""
        return A[~self.val], A[self.val]

    def __getstate__(self):  # never change after init: a pager writes them once
        return keyed_state(self, ("Xtr", "Xva", "sq_tr", "sq_va", "val"))

    @property
    def nbytes(self) -> int:
        own = self.sq_tr.nbytes + self.sq_va.nbytes + self.val.nbytes
        return own + (self.Xtr.nbytes + self.Xva.nbytes if self.val.any() else 0)


def split_views(part: Partition, fraction: float, seed: int) -> Views:
    """The views of a partition; their arrays are read-only (a pager writes them once)."""
    gidx = np.arange(part.start, part.stop, dtype=np.int64)
    val = split_mask(gidx, fraction, seed)
    X = part.X
    if val.any():
        Xtr, Xva = X[~val], X[val]
    else:  # no validation rows: views, not copies (the partition's largest array)
        Xtr, Xva = X, X[:0]
    return Views(*(readonly(a) for a in (Xtr, Xva, sqnorm(Xtr), sqnorm(Xva), val)))


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` marked read-only: state that never changes after init (a pager writes it once)."""
    a.flags.writeable = False
    return a


class Workspace:
    """Flat scratch buffers kept with a partition and grown only when too small.

    Reason (measured, docs/engine.md "Hot-loop memory"): inside a dask worker every fresh
    temporary above 128 KiB is a new ``mmap`` whose pages fault in on every pass.
    """

    def __init__(self):
        self._buffers: dict[str, np.ndarray] = {}
        self.shared = False

    def get(self, key: str, size: int, dtype) -> np.ndarray:
        buf = self._buffers.get(key)
        if buf is None or buf.size < size or buf.dtype != dtype:
            buf = self._buffers[key] = np.empty(max(size, 1), dtype=dtype)
        return buf

    @property
    def nbytes(self) -> int:
        return 0 if self.shared else sum(b.nbytes for b in self._buffers.values())

    def __getstate__(self):  # scratch: never written when a partition pages out
        return {}

    def __setstate__(self, state):
        """A paged-in partition borrows the process's shared scratch: streamed partitions are
        computed one at a time, so one set of buffers serves them all (and is not re-faulted
        for every partition of every pass)."""
        scratch = getattr(_SHARED_SCRATCH, "buffers", None)
        if scratch is None:
            scratch = _SHARED_SCRATCH.buffers = {}
        self._buffers, self.shared = scratch, True


#: Per thread: two holders in one process (``LocalCluster(processes=False)``: worker threads)
#: computing streamed partitions at the same time must not write into the same buffers.
_SHARED_SCRATCH = threading.local()


class ColumnCache:
    """Basis columns over the training and validation views, plus one pending column.

    Column-major (a column is contiguous, so appending one touches only its own pages and the
    untouched capacity stays virtual memory; the row stride never depends on the capacity).
    """

    def __init__(self, n_train: int, n_val: int, dtype, capacity: int):
        cap = max(1, min(int(capacity), CACHE_BYTES_UP_FRONT // max(1, (n_train + n_val) * np.dtype(dtype).itemsize)))
        self.Btr = np.empty((n_train, cap), dtype=dtype, order="F")
        self.Bva = np.empty((n_val, cap), dtype=dtype, order="F")
        self.n = 0
        self.pending: tuple[np.ndarray, np.ndarray] | None = None
        self.uid = _uid()

    @property
    def dtype(self):
        return self.Btr.dtype

    def train(self, n: int | None = None) -> np.ndarray:
        """The first ``n`` (default: all accepted) training columns, (rows, n) view."""
        return self.Btr[:, : self.n if n is None else n]

    def val(self) -> np.ndarray:
        return self.Bva[:, : self.n]

    def pend(self, col_tr: np.ndarray, col_va: np.ndarray, atom=None) -> None:
        self.pending = (col_tr, col_va)

    def row_blocks(self, X, X_sq, kernels, work, val: bool = False):
        """The accepted columns over the training (or validation) rows as ``(a, b, B[a:b])``
        row blocks: here one block, the cache itself (see :class:`RecomputedColumns`)."""
        B = self.val() if val else self.train()
        yield 0, B.shape[0], B

    def rows(self, X, X_sq, kernels, work, a: int, b: int) -> np.ndarray:
        """Training rows ``a:b`` of the accepted columns."""
        return self.Btr[a:b, : self.n]

    def last(self) -> np.ndarray:
        """The last accepted training column."""
        return self.Btr[:, self.n - 1]

    def accept(self) -> None:
        """Append the pending column (it must exist)."""
        if self.pending is None:
            raise RuntimeError("ColumnCache.accept: no pending column (the driver's effects are out of order)")
        col_tr, col_va = self.pending
        self.pending = None
        self.__dict__.pop("_open_blocks", None)  # the open block changes
        n = self.n
        if n == self.Btr.shape[1]:
            for key in ("Btr", "Bva"):
                old = getattr(self, key)
                new = np.empty((old.shape[0], max(2 * old.shape[1], 1)), dtype=old.dtype, order="F")
                new[:, :n] = old[:, :n]
                setattr(self, key, new)
        self.Btr[:, n] = col_tr
        self.Bva[:, n] = col_va
        self.n = n + 1

    def cross(self, d: np.ndarray, work: Workspace) -> np.ndarray:
        """``Bᵀd`` (n,) in float64 over the accepted training columns."""
        scratch = work.get("cross64", min(CROSS_BLOCK_ROWS, len(d)) * self.Btr.shape[1], np.float64)
        return cross64(self.train(), d, scratch)

    @property
    def nbytes(self) -> int:
        pend = sum(c.nbytes for c in self.pending) if self.pending is not None else 0
        return self.Btr.nbytes + self.Bva.nbytes + pend

    def __getstate__(self):
        """The accepted columns in blocks of ``PAGE_COLUMNS`` (the reserved capacity is not
        data). Full blocks never change again and are marked read-only, so a pager that has
        written one does not write it again: paging a growing cache out costs O(rows·32)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("Btr", "Bva")}
        state["capacity"] = self.Btr.shape[1]
        uid = self.__dict__.setdefault("uid", _uid())
        for key in ("Btr", "Bva"):
            B, blocks = getattr(self, key), []
            loaded = self.__dict__.get("_open_blocks", {}).get(key)
            for a in range(0, self.n, PAGE_COLUMNS):
                blk = B[:, a : min(a + PAGE_COLUMNS, self.n)]
                if blk.shape[1] == PAGE_COLUMNS:
                    blk = blk.view()
                    blk.flags.writeable = False
                elif loaded is not None and loaded[0] == a and loaded[1].shape == blk.shape:
                    blk = loaded[1]  # the open block as paged in, unchanged since (no column accepted)
                blocks.append(Paged(f"{uid}.{key}.{a}", blk))
            state[key] = (B.shape[0], B.dtype.str, blocks)
        state.pop("_open_blocks", None)
        return state

    def __setstate__(self, state):
        state = dict(state)
        opened = {}
        cap = max(state.pop("capacity"), state["n"], 1)
        for key in ("Btr", "Bva"):
            rows, dtype, blocks = state.pop(key)
            B = np.empty((rows, cap), dtype=np.dtype(dtype), order="F")
            a = 0
            for blk in blocks:
                B[:, a : a + blk.shape[1]] = blk
                a += blk.shape[1]
            setattr(self, key, B)
            if blocks and blocks[-1].shape[1] < PAGE_COLUMNS:  # the open block's array, kept for
                opened[key] = (a - blocks[-1].shape[1], blocks[-1])  # the next page-out (see above)
        self.__dict__.update(state)
        self._open_blocks = opened


class RecomputedColumns:
    """The basis kept as its atoms; columns are recomputed from the rows when a pass needs them.

    The large-N mode (docs/engine.md "Large N"): a stored cache costs ``rows × n × itemsize``
    per partition — 40 GB at 10⁷ rows and 1000 atoms — resident or streamed from scratch on
    every pass. Here a partition holds only the atoms (``n × d``), the pending column and the
    last accepted one; a pass that needs ``B`` (the residual resync ``Y − Bα``, backfitting's
    ``Bw`` and ``Bᵀd``, pre-fitting's ``Bᵀd_k``, validation, Newton refits) recomputes it in row
    blocks of ``BLOCK_ELEMENTS`` kernel values: ``rows·n·d`` flops instead of
    ``rows·n·itemsize`` bytes. Basic pursuit needs none of those between resyncs, so it pays
    almost nothing. Same interface as :class:`ColumnCache` (``pend``/``accept``/``row_blocks``/
    ``rows``/``last``); the values agree with a stored cache's to rounding (the kernel of many
    centres at once is a GEMM, a stored column a GEMV), not bit for bit.
    """

    BLOCK_ELEMENTS = 1 << 18
    """Kernel values per recomputed row block (1 MiB of float32: its buffer is partition state
    a budget counts, so it stays small beside the rows; large enough for a GEMM's speed)."""

    def __init__(self, n_train: int, n_val: int, dtype):
        self.n_train, self.n_val, self._dtype = int(n_train), int(n_val), np.dtype(dtype)
        self.n = 0
        self.atoms: list = []  #: (kernel index, centre row or None for the constant atom)
        self.pending: tuple | None = None
        self.pending_atom = None
        self.last_cols: tuple | None = None
        self._groups = None

    @property
    def dtype(self):
        return self._dtype

    def pend(self, col_tr: np.ndarray, col_va: np.ndarray, atom=None) -> None:
        if atom is None:
            raise RuntimeError("RecomputedColumns.pend needs the atom whose column this is")
        self.pending, self.pending_atom = (col_tr, col_va), atom

    def accept(self) -> None:
        if self.pending is None:
            raise RuntimeError("RecomputedColumns.accept: no pending column (the driver's effects are out of order)")
        atom = self.pending_atom
        self.atoms.append((int(atom.kernel),
                           None if atom.z is None else np.array(atom.z, dtype=self._dtype).reshape(-1)))
        self.last_cols, self.pending, self.pending_atom = self.pending, None, None
        self.n += 1
        self._groups = None

    def last(self) -> np.ndarray:
        return self.last_cols[0]

    def _centres(self):
        """Atoms grouped by kernel: ``[(kernel, columns, Z, ‖z‖²)]`` and the constant atoms' columns."""
        if self._groups is None:
            by_kernel, ones = {}, []
            for j, (q, z) in enumerate(self.atoms):
                if z is None:
                    ones.append(j)
                else:
                    by_kernel.setdefault(q, []).append(j)
            groups = []
            for q, cols in sorted(by_kernel.items()):
                Z = np.stack([self.atoms[j][1] for j in cols])
                groups.append((q, np.array(cols), Z, sqnorm(Z)))
            self._groups = (groups, np.array(ones, dtype=np.intp))
        return self._groups

    def _fill(self, out, X, X_sq, kernels):
        groups, ones = self._centres()
        for q, cols, Z, Z_sq in groups:
            if len(cols) == out.shape[1]:  # one kernel, no constant atom: straight into the buffer
                K = kernel_block(kernels[q], X, X_sq, Z, Z_sq, out=out)
                if K is not out:
                    out[...] = K
            else:
                out[:, cols] = kernel_block(kernels[q], X, X_sq, Z, Z_sq)
        if len(ones):
            out[:, ones] = 1
        return out

    def row_blocks(self, X, X_sq, kernels, work, val: bool = False):
        n = self.n
        if n == 0 or len(X) == 0:
            yield 0, len(X), np.zeros((len(X), n), dtype=self._dtype)
            return
        step = max(1, min(len(X), self.BLOCK_ELEMENTS // n))
        buf = work.get("recomputed_" + ("va" if val else "tr"), step * n, self._dtype)
        for a in range(0, len(X), step):
            b = min(a + step, len(X))
            yield a, b, self._fill(buf[: (b - a) * n].reshape(b - a, n), X[a:b], X_sq[a:b], kernels)

    def rows(self, X, X_sq, kernels, work, a: int, b: int) -> np.ndarray:
        buf = work.get("recomputed_rows", (b - a) * self.n, self._dtype)
        return self._fill(buf[: (b - a) * self.n].reshape(b - a, self.n), X[a:b], X_sq[a:b], kernels)

    @property
    def nbytes(self) -> int:
        cols = sum(c.nbytes for pair in (self.pending, self.last_cols) if pair is not None for c in pair)
        return cols + sum(0 if z is None else z.nbytes for _, z in self.atoms)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_groups"] = None
        return state


def cross64(B: np.ndarray, d: np.ndarray, scratch: np.ndarray | None = None,
            block_rows: int = CROSS_BLOCK_ROWS) -> np.ndarray:
    """``Bᵀd`` accumulated in float64 without an N × n float64 copy of a float32 cache.

    Row blocks of a float32 ``B`` are cast into ``scratch`` (≥ block_rows·n float64, reused
    across iterations: a fresh float64 block per call is a fresh mmap whose pages fault in) and
    reduced. Float32 accumulation over N rows would put ~√N·ε₃₂ relative error into the Gram.
    """
    if B.dtype == np.float64:
        return B.T @ d
    n = B.shape[1]
    if scratch is None or scratch.size < min(block_rows, B.shape[0]) * n:
        scratch = np.empty(min(block_rows, B.shape[0]) * n)
    out = np.zeros(n)
    for a in range(0, B.shape[0], block_rows):
        blk = B[a : a + block_rows]
        tmp = scratch[: blk.size]  # laid out like blk, so the cast is a streaming copy
        tmp = tmp.reshape(n, blk.shape[0]).T if blk.strides[0] <= blk.strides[1] else tmp.reshape(blk.shape)
        np.copyto(tmp, blk)
        out += d[a : a + block_rows] @ tmp
    return out


class Residual:
    """Targets ``Y`` (rows, m), coefficients, fit ``F = B·coef`` and the pursuit's residual ``R``.

    ``loss=None``: the squared loss, ``R = Y − F`` (``F`` is not kept). Otherwise
    ``R = −∂L/∂f (Y, F)``, the negative functional gradient.
    """

    def __init__(self, Y: np.ndarray, loss=None, codes: np.ndarray | None = None):
        self.loss = loss
        self.uid = _uid()
        if codes is None:
            self._Y, self.codes, self.table = readonly(Y), None, None
        else:
            # coded targets: Y = table[codes] (one small integer per row instead of m float64s)
            self._Y, self.codes, self.table = None, readonly(codes), readonly(np.asarray(Y, dtype=np.float64))
        Y = self.Y
        self.coef = np.zeros((0, Y.shape[1]))
        self.F = None if loss is None else np.zeros_like(Y)
        self.R = Y.copy() if loss is None else -loss.gradient(Y, self.F)

    @classmethod
    def coded(cls, codes: np.ndarray, table: np.ndarray, loss=None) -> Residual:
        """Targets with few distinct rows (one-vs-rest ±1 columns) as row ``codes`` into a
        ``table`` of target rows. The same values as ``Residual(table[codes])`` — the targets are
        rebuilt when a resync, a loss or a statistic reads :attr:`Y` — but a partition holds and
        pages one byte per row for them instead of ``8·m`` (measured: 56 of the 333 MB a streamed
        pass read at 10⁶ rows × 7 classes)."""
        return cls(table, loss, codes=codes)

    @property
    def Y(self) -> np.ndarray:
        """The targets (rows, m), read-only; rebuilt from the codes on each use when coded."""
        if self.codes is None:
            return self._Y
        return readonly(self.table[self.codes])

    @property
    def m(self) -> int:
        return (self._Y if self.codes is None else self.table).shape[1]

    def set_blocks(self, blocks, coef) -> None:
        """:meth:`set` with the columns given as ``(a, b, B[a:b])`` row blocks
        (:meth:`RecomputedColumns.row_blocks`)."""
        coef = np.asarray(coef, dtype=np.float64).reshape(-1, self.m)
        self.coef = coef
        Y = self.Y
        T = np.empty_like(Y)
        for a, b, Bb in blocks:
            if self.loss is None:
                T[a:b] = Y[a:b] - Bb @ coef.astype(Bb.dtype, copy=False)
            else:
                T[a:b] = Bb @ coef
        if self.loss is None:
            self.R = T
        else:
            self.F = T
            self.R = -self.loss.gradient(Y, self.F)

    def set(self, B: np.ndarray, coef) -> None:
        """Recompute from the targets and ``coef`` over the columns ``B`` (no drift, O(rows·n·m))."""
        n = B.shape[1]
        coef = np.asarray(coef, dtype=np.float64).reshape(n, self.m)
        self.coef = coef
        Y = self.Y
        if self.loss is None:
            # the product in the basis-cache dtype: a float32 cache is never upcast (an N x n copy)
            self.R = Y - B @ coef.astype(B.dtype, copy=False) if n else Y.copy()
            return
        self.F = (B @ coef).astype(np.float64, copy=False) if n else np.zeros_like(Y)
        self.R = -self.loss.gradient(Y, self.F)

    def move(self, B: np.ndarray, w, beta, coef) -> np.ndarray:
        """Rank-one update after the last column of ``B`` joined with coefficient ``beta`` (m,).

        The earlier coefficients moved by ``−w βᵀ`` (``w=None``: they stayed), so the fit moves
        by ``u βᵀ`` with ``u = d − B[:, :-1] w``: O(rows·(n + m)) instead of :meth:`set`'s
        O(rows·n·m). Afterwards the coefficients are ``coef``. Returns ``u`` (float64, rows).
        """
        n = B.shape[1]
        beta = np.asarray(beta, dtype=np.float64).reshape(1, self.m)
        d = B[:, n - 1]
        if w is not None and n > 1:
            Bo = B[:, : n - 1]
            u = (d - Bo @ np.asarray(w).astype(Bo.dtype, copy=False)).astype(np.float64, copy=False)  # a new array
        else:
            u = d.astype(np.float64)
        self.move_by(u, beta, coef)
        return u

    def move_by(self, u: np.ndarray, beta, coef) -> None:
        """The fit moves by ``u βᵀ`` (float64 ``u``, rows); afterwards the coefficients are ``coef``."""
        beta = np.asarray(beta, dtype=np.float64).reshape(1, self.m)
        if self.loss is None:
            self.R -= u[:, None] * beta
        else:
            self.F += u[:, None] * beta
            self.R = -self.loss.gradient(self.Y, self.F)
        self.coef = np.asarray(coef, dtype=np.float64).reshape(-1, self.m)

    def __getstate__(self):
        """The targets never change: keyed, so a pager writes them once. The residual (and
        fit) are keyed too: a pass that changed nothing in place (a pending column only) lets a
        pager keep the files it loaded them from."""
        state = keyed_state(self, ("_Y", "codes"))
        for name in ("R", "F"):
            if isinstance(state.get(name), np.ndarray):
                state[name] = Paged(f"{state['uid']}.{name}", state[name])
        return state

    def grow(self) -> None:
        """A column joined with coefficient 0: nothing moves."""
        self.coef = np.concatenate((self.coef, np.zeros((1, self.m))))  # np.vstack's values, without its wrapper

    def loss_sum(self) -> np.ndarray:
        """Training loss per output (m,) (other losses only)."""
        return self.loss.value(self.Y, self.F).sum(axis=0)

    @property
    def nbytes(self) -> int:
        y = self._Y.nbytes if self.codes is None else self.codes.nbytes + self.table.nbytes
        return y + self.R.nbytes + (0 if self.F is None else self.F.nbytes)
