"""Hyperplane matching pursuit: reduced-set selection by greedy pursuit of w (Weston & Bakır §3.1–3.2).

Given ``w = Σ_i α_i φ(x_i)`` (m outputs) and a pool of candidate vectors, each iteration picks
the pool point ``z`` maximising ``Σ_j r_j(z)² / k(z, z)`` where ``r_j(z) = ⟨w_j − ŵ_j, φ(z)⟩`` is
the residual hyperplane's value at ``z`` (eq. 13: with m > 1 the selection is *coupled*, one
vector shared by all outputs). Then, per :attr:`backfit`:

* ``backfit=True`` (the paper's experiments, the default): every coefficient is re-optimised,
  ``β = K_ss⁻¹ f(s)`` (eq. 7), through the incremental Cholesky factor ``K_ss = L Lᵀ`` (eq. 10):
  with ``v = L⁻¹ k_s(z)`` and ``δ = k(z,z) − ‖v‖²``, the new vector enters with ``c = r(z)/δ``,
  the old coefficients move by ``−K_ss⁻¹ k_s(z) · c``, and ``‖w − ŵ‖²`` falls by ``r(z)²/δ``;
* ``backfit=False`` (algorithm 3.2): ``a = r(z)/k(z,z)`` is added to ``z``'s coefficient (a
  vector may be picked again) and ``‖w − ŵ‖²`` falls by ``r(z)²/k(z,z)``.

Either way the RKHS error never increases along the path, and with backfitting the path's
level-k model is exactly ``K_ss⁻¹ f(s)`` on its first k vectors (:meth:`HMPResult.prefix_coef`),
so one greedy run gives every compression level.

The driver holds the selected vectors, the Cholesky factor and the coefficients (all small) and
talks to the pool through an engine: one pass per iteration (:func:`~kmp_dask.blockops.rs_score`)
applies the previous iteration's column and residual move and returns each partition's best
candidates. Probabilistic search (the "59-trick", §3.1): ``candidates=s`` scores s random pool
points per iteration instead of all of them. No dask here.

``criterion="decrease"`` (backfitting only) scores ``Σ_j r_j(z)² / δ(z)`` — exactly how much
``‖w − ŵ‖²`` falls when z joins — instead of eq. 13's ``/ k(z, z)``. On the engine each partition
tracks ``δ`` for its rows: the driver's move effect for the new vector carries ``w = K_old⁻¹
k_old(ẑ)`` and the pivot ``L_kk``, and the partition's ``u = d − B w`` (which backfitting's
residual move forms anyway) is ``L_kk`` times the new orthonormalised column, so ``δ −= (u /
L_kk)²`` costs O(rows) per pass and one float64 per row (no ``Q``, no triangular solves; see
:mod:`~kmp_dask.blockops._reduced` for the journal). The basic pursuit's actual decrease is
eq. 13's score already, so it refuses ``"decrease"``.

:func:`dense_hyperplane_pursuit` is the same backfitted pursuit for a small pool held in this
process as one array (no engine, no per-pass overhead): it is a pivoted incomplete Cholesky
factorisation of the pool Gram whose pivots are chosen by the pursuit's score. ``Q`` (P × k)
holds ``⟨ψ_j, φ(z)⟩`` for the orthonormalised selected vectors ``ψ_j``, so the Cholesky row of
a candidate is ``Q[z]`` (no triangular solve), the new column is ``(k(·, z) − Q Q[z]ᵀ) / √δ``
and the residual moves by that column times ``c̃ = r(z)/√δ``: O(P · k) per vector, one kernel
column, no O(k²) solves. Same selection rule, ties, dependence test and stop rules as the
engine path (which tries the ``top`` best candidates per partition per pass; here every
candidate in score order), so both give the same path to rounding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..blockops import Atom, Engine, RSScoreQuery, RSValuesQuery, rs_effects, rs_score, rs_values
from ..blockops._results import RSScoreStats, RSValues
from ..linalg import IncrementalCholesky
from ._candidates import merge_ranked
from ._configs import config_given
from ._hmp_config import CRITERIA, HMPConfig
from ._loop import Iteration, run_loop
from ._record import PathRecorder
from ._result import LoopResult, StopReason
from ._sampling import RandomCandidates

__all__ = ["HMPResult", "HMPLoop", "HMPConfig", "CRITERIA", "hyperplane_pursuit", "run_hyperplane_pursuit",
           "dense_hyperplane_pursuit", "pool_errors", "geometric_levels", "HMP_STOP_REASONS", "MIN_PIVOT"]

RESYNC_EVERY = 32
"""Rank-one residual moves between two recomputations ``R = F − Bβ`` (drift bound)."""

MIN_PIVOT = 1e-10
"""A candidate whose part orthogonal to the selected vectors has ``δ < MIN_PIVOT · k(z, z)``
is numerically dependent on them (backfitting would only amplify rounding); it is skipped."""

MAX_STALLS = 8
"""Consecutive passes whose returned candidates were all dependent before the pursuit stops."""

BASIC_MAX_STEPS = 10
"""The basic pursuit (a vector may be picked again) stops after this many steps per wanted vector."""

HMP_STOP_REASONS = tuple(r.value for r in (StopReason.N_VECTORS, StopReason.RKHS_TOL, StopReason.CONVERGED,
                                          StopReason.LINEAR_DEPENDENCE, StopReason.EXHAUSTED, StopReason.MAX_ITER))


@dataclass
class HMPResult(LoopResult):
    """One greedy path. Attributes (n = selected vectors, m = outputs of the pursuit):

    ``index`` (n,) pool rows in selection order; ``vectors`` (n, d); ``coef`` (n, m) final
    coefficients; ``wsq`` (m,) ``‖w‖²``; ``rkhs_error`` (iterations + 1, m) ``‖w − ŵ‖²`` after
    each iteration (row 0: nothing selected); ``pool_sse`` (iterations + 1, m) ``Σ_z r(z)²`` over
    the pool at the same levels; ``n_vectors_at`` (iterations + 1,) distinct vectors at each
    level; ``stop_reason`` (a :class:`~kmp_dask.greedy._result.StopReason` value, one of
    :data:`HMP_STOP_REASONS`); ``n_passes``; ``seconds``. Backfitting keeps the factor ``L`` and
    ``ctilde = L⁻¹ f(s)``; the basic pursuit keeps its ``steps`` (pool row, coefficient step).
    ``history``: one record per iteration (``iteration``, ``n_vectors``, ``rkhs_error``,
    ``rkhs_error_rel``), the records the callback received.
    """

    index: np.ndarray
    vectors: np.ndarray
    coef: np.ndarray
    wsq: np.ndarray
    rkhs_error: np.ndarray
    pool_sse: np.ndarray
    n_vectors_at: np.ndarray
    stop_reason: str
    backfit: bool
    n_passes: int
    seconds: float
    L: np.ndarray | None = None
    ctilde: np.ndarray | None = None
    steps: list | None = None
    history: list = field(default_factory=list)

    @property
    def n_levels(self) -> int:
        return len(self.rkhs_error)

    def prefix_coef(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """``(index, coef)`` of the model after ``level`` iterations (exact: with backfitting
        ``L_k⁻ᵀ c̃_k = K_ss⁻¹ f(s)`` on the first k vectors)."""
        level = int(level)
        if not 0 <= level < self.n_levels:
            raise ValueError(f"level must be in [0, {self.n_levels - 1}]; got {level}")
        m = self.wsq.shape[0]
        if self.backfit:
            if level == 0:
                return self.index[:0], np.zeros((0, m))
            return self.index[:level], IncrementalCholesky.of_factor(self.L).solve_upper(self.ctilde[:level], level)
        return _merge_steps(self.steps[:level], m)


def _merge_steps(steps, m):
    order, coef = [], {}
    for idx, a in steps:
        if idx not in coef:
            order.append(idx)
            coef[idx] = np.zeros(m)
        coef[idx] = coef[idx] + a
    index = np.asarray(order, dtype=np.int64)
    return index, (np.stack([coef[i] for i in order]) if order else np.zeros((0, m)))


def _merge_candidates(res: RSScoreStats):
    """The partitions' best candidates of a pass's total, merged best first (ties: lowest row)."""
    return merge_ranked(res.candidates(), ("index", "score", "rows", "r", "f", "kdiag"), by="score")


def hyperplane_pursuit(engine: Engine, config: HMPConfig | None = None, *, wsq, outputs, random_state=None,
                       callback=None, checkpoint=None, loop=None, **keywords) -> HMPResult:
    """Run hyperplane matching pursuit over the pool held by ``engine``.

    The partitions must have received :func:`~kmp_dask.blockops.rs_effects.init` (the
    expansion evaluated on the pool); this starts a pursuit on ``outputs``.

    Parameters
    ----------
    engine : Engine
        The pool's partitions (:class:`~kmp_dask.blockops.Engine`).
    kernel : Kernel — the expansion's kernel
    n_rows : int — pool size
    wsq : array (m,) — ``‖w_j‖²`` of the outputs pursued
    outputs : sequence of int — which outputs of the expansion (coupled selection when several)
    n_vectors : int — stop after this many distinct vectors
    backfit : bool — re-optimise all coefficients after each selection (eq. 7)
    candidates : int or None — score s random pool points per iteration (None: all)
    random_state : numpy Generator (candidate draws)
    rkhs_tol : float — stop when ``Σ_j ‖w_j − ŵ_j‖² ≤ rkhs_tol · Σ_j ‖w_j‖²``
    top : int — best candidates each partition returns (next ones are tried when the best is
        dependent on the selected vectors)
    callback : callable(record) or None — after each selection, with ``iteration`` (from 0),
        ``n_vectors``, ``rkhs_error`` and ``rkhs_error_rel``
    criterion : ``"eq13"`` (the paper's score) or ``"decrease"`` (``Σ_j r_j(z)² / δ(z)``, the
        exact backfitted decrease; needs ``backfit=True``)
    checkpoint : object with ``maybe_save(loop, t, rng, last=...)`` or None — called at the end of
        every iteration t (after the choice, before ``callback``) with the :class:`HMPLoop`
    loop : :class:`HMPLoop` or None — a saved state to continue (the engine's partitions must
        be in the state they had then: its journal replayed)
    """
    config = config_given(HMPConfig, config, keywords, owner="hyperplane_pursuit")
    return run_hyperplane_pursuit(engine, config, wsq=wsq, outputs=outputs, random_state=random_state,
                                  callback=callback, checkpoint=checkpoint, loop=loop)


def run_hyperplane_pursuit(engine: Engine, config: HMPConfig, *, wsq, outputs, random_state=None, callback=None,
                           checkpoint=None, loop=None) -> HMPResult:
    """:func:`hyperplane_pursuit` with its configuration as one :class:`HMPConfig` (built and
    checked once by the caller); ``wsq``, ``outputs`` and the run-time objects as there. A resumed
    ``loop`` runs on with the configuration it was saved with."""
    t0 = time.perf_counter()
    rng = random_state if random_state is not None else np.random.default_rng(0)
    if loop is None:
        sampler = None if config.candidates is None else RandomCandidates(config.n_rows, config.candidates)
        model = _HMPModel(config, wsq)
        track = config.criterion == "decrease"
        loop = HMPLoop(model, sampler, [rs_effects.start(outputs, model.capacity, track_delta=track)])
    loop.attach(engine, callback)
    reason = run_loop(loop, rng, checkpoint)
    return loop.model.result(reason, loop.recorder, loop.n_passes, time.perf_counter() - t0)


class HMPLoop:
    """The engine pursuit's driver state between two passes (what a checkpoint saves with the
    engine's journal and the RNG state): the :class:`_HMPModel`, the candidate sampler, the
    effects queued for the next pass, the pass / stall counters and the
    :class:`~kmp_dask.greedy._record.PathRecorder` (paths per pass: the pool sums of squares;
    per level: the RKHS error and the number of distinct vectors; one record per iteration).
    Its steps run on :func:`~kmp_dask.greedy._loop.run_loop`; a checkpoint pickles it without
    the engine and the callback (:meth:`attach` gives them back)."""

    def __init__(self, model, sampler, effects):
        self.model, self.sampler, self.effects = model, sampler, list(effects)
        self.recorder = _hmp_recorder(model.err, 0)
        self.n_passes, self.stalls = 0, 0
        self.engine = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "engine"}

    def __setstate__(self, state):
        self.__dict__.update(state, engine=None)

    def attach(self, engine: Engine, callback) -> HMPLoop:
        self.engine = engine
        self.recorder.attach(callback)
        return self

    def step(self, rng):
        """One pass (the last choice applied, the candidates scored), the stopping rule, the best
        candidate not dependent on the basis: its :class:`~kmp_dask.greedy._loop.Iteration`, None
        when every returned candidate is dependent (excluded from now on), or why the loop stops."""
        model, config = self.model, self.model.config
        excluded = model.excluded()
        cand = None if self.sampler is None else self.sampler.draw(rng, excluded)
        exclude = np.asarray(sorted(excluded), dtype=np.int64)
        query = RSScoreQuery(cand, exclude, config.top, config.criterion, MIN_PIVOT)
        res = RSScoreStats.combine(self.engine.run(rs_score, query, self.effects))  # applies the last choice
        self.effects = []
        self.n_passes += 1
        self.recorder.append("pool_sse", res.rss)
        best = _merge_candidates(res)
        reason = model.stop_rule(best, config.rkhs_tol)
        if reason is not None:
            return reason
        pick = model.admissible(best)
        if pick is None:
            return None
        self.effects = model.add(best, pick)                   # coefficients, RKHS error, the partitions' move
        return Iteration(self.end_iteration(), model.it - 1, last=model.n_distinct >= config.n_vectors)

    def stop_on_stall(self):
        return StopReason.LINEAR_DEPENDENCE if self.stalls >= MAX_STALLS else None

    def end_iteration(self) -> dict:
        """The model's new level on the paths; its record (the runner keeps it)."""
        self.recorder.append("rkhs_error", self.model.err.copy())
        self.recorder.append("n_vectors", self.model.n_distinct)
        return self.model.record()


