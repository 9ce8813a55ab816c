"""Per-partition numerics of kernel matching pursuit (NumPy in, small NumPy out).

Built from the generic machinery of :mod:`~kmp_dask.blockops._state`. The KMP state of a
partition lives in ``part.state["kmp"]`` (a :class:`KMPState`):

``kernels``  the dictionary's kernels (a candidate is a (row, kernel) pair)
``views``    training / validation rows (:class:`~kmp_dask.blockops.Views`)
``cache``    basis columns ``k(X, z_j)`` (a column of ones for the bias atom) and the pending one
``fit``      targets (minus the intercept offset for the squared loss), coefficients, residual
``Yva``      validation targets; ``labels_va`` validation labels (classification)
``wtr``/``wva`` sample weights of the training / validation rows (None: every row weighs 1)

Sample weights (``part.w``): every sum over rows is weighted — ``dᵀWR``, ``dᵀWd``, ``BᵀWd``,
``Σ w r²``, ``Σ w ℓ``, the Newton statistics, the validation sums — so the pursuit solves
``min Σ_i w_i ℓ(y_i, f(x_i))`` and a weight of 2 is the row counted twice. Columns, residual
and fit stay unweighted; without weights no product changes (bit-identical to an unweighted fit).

*Effects* (the only calls that change it; the engine journals them, see
:mod:`~kmp_dask.blockops._journal`): :func:`kmp_init`, :func:`pend_column`,
:func:`accept_column`, :func:`set_coef`, :func:`move_fit`. *Queries* (read only):
:func:`kmp_stats`, :func:`kmp_score`, :func:`kmp_column_stats`, :func:`kmp_linesearch`,
:func:`kmp_refit_stats`, :func:`kmp_gram`, :func:`kmp_block_stats`. Messages are frozen dataclasses; the scoring,
commit, line-search, refit and Gram passes answer with typed records (:mod:`~kmp_dask.blockops._results`:
:class:`ScoreStats`, :class:`ColumnStats`, :class:`LineStats`, :class:`GramStats`, totalled by
their ``combine``), the statistics pass with a dict.

Scores: for candidate columns ``d_k`` a pass returns ``d_kᵀR`` (s·K, m),
``‖d_k‖²`` (s·K,) and, for pre-fitting, ``d_kᵀB`` (s·K, n); candidates are ordered
kernel-major (all s rows for kernel 0, then for kernel 1, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg.blas import dsyrk as _dsyrk

from ..kernels import kernel_spec, shared_blocks
from ._journal import Effect
from ._partition import Partition, fetch_rows, split_mask, zero_weight_rows
from ._results import BlockStats, ColumnStats, GramStats, LineStats, ScoreStats
from ._state import (
    CROSS_BLOCK_ROWS,
    ColumnCache,
    RecomputedColumns,
    Residual,
    Views,
    Workspace,
    cross64,
    kernel_block,
    keyed_state,
    readonly,
    split_views,
    sqnorm,
)

__all__ = [
    "Atom", "BIAS_ATOM", "KMPSetup", "StatsQuery", "ScoreQuery", "ValQuery", "LineQuery", "RefitQuery", "Move",
    "KMPState", "target_matrix", "kmp_stats", "kmp_init", "pend_column", "accept_column", "set_coef", "move_fit",
    "kmp_score", "kmp_column_stats", "kmp_linesearch", "kmp_refit_stats", "kmp_gram", "kmp_effects",
    "BlockQuery", "kmp_block_stats", "HeldOutQuery", "held_out_rows",
]

#: Upper bound on the number of kernel values held at once per partition (row blocking).
BLOCK_ELEMENTS = 1 << 22

#: Row blocks of the factored RBF scoring hold about this many kernel values (in cache).
FACTORED_BLOCK_ELEMENTS = 1 << 16

#: The factored RBF scoring is used while γ·(max‖x‖² + max‖z‖²) stays at or below this: then
#: ``exp(2γ xᵀz)``, its square and ``exp(−γ‖x‖²)²`` neither overflow nor underflow in float32.
FACTORED_EXPONENT_MAX = 40.0

#: The bound a query may ask for instead (``ScoreQuery.factored_limit``) when rows and candidates are
#: float64: ``exp(2γ xᵀz)²`` stays below e⁶⁰⁰ ≈ 4e260 and ``exp(−γ‖x‖²)²`` above e⁻⁶⁰⁰ ≈ 3e−261, both
#: inside float64's range; each factored value then carries a relative error of at most about
#: 600 units of float64 rounding (1e−13), far below any gap between candidate scores that matters.
FACTORED_EXPONENT_MAX_64 = 300.0


# -- messages --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Atom:
    """A dictionary element: kernel ``kernel`` centred on row ``z`` (global index ``index``);
    ``z=None`` is the constant function (the bias atom)."""

    z: np.ndarray | None
    kernel: int = 0
    index: int = -1

    @property
    def is_bias(self) -> bool:
        return self.z is None


BIAS_ATOM = Atom(None, 0, -1)


@dataclass(frozen=True)
class StatsQuery:
    """Sums needed before a pursuit starts (or, with ``unique_labels``, the label set)."""

    targets: dict | None = None
    validation_fraction: float = 0.0
    split_seed: int = 0
    unique_labels: bool = False


@dataclass(frozen=True)
class KMPSetup:
    """The init effect's message: what every partition needs to start a pursuit."""

    kernels: tuple
    loss: object
    targets: dict
    offset: np.ndarray
    validation_fraction: float = 0.0
    split_seed: int = 0
    capacity: int = 16
    columns: str = "stored"  #: "stored" (ColumnCache) or "recomputed" (RecomputedColumns: large N)


