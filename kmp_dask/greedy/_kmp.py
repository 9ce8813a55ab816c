"""The kernel matching pursuit driver (Vincent & Bengio; stochastic variant: Popovici et al.).

The loop is :meth:`Pursuit.run`; it reads as the paper's algorithm 1::

    draw the candidates                           (all rows, or s random ones: Popovici et al.)
    one pass scores them against the residual     kmp_score: ⟨d,R⟩, ‖d‖² (and dᵀB for prefit)
    stop rule                                     n_basis, tol, early stopping, converged
    pick the best (next best if dependent)        strategy.score → commit → Cholesky append
    append it to the basis                        kmp_column_stats: Bᵀd, ‖d‖², dᵀR, dᵀY
    update the coefficients                       strategy.add (basic / backfit / prefit / loss)

The driver holds only what is small — the atoms (rows, d), the Cholesky factor of the basis
Gram (n, n), the coefficients (n, m), the candidate rows (s, d), the RNG — and talks to the data
through an *engine*: ``engine.run(query, msg, effects)`` returns per-partition results in
partition order. Every state change of the partitions is an *effect* the engine journals
(``blockops/_journal.py``), so a partition lost with its worker is rebuilt by replaying the
journal; this module holds no restore code. It never imports dask. A checkpoint
(``_checkpoint.py``) is the driver's own state, saved by one line of the loop; resuming replays
the saved journal on a new engine and continues the loop where it was.

One iteration = two passes: the scoring pass (which also applies the previous iteration's
accepted column and residual update, and returns the rows of the next candidates, drawn
beforehand from the seeded generator) and the commit pass (computes the chosen column, kept
pending, and returns the products the Cholesky append needs). Other losses add a bounded
line search (and, in ``backfit`` mode, Newton refits on a geometric schedule). The pass count
is asserted in ``tests/greedy`` with the engine's call counter; docs/engine.md has the cost
argument.

Intercept: squared loss, ``basic`` → targets centred; ``backfit``/``prefit`` → a column of ones
refitted with every atom (exact least squares with an intercept, not counted in ``n_basis``);
other losses → the constant function is a dictionary atom scored by ``(Σg)²/N``.
Multi-output targets share one basis: scores are summed over outputs (coupled selection).
Rows already in the basis are never selected again, except in ``basic_reselect`` (Vincent & Bengio's
basic pursuit: a chosen atom may be chosen again and its coefficients are summed).
"""

from __future__ import annotations

import contextlib
import contextvars
import pickle
import time
import warnings

import numpy as np

from ..blockops import (
    BIAS_ATOM,
    FACTORED_EXPONENT_MAX_64,
    ColumnStats,
    Engine,
    HeldOutQuery,
    KMPSetup,
    ScoreQuery,
    ScoreStats,
    StatsQuery,
    ValQuery,
    held_out_rows,
    kmp_column_stats,
    kmp_effects,
    kmp_score,
    kmp_stats,
)
from ..blockops._safe_pickle import restricted_loads
from ..exceptions import DegenerateFitWarning, PrematureStopWarning, user_stacklevel
from ..kernels import kernel_spec
from ..linalg import IncrementalCholesky, one_blas_thread
from ._candidates import CandidateSet, gather_fetched
from ._checkpoint import NO_CHECKPOINT
from ._configs import config_given
from ._kmp_blocks import block_step, open_batch
from ._kmp_config import FIT_MODES, PursuitConfig
from ._loop import Iteration, run_loop
from ._record import Recorder
from ._result import PursuitResult, StopReason, make_result, prefix_coef
from ._sampling import AllCandidates, RandomCandidates, validation_eligibility
from ._strategies import make_strategy

__all__ = ["kernel_matching_pursuit", "FIT_MODES", "BASIS_COLUMNS", "Pursuit", "RESYNC_EVERY", "resolve_basis_columns",
           "read_held_out_rows", "auto_n_basis"]


def read_held_out_rows(engine, fraction: float, split_seed: int):
    """``(X, y, w)`` of the rows a split holds out (hash ``u < fraction`` of the global row index, as
    the validation split), gathered from the engine's partitions in partition order; ``w`` None
    when unweighted. One query pass, no effect (a ``probability=True`` fit calibrates on them)."""
    parts = engine.run(held_out_rows, HeldOutQuery(float(fraction), int(split_seed)))
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    w = None if parts[0][2] is None else np.concatenate([p[2] for p in parts])
    return X, y, w


RESYNC_EVERY = 32
"""Rank-one residual updates between two full recomputations ``R = Y − Bα`` (drift bound)."""

_DEPENDENT = (
    "kernel matching pursuit: the column of candidate row {idx} is numerically dependent on the "
    "current basis (duplicate or near-duplicate rows); it is skipped."
)
_PREMATURE = (
    "Kernel matching pursuit stopped after {n} basis functions: all {k} best candidates were "
    "linearly dependent on the basis. Increase `ridge` or reduce `gamma` if more are needed."
)
_NO_BASIS = (
    "Kernel matching pursuit selected no basis function (stop_reason={reason!r}): {why} "
    "The model is a constant (the mean target; for a classifier, the majority class). {fix}"
)
_CAUSES = {  # why the candidates are useless, and what to change
    "duplicates": (
        "the {s} candidate rows drawn are all identical (duplicate rows in the data), so every kernel column "
        "is the same constant function and explains nothing beyond the intercept.",
        "Remove the duplicate rows, or check that X holds the features you meant: changing `gamma` or "
        "`ridge` cannot help when every row is the same."),
    "constant": (
        "the kernel is numerically constant on the data: between {m} sampled candidate rows, k(x, z) varies "
        "by only {spread:.2g} (relative) for {kernels}, so every kernel column is the constant function.",
        "{gamma_hint}"),
    "dependent": (
        "all {k} best candidates were numerically dependent on the basis (their kernel columns are "
        "near-duplicates of the constant function or of each other).",
        "Drop duplicate rows (np.unique(X, axis=0)), make `gamma` larger if the kernel is almost constant "
        "on the scale of the features, or increase `ridge` (now {ridge:g} per training row; e.g. 1e-6) "
        "to accept near-dependent columns."),
    "uncorrelated": (
        "no candidate's kernel column correlates with the targets beyond the intercept "
        "(best score {best:.3g}, below 1e-13 of the initial residual {rss0:.3g}).",
        "Check the data for duplicate rows with conflicting targets, try another `gamma` (e.g. 1/median "
        "squared distance between rows, after standardising X), lower `ridge` (now {ridge:g} per training "
        "row), or use candidates='all'."),
}
_CONSTANT_SPREAD = 1e-4
"""Relative spread of ``k(z_i, z_j)`` over sampled candidate rows below which a kernel counts as
numerically constant (only consulted when a fit ends with no basis function)."""