def _hmp_recorder(err, count) -> PathRecorder:
    """A pursuit's recorder, its level paths started at nothing selected."""
    rec = PathRecorder(paths=("pool_sse", "rkhs_error", "n_vectors"))
    rec.append("rkhs_error", np.array(err, dtype=np.float64))
    rec.append("n_vectors", count)
    return rec


class _HMPModel:
    """What the driver holds during a pursuit: the selected rows, the Cholesky factor of their
    Gram (backfitting), the coefficients per cache column, ``c̃ = L⁻¹ f(s)`` or the basic steps,
    and the RKHS error after each iteration."""

    def __init__(self, config: HMPConfig, wsq):
        self.config = config
        self.wsq = np.asarray(wsq, dtype=np.float64).reshape(-1)
        self.m = len(self.wsq)
        self.total = float(self.wsq.sum())
        self.capacity = max(1, min(config.n_vectors, 4096))
        self.chol = IncrementalCholesky(self.capacity)
        self.sel_index: list[int] = []
        self.sel_rows: list[np.ndarray] = []
        self.dependent: set[int] = set()
        self.ctilde = np.zeros((0, self.m))
        self.coef = np.zeros((0, self.m))  # per cache column (backfit: per vector; basic: per step)
        self.steps: list = []
        self.err = self.wsq.copy()
        self.it = 0

    @property
    def n_distinct(self) -> int:
        """Distinct vectors selected (backfitting never selects one twice)."""
        return len(self.sel_index) if self.backfit else len(set(self.sel_index))

    def excluded(self) -> set:
        return set(self.sel_index) | self.dependent if self.backfit else set(self.dependent)

    @property
    def backfit(self) -> bool:
        return self.config.backfit

    def stop_rule(self, best, rkhs_tol):
        if self.n_distinct >= self.config.n_vectors:
            return StopReason.N_VECTORS
        if not self.backfit and self.it >= BASIC_MAX_STEPS * self.config.n_vectors:
            return StopReason.MAX_ITER
        if self.total > 0 and self.err.sum() <= rkhs_tol * self.total:
            return StopReason.RKHS_TOL if rkhs_tol > 0 else StopReason.CONVERGED
        if best is None:
            return StopReason.EXHAUSTED
        if not best["score"][0] > 1e-15 * max(self.total, 1e-300):
            return StopReason.CONVERGED
        return None

    def admissible(self, best):
        """The first returned candidate that can join the basis (backfitting: its part orthogonal
        to the selected vectors is not negligible; it is appended to the Cholesky factor); the
        others tried are marked dependent."""
        for j in range(len(best["index"])):
            if not self.backfit:
                return j
            z, kzz = best["rows"][j], float(best["kdiag"][j])
            rows = self.sel_rows
            cross = self.config.kernel(np.asarray(rows), z[None, :])[:, 0].astype(np.float64) if rows else np.zeros(0)
            v = self.chol.solve_lower(cross)
            if kzz - float(v @ v) > MIN_PIVOT * kzz and self.chol.append(cross, kzz):
                return j
            self.dependent.add(int(best["index"][j]))
        return None

    def add(self, best, pick) -> list:
        """Update the coefficients and the RKHS error for the chosen vector; return the effects
        that bring the partitions' columns and residual along (applied by the next pass)."""
        idx, z, r = int(best["index"][pick]), best["rows"][pick], best["r"][pick].astype(np.float64)
        if self.backfit:
            L, k = self.chol.L, self.chol.size
            Lkk = float(L[k - 1, k - 1])
            w = self.chol.solve_upper(L[k - 1, : k - 1], k - 1) if k > 1 else None  # K_old⁻¹ k_old(z)
            c = r / (Lkk * Lkk)
            self.coef = np.vstack([self.coef - (np.outer(w, c) if w is not None else 0.0), c[None, :]])
            ct = r / Lkk
            self.ctilde = np.vstack([self.ctilde, ct[None, :]])
            self.err = self.err - ct * ct
        else:
            kzz = float(best["kdiag"][pick])
            c, w = r / kzz, None
            self.coef = np.vstack([self.coef, c[None, :]])
            self.steps.append((idx, c))
            self.err = self.err - r * r / kzz
        self.sel_index.append(idx)
        self.sel_rows.append(np.array(z))
        self.it += 1
        self.err = np.maximum(self.err, 0.0)
        effects = [*rs_effects.add(Atom(np.array(z), 0, idx))]
        if self.config.criterion == "decrease":  # residual and δ move together; δ's moves are never dropped
            effects.append(rs_effects.orth_move(w, c, Lkk, idx))
            if self.it % RESYNC_EVERY == 0:
                effects.append(rs_effects.set_coef(self.coef))
        elif self.it % RESYNC_EVERY == 0:
            effects.append(rs_effects.set_coef(self.coef))
        else:
            effects.append(rs_effects.move(w, c, self.coef))
        return effects

    def record(self) -> dict:
        e = float(self.err.sum())
        return {"iteration": self.it - 1, "n_vectors": self.n_distinct, "rkhs_error": e,
                "rkhs_error_rel": e / self.total if self.total > 0 else 0.0}

    def result(self, reason, recorder, n_passes, seconds) -> HMPResult:
        if self.backfit:
            index = np.asarray(self.sel_index, dtype=np.int64)
            vectors = np.asarray(self.sel_rows).reshape(len(self.sel_rows), -1)
            final = self.coef
        else:
            index, final = _merge_steps(self.steps, self.m)
            first = {i: self.sel_rows[k] for k, i in reversed(list(enumerate(self.sel_index)))}
            vectors = np.asarray([first[i] for i in index.tolist()]).reshape(len(index), -1)
        return HMPResult(
            index=index, vectors=vectors, coef=final, wsq=self.wsq, rkhs_error=recorder.stacked("rkhs_error"),
            pool_sse=recorder.stacked("pool_sse"), n_vectors_at=recorder.stacked("n_vectors"),
            stop_reason=StopReason(reason).value, backfit=self.backfit, n_passes=n_passes, seconds=seconds,
            L=np.array(self.chol.L) if self.backfit else None, ctilde=self.ctilde if self.backfit else None,
            steps=None if self.backfit else self.steps, history=list(recorder.history),
        )


