"""Per-partition numerics of sparse kernel PCA by matching pursuit (Hussain & Shawe-Taylor §3).

Sparse KPCA greedily picks the point ``z`` maximising ``‖K̃[:, z]‖² / K̃(z, z)`` — the variance of
the data along the deflated direction ``φ̃(z)/‖φ̃(z)‖`` — then deflates ``K̃ ← K̃ − l lᵀ`` with
``l = K̃[:, z] / √K̃(z, z)``: a pivoted partial Cholesky of K (Smola & Schölkopf's sparse greedy
matrix approximation). The columns ``l_j(x)`` are the coordinates of ``φ(x)`` in the orthonormal
basis of ``span{φ(z_1) … φ(z_k)}`` (Gram–Schmidt), so ``L(x) = L_SS⁻¹ k_S(x)``.

State under ``part.state["kpca"]`` (:class:`KPCAState`): the rows and their squared norms, the
columns ``L`` (a :class:`~kmp_dask.blockops.ColumnCache`, like KMP's basis columns) and the
residual diagonal ``d(x) = K̃(x, x) = k(x, x) − ‖L(x)‖²`` — each point's squared distance to the
span, whose sum is the trace residual ``tr(K − LLᵀ)``.

Sparse KCCA (§4) is the same state over two *views* (column slices of the rows, each with its
own kernel, columns and residual): one chosen row deflates both.

*Effects* (slots ``kpca`` ⊃ ``kpca.columns``): :func:`kpca_init`, :func:`kpca_add` (the chosen
point's column and the deflated diagonal, per view). *Queries*: :func:`kpca_score` (candidate
sums, trace residual, largest residual, fetched rows), :func:`kpca_moments` (``Σ L``, ``LᵀL``
per view pair, for the directions inside the span).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._journal import Effect
from ._partition import Partition, fetch_rows
from ._results import KPCAMoments, KPCAScoreStats
from ._state import ColumnCache, Workspace, kernel_block, readonly, sqnorm

__all__ = ["KPCASetup", "KPCAColumn", "KPCAScoreQuery", "KPCAState", "ViewState", "kpca_init", "kpca_add",
           "kpca_score", "kpca_moments", "kpca_effects"]

#: Upper bound on the number of kernel values held at once per partition (row blocking).
BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class KPCASetup:
    """One kernel per *view*; ``columns[v]`` is view v's slice of the row's features (None: all
    of them). Sparse KPCA has one view; sparse KCCA two (the columns of each view side by side)."""

    kernels: tuple
    columns: tuple = (None,)
    capacity: int = 16


@dataclass(frozen=True)
class KPCAColumn:
    """The chosen point: its row ``z``, per view its coordinates ``lz[v]`` (k,) on the current
    columns and its residual ``dz[v] = K̃_v(z, z)`` (> 0); global row ``index``."""

    z: np.ndarray
    lz: tuple
    dz: tuple
    index: int


@dataclass(frozen=True)
class KPCAScoreQuery:
    """Candidates ``Z`` (s, d) with, per view, their coordinates ``LZ[v]`` (s, k) on the current
    columns (None: no candidates), and global rows to ``fetch``."""

    Z: np.ndarray | None = None
    LZ: tuple | None = None
    fetch: np.ndarray | None = None


@dataclass
class ViewState:
    """One view: its rows (a column slice of the partition's rows), squared norms, kernel,
    columns ``L`` and residual diagonal ``d``."""

    X: np.ndarray
    sq: np.ndarray
    kernel: object
    columns: object
    cache: ColumnCache
    d: np.ndarray

    @property
    def nbytes(self) -> int:
        own = self.X.nbytes if self.columns is not None else 0  # a slice is a copy
        return own + self.sq.nbytes + self.cache.nbytes + self.d.nbytes


@dataclass
class KPCAState:
    views: list
    work: Workspace = field(default_factory=Workspace)

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.views) + self.work.nbytes


def _view_rows(X, columns):
    return X if columns is None else np.ascontiguousarray(X[:, slice(*columns)])


def _st(part: Partition) -> KPCAState:
    return part.state["kpca"]


def kpca_init(part: Partition, msg: KPCASetup) -> None:
    views = []
    for kernel, columns in zip(msg.kernels, msg.columns, strict=True):
        X = _view_rows(part.X, columns)
        d = np.asarray(kernel.diag(X), dtype=np.float64).copy()
        views.append(ViewState(readonly(X), readonly(sqnorm(X)), kernel, columns,
                               ColumnCache(len(X), 0, X.dtype, msg.capacity), d))
    part.state["kpca"] = KPCAState(views)


def kpca_add(part: Partition, col: KPCAColumn) -> None:
    """Per view: append ``l(x) = (k(x, z) − L(x)·lz) / √dz`` and deflate ``d(x) −= l(x)²``."""
    st = _st(part)
    z_full = np.asarray(col.z).reshape(1, -1)
    for v, lz, dz in zip(st.views, col.lz, col.dz, strict=True):
        z = _view_rows(z_full, v.columns).astype(v.X.dtype, copy=False)
        lx = kernel_block(v.kernel, v.X, v.sq, z, sqnorm(z))[:, 0].astype(np.float64)
        if v.cache.n:
            lx -= v.cache.train().astype(np.float64, copy=False) @ np.asarray(lz, dtype=np.float64)
        lx /= np.sqrt(dz)
        v.cache.pend(lx.astype(v.cache.dtype, copy=False), lx[:0].astype(v.cache.dtype))
        v.cache.accept()
        v.d -= lx * lx
        np.maximum(v.d, 0.0, out=v.d)
        if part.start <= col.index < part.stop:
            v.d[col.index - part.start] = 0.0  # the chosen point now lies in the span, exactly


class kpca_effects:  # noqa: N801 (a namespace of Effect constructors)
    @staticmethod
    def init(kernels, columns=(None,), capacity: int = 16) -> Effect:
        return Effect(kpca_init, KPCASetup(tuple(kernels), tuple(columns), int(capacity)), "kpca", resets=True)

    @staticmethod
    def add(col: KPCAColumn) -> Effect:
        return Effect(kpca_add, col, "kpca.columns")


def kpca_score(part: Partition, q: KPCAScoreQuery) -> KPCAScoreStats:
    """Per view: ``trace`` (V,) = Σ d(x), ``dmax`` (V,) the largest residual; for candidates
    ``Z``: ``sq`` (V, s) = Σ_x K̃_v(x, z)² and, with two views, ``cross`` (s,) = Σ_x K̃_0(x, z)
    K̃_1(x, z) over the partition's rows; fetched rows (a :class:`~kmp_dask.blockops._results.KPCAScoreStats`)."""
    st = _st(part)
    out = {"trace": np.array([v.d.sum() for v in st.views]), "n": len(st.views[0].d),
           "dmax": np.array([v.d.max() if len(v.d) else 0.0 for v in st.views])}
    if q.Z is not None and len(q.Z):
        out.update(_candidate_sums(st, q))
    if q.fetch is not None:
        out["fetched"] = fetch_rows(part, q.fetch)
    return KPCAScoreStats(**out)


def _candidate_sums(st: KPCAState, q: KPCAScoreQuery) -> dict:
    """``sq`` (V, s) and, with two views, ``cross`` (s,) over the partition's rows, blocked."""
    V = len(st.views)
    Z_full = np.asarray(q.Z)
    s = len(Z_full)
    n_rows = len(st.views[0].X)
    rows = max(1, BLOCK_ELEMENTS // max(s, 1))
    sq = np.zeros((V, s))
    cross = np.zeros(s) if V == 2 else None
    Zs = [_view_rows(Z_full, v.columns).astype(v.X.dtype, copy=False) for v in st.views]
    Zsq = [sqnorm(Z) for Z in Zs]
    LZ = [None if q.LZ is None or v.cache.n == 0 else np.asarray(q.LZ[i], dtype=np.float64)
          for i, v in enumerate(st.views)]
    for a in range(0, n_rows, rows):
        b = min(a + rows, n_rows)
        blocks = []
        for i, v in enumerate(st.views):
            K = kernel_block(v.kernel, v.X[a:b], v.sq[a:b], Zs[i], Zsq[i]).astype(np.float64, copy=False)
            if LZ[i] is not None:
                K = K - v.cache.train()[a:b].astype(np.float64, copy=False) @ LZ[i].T
            sq[i] += np.einsum("ij,ij->j", K, K)
            blocks.append(K)
        if cross is not None:
            cross += np.einsum("ij,ij->j", blocks[0], blocks[1])
    return {"sq": sq, "cross": cross}


def kpca_moments(part: Partition, msg=None) -> KPCAMoments:
    """``n``, per view ``sums[v]`` = Σ_x L_v(x) (k,), and ``gram[(u, v)]`` = Σ_x L_u(x) L_v(x)ᵀ
    (k, k) for u ≤ v, in float64."""
    st = _st(part)
    Bs = [v.cache.train().astype(np.float64, copy=False) for v in st.views]
    gram = {}
    for u in range(len(Bs)):
        for w in range(u, len(Bs)):
            gram[(u, w)] = Bs[u].T @ Bs[w]
    return KPCAMoments(Bs[0].shape[0], tuple(B.sum(axis=0) for B in Bs), gram)
