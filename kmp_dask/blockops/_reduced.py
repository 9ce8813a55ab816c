"""Per-partition numerics of reduced-set selection (Weston & Bakır), NumPy only.

The data are a *candidate pool* ``z_1 … z_P`` (rows of a store) and a kernel expansion
``w = Σ_i α_i φ(x_i)`` with m outputs. Hyperplane matching pursuit needs, at every pool point,
the value of the residual hyperplane ``r(z) = ⟨w − ŵ, φ(z)⟩ = f(z) − f̂(z)``: selection is
pointwise (``score(z) = Σ_j r_j(z)² / k(z, z)``, eq. 13), so a scoring pass computes no kernel
values at all — the expensive pass is the first one, which evaluates ``f`` on the pool.

``criterion="decrease"`` scores ``Σ_j r_j(z)² / δ(z)`` instead, ``δ(z) = k(z,z) − k_S(z)ᵀ K_SS⁻¹
k_S(z)`` (the part of ``φ(z)`` orthogonal to the selected vectors: the exact fall of the RKHS
error when z joins with backfitting). A partition tracks ``δ`` for its rows (``delta``, rows ×
float64: the only added state). Why no ``Q`` (the orthonormalised columns, rows × k — as much
again as the basis cache) and no triangular solve (``‖L⁻¹ k_S(z)‖²`` per row: O(rows · k²) per
recomputation): backfitting's residual move already forms ``u = d − B w`` with ``w = K_old⁻¹
k_old(ẑ)``, which *is* the new vector's column made orthogonal to the earlier ones, ``u =
L_kk · q``. So the move that brings the residual along (:func:`rs_orth_move`) also subtracts
``q² = (u / L_kk)²`` from ``δ``: O(rows) more than the eq.-13 move, no second GEMV over the
cache. ``δ`` accumulates every update since the pursuit started, so these moves live in their
own journal slot ``rs.fit.delta``, never reset by a residual resync (``rs.fit.residual``): the
journal keeps all of them — O(k) floats each (``w``), n²/2 for a path of n vectors, the size of
the driver's own Cholesky factor — and a rebuilt partition replays them in order (the residual
moves among them are overwritten by the last resync, as live). Their message carries no
coefficient matrix (an eq.-13 ``Move`` carries (k, m)): the residual's coefficients are brought
along on the partition by the driver's own update (the same operations on the same numbers).

State under ``part.state["rs"]`` (an :class:`RSState`):

``X``, ``sq``  the pool rows and their squared norms (read-only)
``kdiag``      ``k(z, z)`` per row
``F``          ``f(z)`` per row and output, without intercept (read-only: the pursuit's targets)
``cache``      basis columns ``k(z, ẑ_j)`` over the pool (:class:`~kmp_dask.blockops.ColumnCache`)
``fit``        ``R = F[:, outputs] − B β`` (:class:`~kmp_dask.blockops.Residual`)
``delta``      ``δ(z)`` per row (``criterion="decrease"`` only; None otherwise)
``xch``        single-vector exchanges of a level (:class:`XState`; None outside an exchange)

*Effects* (journal slots ``rs`` ⊃ ``rs.fit`` ⊃ ``rs.fit.columns`` / ``rs.fit.residual`` /
``rs.fit.delta``): :func:`rs_init` (rows, ``kdiag``, ``F`` from the expansion), :func:`rs_start`
(a pursuit on some outputs), the generic column / residual effects of :class:`rs_effects` and
:func:`rs_orth_move` (residual and ``δ``, ``criterion="decrease"``). *Queries*:
:func:`rs_stats` (``‖w‖²`` when the pool carries the expansion's own coefficients),
:func:`rs_score` (best candidates), :func:`rs_values` (fitted values at chosen levels).

*Exchanges* (:func:`~kmp_dask.greedy._exchange.engine_exchange`, the engine twin of
:func:`~kmp_dask.greedy.exchange_vectors`): :func:`rs_xstart` copies the pursuit's first k cached
columns into the exchange's own ``B`` (rows × k float64: the pursuit's cache stays intact, so
several levels can be exchanged one after the other) and sets ``M = B A``, ``r = F − B β``, ``d``;
:func:`rs_xcol` replaces column i of ``B`` by ``k(rows, z)``; :func:`rs_xswap` is the rank-one
removal of position i and insertion of z (the arithmetic of ``_Exchange._replace``, with the
driver's ``A`` row, ``u`` and ``k(S, z)`` in the message); :func:`rs_xsync` recomputes ``M``,
``r``, ``d`` from ``B`` and the driver's fresh ``A``, ``β``. Slots: ``rs.xch`` (reset by a start),
``rs.xch.cols`` (column replacements: never dropped by a resync) and ``rs.xch.state`` (swaps'
rank-one moves, reset by a resync): a rebuilt partition replays the start, every column
replacement and the moves since the last resync, in their order. Queries: :func:`rs_xrows`
(``B`` and ``F`` at chosen pool rows: the driver's ``K_SS`` and ``f(S)``), :func:`rs_xscreen`
(per position, the partition's best replacement score and the own score) and :func:`rs_xtry`
(one position scored in the current state: the partition's best row and what a swap needs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..linalg import rank_one_update
from ._expansion import predict_block
from ._journal import Effect
from ._kmp import Atom, Move
from ._partition import Partition
from ._results import RSScoreStats, RSStats, RSValues
from ._state import ColumnCache, Residual, Workspace, kernel_block, readonly, sqnorm

__all__ = [
    "RSSetup", "RSStart", "RSScoreQuery", "RSValuesQuery", "RSOrthMove", "RSState", "rs_init", "rs_start",
    "rs_orth_move", "rs_stats", "rs_score", "rs_values", "rs_effects", "SCORE_CRITERIA", "removal_scores",
    "xch_rows_sync", "xch_rows_removed", "xch_row_scores", "xch_rows_swap",
    "XState", "RSXRowsQuery", "RSXScreenQuery", "RSXTryQuery", "RSXSwap", "rs_xstart", "rs_xcol", "rs_xswap",
    "rs_xsync", "rs_xrows", "rs_xscreen", "rs_xtry", "xch_effects",
]

SCORE_CRITERIA = ("eq13", "decrease")
"""Selection scores a partition computes: ``Σ_j r_j² / k(z,z)`` or ``Σ_j r_j² / δ(z)``."""

DELTA_EPS_FACTOR = 256
"""With ``criterion="decrease"`` a row scores 0 (treated as in the span) when ``δ ≤ floor ·
k(z,z)``, ``floor = max(min_pivot, DELTA_EPS_FACTOR · eps)`` of the cache dtype: float64 gives
the driver's ``MIN_PIVOT`` (as the in-process pursuit); a float32 cache's kernel values carry
~1e-7 relative error, so ``δ`` below ~3e-5 · k(z,z) is rounding there, and ``r²/δ`` of rounding
would be an arbitrary score."""


def removal_scores(Mi, r, d, beta_i, Aii, ok_base):
    """Exchange scores ``Σ_j r'_j(z)² / d'(z)`` (rows × positions) of every row as the replacement
    of each position i in a block, in the state without i: ``r' = r + M[:, i] β_iᵀ / A_ii``,
    ``d' = d + M[:, i]² / A_ii`` (``Mi`` rows × block, ``beta_i`` block × m, ``Aii`` (block,));
    rows with ``d' ≤ ok_base`` (rows × 1: ``min_pivot · k(z, z)``) score −inf. Shared by the
    in-process exchange (:mod:`kmp_dask.greedy._exchange`) and the partitions' screening query."""
    d2 = d[:, None] + Mi * Mi / Aii
    num = np.zeros_like(d2)
    for j in range(r.shape[1]):
        rj = r[:, j, None] + Mi * (beta_i[:, j] / Aii)
        num += rj * rj
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d2 > ok_base, num / d2, -np.inf)