def dense_hyperplane_pursuit(rows, config: HMPConfig | None = None, *, F, wsq, random_state=None, callback=None,
                             checkpoint=None, run=None, **keywords) -> HMPResult:
    """Backfitted hyperplane matching pursuit over a pool held in this process (see the module
    docstring): ``rows`` (P, d) the pool, ``F`` (P, m) the expansion's values there (without
    intercept) for the outputs pursued (coupled when m > 1), ``wsq`` (m,) their ``‖w_j‖²``;
    the other parameters as :func:`hyperplane_pursuit`. Memory: P × n_vectors float64.

    ``criterion``: ``"eq13"`` scores ``Σ_j r_j(z)² / k(z, z)`` (the paper's, as the engine);
    ``"decrease"`` scores ``Σ_j r_j(z)² / δ(z)`` with ``δ(z) = k(z,z) − ‖Q[z]‖²`` the part of
    ``φ(z)`` orthogonal to the selected vectors — exactly how much ``‖w − ŵ‖²`` falls when z
    joins with backfitting (the greedy optimum per step; "optimised" orthogonal pursuit).

    ``checkpoint``: an object with ``maybe_save(run, t, rng, last=...)`` called at the end of
    every iteration t with the pursuit's state (a ``_DensePursuit``, pickled without the pool,
    its values and the unused capacity of ``Q``); ``run``: such a saved state to continue
    (:meth:`_DensePursuit.reattach` gives it the pool, values and RNG back); a resumed run goes
    on with the configuration it was saved with.

    ``config``: an :class:`HMPConfig` built by the caller (the compressor's routes), in place of
    ``kernel``, ``n_vectors``, ``candidates``, ``rkhs_tol`` and ``criterion`` (backfitting; its
    ``top`` is unused: every candidate is tried in score order)."""
    config = config_given(HMPConfig, config, keywords, owner="dense_hyperplane_pursuit",
                          fixed={"n_rows": len(rows), "backfit": True, "top": 4})
    t0 = time.perf_counter()
    if run is None:
        run = _DensePursuit(rows, config, F, wsq, random_state)
    else:
        run.reattach(rows, F, random_state)
    run.recorder.attach(callback)
    reason = run_loop(run, run.rng, checkpoint)
    return run.result(reason, time.perf_counter() - t0)