BASIS_COLUMNS = ("auto", "stored", "recomputed")


def resolve_basis_columns(basis_columns, engine: Engine, n_rows: int, n_basis: int, dtype, m: int) -> str:
    """``"stored"`` or ``"recomputed"`` for ``basis_columns="auto"`` (others pass through).

    Stored when the columns (``n_rows × (n_basis + 2) × itemsize``) and the residual state
    (``n_rows × m × 24`` bytes: targets, residual, fit) fit in what the engine reports as free
    for partition state (``engine.free_state_bytes()``: the workers' budgets minus the resident
    partitions; ``None`` = no limit known), else recomputed: past that point a stored cache
    would be streamed from local scratch on every pass (docs/engine.md "Large N" has the costs).
    """
    if basis_columns not in BASIS_COLUMNS:
        raise ValueError(f"basis_columns must be one of {BASIS_COLUMNS}; got {basis_columns!r}")
    if basis_columns != "auto":
        return basis_columns
    probe = getattr(engine, "free_state_bytes", None)
    free = None if probe is None else probe()
    need = int(n_rows) * ((int(n_basis) + 2) * np.dtype(dtype).itemsize + 24 * int(m))
    return "stored" if free is None or need <= free else "recomputed"


FACTOR_CAPACITY = 4096
"""Atoms of Cholesky factor reserved when the pursuit starts (more: the factor doubles as it fills —
the same values; a cap of ``n_basis="auto"`` may be far larger than the size reached)."""

AUTO_FACTOR_SHARE = 0.25
"""``n_basis="auto"``: the Cholesky factor (``8 · n²`` bytes in the driver) may take at most this
share of the memory available when the fit starts."""

AUTO_COLUMNS_SHARE = 0.9
"""``n_basis="auto"``: the stored basis columns may take at most this share of what the engine
reports as free for partition state (:func:`resolve_basis_columns`), so they stay stored."""


def auto_n_basis(engine: Engine, n_rows: int, n_kernels: int, dtype, m: int) -> tuple[int, str]:
    """The cap of ``n_basis="auto"`` and what set it (``"rows"`` or ``"memory"``).

    ``"rows"``: one atom per row and kernel (no basis can be larger). ``"memory"``: the largest
    basis whose columns (``n_rows × (n + 2)`` values, plus the residual state) fit in
    :data:`AUTO_COLUMNS_SHARE` of the engine's free partition memory (``free_state_bytes``; no
    limit when it reports None) and whose factor fits in :data:`AUTO_FACTOR_SHARE` of the memory
    available to this process. The memory cap is read from the machine when the fit starts, so it
    can differ between machines; the size reached differs only when the cap binds (the fit then
    warns when the held-out score was still improving).
    """
    cap, why = max(1, int(n_rows) * int(n_kernels)), "rows"
    probe = getattr(engine, "free_state_bytes", None)
    free = None if probe is None else probe()
    item = np.dtype(dtype).itemsize
    if free is not None:
        cols = int(AUTO_COLUMNS_SHARE * free - 24 * int(m) * int(n_rows)) // max(1, int(n_rows) * item) - 2
        if cols < cap:
            cap, why = max(1, cols), "memory"
    factor = factor_cap()
    if factor is not None and factor < cap:
        cap, why = max(1, factor), "memory"
    return cap, why


def factor_cap() -> int | None:
    """The most atoms whose Cholesky factor (``8 · n²`` bytes) fits in :data:`AUTO_FACTOR_SHARE` of the
    memory available to this process now; None when psutil cannot say."""
    try:
        import psutil

        return int((AUTO_FACTOR_SHARE * psutil.virtual_memory().available / 8) ** 0.5)
    except Exception:  # no psutil: no driver-side limit known
        return None


def _total(results, key):
    return np.add.reduce([r[key] for r in results])


