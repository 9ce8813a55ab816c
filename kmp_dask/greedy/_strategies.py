"""How a KMP iteration scores candidates and updates coefficients: one small class per mode.

Vincent & Bengio's three fitting modes for the squared loss, and gradient descent in function
space for other losses (``d`` is a candidate column, ``R`` the residual, ``B`` the
basis columns, ``P⊥`` the projection off their span, λ = ridge · N_train):

====================  ================================  =============================================
strategy              score of ``d``                    coefficients after adding ``d``
====================  ================================  =============================================
``basic``             ⟨d,R⟩² / ‖d‖²                     new one ⟨d,R⟩/‖d‖², earlier ones frozen
``basic_reselect``    as basic, over all atoms          as basic; a chosen atom may be chosen again:
                      (chosen ones included)            its coefficient grows by ⟨d,R⟩/‖d‖²
``backfit``           ⟨d,R⟩² / (‖d‖² + λ)               all re-solved: (BᵀB + λI)⁻¹ BᵀY
``prefit``            ⟨d,R⟩² / (‖P⊥d‖² + λ)             as backfit
``refit``             as basic                          as basic; on the ``refit_every`` schedule and
                                                        at the end all re-solved: (BᵀWB + λI)⁻¹ BᵀWY
loss-driven           ⟨d,g⟩² / ‖d‖² (g = −∂L/∂f)        Newton line search along d; ``backfit``:
                                                        damped Newton refits of all (``refit_every``)
====================  ================================  =============================================

A strategy sees the pursuit (:class:`~kmp_dask.greedy._kmp.Pursuit`) only through its model
state (``coef``, ``chol``, ``ytd``) and its two ways to reach the data: ``pursuit.send`` (a
pass, carrying the queued effects) and ``pursuit.accept`` (queue the pending column's
acceptance with the residual update the next pass applies).
"""

from __future__ import annotations

import numpy as np
from numpy.linalg import LinAlgError
from scipy.linalg import cho_factor, cho_solve, lstsq

from ..blockops import GramStats, LineStats, kmp_gram
from ._newton import line_search, newton_refit, refit_due

__all__ = ["make_strategy", "SquaredBasic", "SquaredBasicReselect", "SquaredBackfit", "SquaredPrefit", "SquaredRefit",
           "LossDriven"]


def _ratio(num, denom, sqn):
    ok = denom > 1e-12 * np.maximum(sqn, 1e-300)
    return np.where(ok, num / np.where(ok, denom, 1.0), 0.0)


class SquaredBasic:
    """``basic``: frozen coefficients, no Cholesky factor."""

    uses_chol = False
    want_cross = False
    #: the new coefficient ⟨d,R⟩/‖d‖² needs nothing the scoring pass did not already return, so
    #: no commit pass: the chosen column is computed (pended) by the next scoring pass's effects
    needs_commit = False
    intercept_column = False  #: squared loss with refits: a column of ones refitted with every atom

    def score(self, corr, sqn, cross, chol, lam):
        return _ratio(np.einsum("ij,ij->i", corr, corr), sqn, sqn)

    def admit(self, col, chol):
        """Whether the committed column can join; ``w`` of the residual move (None: none)."""
        return col.sqn > 0, None

    def add(self, p, col, w, step_t):
        p.coef = np.vstack([p.coef, (col.corr / col.sqn)[None, :]])
        p.accept(None, p.coef[-1])

    def finish(self, p):
        return False  # nothing to refit


class SquaredBasicReselect(SquaredBasic):
    """``basic_reselect``: Vincent & Bengio's basic matching pursuit (Mallat & Zhang's), whose
    dictionary keeps the atoms already chosen: an iteration may pick one of them again, and its
    coefficient then grows by ⟨d,R⟩/‖d‖² — the residual is projected on the chosen column whether
    or not it is new (the paper's figure: "basic KMP … cycled back to previously chosen support
    points to improve their weights"). ``n_basis`` counts iterations, as the paper's N does; the
    expansion holds the distinct atoms (at most ``n_basis``) with their summed coefficients.

    How: an iteration is exactly a ``basic`` one (one pass, the column pended, accepted and the
    residual moved by the rank-one update), except that the chosen row is not excluded from later
    candidates. A re-selected atom so enters the partitions' columns once more (a duplicate column,
    as the pass structure and the journal want it), and :func:`~._result.make_result` merges
    duplicates into one atom with the summed coefficient.
    """

    def add(self, p, col, w, step_t):
        atom = p.atoms[-1]
        if not atom.is_bias:
            p.excluded.discard(atom.index)  # chosen, and still in the dictionary
        super().add(p, col, w, step_t)


class SquaredBackfit(SquaredBasic):
    """``backfit``: α = (BᵀB + λI)⁻¹ BᵀY through the incremental Cholesky factor."""

    uses_chol = True
    intercept_column = True
    needs_commit = True  # Bᵀd and Yᵀd of the chosen column

    def score(self, corr, sqn, cross, chol, lam):
        return _ratio(np.einsum("ij,ij->i", corr, corr), sqn + lam, sqn)

    def admit(self, col, chol):
        # the old coefficients move along −w = −(BᵀB + λI)⁻¹Bᵀd times the new one
        w = chol.solve(col.cross) if chol.size else None
        return chol.append(col.cross, col.sqn), w

    def add(self, p, col, w, step_t):
        p.ytd.append(col.ytd)
        p.coef = p.chol.solve(p.ytd_rows())
        p.accept(w, p.coef[-1])


