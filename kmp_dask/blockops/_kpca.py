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

*Effects* (slots ``kpca`` ⊃ ``kpca.columns``): :func:`kpca_init`, :func:`kpca_add` (the chosen
point's column and the deflated diagonal). *Queries*: :func:`kpca_score` (candidate scores,
trace residual, largest residual, fetched rows), :func:`kpca_moments` (``Σ L``, ``LᵀL`` for the
principal directions inside the span).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._journal import Effect
from ._partition import Partition, fetch_rows
from ._state import ColumnCache, Workspace, cross64, kernel_block, readonly, sqnorm

__all__ = ["KPCASetup", "KPCAColumn", "KPCAScoreQuery", "KPCAState", "kpca_init", "kpca_add", "kpca_score",
           "kpca_moments", "kpca_effects"]

#: Upper bound on the number of kernel values held at once per partition (row blocking).
BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class KPCASetup:
    kernel: object
    capacity: int = 16


@dataclass(frozen=True)
class KPCAColumn:
    """The chosen point: its row ``z``, its coordinates ``lz`` (k,) on the current columns and
    its residual ``dz = K̃(z, z)`` (> 0); global row ``index``."""

    z: np.ndarray
    lz: np.ndarray
    dz: float
    index: int


@dataclass(frozen=True)
class KPCAScoreQuery:
    """Candidates ``Z`` (s, d) with their coordinates ``LZ`` (s, k) on the current columns (None:
    no candidates), and global rows to ``fetch``."""

    Z: np.ndarray | None = None
    LZ: np.ndarray | None = None
    fetch: np.ndarray | None = None


@dataclass
class KPCAState:
    X: np.ndarray
    sq: np.ndarray
    kernel: object
    cache: ColumnCache
    d: np.ndarray
    work: Workspace = field(default_factory=Workspace)

    @property
    def nbytes(self) -> int:
        return self.sq.nbytes + self.cache.nbytes + self.d.nbytes + self.work.nbytes


def _st(part: Partition) -> KPCAState:
    return part.state["kpca"]


def kpca_init(part: Partition, msg: KPCASetup) -> None:
    X = part.X
    d = np.asarray(msg.kernel.diag(X), dtype=np.float64).copy()
    part.state["kpca"] = KPCAState(readonly(X), readonly(sqnorm(X)), msg.kernel,
                                   ColumnCache(len(X), 0, X.dtype, msg.capacity), d)


def kpca_add(part: Partition, col: KPCAColumn) -> None:
    """Append ``l(x) = (k(x, z) − L(x)·lz) / √dz`` and deflate ``d(x) −= l(x)²`` (clipped at 0)."""
    st = _st(part)
    z = np.asarray(col.z, dtype=st.X.dtype).reshape(1, -1)
    l = kernel_block(st.kernel, st.X, st.sq, z, sqnorm(z))[:, 0].astype(np.float64)
    if st.cache.n:
        l -= st.cache.train().astype(np.float64, copy=False) @ np.asarray(col.lz, dtype=np.float64)
    l /= np.sqrt(col.dz)
    st.cache.pend(l.astype(st.cache.dtype, copy=False), l[:0].astype(st.cache.dtype))
    st.cache.accept()
    st.d -= l * l
    np.maximum(st.d, 0.0, out=st.d)
    lo, hi = part.start, part.stop
    if lo <= col.index < hi:
        st.d[col.index - lo] = 0.0  # the chosen point now lies in the span, exactly


class kpca_effects:  # noqa: N801 (a namespace of Effect constructors)
    @staticmethod
    def init(kernel, capacity: int = 16) -> Effect:
        return Effect(kpca_init, KPCASetup(kernel, int(capacity)), "kpca", resets=True)

    @staticmethod
    def add(col: KPCAColumn) -> Effect:
        return Effect(kpca_add, col, "kpca.columns")


def kpca_score(part: Partition, q: KPCAScoreQuery) -> dict:
    """``trace`` = Σ d(x); ``dmax``/``argmax`` = the largest residual and its global row;
    for candidates ``Z``: ``sq`` (s,) = Σ_x K̃(x, z)² over the partition's rows; fetched rows."""
    st = _st(part)
    out = {"trace": float(st.d.sum()), "n": len(st.d)}
    i = int(np.argmax(st.d)) if len(st.d) else 0
    out["dmax"] = float(st.d[i]) if len(st.d) else 0.0
    out["argmax"] = part.start + i
    if q.Z is not None and len(q.Z):
        Z = np.asarray(q.Z, dtype=st.X.dtype)
        Zsq = sqnorm(Z)
        s = len(Z)
        LZ = None if q.LZ is None or st.cache.n == 0 else np.asarray(q.LZ, dtype=np.float64)
        B = st.cache.train()
        rows = max(1, BLOCK_ELEMENTS // max(s, 1))
        acc = np.zeros(s)
        for a in range(0, len(st.X), rows):
            b = min(a + rows, len(st.X))
            K = kernel_block(st.kernel, st.X[a:b], st.sq[a:b], Z, Zsq).astype(np.float64, copy=False)
            if LZ is not None:
                K = K - B[a:b].astype(np.float64, copy=False) @ LZ.T
            acc += np.einsum("ij,ij->j", K, K)
        out["sq"] = acc
    if q.fetch is not None:
        out["fetched"] = fetch_rows(part, q.fetch)
    return out


def kpca_moments(part: Partition, msg=None) -> dict:
    """``n``, ``sum`` = Σ_x L(x) (k,) and ``gram`` = Σ_x L(x) L(x)ᵀ (k, k), in float64."""
    st = _st(part)
    B = st.cache.train()
    k = B.shape[1]
    B64 = B.astype(np.float64, copy=False)
    gram = B64.T @ B64 if k else np.zeros((0, 0))
    return {"n": B.shape[0], "sum": cross64(B, np.ones(B.shape[0])) if k else np.zeros(0), "gram": gram}