def _format_bytes(n: int) -> str:
    """``n`` bytes for a message (GiB / MiB / kiB / B); the driver layer imports no dask."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("kiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _check_factor_fits(n_basis: int, requested: int) -> None:
    """Refuse a Cholesky factor (``n_basis²`` float64 in the driver) larger than the memory available."""
    need = 8 * int(n_basis) ** 2
    try:
        import psutil

        free = int(psutil.virtual_memory().available)
    except Exception:  # no psutil: let numpy's own MemoryError speak
        return
    if need > free:
        capped = f" (capped at {n_basis}: one atom per training row and kernel)" if requested != n_basis else ""
        raise ValueError(
            f"n_basis={requested}{capped} needs a {_format_bytes(need)} Cholesky factor in this process "
            "(n_basis² × 8 bytes; "
            f"backfit / prefit / refit keep it), more than the {_format_bytes(free)} of memory available. "
            "Pass a smaller "
            f"n_basis (at most about {int((free / 8) ** 0.5 * 0.5)} here), or fit_mode='basic' (no factor)."
        )


def _row_totals(stats) -> tuple[int, int, float]:
    """The statistics pass's training rows, validation rows and training weight (their number, or
    the sum of their sample weights); refuses a fit with no training row or no positive weight."""
    n_train = int(sum(s["n_train"] for s in stats))
    n_val = int(sum(s["n_val"] for s in stats))
    if n_train == 0:
        raise ValueError("no training rows: validation_fraction leaves nothing to fit")
    w_train = float(sum(s["w_sum"] for s in stats)) if "w_sum" in stats[0] else n_train
    if not w_train > 0:
        raise ValueError("sample_weight is zero on every training row (after the validation split): "
                         "nothing to fit. "
                         "Give some rows a positive weight.")
    return n_train, n_val, w_train


class Pursuit:
    """One KMP run: the model being built and the passes that build it (see the module doc)."""

    def __init__(self, engine: Engine, config: PursuitConfig, *, strategy=None, callback=None, checkpoint=None):
        """``config``: the run's :class:`~kmp_dask.greedy._kmp_config.PursuitConfig`; ``strategy``: its
        fit mode's (default :func:`~._strategies.make_strategy` of ``config``)."""
        c = config
        strategy = make_strategy(c) if strategy is None else strategy
        self.engine, self.strategy = engine, strategy
        self.checkpoint = checkpoint or NO_CHECKPOINT
        self.error_threshold = c.error_threshold
        self.kernels, self.n_features, self.dtype = list(c.kernels), c.n_features, c.dtype
        self.n_basis, self.tol, self.max_tries = c.n_basis, c.tol, c.max_tries
        stats = engine.run(kmp_stats, StatsQuery(c.targets, c.validation_fraction, c.split_seed))
        self.n_train, self.n_val, w_train = _row_totals(stats)
        # A basis holds at most one atom per (training row, kernel) plus the bias: cap n_basis there
        # before anything is sized by it (the n_basis² Cholesky factor, the workers' columns). The
        # margin keeps the loop reaching the iteration that finds the dictionary exhausted, so the
        # stop reason is the one an uncapped run gives.
        requested, n_basis = c.n_basis, min(int(c.n_basis), self.n_train * len(self.kernels) + 3)
        self.n_basis = n_basis
        if strategy.uses_chol:
            _check_factor_fits(n_basis, requested)
        self.w_train = w_train
        m = len(stats[0]["y_sum"])
        centre = c.fit_intercept and c.loss is None and not strategy.intercept_column
        self.offset = _total(stats, "y_sum") / self.w_train if centre else np.zeros(m)
        self.bias_in_dictionary = c.fit_intercept and c.loss is not None
        self.bias_column = c.fit_intercept and strategy.intercept_column
        self.lam = float(c.ridge) * self.w_train
        eligible = validation_eligibility(c.validation_fraction, c.split_seed)
        self.atoms_per_pass = int(c.atoms_per_pass)  # k > 1: k·s candidates a pass (Popovici's s per atom)
        self.rank_only_scores = bool(c.rank_only_scores)  # factored RBF scores rank the candidates
        self.sampler = (AllCandidates(c.n_rows, eligible) if isinstance(c.candidates, str)
                        else RandomCandidates(c.n_rows, int(c.candidates) * self.atoms_per_pass, eligible,
                                              self.n_train))
        val = None
        if self.n_val > 0 and c.validation_fraction > 0:
            val = ValQuery("accuracy" if c.targets["kind"] == "ovr" else "loss", self.offset, c.targets.get("classes"))
        self.val_query = val
        self.recorder = Recorder(val, c.loss is not None, c.n_iter_no_change, callback=callback)
        self.basis_columns = resolve_basis_columns(c.basis_columns, engine, c.n_rows, n_basis, c.dtype, m)
        self.setup = KMPSetup(tuple(self.kernels), c.loss, c.targets, self.offset, c.validation_fraction, c.split_seed,
                              n_basis + 2, self.basis_columns)
        self._y = stats  # kept for the intercept-only residual norm
        # the model
        self.atoms: list = []
        self.coef = np.zeros((0, m))
        # reserved up front up to FACTOR_CAPACITY atoms, grown by doubling past it (n_basis="auto"'s cap may be large)
        capacity = max(min(n_basis, FACTOR_CAPACITY), 1)
        self.chol = IncrementalCholesky(capacity=capacity, ridge=self.lam) if strategy.uses_chol else None
        self.ytd: list = []
        self.bias_pos = None
        self.excluded: set[int] = set()
        # effects queued for the next pass
        self._accept, self._residual, self._moves = False, None, 0
        self._pend = None  # an atom whose column the next pass computes (strategies without a commit pass)
        self._batch: list = []  # atoms admitted by a block (atoms_per_pass > 1): the next pass adds their columns
        self._scored = None  # (corr, sqn) totals of the last scoring pass

    # -- checkpoints: everything but the engine, the callback (the recorder's) and the checkpoint itself --
    _DETACHED = ("engine", "checkpoint", "deadline", "_t", "_cands", "_score")

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in self._DETACHED}

    def __setstate__(self, state):
        state.setdefault("w_train", state["n_train"])  # checkpoints written before sample weights
        state.setdefault("basis_columns", "stored")  # checkpoints written before the large-N mode
        state.setdefault("_pend", None)  # checkpoints written before basic pursuit lost its commit pass
        state.setdefault("_scored", None)
        state.setdefault("atoms_per_pass", 1)
        state.setdefault("_batch", [])
        self.__dict__.update(state, engine=None, checkpoint=NO_CHECKPOINT)

    def attach(self, engine: Engine, callback, checkpoint):
        """A pursuit restored from a checkpoint talks to ``engine`` (its partitions replayed); its
        recorder hands its records to ``callback``."""
        self.engine, self.checkpoint = engine, checkpoint or NO_CHECKPOINT
        self.recorder.attach(callback)
        return self

    def ytd_rows(self) -> np.ndarray:
        """``np.asarray(self.ytd)`` (n, m): the rows ``dᵀY`` of the basis, copied once each into a
        buffer that doubles when full (``ytd`` is only appended to) instead of converting the whole
        list at every atom — the same values, C-ordered as ``np.asarray`` gives them."""
        n, buf = len(self.ytd), self.__dict__.get("_ytd_buf")
        if not n:
            return np.asarray(self.ytd)
        if buf is None or len(buf) < n or buf.shape[1:] != np.shape(self.ytd[0]):
            buf = np.empty((max(2 * n, 16),) + np.shape(self.ytd[0]))
            self._ytd_buf, self._ytd_n = buf, 0
        for i in range(self._ytd_n, n):
            buf[i] = self.ytd[i]
        self._ytd_n = n
        return buf[:n]

    # -- talking to the partitions ----------------------------------------------------------------
    def accept(self, w, beta):
        """The pending column joins; the next pass moves the residual by (d − Bw)βᵀ."""
        self._accept, self._residual = True, ("move", w, beta)

    def accept_only(self):
        """The pending column joins with coefficient 0; nothing moves."""
        self._accept, self._residual = True, None

    def resync(self):
        """The next pass recomputes the residual from ``self.coef`` (no drift)."""
        self._residual = "set"

    def send(self, query, msg=None, effects=(), step=False):
        """One pass: the queued effects, then ``effects``, then ``query`` on every partition."""
        queued = [] if self._pend is None else [kmp_effects.pend(self._pend)]
        queued += [kmp_effects.accept()] if self._accept else []
        for atom in self._batch:  # several atoms per pass: each admitted column, in order
            queued += [kmp_effects.pend(atom), kmp_effects.accept()]
        r = self._residual if self._residual is not None or not step else "set"
        if isinstance(r, tuple) and self._moves >= RESYNC_EVERY:
            r = "set"  # bound the drift of the rank-one updates
        if r == "set":
            queued.append(kmp_effects.set_coef(self.coef))
            self._moves = 0
        elif r is not None:
            queued.append(kmp_effects.move(r[1], r[2], self.coef))
            self._moves += 1
        self._accept, self._residual, self._pend, self._batch = False, None, None, []
        return self.engine.run(query, msg, tuple(queued) + tuple(effects))

    def score(self, cands, fetch):
        """The scoring pass (with the previous iteration's acceptance and residual update)."""
        rank = self.__dict__.get("rank_only_scores", False)  # (a checkpoint written before it: exact scores)
        q = ScoreQuery(None if cands is None else cands.Z, None if cands is None else cands.Z_sq,
                       self.strategy.want_cross and bool(self.atoms), fetch, self.val_query, self.error_threshold,
                       factored=self.atoms_per_pass > 1 or rank,  # scores only rank; the kept are recomputed exactly
                       factored_limit=FACTORED_EXPONENT_MAX_64 if rank else None)
        res = ScoreStats.combine(self.send(kmp_score, q, step=True))
        self.recorder.record_pass(res, len(self.atoms), self.coef)
        self.recorder.emit_last()
        return res

    def commit(self, atom) -> ColumnStats:
        """Compute ``atom``'s column on the partitions (kept pending); return its products (the pass's total)."""
        # Bᵀd only for a Cholesky factor (backfit, prefit): basic pursuit never reads it
        return ColumnStats.combine(
            self.send(kmp_column_stats, None if self.chol is not None else False, (kmp_effects.pend(atom),)))

    # -- the algorithm ----------------------------------------------------------------------------
    def run(self, rng, resume_at=None) -> PursuitResult:
        """The pursuit; ``resume_at=(t, cands)`` continues a checkpoint saved after iteration t − 1.

        One loop, :func:`~kmp_dask.greedy._loop.run_loop` (which also saves the checkpoint every
        ``every`` iterations, if asked), over one of two kinds of step: one atom a pass
        (:meth:`step`) or ``atoms_per_pass`` atoms a batch (:func:`~._kmp_blocks.block_step`)."""
        self._t, self._cands = resume_at if resume_at is not None else (0, self._begin(rng))
        self._score = None
        if self.atoms_per_pass > 1:
            open_batch(self)
        stop = run_loop(self, rng, self.checkpoint)
        cands, score = self._cands, self._score
        self._finish()
        if stop in (StopReason.CONVERGED, StopReason.LINEAR_DEPENDENCE) and not self._n_row_atoms():
            stop = no_basis(self, stop, cands, score)
        return self._result(stop)

    def step(self, rng):
        """One iteration (the loop contract's step): the scoring pass, the stop checks, the best
        admissible candidate joins the basis and the coefficients are updated; its
        :class:`~kmp_dask.greedy._loop.Iteration` (the record stays the recorder's: the next
        scoring pass completes it), or why the loop stops."""
        if self.atoms_per_pass > 1:
            return block_step(self, rng)
        t, cands = self._t, self._cands
        if t >= self.n_basis:
            return StopReason.N_BASIS
        t0 = time.perf_counter()
        res, idx_next, self._score, stop = self.scoring_pass(cands, rng)  # score all candidates
        if stop is not None:
            return stop
        picked = self._pick(self._score, cands)                   # best admissible candidate
        if picked is None:
            return StopReason.LINEAR_DEPENDENCE
        j, atom, col, w = picked
        self._append(atom)                                        # basis ← basis ∪ {d_j}
        self.strategy.add(self, col, w, t)                        # coefficients
        self.recorder.new_iteration(t, atom, self._score, j)
        if idx_next is not None:
            self._cands = self._candidates(res, idx_next)
        self.recorder.history[-1]["seconds"] = time.perf_counter() - t0
        self._t = t + 1
        return Iteration(None, t, last=t + 1 == self.n_basis, cands=self._cands)

    def scoring_pass(self, cands, rng):
        """One pass that scores ``cands`` (and fetches the next draw), then the stop checks:
        ``(res, idx_next, score, stop)``, ``stop`` None to go on (shared with the block loop)."""
        idx_next = None if self.sampler.exhaustive else self.sampler.draw(rng, self.excluded)
        res = self.score(cands, idx_next)
        stop = self._stop_rule(res)
        if stop is not None:
            return res, idx_next, None, stop
        score = self._scores(res, cands)
        if score is None:
            return res, idx_next, None, StopReason.EXHAUSTED
        if score.max() <= 1e-13 * max(self.rss0, 1e-300):
            return res, idx_next, score, StopReason.CONVERGED
        return res, idx_next, score, None

    def _begin(self, rng) -> CandidateSet:
        """Set up the partitions and draw the first candidates (and the intercept column)."""
        idx = self.sampler.draw(rng, self.excluded)
        res = ScoreStats.combine(self.send(kmp_score, ScoreQuery(fetch=idx), (kmp_effects.init(self.setup),)))
        cands = self._candidates(res, idx)
        self.rss0 = self._initial_rss(res)
        if self.bias_column:
            self._add_bias_column()
        return cands

    def _candidates(self, res, idx) -> CandidateSet:
        """The fetched candidate rows; rows of sample weight 0 are never selected (not in the data)."""
        for zero_weight in res.zero_weight:
            if zero_weight is not None:
                self.excluded.update(zero_weight.tolist())
        return CandidateSet(idx, gather_fetched(res.fetched, idx, self.n_features, self.dtype), len(self.kernels))

    def _n_row_atoms(self) -> int:
        return sum(not a.is_bias for a in self.atoms)

    def _initial_rss(self, res) -> float:
        if self.bias_column:  # measure progress from the intercept-only model, as with centring
            ys = _total(self._y, "y_sum")
            return float((_total(self._y, "y_sqsum") - ys * ys / self.w_train).sum())
        return float(res.rss.sum())

    def _add_bias_column(self):
        """Squared loss with refits: the column of ones is in the model from the start."""
        col = self.commit(BIAS_ATOM)
        self.chol.append(col.cross, col.sqn)
        self.ytd.append(col.ytd)
        self.coef = self.chol.solve(self.ytd_rows())
        self._append(BIAS_ATOM)
        self._accept = True  # the next pass recomputes the residual in full

    def _stop_rule(self, res):
        if self.recorder.no_improvement():
            return StopReason.EARLY_STOPPING
        deadline = getattr(self, "deadline", None)
        if deadline is not None and time.monotonic() >= deadline:
            return StopReason.MAX_TIME
        rss = self.recorder.last_rss
        if self.tol is not None and self.rss0 > 0 and np.sqrt(rss / self.rss0) <= self.tol:
            return StopReason.TOL
        return None

    def _scores(self, res, cands):
        """Scores of every candidate (−inf: not admissible), or None if none is left."""
        cross = res.cross if self.strategy.want_cross and self.atoms else None
        corr, sqn = res.corr, res.sqn
        self._scored = (corr, sqn)
        score = self.strategy.score(corr, sqn, cross, self.chol, self.lam)
        cands.mask_rows(score, self.excluded)
        if self.bias_in_dictionary:  # the constant function, scored like any atom: (Σ g)² / N
            rsum = res.rsum
            score = np.append(score, float(rsum @ rsum) / self.w_train if self.bias_pos is None else -np.inf)
        if len(score) == 0 or not np.isfinite(score).any():
            return None
        return score

    def _pick(self, score, cands):
        """Commit candidates in score order until one is independent of the basis (≤ max_tries)."""
        warned = False
        for j in np.argsort(-score, kind="stable")[: self.max_tries]:
            if not np.isfinite(score[j]):
                break
            atom = cands.atom(int(j))
            col = self.commit(atom) if self.strategy.needs_commit or atom.is_bias else self._scored_column(atom, int(j))
            ok, w = self.strategy.admit(col, self.chol)
            if ok:
                return int(j), atom, col, w
            self._pend = None  # not this one
            if not atom.is_bias:
                self.excluded.add(atom.index)
            if not warned:
                warnings.warn(_DEPENDENT.format(idx=atom.index), PrematureStopWarning, stacklevel=user_stacklevel())
                warned = True
        n_atoms = self._n_row_atoms()
        if n_atoms:  # with no basis function, run() names the reason (DegenerateFitWarning)
            warnings.warn(_PREMATURE.format(n=n_atoms, k=self.max_tries), PrematureStopWarning,
                          stacklevel=user_stacklevel())
        return None

    def _scored_column(self, atom, j):
        """The chosen candidate's ``‖d‖²`` and ``dᵀR`` from the scoring pass itself (basic
        pursuit: nothing else is needed), its column computed by the next pass's effects — one
        pass per atom instead of two (a streamed partition is read once per atom)."""
        corr, sqn = self._scored
        self._pend = atom
        return ColumnStats(float(sqn[j]), np.array(corr[j], dtype=np.float64))

    def _append(self, atom):
        if atom.is_bias:
            self.bias_pos = len(self.atoms)
        else:
            self.excluded.add(atom.index)
            atom = type(atom)(np.array(atom.z), atom.kernel, atom.index)
        self.atoms.append(atom)

    def _finish(self):
        """Final refit (other losses) and a last pass so the record describes the final model."""
        accept_queued = self._accept or self._pend is not None or bool(self._batch)
        if isinstance(self._residual, tuple):
            self._residual = None  # superseded by the refit / the full recomputation below
        refitted = self.strategy.finish(self)
        if self.atoms and (accept_queued or refitted):
            self.resync()
            self.score(None, None)

    def _result(self, stop) -> PursuitResult:
        n_keep, coef, loop_stop = len(self.atoms), self.coef, stop
        snap = self.recorder.best_snapshot()
        cut = snap is not None and snap[0] < len(self.atoms)
        if cut:  # back to the best held-out size (a time budget keeps its own stop reason)
            stop, n_keep = (stop if stop == StopReason.MAX_TIME else StopReason.EARLY_STOPPING), snap[0]
            coef = (snap[1] if self.chol is None or self.setup.loss is not None
                    else prefix_coef(self.chol.L, self.ytd, n_keep))
        history = self.recorder.history
        if cut or stop == StopReason.EARLY_STOPPING:
            history = history[: n_keep - int(self.bias_column)]
        m = self.coef.shape[1]
        result = make_result(self.atoms[:n_keep], np.asarray(coef[:n_keep]).reshape(n_keep, m), self.offset, stop,
                             history, data=(self.n_train, self.n_val, self.n_features, self.dtype),
                             kernels=self.kernels, prefix=self._prefix_data())
        result.loop_stop = loop_stop
        if self.recorder.val_scores:  # the whole held-out path, in row atoms (the intercept column not counted)
            result.val_sizes = np.asarray(self.recorder.val_sizes, dtype=np.int64) - int(self.bias_column)
            result.val_scores = np.asarray(self.recorder.val_scores, dtype=np.float64)
            result.val_ses = np.asarray(self.recorder.val_ses, dtype=np.float64)
        return result

    def _prefix_data(self):
        """The Gram factor and ``BᵀY`` rows that give every prefix model (squared loss, refits)."""
        if self.chol is None or self.setup.loss is not None or not self.ytd:
            return None, None
        return self.chol.L, np.array(self.ytd_rows())