class SquaredPrefit(SquaredBackfit):
    """``prefit``: scores use the residual norm of each candidate off the basis span."""

    want_cross = True

    def score(self, corr, sqn, cross, chol, lam):
        num = np.einsum("ij,ij->i", corr, corr)
        denom = chol.pivot_residual_norms(cross.T, sqn + lam) if chol.size else sqn + lam
        return _ratio(num, denom, sqn)


class SquaredRefit(SquaredBasic):
    """``refit``: basic steps, and every so often (``refit_every``) a least-squares refit of all
    coefficients from one Gram pass (``BᵀWB``, ``BᵀWY``) solved on the driver — the large-N
    middle ground between basic pursuit (no columns needed, frozen coefficients) and
    backfitting (``Bw`` and ``Bᵀd`` every atom). No Cholesky factor is kept, so no exact prefix
    models (``expansion_at``); the intercept stays the (weighted) target mean."""

    def __init__(self, refit_every):
        self.refit_every = refit_every
        self.last_refit = 0  # basis size at the last refit
        self.n_refits = 0

    def add(self, p, col, w, step_t):
        n = len(p.atoms)
        if not refit_due(self.refit_every, step_t, n, self.last_refit):
            return super().add(p, col, w, step_t)
        p.accept_only()  # the Gram pass accepts the pending column first
        self._refit(p)

    def _refit(self, p):
        tot = GramStats.combine(p.send(kmp_gram))
        G, BY = tot.gram, tot.bty
        p.coef = _ridge_solve(G, BY, p.lam)
        p.resync()
        self.last_refit, self.n_refits = len(p.atoms), self.n_refits + 1

    def finish(self, p):
        """The final refit (unless the last iteration was one); True: the coefficients changed
        since the last scoring pass (a refit at the last iteration too), so a last pass records them."""
        if not p.atoms:
            return False
        if self.last_refit == len(p.atoms):
            return True
        if p._accept:  # a column still waiting for the next pass joins in this one
            p.accept_only()
        self._refit(p)
        return True


def _ridge_solve(G, BY, lam):
    """``(G + λI)⁻¹ BY`` by Cholesky; a minimum-norm least-squares solve when ``G + λI`` is not
    numerically positive definite (duplicate atoms with no ridge)."""
    A = G + lam * np.eye(len(G))
    try:
        return cho_solve(cho_factor(A, lower=True, check_finite=False), BY, check_finite=False)
    except LinAlgError:
        return lstsq(A, BY, cond=1e-12, check_finite=False)[0]


class LossDriven:
    """Other losses: gradient steps in function space (``basic``) plus Newton refits (``backfit``)."""

    want_cross = False
    intercept_column = False
    needs_commit = True  # the line search starts from the column's loss statistics

    def __init__(self, fit_mode, refit_every, line_search_steps, final_refit_steps):
        self.fit_mode, self.refit_every = fit_mode, refit_every
        self.line_search_steps, self.final_refit_steps = line_search_steps, final_refit_steps
        self.uses_chol = fit_mode == "backfit"  # only to refuse dependent columns
        self.last_refit = 0  # basis size at the last Newton refit

    def score(self, corr, sqn, cross, chol, lam):
        return _ratio(np.einsum("ij,ij->i", corr, corr), sqn + (lam if self.uses_chol else 0.0), sqn)

    def admit(self, col, chol):
        if chol is None:
            return col.sqn > 0, None
        return chol.append(col.cross, col.sqn), None

    def add(self, p, col, w, step_t):
        stats0 = LineStats(col.loss[0], col.grad[0], col.hess[0])
        step = line_search(p.send, stats0, col.sqn, self.line_search_steps)
        n = len(p.atoms)
        if self.fit_mode == "backfit" and refit_due(self.refit_every, step_t, n, self.last_refit):
            self.last_refit = n
            p.accept_only()  # the refit's first pass accepts the pending column (coefficient 0)
            p.coef = newton_refit(p.send, np.vstack([p.coef, step[None, :]]), p.lam, p.bias_pos, 1)
            p.resync()
        else:
            p.coef = np.vstack([p.coef, step[None, :]])
            p.accept(None, step)

    def finish(self, p):
        """The converged refit at the end (``backfit``); True when coefficients changed."""
        if self.fit_mode != "backfit" or not p.atoms:
            return False
        p.coef = newton_refit(p.send, p.coef, p.lam, p.bias_pos, self.final_refit_steps)
        p.resync()
        return True


def make_strategy(config):
    """The strategy of a :class:`~kmp_dask.greedy._kmp_config.PursuitConfig`'s fit mode and loss."""
    if config.loss is not None:
        return LossDriven(config.fit_mode, config.refit_every, config.line_search_steps, config.final_refit_steps)
    if config.fit_mode == "refit":
        return SquaredRefit(config.refit_every)
    return {"basic": SquaredBasic, "basic_reselect": SquaredBasicReselect, "backfit": SquaredBackfit,
            "prefit": SquaredPrefit}[config.fit_mode]()
