"""Newton steps for losses other than squared: the line search along a new atom and the refit
of all coefficients (Vincent & Bengio §3, "back-fitting" for general losses).

Both talk to the data through ``send(query, msg) -> list`` (a pass of the pursuit, carrying any
queued effects). A pass evaluates several trial points at once, so a step costs one round trip.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import solve

from ..blockops import LineQuery, LineStats, RefitQuery, kmp_linesearch, kmp_refit_stats
from ..exceptions import NumericalWarning, user_stacklevel

__all__ = ["line_search", "newton_refit", "refit_due"]

_FRACTIONS = (1.0, 0.5, 0.25, 0.125)


def line_search(send, stats0, sqn, steps):
    """Newton line search along the pending column, per output; never increases the loss.

    ``stats0``: a :class:`~kmp_dask.blockops.LineStats` at step 0 (each field (m,)). Each pass
    evaluates 4 trial steps on the segment from the current best towards its Newton point. Returns
    the step (m,).
    """
    a = np.zeros_like(stats0.loss)
    L, G, H = stats0.loss.copy(), stats0.grad.copy(), stats0.hess.copy()
    fractions = np.array(_FRACTIONS)
    for _ in range(steps):
        newton = np.where(H > 1e-12 * max(sqn, 1e-300), -G / np.maximum(H, 1e-300), -G / max(sqn, 1e-300))
        if np.all(np.abs(newton) <= 1e-12 * np.maximum(np.abs(a), 1e-12)):
            break
        trials = a[None, :] + fractions[:, None] * newton[None, :]
        tot = LineStats.combine(send(kmp_linesearch, LineQuery(trials)))
        tl, tg, th = tot.loss, tot.grad, tot.hess
        best = np.argmin(tl, axis=0)
        cols = np.arange(len(a))
        better = tl[best, cols] < L
        a = np.where(better, trials[best, cols], a)
        G = np.where(better, tg[best, cols], G)
        H = np.where(better, th[best, cols], H)
        improvement = np.where(better, L - tl[best, cols], 0.0)
        L = np.where(better, tl[best, cols], L)
        if not better.any() or np.all(improvement <= 1e-10 * np.abs(L)):
            break
    return a


def refit_due(refit_every, t: int, n: int, last: int) -> bool:
    """Whether iteration ``t`` (basis size ``n`` after it) ends with a Newton refit.

    ``"auto"``: a geometric schedule — every iteration while n ≤ 10, then whenever the basis has
    grown by a tenth since the last refit. A refit costs O(N·n²·m) (the curvature ``BᵀHB``), so
    refitting every iteration costs O(N·n³·m) in total; the schedule keeps it O(N·n²·m).
    """
    if not refit_every:
        return False
    if refit_every == "auto":
        return n <= 10 or n - last >= max(1, last // 10)
    return (t + 1) % int(refit_every) == 0


def _newton_direction(H, G, pen, coef):
    """Per output j: −(H_j + diag(pen) + εI)⁻¹ (G_j + pen·coef_j).

    A curvature that is only semi-definite (e.g. Huber's, zero on rows beyond ``delta``; or
    atoms whose rows all sit in a flat part of the loss) gets a Levenberg–Marquardt shift μI,
    μ from 1e-8 of the mean diagonal upwards, instead of a least-squares solve; only if that
    fails too a :class:`~kmp_dask.exceptions.NumericalWarning` says so and ``lstsq`` is used.
    """
    n, m = coef.shape
    delta = np.empty_like(coef)
    for j in range(m):
        A = H[j] + np.diag(pen) + 1e-12 * np.trace(H[j]) / max(n, 1) * np.eye(n)
        b = G[:, j] + pen * coef[:, j]
        scale = max(np.trace(A) / max(n, 1), 1e-300)
        for mu in (0.0, 1e-8, 1e-6, 1e-4, 1e-2):
            try:
                delta[:, j] = -solve(A + mu * scale * np.eye(n) if mu else A, b, assume_a="pos", check_finite=False)
                break
            except np.linalg.LinAlgError:
                continue
        else:
            warnings.warn(
                f"Newton refit: the curvature of output {j} is not positive definite at n={n} atoms, even "
                "shifted by 1e-2 of its mean diagonal; the step uses a least-squares solve. Increase `ridge`.",
                NumericalWarning, stacklevel=user_stacklevel(),
            )
            delta[:, j] = -np.linalg.lstsq(A, b, rcond=None)[0]
    return delta


def newton_refit(send, coef, lam, bias_pos, steps):
    """Damped Newton on all coefficients for ``Σ L + ½ λ ‖coef (bias excluded)‖²``."""
    n, m = coef.shape
    pen = np.full(n, lam)
    if bias_pos is not None:
        pen[bias_pos] = 0.0
    tot = LineStats.combine(send(kmp_refit_stats, RefitQuery((coef,), 0)))
    L = tot.loss[0] + 0.5 * (pen[:, None] * coef**2).sum(axis=0)
    G, H = tot.grad, tot.hess
    for it in range(steps):
        more = it < steps - 1  # the gradient/curvature at the new point is needed only then
        delta = _newton_direction(H, G, pen, coef)
        trials = [coef + f * delta for f in _FRACTIONS]
        tot = LineStats.combine(send(kmp_refit_stats, RefitQuery(tuple(trials), 0 if more else None)))
        tl = tot.loss + np.stack([0.5 * (pen[:, None] * c**2).sum(axis=0) for c in trials])
        best = np.argmin(tl, axis=0)
        cols = np.arange(m)
        better = tl[best, cols] < L
        if not better.any():
            break
        new = coef.copy()
        for j in np.flatnonzero(better):
            new[:, j] = trials[best[j]][:, j]
        gain = np.where(better, L - tl[best, cols], 0.0)
        L = np.where(better, tl[best, cols], L)
        coef = new
        if not more:
            break
        if np.all(best[better] == 0):
            G, H = tot.grad, tot.hess
        else:  # curvature at the mixed point: one more stats pass
            tot = LineStats.combine(send(kmp_refit_stats, RefitQuery((coef,), 0)))
            G, H = tot.grad, tot.hess
        if np.all(gain <= 1e-12 * np.abs(L)):
            break
    return coef
