"""The chunking method as Weston & Bakır §3.6 describe it (``chunking="cyclic"``).

The expansion ``w = Σ_i α_i φ(x_i)`` is cut into pieces ``A_1 … A_n`` of consecutive terms
(``w = Σ_j w_j``). The compressed model keeps, per piece, some of its own points with new
coefficients, ``ŵ = Σ_j ŵ_j``. Piece by piece, *with the other pieces fixed*, piece j's part is
re-chosen to approximate the full ``w``: its target is ``t_j = w − Σ_{i≠j} ŵ_i`` and a
backfitted hyperplane pursuit over the piece's own points (``dense_hyperplane_pursuit``, the same
selection as everywhere else) picks at most ``k_j`` of them. The cycle goes through the pieces
and starts again; after the first sweep a piece's new set is taken only when it lowers
``‖w − ŵ‖²``, and the sweeps stop when one lowers it by less than :data:`CYCLIC_TOL` (relative)
or after :data:`CYCLIC_SWEEPS`.

Start (``start=``): ``"zero"`` (default) — ``ŵ = 0``, so the first sweep is a forward pass in
which each piece explains what the earlier ones left of ``w`` (the paper's remark that basic
hyperplane pursuit is this method with pieces of one term starts there too); ``"model"`` —
``ŵ_j = w_j`` (the pieces not yet visited keep their coefficients α). Measured
(``benchmarks/reduced_chunking.py``), ``"model"`` needs many more sweeps and ends worse: a piece
compressed early leaves its loss to the pieces after it, which have only their budget to absorb it.

Budgets: the paper gives no rule for how many vectors each piece keeps; here the ``keep``
vectors are shared out in proportion to the pieces' sizes (largest remainders), so the first
sweep ends at ``keep`` vectors and every later sweep keeps each piece's count.

What is tracked: the residual ``r(x) = (w − ŵ)(x)`` at every one of the expansion's points
(N × m; ``w`` itself there for ``start="zero"``, 0 for ``"model"``), and ``E = ‖w − ŵ‖²`` per
output.
For piece j with current points ``c`` and coefficients ``β``: ``t_j(z) = r(z) + Σ_c β k(c, z)``
on the piece's points, ``‖t_j‖² = E + 2 βᵀ t_j(c) − βᵀ K_cc β``; the pursuit's RKHS error is the
new ``E``, and ``r`` moves by ``K(X, c) β − K(X, c') β'`` (row blocks). Cost: ``w`` at its own
points (``start="zero"``) or the first sweep (``"model"``: every piece's old terms at every point)
evaluates O(N²) kernel values — as much as one pursuit of the whole pool against the full ``w`` —
and each sweep O(N · keep); memory O(N · m) plus a
row block. Everything runs in this process (numpy only); the tree (``chunking="tree"``,
``greedy._hmp_setup.chunked_compression``) is the variant that runs on the workers and never
evaluates the full ``w``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..greedy._hmp import dense_hyperplane_pursuit

__all__ = ["CYCLIC_SWEEPS", "CYCLIC_TOL", "CyclicResult", "cyclic_chunking", "piece_budgets"]

#: at most this many sweeps through the pieces
CYCLIC_SWEEPS = 10
#: stop when a sweep lowers ‖w − ŵ‖² by less than this fraction of its value before the sweep
CYCLIC_TOL = 1e-3
_BLOCK = 4096  # rows of the residual moved at once (a block × piece-size kernel matrix)


@dataclass
class CyclicResult:
    """``vectors`` (k, d) and ``coef`` (k, m) of the compressed model; ``rkhs_error`` (m,) the
    tracked ``‖w − ŵ‖²``; ``history`` its sum after each sweep (the first entry: after sweep 1)."""

    vectors: np.ndarray
    coef: np.ndarray
    rkhs_error: np.ndarray
    history: list = field(default_factory=list)


def piece_budgets(sizes, keep: int) -> np.ndarray:
    """``keep`` vectors shared out in proportion to ``sizes`` (largest remainders; ties to the
    earlier piece), never more than a piece's size."""
    sizes = np.asarray(sizes, dtype=np.int64)
    share = keep * sizes / sizes.sum()
    out = np.minimum(np.floor(share).astype(np.int64), sizes)
    for j in np.lexsort((np.arange(len(sizes)), -(share - out))):
        if out.sum() >= keep:
            break
        if out[j] < sizes[j]:
            out[j] += 1
    return out


