"""Several atoms per pass (``atoms_per_pass = k > 1``; squared-loss ``backfit`` only).

One batch of the pursuit (:func:`block_step`, the second kind of step of the one loop
:meth:`~kmp_dask.greedy._kmp.Pursuit.run` runs) is two passes over the data instead of 2k:

1. the scoring pass (as with one atom: ``⟨d,R⟩²/(‖d‖²+λ)`` for the k·s random candidates, or for
   every row with ``candidates="all"``), which also applies the previous batch's columns and
   recomputes the residual ``R = Y − Bα`` in full;
2. the block pass (:func:`~kmp_dask.blockops.kmp_block_stats`) for the c = ``KEEP_FACTOR``·k best
   candidates by that score: their Gram ``DᵀD`` (c, c), ``DᵀB`` (c, n), ``DᵀY`` (c, m).

The driver then admits up to k atoms *one at a time*, exactly as sequential backfitting
pursuit restricted to those c candidates: with the coefficients ``α`` of the current basis,
each remaining candidate's correlation with the exact residual is ``dᵀY − dᵀB α`` (its
products with atoms admitted in this batch come from the c × c Gram), its score
``(dᵀR)²/(‖d‖²+λ)``; the best joins through the Cholesky append (``[dᵀB, dᵀD_admitted]``,
``‖d‖²``) and ``α`` is re-solved — no data pass. The next scoring pass pends and accepts the
admitted columns (in order) and recomputes the residual from ``α``.

Stop rules act at the same points as with one atom, and also inside a batch: ``n_basis``, and
``tol`` on the exact training residual ``‖Y − Bα‖²`` (computed from the factor). Validation
scores (early stopping) are measured once per batch, so early stopping cuts back to a basis
size at a batch boundary. History: one record per atom; ``n_candidates`` of the 2nd, … atom of a
batch counts the kept candidates still eligible, and ``residual_norm`` is the exact algebraic
one except for the batch's last atom, which the next pass measures (as with one atom).

A batch that ``n_basis`` cut while candidates were left stays with the pursuit
(``_open_batch``): a fit continued to a larger cap by the extend hook
(:class:`~kmp_dask.greedy._kmp.PursuitExtension`, ``KMPClassifierCV``'s doubled cap) first admits
the rest of it, as a fit run to that cap from the start does, before its next scoring pass.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..blockops import BlockQuery, BlockStats, kmp_block_stats
from ..exceptions import PrematureStopWarning, user_stacklevel
from ._loop import Iteration
from ._result import StopReason

__all__ = ["KEEP_FACTOR", "admit_block", "block_step", "open_batch"]

KEEP_FACTOR = 2
"""Candidates kept per batch: ``KEEP_FACTOR · k`` best by the scoring pass's score."""

_DEPENDENT = ("kernel matching pursuit: the column of candidate row {idx} is numerically dependent on the "
              "current basis (duplicate or near-duplicate rows); it is skipped.")


def open_batch(p) -> None:
    """Before the first step: a batch its cap cut, continued to a larger cap (an extension)."""
    batch, p._open_batch = getattr(p, "_open_batch", None), None
    if batch is not None and p._t < p.n_basis:
        p._t = _admit(p, batch, p._t)


def block_step(p, rng):
    """The second kind of step of :class:`~kmp_dask.greedy._kmp.Pursuit` (the same loop,
    :func:`~kmp_dask.greedy._loop.run_loop`): one batch of up to ``p.atoms_per_pass`` atoms in two
    passes; its :class:`~kmp_dask.greedy._loop.Iteration` spans iterations ``t`` to ``t_end − 1``
    (a checkpoint is saved when the batch crossed a multiple of ``every``), or why the loop stops."""
    t, cands = p._t, p._cands
    if t >= p.n_basis:
        return StopReason.N_BASIS
    t0 = time.perf_counter()
    res, idx_next, p._score, stop = p.scoring_pass(cands, rng)
    if stop is not None:
        return stop
    t_end = admit_block(p, p._score, cands, t)
    if t_end == t:
        return StopReason.LINEAR_DEPENDENCE
    if idx_next is not None:
        p._cands = p._candidates(res, idx_next)
    p.recorder.history[-1]["seconds"] = time.perf_counter() - t0
    p._t = t_end
    return Iteration(None, t_end - 1, first=t, last=t_end == p.n_basis, cands=p._cands)