@dataclass(frozen=True)
class ValQuery:
    """Validation metric request: ``"accuracy"`` (with ``classes``, ``intercept``) or ``"loss"``."""

    metric: str
    intercept: np.ndarray
    classes: object = None


@dataclass(frozen=True)
class ScoreQuery:
    """The data pass: residual norms, candidate scores, validation, fetched rows."""

    cand: np.ndarray | None = None
    cand_sq: np.ndarray | None = None
    want_cross: bool = False
    fetch: np.ndarray | None = None
    val: ValQuery | None = None
    count_above: float | None = None  #: count training rows with max_j |R_ij| above this (squared loss)
    factored: bool = False  #: RBF scores from the factored kernel (several atoms per pass: the kept are recomputed)
    factored_limit: float | None = None  #: float64 data: the exponent bound of the factored scores (None: 40)


@dataclass(frozen=True)
class Move:
    """Rank-one residual move (see :meth:`~kmp_dask.blockops.Residual.move`)."""

    w: np.ndarray | None
    beta: np.ndarray
    coef: np.ndarray


@dataclass(frozen=True)
class LineQuery:
    alphas: np.ndarray  #: (k, m) trial steps along the pending column


@dataclass(frozen=True)
class RefitQuery:
    coefs: tuple  #: (n, m) coefficient matrices whose training loss to return
    stats: int | None = None  #: index into ``coefs`` at which to return gradient and curvature


@dataclass(frozen=True)
class BlockQuery:
    """The candidates kept by a scoring pass (several atoms per pass): their atoms, in order."""

    atoms: tuple


# -- state -----------------------------------------------------------------------------------
@dataclass
class KMPState:
    kernels: list
    views: Views
    cache: ColumnCache | RecomputedColumns
    fit: Residual
    Yva: np.ndarray
    labels_va: np.ndarray | None
    work: Workspace = field(default_factory=Workspace)
    wtr: np.ndarray | None = None
    wva: np.ndarray | None = None

    @property
    def loss(self):
        return self.fit.loss

    def __getstate__(self):  # read-only after init: a pager writes them once
        return keyed_state(self, ("Yva", "labels_va", "wtr", "wva"))

    @property
    def nbytes(self) -> int:
        w = sum(a.nbytes for a in (self.wtr, self.wva) if a is not None)
        return self.views.nbytes + self.cache.nbytes + self.fit.nbytes + self.Yva.nbytes + self.work.nbytes + w


def _kmp(part: Partition) -> KMPState:
    return part.state["kmp"]


def target_matrix(y: np.ndarray, spec: dict) -> np.ndarray:
    """Turn raw labels/targets into the float64 target matrix the pursuit fits.

    ``spec["kind"] == "ovr"``: one-vs-rest ±1 columns for ``spec["classes"]`` (a single column,
    positive for ``classes[1]``, in the binary case). ``"regression"``: ``y`` as float64 (n, m).
    """
    if spec["kind"] == "ovr":
        classes = np.asarray(spec["classes"])
        yy = np.asarray(y).reshape(-1)
        if len(classes) == 2:
            return np.where(yy == classes[1], 1.0, -1.0)[:, None]
        return np.where(yy[:, None] == classes[None, :], 1.0, -1.0)
    Y = np.asarray(y, dtype=np.float64)
    return Y[:, None] if Y.ndim == 1 else Y


