"""Per-partition numerics of core vector machines and MMDA (Tsang, Kocsor & Kwok, KDD 2006; equations in docs/cvm.md).

The L2-SVM on pairs ``(x_i, y_i)`` is a minimum enclosing ball in the feature space of
``k̃(z_i, z_j) = y_i y_j (k̂(x_i, x_j) + 1) + δ_ij / C``, where ``k̂`` is the kernel deflated by the
MMDA features found so far, ``k̂(a, b) = k(a, b) − P(a)·P(b)`` with ``P_q(x) = u_qᵀφ(x)``. The
driver holds the core set S and its weights α; a data pass measures every row's squared
distance to the ball's centre,

    ‖c − φ̃(x_i)‖² = αᵀK̃_Sα − 2 y_i (aᵀ k̂(S, x_i) + Σ a) + κ̃,      a = α ∘ y_S,

(``κ̃ = κ + 1 + 1/C``, the constant diagonal; rows of S are excluded, so no δ term) and returns
the furthest rows.

State under ``part.state["cvm"]`` (:class:`CVMState`): rows, squared norms, ±1 targets of the
current binary problem, and the projections ``P`` on the features found so far (a
:class:`~kmp_dask.blockops.ColumnCache`). *Effects* (slots ``cvm`` ⊃ ``cvm.targets``,
``cvm.features``): :func:`cvm_init`, :func:`cvm_targets`, :func:`cvm_add_feature`.
*Query*: :func:`cvm_furthest` (answers :class:`~kmp_dask.blockops._results.CVMFurthest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._journal import Effect
from ._partition import Partition
from ._results import CVMFurthest
from ._state import ColumnCache, Workspace, kernel_block, readonly, sqnorm

__all__ = ["CVMSetup", "CVMQuery", "KernelColumns", "KERNEL_CACHE_BYTES", "CVMFeature", "CVMState", "cvm_init",
           "cvm_targets", "cvm_add_feature",
           "cvm_furthest", "cvm_effects"]

BLOCK_ELEMENTS = 1 << 18


@dataclass(frozen=True)
class CVMSetup:
    kernel: object
    capacity: int = 16


@dataclass(frozen=True)
class CVMFeature:
    """A new MMDA feature ``u = (I − UUᵀ) Σ_s a_s φ(x_s) / ‖w‖`` over core rows ``S``:
    ``P_new(x) = (k(x, S)·a − P(x)·PSa) / norm`` with ``PSa = P_Sᵀ a`` (the earlier features)."""

    S: np.ndarray
    a: np.ndarray
    PSa: np.ndarray
    norm: float


@dataclass(frozen=True)
class CVMQuery:
    """Core rows ``S`` (|S|, d), ``a = α ∘ y_S``, their projections ``PS`` (|S|, q), ``aKa = αᵀK̃_Sα``,
    ``kappa`` = κ̃; ``cand`` sorted global rows to measure (None: all) minus ``exclude`` (sorted);
    the ``top`` furthest rows come back. ``ids``: the global rows of ``S`` in order of entry — with
    them a partition keeps the kernel columns ``k(x, s)`` of the core rows it computed on a full
    pass (:class:`KernelColumns`) and later passes read them instead of recomputing; an empty
    ``S`` starts a new core set (the cache is dropped)."""

    S: np.ndarray
    a: np.ndarray
    PS: np.ndarray
    aKa: float
    kappa: float
    cand: np.ndarray | None = None
    exclude: np.ndarray | None = None
    top: int = 1
    ids: np.ndarray | None = None


KERNEL_CACHE_BYTES = 64 << 20
"""Per partition, the most memory the cached kernel columns of the core set may take (float64,
rows × columns × 8 bytes): a 2,000-row partition keeps 4,096 columns, a 50,000-row one 167 (the
core rows beyond that are recomputed on every pass, as without a cache)."""


class KernelColumns:
    """``k(x, s)`` over the partition's rows for a prefix of the current core set (column-major,
    grown by doubling up to :data:`KERNEL_CACHE_BYTES`).

    A cache, not state: nothing the journal replays writes it, it is dropped when a partition pages
    out or is rebuilt (``__getstate__``), and a pass that finds it not to be a prefix of the core
    set it is asked about starts it again. Every pass (sampled ones too) first computes the
    columns of core rows that joined since the last one, on all the partition's rows: one column
    per iteration, after which a sampled pass is a row gather and a product, and a full pass a
    matrix–vector product. Kernel values do not depend on the binary problem nor
    on the MMDA deflation (applied as ``P (PSᵀ a)`` after the product), so a core set's columns are
    computed once per partition instead of once per pass."""

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self.max_cols = max(0, KERNEL_CACHE_BYTES // max(8 * n_rows, 1))
        self.K = None  # (n_rows, max_cols) column-major, allocated on first use: untouched columns stay virtual
        self.ids = np.zeros(0, dtype=np.int64)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return 8 * self.n_rows * self.n

    def reset(self):
        self.ids = np.zeros(0, dtype=np.int64)

    def prefix(self, ids) -> int:
        """How many leading core rows ``ids`` have cached columns (the cache restarts when its
        columns are not a prefix of ``ids``)."""
        if ids is None:
            return 0
        m = min(self.n, len(ids))
        if not np.array_equal(self.ids[:m], np.asarray(ids[:m], dtype=np.int64)):
            self.reset()
            return 0
        return m

    def room(self) -> int:
        return max(0, self.max_cols - self.n)

    def append(self, ids, cols: np.ndarray) -> None:
        k = cols.shape[1]
        if self.K is None:
            self.K = np.empty((self.n_rows, self.max_cols), order="F")
        self.K[:, self.n : self.n + k] = cols
        self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])

    def __getstate__(self):  # a cache: never written when a partition pages out
        return {"n_rows": self.n_rows}

    def __setstate__(self, state):
        self.__init__(state["n_rows"])


@dataclass
class CVMState:
    X: np.ndarray
    sq: np.ndarray
    kernel: object
    y: np.ndarray | None
    proj: ColumnCache
    work: Workspace = field(default_factory=Workspace)
    kcols: KernelColumns | None = None

    @property
    def nbytes(self) -> int:
        return self.sq.nbytes + self.proj.nbytes + (0 if self.y is None else self.y.nbytes) + self.work.nbytes + \
            (0 if self.kcols is None else self.kcols.nbytes)


def _st(part: Partition) -> CVMState:
    return part.state["cvm"]


def cvm_init(part: Partition, msg: CVMSetup) -> None:
    X = part.X
    part.state["cvm"] = CVMState(readonly(X), readonly(sqnorm(X)), msg.kernel, None,
                                 ColumnCache(len(X), 0, np.float64, msg.capacity), kcols=KernelColumns(len(X)))


def cvm_targets(part: Partition, positive) -> None:
    """±1 targets of the binary problem "label == positive" (one-vs-rest)."""
    st = _st(part)
    st.y = readonly(np.where(np.asarray(part.y).reshape(-1) == positive, 1.0, -1.0))


def cvm_add_feature(part: Partition, f: CVMFeature) -> None:
    """Append the new feature's value ``P_new(x)`` on every row (deflated by the earlier ones)."""
    st = _st(part)
    S = np.asarray(f.S, dtype=st.X.dtype)
    a = np.asarray(f.a, dtype=np.float64)
    col = np.zeros(len(st.X))
    rows = max(1, BLOCK_ELEMENTS // max(len(S), 1))
    Ssq = sqnorm(S)
    for lo in range(0, len(st.X), rows):
        hi = min(lo + rows, len(st.X))
        col[lo:hi] = kernel_block(st.kernel, st.X[lo:hi], st.sq[lo:hi], S, Ssq).astype(np.float64) @ a
    P = st.proj.train()
    if P.shape[1]:
        col -= P @ np.asarray(f.PSa, dtype=np.float64)
    col /= f.norm
    st.proj.pend(col, col[:0])
    st.proj.accept()


class cvm_effects:  # noqa: N801 (a namespace of Effect constructors)
    @staticmethod
    def init(kernel, capacity: int = 16) -> Effect:
        return Effect(cvm_init, CVMSetup(kernel, int(capacity)), "cvm", resets=True)

    @staticmethod
    def targets(positive) -> Effect:
        return Effect(cvm_targets, positive, "cvm.targets", resets=True)

    @staticmethod
    def add_feature(S, a, PSa, norm) -> Effect:
        return Effect(cvm_add_feature, CVMFeature(np.asarray(S), np.asarray(a, dtype=np.float64),
                                                  np.asarray(PSa, dtype=np.float64), float(norm)), "cvm.features")

    @staticmethod
    def clear_features() -> Effect:
        return Effect(_clear_features, None, "cvm.features", resets=True)


def _clear_features(part: Partition, msg=None) -> None:
    st = _st(part)
    st.proj = ColumnCache(len(st.X), 0, np.float64, st.proj.Btr.shape[1])


def _kernel_f64(st, X, Xsq, S, Ssq):
    return kernel_block(st.kernel, X, Xsq, S, Ssq).astype(np.float64, copy=False)


def _rows_to_measure(part: Partition, q: CVMQuery, n_part: int):
    """The partition's local rows the query measures — ``q.cand`` (None: all rows) minus
    ``q.exclude`` — and whether the pass is a full one (``q.cand`` None)."""
    full = q.cand is None
    if full:
        keep = np.ones(n_part, dtype=bool)
    else:
        cand = np.asarray(q.cand, dtype=np.int64)
        lo, hi = np.searchsorted(cand, [part.start, part.stop])
        local = cand[lo:hi] - part.start
    if q.exclude is not None and len(q.exclude):
        ex = np.asarray(q.exclude, dtype=np.int64)
        lo, hi = np.searchsorted(ex, [part.start, part.stop])
        ex = ex[lo:hi] - part.start
        if full:
            keep[ex] = False
        elif len(local) and len(ex):
            local = local[~np.isin(local, ex, assume_unique=True)]
    if full:
        local = np.flatnonzero(keep) if not keep.all() else np.arange(n_part)
    return local, full


def _cached_core_columns(st: CVMState, q: CVMQuery, S: np.ndarray, n_part: int):
    """The kernel column cache, how many leading core rows it holds columns of (after adding those
    of the core rows that joined since the last pass, as room allows) and the kernel values that
    took."""
    kc = st.kcols if st.kcols is not None else None
    if kc is not None and q.ids is not None and len(S) == 0:
        kc.reset()
    m = kc.prefix(q.ids) if kc is not None and q.ids is not None else 0
    evals = 0
    if kc is not None and q.ids is not None and m < len(S) and kc.room():
        m, evals = _append_core_columns(st, kc, q.ids, S, m, n_part)
    return kc, m, evals


def _append_core_columns(st: CVMState, kc: KernelColumns, ids, S: np.ndarray, m: int, n_part: int):
    """Compute and cache the columns of the core rows from ``m`` on (as many as there is room for);
    returns the new cached prefix length and the kernel values computed."""
    # the core rows without cached columns (normally the one that joined last): computed on
    # all rows once, kept for later passes. One column at a time, always: a cache rebuilt after
    # a partition was lost, paged out or a fit resumed from its checkpoint then holds bit for
    # bit the values the loop computed when each row joined (a many-column kernel block may
    # round differently), so the rebuilt fit's distances — and model — are identical.
    new = slice(m, m + min(len(S) - m, kc.room()))
    cols = np.empty((n_part, new.stop - new.start))
    step = max(1, BLOCK_ELEMENTS)
    for j in range(new.start, new.stop):
        for r0 in range(0, n_part, step):
            r1 = min(r0 + step, n_part)
            cols[r0:r1, j - new.start] = _kernel_f64(st, st.X[r0:r1], st.sq[r0:r1], S[j : j + 1],
                                                     sqnorm(S[j : j + 1]))[:, 0]
    evals = cols.size
    kc.append(np.asarray(ids)[new], cols)
    return new.stop, evals


def _centre_products(st: CVMState, local, contiguous: bool, S, Ssq, a, kc, m: int, P, defl, PSa):
    """``k̂(S, x)·a`` on the rows ``local`` (deflated): the first ``m`` core rows' columns read
    from the cache, the rest computed in blocks; returns them and the kernel values computed."""
    rest = slice(m, len(S))
    f = np.empty(len(local))
    evals = 0
    rows = max(1, BLOCK_ELEMENTS // max(len(S) - m, 1))
    for lo in range(0, len(local), rows):
        sel = slice(lo, lo + rows) if contiguous else local[lo : lo + rows]
        nsel = len(local[lo : lo + rows])
        v = np.zeros(nsel)
        if m:
            v += kc.K[sel, :m] @ a[:m]
        if rest.stop > rest.start:
            v += _kernel_f64(st, st.X[sel], st.sq[sel], S[rest], Ssq[rest]) @ a[rest]
            evals += nsel * (rest.stop - rest.start)
        if defl:
            v -= P[sel] @ PSa
        f[lo : lo + nsel] = v
    return f, evals


def _furthest_first(dist: np.ndarray, top) -> np.ndarray:
    """Positions of the ``top`` largest ``dist``, largest first (ties in order of position)."""
    top = min(int(top), len(dist))
    if top >= len(dist):
        best = np.argsort(-dist, kind="stable")
    elif top:
        best = np.argpartition(-dist, top - 1)[:top]
        best = best[np.argsort(-dist[best], kind="stable")]
    else:
        best = np.zeros(0, dtype=np.int64)
    return best


def cvm_furthest(part: Partition, q: CVMQuery) -> CVMFurthest:
    """Squared distances to the centre of the rows asked for (:class:`~kmp_dask.blockops._results.CVMFurthest`):
    the ``top`` furthest — global ``index``, ``dist``, ``rows``, ``y`` and projections ``P`` — plus
    ``n`` rows measured, ``kernel_evals`` (kernel values computed here: those read from the
    column cache are not) and ``n_wrong``, the rows measured with ``y f(x) < 0``: since
    ``dist = aKa − 2 y f(x) + kappa``, those with ``dist > aKa + kappa``."""
    st = _st(part)
    n_part = len(st.X)
    local, full = _rows_to_measure(part, q, n_part)
    S = np.asarray(q.S, dtype=st.X.dtype).reshape(-1, st.X.shape[1])
    Ssq = sqnorm(S)
    a = np.asarray(q.a, dtype=np.float64)
    P = st.proj.train()
    defl = P.shape[1] and len(S)
    PSa = np.asarray(q.PS, dtype=np.float64).T @ a if defl else None  # deflation: (K − P PSᵀ) a = K a − P (PSᵀ a)
    kc, m, evals = _cached_core_columns(st, q, S, n_part)
    f, rest_evals = _centre_products(st, local, full and len(local) == n_part, S, Ssq, a, kc, m, P, defl, PSa)
    evals += rest_evals
    dist = q.aKa - 2.0 * st.y[local] * (f + a.sum()) + q.kappa
    best = _furthest_first(dist, q.top)
    rows_idx = local[best]
    return CVMFurthest(n=len(local), kernel_evals=int(evals), index=rows_idx + part.start, dist=dist[best],
                       rows=np.array(st.X[rows_idx]), y=np.array(st.y[rows_idx]), P=np.array(P[rows_idx]),
                       n_wrong=int(np.count_nonzero(dist > q.aKa + q.kappa)))
