"""Sparse kernel PCA by matching pursuit (Hussain & Shawe-Taylor §3; Smola & Schölkopf's sparse
greedy matrix approximation), the driver side.

Each iteration scores candidate points by the variance along their deflated direction,
``Σ_x K̃(x, z)² / K̃(z, z)``, which is exactly the drop of the trace residual ``tr(K − LLᵀ)`` that
choosing ``z`` brings; the best one becomes a column of the pivoted partial Cholesky factor
(held by the partitions, :mod:`kmp_dask.blockops._kpca`). The driver holds the chosen rows and the
Cholesky factor of their Gram ``K_SS = L_SS L_SSᵀ``, from which any point's coordinates on the
columns are ``L(z) = L_SS⁻¹ k_S(z)`` and its residual ``k(z, z) − ‖L(z)‖²``: the candidates' state
is computed on the driver, never fetched.

One engine pass per selected point: it applies the previous choice (its column and the deflated
diagonal), scores this iteration's candidates, returns the trace residual and the largest residual
(the rank check), and fetches the rows of the next candidates (drawn beforehand from one seeded
generator; exact mode fetches all rows once). After the last choice one more pass returns the
moments ``Σ L``, ``Σ L Lᵀ`` from which the principal directions inside the span are computed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..blockops._engine import Engine
from ..blockops._kpca import KPCAColumn, KPCAScoreQuery, kpca_effects, kpca_moments, kpca_score
from ..blockops._results import KPCAMoments, KPCAScoreStats
from ..linalg import IncrementalCholesky
from ._candidates import gather_fetched
from ._configs import config_given
from ._kpca_config import KPCAConfig
from ._loop import Iteration, run_loop
from ._record import PathRecorder
from ._result import LoopResult, StopReason
from ._sampling import RandomCandidates

__all__ = ["KPCAResult", "KPCARun", "KPCAConfig", "sparse_kernel_pca", "principal_directions", "canonical_directions",
           "truncate"]

MAX_STALLS = 8


@dataclass
class KPCAResult(LoopResult):
    """``index`` (k,) chosen rows in order, ``vectors`` (k, d) their full rows, ``L`` per view the
    (k, k) Cholesky factor of the chosen points' Gram, ``trace`` (k + 1, V) trace residual per view
    after 0..k points (row 0: tr K), ``dmax`` (k + 1, V) largest residual, ``stop_reason`` (a
    :class:`~kmp_dask.greedy._result.StopReason` value: ``"n_components"``, ``"rank"``, ``"bound"``),
    ``n_passes``, ``seconds``, ``n_rows``; ``mean`` per view ``Σ L(x)/N`` and ``gram[(u, v)]`` =
    ``Σ L_u(x) L_v(x)ᵀ`` over the data; ``history`` one record per chosen point (``iteration``,
    ``index``, ``score``; one view: ``residual_norm``, the relative trace residual after it), the
    records the callback received."""

    index: np.ndarray
    vectors: np.ndarray
    L: list
    trace: np.ndarray
    dmax: np.ndarray
    stop_reason: str
    n_passes: int
    seconds: float
    n_rows: int
    mean: list | None = None
    gram: dict | None = None
    history: list = field(default_factory=list)


def _view(Z: np.ndarray, columns) -> np.ndarray:
    return Z if columns is None else Z[:, slice(*columns)]


def _coords(chol: IncrementalCholesky, kernel, S: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """``L(Z) = L_SS⁻¹ k_S(Z)`` (s, k)."""
    if len(S) == 0:
        return np.zeros((len(Z), 0))
    return chol.solve_lower(kernel(S, Z).astype(np.float64)).T


def _score(res: KPCAScoreStats, dz, tol):
    """Matching-pursuit quotient per candidate from the pass's total ``res``: one view
    ``Σ K̃² / K̃(z, z)`` (Algorithm 1, the trace drop); two views ``Σ K̃_x K̃_y / √(Σ K̃_x² Σ K̃_y²)``
    (§4's quotient)."""
    sq = res.sq
    ok = np.all(dz > tol, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if len(dz) == 1:
            score = sq[0] / dz[0]
        else:
            score = res.cross / np.sqrt(sq[0] * sq[1])
    return np.where(ok & np.isfinite(score), score, -np.inf)


def sparse_kernel_pca(engine: Engine, config: KPCAConfig | None = None, *, random_state=None, callback=None,
                      checkpoint=None, **keywords) -> KPCAResult:
    """Greedy selection of ``n_components`` points over the engine's partitions
    (``engine``: an :class:`~kmp_dask.blockops.Engine`).

    ``kernel`` is one kernel (sparse KPCA) or a tuple with one kernel per view, ``columns`` the
    views' feature slices ``(start, stop)`` (sparse KCCA: two views). ``candidates=None``: every
    row is a candidate in every iteration (exact; the driver holds all rows — small data only);
    an int ``s``: s random rows per iteration (the "59-trick"). Stops early when, in some view,
    the largest residual ``K̃(x, x)`` over all rows falls below ``rank_tol · max k(x, x)`` (the
    kernel matrix's numerical rank is reached).

    ``checkpoint``: a :class:`~kmp_dask.greedy._checkpoint.Checkpoint` (or None). The driver's
    state (:class:`KPCARun` without its engine, callback and checkpoint; the RNG; the engine's
    journal) is saved after every ``checkpoint.every``-th chosen point and after the last one,
    and the result when the selection is complete. A checkpoint holding a saved state continues
    it: its journal is replayed on ``engine``'s fresh partitions (bit for bit their state then)
    and the loop goes on — the same result as an uninterrupted run. One holding a result
    returns it without a pass.
    """
    config = config_given(KPCAConfig, config, keywords, owner="sparse_kernel_pca", renames={"kernel": "kernels"})
    if checkpoint is not None and checkpoint.result is not None:
        return checkpoint.result  # the checkpointed selection had finished
    t0 = time.perf_counter()
    rng = random_state if random_state is not None else np.random.default_rng(0)
    if checkpoint is not None and checkpoint.saved is not None:
        run, _, _ = checkpoint.restore(engine, rng)  # partitions replayed, RNG set
        run.attach(engine, callback, checkpoint)
    else:
        run = KPCARun(config)
        run.attach(engine, callback, checkpoint)
        run.begin(rng)
    result = run.loop(rng)
    result.seconds = run.seconds + time.perf_counter() - t0
    if checkpoint is not None:
        save_complete(checkpoint, result)
    return result


def save_complete(checkpoint, result: KPCAResult) -> None:
    """The selection is complete: the checkpoint keeps its result (resuming returns it at once)."""
    checkpoint.save_payload({"result": result}, iteration=len(result.index) - 1, complete=True,
                            stop_reason=result.stop_reason)


class KPCARun:
    """The driver's state of a sparse KPCA / KCCA selection between two passes: the chosen rows
    and their index, one Cholesky factor per view, rows found dependent, the trace and largest
    residual paths, this iteration's candidates ``(idx, Z)`` (exact mode: every row, with their
    coordinates ``LZ``), the effect queued for the next pass, the sampler and counters; what the
    selection is, its :class:`~kmp_dask.greedy._kpca_config.KPCAConfig` (``config``).

    The trace and largest-residual paths and the per-point records live in its
    :class:`~kmp_dask.greedy._record.PathRecorder`, which also calls the callback. A checkpoint
    pickles it without ``engine``, ``checkpoint`` and the recorder's callback (:meth:`attach`
    puts them back); everything else the rest of the run depends on is here."""

    _DETACHED = ("engine", "checkpoint")

    def __init__(self, config: KPCAConfig):
        self.config = config
        self.sampler = None if config.exact else RandomCandidates(config.n_rows, config.candidates)
        self.capacity = max(1, min(config.n_components, 4096))
        self.chols = [IncrementalCholesky(self.capacity) for _ in self.kernels]
        self.S_rows: list[np.ndarray] = []
        self.S_index: list[int] = []
        self.dead: set[int] = set()
        self.recorder = PathRecorder(paths=("trace", "dmax"))  # per pass: trace and largest residual
        self.effects: list = []
        self.n_passes, self.stalls, self.seconds = 0, 0, 0.0
        self.engine = self.checkpoint = None

    # the configuration's fields the loop reads (one source: ``config``; nothing copied)
    kernels = property(lambda self: self.config.kernels)
    columns = property(lambda self: self.config.columns)
    n_rows = property(lambda self: self.config.n_rows)
    n_features = property(lambda self: self.config.n_features)
    dtype = property(lambda self: self.config.dtype)
    n_components = property(lambda self: self.config.n_components)
    rank_tol = property(lambda self: self.config.rank_tol)
    exact = property(lambda self: self.config.exact)

    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in self._DETACHED}
        state["seconds"] = self.seconds + (time.perf_counter() - self._t0 if hasattr(self, "_t0") else 0.0)
        state.pop("_t0", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state, engine=None, checkpoint=None)

    def attach(self, engine: Engine, callback, checkpoint):
        self.engine, self.checkpoint = engine, checkpoint
        self.recorder.attach(callback)
        self._t0 = time.perf_counter()
        return self

    def begin(self, rng) -> None:
        """The first pass: partitions set up, ``max k(x, x)`` per view, the first candidates' rows."""
        idx_next = np.arange(self.n_rows, dtype=np.int64) if self.exact else self.sampler.draw(rng, set())
        res = KPCAScoreStats.combine(self.engine.run(kpca_score, KPCAScoreQuery(fetch=idx_next),
                                                     (kpca_effects.init(self.kernels, self.columns, self.capacity),)))
        self.n_passes = 1
        self.kmax = res.dmax  # (V,) max k(x, x)
        self.idx, self.Z = idx_next, gather_fetched(res.fetched, idx_next, self.n_features, self.dtype)
        self.LZ = [np.zeros((len(self.idx), 0)) for _ in self.kernels]  # exact mode: kept up to date on the driver
        self.reason = None

    def loop(self, rng) -> KPCAResult:
        """The selection (Algorithm 1 of Hussain & Shawe-Taylor, §4's quotient for two views):
        steps until the size or the rank is reached (:func:`~kmp_dask.greedy._loop.run_loop`), then
        the moments pass."""
        self.reason = run_loop(self, rng, self.checkpoint)
        return self.moments()

    def step(self, rng):
        """One iteration: the pass (the last choice applied, the candidates scored), the stopping
        rule, the choice; its :class:`~kmp_dask.greedy._loop.Iteration`, None when every tried
        candidate was dependent, or why the loop stops."""
        S = self.chosen_rows()
        dz = self.candidate_residuals(S)                # K̃(z, z) of this iteration's candidates
        idx_next = self.pool.draw(self, rng)              # the next candidates, drawn before the pass
        res = self.score_pass(idx_next)                   # applies the last choice; scores, traces
        reason = self.stop_rule()                         # size, or the kernel matrix's rank
        if reason is not None:
            return reason
        score = self.scores(res, dz)                      # the matching-pursuit quotient
        pick, self.chols = _admit(self.chols, self.kernels, self.columns, S, self.Z, self.idx, score, self.dead)
        if pick is None:                                  # every tried candidate was dependent
            self._stalled = (res, idx_next)
            return None
        self.choose(pick, res, idx_next)                  # a new column: queued for the next pass
        return self.end_iteration(score, pick)            # the record; the runner saves, then calls back

    def stop_on_stall(self):
        """Exact mode: every row was tried, the rank is reached; sampled: after ``MAX_STALLS``
        stalls in a row, else the next candidates come in."""
        res, idx_next = self._stalled
        del self._stalled
        if self.pool.stalled(self):
            return StopReason.RANK
        self.pool.advance(self, res, idx_next)
        return None

    @property
    def pool(self):
        """Where the candidates come from: every row (exact) or a random sample per iteration."""
        return _EVERY_ROW if self.exact else _SAMPLED

    def chosen_rows(self) -> np.ndarray:
        return np.asarray(self.S_rows).reshape(len(self.S_rows), self.n_features)

    def candidate_residuals(self, S) -> np.ndarray:
        """``K̃(z, z) = k(z, z) − ‖L(z)‖²`` per view (V, candidates), the candidates' coordinates
        ``L(z)`` brought up to date first."""
        self.pool.coordinates(self, S)
        return np.stack([np.asarray(k.diag(_view(self.Z, col)), dtype=np.float64) - np.einsum("ij,ij->i", L, L)
                         for k, col, L in zip(self.kernels, self.columns, self.LZ, strict=True)])

    def score_pass(self, idx_next) -> KPCAScoreStats:
        """One pass: the queued choice applied, this iteration's candidates scored, the trace and
        largest residual recorded, the next candidates' rows fetched; the pass's total."""
        res = KPCAScoreStats.combine(
            self.engine.run(kpca_score, KPCAScoreQuery(self.Z, tuple(self.LZ), idx_next), self.effects))
        self.n_passes += 1
        self.effects = []
        self.recorder.append("trace", res.trace)
        self.recorder.append("dmax", res.dmax)
        return res

    def stop_rule(self):
        if len(self.S_index) >= self.n_components:
            return StopReason.N_COMPONENTS
        if np.any(self.recorder.path("dmax")[-1] <= self.rank_tol * self.kmax):
            return StopReason.RANK
        return None

    def scores(self, res, dz) -> np.ndarray:
        """Each candidate's quotient; chosen and dependent rows −∞."""
        score = _score(res, dz, (self.rank_tol * self.kmax)[:, None])
        out = set(self.S_index) | self.dead
        taken = np.isin(self.idx, np.fromiter(out, dtype=np.int64, count=len(out)))
        score[taken] = -np.inf
        return score

    def choose(self, pick, res, idx_next) -> None:
        """Candidate ``pick`` joins: its column is queued for the next pass, the candidates move on."""
        z = self.Z[pick].copy()
        lz = tuple(L[pick].copy() for L in self.LZ)
        d = tuple(float(c.L[-1, -1] ** 2) for c in self.chols)
        self.effects = [kpca_effects.add(KPCAColumn(z, lz, d, int(self.idx[pick])))]
        self.S_rows.append(z)
        self.S_index.append(int(self.idx[pick]))
        self.pool.advance(self, res, idx_next, (z, lz, d))

    def end_iteration(self, score, pick) -> Iteration:
        """The point's record (the runner keeps it, saves the checkpoint, then calls the callback)."""
        t = len(self.S_index) - 1
        rec = {"iteration": t, "index": self.S_index[-1], "score": float(score[pick])}
        if len(self.kernels) == 1:
            traces = self.recorder.path("trace")
            rec["residual_norm"] = ((traces[-1][0] - score[pick]) / traces[0][0] if traces[0][0] > 0 else 0.0)
        return Iteration(rec, t, last=t + 1 >= self.n_components)

    def moments(self) -> KPCAResult:
        """The last choice applied, then ``Σ L`` and ``Σ L Lᵀ`` over the data: the result."""
        mom = KPCAMoments.combine(self.engine.run(kpca_moments, None, self.effects))
        n = mom.n
        k, V = len(self.S_index), len(self.kernels)
        means = [mom.sums[v] / max(n, 1) if k else np.zeros(0) for v in range(V)]
        gram = mom.gram
        return KPCAResult(np.asarray(self.S_index, dtype=np.int64),
                          np.asarray(self.S_rows).reshape(k, self.n_features),
                          [np.array(c.L) for c in self.chols], self.recorder.stacked("trace"),
                          self.recorder.stacked("dmax"), StopReason(self.reason).value, self.n_passes + 1, 0.0, n,
                          means, gram, list(self.recorder.history))


class _EveryRow:
    """Exact mode: every row is a candidate in every iteration; the driver holds them and keeps
    their coordinates on the chosen columns up to date (one new column per choice)."""

    @staticmethod
    def coordinates(run, S) -> None:
        pass  # kept up to date by :meth:`advance`

    @staticmethod
    def draw(run, rng):
        return None

    @staticmethod
    def stalled(run) -> bool:
        return True  # every row was tried: no other candidate will come

    @staticmethod
    def advance(run, res, idx_next, chosen=None) -> None:
        if chosen is not None:  # every row's coordinates on the new column, on the driver
            run.LZ = _extend_coords(run.LZ, run.kernels, run.columns, run.Z, *chosen)


class _Sampled:
    """``candidates`` random rows per iteration (the "59-trick"), drawn before the pass that
    fetches their rows; their coordinates are computed on the driver from the chosen rows."""

    @staticmethod
    def coordinates(run, S) -> None:
        run.LZ = [_coords(c, k, _view(S, col), _view(run.Z, col))
                  for c, k, col in zip(run.chols, run.kernels, run.columns, strict=True)]

    @staticmethod
    def draw(run, rng):
        return run.sampler.draw(rng, set(run.S_index) | run.dead)

    @staticmethod
    def stalled(run) -> bool:
        return run.stalls >= MAX_STALLS

    @staticmethod
    def advance(run, res, idx_next, chosen=None) -> None:
        run.idx, run.Z = idx_next, gather_fetched(res.fetched, idx_next, run.n_features, run.dtype)


_EVERY_ROW, _SAMPLED = _EveryRow(), _Sampled()


def _extend_coords(LZ, kernels, columns, Z, z, lz, d):
    """Rows' coordinates on a new column ``l(x) = (k(x, z) − L(x)·L(z)) / √d``, per view."""
    return [np.hstack([L, ((k(_view(Z, col), _view(z[None, :], col))[:, 0].astype(np.float64) - L @ lzv)
                           / np.sqrt(dv))[:, None]])
            for L, k, col, lzv, dv in zip(LZ, kernels, columns, lz, d, strict=True)]


def _admit(chols, kernels, columns, S, Z, idx, score, dead, tries: int = 8):
    """The best-scoring candidate (of the first ``tries``) whose every view's Cholesky factor
    accepts it; returns ``(position or None, factors)``. Rejected rows join ``dead``."""
    for j in np.lexsort((idx, -score))[:tries]:
        if not np.isfinite(score[j]):
            break
        trial = [c.copy() for c in chols]
        ok = True
        for c, k, col in zip(trial, kernels, columns, strict=True):
            zj = _view(Z[j : j + 1], col)
            cross = k(_view(S, col), zj)[:, 0].astype(np.float64) if len(S) else np.zeros(0)
            ok = ok and c.append(cross, float(k.diag(zj)[0]))
        if ok:
            return int(j), trial
        dead.add(int(idx[j]))
    return None, chols


def principal_directions(result: KPCAResult):
    """Principal directions inside the span, sorted by variance: ``(eigenvalues, V, coef, offset)``.

    With coordinates ``L(x)`` centred by their mean ``μ``, the covariance ``C = Σ L Lᵀ / N − μμᵀ``
    has eigenpairs ``(λ_i, v_i)``; component i of a point is ``(L(x) − μ)·v_i
    = k_S(x)ᵀ (L_SS⁻ᵀ v_i) − μ·v_i``, a kernel expansion over the chosen points with
    coefficients ``L_SS⁻ᵀ V`` and intercept ``−μᵀV``. ``eigenvalues`` are ``N·λ_i`` (those of the
    centred kernel matrix, as scikit-learn's ``KernelPCA.eigenvalues_``).
    """
    n, mu = result.n_rows, result.mean[0]
    C = result.gram[(0, 0)] / n - np.outer(mu, mu)
    w, V = np.linalg.eigh((C + C.T) / 2)
    order = np.argsort(w)[::-1]
    w, V = np.maximum(w[order], 0.0), V[:, order]
    coef = IncrementalCholesky.of_factor(result.L[0]).solve_upper(V) if len(mu) else np.zeros((0, 0))
    return w * n, V, coef, -(mu @ V)


def canonical_directions(result: KPCAResult, reg: float = 1e-3):
    """CCA inside the two views' sparse subspaces (§4): ``(correlations, (coef_x, off_x), (coef_y, off_y))``.

    Coordinates ``a = L_x(x)``, ``b = L_y(y)`` (k each) are centred; with covariances
    ``C_aa + reg·I``, ``C_bb + reg·I`` (``reg`` relative to their mean eigenvalue) and ``C_ab``,
    the SVD of ``C_aa^{-1/2} C_ab C_bb^{-1/2} = U S Wᵀ`` gives the canonical correlations ``S`` and
    directions ``C_aa^{-1/2} U``, ``C_bb^{-1/2} W``. Each view's projection is a kernel expansion
    over the chosen points (coefficients ``L_SS⁻ᵀ`` times the direction, intercept from the mean).
    """
    n = result.n_rows
    mx, my = result.mean
    Caa = result.gram[(0, 0)] / n - np.outer(mx, mx)
    Cbb = result.gram[(1, 1)] / n - np.outer(my, my)
    Cab = result.gram[(0, 1)] / n - np.outer(mx, my)

    def inv_sqrt(C):
        C = (C + C.T) / 2
        k = len(C)
        lam = reg * max(np.trace(C) / max(k, 1), 1e-300)
        w, U = np.linalg.eigh(C + lam * np.eye(k))
        return (U / np.sqrt(np.maximum(w, 1e-300))) @ U.T

    Ra, Rb = inv_sqrt(Caa), inv_sqrt(Cbb)
    U, s, Wt = np.linalg.svd(Ra @ Cab @ Rb)
    Da, Db = Ra @ U, Rb @ Wt.T
    coef_x = IncrementalCholesky.of_factor(result.L[0]).solve_upper(Da)
    coef_y = IncrementalCholesky.of_factor(result.L[1]).solve_upper(Db)
    return s, (coef_x, -(mx @ Da)), (coef_y, -(my @ Db))


def truncate(result: KPCAResult, k: int) -> KPCAResult:
    """The result of the same run after its first ``k`` points: the columns are nested, so the
    factors, means and Grams are the leading blocks (exact, no data pass)."""
    k = int(k)
    return KPCAResult(result.index[:k], result.vectors[:k], [L[:k, :k] for L in result.L], result.trace[: k + 1],
                      result.dmax[: k + 1], StopReason.BOUND.value, result.n_passes, result.seconds, result.n_rows,
                      [mu[:k] for mu in result.mean], {key: g[:k, :k] for key, g in result.gram.items()},
                      result.history[:k])
