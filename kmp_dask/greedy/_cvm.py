"""Core vector machines and MMDA features: the driver side (Tsang, Kocsor & Kwok, KDD 2006; equations in docs/cvm.md).

The L2-SVM is the minimum enclosing ball (MEB) of the points ``φ̃(x_i)`` with kernel
``k̃(z_i, z_j) = y_i y_j (k̂(x_i, x_j) + 1) + δ_ij / C`` and constant diagonal ``κ̃ = κ + 1 + 1/C``.
The core-set loop (Bădoiu–Clarkson, as CVM runs it)::

    S ← {a random row}; α ← (1)
    repeat
        α ← argmin_{α ∈ simplex} αᵀ K̃_S α          (the MEB dual on S: SMO steps to ε·R², warm-started)
        R² ← κ̃ − αᵀ K̃_S α
        z ← the furthest of ``candidates`` random rows (one pass)   (probabilistic speed-up)
        if ‖c − φ̃(z)‖² ≤ (1+ε)² R²: z ← the furthest of all rows (a full pass)
        if ‖c − φ̃(z)‖² ≤ (1+ε)² R²: stop — every row lies within (1+ε)R
        S ← S ∪ {z}

The driver holds the core rows, their targets, their projections on the MMDA features found so
far, and α (all small); the data are touched only by distance passes
(:func:`~kmp_dask.blockops._cvm.cvm_furthest`). The decision function is
``f(x) = Σ_s α_s y_s (k̂(x_s, x) + 1)``, i.e. ``w = Σ α_s y_s φ̂(x_s)``, ``b = Σ α_s y_s``.

MMDA: feature q+1 is the CVM run with the kernel deflated by features 1..q (the partitions keep
their rows' projections ``P``), ``u_{q+1} = w/‖w‖``. No dask here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from ..blockops._cvm import CVMQuery, cvm_furthest
from ..blockops._engine import Engine
from ..blockops._results import CVM_CANDIDATE_FIELDS, CVMFurthest
from ._candidates import merge_ranked
from ._configs import config_given
from ._cvm_qp import SMOQP, GrowingRows, GrowingSquare, simplex_qp
from ._loop import Iteration, run_loop
from ._record import PathRecorder
from ._result import LoopResult, StopReason
from ._sampling import ExcludingCandidates

__all__ = ["QP_EPS", "QP_TOL", "REFILL", "SAMPLE_SCALE", "STAGE_ROWS", "sample_size", "stage_sizes", "CVMConfig",
           "CVMResult", "core_vector_machine", "mmda_feature", "simplex_qp", "certified_rows"]

QP_EPS = 0.1
"""The MEB dual on the core set is solved (:class:`~kmp_dask.greedy._cvm_qp.SMOQP`, warm-started)
until the support's largest gradient is within ``QP_EPS · ε · R²`` of the smallest: every core point
then lies within ``R²(1 + 2·QP_EPS·ε) ≤ (1+ε)²R²`` of the centre, the ball the loop certifies on the
other rows (docs/cvm.md "The QP"). 0.1 rather than 1: at 5·10⁴ covertype-like rows a smaller
core set, fewer full passes and 0.2 pt more accuracy (benchmarks/cvm_speed.py --qp-eps)."""

QP_TOL = 1e-9
"""The QP's tolerance is never below ``QP_TOL · κ̃`` (ε = 0, or the first calls with R² ≈ 0)."""


@dataclass
class CVMResult(LoopResult):
    """``core_index`` (n,) global rows of the core set in order of entry; ``core_rows`` (n, d);
    ``core_y`` (n,) ±1; ``core_P`` (n, q) projections on the features the run was deflated by;
    ``alpha`` (n,) MEB weights (the SVM's dual variables); ``R2`` the ball's squared radius;
    ``objective`` ``αᵀK̃α``; ``n_iter``; ``n_full_passes``; ``n_passes``; ``stop_reason``
    (a :class:`~kmp_dask.greedy._result.StopReason` value: "converged" or "max_core");
    ``kernel_evaluations`` (computed by the distance passes — values read from the partitions'
    kernel-column cache are not counted — and the core Gram);
    ``seconds``; ``history``: one record per iteration (``iteration``, ``n_core``, ``R2`` the
    radius the new core rows were found outside of), kept by the loop's
    :class:`~kmp_dask.greedy._record.PathRecorder` (a resumed run's is the uninterrupted run's;
    ``()`` on results saved before it was kept); ``validation``: with validated growth
    (``CVMConfig.validate_from``) one ``(sample rows, errors, rows measured)`` per validated sample,
    else ``()``; ``sample_rows``: the rows of the sample the returned model was certified on (None:
    every row)."""

    core_index: np.ndarray
    core_rows: np.ndarray
    core_y: np.ndarray
    core_P: np.ndarray
    alpha: np.ndarray
    R2: float
    objective: float
    n_iter: int
    n_full_passes: int
    n_passes: int
    stop_reason: str
    kernel_evaluations: int
    seconds: float
    history: Any = ()
    validation: Any = ()
    sample_rows: Any = None

    @property
    def a(self) -> np.ndarray:
        """``α ∘ y`` over the core set: the decision function's coefficients."""
        return self.alpha * self.core_y

    @property
    def intercept(self) -> float:
        return float(self.a.sum())