class _Pieces:
    """The pieces' current points (indices into the expansion) and coefficients, the residual
    at every expansion point and ``E``."""

    def __init__(self, expansion, sv, alpha, piece_vectors, start):
        self.sv, self.kernel = sv, expansion.kernels[0]
        bounds = list(range(0, len(sv), int(piece_vectors))) + [len(sv)]
        self.ranges = [np.arange(a, b) for a, b in itertools.pairwise(bounds)]
        if start == "model":  # ŵ_j = w_j: r = w − ŵ = 0, E = 0
            self.index = [r.copy() for r in self.ranges]
            self.coef = [alpha[r].copy() for r in self.ranges]
            self.resid, self.err = np.zeros_like(alpha), np.zeros(alpha.shape[1])
        else:  # ŵ = 0: r = w at the expansion's points, E = ‖w‖² = Σ α f
            self.index = [r[:0] for r in self.ranges]
            self.coef = [np.zeros((0, alpha.shape[1])) for _ in self.ranges]
            f = expansion.with_coef(expansion.coef, 0.0).decision_function(sv)
            self.resid = np.asarray(f, dtype=np.float64).reshape(alpha.shape).copy()
            self.err = np.einsum("ij,ij->j", alpha, self.resid)

    def target(self, j):
        """``t_j`` at the piece's points and ``‖t_j‖²`` (the full w minus the other pieces)."""
        rows, cur, beta = self.ranges[j], self.index[j], self.coef[j]
        t = self.resid[rows] + self.kernel(self.sv[rows], self.sv[cur]) @ beta
        pos = np.searchsorted(rows, cur)
        Kcc = self.kernel(self.sv[cur], self.sv[cur])
        tsq = self.err + 2 * np.einsum("ij,ij->j", beta, t[pos]) - np.einsum("ij,ik,kj->j", beta, Kcc, beta)
        return t, np.maximum(tsq, 0.0)

    def replace(self, j, index, coef, err):
        """Piece j's new points and coefficients; the residual moves by ``ŵ_j,old − ŵ_j,new``."""
        vecs = self.sv[np.concatenate([self.index[j], index])]
        move = np.concatenate([self.coef[j], -coef])
        for a in range(0, len(self.sv), _BLOCK):
            self.resid[a:a + _BLOCK] += self.kernel(self.sv[a:a + _BLOCK], vecs) @ move
        self.index[j], self.coef[j], self.err = index, coef, np.asarray(err, dtype=np.float64)

    def result(self, history):
        index = np.concatenate(self.index)
        coef = np.concatenate(self.coef) if self.coef else np.zeros((0, self.resid.shape[1]))
        return CyclicResult(self.sv[index], coef, self.err.copy(), history)


def _compress_piece(pieces, j, budget, criterion):
    """Piece j compressed to ``budget`` of its points against its target: (index, coef, error)."""
    rows = pieces.ranges[j]
    t, tsq = pieces.target(j)
    if budget == 0:  # the piece keeps nothing: its whole target is left over
        return rows[:0], np.zeros((0, t.shape[1])), tsq
    res = dense_hyperplane_pursuit(pieces.sv[rows], kernel=pieces.kernel, F=t, wsq=tsq, n_vectors=int(budget),
                                   criterion=criterion)
    level = res.n_levels - 1
    index, coef = res.prefix_coef(level)
    return rows[index], coef, res.rkhs_error[level]


def cyclic_chunking(expansion, *, piece_vectors: int, keep: int, criterion: str = "eq13",
                    max_sweeps: int = CYCLIC_SWEEPS, tol: float = CYCLIC_TOL, start: str = "zero") -> CyclicResult:
    """The paper's chunking (module docstring): ``keep`` of the expansion's own vectors and their
    coefficients, pieces of ``piece_vectors`` consecutive terms compressed in turn against the
    full ``w`` with the others fixed, for up to ``max_sweeps`` sweeps from ``start``."""
    if start not in ("zero", "model"):
        raise ValueError(f"start must be 'zero' or 'model'; got {start!r}")
    sv = np.ascontiguousarray(expansion.support_vectors, dtype=np.float64)
    alpha = np.asarray(expansion.coef, dtype=np.float64).reshape(len(sv), -1)
    pieces = _Pieces(expansion, sv, alpha, piece_vectors, start)
    budgets = piece_budgets([len(r) for r in pieces.ranges], int(keep))
    history = []
    for sweep in range(int(max_sweeps)):
        before = float(pieces.err.sum())
        for j in range(len(pieces.ranges)):
            index, coef, err = _compress_piece(pieces, j, budgets[j], criterion)
            if sweep == 0 or float(np.sum(err)) < float(pieces.err.sum()) * (1 - 1e-12):
                pieces.replace(j, index, coef, err)
        history.append(float(pieces.err.sum()))
        if sweep > 0 and before - history[-1] <= tol * before:
            break
    return pieces.result(history)