def keep(score, k):
    """Positions of the ``KEEP_FACTOR · k`` best finite scores, best first (stable: ties by position)."""
    order = np.argsort(-score, kind="stable")[: KEEP_FACTOR * k]
    return order[np.isfinite(score[order])]


def admit_block(p, score, cands, t):
    """Admit up to ``p.atoms_per_pass`` atoms from the kept candidates (one block pass); the
    iteration count after the last one admitted (``t`` when none could join)."""
    kept = keep(score, p.atoms_per_pass)
    atoms = [cands.atom(int(j)) for j in kept]
    st = BlockStats.combine(p.send(kmp_block_stats, BlockQuery(tuple(atoms))))
    batch = {"atoms": atoms, "kept": kept, "gram": st.gram, "cross": st.cross, "ytd": st.ytd, "t0": t,
             "yy": float(np.add.reduce([s["y_sqsum"] for s in p._y]).sum()), "score": score,
             "alive": np.ones(len(kept), dtype=bool), "chosen": []}
    return _admit(p, batch, t)


def _admit(p, b, t):
    """Admit atoms of the batch ``b`` (plain arrays and lists: it is pickled with the pursuit) from
    iteration ``t`` on. A batch that ``n_basis`` cut while it could go on is kept as
    ``p._open_batch``, so a pursuit continued to a larger cap admits the rest of it exactly as one
    run to that cap from the start (:class:`~kmp_dask.greedy._kmp.PursuitExtension`)."""
    atoms, alive, chosen, k = b["atoms"], b["alive"], b["chosen"], p.atoms_per_pass
    closed = False
    while t < min(p.n_basis, b["t0"] + k) and alive.any():
        r = b["ytd"] - _cross_now(b, chosen) @ p.coef  # dᵀ(Y − Bα) for every kept candidate (c, m)
        s = np.where(alive, np.einsum("ij,ij->i", r, r) / (np.diag(b["gram"]) + p.lam), -np.inf)
        if s.max() <= 1e-13 * max(p.rss0, 1e-300):
            closed = True
            break
        i = int(np.argmax(s))
        alive[i] = False
        if not p.chol.append(_cross_now(b, chosen)[i], float(b["gram"][i, i])):
            p.excluded.add(atoms[i].index)
            warnings.warn(_DEPENDENT.format(idx=atoms[i].index), PrematureStopWarning, stacklevel=user_stacklevel())
            continue
        chosen.append(i)
        p._append(atoms[i])
        p.ytd.append(b["ytd"][i])
        p.coef = p.chol.solve(p.ytd_rows())
        first = len(chosen) == 1  # the batch's first atom: the pass's scores; later ones: the kept candidates'
        p.recorder.new_iteration(t, atoms[i], b["score"] if first else s, int(b["kept"][i]) if first else i)
        p.recorder.history[-1]["residual_norm"] = float(np.sqrt(max(_rss(p, b["yy"]), 0.0)))
        t += 1
        if p.tol is not None and p.rss0 > 0 and np.sqrt(max(_rss(p, b["yy"]), 0.0) / p.rss0) <= p.tol:
            closed = True
            break
    p._open_batch = b if not closed and t < b["t0"] + k and alive.any() else None
    if chosen:
        p._batch = [atoms[i] for i in chosen]
        p.resync()
    return t


def _cross_now(b, chosen):
    """Every kept candidate's products with the current basis: ``[DᵀB, DᵀD_chosen]`` (c, n + len(chosen))."""
    return np.hstack([b["cross"], b["gram"][:, chosen]]) if chosen else b["cross"]


def _rss(p, yy):
    """``‖Y − Bα‖²`` (summed over outputs) from ``YᵀY``, ``BᵀY`` and the factor ``BᵀB + λI = LLᵀ``."""
    a, L = p.coef, p.chol.L
    La = L.T @ a
    return yy - 2.0 * float(np.einsum("ij,ij->", a, p.ytd_rows())) + float(np.einsum("ij,ij->", La, La)) \
        - p.lam * float(np.einsum("ij,ij->", a, a))
