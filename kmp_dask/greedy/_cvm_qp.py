"""The core-set QP of a core vector machine, ``argmin αᵀQα`` over the simplex, kept across the
iterations of one core-set loop (docs/cvm.md "The QP"): :class:`SMOQP`, the loop's (pairwise steps
on a kept gradient, to the loop's ε tolerance), and :class:`ActiveSetQP`, exact (``simplex_qp``);
and the growing buffers the loop keeps its core set's K̃ and rows in.

Everything here grows in place: a core-set loop adds one row and column per iteration, so any
O(n²) copy per iteration (a new K̃, a new factor, the core rows re-stacked) makes the loop O(n³)
in memory traffic — measured to be 90 % of a 3,359-core-vector fit (benchmarks/cvm_speed.py).
"""

from __future__ import annotations

import numpy as np

from ..linalg import IncrementalCholesky, forward_substitution, one_blas_thread

__all__ = ["SMOQP", "ActiveSetQP", "GrowingRows", "GrowingSquare", "simplex_qp"]

_RTOL = 1e-14
"""A joining point whose new squared diagonal of the factor is not above ``_RTOL · Q_ii`` is
numerically dependent on the active set: the factor is then recomputed from ``Q_AA``."""


class GrowingSquare:
    """An ``n × n`` float64 matrix in a ``capacity × capacity`` buffer that doubles when full:
    :attr:`view` is ``buffer[:n, :n]`` (no copy)."""

    def __init__(self, capacity: int = 64):
        self.buf = np.zeros((max(int(capacity), 1),) * 2)
        self.n = 0

    @property
    def view(self) -> np.ndarray:
        return self.buf[: self.n, : self.n]

    def reserve(self, n: int) -> None:
        if n > len(self.buf):
            new = np.zeros((max(n, 2 * len(self.buf)),) * 2)
            new[: self.n, : self.n] = self.view
            self.buf = new

    def __getstate__(self):
        return {"M": self.view.copy()}

    def __setstate__(self, state):
        M = state["M"]
        self.buf, self.n = np.zeros((max(len(M), 1),) * 2), len(M)
        self.buf[: self.n, : self.n] = M


class GrowingRows:
    """Rows appended one at a time to a buffer that doubles when full; :attr:`view` is the filled part."""

    def __init__(self, width: int, dtype, capacity: int = 64):
        self.buf = np.zeros((max(int(capacity), 1), int(width)), dtype=dtype)
        self.n = 0

    @property
    def view(self) -> np.ndarray:
        return self.buf[: self.n]

    def append(self, row) -> None:
        if self.n == len(self.buf):
            new = np.zeros((2 * len(self.buf), self.buf.shape[1]), dtype=self.buf.dtype)
            new[: self.n] = self.buf[: self.n]
            self.buf = new
        self.buf[self.n] = row
        self.n += 1


def simplex_qp(Q: np.ndarray, alpha: np.ndarray, tol: float, max_iter: int = 10_000):
    """``argmin αᵀQα`` over the simplex (α ≥ 0, Σα = 1), Q symmetric positive definite, by a
    primal active-set method warm-started from the feasible ``alpha`` (:class:`ActiveSetQP`, for
    one call). Returns ``(alpha, n_steps)``."""
    return ActiveSetQP().solve(Q, alpha, tol, max_iter)