def no_basis(p: Pursuit, stop, cands, score):
    """A pursuit ``p`` ends with no basis function: name why (``stop_reason``) and what to change.

    Looks only at what the driver holds: the candidate rows (identical rows → no usable
    candidate; a kernel constant on them → constant kernel). Nothing here changes the model.
    """
    y_sq = float(_total(p._y, "y_sqsum").sum())
    if stop == StopReason.CONVERGED and not p.rss0 > 1e-12 * y_sq:
        return stop  # the targets are constant: the constant model is the right answer
    Z = np.asarray(cands.Z, dtype=np.float64)
    sample = Z[np.unique(np.linspace(0, len(Z) - 1, min(len(Z), 64)).astype(np.intp))] if len(Z) else Z
    info = {"s": len(Z), "m": len(sample), "k": p.max_tries, "rss0": p.rss0,
            "ridge": p.lam / max(p.w_train, 1e-300),
            "best": float(np.max(score)) if score is not None and len(score) else 0.0}
    if len(Z) and np.all(Z == Z[0]):
        cause = "duplicates"
    elif len(sample) > 1 and _kernel_is_constant(p, sample, info):
        cause = "constant"
    else:
        cause = None
    if stop == StopReason.LINEAR_DEPENDENCE:  # the stop reason keeps the mechanism; the message the cause
        reason, why, fix = stop, _CAUSES["dependent"][0], _CAUSES[cause or "dependent"][1]
        if cause:
            why = why[:-1] + ": " + _CAUSES[cause][0]
    else:
        reason = {"duplicates": StopReason.NO_USABLE_CANDIDATE, "constant": StopReason.CONSTANT_KERNEL,
                  None: StopReason.NO_USABLE_CANDIDATE}[cause]
        why, fix = _CAUSES[cause or "uncorrelated"]
    warnings.warn(_NO_BASIS.format(reason=reason.value, why=why.format(**info), fix=fix.format(**info)),
                  DegenerateFitWarning, stacklevel=user_stacklevel())
    return reason

