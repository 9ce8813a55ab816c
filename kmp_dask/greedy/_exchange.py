"""Single-vector exchanges: improve a chosen set of reduced-set vectors at a fixed size.

A greedy path is not the best set of k vectors: on hard expansions (Weston & Bakır's "image")
the pursuit's early choices, good when they were made, stop being useful once later vectors
cover their directions. :func:`exchange_vectors` takes a set S of pool rows and, position by
position, swaps a vector for the pool row that lowers ``‖w − ŵ‖²`` most with all coefficients
re-optimised (``β = K_SS⁻¹ f(S)``, the paper's objective), as long as that strictly lowers it;
it sweeps over the positions until a sweep makes no swap or ``max_sweeps`` is reached. This is
the "single best replacement" / forward-backward exchange of subset selection (Soussen et al.,
IEEE TSP 2011; Zhang, IEEE TIT 2011), here in the RKHS of the kernel.

Algebra (``G = K_SS``, ``A = G⁻¹``, ``B = k(Z, S)`` the pool's kernel columns, ``M = B A``,
``β = A f(S)``, ``r = F − B β`` the residual hyperplane's values on the pool, ``d(z) = k(z, z) −
M[z]·B[z]`` the part of ``φ(z)`` orthogonal to span S). Removing position i from S changes them
exactly by (``a = M[:, i]``): ``r ← r + a β_iᵀ / A_ii``, ``d ← d + a² / A_ii``, ``‖w − ŵ‖² ←
‖w − ŵ‖² + ‖β_i‖² / A_ii`` — O(P · m) for all pool rows at once, so scoring every replacement
of position i costs one pass over the pool, no solves. The best replacement z lowers the error
by ``Σ_j r_j(z)² / d(z)`` (the exact greedy step), and a swap is accepted when that beats
putting the removed vector back. A sweep first screens every position at once (the same scores
in blocks of positions: array work, not a Python loop per position) and then tries, best first,
only those that can gain in the sweep's starting state, each re-scored exactly in the current
state before it is swapped; a sweep that finds no promising position ends the run (no single
swap lowers the error: a local optimum). An accepted swap updates ``A``, ``M``, ``β``, ``r`` and ``d``
by the same rank-one formulas (one new kernel column, O(P · k)); every sweep starts from a
fresh Cholesky solve (no drift). Each accepted swap lowers the error strictly, so no set is
visited twice and the loop ends.

Pool rows, values and kernel as in :func:`~kmp_dask.greedy.dense_hyperplane_pursuit` (a pool in
this process); the dependence test is the pursuit's ``MIN_PIVOT``.

On the engine (:func:`engine_exchange`: store pools, clusters). The same algorithm with the
P-sized arrays split by rows: the driver keeps ``A``, ``β``, the set S, its k rows and the error
(the same driver-side arithmetic as ``_Exchange``); each partition keeps, for its rows, ``B``
(its own copy of the level's k kernel columns, taken from the pursuit's cache — the cache itself
is not touched, so several levels can be exchanged in turn on one engine), ``M = B A``, ``r`` and
``d`` (:class:`~kmp_dask.blockops._reduced.XState`). ``M`` is held rather than recomputed per
query from ``B`` and ``A`` (O(rows · k²) a query): the rank-one updates keep it at O(rows · k) a
swap, as in process. Passes: the start reads ``B[S]`` and ``F[S]`` (the driver's ``K_SS`` and
``f(S)``: the same numbers the partitions hold); a sweep's screening pass returns, per position,
each partition's best replacement score and the own score (merged: max; the own score from the
partition holding S[i]); each promising position is one pass that first applies the previous
accepted swap (effects: the new column ``k(rows, z)`` and the rank-one moves, whose numbers the
driver computed — ``A[i]/A_ii``, ``u``, ``k(S, z)``, ``d(z)``, ``r(z)`` — so every partition uses
the same ones) and then scores the position in the current state (the partitions' best rows
merged: highest score, the lowest pool row among equal ones, as ``np.argmax``); a resync is one
pass reading ``B[S]``, ``F[S]`` again (after ≤ ``RESYNC_SWAPS`` swaps, at a sweep's end, as in
process) whose new ``A``, ``β`` ride on the next pass. Journal slots (see
:mod:`~kmp_dask.blockops._reduced`) let a rebuilt partition replay the exchange exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..blockops._engine import Engine
from ..blockops._reduced import removal_scores, xch_row_scores, xch_rows_removed, xch_rows_swap, xch_rows_sync
from ..linalg import rank_one_update
from ._hmp import MIN_PIVOT

__all__ = ["ExchangeResult", "exchange_vectors", "engine_exchange"]

BLOCK_VALUES = 2**22
"""Scores held at once when all positions are screened (32 MiB of float64)."""

RESYNC_SWAPS = 32
"""Rank-one swaps between two exact recomputations (drift bound; also at the end)."""

GAIN_RTOL = 1e-9
"""A swap is accepted when it lowers ``‖w − ŵ‖²`` by more than this fraction of ``‖w‖²``
(rounding-level gains would only shuffle equivalent vectors)."""


@dataclass
class ExchangeResult:
    """``index`` (k,) pool rows (the input's order, swapped positions replaced); ``coef`` (k, m)
    ``K_SS⁻¹ f(S)``; ``rkhs_error`` (m,) ``‖w_j − ŵ_j‖²``; ``n_sweeps``; ``n_swaps``; ``vectors``
    (k, d) the chosen pool rows and ``n_passes`` (:func:`engine_exchange` only: rows as the
    partitions hold them, engine passes made)."""

    index: np.ndarray
    coef: np.ndarray
    rkhs_error: np.ndarray
    n_sweeps: int
    n_swaps: int
    vectors: np.ndarray | None = None
    n_passes: int = 0


class _Driver:
    """The driver's state of an exchange run, the same in process and on the engine: the set
    ``S`` (pool rows by position), ``A = K_SS⁻¹`` (Fortran-ordered, updated in place), ``β = A f(S)``
    and the error per output. Subclasses hold the rows' state (``M``, ``r``, ``d``) or ask the
    partitions for it."""

    def _solve(self, G, FS):
        """``A``, ``β`` and the error from ``K_SS`` and ``f(S)`` by Cholesky (no drift)."""
        c = cho_factor(0.5 * (G + G.T), lower=True)
        self.A = np.asfortranarray(cho_solve(c, np.eye(len(self.S))))
        self.beta = self.A @ FS
        self.err = np.maximum(self.wsq - np.einsum("ij,ij->j", FS, self.beta), 0.0)
        self.since_resync = 0

    def _swap(self, i, z, Mz, delta, rz):
        """Position ``i`` leaves and row ``z`` joins there (``Mz = M[z]``, ``delta = d_{−i}(z)``,
        ``rz = r_{−i}(z)``): ``A`` by the Schur downdate and the bordered inverse, ``β``, the error.
        Returns the numbers the rows' half needs: ``A_ii``, ``A[i]/A_ii``, ``β_i``, ``u = A' k(S', z)``."""
        Aii = float(self.A[i, i])
        Ai = self.A[i] / Aii                                   # Ai[i] = 1
        beta_i = self.beta[i].copy()
        u = Mz - Mz[i] * Ai                                    # M[z] without position i; u[i] = 0
        self.err = self.err + beta_i ** 2 / Aii
        self.beta -= np.outer(Ai, beta_i)
        rank_one_update(-1.0, self.A[:, i].copy(), Ai, self.A)  # row and column i → 0
        c = rz / delta                                         # the new coefficient(s)
        self.err = np.maximum(self.err - rz ** 2 / delta, 0.0)
        rank_one_update(1.0 / delta, u, u, self.A)
        self.A[:, i] = self.A[i, :] = -u / delta
        self.A[i, i] = 1.0 / delta
        self.beta -= np.outer(u, c)
        self.beta[i] = c
        self.S[i] = int(z)
        self.since_resync += 1
        return Aii, Ai, beta_i, u

    def snapshot(self) -> dict:
        return {"S": list(self.S), "beta": self.beta.copy(), "err": self.err.copy()}


def _promising_order(best, own, min_gain):
    """Positions whose best replacement beats keeping them by more than ``min_gain`` (an own score
    of −inf — the vector itself no longer independent — always gains), best first."""
    with np.errstate(invalid="ignore"):
        gains = np.where(np.isfinite(own), best - own, np.where(np.isfinite(best), np.inf, -np.inf))
    pos = np.flatnonzero(gains > min_gain)
    return pos[np.argsort(-gains[pos], kind="stable")]


class _Exchange(_Driver):
    """An exchange run in this process: the driver's state plus the rows' ``B``, ``M`` (P × k,
    Fortran-ordered, updated in place), ``r``, ``d`` over the whole pool — the partitions' row
    functions (:func:`~kmp_dask.blockops._reduced.xch_rows_sync` …) on one block of P rows."""

    def __init__(self, rows, kernel, F, wsq, index):
        self.Z = np.ascontiguousarray(rows, dtype=np.float64)
        P = len(self.Z)
        self.kernel = kernel
        self.F = np.asarray(F, dtype=np.float64).reshape(P, -1)
        self.wsq = np.asarray(wsq, dtype=np.float64).reshape(-1)
        self.kdiag = np.asarray(kernel.diag(self.Z), dtype=np.float64)
        self.S = [int(i) for i in np.asarray(index).reshape(-1)]
        B = np.asarray(kernel(self.Z, self.Z[self.S]), dtype=np.float64).reshape(P, len(self.S))
        self.B = np.asfortranarray(B)
        self.resync()

    def resync(self):
        """``A``, ``β``, the error, ``M``, ``r``, ``d`` from the current set, by Cholesky."""
        self._solve(self.B[self.S], self.F[self.S])
        self.M, self.r, self.d = xch_rows_sync(self.B, self.F, self.kdiag, self.A, self.beta)

    def promising(self, min_gain: float) -> np.ndarray:
        """Positions that can gain in the current state, best first — the same scores as
        :meth:`try_position`, for all positions at once (blocks of P × block × m values)."""
        P, k, m = len(self.Z), len(self.S), self.F.shape[1]
        S = np.asarray(self.S)
        best, own = np.empty(k), np.empty(k)
        step = max(1, int(BLOCK_VALUES // max(P * m, 1)))
        ok_base = MIN_PIVOT * self.kdiag[:, None]
        for lo in range(0, k, step):
            idx = np.arange(lo, min(k, lo + step))
            score = removal_scores(self.M[:, idx], self.r, self.d, self.beta[idx], np.diag(self.A)[idx], ok_base)
            own[idx] = score[S[idx], np.arange(len(idx))]
            score[S] = -np.inf
            best[idx] = score.max(axis=0)
        return _promising_order(best, own, min_gain)

    def try_position(self, i: int, min_gain: float) -> bool:
        """Swap position ``i`` for the pool row that lowers the error most, if it beats keeping
        it by more than ``min_gain``; True when swapped."""
        r, d = xch_rows_removed(self.M, self.r, self.d, i, self.beta[i], self.A[i, i])
        score = xch_row_scores(r, d, self.kdiag, MIN_PIVOT)
        own = score[self.S[i]]
        score[self.S] = -np.inf
        z = int(np.argmax(score))
        if not score[z] > own + min_gain:
            return False
        b = np.asarray(self.kernel(self.Z, self.Z[z][None, :]), dtype=np.float64)[:, 0]
        bS, delta, rz = b[self.S], float(d[z]), r[z].copy()
        _, Ai, _, u = self._swap(i, z, self.M[z].copy(), delta, rz)
        self.B[:, i] = b
        self.r, self.d = xch_rows_swap(self.B, self.M, r, d, i, Ai, u, bS, delta, rz)
        return True


def _check_args(index, max_sweeps):
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    if max_sweeps < 0:
        raise ValueError(f"max_sweeps must be >= 0; got {max_sweeps!r}")
    if len(np.unique(index)) != len(index):
        raise ValueError("index must hold distinct pool rows")
    return index


def _sweeps(run, max_sweeps: int, full: bool):
    """The sweep loop, in process and on the engine: screen, try the promising positions best
    first, resync after ``RESYNC_SWAPS`` swaps or at a sweep's end; the last exact state whose error
    did not rise is the result. Returns (that state's snapshot, sweeps, swaps)."""
    min_gain = GAIN_RTOL * max(float(run.wsq.sum()), 1e-300)
    sweeps = swaps = pending = 0
    good = run.snapshot()
    while sweeps < max_sweeps and not full:
        sweeps += 1
        moved = sum(run.try_position(int(i), min_gain) for i in run.promising(min_gain))
        pending += moved
        if moved and run.since_resync < RESYNC_SWAPS and sweeps < max_sweeps:
            continue                                           # rank-one state still exact enough
        try:
            run.resync()
        except np.linalg.LinAlgError:  # a swap drifted into dependence: keep the last exact set
            break
        if run.err.sum() > good["err"].sum():  # rounding made the swaps worse after all
            break
        good, swaps, pending = run.snapshot(), swaps + pending, 0
        if not moved:
            break
    return good, sweeps, swaps


def exchange_vectors(rows, *, kernel, F, wsq, index, max_sweeps: int = 10) -> ExchangeResult:
    """Improve the pool rows ``index`` by single-vector exchanges (module docstring).

    ``rows`` (P, d) the pool, ``F`` (P, m) the expansion's values there (without intercept; m > 1
    exchanges for all outputs at once, as the coupled pursuit), ``wsq`` (m,) ``‖w_j‖²``,
    ``index`` the starting set (distinct, linearly independent pool rows), ``max_sweeps`` the
    most passes over the positions. The result's error never exceeds the starting set's. None
    when ``K_SS`` of the starting set is not numerically positive definite (no exchange then)."""
    index = _check_args(index, max_sweeps)
    if len(index) == 0:
        m = np.asarray(F).reshape(len(rows), -1).shape[1]
        return ExchangeResult(index, np.zeros((0, m)), np.asarray(wsq, dtype=np.float64).reshape(-1), 0, 0)
    try:
        run = _Exchange(rows, kernel, F, wsq, index)
    except np.linalg.LinAlgError:
        # K_SS not numerically positive definite (a long path's last vectors sit at the
        # dependence threshold): nothing to exchange against reliably
        return None
    good, sweeps, swaps = _sweeps(run, max_sweeps, len(index) >= len(run.Z))
    return ExchangeResult(np.asarray(good["S"], dtype=np.int64), good["beta"], good["err"], sweeps, swaps)


# -- the same exchanges over a pool held by an engine --------------------------------------------
class _EngineExchange(_Driver):
    """The driver's side of :func:`engine_exchange` (:class:`_Driver` plus the set's rows); the
    partitions hold ``B``, ``M``, ``r``, ``d`` for their rows
    (:class:`~kmp_dask.blockops._reduced.XState`). Effects not yet sent ride on the next pass."""

    def __init__(self, engine: Engine, kernel, wsq, index, vectors):
        from ..blockops._state import sqnorm

        self.engine, self.kernel = engine, kernel
        self.wsq = np.asarray(wsq, dtype=np.float64).reshape(-1)
        self.S = [int(i) for i in index]
        self.V = np.array(vectors)
        self.Vsq = sqnorm(self.V)
        self.pending: list = []
        self.n_passes = 0

    def run(self, op, q):
        out = self.engine.run(op, q, self.pending)
        self.pending = []
        self.n_passes += 1
        return out

    def _rows(self, cache):
        """``B[S]`` (k × k) and ``F[S]`` (k × m) from the partitions holding the rows of S."""
        from ..blockops._reduced import RSXRowsQuery, rs_xrows

        k = len(self.S)
        G = np.full((k, k), np.nan)
        FS = np.full((k, len(self.wsq)), np.nan)
        for p in self.run(rs_xrows, RSXRowsQuery(np.asarray(self.S, dtype=np.int64), cache)):
            G[p["pos"]] = p["B"]
            FS[p["pos"]] = p["F"]
        if np.isnan(G).any():
            raise RuntimeError("engine_exchange: some selected rows were not returned by any partition")
        return G, FS

    def resync(self, start=False):
        """``A``, ``β`` and the error by Cholesky of ``K_SS`` (as ``_Exchange.resync``); the
        partitions recompute ``M``, ``r``, ``d`` with the next pass."""
        from ..blockops._reduced import xch_effects

        self._solve(*self._rows(len(self.S) if start else None))
        self.pending.append(xch_effects.start(len(self.S), self.A, self.beta) if start
                            else xch_effects.sync(self.A, self.beta))

    def promising(self, min_gain: float) -> np.ndarray:
        from ..blockops._reduced import RSXScreenQuery, rs_xscreen

        k = len(self.S)
        parts = self.run(rs_xscreen, RSXScreenQuery(np.asarray(self.S, dtype=np.int64), np.diag(self.A).copy(),
                                                    self.beta.copy(), MIN_PIVOT, BLOCK_VALUES))
        best = np.max([p["best"] for p in parts], axis=0) if parts else np.full(k, -np.inf)
        own = np.full(k, -np.inf)
        for p in parts:
            held = ~np.isnan(p["own"])
            own[held] = p["own"][held]
        return _promising_order(best, own, min_gain)

    def try_position(self, i: int, min_gain: float) -> bool:
        from ..blockops._reduced import RSXTryQuery, rs_xtry

        Aii = float(self.A[i, i])
        parts = self.run(rs_xtry, RSXTryQuery(i, np.asarray(self.S, dtype=np.int64), Aii, self.beta[i].copy(),
                                              MIN_PIVOT))
        own, win = -np.inf, None
        for p in parts:  # partitions in row order: the first maximum is the lowest row (np.argmax)
            if not np.isnan(p["own"]):
                own = p["own"]
            if p["index"] >= 0 and (win is None or p["score"] > win["score"]):
                win = p
        if win is None or not win["score"] > own + min_gain:
            return False
        self._replace(i, win)
        return True

    def _replace(self, i, win):
        """The driver's half of the swap (:meth:`_Driver._swap`); the partitions' half is the swap
        effect (:func:`~kmp_dask.blockops._reduced.xch_rows_swap` on their rows)."""
        from ..blockops._reduced import RSXSwap, xch_effects
        from ..blockops._state import kernel_block, sqnorm

        row = np.asarray(win["row"]).reshape(1, -1).astype(self.V.dtype, copy=False)
        bS = np.asarray(kernel_block(self.kernel, self.V, self.Vsq, row, sqnorm(row)), dtype=np.float64)[:, 0]
        delta, rz = float(win["dz"]), np.asarray(win["rz"], dtype=np.float64)
        Aii, Ai, beta_i, u = self._swap(i, win["index"], np.asarray(win["Mz"], dtype=np.float64), delta, rz)
        self.pending.extend(xch_effects.swap(i, row[0], RSXSwap(i, Aii, Ai, beta_i, u, bS, delta, rz)))
        self.V[i] = row[0]
        self.Vsq[i] = sqnorm(self.V[i : i + 1])[0]

    def snapshot(self) -> dict:
        return {**super().snapshot(), "V": self.V.copy()}


def engine_exchange(engine: Engine, *, kernel, wsq, index, vectors, n_rows: int,
                    max_sweeps: int = 10) -> ExchangeResult | None:
    """:func:`exchange_vectors` over a pool held by ``engine`` (module docstring, "On the engine").

    The partitions must hold a backfitted pursuit whose first ``len(index)`` cached columns are
    the kernel columns of ``index`` in that order (:func:`~kmp_dask.greedy.hyperplane_pursuit`'s
    path: ``index = result.index[:k]``, ``vectors = result.vectors[:k]``); the pursuit's cache is
    left as it is. ``wsq`` (m,) ``‖w_j‖²`` of the pursuit's outputs, ``n_rows`` the pool size.
    Same swaps, order, tie rule and stopping rules as :func:`exchange_vectors`; the result also
    carries the chosen rows (``vectors``, as the partitions hold them) and ``n_passes``. None when
    ``K_SS`` of the starting set is not numerically positive definite."""
    index = _check_args(index, max_sweeps)
    vectors = np.asarray(vectors)
    if len(vectors) != len(index):
        raise ValueError(f"vectors has {len(vectors)} rows for {len(index)} indices")
    if len(index) == 0:
        return ExchangeResult(index, np.zeros((0, len(np.asarray(wsq).reshape(-1)))),
                              np.asarray(wsq, dtype=np.float64).reshape(-1), 0, 0, vectors[:0])
    run = _EngineExchange(engine, kernel, wsq, index, vectors)
    try:
        run.resync(start=True)
    except np.linalg.LinAlgError:
        return None
    good, sweeps, swaps = _sweeps(run, max_sweeps, len(index) >= int(n_rows))
    return ExchangeResult(np.asarray(good["S"], dtype=np.int64), good["beta"], good["err"], sweeps, swaps,
                          good["V"], run.n_passes)