class ActiveSetQP:
    """The MEB dual on the core set, ``argmin αᵀQα`` over the simplex, across the calls of one
    core-set loop.

    On the active set A the equality-constrained minimum is closed form, ``α_A ∝ Q_AA⁻¹ 1``. If it
    is feasible, the KKT check adds the point outside A with the smallest gradient when that is
    below the active level ``1 / 1ᵀQ_AA⁻¹1`` by more than ``tol`` (else α is optimal); if not, α
    moves toward it until a weight reaches 0, which leaves A.

    The lower Cholesky factor ``L`` of ``Q_AA`` is a :class:`~kmp_dask.linalg.IncrementalCholesky`
    (the one growing factor of every family, here with its row-blocked solves) and changes in
    place: a joining point adds one row (one forward solve, O(|A|²)); a point leaving A is removed
    by a rank-one update of the trailing block (O(|A|²), no refactorisation). ``w = L⁻¹1`` is kept
    up to date with the factor (O(|A|) per joining point) and ``z = Q_AA⁻¹1 = L⁻ᵀw`` is one
    backward solve per factor change, cached across calls: a call that adds the new core point
    costs one forward and one backward solve of the support's size.

    ``block``: how many violating points the KKT check may add at once (the most violating
    first); they join the factor as one block (one forward solve with ``block`` right-hand sides
    reads the factor once). 1: one at a time. A core-set loop that admits several points per pass
    uses the same number, so one call costs about what a one-point call costs."""

    def __init__(self, block: int = 1):
        self.block = max(int(block), 1)
        self.active = np.zeros(0, dtype=np.int64)
        self.F = IncrementalCholesky(64)
        self.w = np.zeros(0)
        self.z = None
        self.level = np.nan
        self.n_downdates = self.n_refactors = 0

    @property
    def L(self) -> np.ndarray:
        """The factor of ``Q_AA`` (read-only view), in the order of :attr:`active`."""
        return self.F.L

    def _append(self, Q, i) -> bool:
        row = self.F.append_row(Q[self.active, i], Q[i, i], rtol=_RTOL)
        if row is None:
            return False
        v, d = row
        self.w = np.append(self.w, (1.0 - float(v @ self.w)) / d)
        self.active = np.append(self.active, i)
        return True

    def _append_block(self, Q, idx) -> bool:
        """Several points join the factor at once (a block row: one forward solve with
        ``len(idx)`` right-hand sides, a small Cholesky factor of their Schur complement)."""
        rows = self.F.append_block(Q[np.ix_(self.active, idx)], Q[np.ix_(idx, idx)], rtol=_RTOL)
        if rows is None:
            return False
        V, Lk = rows
        tail = forward_substitution(Lk, 1.0 - V.T @ self.w, block=len(Lk))
        self.w = np.concatenate([self.w, tail])
        self.active = np.concatenate([self.active, np.asarray(idx, dtype=np.int64)])
        return True

    def _remove(self, p: int) -> None:
        """Drop position ``p`` of the active set from the factor (rank-one update of the block after it)."""
        self.F.remove(p)
        self.active = np.delete(self.active, p)
        self.w = self.F.forward(np.ones(len(self.active)))
        self.n_downdates += 1

    def _refactor(self, Q, active) -> None:
        self.F.refactor(Q[np.ix_(active, active)])
        self.active = np.array(active, dtype=np.int64)
        self.w = self.F.forward(np.ones(len(active)))
        self.n_refactors += 1

    def _factor(self, Q, active):
        """The factor of ``Q[active, active]`` (in the order of ``active``), changed in place when
        ``active`` is the current set plus one point at the end, or minus some of its points."""
        if np.array_equal(active, self.active):
            return
        self.z = None
        m = len(self.active)
        if len(active) == m + 1 and np.array_equal(active[:-1], self.active) and self._append(Q, active[-1]):
            return
        if len(active) > m + 1 and np.array_equal(active[:m], self.active) and self._append_block(Q, active[m:]):
            return
        if 0 < len(active) < m:
            keep = np.isin(self.active, active)
            if np.array_equal(self.active[keep], active):
                for p in np.flatnonzero(~keep)[::-1]:
                    self._remove(int(p))
                return
        self._refactor(Q, active)

    def solve(self, Q, alpha, tol, max_iter: int = 10_000):
        with one_blas_thread():  # support-sized solves: BLAS threads only wait (linalg/_threads.py)
            return self._solve(Q, alpha, tol, max_iter)

    def _start(self, Q, alpha):
        n = len(Q)
        a = np.zeros(n)
        a[: len(alpha)] = np.maximum(alpha, 0.0)
        if not a.sum() > 0:
            a[int(np.argmin(np.diag(Q)))] = 1.0
        a /= a.sum()
        active = np.flatnonzero(a > 0)
        if len(self.active) == len(active) and np.array_equal(np.sort(self.active), active):
            active = self.active.copy()  # keep the factor's order
        return a, active

    def _solve(self, Q, alpha, tol, max_iter):
        n = len(Q)
        a, active = self._start(Q, alpha)
        for it in range(max_iter):
            self._factor(Q, active)
            if self.z is None:
                self.z = self.F.backward(self.w)  # Q_AA⁻¹ 1
            z = self.z
            target = z / z.sum()
            if np.all(target >= 0):
                a[:] = 0.0
                a[active] = target
                self.level = level = float(1.0 / z.sum())  # αᵀQα at the equality optimum is 1 / (1ᵀQ⁻¹1)
                outside = np.ones(n, dtype=bool)
                outside[active] = False
                if not outside.any():
                    return a, it
                cand = np.flatnonzero(outside)
                g = Q[np.ix_(cand, active)] @ target
                j = int(np.argmin(g))
                if g[j] >= level - tol / 2:
                    return a, it
                if self.block == 1:
                    active = np.append(active, cand[j])
                else:  # the ``block`` most violating points join together
                    order = np.argsort(g, kind="stable")[: self.block]
                    active = np.append(active, cand[order[g[order] < level - tol / 2]])
                continue
            cur = a[active]
            d = target - cur
            neg = d < 0
            t = float(np.min(cur[neg] / -d[neg]))
            new = cur + t * d
            new[new < 1e-15] = 0.0
            a[:] = 0.0
            a[active] = new
            a /= a.sum()
            # the weights the step took to 0 leave A; a point that joined at weight 0 and grows
            # toward its target stays (with a block of joiners the step can be 0)
            active = active[(a[active] > 0) | (d > 0)]
        return a, max_iter