def _kernel_is_constant(p: Pursuit, sample, info) -> bool:
    """Whether every kernel of the dictionary is numerically constant on ``sample`` rows."""
    spreads, hints = [], []
    for kernel in p.kernels:
        K = np.asarray(kernel(sample, sample), dtype=np.float64)
        spreads.append(float(np.ptp(K)) / max(float(np.abs(K).max()), 1e-300))
        hints.append(_gamma_hint(kernel, sample))
    if max(spreads) > _CONSTANT_SPREAD:
        return False
    info["spread"] = max(spreads)
    info["kernels"] = ", ".join(repr(k) for k in p.kernels)
    info["gamma_hint"] = " ".join(dict.fromkeys(hints))
    return True


def _gamma_hint(kernel, sample) -> str:
    """What to change for a kernel that is constant on ``sample``: a larger ``gamma`` to try."""
    from scipy.spatial.distance import pdist

    gamma = kernel.get("gamma")
    if gamma is None:
        return f"Change the parameters of {kernel!r} (its values do not vary over the data)."
    distance = kernel_spec(kernel).distance
    if distance is None:
        return f"Increase `gamma` (now {gamma:g} for the {kernel.name!r} kernel) or standardise X."
    metric, what = distance
    d = pdist(sample, metric)
    d = d[d > 0]
    scale = float(np.median(d)) if len(d) else 0.0
    if scale <= 0:
        return f"Increase `gamma` (now {gamma:g}) or standardise X."
    return (f"Increase `gamma` (now {gamma:g}): gamma = 1 / median {what} between rows = {1 / scale:.3g} is a "
            f"good start (here gamma × median {what} = {gamma * scale:.2g}); or standardise X and use gamma=None.")


