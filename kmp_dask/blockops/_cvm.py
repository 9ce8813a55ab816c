"""Per-partition numerics of core vector machines and MMDA (Tsang, Kocsor & Kwok; DESIGN.md §3).

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
*Query*: :func:`cvm_furthest`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._journal import Effect
from ._partition import Partition
from ._state import ColumnCache, Workspace, kernel_block, readonly, sqnorm

__all__ = ["CVMSetup", "CVMQuery", "CVMFeature", "CVMState", "cvm_init", "cvm_targets", "cvm_add_feature",
           "cvm_furthest", "cvm_effects"]

BLOCK_ELEMENTS = 1 << 22


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
    the ``top`` furthest rows come back."""

    S: np.ndarray
    a: np.ndarray
    PS: np.ndarray
    aKa: float
    kappa: float
    cand: np.ndarray | None = None
    exclude: np.ndarray | None = None
    top: int = 1


@dataclass
class CVMState:
    X: np.ndarray
    sq: np.ndarray
    kernel: object
    y: np.ndarray | None
    proj: ColumnCache
    work: Workspace = field(default_factory=Workspace)

    @property
    def nbytes(self) -> int:
        return self.sq.nbytes + self.proj.nbytes + (0 if self.y is None else self.y.nbytes) + self.work.nbytes


def _st(part: Partition) -> CVMState:
    return part.state["cvm"]


def cvm_init(part: Partition, msg: CVMSetup) -> None:
    X = part.X
    part.state["cvm"] = CVMState(readonly(X), readonly(sqnorm(X)), msg.kernel, None,
                                 ColumnCache(len(X), 0, np.float64, msg.capacity))


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


def cvm_furthest(part: Partition, q: CVMQuery) -> dict:
    """Squared distances to the centre of the rows asked for; the ``top`` furthest: global
    ``index``, ``dist``, ``rows``, ``y`` and projections ``P``; plus ``n`` rows measured."""
    st = _st(part)
    if q.cand is None:
        local = np.arange(len(st.X))
    else:
        cand = np.asarray(q.cand, dtype=np.int64)
        lo, hi = np.searchsorted(cand, [part.start, part.stop])
        local = cand[lo:hi] - part.start
    if q.exclude is not None and len(q.exclude) and len(local):
        local = local[~np.isin(local + part.start, np.asarray(q.exclude, dtype=np.int64))]
    S = np.asarray(q.S, dtype=st.X.dtype).reshape(-1, st.X.shape[1])
    Ssq = sqnorm(S)
    a = np.asarray(q.a, dtype=np.float64)
    PS = np.asarray(q.PS, dtype=np.float64)
    P = st.proj.train()
    dist = np.empty(len(local))
    rows = max(1, BLOCK_ELEMENTS // max(len(S), 1))
    for lo in range(0, len(local), rows):
        sel = local[lo : lo + rows]
        K = kernel_block(st.kernel, st.X[sel], st.sq[sel], S, Ssq).astype(np.float64) if len(S) else \
            np.zeros((len(sel), 0))
        if P.shape[1] and len(S):
            K -= P[sel] @ PS.T
        dist[lo : lo + len(sel)] = q.aKa - 2.0 * st.y[sel] * (K @ a + a.sum()) + q.kappa
    top = min(int(q.top), len(local))
    best = np.argsort(-dist, kind="stable")[:top] if top else np.zeros(0, dtype=np.int64)
    rows_idx = local[best]
    return {"n": len(local), "index": rows_idx + part.start, "dist": dist[best], "rows": np.array(st.X[rows_idx]),
            "y": np.array(st.y[rows_idx]), "P": np.array(P[rows_idx])}
