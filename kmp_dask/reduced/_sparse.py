"""ℓ1 and ℓ0 reduced-set selection on dense pool matrices: the baselines of hyperplane pursuit.

Weston & Bakır, "Fast Binary and Multi-Output Reduced Set Selection", compare hyperplane matching
pursuit with two penalised approximations of a kernel expansion ``w_j = Σ_i α_ij φ(x_i)``
(``m`` outputs ``j``) by ``ŵ_j = Σ_{i∈S} β_ij φ(z_i)`` over a candidate pool ``z_1 … z_P``:

* the ℓ1 penalty (paper §2, eq. 4 and, multi-output, eq. 5) — :func:`l1_path`;
* the ℓ0 "zero-norm" rescaling (paper §3.3–3.4.1, Algorithms 3.4 and 3.5) — :func:`l0_path`.

Everything goes through three small dense quantities (nothing here touches the training data):

``Kzz`` (P, P)
    The pool Gram matrix ``k(z_a, z_b)``.
``f`` (P, m)
    The values of ``w`` at the pool points, ``f_aj = <φ(z_a), w_j> = (K_{pool,sv} α)_aj``.
``wsq`` (m,)
    ``‖w_j‖² = α_jᵀ K_{sv,sv} α_j``.

The equivalences a successor needs
----------------------------------
**RKHS error.** For a support ``S`` and coefficients ``β`` (|S| × m)::

    ‖w_j − ŵ_j‖² = wsq_j − 2 β_jᵀ f_{S,j} + β_jᵀ K_SS β_j                       (E)

(:func:`rkhs_error`). It is a quadratic in β; its minimiser on a fixed support solves
``K_SS β = f_S`` (:func:`refit_on_support`), a system that is always consistent: ``f_S`` is the
Gram-matrix image of the coefficients of the projection of ``w`` onto ``span φ(z_S)``.

**ℓ1 as an ordinary lasso.** Factor ``Kzz + εI = L Lᵀ`` (Cholesky; ``ε = 1e-10 · mean diag Kzz``
keeps a rank-deficient Gram factorable and adds the negligible ridge ``ε‖β‖²``). With the design
``A = Lᵀ`` (P × P) and target ``t = L⁻¹ f``::

    ‖A β − t‖² = βᵀLLᵀβ − 2βᵀLL⁻¹f + ‖t‖² = βᵀ(K + εI)β − 2 βᵀ f + ‖t‖²,

so (E) = ``‖Aβ − t‖² + (wsq − ‖t‖²)``: the RKHS problem of eq. (4) is the least-squares lasso on
``(A, t)`` up to a constant. ``wsq − ‖t‖² ≥ 0`` is the part of ``w`` outside the span of the whole
pool, which no reduced set can remove. Also ``Aᵀt = f``, so the smallest penalty with ``β = 0`` is
``λ_max = 2 max_a |f_a|``.

**Penalty scaling.** scikit-learn minimises ``1/(2 n_samples) ‖t − Aβ‖² + α ‖β‖₁`` with
``n_samples = P``; multiplying by ``2P`` gives eq. (4) with ``λ = 2 P α``. Every ``param`` and
every ``alphas`` value in this module is the paper's λ (the scale of eq. 4), never sklearn's α.

**Multi-output ℓ1.** Eq. (5) couples the outputs through ``λ Σ_i max_j |β_ij|`` (an ℓ1/ℓ∞ group
penalty), solved in the paper as one QP with ``P(1 + 2m)`` variables. :func:`l1_path` uses the
ℓ1/ℓ2 group penalty ``λ Σ_i ‖β_i·‖₂`` instead — scikit-learn's multi-task lasso (``lasso_path`` with
a 2-D target). Both penalties are norms of the per-vector row ``β_i·`` summed over ``i``, so both
zero whole rows and select one support shared by all outputs (the property the comparison is
about: kernel evaluations per prediction); the ℓ1/ℓ2 version has a warm-started coordinate-descent
path solver with KKT-checked convergence, while ℓ1/ℓ∞ would need a QP per λ. With ``refit=True``
(the paper's comparisons backfit β on the chosen support) the difference is only in which supports
appear along the path.

**ℓ0 rescaling as reweighted ridge.** Algorithm 3.4 keeps scales ``s_i`` (``s = 1`` at the start)
and repeatedly solves for ``λ`` in ``ŵ = Σ λ_i s_i φ(z_i)``, then rescales ``s_i ← s_i |λ_i|``. With
``D = diag(s)`` on the active indices the step is::

    λ = argmin ‖w − Σ λ_i s_i φ(z_i)‖² + γ ‖λ‖² = (D K D + γ I)⁻¹ D f.

For γ = 0 (the paper's lossless variant) the system is singular whenever the pool is linearly
dependent; the minimum-norm solution is used, which makes the iteration FOCUSS (Gorodnitsky & Rao),
converging to a basic solution with at most ``rank(Kzz)`` vectors. In terms of ``β = s ⊙ λ`` the
ridge term is ``γ Σ_i (β_i / s_i)²``; at a fixed point ``|λ_i| = 1``, i.e. ``s_i = |β_i|``, so it
equals ``γ · |S|``: γ is a price per kept vector in units of squared RKHS error. This is the
zero-norm approximation of Weston et al. 2003 (the paper's ref. [15]) and is why it is the
default. The paper's own lossy step, ``γ Σ_i λ_i β_i`` (``step="paper"``), is a linear term:
with a positive-definite ``K`` the step is strictly convex and exact, ``D K D λ = D (f − γ/2)``,
but its minimiser ``β = s ⊙ λ = K_A⁻¹ (f_A − γ/2)`` does not depend on the scales, so the
rescaling reaches its fixed point after one sweep (``λ = ±1``) and drops no vector — a signed sum
is no sparsity penalty (measured in ``benchmarks/reduced_chunking.py``; docs/reduced.md).
Multi-output (Algorithm 3.5): coupled runs share one ``s`` and update ``s_i ← s_i Σ_j |λ_ij|``
(one support); independent runs keep one ``s`` per output and the level's support is the union of
the outputs' supports (coefficient 0 where an output does not use a vector), so ``n_vectors`` is the
number of kernel evaluations per prediction.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import lasso_path

from ..exceptions import user_stacklevel

__all__ = ["SparseLevel", "l0_path", "l1_path", "refit_on_support", "rkhs_error"]

_JITTER = 1e-10  # relative to mean(diag(Kzz)): the ε of Kzz + εI = L Lᵀ
_SYM_RTOL = 1e-8  # allowed asymmetry of Kzz, relative to max |Kzz|
_LSTSQ_COND = 1e-13  # relative singular-value cut-off of the least-squares fallbacks
_L0_DROP = 1e-8  # ℓ0: drop i when s_i·sqrt(K_ii) < _L0_DROP · max_k s_k·sqrt(K_kk)


@dataclass(frozen=True)
class SparseLevel:
    """One point of a sparsity path: a reduced set and its coefficients.

    Attributes
    ----------
    support : ndarray of int, sorted
        Indices into the pool (rows of ``Kzz``).
    coef : ndarray (len(support), m)
        ``β``: ``ŵ_j = Σ_k coef[k, j] φ(z_{support[k]})``. Independent multi-output levels have
        zeros where an output does not use a vector of the (union) support.
    rkhs_error : ndarray (m,)
        ``‖w_j − ŵ_j‖²`` per output (see :func:`rkhs_error`).
    param : float
        The penalty that produced the level: λ of eq. (4) for :func:`l1_path`, γ for
        :func:`l0_path`.
    """

    support: np.ndarray
    coef: np.ndarray
    rkhs_error: np.ndarray
    param: float

    @property
    def n_vectors(self) -> int:
        """Number of pool vectors used (kernel evaluations per prediction)."""
        return int(len(self.support))


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------


def _check_kzz(Kzz) -> np.ndarray:
    K = np.asarray(Kzz, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise ValueError(
            f"Kzz must be the square (P, P) Gram matrix of the pool, P ≥ 1; got shape {K.shape}. "
            "Pass k(Z, Z) for the P pool points Z."
        )
    if not np.all(np.isfinite(K)):
        raise ValueError(
            f"Kzz contains {int(np.sum(~np.isfinite(K)))} non-finite entries (NaN or inf); "
            "recompute the pool Gram matrix from finite pool points."
        )
    asym = float(np.max(np.abs(K - K.T)))
    scale = float(np.max(np.abs(K)))
    if asym > _SYM_RTOL * max(scale, np.finfo(float).tiny):
        raise ValueError(
            f"Kzz must be symmetric; max |Kzz - Kzz.T| = {asym:.3g} against max |Kzz| = {scale:.3g}. "
            "Pass a kernel Gram matrix k(Z, Z) (symmetrise with (K + K.T) / 2 if it is only "
            "rounding)."
        )
    if np.any(np.diag(K) < 0):
        raise ValueError(
            f"Kzz has negative diagonal entries (min {float(np.min(np.diag(K))):.3g}); a kernel "
            "Gram matrix has k(z, z) ≥ 0. Check the kernel."
        )
    return K


def _check_f(f, P: int) -> np.ndarray:
    F = np.asarray(f, dtype=np.float64)
    if F.ndim == 1:
        F = F[:, None]
    if F.ndim != 2 or F.shape[0] != P or F.shape[1] == 0:
        raise ValueError(
            f"f must have shape (P, m) = ({P}, m) (or (P,) for one output) to match Kzz; got shape "
            f"{np.shape(f)}. f holds w's values at the pool points, K(pool, sv) @ alpha."
        )
    if not np.all(np.isfinite(F)):
        raise ValueError(f"f contains {int(np.sum(~np.isfinite(F)))} non-finite entries; pass finite values.")
    return F


def _check_wsq(wsq, m: int) -> np.ndarray:
    w = np.atleast_1d(np.asarray(wsq, dtype=np.float64))
    if w.ndim != 1 or w.shape[0] != m:
        raise ValueError(
            f"wsq must have shape (m,) = ({m},) to match f's {m} output column(s); got shape "
            f"{np.shape(wsq)}. wsq[j] = ‖w_j‖² = alpha[:, j] @ K(sv, sv) @ alpha[:, j]."
        )
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"wsq must be finite and ≥ 0 (squared RKHS norms); got {w}.")
    return w


def _check_support(support, P: int) -> np.ndarray:
    S = np.asarray(support)
    if S.size == 0:
        return np.zeros(0, dtype=np.intp)
    if S.ndim != 1 or not np.issubdtype(S.dtype, np.integer):
        raise ValueError(
            f"support must be a 1-D array of integer pool indices; got dtype {S.dtype}, shape {S.shape}."
        )
    if S.min() < 0 or S.max() >= P:
        raise ValueError(f"support indices must lie in [0, {P}) (the pool size); got min {S.min()}, max {S.max()}.")
    if len(np.unique(S)) != len(S):
        raise ValueError("support contains repeated indices; pass each pool index once.")
    return S.astype(np.intp)


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)


def _check_n_levels(n_levels):
    return None if n_levels is None else _check_positive_int("n_levels", n_levels)


def _check_grid(name: str, values, *, allow_zero: bool) -> np.ndarray:
    g = np.atleast_1d(np.asarray(values, dtype=np.float64))
    ok = g.ndim == 1 and g.size > 0 and np.all(np.isfinite(g)) and np.all(g >= 0 if allow_zero else g > 0)
    if not ok:
        bound = "≥ 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a non-empty 1-D sequence of finite values {bound}; got {values!r}.")
    return g


# ----------------------------------------------------------------------------------------------
# the RKHS quantities
# ----------------------------------------------------------------------------------------------


def _check_common(Kzz, f, wsq, n_levels, max_iter, tol):
    """The checks both paths share: ``(K, F, wsq, n_levels, max_iter)``."""
    K = _check_kzz(Kzz)
    F = _check_f(f, K.shape[0])
    w = _check_wsq(wsq, F.shape[1])
    n_levels = _check_n_levels(n_levels)
    max_iter = _check_positive_int("max_iter", max_iter)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a finite positive float; got {tol!r}.")
    return K, F, w, n_levels, max_iter


def rkhs_error(Kzz, f, wsq, support, coef) -> np.ndarray:
    """``‖w_j − Σ_k coef[k, j] φ(z_{support[k]})‖²`` per output, from pool quantities only.

    Parameters
    ----------
    Kzz : ndarray (P, P)
        Pool Gram matrix.
    f : ndarray (P, m) or (P,)
        ``w`` at the pool points.
    wsq : ndarray (m,) or float
        ``‖w_j‖²``.
    support : ndarray of int (k,)
        Pool indices.
    coef : ndarray (k, m) or (k,)
        Coefficients on ``support``.

    Returns
    -------
    ndarray (m,)
        ``wsq − 2 βᵀ f_S + βᵀ K_SS β`` per output, clipped at 0 (the exact value is ≥ 0; tiny
        negatives are cancellation rounding when ``ŵ ≈ w``).
    """
    K = _check_kzz(Kzz)
    F = _check_f(f, K.shape[0])
    w = _check_wsq(wsq, F.shape[1])
    S = _check_support(support, K.shape[0])
    B = np.asarray(coef, dtype=np.float64)
    B = B[:, None] if B.ndim == 1 else B
    if B.shape != (len(S), F.shape[1]):
        raise ValueError(
            f"coef must have shape (len(support), m) = ({len(S)}, {F.shape[1]}); got {np.shape(coef)}."
        )
    return _error(K, F, w, S, B)


def _error(K, F, wsq, S, B) -> np.ndarray:
    if len(S) == 0:
        return wsq.copy()
    KB = K[np.ix_(S, S)] @ B
    err = wsq - 2.0 * np.einsum("kj,kj->j", B, F[S]) + np.einsum("kj,kj->j", B, KB)
    return np.maximum(err, 0.0)


def refit_on_support(Kzz, f, support) -> np.ndarray:
    """The best coefficients on a fixed support: ``β = K_SS⁻¹ f_S`` (the RKHS projection of w).

    Parameters
    ----------
    Kzz : ndarray (P, P)
    f : ndarray (P, m) or (P,)
    support : ndarray of int (k,)

    Returns
    -------
    ndarray (k, m)
        Solves ``K_SS β = f_S`` by Cholesky; if ``K_SS`` is numerically singular (duplicate or
        linearly dependent pool points) by ``scipy.linalg.lstsq`` (minimum-norm solution with
        singular values below ``1e-13 · σ_max`` cut). Both minimise the RKHS error (E) on ``S``.
    """
    K = _check_kzz(Kzz)
    F = _check_f(f, K.shape[0])
    S = _check_support(support, K.shape[0])
    return _refit(K, F, S)


def _refit(K, F, S) -> np.ndarray:
    if len(S) == 0:
        return np.zeros((0, F.shape[1]))
    Kss = K[np.ix_(S, S)]
    Fs = F[S]
    try:
        c, low = scipy.linalg.cho_factor(Kss, lower=True, check_finite=False)
        d = np.diag(c)
        # squared ratio of the Cholesky diagonal bounds the condition number from below
        if d.min() > 0 and (d.min() / d.max()) ** 2 > 1e4 * np.finfo(float).eps:
            return scipy.linalg.cho_solve((c, low), Fs, check_finite=False)
    except np.linalg.LinAlgError:
        pass
    beta, *_ = scipy.linalg.lstsq(Kss, Fs, cond=_LSTSQ_COND, check_finite=False, lapack_driver="gelsd")
    return beta


# ----------------------------------------------------------------------------------------------
# path bookkeeping
# ----------------------------------------------------------------------------------------------


def _collect(candidates, n_levels):
    """The error-vs-size front of the candidates, thinned to about ``n_levels`` levels.

    Per distinct non-empty support size the candidate with the smallest total RKHS error
    (summed over outputs); then, walking up in size, a level is kept only if its total error is
    strictly below that of every smaller kept level (a larger reduced set that approximates w no
    better is dominated — supports along a lasso or ℓ0 sweep are not nested, so this happens).
    """
    best: dict[int, SparseLevel] = {}
    for lev in candidates:
        k = lev.n_vectors
        if k == 0:
            continue
        if k not in best or float(lev.rkhs_error.sum()) < float(best[k].rkhs_error.sum()):
            best[k] = lev
    levels = []
    for k in sorted(best):
        if not levels or float(best[k].rkhs_error.sum()) < float(levels[-1].rkhs_error.sum()):
            levels.append(best[k])
    if n_levels is None or len(levels) <= n_levels:
        return levels
    keep = np.unique(np.round(np.linspace(0, len(levels) - 1, n_levels)).astype(int))
    return [levels[i] for i in keep]


def _level(K, F, wsq, supports, coefs, refit, param) -> SparseLevel:
    """A level from per-output supports/coefs (one entry per output, or one shared entry)."""
    m = F.shape[1]
    union = np.unique(np.concatenate([np.asarray(s, dtype=np.intp) for s in supports]))
    B = np.zeros((len(union), m))
    if len(supports) == 1:  # one support shared by all outputs
        B[:] = _refit(K, F, union) if refit else coefs[0]
    else:
        for j, (s, c) in enumerate(zip(supports, coefs, strict=True)):
            rows = np.searchsorted(union, s)
            B[rows, j] = _refit(K, F[:, [j]], s)[:, 0] if refit else c
    return SparseLevel(support=union, coef=B, rkhs_error=_error(K, F, wsq, union, B), param=float(param))


# ----------------------------------------------------------------------------------------------
# ℓ1
# ----------------------------------------------------------------------------------------------


def l1_path(Kzz, f, wsq, *, n_levels=10, coupled=True, refit=True, alphas=None, tol=1e-6, max_iter=5000):
    """Reduced sets along the ℓ1 path of eq. (4) (multi-output: group lasso, see module docstring).

    Minimises ``Σ_j ‖w_j − Σ_i β_ij φ(z_i)‖² + λ Ω(β)`` for a decreasing grid of λ with
    scikit-learn's warm-started coordinate descent (``lasso_path``) on the equivalent least-squares
    problem ``‖Lᵀβ − L⁻¹f‖²`` (``Kzz + εI = L Lᵀ``). ``Ω`` is ``Σ_i |β_i|`` per output
    (``m == 1`` or ``coupled=False``: one lasso per output on a common λ grid) or, with
    ``coupled=True`` and ``m > 1``, the group penalty ``Σ_i ‖β_i·‖₂`` (one shared support).

    Parameters
    ----------
    Kzz : ndarray (P, P)
        Pool Gram matrix (symmetric positive semi-definite).
    f : ndarray (P, m) or (P,)
        ``w`` at the pool points, ``K(pool, sv) @ alpha``.
    wsq : ndarray (m,) or float
        ``‖w_j‖²``.
    n_levels : int or None, default 10
        Thin the result to about ``n_levels`` levels spread evenly over the list of distinct
        support sizes (by rank; the smallest and the largest are always kept). ``None``: every
        distinct size.
    coupled : bool, default True
        Multi-output only: one shared support (group lasso) or independent lassos whose supports
        are united per λ.
    refit : bool, default True
        Re-solve β on each support by least squares (:func:`refit_on_support`; backfitting as in
        the paper's comparisons). ``False`` keeps the lasso's shrunk coefficients.
    alphas : sequence of float, optional
        Penalties λ **in the units of eq. (4)** (``‖w − ŵ‖² + λ Σ|β|``; sklearn receives
        ``λ / (2P)``). Default: 100 values geometrically from ``λ_max`` (the smallest λ with
        β = 0: ``2 max_a |f_a|``, or ``2 max_a ‖f_a·‖₂`` for the group lasso) down to
        ``1e-4 · λ_max``.
    tol, max_iter
        Passed to ``lasso_path`` (``tol`` is its duality-gap tolerance relative to ``‖L⁻¹f‖²``).
        If coordinate descent does not converge, one ``sklearn.exceptions.ConvergenceWarning``
        summarises where.

    Returns
    -------
    list of SparseLevel
        The error-vs-size front of the path, in increasing size: per distinct non-zero support
        size the path point with the smallest total RKHS error (summed over outputs), and only
        levels whose total error is strictly below that of every smaller level (supports along
        the path are not nested, so a larger support can be worse; it is dropped as dominated).
        ``param`` is the λ that produced the level; it mostly, but not always, decreases with
        size. Empty if ``f == 0`` (w is orthogonal to every pool vector: β = 0 is optimal).

    Raises
    ------
    ValueError
        Bad shapes or values (the message names the argument), ``Kzz`` not positive
        semi-definite, or ``wsq`` below ``fᵀKzz⁻¹f`` (f and wsq from different expansions).

    Notes
    -----
    One output (or one per output, ``coupled=False``) runs on the precomputed Gram
    ``AᵀA = Kzz + εI`` with ``Xy = Aᵀt`` — the same problem, about 5x faster than on ``A``; the
    group lasso (no Gram form in scikit-learn) runs on ``A``. Coordinate descent is slow on
    ill-conditioned Grams (e.g. wide RBF kernels): on a P = 1000 RBF pool with cond ≈ 1e12 about a
    third of the 100 default λ stop at ``max_iter`` (relative duality gap ≈ 4e-5 instead of 1e-6),
    taking ~13 s; with cond ≈ 40 the path takes ~3 s and converges.
    """
    K, F, w, n_levels, max_iter = _check_common(Kzz, f, wsq, n_levels, max_iter, tol)
    m = F.shape[1]
    group = bool(coupled) and m > 1
    A, T = _lasso_design(K, F, w)
    lams = _lambda_grid(F, group, alphas)
    if lams is None:
        return []
    path = _lasso_coefficients(A, T, lams, group, tol, max_iter)
    return _collect(_l1_levels(K, F, w, lams, path, group, refit), n_levels)


def _lasso_design(K, F, w):
    """``A = Lᵀ`` and ``T = L⁻¹F`` with ``K + εI = LLᵀ`` (βᵀKβ − 2βᵀf = ‖Aβ − T‖² − const);
    checks that ``wsq`` is at least the projection's norm ``fᵀK⁻¹f``."""
    P = K.shape[0]
    eps = _JITTER * max(float(np.mean(np.diag(K))), np.finfo(float).tiny)
    try:
        L = scipy.linalg.cholesky(K + eps * np.eye(P), lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        raise ValueError(
            "Kzz is not positive semi-definite: its Cholesky factorisation failed even with the "
            f"jitter {eps:.3g}·I. Pass a Gram matrix of a positive-definite kernel."
        ) from None
    A = np.asfortranarray(L.T)
    T = scipy.linalg.solve_triangular(L, F, lower=True, check_finite=False)
    proj = np.sum(T * T, axis=0)
    bad = proj - w > 1e-6 * np.maximum(proj, w) + 1e-300
    if np.any(bad):
        j = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"wsq[{j}] = {w[j]:.6g} is smaller than the squared norm {proj[j]:.6g} of w's projection on "
            "the pool span (fᵀKzz⁻¹f), which is impossible for wsq = ‖w‖²: f and wsq do not describe "
            "the same expansion (or the kernels differ). Recompute wsq = alpha.T @ K(sv, sv) @ alpha."
        )
    return A, T


def _lambda_grid(F, group, alphas):
    """λ from the largest useful value down (None when f = 0: every λ gives the empty model)."""
    row = np.sqrt(np.sum(F * F, axis=1)) if group else np.max(np.abs(F), axis=1)
    lam_max = 2.0 * float(np.max(row))
    if lam_max == 0.0:
        return None
    if alphas is None:
        return lam_max * np.geomspace(1.0, 1e-4, 100)
    return np.sort(_check_grid("alphas", alphas, allow_zero=False))[::-1]


def _lasso_coefficients(A, T, lams, group, tol, max_iter):
    """The lasso path (n_λ, P, m) by scikit-learn's coordinate descent; its ConvergenceWarnings
    are counted and reported once."""
    P, m = A.shape[0], T.shape[1]
    sk_alphas = lams / (2.0 * P)
    gram = A.T @ A  # = Kzz + εI up to rounding: single-output CD on the Gram is ~5x faster

    def run(target):
        kw = {} if target.ndim == 2 else {"precompute": gram, "Xy": A.T @ target}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, coefs, _ = lasso_path(A, target, alphas=sk_alphas, tol=tol, max_iter=max_iter, **kw)
        n_conv = 0
        for wm in caught:
            if issubclass(wm.category, ConvergenceWarning):
                n_conv += 1
            else:
                warnings.warn_explicit(wm.message, wm.category, wm.filename, wm.lineno)
        return coefs, n_conv

    n_conv = 0
    if group or m == 1:
        coefs, n_conv = run(T if group else T[:, 0])
        # (m, P, n) for the group lasso, (P, n) for one output -> (n, P, m)
        path = np.moveaxis(coefs, -1, 0).transpose(0, 2, 1) if group else np.moveaxis(coefs, -1, 0)[:, :, None]
    else:
        path = np.empty((len(lams), P, m))
        for j in range(m):
            cj, nc = run(np.ascontiguousarray(T[:, j]))
            path[:, :, j] = cj.T
            n_conv += nc
    if n_conv:
        warnings.warn(
            f"l1_path: coordinate descent stopped at max_iter={max_iter} before the duality gap reached "
            f"tol={tol:g} in {n_conv} of {len(lams) * (1 if group or m == 1 else m)} lasso solves; the "
            "supports there may be off (refit=True still gives the best β on each). Raise max_iter "
            "or tol, or use a shorter alphas grid.",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return path


def _l1_levels(K, F, w, lams, path, group, refit):
    """One candidate level per λ (refits shared between equal supports)."""
    m = F.shape[1]
    cache: dict[tuple, SparseLevel] = {}
    candidates = []
    for lam, B in zip(lams, path, strict=True):
        nz = B != 0
        if group or m == 1:
            supports = [np.flatnonzero(nz.any(axis=1))]
            coefs_ = [B[supports[0]]]
        else:
            supports = [np.flatnonzero(nz[:, j]) for j in range(m)]
            coefs_ = [B[s, j] for j, s in enumerate(supports)]
        if refit:
            key = tuple(tuple(s) for s in supports)
            if key not in cache:
                cache[key] = _level(K, F, w, supports, coefs_, True, lam)
            candidates.append(cache[key])
        else:
            candidates.append(_level(K, F, w, supports, coefs_, False, lam))
    return candidates


# ----------------------------------------------------------------------------------------------
# ℓ0
# ----------------------------------------------------------------------------------------------


def _distinct(K) -> np.ndarray:
    """Indices of the first pool point of each group of RKHS duplicates, in order.

    ``z_i`` duplicates an earlier ``z_j`` when ``‖φ(z_i) − φ(z_j)‖² = K_ii + K_jj − 2K_ij`` is at
    rounding level (≤ 1e-12 · (K_ii + K_jj)). Row blocks keep the memory at O(512 · P).
    """
    P = K.shape[0]
    d = np.diag(K)
    dup = np.zeros(P, dtype=bool)
    for a in range(0, P, 512):
        b = min(a + 512, P)
        dist = d[a:b, None] + d[None, :] - 2.0 * K[a:b]
        close = dist <= 1e-12 * (d[a:b, None] + d[None, :])
        close &= np.arange(P)[None, :] < np.arange(a, b)[:, None]  # an earlier point only
        dup[a:b] = close.any(axis=1)
    return np.flatnonzero(~dup)


L0_STEPS = ("ridge", "paper")


def _l0_step(Ka, Fa, s, gamma, step="ridge"):
    """One rescaling step of Algorithm 3.4 / 3.5 on the active indices: ``λ`` (|A|, m).

    ``"ridge"``: ``λ = argmin ‖w − Σ λ_i s_i φ(z_i)‖² + γ ‖λ‖² = (D K D + γ I)⁻¹ D f``.
    ``"paper"``: the paper's lossy step, ``λ = argmin ‖w − Σ λ_i s_i φ(z_i)‖² + γ Σ_i λ_i s_i``
    (summed over outputs): strictly convex when ``K_AA`` is positive definite, so its minimiser
    solves ``D K D λ = D (f − γ/2)``. Both fall back to the minimum-norm least-squares solution
    when the system is not numerically positive definite (γ = 0: FOCUSS)."""
    M = s[:, None] * Ka * s[None, :]
    if step == "paper":
        A, rhs = M, s[:, None] * (Fa - 0.5 * gamma)
    else:
        A, rhs = (M + gamma * np.eye(len(s)) if gamma > 0 else M), s[:, None] * Fa
    if step == "paper" or gamma > 0:
        try:
            cf = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
            return scipy.linalg.cho_solve(cf, rhs, check_finite=False)
        except np.linalg.LinAlgError:  # not numerically positive definite: fall through
            pass
    lam, *_ = scipy.linalg.lstsq(A, rhs, cond=_LSTSQ_COND, check_finite=False, lapack_driver="gelsd")
    return lam


def _l0_run(K, F, gamma, max_iter, tol, candidates, step="ridge"):
    """Algorithm 3.4 / 3.5 with one shared scale vector for targets F (P, m).

    Returns ``(support, β, converged, settled)``: ``converged`` — stopped by the rule (a sweep
    without a drop and a relative β change ≤ tol); ``settled`` — converged, or at max_iter no
    index was dropped during the last ``max(3, max_iter // 10)`` sweeps.
    """
    sq = np.sqrt(np.maximum(np.diag(K), 0.0))
    active = candidates[sq[candidates] > 0]  # a zero-norm φ(z_i) contributes nothing
    s = np.ones(len(active))
    beta = np.zeros((len(active), F.shape[1]))
    last_drop = 0
    for sweep in range(1, max_iter + 1):
        lam = _l0_step(K[np.ix_(active, active)], F[active], s, gamma, step)
        new_beta = s[:, None] * lam
        s = s * np.sum(np.abs(lam), axis=1)
        size = s * sq[active]
        top = float(size.max()) if len(size) else 0.0
        keep = size > _L0_DROP * top if top > 0 else np.zeros(len(active), dtype=bool)
        dropped = not keep.all()
        moved = np.linalg.norm(new_beta - beta) > tol * max(float(np.linalg.norm(new_beta)), 1e-300)
        active, s, beta = active[keep], s[keep], new_beta[keep]
        if dropped:
            last_drop = sweep
        if len(active) == 0 or not (dropped or moved):
            return active, beta, True, True
    return active, beta, False, max_iter - last_drop >= max(3, max_iter // 10)


def l0_path(Kzz, f, wsq, *, gammas=None, n_levels=10, coupled=True, refit=True, max_iter=50, tol=1e-8,
            step="ridge"):
    """Reduced sets from the ℓ0 (zero-norm) multiplicative rescaling, Algorithms 3.4 / 3.5.

    For each γ: scales ``s = 1``; repeat ``λ = (D K D + γ I)⁻¹ D f`` on the active indices
    (``D = diag(s)``; minimum-norm least squares for γ = 0), ``s_i ← s_i |λ_i|`` (coupled
    multi-output: ``s_i ← s_i Σ_j |λ_ij|``), drop ``i`` once ``s_i √K_ii`` falls below ``1e-8`` of
    the largest such value; stop when no index was dropped and ``β = s ⊙ λ`` moved by at most
    ``tol`` (relative), or after ``max_iter`` sweeps. The ridge form of the lossy step and its
    meaning (γ ≈ the squared-error price of one vector) are explained in the module docstring.

    Exact duplicates in the RKHS (``K_ii + K_jj − 2K_ij`` at rounding level) enter only once (the
    first of each group): equal scales get equal λ and stay equal forever, so the multiplicative
    update can never choose between duplicates — the lossless run would keep both.

    Parameters
    ----------
    Kzz : ndarray (P, P)
        Pool Gram matrix.
    f : ndarray (P, m) or (P,)
        ``w`` at the pool points.
    wsq : ndarray (m,) or float
        ``‖w_j‖²``.
    gammas : sequence of float ≥ 0, optional
        Penalties; ``0`` is the paper's lossless variant. Default: ``max(20, 2·n_levels)`` values
        geometrically from ``γ_max = max_a Σ_j f_aj² / K_aa`` (the squared error the best single
        vector removes: above it not even one vector pays for itself) down to ``1e-10 · γ_max``,
        so sizes run from one vector to near-lossless.
    n_levels : int or None, default 10
        Thin to about ``n_levels`` levels spread evenly over the distinct sizes (by rank, the
        smallest and largest kept); ``None`` keeps all.
    coupled : bool, default True
        Multi-output: one shared scale vector (Algorithm 3.5 with one support), or one run per
        output with the level's support the union of the outputs' supports.
    refit : bool, default True
        Re-solve β on the support by least squares; ``False`` keeps ``β = s ⊙ λ`` of the last
        sweep (ridge-shrunk for γ > 0).
    max_iter : int, default 50
        Rescaling sweeps per γ (the paper: "typically converges in 10–20 steps"; a γ at which
        some vector is marginal — its error reduction ≈ γ — can take 100 or more, because such a
        scale decays at a rate near 1). A run stopped at ``max_iter`` still yields its current
        state. One ``ConvergenceWarning`` reports the runs whose support was still losing vectors
        in the last ``max(3, max_iter // 10)`` sweeps (``refit=True``: only the support matters)
        or, with ``refit=False``, every run stopped at ``max_iter``.
    tol : float, default 1e-8
        Relative change of β that counts as converged.
    step : {"ridge", "paper"}, default "ridge"
        The lossy step: ``"ridge"`` penalises ``γ ‖λ‖²`` (the zero-norm approximation of the
        paper's ref. [15]; module docstring); ``"paper"`` the paper's text, ``γ Σ_i λ_i s_i`` — a
        linear term, exact for a positive-definite ``Kzz``: its minimiser is ``β = s ⊙ λ =
        K_AA⁻¹ (f_A − γ/2)`` whatever the scales, so the rescaling reaches its fixed point after
        one sweep and drops no vector (docs/reduced.md measures it).

    Returns
    -------
    list of SparseLevel
        The error-vs-size front of the sweep, in increasing size, built as in :func:`l1_path`
        (per size the run with the smallest total error; dominated larger levels dropped).
        ``param`` is the γ of the run. Empty if ``f == 0``.
    """
    K, F, w, n_levels, max_iter = _check_common(Kzz, f, wsq, n_levels, max_iter, tol)
    if step not in L0_STEPS:
        raise ValueError(f"step must be one of {L0_STEPS} (the lossy step's penalty); got {step!r}")
    P = K.shape[0]
    m = F.shape[1]
    d = np.diag(K)
    pos = d > 0
    gain = np.zeros(P)
    gain[pos] = np.sum(F[pos] ** 2, axis=1) / d[pos] if coupled else np.max(F[pos] ** 2, axis=1) / d[pos]
    g_max = float(gain.max())
    if g_max == 0.0:
        return []
    if gammas is None:
        n = max(20, 2 * (n_levels or 10))
        gs = g_max * np.geomspace(0.25, 1e-10, n)
    else:
        gs = np.sort(_check_grid("gammas", gammas, allow_zero=True))[::-1]

    pool = _distinct(K)
    runs = unsettled = 0
    candidates = []
    for g in gs:
        targets = [F] if coupled or m == 1 else [F[:, [j]] for j in range(m)]
        supports, coefs = [], []
        for Fj in targets:
            S, B, converged, settled = _l0_run(K, Fj, float(g), max_iter, tol, pool, step)
            runs += 1
            unsettled += not (converged if not refit else settled)
            supports.append(S)
            coefs.append(B if len(targets) == 1 else B[:, 0])
        candidates.append(_level(K, F, w, supports, coefs, refit, g))
    if unsettled:
        what = "support was still losing vectors" if refit else "coefficients had not converged"
        warnings.warn(
            f"l0_path: in {unsettled} of {runs} rescaling runs the {what} at max_iter={max_iter} "
            f"sweeps (tol={tol:g}); their current state is used. Raise max_iter.",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    return _collect(candidates, n_levels)