def _label_codes(y: np.ndarray, classes) -> tuple[np.ndarray, np.ndarray]:
    """Row codes into the ±1 target rows of :func:`target_matrix`: code ``c`` for
    ``classes[c]``, ``len(classes)`` for a label outside them (all −1); ``table[codes]`` equals
    ``target_matrix(y, {"kind": "ovr", "classes": classes})`` exactly."""
    classes = np.asarray(classes)
    yy = np.asarray(y).reshape(-1)
    k = len(classes)
    codes = np.full(len(yy), k, dtype=np.uint8 if k < 255 else np.int32)
    for c in range(k):
        codes[yy == classes[c]] = c
    if k == 2:
        table = np.array([[-1.0], [1.0], [-1.0]])
    else:
        table = np.vstack([2.0 * np.eye(k) - 1.0, -np.ones((1, k))])
    return codes, table


# -- queries before the pursuit ------------------------------------------------------------------
def kmp_stats(part: Partition, msg: StatsQuery) -> dict:
    """Target sums over training rows (or the partition's label set)."""
    val = split_mask(np.arange(part.start, part.stop, dtype=np.int64), msg.validation_fraction, msg.split_seed)
    out = {"n_train": int((~val).sum()), "n_val": int(val.sum())}
    if msg.unique_labels:
        out["labels"] = np.unique(np.asarray(part.y).reshape(-1))
        return out
    Y = target_matrix(part.y[~val], msg.targets)
    if part.w is None:
        out["y_sum"] = Y.sum(axis=0)
        out["y_sqsum"] = np.einsum("ij,ij->j", Y, Y)
        return out
    w = part.w[~val]
    out["w_sum"] = float(w.sum())
    out["y_sum"] = w @ Y
    out["y_sqsum"] = np.einsum("i,ij,ij->j", w, Y, Y)
    return out


@dataclass(frozen=True)
class HeldOutQuery:
    """The rows a split holds out (hash ``u < fraction`` of the global index, as :func:`split_mask`)."""

    fraction: float
    split_seed: int


def held_out_rows(part: Partition, msg: HeldOutQuery) -> tuple:
    """``(X, y, w)`` of the partition's held-out rows (``w`` None when unweighted): what a
    ``probability=True`` fit reads back to calibrate its probabilities on rows it did not train on."""
    val = split_mask(np.arange(part.start, part.stop, dtype=np.int64), msg.fraction, msg.split_seed)
    y = None if part.y is None else np.asarray(part.y).reshape(-1)[val]
    return part.X[val], y, None if part.w is None else part.w[val]


# -- effects ---------------------------------------------------------------------------------
def kmp_init(part: Partition, msg: KMPSetup) -> None:
    """Split the partition, build targets and an empty basis cache (capacity reserved)."""
    views = split_views(part, msg.validation_fraction, msg.split_seed)
    coded = msg.targets["kind"] == "ovr"
    if coded:  # one-vs-rest: a row's targets are one of k + 1 rows (its class, or none of them)
        codes, Y = _label_codes(part.y, msg.targets["classes"])
    else:
        Y = target_matrix(part.y, msg.targets)
    if msg.loss is not None:
        Y = msg.loss.targets(Y)
    Y = Y - np.asarray(msg.offset, dtype=np.float64)
    if coded:
        codes_tr, codes_va = views.split(codes)
        fit, Yva = Residual.coded(np.ascontiguousarray(codes_tr), Y, msg.loss), Y[codes_va]
    else:
        Ytr, Yva = views.split(Y)
        fit = Residual(Ytr, msg.loss)
    labels_va = np.asarray(part.y).reshape(-1)[views.val] if coded else None
    if getattr(msg, "columns", "stored") == "recomputed":
        cache = RecomputedColumns(len(views.Xtr), len(views.Xva), part.X.dtype)
    else:
        cache = ColumnCache(len(views.Xtr), len(views.Xva), part.X.dtype, msg.capacity)
    wtr, wva = ((None, None) if part.w is None
                else (readonly(np.array(a, dtype=np.float64)) for a in views.split(part.w)))
    part.state["kmp"] = KMPState(list(msg.kernels), views, cache, fit, readonly(Yva),
                                 None if labels_va is None else readonly(labels_va), wtr=wtr, wva=wva)