def _restored(engine: Engine, callback, checkpoint, rng):
    """The pursuit of a checkpoint on ``engine`` (its partitions replayed), and where it resumes."""
    state, t, cands = checkpoint.restore(engine, rng)
    return state.attach(engine, callback, checkpoint), (t + 1, cands)


class PursuitExtension:
    """The extend hook: a pursuit kept at the end of its loop, continued by a later fit to more atoms.

    A pursuit is nested — the first ``n`` atoms of an ``N``-atom run are the ``n``-atom run — so
    a fit to ``N`` atoms may start where the ``n``-atom fit's loop ended instead of from atom 1
    (``KMPClassifierCV``'s adaptive cap). It is an in-memory checkpoint taken once, after the
    loop's last iteration and before the final pass: a copy of the driver's state (the factor,
    atoms, coefficients, candidates and RNG, as a checkpoint holds) and the engine's journal, which
    a later fit replays on its fresh partitions (their columns and residual recomputed: n kernel
    columns, much less than the n scoring passes). The later fit must have the same data,
    parameters and seed except ``n_basis``; the loop then goes on with the larger cap and ends
    with the model (and history) of a fit run to it from scratch. A pursuit that stopped before
    its cap keeps nothing (``saved`` None): the next fit starts from scratch.

    Use: ``with extending(hook): kernel_matching_pursuit(...)`` (or an estimator's ``fit``).
    """

    result = None  # never a finished fit: kernel_matching_pursuit's "complete checkpoint" branch is skipped

    def __init__(self):
        self.saved = None
        self.replays = 0  #: how many fits continued a kept state (for tests and benchmarks)

    def maybe_save(self, loop, t: int, rng, *, cands=None, first: int | None = None, last: bool = False) -> None:
        if last:  # the loop's last iteration: keep a copy (the final pass changes it)
            state = pickle.dumps((loop, cands), protocol=pickle.HIGHEST_PROTOCOL)  # ~10× faster than deepcopy
            self.saved = {"state": state, "t": int(t), "rng": rng.bit_generator.state,
                          "journal": tuple(loop.engine.journal)}

    def save_result(self, result) -> None:
        pass

    def restore(self, engine: Engine, rng):
        """As :meth:`Checkpoint.restore`, from memory; the state is handed over (not kept)."""
        s, self.saved = self.saved, None
        pursuit, cands = restricted_loads(s["state"])  # written above, read as a checkpoint is (safe_pickle)
        engine.run(None, None, s["journal"])
        rng.bit_generator.state = s["rng"]
        self.replays += 1
        return pursuit, s["t"], cands