class _DensePursuit:
    """The state of :func:`dense_hyperplane_pursuit`: the pool, the pivoted incomplete Cholesky
    ``Q`` (P × k) / ``L`` of the selected vectors, the residual values ``R`` on the pool, and the
    RKHS error per output. Its steps run on :func:`~kmp_dask.greedy._loop.run_loop`."""

    stalls = 0  #: steps in a row that admitted nothing (counted by the runner; they never stop the loop)

    def step(self, rng):
        """One selection: the stopping rule, this step's candidates scored, the best independent
        one added; its :class:`~kmp_dask.greedy._loop.Iteration`, None when nothing joined (a
        sampled step whose candidates were all dependent), or why the loop stops."""
        reason = self.stop_rule(self.config.rkhs_tol)          # size or RKHS tolerance reached
        if reason is not None:
            return reason
        cand = self.draw()                                     # candidates of this step
        if len(cand) == 0:
            return StopReason.EXHAUSTED
        score = self.scores(cand)
        order = np.lexsort((cand, -score))                     # best first, ties by pool row (as the engine)
        if not score[order[0]] > 1e-15 * max(self.total, 1e-300):
            return StopReason.CONVERGED
        z = self.pick(cand, order)                             # best independent candidate
        if z is None and self.sampler is None:
            return StopReason.LINEAR_DEPENDENCE
        if z is None or not self.add(z):                       # Cholesky column, residual, error
            return None
        return Iteration(self.record(), len(self.sel) - 1, last=len(self.sel) >= self.n_vectors)

    def stop_on_stall(self):
        return None  # the next step draws other candidates

    def __init__(self, rows, config: HMPConfig, F, wsq, random_state):
        self.config = config
        self.Z = np.ascontiguousarray(rows, dtype=np.float64)
        P = len(self.Z)
        self.F = np.asarray(F, dtype=np.float64).reshape(P, -1)
        self.wsq = np.asarray(wsq, dtype=np.float64).reshape(-1)
        self.m, self.total = self.F.shape[1], float(self.wsq.sum())
        self.n_vectors = min(config.n_vectors, P)  # the pool's size caps the path
        self.rng = random_state if random_state is not None else np.random.default_rng(0)
        self.sampler = None if config.candidates is None else RandomCandidates(P, config.candidates)
        self.kdiag = np.asarray(config.kernel.diag(self.Z), dtype=np.float64)
        self.Q = np.zeros((P, max(self.n_vectors, 1)))
        self.L = np.zeros((max(self.n_vectors, 1), max(self.n_vectors, 1)))
        self.delta = self.kdiag.copy()  # k(z, z) − ‖Q[z]‖²: the part orthogonal to the basis
        self.R = self.F.copy()
        self.ctilde = np.zeros((0, self.m))
        self.err = self.wsq.copy()
        self.recorder = _hmp_recorder(self.err, 0)  # per level: RKHS error, vectors, pool SSE; records
        self.recorder.append("pool_sse", np.einsum("ij,ij->j", self.R, self.R))
        self.sel: list[int] = []
        self.dependent: set[int] = set()
        self.excluded = np.zeros(P, dtype=bool)

    #: given back by :meth:`reattach`, not saved: the pool, its values, the RNG (saved as its state)
    _DETACHED = ("Z", "F", "kdiag", "rng")

    def __getstate__(self):
        """Without the inputs, and ``Q`` / ``L`` without their unused capacity (a checkpoint
        after k vectors holds P × k values of ``Q``, not P × n_vectors)."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._DETACHED}
        k = len(self.sel)
        state["Q"], state["L"] = self.Q[:, :k].copy(), self.L[:k, :k].copy()
        state["capacity"] = (self.Q.shape, self.L.shape)
        return state

    def __setstate__(self, state):
        (qs, ls) = state.pop("capacity")
        Q, L = np.zeros(qs), np.zeros(ls)
        k = state["Q"].shape[1]
        Q[:, :k], L[:k, :k] = state["Q"], state["L"]
        self.__dict__.update(state, Q=Q, L=L, Z=None, F=None, kdiag=None, rng=None)

    def reattach(self, rows, F, random_state) -> None:
        """The inputs of a restored state (the same pool and values: the checkpoint's header
        checked them) and the RNG, its state already set by the caller."""
        self.Z = np.ascontiguousarray(rows, dtype=np.float64)
        self.F = np.asarray(F, dtype=np.float64).reshape(len(self.Z), -1)
        self.kdiag = np.asarray(self.config.kernel.diag(self.Z), dtype=np.float64)
        self.rng = random_state if random_state is not None else np.random.default_rng(0)

    def stop_rule(self, rkhs_tol):
        if len(self.sel) >= self.n_vectors:
            return StopReason.N_VECTORS
        if self.total > 0 and self.err.sum() <= rkhs_tol * self.total:
            return StopReason.RKHS_TOL if rkhs_tol > 0 else StopReason.CONVERGED
        return None

    def draw(self):
        if self.sampler is None:
            return np.flatnonzero(~self.excluded)
        return self.sampler.draw(self.rng, set(self.sel) | self.dependent)

    def scores(self, cand):
        num = np.einsum("ij,ij->i", self.R[cand], self.R[cand])
        kd, de = self.kdiag[cand], self.delta[cand]
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.config.criterion == "eq13":
                return np.where(kd > 0, num / kd, 0.0)
            # candidates already (numerically) in the span score 0 and are never picked
            return np.where(de > MIN_PIVOT * kd, num / de, 0.0)

    def _drop(self, z):
        self.dependent.add(z)
        self.excluded[z] = True

    def pick(self, cand, order):
        """The first candidate in ``order`` not (numerically) in the span; the others are dropped."""
        for o in order:
            z = int(cand[o])
            if self.delta[z] > MIN_PIVOT * self.kdiag[z]:
                return z
            self._drop(z)
        return None

    def add(self, z) -> bool:
        """Row ``z`` joins: one Cholesky column, the residual and the error move. False when the
        exact recheck finds it dependent after all (the tracked δ drifted)."""
        k = len(self.sel)
        v = self.Q[z, :k].copy()
        d = float(self.kdiag[z] - v @ v)
        if not d > MIN_PIVOT * self.kdiag[z]:
            self._drop(z)
            return False
        Lkk = np.sqrt(d)
        col = np.asarray(self.config.kernel(self.Z, self.Z[z][None, :])[:, 0], dtype=np.float64)
        q = (col - self.Q[:, :k] @ v) / Lkk if k else col / Lkk
        q[z] = Lkk
        self.Q[:, k] = q
        self.L[k, :k], self.L[k, k] = v, Lkk
        ct = self.R[z] / Lkk
        self.ctilde = np.vstack([self.ctilde, ct[None, :]])
        self.sel.append(z)
        self.excluded[z] = True
        self.delta -= q * q
        self.delta[z] = 0.0
        k += 1
        if k % RESYNC_EVERY == 0:
            self.R = self.F - self.Q[:, :k] @ self.ctilde
        else:
            self.R -= np.outer(q, ct)
        self.err = np.maximum(self.err - ct * ct, 0.0)
        self.recorder.append("rkhs_error", self.err.copy())
        self.recorder.append("n_vectors", k)
        self.recorder.append("pool_sse", np.einsum("ij,ij->j", self.R, self.R))
        return True

    def record(self) -> dict:
        k, e = len(self.sel), float(self.err.sum())
        return {"iteration": k - 1, "n_vectors": k, "rkhs_error": e,
                "rkhs_error_rel": e / self.total if self.total > 0 else 0.0}

    def result(self, reason, seconds) -> HMPResult:
        n = len(self.sel)
        Ln = self.L[:n, :n].copy()
        coef = IncrementalCholesky.of_factor(Ln).solve_upper(self.ctilde) if n else np.zeros((0, self.m))
        index = np.asarray(self.sel, dtype=np.int64)
        return HMPResult(
            index=index, vectors=self.Z[index].reshape(n, -1), coef=coef, wsq=self.wsq,
            rkhs_error=self.recorder.stacked("rkhs_error"), pool_sse=self.recorder.stacked("pool_sse"),
            n_vectors_at=self.recorder.stacked("n_vectors"), stop_reason=StopReason(reason).value, backfit=True,
            n_passes=0, seconds=seconds, L=Ln, ctilde=self.ctilde, history=list(self.recorder.history))


def pool_errors(engine: Engine, result: HMPResult, levels, values: bool = False):
    """Squared pool errors ``Σ_z (f(z) − f̂_k(z))²`` (len(levels), m) of the prefix models at
    ``levels`` (backfit results: the engine's cached columns are in selection order), in one
    pass; with ``values`` also ``f̂_k`` per partition."""
    if not result.backfit:
        raise ValueError("pool_errors needs a backfitted path (the basic pursuit's cache holds repeated columns)")
    coefs = tuple(result.prefix_coef(k)[1] for k in levels)
    out = RSValues.combine(engine.run(rs_values, RSValuesQuery(coefs, values)))
    return (out.sse, list(out.values)) if values else out.sse


def geometric_levels(n: int, count: int = 10) -> list[int]:
    """About ``count`` levels in 1..n, geometrically spaced, always including n."""
    if n <= 0:
        return [0]
    pts = {int(round(x)) for x in np.geomspace(1, n, num=min(count, n))}
    pts.add(n)
    return sorted(p for p in pts if 1 <= p <= n)