def _ktilde(kernel, S, y, P, C):
    K = kernel(S, S).astype(np.float64)
    if P.shape[1]:
        K = K - P @ P.T
    return np.outer(y, y) * (K + 1.0) + np.eye(len(S)) / C


def _new_entries(kernel, S, y, P, C):
    """The last row of ``K̃`` of the core set ``S`` (its off-diagonal part, its diagonal)."""
    k = kernel(S[:-1], S[-1:])[:, 0].astype(np.float64)
    kzz = float(kernel.diag(S[-1:])[0])
    if P.shape[1]:
        k = k - P[:-1] @ P[-1]
        kzz = kzz - float(P[-1] @ P[-1])
    return y[:-1] * y[-1] * (k + 1.0), kzz + 1.0 + 1.0 / C


def _grow(G: GrowingSquare, kernel, S, y, P, C):
    """``K̃`` of the core set after its last row joined: one new row and column written into the
    buffer ``G`` in place (O(|S|·d); no copy of the matrix)."""
    n = len(S)
    G.reserve(n)
    col, diag = _new_entries(kernel, S, y, P, C)
    G.buf[: n - 1, n - 1] = col
    G.buf[n - 1, : n - 1] = col
    G.buf[n - 1, n - 1] = diag
    G.n = n


def _rebuilt_ktilde(kernel, core_rows, core_y, core_P, C, m):
    """``K̃`` of the first ``m`` core rows entry for entry as the loop built it — :func:`_ktilde`
    on the first row, then the entries :func:`_grow` added for each row, from the same kernel
    calls on the same arrays — without ``_grow``'s copies (O(m²·d)). A checkpoint of the loop
    keeps the core rows instead of this m × m matrix."""
    Q = np.empty((m, m))
    if m:
        Q[:1, :1] = _ktilde(kernel, np.asarray(core_rows[:1]), np.asarray(core_y[:1]),
                            np.asarray(core_P[:1]).reshape(1, -1), C)
    for n in range(2, m + 1):
        S, y, P = np.asarray(core_rows[:n]), np.asarray(core_y[:n]), np.asarray(core_P[:n]).reshape(n, -1)
        Q[: n - 1, n - 1], Q[n - 1, n - 1] = _new_entries(kernel, S, y, P, C)
        Q[n - 1, : n - 1] = Q[: n - 1, n - 1]
    return Q


REFILL = 64
"""After a sampled pass misses, the full pass keeps up to this many of the furthest rows outside
the (1+ε)R ball as *pending*: the following sampled passes measure them with the random rows, so
an iteration finds a row outside the ball without another full pass until the pending rows are
used up or have fallen inside (measured on letter: full passes per binary problem 29–51 → see
docs/cvm.md). Convergence is still declared only by a full pass that finds no row outside."""

POINTS_PER_PASS = 8
"""Rows a distance pass may add to the core set: the furthest and, when more than one, the next
furthest of the rows it measured that lie outside the (1+ε)R ball. 8 since the SMO QP:
a fit's passes and QP calls ÷ ~7 for a core set 4–28 % larger, the same held-out accuracy
(benchmarks/cvm_speed.py; docs/cvm.md "Several rows per pass")."""


SAMPLE_SCALE = 10.0
"""The estimators' default ``stopping="sample"`` runs the core-set loop on a fixed random sample of
:func:`sample_size` ``= ⌈SAMPLE_SCALE / eps⌉`` rows (100,000 at the default eps 1e-4), drawn once
per loop, when the data have more rows: its sampled and full passes measure only them, and
convergence is certified on them; with fewer rows it is the paper's loop, bit for bit. Why: the
certificate's tolerance is additive (``εR²``) while the exact L2-SVM's margin shrinks like 1/N, so
on data with label noise the paper's certificate over *every* row makes the fixed-size core set
chase mislabelled rows, whose number grows with N, and held-out accuracy falls once N passes a few
times 1/ε rows (measured: 10⁵ rows at eps 1e-4, 5·10³–10⁴ at 1e-3); on a sample of ~10/ε rows the
loop is the same problem at every larger N (docs/cvm.md "Stopping at large N")."""