def _column(st: KMPState, atom: Atom) -> tuple[np.ndarray, np.ndarray]:
    v = st.views
    if atom.is_bias:
        return np.ones(len(v.Xtr), dtype=st.cache.dtype), np.ones(len(v.Xva), dtype=st.cache.dtype)
    kernel = st.kernels[atom.kernel]
    z = np.asarray(atom.z).reshape(1, -1)
    z_sq = sqnorm(z) if kernel.needs_sqnorm else None  # (a kernel without norms never reads them)
    col_tr = kernel_block(kernel, v.Xtr, v.sq_tr, z, z_sq)[:, 0]
    if not len(v.Xva):  # no validation rows: an empty column (no kernel call)
        return col_tr, np.empty(0, dtype=col_tr.dtype)
    return col_tr, kernel_block(kernel, v.Xva, v.sq_va, z, z_sq)[:, 0]


def pend_column(part: Partition, atom: Atom) -> None:
    """Compute ``atom``'s column over both views and keep it pending."""
    st = _kmp(part)
    st.cache.pend(*_column(st, atom), atom=atom)


def accept_column(part: Partition, msg=None) -> None:
    """The pending column joins the basis with coefficient 0 (nothing moves yet)."""
    st = _kmp(part)
    st.cache.accept()
    st.fit.grow()


def set_coef(part: Partition, coef: np.ndarray) -> None:
    """Set all coefficients and recompute the residual from the targets (no drift)."""
    st = _kmp(part)
    if isinstance(st.cache, RecomputedColumns):
        st.fit.set_blocks(_blocks(st), coef)
    else:
        st.fit.set(st.cache.train(), coef)


def move_fit(part: Partition, msg: Move) -> None:
    """Rank-one residual move after the last accepted column (replayed in order on restore)."""
    st = _kmp(part)
    if not isinstance(st.cache, RecomputedColumns):
        st.fit.move(st.cache.train(), msg.w, msg.beta, msg.coef)
        return
    u = st.cache.last().astype(np.float64)
    n = st.cache.n
    if msg.w is not None and n > 1:
        w = np.concatenate([np.asarray(msg.w, dtype=np.float64).reshape(-1), [0.0]])  # the last column: in d
        for a, b, Bb in _blocks(st):
            u[a:b] -= Bb @ w.astype(Bb.dtype, copy=False)
    st.fit.move_by(u, msg.beta, msg.coef)


def _blocks(st: KMPState, val: bool = False):
    """The basis columns over the training (validation) rows in row blocks ``(a, b, B[a:b])``."""
    v = st.views
    X, sq = (v.Xva, v.sq_va) if val else (v.Xtr, v.sq_tr)
    return st.cache.row_blocks(X, sq, st.kernels, st.work, val)


_ACCEPT = Effect(accept_column, None, "kmp.columns")  # one object: an effect is an immutable value


class kmp_effects:  # noqa: N801 (a namespace of Effect constructors)
    """The :class:`~kmp_dask.blockops.Effect` of each KMP state change, with its journal slot."""

    @staticmethod
    def init(setup: KMPSetup) -> Effect:
        return Effect(kmp_init, setup, "kmp", resets=True)

    @staticmethod
    def pend(atom: Atom) -> Effect:
        return Effect(pend_column, atom, "kmp.columns", in_place=False)

    @staticmethod
    def accept() -> Effect:
        return _ACCEPT

    @staticmethod
    def set_coef(coef) -> Effect:
        return Effect(set_coef, np.array(coef, dtype=np.float64), "kmp.residual", resets=True)

    @staticmethod
    def move(w, beta, coef) -> Effect:
        return Effect(move_fit, Move(w, beta, np.array(coef, dtype=np.float64)), "kmp.residual")