def xch_rows_sync(B, F, kdiag, A, beta):
    """An exchange's row state from scratch (no drift): ``M = B A`` (Fortran-ordered), ``r = F − B β``
    and ``d(z) = k(z, z) − M[z]·B[z]`` for a block of rows (all of a numpy pool, or a partition's)."""
    M = np.asfortranarray(B @ np.asarray(A, dtype=np.float64))
    r = F - B @ np.asarray(beta, dtype=np.float64)
    d = kdiag - np.einsum("ij,ij->i", M, B)
    return M, r, d


def xch_rows_removed(M, r, d, i, beta_i, Aii):
    """``r`` and ``d`` of the rows with position ``i`` removed from the set (exact rank one)."""
    a = M[:, i]
    return r + np.outer(a, beta_i / Aii), d + a * a / Aii


def xch_row_scores(r, d, kdiag, min_pivot):
    """``Σ_j r_j(z)² / d(z)`` per row; −inf where ``d ≤ min_pivot · k(z, z)`` (in the span)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > min_pivot * kdiag, np.einsum("ij,ij->i", r, r) / d, -np.inf)


def xch_rows_swap(B, M, r_removed, d_removed, i, Ai, u, bS, delta, rz):
    """The rows' half of a swap at position ``i`` (``B[:, i]`` already the new vector's column):
    ``M`` loses position i (``A[i]/A_ii = Ai``) in place, then gains the new vector through the
    bordered inverse (``u = A' k(S', z)``, ``bS = k(S, z)``, ``delta = d_{−i}(z)``, ``rz =
    r_{−i}(z)``). Returns the new ``r``, ``d`` from the removed-state ones."""
    rank_one_update(-1.0, M[:, i].copy(), Ai, M)              # column i → 0: the set without i
    e = (B[:, i] - M @ bS) / delta                            # bS[i] meets M's zero column
    r = r_removed - np.outer(e, rz)
    d = d_removed - delta * e * e
    rank_one_update(-1.0, e, u, M)
    M[:, i] = e
    return r, d


# -- messages --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RSSetup:
    """The expansion to compress (centres, coefficients (n, m), its one kernel) and, when the
    pool rows may be the expansion's own centres in order, their coefficients (``pool_coef``,
    (P, m)) so that ``‖w‖² = Σ_i α_i f(x_i)`` is a pass, not an O(n²) product on the driver.
    Each partition checks that its rows are those centres (exactly) before using them."""

    centres: np.ndarray
    coef: np.ndarray
    kernel: object
    pool_coef: np.ndarray | None = None


@dataclass(frozen=True)
class RSStart:
    """Start a pursuit on ``outputs`` (indices into the expansion's outputs)."""

    outputs: tuple
    capacity: int = 16
    track_delta: bool = False  #: keep ``δ(z)`` per row (``criterion="decrease"``)


@dataclass(frozen=True)
class RSScoreQuery:
    """Best ``top`` candidates of the partition: among all its rows (``cand=None``) or among
    the sorted global indices ``cand``; rows in ``exclude`` (sorted) are never returned.
    ``criterion`` (:data:`SCORE_CRITERIA`): divide ``Σ_j r_j²`` by ``k(z, z)`` or by ``δ(z)``
    (rows with ``δ ≤ floor · k(z, z)`` score 0, see :data:`DELTA_EPS_FACTOR`)."""

    cand: np.ndarray | None = None
    exclude: np.ndarray | None = None
    top: int = 4
    criterion: str = "eq13"
    min_pivot: float = 1e-10


@dataclass(frozen=True)
class RSValuesQuery:
    """Fitted values ``f̂ = B·coef`` at several levels: ``coefs`` is a tuple of (n_k, m) prefix
    coefficient matrices over the first n_k cached columns; returns squared pool errors
    ``Σ (f − f̂)²`` per level and output, and optionally the values themselves."""

    coefs: tuple
    values: bool = False


@dataclass(frozen=True)
class RSOrthMove:
    """Backfitting's move after the last accepted column ``d = k(·, ẑ)`` (``criterion="decrease"``):
    ``w = K_old⁻¹ k_old(ẑ)`` (None for the first vector), ``beta`` (m,) the new coefficient
    ``r(ẑ)/δ(ẑ)``, ``Lkk = √δ(ẑ)`` (the Cholesky pivot) and ``index`` the global pool row of ẑ."""

    w: np.ndarray | None
    beta: np.ndarray
    Lkk: float
    index: int = -1


# -- state -----------------------------------------------------------------------------------
@dataclass
class RSState:
    X: np.ndarray
    sq: np.ndarray
    kdiag: np.ndarray
    F: np.ndarray
    pool_coef: np.ndarray | None
    kernel: object
    outputs: tuple = ()
    cache: ColumnCache | None = None
    fit: Residual | None = None
    delta: np.ndarray | None = None
    xch: XState | None = None
    work: Workspace = field(default_factory=Workspace)

    @property
    def nbytes(self) -> int:
        own = self.sq.nbytes + self.kdiag.nbytes + self.F.nbytes
        own += 0 if self.pool_coef is None else self.pool_coef.nbytes
        if self.cache is not None:
            own += self.cache.nbytes + self.fit.nbytes
        own += 0 if self.delta is None else self.delta.nbytes
        own += 0 if self.xch is None else self.xch.nbytes
        return own + self.work.nbytes


def _rs(part: Partition) -> RSState:
    return part.state["rs"]


# -- effects ---------------------------------------------------------------------------------
def rs_init(part: Partition, msg: RSSetup) -> None:
    """Pool rows, ``k(z, z)`` and ``F = f(z)`` (the O(rows · n) evaluation of the expansion)."""
    X = part.X
    sq = sqnorm(X)
    kdiag = np.asarray(msg.kernel.diag(X), dtype=np.float64)
    F = predict_block(X, msg.centres, msg.coef, 0.0, msg.kernel)
    pool_coef = None
    if msg.pool_coef is not None and np.array_equal(X, np.asarray(msg.centres[part.start : part.stop], dtype=X.dtype)):
        pool_coef = readonly(np.ascontiguousarray(np.asarray(msg.pool_coef)[part.start : part.stop], dtype=np.float64))
    part.state["rs"] = RSState(readonly(X), readonly(sq), readonly(kdiag), readonly(F), pool_coef, msg.kernel)


def rs_start(part: Partition, msg: RSStart) -> None:
    """An empty basis, the residual ``R = F[:, outputs]`` and, with ``track_delta``, ``δ = k(z, z)``."""
    st = _rs(part)
    st.outputs = tuple(int(j) for j in msg.outputs)
    st.cache = ColumnCache(len(st.X), 0, st.X.dtype, msg.capacity)
    st.fit = Residual(np.ascontiguousarray(st.F[:, list(st.outputs)]))
    st.delta = np.array(st.kdiag, dtype=np.float64) if msg.track_delta else None


def rs_pend(part: Partition, atom: Atom) -> None:
    """The column ``k(z, ẑ)`` over the pool of the chosen vector, pending."""
    st = _rs(part)
    z = np.asarray(atom.z, dtype=st.X.dtype).reshape(1, -1)
    col = kernel_block(st.kernel, st.X, st.sq, z, sqnorm(z))[:, 0]
    st.cache.pend(col, col[:0])


def rs_accept(part: Partition, msg=None) -> None:
    st = _rs(part)
    st.cache.accept()
    st.fit.grow()


def rs_move(part: Partition, msg: Move) -> None:
    """Rank-one residual move after the last accepted column (backfitting or basic step)."""
    st = _rs(part)
    st.fit.move(st.cache.train(), msg.w, msg.beta, msg.coef)


def rs_orth_move(part: Partition, msg: RSOrthMove) -> None:
    """Residual and ``δ`` after the last accepted column ``d`` (backfitting, ``criterion="decrease"``).

    ``u = d − B_old w`` is the move of the fit per unit of the new coefficient (as
    :meth:`~kmp_dask.blockops.Residual.move`, same arithmetic) and also ``L_kk`` times the new
    vector's orthonormalised column ``q(z) = ⟨ψ_k, φ(z)⟩``, so ``δ −= q²``. The residual's
    coefficients follow the driver's update ``[β_old − w βᵀ; β]``.
    """
    st = _rs(part)
    if st.delta is None:
        raise RuntimeError("rs_orth_move: this pursuit was started without track_delta (the driver's effects "
                           "do not match its criterion)")
    B = st.cache.train()
    n = B.shape[1]
    beta = np.asarray(msg.beta, dtype=np.float64).reshape(-1)
    old = st.fit.coef[: n - 1]
    if msg.w is not None and n > 1:
        old = old - np.outer(msg.w, beta)
    u = st.fit.move(B, msg.w, beta, np.vstack([old, beta[None, :]]))  # the fit's move per unit coefficient
    np.divide(u, msg.Lkk, out=u)
    np.square(u, out=u)
    st.delta -= u
    if part.start <= msg.index < part.stop:
        st.delta[msg.index - part.start] = 0.0  # exactly in the span now (as the in-process pursuit)


def rs_set(part: Partition, coef: np.ndarray) -> None:
    """``R = F − B·coef`` recomputed (no drift)."""
    st = _rs(part)
    st.fit.set(st.cache.train(), coef)


class rs_effects:  # noqa: N801 (a namespace of Effect constructors)
    """The :class:`~kmp_dask.blockops.Effect` of each reduced-set state change, with its slot."""

    @staticmethod
    def init(setup: RSSetup) -> Effect:
        return Effect(rs_init, setup, "rs", resets=True)

    @staticmethod
    def start(outputs, capacity: int = 16, track_delta: bool = False) -> Effect:
        return Effect(rs_start, RSStart(tuple(int(j) for j in outputs), int(capacity), bool(track_delta)), "rs.fit",
                      resets=True)

    @staticmethod
    def add(atom: Atom) -> tuple[Effect, Effect]:
        return Effect(rs_pend, atom, "rs.fit.columns"), Effect(rs_accept, None, "rs.fit.columns")

    @staticmethod
    def move(w, beta, coef) -> Effect:
        return Effect(rs_move, Move(w, np.asarray(beta, dtype=np.float64), np.array(coef, dtype=np.float64)),
                      "rs.fit.residual")

    @staticmethod
    def orth_move(w, beta, Lkk: float, index: int) -> Effect:
        """Never reset by a resync: ``δ`` is the sum of every update since the start."""
        return Effect(rs_orth_move, RSOrthMove(None if w is None else np.array(w, dtype=np.float64),
                                               np.array(beta, dtype=np.float64).reshape(-1), float(Lkk), int(index)),
                      "rs.fit.delta")

    @staticmethod
    def set_coef(coef) -> Effect:
        return Effect(rs_set, np.array(coef, dtype=np.float64), "rs.fit.residual", resets=True)


# -- queries ---------------------------------------------------------------------------------
def rs_stats(part: Partition, msg=None) -> RSStats:
    """``n`` rows, ``fsq`` = Σ f² per output, ``own`` (its rows are the expansion's centres) and
    then ``wsq`` = Σ_i α_i f(x_i) per output (this partition's share of ‖w‖²; else None)."""
    st = _rs(part)
    own = st.pool_coef is not None
    return RSStats(len(st.F), np.einsum("ij,ij->j", st.F, st.F), own,
                   np.einsum("ij,ij->j", st.pool_coef, st.F) if own else None)


def rs_score(part: Partition, q: RSScoreQuery) -> RSScoreStats:
    """``rss`` = Σ R² per output over the pool (the empirical prediction error ê of §3.1) and
    the partition's best candidates by ``Σ_j R_j(z)² / k(z, z)`` (``criterion="decrease"``:
    ``/ δ(z)``): global ``index``, ``score``, ``rows``, residual ``r`` and target values ``f`` there."""
    st = _rs(part)
    if q.criterion not in SCORE_CRITERIA:
        raise ValueError(f"criterion must be one of {SCORE_CRITERIA}; got {q.criterion!r}")
    if q.criterion == "decrease" and st.delta is None:
        raise RuntimeError("rs_score: criterion='decrease' needs a pursuit started with track_delta=True")
    R = st.fit.R
    rss = np.einsum("ij,ij->j", R, R)
    if q.cand is None:
        local = np.arange(len(R))
    else:
        cand = np.asarray(q.cand, dtype=np.int64)
        lo, hi = np.searchsorted(cand, [part.start, part.stop])
        local = cand[lo:hi] - part.start
    if q.exclude is not None and len(q.exclude) and len(local):
        ex = np.asarray(q.exclude, dtype=np.int64)
        local = local[~np.isin(local + part.start, ex, assume_unique=False)]
    num = np.einsum("ij,ij->i", R[local], R[local])
    kd = st.kdiag[local]
    with np.errstate(divide="ignore", invalid="ignore"):
        if q.criterion == "eq13":
            score = np.where(kd > 0, num / kd, 0.0)
        else:  # rows (numerically) in the span score 0 and are never picked
            floor = max(float(q.min_pivot), DELTA_EPS_FACTOR * float(np.finfo(st.cache.dtype).eps))
            de = st.delta[local]
            score = np.where(de > floor * kd, num / de, 0.0)
    k = min(int(q.top), len(local))
    if k < len(local):
        best = np.argpartition(-score, k - 1)[:k]
    else:
        best = np.arange(len(local))
    best = best[np.lexsort((local[best], -score[best]))]  # by score, ties by index: order-free
    rows = local[best]
    return RSScoreStats(rss, index=rows + part.start, score=score[best], rows=np.array(st.X[rows]),
                        r=np.array(R[rows]), f=np.array(st.F[rows][:, list(st.outputs)]),
                        kdiag=np.array(st.kdiag[rows]))


def rs_values(part: Partition, q: RSValuesQuery) -> RSValues:
    """Squared pool errors ``Σ (f − B_k c_k)²`` (levels, m) and, with ``values``, ``f̂`` per level."""
    st = _rs(part)
    Y = st.fit.Y
    B = st.cache.train()
    sse = np.zeros((len(q.coefs), Y.shape[1]))
    vals = []
    for i, c in enumerate(q.coefs):
        c = np.asarray(c, dtype=np.float64)
        Fh = B[:, : c.shape[0]].astype(np.float64, copy=False) @ c if c.shape[0] else np.zeros_like(Y)
        D = Y - Fh
        sse[i] = np.einsum("ij,ij->j", D, D)
        if q.values:
            vals.append(Fh)
    return RSValues(sse, vals if q.values else None)


# -- single-vector exchanges -------------------------------------------------------------------
@dataclass
class XState:
    """One exchange run on a partition: ``B`` (rows × k) the current set's kernel columns, ``M =
    B A``, ``r = F − B β`` (rows × m) and ``d(z) = k(z,z) − M[z]·B[z]``; all float64, ``B`` and
    ``M`` Fortran-ordered (BLAS rank-one updates in place)."""

    B: np.ndarray
    M: np.ndarray
    r: np.ndarray
    d: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.B.nbytes + self.M.nbytes + self.r.nbytes + self.d.nbytes


@dataclass(frozen=True)
class RSXStart:
    """Start an exchange of the pursuit's first ``k`` cached columns with the driver's ``A = K_SS⁻¹``
    and ``β = A f(S)``."""

    k: int
    A: np.ndarray
    beta: np.ndarray


@dataclass(frozen=True)
class RSXCol:
    """Position ``i``'s column becomes ``k(rows, z)``."""

    i: int
    z: np.ndarray


@dataclass(frozen=True)
class RSXSwap:
    """Position ``i`` leaves and the vector whose column is now ``B[:, i]`` joins there (the
    driver's numbers: ``Aii``, ``Ai = A[i]/A_ii``, ``beta_i``, ``u = A' k(S', z)``, ``bS = k(S, z)``,
    ``delta = d_{−i}(z)``, ``rz = r_{−i}(z)``)."""

    i: int
    Aii: float
    Ai: np.ndarray
    beta_i: np.ndarray
    u: np.ndarray
    bS: np.ndarray
    delta: float
    rz: np.ndarray


@dataclass(frozen=True)
class RSXRowsQuery:
    """``B`` and ``F`` (the pursuit's outputs) at the global pool rows ``index``; ``cache=k``
    reads the pursuit's first k cached columns instead of the exchange's ``B``."""

    index: np.ndarray
    cache: int | None = None


@dataclass(frozen=True)
class RSXScreenQuery:
    """Every position at once: ``S`` (k,) the set's global rows by position, ``Adiag``, ``beta``."""

    S: np.ndarray
    Adiag: np.ndarray
    beta: np.ndarray
    min_pivot: float = 1e-10
    block_values: int = 2**22


@dataclass(frozen=True)
class RSXTryQuery:
    """Position ``i`` in the current state (``Aii = A_ii``, ``beta_i = β_i``; ``S`` as above)."""

    i: int
    S: np.ndarray
    Aii: float
    beta_i: np.ndarray
    min_pivot: float = 1e-10


def _xch(part: Partition) -> XState:
    st = _rs(part)
    if st.xch is None:
        raise RuntimeError("exchange effect or query without rs_xstart (the driver's effects are out of order)")
    return st.xch


def _xsync_state(st: RSState, A, beta) -> None:
    x = st.xch
    F = np.ascontiguousarray(st.F[:, list(st.outputs)], dtype=np.float64)
    x.M, x.r, x.d = xch_rows_sync(x.B, F, st.kdiag, A, beta)


def rs_xstart(part: Partition, msg: RSXStart) -> None:
    """The exchange's own copy of the first k cached columns, then ``M``, ``r``, ``d`` exactly."""
    st = _rs(part)
    if st.cache is None or st.cache.n < msg.k:
        raise RuntimeError(f"rs_xstart: the pursuit cached {0 if st.cache is None else st.cache.n} columns, "
                           f"fewer than the {msg.k} to exchange")
    B = np.asfortranarray(st.cache.train(msg.k), dtype=np.float64)
    if B is st.cache.Btr or np.shares_memory(B, st.cache.Btr):
        B = B.copy(order="F")
    st.xch = XState(B, np.empty((0, 0)), np.empty((0, 0)), np.empty(0))  # M, r, d set below
    _xsync_state(st, msg.A, msg.beta)


def rs_xsync(part: Partition, msg: RSXStart) -> None:
    """``M``, ``r``, ``d`` recomputed from ``B`` and the driver's fresh ``A``, ``β`` (no drift)."""
    st = _rs(part)
    _xch(part)
    _xsync_state(st, msg.A, msg.beta)


def rs_xcol(part: Partition, msg: RSXCol) -> None:
    st = _rs(part)
    x = _xch(part)
    z = np.asarray(msg.z, dtype=st.X.dtype).reshape(1, -1)
    x.B[:, msg.i] = kernel_block(st.kernel, st.X, st.sq, z, sqnorm(z))[:, 0]


def rs_xswap(part: Partition, msg: RSXSwap) -> None:
    """The rows' half of a swap on this partition (the same functions as the in-process exchange)."""
    x = _xch(part)
    i = int(msg.i)
    r, d = xch_rows_removed(x.M, x.r, x.d, i, msg.beta_i, msg.Aii)
    x.r, x.d = xch_rows_swap(x.B, x.M, r, d, i, msg.Ai, msg.u, msg.bS, msg.delta, msg.rz)


def _local_S(part: Partition, S) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``S`` held by this partition and their local rows."""
    S = np.asarray(S, dtype=np.int64)
    pos = np.flatnonzero((S >= part.start) & (S < part.stop))
    return pos, S[pos] - part.start


def rs_xrows(part: Partition, q: RSXRowsQuery) -> dict:
    st = _rs(part)
    idx = np.asarray(q.index, dtype=np.int64)
    pos = np.flatnonzero((idx >= part.start) & (idx < part.stop))
    loc = idx[pos] - part.start
    B = st.cache.train(q.cache) if q.cache is not None else _xch(part).B
    return {"pos": pos, "B": np.array(B[loc], dtype=np.float64), "F": np.array(st.F[loc][:, list(st.outputs)])}


def rs_xscreen(part: Partition, q: RSXScreenQuery) -> dict:
    """Per position i: ``best`` the partition's highest score of a replacement (rows of S excluded;
    −inf when none) and ``own`` the score of S[i] itself where this partition holds it (NaN
    elsewhere) — the block computation of ``_Exchange.promising``."""
    st = _rs(part)
    x = _xch(part)
    P, k, m = len(st.X), len(q.S), x.r.shape[1]
    spos, sloc = _local_S(part, q.S)
    held = np.full(k, -1, dtype=np.int64)
    held[spos] = sloc
    best = np.full(k, -np.inf)
    own = np.full(k, np.nan)
    step = max(1, int(q.block_values // max(P * m, 1)))
    ok_base = q.min_pivot * st.kdiag[:, None]
    for lo in range(0, k, step):
        idx = np.arange(lo, min(k, lo + step))
        score = removal_scores(x.M[:, idx], x.r, x.d, q.beta[idx], np.asarray(q.Adiag)[idx], ok_base)
        h = held[idx]
        mine = np.flatnonzero(h >= 0)
        own[idx[mine]] = score[h[mine], mine]
        score[sloc] = -np.inf
        if P:
            best[idx] = score.max(axis=0)
    return {"best": best, "own": own}


def rs_xtry(part: Partition, q: RSXTryQuery) -> dict:
    """Position ``i`` removed: the partition's best replacement (``score``, global ``index``, its
    ``row``, ``rz = r_{−i}(z)``, ``dz = d_{−i}(z)``, ``Mz = M[z]``; ties: the lowest row, as
    ``np.argmax``) and ``own`` the score of S[i] where held (NaN elsewhere)."""
    st = _rs(part)
    x = _xch(part)
    i = int(q.i)
    r, d = xch_rows_removed(x.M, x.r, x.d, i, q.beta_i, q.Aii)
    score = xch_row_scores(r, d, st.kdiag, q.min_pivot)
    S = np.asarray(q.S, dtype=np.int64)
    own = float(score[S[i] - part.start]) if part.start <= S[i] < part.stop else np.nan
    _, sloc = _local_S(part, S)
    score[sloc] = -np.inf
    out = {"own": own, "score": -np.inf, "index": -1}
    if len(score):
        z = int(np.argmax(score))
        out.update(score=float(score[z]), index=z + part.start, row=np.array(st.X[z]), rz=np.array(r[z]),
                   dz=float(d[z]), Mz=np.array(x.M[z]))
    return out


class xch_effects:  # noqa: N801 (a namespace of Effect constructors)
    """The exchange's effects with their journal slots (module docstring)."""

    @staticmethod
    def start(k: int, A, beta) -> Effect:
        return Effect(rs_xstart, RSXStart(int(k), np.array(A, dtype=np.float64), np.array(beta, dtype=np.float64)),
                      "rs.xch", resets=True)

    @staticmethod
    def sync(A, beta) -> Effect:
        return Effect(rs_xsync, RSXStart(0, np.array(A, dtype=np.float64), np.array(beta, dtype=np.float64)),
                      "rs.xch.state", resets=True)

    @staticmethod
    def swap(i: int, z, msg: RSXSwap) -> tuple[Effect, Effect]:
        return Effect(rs_xcol, RSXCol(int(i), np.array(z)), "rs.xch.cols"), Effect(rs_xswap, msg, "rs.xch.state")