def _extend_to(pursuit: Pursuit, n_basis: int) -> None:
    """A restored ``pursuit``'s loop goes on to ``n_basis`` atoms (capped as in ``Pursuit.__init__``;
    the factor and the partitions' columns grow as they fill). Resuming a checkpoint (same
    ``n_basis``, checked by its header) changes nothing."""
    n = min(int(n_basis), pursuit.n_train * len(pursuit.kernels) + 3)
    if n > pursuit.n_basis and pursuit.chol is not None:
        _check_factor_fits(n, n_basis)
    pursuit.n_basis = max(pursuit.n_basis, n)


_EXTENSION: contextvars.ContextVar = contextvars.ContextVar("kmp_pursuit_extension", default=None)


@contextlib.contextmanager
def extending(hook: PursuitExtension):
    """Within the block, :func:`kernel_matching_pursuit` (without its own ``checkpoint``) keeps
    its state in ``hook`` and, when ``hook`` holds one, continues it to its ``n_basis``."""
    token = _EXTENSION.set(hook)
    try:
        yield hook
    finally:
        _EXTENSION.reset(token)


def _check_gcv(config) -> None:
    """``val_criterion="gcv"`` is the least-squares path's: refuse other losses and fit modes
    whose coefficients are not the least-squares fit of the basis."""
    if config.loss is not None or config.fit_mode not in ("backfit", "prefit"):
        raise ValueError(
            "val_criterion='gcv' estimates the out-of-sample error of a least-squares fit: it needs the squared "
            f"loss with fit_mode 'backfit' or 'prefit'; got loss={getattr(config.loss, 'name', None)!r}, "
            f"fit_mode={config.fit_mode!r}. Hold out rows instead (validation_fraction > 0).")