# -- queries during the pursuit ----------------------------------------------------------------
def _score_candidates(st: KMPState, Z, Z_sq, want_cross: bool) -> dict:
    """Row-blocked pass over the training rows: ``d_kᵀR``, ``‖d_k‖²`` and optionally ``d_kᵀB``."""
    Xtr, sq_tr, R, n = st.views.Xtr, st.views.sq_tr, st.fit.R, st.cache.n
    kernels = st.kernels
    s, m = len(Z), R.shape[1]
    S = s * len(kernels)
    corr = np.zeros((S, m))
    sqn = np.zeros(S)
    cross = np.zeros((S, n)) if want_cross else None
    rows = max(1, BLOCK_ELEMENTS // max(s, 1))
    Rc = R.astype(Xtr.dtype, copy=False)
    dtype = np.result_type(Xtr, Z)
    buf = st.work.get("kernel_block", min(rows, len(Xtr)) * s, dtype)
    wbuf = None if st.wtr is None else st.work.get("kernel_block_w", min(rows, len(Xtr)) * s, dtype)
    for a in range(0, len(Xtr), rows):
        b = min(a + rows, len(Xtr))
        # one block of all rows: the arrays themselves, not new views (a table kernel keys its cache by the object)
        Xab, sq_ab = (Xtr, sq_tr) if b - a == len(Xtr) else (Xtr[a:b], sq_tr[a:b])
        blocks = shared_blocks(kernels, Xab, Z, X_sqnorm=sq_ab, Y_sqnorm=Z_sq) if len(kernels) > 1 else {}
        out = buf[: (b - a) * s].reshape(b - a, s)
        Bab = None
        for q, kernel in enumerate(kernels):
            shared = q in blocks
            K = blocks.pop(q) if shared else kernel_block(kernel, Xab, sq_ab, Z, Z_sq, out=out)
            Kw = K if wbuf is None else np.multiply(K, st.wtr[a:b, None], out=wbuf[: K.size].reshape(K.shape))
            sl = slice(q * s, (q + 1) * s)
            corr[sl] += Kw.T @ Rc[a:b]
            held = None if wbuf is not None or shared else _held_sqnorms(kernel, Xab, Z)
            sqn[sl] += np.einsum("ij,ij->j", Kw, K) if held is None else held
            if want_cross and n:
                if Bab is None:
                    Bab = st.cache.rows(Xtr, sq_tr, kernels, st.work, a, b)
                cross[sl] += Kw.T @ Bab
    return {"corr": corr, "sqn": sqn, "cross": cross}


def _held_sqnorms(kernel, X, Z):
    """``‖k(X, z_j)‖²`` per candidate when the kernel holds them (a table's cached columns: the same
    values as the block's einsum), else None."""
    held = getattr(kernel, "column_sqnorms", None)
    return None if held is None else held(X, Z)


def _factored_gamma(st: KMPState, Z_sq, limit: float | None = None) -> float | None:
    """γ when the factored scoring applies (one kernel registered ``factored``: RBF; exponents in
    range), else None; ``limit`` (float64 rows and candidates only): the exponent bound instead of
    :data:`FACTORED_EXPONENT_MAX`."""
    kernels, sq = st.kernels, st.views.sq_tr
    if len(kernels) != 1 or not kernel_spec(kernels[0]).factored or not len(sq) or not len(Z_sq):
        return None
    gamma = float(kernels[0].get("gamma"))
    top = gamma * (float(np.max(sq)) + float(np.max(Z_sq)))
    wide = limit is not None and st.views.Xtr.dtype == np.float64 and np.asarray(Z_sq).dtype == np.float64
    return gamma if top <= (limit if wide else FACTORED_EXPONENT_MAX) else None  # (False for NaN)


def _score_factored(st: KMPState, Z, Z_sq, gamma: float) -> dict:
    """``d_kᵀR`` and ``‖d_k‖²`` of RBF candidate columns from ``k(x, z) = a(x)·exp(2γ xᵀz)·b(z)``
    (``a = exp(−γ‖x‖²)``, ``b = exp(−γ‖z‖²)``): per L2-sized row block one GEMM, ``exp``, a GEMV
    against ``a⊙w⊙R``, a square and a GEMV against ``a²⊙w`` — two elementwise passes instead of
    the exact block's nine. Each value carries a relative error of a few units of the data's
    precision (like the exact form's cancellation), but no clip: a row's own column is 1 only to
    rounding. For ranking candidates only (several atoms per pass recompute the kept columns
    exactly before any of them is used)."""
    Xtr, sq_tr, R = st.views.Xtr, st.views.sq_tr, st.fit.R
    s, m = len(Z), R.shape[1]
    dtype = np.result_type(Xtr, Z)
    Z2 = (2.0 * gamma * np.asarray(Z, dtype=np.float64)).astype(dtype)
    a = np.exp(-gamma * np.asarray(sq_tr, dtype=np.float64))
    aw = a if st.wtr is None else a * st.wtr
    aR = (aw[:, None] * R).astype(dtype)
    a2 = (aw * a).astype(dtype)
    corr, sqn = np.zeros((s, m)), np.zeros(s)
    rows = max(1, FACTORED_BLOCK_ELEMENTS // max(s, 1))
    buf = st.work.get("kernel_block", min(rows, len(Xtr)) * s, dtype)
    for i in range(0, len(Xtr), rows):
        j = min(i + rows, len(Xtr))
        E = np.matmul(Xtr[i:j], Z2.T, out=buf[: (j - i) * s].reshape(j - i, s))
        np.exp(E, out=E)
        corr += E.T @ aR[i:j]
        np.multiply(E, E, out=E)
        sqn += a2[i:j] @ E
    b = np.exp(-gamma * np.asarray(Z_sq, dtype=np.float64))
    return {"corr": corr * b[:, None], "sqn": sqn * (b * b), "cross": None}


def _validation(st: KMPState, q: ValQuery) -> dict:
    coef = st.fit.coef
    if not st.cache.n:
        Fva = np.zeros_like(st.Yva)
    elif isinstance(st.cache, RecomputedColumns):
        Fva = np.empty_like(st.Yva)
        for a, b, Bb in _blocks(st, val=True):
            Fva[a:b] = Bb @ coef
    else:
        Fva = st.cache.val() @ coef
    w = st.wva
    out = {"val_n": len(Fva) if w is None else float(w.sum())}
    if st.loss is None:
        Rva = st.Yva - Fva
        per_row = np.einsum("ij,ij->i", Rva, Rva)
        out["val_sse"] = float(np.einsum("ij,ij->", Rva, Rva) if w is None else np.einsum("i,ij,ij->", w, Rva, Rva))
    else:
        L = st.loss.value(st.Yva, Fva)
        per_row = L.sum(axis=1) if L.ndim > 1 else L
        out["val_loss"] = float(_row_sum(L, w).sum())
    # Σ w ℓ² of the rows' losses ℓ (squared error summed over the outputs, or the loss): with the
    # sum and val_n, the standard error of the held-out mean loss (the estimators' val_ses_)
    out["val_sq"] = float(per_row @ per_row if w is None else w @ (per_row * per_row))
    if q.metric == "accuracy" and st.labels_va is not None:
        F = Fva + np.asarray(q.intercept, dtype=np.float64)
        classes = np.asarray(q.classes)
        pred = classes[(F[:, 0] > 0).astype(int)] if F.shape[1] == 1 else classes[np.argmax(F, axis=1)]
        hit = pred == st.labels_va
        out["val_correct"] = int(np.sum(hit)) if w is None else float(w @ hit)
    return out


def _row_sum(A: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``Σ_i w_i A_i`` over rows (``Σ_i A_i`` without weights)."""
    return A.sum(axis=0) if w is None else w @ A


def kmp_score(part: Partition, q: ScoreQuery) -> ScoreStats:
    """The data pass: ``rss`` (m,) = ‖R‖², ``rsum`` (m,) = ΣR (the bias atom's correlation),
    ``loss`` (other losses), ``n_above`` (rows with an error above ``count_above``), candidate
    reductions, validation sums, fetched rows."""
    st = _kmp(part)
    R, w = st.fit.R, st.wtr
    if w is None:
        out = {"rss": np.einsum("ij,ij->j", R, R), "rsum": R.sum(axis=0)}
    else:
        out = {"rss": np.einsum("i,ij,ij->j", w, R, R), "rsum": w @ R}
    if st.loss is not None:
        out["loss"] = _row_sum(st.loss.value(st.fit.Y, st.fit.F), w)
    if q.count_above is not None and st.loss is None:  # |y − f(x)| > γ: the KMP bound's training errors
        above = np.max(np.abs(R), axis=1) > q.count_above if len(R) else np.zeros(0, dtype=bool)
        out["n_above"] = int(np.count_nonzero(above if w is None else above & (w > 0)))
    if q.cand is not None:
        gamma = _factored_gamma(st, q.cand_sq, q.factored_limit) if q.factored and not q.want_cross else None
        out.update(_score_candidates(st, q.cand, q.cand_sq, q.want_cross) if gamma is None
                   else _score_factored(st, q.cand, q.cand_sq, gamma))
    if q.val is not None:
        out.update(_validation(st, q.val))
    if q.fetch is not None:
        out["fetched"] = fetch_rows(part, q.fetch)
        if part.w is not None:  # a row of weight 0 is not in the data: never a candidate
            out["zero_weight"] = zero_weight_rows(part, q.fetch)
    return ScoreStats.make(out)


def kmp_column_stats(part: Partition, msg=None) -> ColumnStats:
    """Products of the pending column ``d`` the driver needs to add it (float64):
    ``cross = Bᵀd`` (n,) (unless ``msg`` is False: a driver without a Cholesky factor does not
    need it, and recomputed columns make it a full kernel pass), ``sqn = ‖d‖²``, ``corr = dᵀR``
    (m,), ``ytd = dᵀY`` (m,) and, for other losses, the line-search statistics at step 0
    (``loss``, ``grad``, ``hess``, each (1, m))."""
    st = _kmp(part)
    d = st.cache.pending[0].astype(np.float64)
    wd = d if st.wtr is None else st.wtr * d
    if msg is False:
        cross = None
    elif isinstance(st.cache, RecomputedColumns):
        cross = np.zeros(st.cache.n)
        scratch = st.work.get("cross64", min(CROSS_BLOCK_ROWS, len(d)) * max(st.cache.n, 1), np.float64)
        for a, b, Bb in _blocks(st):
            cross += cross64(Bb, wd[a:b], scratch)
    else:
        cross = st.cache.cross(wd, st.work)
    sqn, corr, ytd = float(d @ wd), st.fit.R.T @ wd, st.fit.Y.T @ wd
    out = {"sqn": sqn, "corr": corr, "ytd": ytd, "cross": cross}
    if st.loss is not None:
        ls = _line_stats(st, d, np.zeros((1, st.fit.m)))
        out.update(loss=ls.loss, grad=ls.grad, hess=ls.hess)
    return ColumnStats.make(out)


def _line_stats(st: KMPState, d: np.ndarray, alphas: np.ndarray) -> LineStats:
    """Loss, directional gradient and curvature along ``d`` at each trial step (k, m)."""
    loss, Y, F, w = st.loss, st.fit.Y, st.fit.F, st.wtr
    k, m = alphas.shape
    out = LineStats(np.zeros((k, m)), np.zeros((k, m)), np.zeros((k, m)))
    wd = d if w is None else w * d
    wd2 = wd * d
    for i in range(k):
        Fi = F + d[:, None] * alphas[i][None, :]
        out.loss[i] = _row_sum(loss.value(Y, Fi), w)
        out.grad[i] = wd @ loss.gradient(Y, Fi)
        out.hess[i] = wd2 @ loss.hessian(Y, Fi)
    return out


def kmp_linesearch(part: Partition, q: LineQuery) -> LineStats:
    """Line-search statistics along the pending column at trial steps ``q.alphas`` (k, m)."""
    st = _kmp(part)
    d = st.cache.pending[0].astype(np.float64)
    return _line_stats(st, d, np.atleast_2d(np.asarray(q.alphas, dtype=np.float64)))


def kmp_refit_stats(part: Partition, q: RefitQuery) -> LineStats:
    """Newton refit of all coefficients (other losses): training loss (k, m) at each of
    ``q.coefs``; at ``q.stats`` also the gradient ``Bᵀ∂L/∂f`` (n, m) and the per-output
    curvature ``Bᵀ diag(h) B`` (m, n, n)."""
    st = _kmp(part)
    loss, Y, w, n = st.loss, st.fit.Y, st.wtr, st.cache.n
    coefs = [np.asarray(c, dtype=np.float64).reshape(n, Y.shape[1]) for c in q.coefs]
    out = LineStats(np.zeros((len(coefs), Y.shape[1])))
    if q.stats is not None:
        out = LineStats(out.loss, np.zeros((n, Y.shape[1])), np.zeros((Y.shape[1], n, n)))
    for a, b, Bb in _blocks(st):  # one block (the cache itself) unless the columns are recomputed
        B = Bb.astype(np.float64, copy=False)
        Yb, wb = Y[a:b], None if w is None else w[a:b]
        for i, c in enumerate(coefs):
            F = B @ c
            out.loss[i] += _row_sum(loss.value(Yb, F), wb)
            if q.stats == i:
                G, H = loss.gradient(Yb, F), loss.hessian(Yb, F)
                if wb is not None:
                    G, H = wb[:, None] * G, wb[:, None] * H
                out.grad[...] += B.T @ G
                out.hess[...] += np.stack([_weighted_gram(B, h) for h in H.T])
    return out


def kmp_gram(part: Partition, msg=None) -> GramStats:
    """Least-squares statistics of the basis over the training rows (squared loss): the Gram
    matrix ``BᵀWB`` (n, n) and ``BᵀWY`` (n, m) against the (centred) targets — one pass for the
    refits of ``fit_mode="refit"``; stored columns or recomputed row blocks alike."""
    st = _kmp(part)
    Y, w, n = st.fit.Y, st.wtr, st.cache.n
    out = GramStats(np.zeros((n, n)), np.zeros((n, Y.shape[1])))
    for a, b, Bb in _blocks(st):
        B = Bb.astype(np.float64, copy=False)
        h = np.ones(b - a) if w is None else w[a:b]
        out.gram[...] += _weighted_gram(B, h)
        out.bty[...] += B.T @ (Y[a:b] if w is None else h[:, None] * Y[a:b])
    return out


def kmp_block_stats(part: Partition, q: BlockQuery) -> BlockStats:
    """Several atoms per pass: the products of the kept candidates' columns ``D`` (c of them)
    over the training rows, float64 — ``DᵀWD`` (c, c), ``DᵀWB`` (c, n), ``DᵀWR`` and ``DᵀWY``
    (c, m). Each column is computed exactly as :func:`pend_column` computes it (one kernel call
    per candidate over the partition's rows), so the driver's algebra sees the very columns an
    accepted atom puts in the cache; the products run over fixed row blocks in row order."""
    st = _kmp(part)
    Xtr, sq_tr, n = st.views.Xtr, st.views.sq_tr, st.cache.n
    c = len(q.atoms)
    D = np.empty((len(Xtr), c), dtype=np.float64)
    for j, atom in enumerate(q.atoms):
        z = np.asarray(atom.z).reshape(1, -1)
        D[:, j] = kernel_block(st.kernels[atom.kernel], Xtr, sq_tr, z, sqnorm(z))[:, 0]
    Dw = D if st.wtr is None else D * st.wtr[:, None]
    m = st.fit.m
    out = BlockStats(np.zeros((c, c)), np.zeros((c, n)), np.zeros((c, m)), np.zeros((c, m)))
    rows = CROSS_BLOCK_ROWS
    scratch = st.work.get("block_cross64", min(rows, len(Xtr)) * max(n, 1), np.float64) if n else None
    R, Y = st.fit.R, st.fit.Y  # Y is rebuilt from the label codes on each access (one-vs-rest)
    for a in range(0, len(Xtr), rows):
        b = min(a + rows, len(Xtr))
        Dab = Dw[a:b]
        out.gram[...] += Dab.T @ D[a:b]
        out.corr[...] += Dab.T @ R[a:b]
        out.ytd[...] += Dab.T @ Y[a:b]
        if n:
            Bab = st.cache.rows(Xtr, sq_tr, st.kernels, st.work, a, b)
            if Bab.dtype != np.float64:  # float32 columns: cast a row block into reused float64 scratch
                B64 = scratch[: (b - a) * n].reshape(n, b - a).T  # column-major like the cache: a contiguous copy
                np.copyto(B64, Bab)
                Bab = B64
            out.cross[...] += Dab.T @ Bab
    return out


def _weighted_gram(B: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``Bᵀ diag(h) B`` (n, n); a symmetric rank-k update (half a GEMM's work) when h ≥ 0."""
    if B.shape[1] > 1 and B.dtype == np.float64 and np.all(h >= 0):
        W = B * np.sqrt(h)[:, None]
        # U = upper triangle of Wᵀ W, without a copy for either memory layout of W
        U = _dsyrk(1.0, W, trans=1) if W.flags.f_contiguous else _dsyrk(1.0, W.T)
        return np.triu(U) + np.triu(U, 1).T
    return (B * h[:, None]).T @ B