def sample_size(eps: float) -> int:
    """The rows of ``stopping="sample"``: ``⌈SAMPLE_SCALE / eps⌉`` (100,000 at eps 1e-4)."""
    return int(math.ceil(round(SAMPLE_SCALE / eps, 6)))


STAGE_ROWS = 5000
"""``stopping="auto"`` (:class:`CVMConfig` ``validate_from``): the smallest sample of the validated
growth, :func:`stage_sizes`. The core-set loop runs on nested random samples that double up to
``⌈10/ε⌉`` rows (or every row), each warm-started from the last one's core set and α; after each,
the model's errors are counted on the rows the next sample adds (rows it has not seen), and the
growth stops at the first sample whose errors exceed the best sample's by more than one standard
error of the difference (:data:`VALIDATION_Z`), returning the best sample's model. Why: on data
with label noise the certificate's additive tolerance ``εR²`` overtakes the margin ρ, which falls
like 1/N, at a number of rows that depends on the noise (measured: ~2·10⁴ rows at 3 % flipped
labels, 5·10⁴–10⁵ at 1 %, at ε = 10⁻⁴); past it the core set chases mislabelled rows and held-out
accuracy falls. The fixed ``⌈10/ε⌉`` of ``stopping="sample"`` suits one noise level; the held-out
errors find the size for the data at hand (docs/cvm.md "Validated growth")."""

VALIDATION_Z = 1.0
"""Growth stops when a sample's validation error exceeds the best one's by more than this many
standard errors of their difference (binomial, ``√(p₁(1−p₁)/n₁ + p₂(1−p₂)/n₂)``): a plateau's
noise does not stop it, a fall of a point on ≥ 5,000 rows does."""


