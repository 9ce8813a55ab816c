r"""Generalisation bounds for matching pursuit (Hussain & Shawe-Taylor, "Theory of matching pursuit",
NIPS 2008), used as stopping rules / dimension selectors (docs/kpca.md).

Pure numpy (numeric layer): no dask, zarr or scikit-learn.

Notation (the paper's)
----------------------
m       size of the training sample S
k       number of basis vectors = size of the compression set i (0 <= k <= m)
δ       confidence parameter, 0 < δ < 1; the bounds hold with probability >= 1 − δ
R       radius of a ball enclosing the data in feature space, R² = sup_x k(x, x)
        (R = 1 for the Gaussian kernel)
t       number of training errors of the KMP regressor among the m − k points outside i
γ       loss threshold of the KMP bound: an error is |f(x) − y| > γ (``loss_threshold``)
ln      natural logarithm; log₂ base-2 logarithm

Sparse kernel PCA (Theorem 2 / Corollary 1)
-------------------------------------------
Sparse KPCA (greedy "maximise the Rayleigh quotient and deflate", i.e. pivoted partial Cholesky) is a
sample compression scheme: the projection P_i onto span{φ(x_j) : j ∈ i} is rebuilt from the k chosen
points alone (Nyström, eq. 4). The loss of a point is its squared residual
ℓ(x) = ‖φ(x) − P_i φ(x)‖² ∈ [0, R²]. With Ê_{m−k} the average of ℓ over the m − k training points
*outside* the compression set, Theorem 2 reads, with probability >= 1 − δ,

    E[ℓ(A_k(S))] <= min_{1<=t<=k} B_t,

    B_k = Ê_{m−k}[ℓ(A_k(S))] + R² · sqrt( ( k·ln(e·m/k) + ln(2·m/δ) ) / ( 2·(m − k) ) ).

:func:`kpca_compression_bound` returns B_k (the term for one k); :func:`kpca_bound_path` returns
B_k along a path (optionally its running minimum, which is Theorem 2's bound for A_k itself); the
dimension suggested by the bound is argmin_k B_k (:func:`kpca_bound_argmin`) — the paper's Figure 1
plots B_k and reads off its minimum (46 on its toy data with 50 large-variance dimensions).

Derivation (the proof sketch): for a fixed compression set the m − k outside points are i.i.d.,
so Hoeffding's inequality for a loss with range [0, R²] gives the deviation
R² sqrt(ln(2/δ')/(2(m − k))) (two-sided: the "2" in 2m/δ). Union bound over the C(m, k) <= (em/k)^k
compression sets of size k and over the m possible sizes: δ' = δ / (m · C(m, k)), hence
ln(2/δ') <= k ln(em/k) + ln(2m/δ).

Reconstructed from damaged text: the extracted text of Theorem 2 lost the square root, the fraction
bars and δ; the form above is reconstructed from the surviving tokens ("R", "t ln em/t",
"ln 2m", "2(m − t)") and re-derived from the proof sketch (Hoeffding + union over (em/k)^k sets
and m sizes), which gives exactly this expression. Scale: Theorem 2 writes the deviation term with
"R = sup ℓ"; Corollary 1 (Gaussian kernel) sets R = 1 and calls R the radius of the enclosing
ball. Here ``R`` is that radius, so the loss ‖P⊥φ(x)‖² lies in [0, R²] and the Hoeffding range —
the factor in front of the square root — is R². The k = 0 term (no basis vector, ℓ = ‖φ(x)‖²) is
also returned; it is covered by the same union bound (sizes k = 0, …, m − 1 are m values; at
k = m no point is left outside and the bound is +inf, i.e. vacuous).

Kernel matching pursuit (Theorem 3)
-----------------------------------
KMP is not a compression scheme (the regressor uses the targets of all points), but its function lies
in the k-dimensional span of the chosen basis vectors; the regression loss is mapped to a 0/1 loss
1[|f(x) − y| > γ] for a fixed γ > 0 and a VC argument is applied to the m − k − t points outside the
basis that are not training errors. With t = Σ_{j outside i} 1[|f(x_j) − y_j| > γ], with probability
>= 1 − δ,

    Pr_{(x,y)~D}{ |f(x) − y| > γ } <= ε(k, t),

    ε(k, t) = 2/(m − k − t) · [ (k + 1)·log₂( 4e(m − k − t)/(k + 1) ) + k·log₂( e·m/k )
                                + t·log₂( e(m − k)/t ) + 2·log₂ m + log₂( 2/δ ) ],

with 0·log₂(·/0) := 0 (k = 0 or t = 0). Derivation (proof of Theorem 3): the VC inequality
Pr{err_S̄ = 0, err > ε} <= 2·Π(2n)·2^(−εn/2) on the n = m − k − t clean points, with Π(2n) <=
(4en/(k + 1))^(k + 1) dichotomies of 2n points by two parallel hyperplanes in the k-dimensional span
(Anthony 2004, d = 2); union over the C(m, k) <= (em/k)^k basis sets, the C(m − k, t) <=
(e(m − k)/t)^t error sets and the <= m² pairs (k, t); solve for ε. Because the tail is 2^(−εn/2),
all logarithms are base 2.

Reconstructed from damaged text: the extracted formula of Theorem 3 is scrambled ("( + 4e(m − k − t) +
em 2 … k + 1) log k log m−k−t k+1 k e + 22 . (m − k ) m t log log t"); the arrangement above uses the
surviving tokens and is what solving m² × rhs(6) = δ for ε gives (rhs(6) = C(m,k)·C(m−k,t)·2·
(4e(m−k−t)/(k+1))^(k+1)·2^(−ε(m−k−t)/2), with the binomials bounded by (em/k)^k, (e(m−k)/t)^t).
Extension (not in the paper): Π(2n) <= (4en/(k + 1))^(k + 1) needs 2n >= k + 1; when
2(m − k − t) < k + 1 the trivial count Π(2n) <= 2^(2n) is used instead, i.e. the first term becomes
2n (the bound is then > 4, vacuous, but finite and never negative — the paper's expression can go
negative there). With m − k − t = 0 the bound is +inf.

Sparse kernel CCA (Theorem 4)
-----------------------------
Sparse KCCA (§4: choose the row maximising ρ_i = e_iᵀK_xK_ye_i / sqrt(e_iᵀK_x²e_i · e_iᵀK_y²e_i),
deflate both kernels, run CCA inside the two k-dimensional subspaces) is, like KMP, not a
compression scheme, and Theorem 4 bounds it by the same argument as Theorem 3 with the regression
error replaced by the disagreement of the two views' projections: for a pair of projection
functions f_x, f_y (one canonical pair) and a fixed γ > 0,
t = Σ_{j outside i} 1[|f_x(x_j) − f_y(y_j)| > γ], and with probability >= 1 − δ

    Pr_{(x,y)~D}{ |f_x(x) − f_y(y)| > γ } <= ε(k, t),

with ε(k, t) exactly Theorem 3's expression above (the extracted text of Theorem 4 is the same
scrambled formula token for token, so the same reconstruction applies; the VC count is again that
of two parallel hyperplanes in the k-dimensional span, now of the paired feature space).
:func:`kcca_bound` counts t from the two views' projections of the points outside the basis.

Values are *not* clipped (to R² resp. 1): the raw values keep paths informative for model selection
(the paper plots the KMP bound scaled down by 5).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "kpca_compression_bound",
    "kpca_bound_path",
    "kpca_bound_from_means",
    "kpca_bound_argmin",
    "kmp_bound",
    "kmp_bound_from_count",
    "kmp_bound_path",
    "kmp_bound_argmin",
    "kcca_bound",
]

#: Residuals from a deflated kernel can be off by rounding: values in [−tol, 0) and (R², R²+tol]
#: with tol = _RESIDUAL_RTOL·R² are clipped to [0, R²]; anything further out raises ValueError.
_RESIDUAL_RTOL = 1e-9


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------

def _check_int(name: str, value, lo: int, hi: int | None = None, hi_name: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer() and not isinstance(value, bool):
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        upper = "" if hi is None else f" <= {hi_name or hi}" + (f" = {hi}" if hi_name else "")
        raise ValueError(f"{name} must satisfy {lo} <= {name}{upper}; got {value}")
    return value


def _check_delta(delta) -> float:
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"delta must be a real number in the open interval (0, 1); got {delta!r}") from None
    if not (0.0 < d < 1.0):
        raise ValueError(f"delta must be in the open interval (0, 1); got {delta!r}")
    return d


def _check_positive(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite real number > 0; got {value!r}") from None
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a finite real number > 0 (valid range (0, inf)); got {value!r}")
    return v


def _as_1d(name: str, values) -> np.ndarray:
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of real numbers; got {values!r}") from None
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per point outside the basis); got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = float(a[~np.isfinite(a)][0])
        raise ValueError(f"{name} must be finite; got {bad!r} at index {int(np.flatnonzero(~np.isfinite(a))[0])}")
    return a


def _check_residuals(residuals_out, R2: float, name: str = "residuals_out") -> np.ndarray:
    r = _as_1d(name, residuals_out)
    tol = _RESIDUAL_RTOL * R2
    if r.size:
        lo, hi = float(r.min()), float(r.max())
        if lo < -tol:
            raise ValueError(f"{name} must be squared residual norms in [0, R²] = [0, {R2!r}]; "
                             f"got a negative value {lo!r}")
        if hi > R2 + tol:
            raise ValueError(f"{name} must be squared residual norms in [0, R²] = [0, {R2!r}]; "
                             f"got {hi!r} > R² (is R the radius, R² = sup k(x, x)?)")
    return np.clip(r, 0.0, R2)


def _check_len(name: str, arr: np.ndarray, k: int, m: int) -> None:
    if arr.size != m - k:
        raise ValueError(f"{name} must hold one value per point outside the basis, m − k = {m} − {k} = "
                         f"{m - k} values; got {arr.size}")


def _resolve_ks(name: str, per_k: Sequence, m: int, ks) -> tuple[list[np.ndarray], np.ndarray]:
    if isinstance(per_k, np.ndarray) and per_k.ndim == 1 and per_k.dtype != object:
        raise ValueError(f"{name} must be a list of 1-D arrays (one per k), not a single 1-D array")
    arrays = [_as_1d(f"{name}[{j}]", a) for j, a in enumerate(per_k)]
    if not arrays:
        raise ValueError(f"{name} must hold at least one array; got an empty sequence")
    if ks is None:
        kk = [m - a.size for a in arrays]
        for j, k in enumerate(kk):
            if k < 0:
                raise ValueError(f"{name}[{j}] has {arrays[j].size} values, more than m = {m}")
    else:
        kk = list(ks)
        if len(kk) != len(arrays):
            raise ValueError(f"ks must have one entry per array of {name} ({len(arrays)}); got {len(kk)}")
        kk = [_check_int(f"ks[{j}]", k, 0, m, "m") for j, k in enumerate(kk)]
        for j, (k, a) in enumerate(zip(kk, arrays, strict=True)):
            _check_len(f"{name}[{j}]", a, k, m)
    return arrays, np.asarray(kk, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# sparse KPCA: Theorem 2 / Corollary 1
# ---------------------------------------------------------------------------------------------

def _xlog_em_over_x(x: np.ndarray, m: float, log=np.log) -> np.ndarray:
    """x·log(e·m/x), with the limit 0 at x = 0 (vectorised)."""
    x = np.asarray(x, dtype=float)
    safe = np.where(x > 0, x, 1.0)
    return np.where(x > 0, x * (log(m / safe) + log(np.e)), 0.0)


def _kpca_core(mean_residual: np.ndarray, k: np.ndarray, m: int, R2: float, delta: float) -> np.ndarray:
    """B_k = mean + R² sqrt((k ln(em/k) + ln(2m/δ)) / (2(m − k))), +inf at k = m (vectorised)."""
    k = np.asarray(k, dtype=float)
    n_out = m - k
    pen = _xlog_em_over_x(k, m) + math.log(2.0 * m / delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = R2 * np.sqrt(pen / (2.0 * np.where(n_out > 0, n_out, 1.0)))
        out = np.where(n_out > 0, mean_residual + dev, np.inf)
    return out


def kpca_compression_bound(residuals_out, k: int, m: int, R: float, delta: float = 0.05) -> float:
    r"""Sample-compression bound B_k on the expected squared residual of sparse KPCA (Thm 2 / Cor 1).

    B_k = (1/(m − k)) Σ_{j ∉ i} ‖φ(x_j) − P_i φ(x_j)‖²
          + R² · sqrt( ( k·ln(e·m/k) + ln(2·m/δ) ) / ( 2·(m − k) ) ),      (k·ln(em/k) := 0 at k = 0)

    With probability >= 1 − δ over S, E_x ‖P⊥_i φ(x)‖² <= min_{t<=k} B_t simultaneously for all k
    (see the module docstring for the derivation and the reconstructed parts).

    Parameters
    ----------
    residuals_out : array-like, shape (m − k,)
        Squared residual norms ‖P⊥φ(x_j)‖² of the m − k training points outside the compression set
        (e.g. the diagonal of the deflated kernel at those points), each in [0, R²] (rounding
        excursions up to 1e-9·R² are clipped).
    k : int, 0 <= k <= m
        Size of the compression set (number of basis vectors). k = m returns +inf (no point left).
    m : int, m >= 1
        Number of training points.
    R : float, > 0
        Radius of the ball enclosing the data in feature space: R² = sup_x k(x, x) (R = 1 for a
        Gaussian kernel; for a linear kernel the largest squared norm of the training points).
    delta : float in (0, 1)
        Confidence parameter δ.

    Returns
    -------
    float
        B_k (not clipped to R²).
    """
    m = _check_int("m", m, 1)
    k = _check_int("k", k, 0, m, "m")
    R2 = _check_positive("R", R) ** 2
    delta = _check_delta(delta)
    r = _check_residuals(residuals_out, R2)
    _check_len("residuals_out", r, k, m)
    mean = float(r.mean()) if r.size else 0.0
    return float(_kpca_core(np.asarray(mean), np.asarray(k), m, R2, delta))


def kpca_bound_path(residuals_out_per_k: Sequence, m: int, R: float, delta: float = 0.05, *,
                    ks=None, cumulative_min: bool = False) -> np.ndarray:
    """B_k for each entry of ``residuals_out_per_k`` (vectorised :func:`kpca_compression_bound`).

    Parameters
    ----------
    residuals_out_per_k : list of 1-D arrays
        Entry j holds the squared residuals of the m − k_j points outside the compression set after
        k_j basis vectors. Without ``ks``, k_j = m − len(entry j).
    m, R, delta
        As in :func:`kpca_compression_bound`.
    ks : sequence of int, optional
        The k of each entry (checked against the lengths).
    cumulative_min : bool
        False (default): return B_k (the curve whose minimum suggests the dimension, as in the
        paper's Figure 1). True: return min over the entries up to j of B — Theorem 2's bound on the
        expected residual of the k_j-dimensional projection itself (entries must then be in
        increasing k).

    Returns
    -------
    ndarray of float, shape (len(residuals_out_per_k),)
    """
    m = _check_int("m", m, 1)
    R2 = _check_positive("R", R) ** 2
    delta = _check_delta(delta)
    arrays, kk = _resolve_ks("residuals_out_per_k", residuals_out_per_k, m, ks)
    means = np.array([_check_residuals(a, R2, f"residuals_out_per_k[{j}]").mean() if a.size else 0.0
                      for j, a in enumerate(arrays)])
    b = _kpca_core(means, kk, m, R2, delta)
    if cumulative_min:
        if np.any(np.diff(kk) <= 0):
            raise ValueError(f"cumulative_min=True needs strictly increasing k; got ks = {kk.tolist()}")
        b = np.minimum.accumulate(b)
    return b


def kpca_bound_from_means(mean_residuals, ks, m: int, R: float, delta: float = 0.05) -> np.ndarray:
    """B_k from the *mean* residual outside the compression set at each k (vectorised).

    What a distributed fit has without holding residuals per point: the trace residual
    ``tr(K − K̃_k)`` summed over the data, divided by ``m − k`` (the chosen points have residual 0).

    Parameters
    ----------
    mean_residuals : array-like (n,) — mean of ‖P⊥φ(x_j)‖² over the m − k points outside, each in [0, R²]
    ks : array-like of int (n,) — the compression-set sizes, 0 <= k <= m
    m, R, delta : as in :func:`kpca_compression_bound`
    """
    m = _check_int("m", m, 1)
    R2 = _check_positive("R", R) ** 2
    delta = _check_delta(delta)
    means = _check_residuals(mean_residuals, R2, "mean_residuals")
    kk = np.asarray(ks)
    if kk.shape != means.shape or not np.issubdtype(kk.dtype, np.integer) or np.any((kk < 0) | (kk > m)):
        raise ValueError(f"ks must be integers in [0, m={m}], one per mean residual; "
                         f"got {np.asarray(ks).tolist()[:10]}")
    return _kpca_core(means, kk, m, R2, delta)


def kpca_bound_argmin(residuals_out_per_k: Sequence, m: int, R: float, delta: float = 0.05, *,
                      ks=None) -> int:
    """The k minimising B_k over the path (smallest such k on ties): the dimension the bound suggests."""
    m = _check_int("m", m, 1)
    arrays, kk = _resolve_ks("residuals_out_per_k", residuals_out_per_k, m, ks)
    b = kpca_bound_path(arrays, m, R, delta, ks=kk)
    return int(kk[int(np.argmin(b))])


# ---------------------------------------------------------------------------------------------
# KMP: Theorem 3
# ---------------------------------------------------------------------------------------------

def _kmp_core(t: np.ndarray, k: np.ndarray, m: int, delta: float) -> np.ndarray:
    """ε(k, t) of Theorem 3 (log₂), vectorised; +inf where m − k − t = 0."""
    k = np.asarray(k, dtype=float)
    t = np.asarray(t, dtype=float)
    n = m - k - t
    npos = np.where(n > 0, n, 1.0)
    d = k + 1.0
    vc = np.where(2.0 * npos >= d, d * np.log2(4.0 * np.e * npos / d), 2.0 * npos)
    total = (vc + _xlog_em_over_x(k, m, np.log2) + _xlog_em_over_x(t, m - k, np.log2)
             + 2.0 * math.log2(m) + math.log2(2.0 / delta))
    return np.where(n > 0, 2.0 / npos * total, np.inf)


def kmp_bound_from_count(t: int, k: int, m: int, delta: float = 0.05) -> float:
    r"""KMP bound of Theorem 3 from the error count t (see :func:`kmp_bound`).

    ε = 2/(m − k − t) · [ (k+1) log₂(4e(m−k−t)/(k+1)) + k log₂(em/k) + t log₂(e(m−k)/t)
                          + 2 log₂ m + log₂(2/δ) ]

    Parameters: t int in [0, m − k]; k int in [0, m]; m int >= 1; delta in (0, 1).
    Returns +inf when m − k − t = 0.
    """
    m = _check_int("m", m, 1)
    k = _check_int("k", k, 0, m, "m")
    t = _check_int("t", t, 0, m - k, "m − k")
    delta = _check_delta(delta)
    return float(_kmp_core(np.asarray(t), np.asarray(k), m, delta))


def _count_errors(name: str, errors_out, loss_threshold: float) -> tuple[np.ndarray, int]:
    e = _as_1d(name, errors_out)
    if e.size and e.min() < 0:
        raise ValueError(f"{name} must be absolute errors |f(x) − y| >= 0 (valid range [0, inf)); "
                         f"got a negative value {float(e.min())!r} — pass np.abs(residuals)")
    return e, int(np.count_nonzero(e > loss_threshold))


def kmp_bound(errors_out, k: int, m: int, loss_threshold: float, delta: float = 0.05) -> float:
    r"""Theorem 3: bound on Pr_{(x,y)~D}{ ``|f(x) − y|`` > γ } for a KMP regressor f with k basis vectors.

    t = #{ j outside the basis : ``|f(x_j) − y_j|`` > γ }   (γ = ``loss_threshold``), and with
    probability >= 1 − δ over S (simultaneously for all k and t)

    ε = 2/(m − k − t) · [ (k+1)·log₂(4e(m − k − t)/(k+1)) + k·log₂(e·m/k) + t·log₂(e(m − k)/t)
                          + 2·log₂ m + log₂(2/δ) ]

    (0·log₂(·/0) := 0; when 2(m − k − t) < k + 1 the first term is replaced by 2(m − k − t), see the
    module docstring; +inf when m − k − t = 0.)

    Parameters
    ----------
    errors_out : array-like, shape (m − k,)
        Absolute training errors ``|f(x_j) − y_j|`` >= 0 of the m − k points outside the basis.
    k : int, 0 <= k <= m
        Number of basis vectors.
    m : int, >= 1
        Training-set size.
    loss_threshold : float, > 0
        γ: a point counts as an error when ``|f(x) − y|`` > γ (strictly). The bound is on the
        probability of such an error on a new point, for this fixed γ (choose γ before seeing the
        data; the theorem does not cover a γ tuned on S).
    delta : float in (0, 1)
        Confidence parameter δ.

    Returns
    -------
    float
        ε (not clipped to 1).
    """
    m = _check_int("m", m, 1)
    k = _check_int("k", k, 0, m, "m")
    gamma = _check_positive("loss_threshold", loss_threshold)
    delta = _check_delta(delta)
    e, t = _count_errors("errors_out", errors_out, gamma)
    _check_len("errors_out", e, k, m)
    return float(_kmp_core(np.asarray(t), np.asarray(k), m, delta))


def kmp_bound_path(errors_out_per_k: Sequence, m: int, loss_threshold: float, delta: float = 0.05, *,
                   ks=None) -> np.ndarray:
    """Theorem 3's ε for each entry of ``errors_out_per_k`` (vectorised :func:`kmp_bound`).

    Entry j holds the absolute errors of the m − k_j points outside the basis after k_j basis
    vectors; without ``ks``, k_j = m − len(entry j). Stop the pursuit when the path stops
    decreasing, or take :func:`kmp_bound_argmin`.
    """
    m = _check_int("m", m, 1)
    gamma = _check_positive("loss_threshold", loss_threshold)
    delta = _check_delta(delta)
    arrays, kk = _resolve_ks("errors_out_per_k", errors_out_per_k, m, ks)
    tt = np.array([_count_errors(f"errors_out_per_k[{j}]", a, gamma)[1] for j, a in enumerate(arrays)])
    return _kmp_core(tt, kk, m, delta)


def kmp_bound_argmin(errors_out_per_k: Sequence, m: int, loss_threshold: float, delta: float = 0.05, *,
                     ks=None) -> int:
    """The k minimising Theorem 3's bound over the path (smallest such k on ties)."""
    m = _check_int("m", m, 1)
    arrays, kk = _resolve_ks("errors_out_per_k", errors_out_per_k, m, ks)
    b = kmp_bound_path(arrays, m, loss_threshold, delta, ks=kk)
    return int(kk[int(np.argmin(b))])


# ---------------------------------------------------------------------------------------------
# sparse KCCA: Theorem 4
# ---------------------------------------------------------------------------------------------

def kcca_bound(projections_x_out, projections_y_out, k: int, m: int, loss_threshold: float,
               delta: float = 0.05) -> float:
    r"""Theorem 4: bound on Pr_{(x,y)~D}{ ``|f_x(x) − f_y(y)|`` > γ } for sparse KCCA with k basis vectors.

    t = #{ j outside the basis : ``|f_x(x_j) − f_y(y_j)|`` > γ }   (γ = ``loss_threshold``), and with
    probability >= 1 − δ over the paired sample (simultaneously for all k and t)

    ε = 2/(m − k − t) · [ (k+1)·log₂(4e(m − k − t)/(k+1)) + k·log₂(e·m/k) + t·log₂(e(m − k)/t)
                          + 2·log₂ m + log₂(2/δ) ]

    — Theorem 3's expression with the two views' disagreement as the error (module docstring).

    Parameters
    ----------
    projections_x_out, projections_y_out : array-like, shape (m − k,)
        f_x(x_j) and f_y(y_j), one canonical pair's projections of the two views of the m − k
        training points outside the basis, in the same order.
    k : int, 0 <= k <= m
        Number of basis vectors (rows chosen by the pursuit).
    m : int, >= 1
        Number of paired training points.
    loss_threshold : float, > 0
        γ: a point counts as an error when ``|f_x(x) − f_y(y)|`` > γ (strictly), fixed before seeing
        the data.
    delta : float in (0, 1)
        Confidence parameter δ.

    Returns
    -------
    float
        ε (not clipped to 1); +inf when m − k − t = 0.
    """
    m = _check_int("m", m, 1)
    k = _check_int("k", k, 0, m, "m")
    gamma = _check_positive("loss_threshold", loss_threshold)
    delta = _check_delta(delta)
    fx = _as_1d("projections_x_out", projections_x_out)
    fy = _as_1d("projections_y_out", projections_y_out)
    if fx.shape != fy.shape:
        raise ValueError(f"projections_x_out and projections_y_out must hold the same points (one value each); "
                         f"got {fx.size} and {fy.size} values")
    _check_len("projections_x_out", fx, k, m)
    t = int(np.count_nonzero(np.abs(fx - fy) > gamma))
    return float(_kmp_core(np.asarray(t), np.asarray(k), m, delta))