def kernel_matching_pursuit(
    engine: Engine, config: PursuitConfig | None = None, *, random_state=None, callback=None, checkpoint=None,
    max_time: float | None = None, val_criterion: str = "metric", **keywords,
) -> PursuitResult:
    """Greedy selection of ``n_basis`` kernel functions centred on training rows.

    Parameters
    ----------
    engine : Engine
        The partitions (:class:`~kmp_dask.blockops.Engine`: ``run(query, msg, effects) -> list``;
        implementations in :mod:`kmp_dask.parallel`).
    kernel : Kernel or list of Kernel
        The dictionary's kernel(s); with several, a candidate is a (row, kernel) pair.
    n_rows, n_features : int
        Shape of the whole data set (training and validation rows).
    dtype : numpy dtype of the data rows.
    targets : dict
        ``{"kind": "regression"}`` or ``{"kind": "ovr", "classes": [...]}``.
    n_basis : int
        Maximum number of basis functions (the bias atom counts as one).
    fit_mode : {"basic", "basic_reselect", "backfit", "prefit", "refit"}
        ``prefit``, ``refit`` and ``basic_reselect`` are for the squared loss only
        (:mod:`kmp_dask.greedy._strategies`).
    candidates : "all" or int
        Exact pursuit over all training rows, or ``s`` random candidates per iteration.
    random_state : None, int or numpy Generator
    ridge : float
        λ/N_train: squared loss solves ``min ‖Y − Bα‖² + ridge·N_train·‖α‖²``; other losses add
        ``½·ridge·N_train·‖α‖²`` (bias excluded) to the summed loss in the Newton refit.
    tol : float or None
        Stop when ‖R‖/‖R₀‖ ≤ tol.
    fit_intercept : bool
    validation_fraction, n_iter_no_change, split_seed
        Early stopping on rows held out by a hash of their global index; the model is cut back
        to the basis size with the best validation score. ``n_iter_no_change``: passes without a
        better score, or a pair ``(min_atoms, share)``: atoms without a better score, at least
        ``min_atoms`` and ``share`` × the best size (:func:`~._record.patience_atoms`).
    callback : callable(record) or None
        Called after every iteration with that iteration's history record.
    max_tries : int
        Candidates committed in score order before giving up on linear dependence.
    loss : Loss or None
        None (or a squared loss) → the exact least-squares path.
    refit_every : "auto", int or None
        Other losses in ``backfit`` mode: Newton refit schedule (:func:`~._newton.refit_due`).
    line_search_steps, final_refit_steps : int
        Other losses: line-search passes per iteration, Newton steps of the final refit.
    error_threshold : float or None
        Squared loss: every scoring pass also counts the training rows with ``|y − f(x)| > γ``
        (γ = this), recorded as ``n_errors`` (and ``result.n_errors0`` before any atom) — the
        training errors of Hussain & Shawe-Taylor's KMP bound (:func:`kmp_dask.bounds.kmp_bound_from_count`).
    basis_columns : {"stored", "recomputed", "auto"}
        Where the partitions keep the basis columns ``k(X, z_j)``: cached (``rows × n`` values,
        resident or streamed with the partition) or recomputed from the atoms when a pass needs
        them (the large-N mode: :class:`~kmp_dask.blockops.RecomputedColumns`). ``"auto"``:
        stored when the columns fit the engine's free memory budget, else recomputed
        (:func:`resolve_basis_columns`). A resumed fit keeps the mode it started with.
    atoms_per_pass : int
        Atoms admitted per scoring pass (squared-loss ``backfit`` only; default 1). With k > 1 a
        pass scores k·s candidates, a second pass returns the Gram products of the 2k best, and
        the driver admits up to k of them one at a time exactly as sequential backfitting
        restricted to those would (:mod:`~kmp_dask.greedy._kmp_blocks`): two passes per k atoms.
    max_time : float or None
        A time budget in seconds from the start of the loop: the pursuit stops at the first
        scoring pass after it (stop reason ``"max_time"``) and, with early stopping, is cut back to
        the best held-out size. None: no budget. A time budget makes the size depend on the machine.
    val_criterion : {"metric", "loss", "gcv"}
        What decides the best held-out size and early stopping: the recorded ``val_score``
        ("metric"), or for classification the held-out −MSE on the ±1 targets (−mean loss for
        other losses) — "loss", a smoother curve on few held-out rows. The history's
        ``val_score`` is the metric either way. "gcv" (squared loss, no held-out rows needed):
        −GCV of the training rows, ``−(RSS / N) / (1 − p / N)²`` with ``p`` the basis size plus a
        fitted mean (:func:`~._record.gcv_score`), from the residual norm every scoring pass
        already computes; it is then also the history's ``val_score`` when no rows are held out.
    rank_only_scores : bool
        The scoring passes may compute one RBF kernel's candidate scores in the factored form
        (:func:`~kmp_dask.blockops._kmp._score_factored`, two elementwise passes instead of the exact
        block's nine; float64 data up to the wider exponent bound ``FACTORED_EXPONENT_MAX_64``): the
        scores then only rank the candidates — the chosen column and every coefficient come from
        the exact commit pass, as with ``atoms_per_pass > 1`` — so the model differs from the exact
        scoring's only where two candidates' scores tie to about 1e−13. ``n_basis="auto"`` (squared
        loss, backfit) uses it; an int ``n_basis`` keeps the exact scores, bit for bit.
    checkpoint : :class:`~kmp_dask.greedy._checkpoint.Checkpoint` or None
        Saves the driver's state every ``checkpoint.every`` iterations and the result at the end;
        one holding a saved state (``resume``) continues it: its journal is replayed on
        ``engine``'s fresh partitions and the loop goes on where it was (the other arguments
        are then those of the saved fit, which :func:`~._checkpoint.open_checkpoint` checked).

    Returns
    -------
    PursuitResult
        History records hold: ``iteration``, ``index`` (chosen row; −1 for the bias atom),
        ``kernel`` (index into the dictionary), ``score``, ``best_score``, ``median_score``,
        ``n_candidates``, ``residual_norm`` (training, after the update), ``loss`` (training
        loss, other losses), ``val_score`` (accuracy for classification, −MSE or −mean loss
        for regression, or None) and ``seconds``.
    """
    config = config_given(PursuitConfig, config, keywords, owner="kernel_matching_pursuit",
                          renames={"kernel": "kernels"})  # its __post_init__ validates fit_mode, loss, atoms_per_pass
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    if checkpoint is None and config.loss is None:
        checkpoint = _EXTENSION.get()  # the extend hook (KMP cross-validation), or None
    if checkpoint is not None and checkpoint.result is not None:
        return checkpoint.result  # the checkpointed fit had finished
    if checkpoint is not None and checkpoint.saved is not None:
        pursuit, resume_at = _restored(engine, callback, checkpoint, rng)
        # a checkpoint's own n_basis (checked): unchanged; the extend hook's: larger
        _extend_to(pursuit, config.n_basis)
    else:
        pursuit, resume_at = Pursuit(engine, config, callback=callback, checkpoint=checkpoint), None
    pursuit.deadline = None if max_time is None else time.monotonic() + float(max_time)
    pursuit.recorder.criterion = val_criterion
    if val_criterion == "gcv":
        _check_gcv(config)
        pursuit.recorder.gcv = (pursuit.n_train, pursuit.w_train, int(config.fit_intercept and not pursuit.bias_column))
    with one_blas_thread():  # small driver-side solves (and in-process partitions): docs/engine.md, Threads
        result = pursuit.run(rng, resume_at)
    result.n_errors0 = pursuit.recorder.n_errors0
    result.basis_columns = pursuit.basis_columns
    if checkpoint is not None:
        checkpoint.save_result(result)
    return result