def stage_sizes(n_rows: int, certify_rows: int | None, first: int) -> list[int]:
    """The samples of validated growth, ascending: ``top = min(n_rows, certify_rows)`` halved while
    the half keeps at least ``first`` rows (10⁵, 5·10⁴, …, 6,250 for ``top`` 10⁵ and ``first``
    5,000); one size — no growth — when ``top < 2·first``."""
    sizes = [n_rows if certify_rows is None else min(n_rows, int(certify_rows))]
    while sizes[0] // 2 >= first:
        sizes.insert(0, sizes[0] // 2)
    return sizes


def staged_order(n_rows: int, top: int, seed) -> np.ndarray:
    """The random rows of validated growth, in order of draw: ``min(n_rows, 2·top)`` distinct rows
    drawn by ``np.random.default_rng(seed)``; sample k is the first ``stage_sizes[k]`` of them and
    its validation rows the next ones (a pure function of its arguments, as :func:`certified_rows`)."""
    return np.random.default_rng(seed).choice(n_rows, size=min(n_rows, 2 * int(top)), replace=False)


def certified_rows(n_rows: int, certify_rows: int | None, seed) -> np.ndarray | None:
    """The sorted rows the core-set loop runs on: None (all) when ``certify_rows`` is None or at least
    ``n_rows``; else ``certify_rows`` distinct rows drawn by ``np.random.default_rng(seed)`` (a pure
    function of its arguments, so a resumed loop redraws the same rows from the saved seed)."""
    if certify_rows is None or certify_rows >= n_rows:
        return None
    return np.sort(np.random.default_rng(seed).choice(n_rows, size=int(certify_rows), replace=False))


@dataclass(frozen=True)
class CVMConfig:
    """What defines one core-set loop (:func:`core_vector_machine`), handed over whole.

    ``kernel`` and its constant diagonal ``kappa`` (κ), the penalty ``C``, the core-set tolerance
    ``eps``, ``n_rows`` in the store, ``candidates`` sampled per iteration (None: every row in every
    iteration, no probabilistic speed-up), ``max_core`` core rows at most, ``points_per_pass`` rows
    outside the ball one iteration may add (:data:`POINTS_PER_PASS`; 1: Bădoiu–Clarkson's one
    furthest point — the QP then admits them as one block), ``certify_rows`` the rows the loop runs
    on (None: all, the paper's rule; :func:`certified_rows`), ``refill`` rows outside the ball a
    full pass hands to the following sampled passes (:data:`REFILL`; 0: none), ``validate_from``
    None (one sample: ``certify_rows``), or the smallest sample of validated growth
    (:data:`STAGE_ROWS`; :func:`stage_sizes` — with one size the loop is the one without it)."""

    kernel: Any
    kappa: float
    C: float
    eps: float
    n_rows: int
    candidates: int | None = 59
    max_core: int = 5000
    points_per_pass: int = POINTS_PER_PASS
    certify_rows: int | None = None
    refill: int = REFILL
    validate_from: int | None = None


class Furthest(NamedTuple):
    """What one iteration's distance passes found: ``rows`` outside the (1+ε)R ball that may join
    the core set, each ``(index, row, y, P, dist)``, furthest first (empty: none outside), and
    whether a full pass measured them (``full``: every row, or every row of the sample)."""

    rows: list
    full: bool


def core_vector_machine(engine: Engine, config: CVMConfig | None = None, *, random_state=None,
                        n_features_deflated: int = 0, callback=None, checkpoint=None, resume: dict | None = None,
                        **keywords) -> CVMResult:
    """One binary L2-SVM by the core-set loop over the engine's partitions.

    ``engine`` (:class:`~kmp_dask.blockops.Engine`) holds the partitions. The partitions must hold
    the rows (:func:`~kmp_dask.blockops._cvm.cvm_effects.init`), the binary targets (``targets``)
    and ``n_features_deflated`` MMDA projections. ``config``: a :class:`CVMConfig` (a
    :class:`~kmp_dask.greedy._cvm_problems.ProblemConfig` is one), or its fields as keywords
    (``kernel=…, kappa=…, C=…, eps=…, n_rows=…``, the others optional). ``certify_rows``: None (the
    paper's rule) — convergence is certified on every row; an int below ``n_rows`` — the loop runs on
    a random sample of that many rows (:func:`certified_rows`, its seed the first draw from
    ``random_state``): the first core row, the sampled passes' candidates and the full passes all
    come from the sample, so the loop stops when every row of the sample lies within (1+ε)R, and its
    work is the same at every ``n_rows`` but for the kernel-column cache, which the partitions keep
    over all their rows. ``validate_from``: validated growth — the loop runs on nested samples
    (:func:`stage_sizes`, :func:`staged_order`), warm-started from one to the next, and
    :meth:`_CoreSetLoop.next_sample` decides after each from the errors on the next rows; the result's
    ``validation`` and ``sample_rows`` say what it measured and chose.

    The loop is a :class:`_CoreSetLoop` on :func:`~kmp_dask.greedy._loop.run_loop`; its stopping
    rule is :meth:`_CoreSetLoop.stop_rule`.

    ``callback(record)``: after each iteration, with its record (``iteration``, ``n_core``, ``R2``),
    through the loop's :class:`~kmp_dask.greedy._record.PathRecorder` (``CVMResult.history``).

    ``checkpoint``: anything with the loop contract's ``maybe_save(loop, t, rng, *, cands=None,
    first=None, last=False)``, called at the end of iteration ``t`` (after the new core rows joined
    and its record was kept, before ``callback``); ``loop.state()`` is the loop's whole state
    (:meth:`_CoreSetLoop.state`: core set, α, the QP's active set and factor, pending rows, counters,
    the records, the RNG's state; K̃ is not saved but rebuilt from the core rows entry for entry,
    :func:`_rebuilt_ktilde`). ``resume``: such a state; the loop continues after its iteration, with
    ``random_state`` set from it. The caller restores the partitions to that moment (targets and
    deflating features: the kernel-column cache is rebuilt by the next pass, one column at a time as
    when the rows joined), so the resumed run's result is bit for bit the uninterrupted one's
    (``kernel_evaluations`` counts the rebuilt columns too; ``seconds`` adds the saved run's).
    """
    config = config_given(CVMConfig, config, keywords, owner="core_vector_machine")
    t0 = time.perf_counter()
    rng = random_state if random_state is not None else np.random.default_rng(0)
    loop = _CoreSetLoop(engine, config, rng=rng, t0=t0, recorder=PathRecorder(callback))
    if resume is None:
        loop.start(n_features_deflated)
    else:
        loop.resume(resume)
    return loop.result(run_loop(loop, loop.rng, checkpoint))


class _CoreSetLoop:
    """The state of one :func:`core_vector_machine` run (core set, α, K̃ of the core set, the QP,
    the pending rows, the counters) and its steps (the loop contract of
    :mod:`~kmp_dask.greedy._loop`): start or resume, then per :meth:`step` solve the MEB dual on the
    core set, :meth:`stop_rule` (which asks for the furthest rows: sampled pass, then a full pass),
    add those rows to the core set; and the whole state for a checkpoint."""

    def __init__(self, engine: Engine, config: CVMConfig, *, rng, t0, recorder: PathRecorder | None = None):
        self.engine, self.config = engine, config
        self.kernel, self.C, self.eps = config.kernel, config.C, config.eps
        self.kt = config.kappa + 1.0 + 1.0 / config.C
        self.certify_rows, self.cert_seed, self.cert = config.certify_rows, None, None
        self.recorder = recorder if recorder is not None else PathRecorder()
        self.batch = max(int(config.points_per_pass), 1)
        self.n_rows, self.refill, self.rng, self.t0 = config.n_rows, config.refill, rng, t0
        candidates = config.candidates
        self.sampler = None if candidates is None else ExcludingCandidates(self.n_rows, int(candidates))
        self.stalls = 0
        sizes = None if config.validate_from is None else stage_sizes(self.n_rows, config.certify_rows,
                                                                        int(config.validate_from))
        self.stages = sizes if sizes is not None and len(sizes) > 1 else None  # validated growth
        self.stage, self.validation, self.best, self.order = 0, [], None, None

    def step(self, rng):
        """One iteration: the MEB dual on the core set (α, R² = κ̃ − αᵀK̃α), the stopping rule (which
        runs the distance passes when it needs them), the rows found outside the ball join; its
        :class:`~kmp_dask.greedy._loop.Iteration`, None when no row was found to join, or why the
        loop stops."""
        S, y, P = self.core_arrays()
        self.solve_meb(S, y, P)
        measured = []

        def furthest() -> Furthest:  # the passes, run once when first asked for
            if not measured:
                measured.append(self.furthest_point(S, y, P))
            return measured[0]

        reason = self.stop_rule(furthest)
        while reason is StopReason.CONVERGED and self.stages is not None and self.next_sample(S, y, P):
            measured.clear()  # the next sample's passes
            reason = self.stop_rule(furthest)
        if reason is not None:
            return reason
        rows = furthest().rows[: max(self.config.max_core - len(self.core_index), 0)]
        if not rows:
            return None
        self.add_to_core_set(rows)
        t = self.n_iter - 1
        return Iteration({"iteration": t, "n_core": len(self.core_index), "R2": self.R2}, t)

    def stop_rule(self, furthest):
        """Why the loop stops before adding rows, or None. ``furthest()``: what this iteration's
        distance passes found (a :class:`Furthest`; the passes run on the first call only, so a rule
        that decides without it costs no pass). The rules: ``max_core`` core rows (before any pass);
        the MEB certificate — a full pass found no row outside (1+ε)R: every row (of the sample)
        lies within the ball."""
        if len(self.core_index) >= self.config.max_core:
            return StopReason.MAX_CORE
        found = furthest()
        if found.full and not found.rows:
            return StopReason.CONVERGED
        return None

    def stop_on_stall(self):
        """No row to join without the stopping rule having stopped: nothing can grow the core set."""
        return StopReason.CONVERGED

    def start(self, n_features_deflated):
        """A fresh loop: the core set is one random row (fetched by a pass over its candidate)."""
        if self.stages is not None:
            self._use_stages(int(self.rng.integers(0, 2**63 - 1)))
            first = self.cert[[int(self.rng.integers(0, len(self.cert)))]]
        elif self.certify_rows is not None and self.certify_rows < self.n_rows:  # else no draw: the paper's loop
            self._use_sample(int(self.rng.integers(0, 2**63 - 1)))
            first = self.cert[[int(self.rng.integers(0, len(self.cert)))]]
        else:
            first = np.array([int(self.rng.integers(0, self.n_rows))])
        q0 = CVMQuery(S=np.zeros((0, 1)), a=np.zeros(0), PS=np.zeros((0, n_features_deflated)), aKa=0.0,
                      kappa=self.kt, cand=first, ids=np.zeros(0, dtype=np.int64))
        tot = CVMFurthest.combine(self.engine.run(cvm_furthest, q0))
        self.n_passes, self.evals = 1, 0
        idx, rows, ys, Ps = _best(tot)
        self._buffers(np.asarray(rows).shape[-1], np.asarray(rows).dtype, n_features_deflated)
        self._append_core(idx, rows, ys, Ps)
        self.alpha = np.ones(1)
        self.n_iter = self.n_full = 0
        self.Q = GrowingSquare()
        S, y, P = self.core_arrays()
        self.Q.buf[:1, :1] = _ktilde(self.kernel, S, y, P, self.C)
        self.Q.n = 1
        self.qp = SMOQP()
        self.pending = np.zeros(0, dtype=np.int64)  # rows a full pass found outside the ball, not yet measured inside
        self.seconds0 = 0.0

    def resume(self, r):
        """The loop after the iteration the state ``r`` (:meth:`state`) was saved at."""
        rows, P = np.asarray(r["core_rows"]), np.asarray(r["core_P"]).reshape(len(r["core_index"]), -1)
        self._buffers(rows.shape[1], rows.dtype, P.shape[1])
        for idx, row, ys, Ps in zip(r["core_index"], rows, r["core_y"], P, strict=True):
            self._append_core(idx, row, ys, Ps)
        self.alpha, self.qp, self.pending = r["alpha"], r["qp"], r["pending"]
        Q = _rebuilt_ktilde(self.kernel, rows, np.asarray(r["core_y"]), P, self.C, r["Q_rows"])
        self.Q = GrowingSquare(len(Q))
        self.Q.buf[: len(Q), : len(Q)] = Q
        self.Q.n = len(Q)
        self.n_iter, self.n_full, self.n_passes, self.evals, self.seconds0 = (
            r["n_iter"], r["n_full"], r["n_passes"], r["evals"], r["seconds"])
        self.rng.bit_generator.state = r["rng"]
        self.stage, self.validation, self.best = r.get("stage", 0), list(r.get("validation", ())), r.get("best")
        if r.get("cert_seed") is not None:
            (self._use_sample if self.stages is None else self._use_stages)(r["cert_seed"])
        self.recorder.history[:] = [dict(rec) for rec in r.get("history", ())]

    def _use_sample(self, seed):
        """The loop on the sample of :func:`certified_rows` drawn from ``seed``: the full passes
        measure it, the sampled passes draw from it."""
        self.cert_seed = int(seed)
        self.cert = certified_rows(self.n_rows, self.certify_rows, self.cert_seed)
        if self.sampler is not None:
            self.sampler = ExcludingCandidates(self.n_rows, self.sampler.s, rows=self.cert)

    def _use_stages(self, seed):
        """Validated growth from ``seed``: the rows in order of draw (:func:`staged_order`), the loop on
        the current sample (:meth:`_set_stage`)."""
        self.cert_seed = int(seed)
        self.order = staged_order(self.n_rows, self.stages[-1], self.cert_seed)
        self._set_stage(self.stage)

    def _set_stage(self, k):
        """The loop on sample ``k``: its rows the first ``stages[k]`` drawn (sorted), the sampled passes
        drawing from them and the full passes measuring them."""
        self.stage = int(k)
        self.cert = np.sort(self.order[: self.stages[k]])
        if self.sampler is not None:
            self.sampler = ExcludingCandidates(self.n_rows, self.sampler.s, rows=self.cert)

    def next_sample(self, S, y, P) -> bool:
        """After the loop converged on sample k (validated growth): the model's errors on the rows
        drawn after the sample's (as many as it has, or what is left; none after the last sample when
        it holds every row), then whether the loop goes on with sample k+1 (True) or stops (False) —
        the best sample's model restored when this one's errors exceed it (:data:`VALIDATION_Z`)."""
        k, top = self.stage, self.stages[self.stage]
        held = np.sort(self.order[top: top + min(top, len(self.order) - top)])
        if len(held):
            wrong = int(self._pass(replace(self._query(S, y, P), cand=held, top=1)).n_wrong)
            self.validation.append((top, wrong, len(held)))
            if self.best is not None and _worse(self.validation[-1], self.best["validation"]):
                self._restore(self.best)
                return False
            if self.best is None or wrong / len(held) <= self.best["validation"][1] / self.best["validation"][2]:
                self.best = {"validation": self.validation[-1], "n_core": len(self.core_index),
                             "alpha": self.alpha.copy(), "R2": self.R2, "obj": self.obj, "stage": k}
        if k + 1 >= len(self.stages):
            return False
        self._set_stage(k + 1)
        return True

    def _restore(self, best):
        """The model of an earlier sample: the core set cut to its rows then, its α, R² and ρ."""
        n = best["n_core"]
        del self.core_index[n:]
        self._rows.n = self._y.n = self._P.n = n
        self.Q.n = min(self.Q.n, n)
        self.alpha, self.R2, self.obj = best["alpha"].copy(), best["R2"], best["obj"]
        self.stage = best["stage"]

    def state(self):
        """The loop's whole state, for a checkpoint (K̃ as its number of rows: rebuilt on resume)."""
        S, y, P = self.core_arrays()
        return {"core_index": list(self.core_index), "core_rows": S.copy(), "core_y": y.copy(),
                "core_P": P.copy(), "alpha": self.alpha, "Q_rows": self.Q.n, "qp": self.qp,
                "pending": self.pending, "n_iter": self.n_iter, "n_full": self.n_full,
                "n_passes": self.n_passes, "evals": self.evals, "rng": self.rng.bit_generator.state,
                "history": [dict(rec) for rec in self.recorder.history], "cert_seed": self.cert_seed,
                "stage": self.stage, "validation": list(self.validation), "best": self.best,
                "seconds": self.seconds0 + time.perf_counter() - self.t0}

    def _buffers(self, d, dtype, q):
        self.core_index = []
        self._rows, self._y, self._P = GrowingRows(d, dtype), GrowingRows(1, np.float64), GrowingRows(q, np.float64)

    def _append_core(self, idx, row, ys, Ps):
        self.core_index.append(int(idx))
        self._rows.append(row)
        self._y.append(ys)
        self._P.append(np.asarray(Ps, dtype=np.float64).reshape(-1))

    def core_arrays(self):
        """The core set's rows, targets and projections as arrays ``(S, y, P)`` (views of the
        growing buffers: valid until the next row joins)."""
        return self._rows.view, self._y.view[:, 0], self._P.view

    def solve_meb(self, S, y, P):
        """The MEB dual on the core set (warm-started): α, ``obj = αᵀK̃α`` and ``R2 = κ̃ − obj``."""
        while self.Q.n < len(S):  # the new core rows' entries only (the Gram grows by a row and column each)
            n = self.Q.n + 1
            _grow(self.Q, self.kernel, S[:n], y[:n], P[:n], self.C)
            self.evals += n
        self.alpha, _ = self.qp.solve(self.Q.view, self.alpha, QP_TOL * self.kt, rel=QP_EPS * self.eps, kappa=self.kt)
        self.obj = float(self.qp.level)  # αᵀK̃α = αᵀg from the QP's kept gradient (no O(|S|²) product)
        self.R2 = self.kt - self.obj

    def furthest_point(self, S, y, P) -> Furthest:
        """The rows that may join the core set (a :class:`Furthest`): the furthest of the sampled
        candidates and pending rows, or when that lies within (1+ε)R, the furthest of all rows (a
        full pass, which refills the pending rows) — with up to ``points_per_pass − 1`` more of the
        furthest rows outside (1+ε)R that pass found. Whether to stop is :meth:`stop_rule`'s."""
        limit = (1 + self.eps) ** 2 * self.R2
        query = self._query(S, y, P)
        far = None
        if self.sampler is not None:
            far = self._sampled_pass(query, limit)
        if far is not None and far[0][4] > limit:
            return Furthest(far, full=False)
        return Furthest(self._full_pass(query, limit), full=True)  # full pass before stopping

    def _query(self, S, y, P) -> CVMQuery:
        """The distance query of the current core set and α (every row not in the core set, the
        furthest one back); each pass narrows it with ``dataclasses.replace(query, cand=…, top=…)``."""
        return CVMQuery(S=S, a=self.alpha * y, PS=P, aKa=self.obj, kappa=self.kt,
                        exclude=np.sort(np.asarray(self.core_index, dtype=np.int64)),
                        ids=np.asarray(self.core_index, dtype=np.int64))

    def _pass(self, query) -> CVMFurthest:
        """One distance pass over the partitions (counted, its kernel values too): the pass's total."""
        tot = CVMFurthest.combine(self.engine.run(cvm_furthest, query))
        self.n_passes += 1
        self.evals += tot.kernel_evals
        return tot

    def _sampled_pass(self, query: CVMQuery, limit):
        """The furthest of ``candidates`` random rows and the pending rows (dropping the pending rows
        now inside the ball), or None when the pass found no row."""
        cand = self.sampler.draw(self.rng, query.exclude)
        if len(self.pending):
            cand = np.union1d(cand, self.pending)
        found = _ranked(self._pass(replace(query, cand=cand, top=len(cand) if len(self.pending) else self.batch)))
        if len(self.pending):  # pending rows now inside the ball are dropped
            out_idx = found["index"][found["dist"] > limit]
            self.pending = self.pending[np.isin(self.pending, out_idx)]
        if not len(found["index"]):
            return None
        more = np.flatnonzero(found["dist"][1 : self.batch] > limit) + 1
        return [_pick(found, i) for i in (0, *more.tolist())]

    def _full_pass(self, query: CVMQuery, limit):
        """The furthest of all rows (of the sample with ``certify_rows``) outside (1+ε)R, up to
        ``points_per_pass``, keeping up to ``refill`` more rows outside the ball as pending; [] when
        no row lies outside."""
        top = self.batch + max(int(self.refill), 0) if self.sampler is not None else self.batch
        found = _ranked(self._pass(replace(query, cand=self.cert, top=top)))
        self.n_full += 1
        if not len(found["index"]) or found["dist"][0] <= limit:
            return []
        out = found["dist"] > limit
        join = np.flatnonzero(out)[: self.batch]
        self.pending = found["index"][join[-1] + 1 :][out[join[-1] + 1 :]][: max(int(self.refill), 0)]
        return [_pick(found, int(i)) for i in join]

    def add_to_core_set(self, fars):
        """The rows ``fars`` join the core set (weight 0, no longer pending); one more iteration."""
        for idx, rows, ys, Ps, _ in fars:
            self.pending = self.pending[self.pending != idx]
            self._append_core(idx, rows, ys, Ps)
        self.alpha = np.append(self.alpha, np.zeros(len(fars)))
        self.n_iter += 1

    def result(self, reason):
        S, y, P = self.core_arrays()
        return CVMResult(np.asarray(self.core_index, dtype=np.int64), S.copy(), y.copy(), P.copy(),
                         self.alpha, float(self.R2), self.obj, self.n_iter, self.n_full, self.n_passes, reason.value,
                         int(self.evals), self.seconds0 + time.perf_counter() - self.t0,
                         list(self.recorder.history), tuple(self.validation), self._sample_rows())

    def _sample_rows(self):
        """The rows of the sample the model was certified on (None: every row)."""
        if self.stages is not None:
            return int(self.stages[self.stage]) if self.stages[self.stage] < self.n_rows else None
        return None if self.cert is None else len(self.cert)


def _worse(new, best) -> bool:
    """Whether the validation errors ``new = (sample rows, errors, rows measured)`` exceed ``best``'s
    by more than :data:`VALIDATION_Z` standard errors of the difference of the two error rates."""
    p, q = new[1] / new[2], best[1] / best[2]
    return p - q > VALIDATION_Z * math.sqrt(p * (1 - p) / new[2] + q * (1 - q) / best[2])


def _ranked(total: CVMFurthest) -> dict:
    """The rows the partitions returned (a pass's total), merged and ordered furthest first (ties:
    lowest global row)."""
    found = merge_ranked(total.candidates(), CVM_CANDIDATE_FIELDS, by="dist")
    return {"index": np.zeros(0, dtype=np.int64), "dist": np.zeros(0)} if found is None else found


def _pick(found, i):
    return (int(found["index"][i]), np.array(found["rows"][i]), float(found["y"][i]), np.array(found["P"][i]),
            float(found["dist"][i]))


def _best(total: CVMFurthest, with_dist=False):
    """The furthest row over the partitions (a pass's total; ties: lowest global row)."""
    found = _ranked(total)
    if not len(found["index"]):
        return None
    out = _pick(found, 0)
    return out if with_dist else out[:4]


def mmda_feature(kernel, res: CVMResult):
    """The MMDA feature of a CVM run on the deflated kernel: ``u = w/‖w‖`` with
    ``w = (I − UUᵀ) Σ_s a_s φ(x_s)``, ``‖w‖² = aᵀ (K_SS − P_S P_Sᵀ) a``. Returns ``(S, a, PSa, norm)``
    (``PSa = P_Sᵀ a``: u's component along each earlier feature is removed), or None when w = 0."""
    S, a, P = res.core_rows, res.a, res.core_P
    K = kernel(S, S).astype(np.float64)
    if P.shape[1]:
        K = K - P @ P.T
    w2 = float(a @ K @ a)
    if not w2 > 1e-14 * max(float(np.abs(a).sum()) ** 2, 1e-300):
        return None
    return S, a, P.T @ a, float(np.sqrt(w2))