SMO_MAX_STEPS = 1_000_000
"""A safety bound on the pair steps of one :meth:`SMOQP.solve` call (never reached in the measured
fits: benchmarks/cvm_speed.py)."""


class SMOQP:
    """The MEB dual on the core set, ``argmin αᵀQα`` over the simplex, by warm-started pairwise
    (SMO) steps on the cached core Gram ``Q`` — the solver of Tsang et al.'s CVM: solved to a
    tolerance tied to the loop's ε, not to machine precision (docs/cvm.md "The QP").

    The gradient ``g = Qα`` over the core set is kept across calls: a row that joined since the
    last call (weight 0) costs one product with its row of ``Q``, a step one update with two rows
    of ``Q`` (O(|S|) each; no O(|S|²) work and no factor). A step moves weight from the support
    point with the largest gradient ``j`` to the point ``i`` of the largest second-order gain
    ``(g_j − g_i)² / (Q_ii + Q_jj − 2Q_ij)`` (LIBSVM's working-set selection) by the exact line
    minimum, clipped at ``α_j``. A call stops when ``max_{α_j > 0} g_j − min_i g_i ≤ tol``: then
    ``αᵀQα − min_i g_i ≤ tol`` and every core point's squared distance to the centre is at most
    ``R² + 2·tol`` — with ``tol ≤ ε R²`` inside the (1+ε) ball the loop certifies on the other rows.
    """

    def __init__(self):
        self.g = np.zeros(0)
        self.level = np.nan  #: αᵀQα after the last call
        self.n_steps = self.n_calls = 0

    def solve(self, Q, alpha, tol, rel: float = 0.0, kappa: float = 0.0, max_steps: int = SMO_MAX_STEPS):
        """α (warm start: ``alpha`` padded with zeros to ``len(Q)``) and its number of steps.
        The tolerance is ``max(tol, rel · (kappa − αᵀQα))`` at the start of the call (the ball's
        squared radius then, which the call only increases)."""
        n = len(Q)
        a = np.zeros(n)
        a[: len(alpha)] = alpha
        m = len(self.g)
        g = np.empty(n)
        g[:m] = self.g
        if n > m:
            g[m:] = Q[m:n] @ a
        tol = max(float(tol), float(rel) * (float(kappa) - float(a @ g)))
        steps = _smo_steps(Q, a, g, tol, max_steps)
        self.g = g
        self.level = float(a @ g)
        self.n_steps += steps
        self.n_calls += 1
        return a, steps


def _smo_steps(Q, a, g, tol, max_steps) -> int:
    """Pairwise steps on ``a`` (in place, ``g = Qa`` kept) until the support's largest gradient is
    within ``tol`` of the smallest; returns the number of steps. Written as few whole-array NumPy
    calls per step as possible (the steps are many and cheap: their count, not their size, costs)."""
    diag = np.diagonal(Q)
    d0 = float(diag[0]) if len(diag) else 0.0
    constant = bool(np.all(diag == d0))  # the CVM's K̃ (MMDA's deflated one is not)
    support = a > 0
    num, den, row = np.empty(len(g)), np.empty(len(g)), np.empty(len(g))
    for step in range(max_steps):
        j = int(np.argmax(np.where(support, g, -np.inf)))
        gj = g[j]
        if gj - g.min() <= tol:
            return step
        Qj = Q[j]
        # second-order gain (g_j − g_i)² / (Q_ii + Q_jj − 2Q_ij) over the points below g_j
        np.subtract(gj, g, out=num)
        np.maximum(num, 0.0, out=num)
        num *= num
        if constant:
            np.subtract(2.0 * d0, 2.0 * Qj, out=den)
        else:
            np.subtract(diag + diag[j], 2.0 * Qj, out=den)
        np.maximum(den, 1e-12 * diag[j], out=den)
        num /= den
        i = int(np.argmax(num))
        t = min((gj - g[i]) / den[i], a[j])
        if t >= a[j]:
            t, a[j], support[j] = a[j], 0.0, False
        else:
            a[j] -= t
        a[i] += t
        support[i] = True
        np.subtract(Q[i], Qj, out=row)
        row *= t
        g += row
    return max_steps
