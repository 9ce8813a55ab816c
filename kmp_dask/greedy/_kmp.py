"""The kernel matching pursuit driver (Vincent & Bengio; stochastic variant: Popovici et al.).

The driver holds only what is small — basis rows (n, d), the Cholesky factor of the basis Gram
(n, n), coefficients (n, m), the candidate rows (s, d) and the RNG — and talks to the data
through an *engine* (``engine.run(op, msg) -> list`` of per-partition results in partition
order; see :mod:`kmp_dask.parallel`). It never imports dask.

One iteration = two engine calls:

1. ``kmp_step`` (the data pass): every partition accepts the column chosen last time, sets the
   new coefficients (residual ``R = Y − B α``), scores this iteration's candidates (``d_kᵀR``,
   ``‖d_k‖²``, and ``d_kᵀB`` for pre-fitting) and returns the rows of the *next* iteration's
   candidates (drawn beforehand from the seeded generator), so no extra fetch is needed;
2. ``kmp_commit`` (light: one kernel column, O(rows·(d+n))): the chosen row's column is computed
   and kept pending; partitions return ``Bᵀd``, ``‖d‖²``, ``dᵀR``, ``dᵀY`` for the driver's
   Cholesky append. If the column is numerically dependent on the basis (duplicate rows,
   near-dependent candidates), the driver tries the next-best candidate instead (at most
   ``max_tries``) and stops with :class:`~kmp_dask.exceptions.PrematureStopWarning` if all fail.

The second call exists because the backfitted coefficients of iteration t need ``Bᵀd_j`` of the
chosen column, a global reduction, before the residual of iteration t+1 can be formed. Returning
``d_kᵀB`` for all s candidates in the first pass would avoid it but costs s·n extra flops per
row (pre-fitting pays that anyway and still uses the same two calls).

Fitting modes (DESIGN.md §2):

``basic``    score ⟨d,R⟩²/‖d‖², new coefficient ⟨d,R⟩/‖d‖², earlier ones frozen;
``backfit``  same score, all coefficients re-solved: α = (BᵀB + λI)⁻¹ BᵀY (incremental Cholesky);
``prefit``   score ⟨d,R⟩²/‖P⊥d‖² (the decrease of the residual after refitting), backfitted α.

Multi-output targets share one basis: scores are summed over outputs (coupled selection).
Rows already in the basis are never selected again.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.linalg import cho_solve

from ..blockops import kmp_commit, kmp_init, kmp_restore, kmp_stats, kmp_step, sqnorm
from ..exceptions import PrematureStopWarning
from ..linalg import IncrementalCholesky
from ._result import PursuitResult, StopReason
from ._sampling import AllCandidates, RandomCandidates

__all__ = ["kernel_matching_pursuit", "FIT_MODES"]

FIT_MODES = ("basic", "backfit", "prefit")

_DEPENDENT = (
    "kernel matching pursuit: the column of candidate row {idx} is numerically dependent on the "
    "current basis (duplicate or near-duplicate rows); it is skipped."
)
_PREMATURE = (
    "Kernel matching pursuit stopped after {n} basis functions: all {k} best candidates were "
    "linearly dependent on the basis. Increase `ridge` or reduce `gamma` if more are needed."
)


def _total(results, key):
    return np.add.reduce([r[key] for r in results])


def _gather(results, idx, n_features, dtype):
    """Assemble the fetched rows of ``idx`` (in that order) from per-partition results."""
    rows = np.empty((len(idx), n_features), dtype=dtype)
    pos = {int(g): k for k, g in enumerate(idx)}
    for r in results:
        own, X = r["fetched"]
        for g, x in zip(own.tolist(), X):
            rows[pos[g]] = x
    return rows


def _scores(mode, corr, sqn, cross, chol, lam):
    num = np.einsum("ij,ij->i", corr, corr)
    if mode == "prefit" and chol is not None and chol.size:
        denom = chol.pivot_residual_norms(cross.T, sqn + lam)
    else:
        denom = sqn + (lam if mode != "basic" else 0.0)
    ok = denom > 1e-12 * np.maximum(sqn, 1e-300)
    return np.where(ok, num / np.where(ok, denom, 1.0), 0.0)


def kernel_matching_pursuit(
    engine,
    *,
    kernel,
    n_rows: int,
    n_features: int,
    dtype,
    targets: dict,
    n_basis: int,
    fit_mode: str = "backfit",
    candidates="all",
    random_state=None,
    ridge: float = 0.0,
    tol: float | None = None,
    fit_intercept: bool = True,
    validation_fraction: float = 0.0,
    n_iter_no_change: int | None = None,
    split_seed: int = 0,
    callback=None,
    max_tries: int = 5,
) -> PursuitResult:
    """Greedy selection of ``n_basis`` kernel functions centred on training rows.

    Parameters
    ----------
    engine : object with ``run(op, msg) -> list`` and a settable ``restorer``
    kernel : Kernel
    n_rows, n_features : int
        Shape of the whole data set (training and validation rows).
    dtype : numpy dtype of the data rows.
    targets : dict
        ``{"kind": "regression"}`` or ``{"kind": "ovr", "classes": [...]}``.
    n_basis : int
        Maximum number of basis functions.
    fit_mode : {"basic", "backfit", "prefit"}
    candidates : "all" or int
        Exact pursuit over all training rows, or ``s`` random candidates per iteration.
    random_state : None, int or numpy Generator
    ridge : float
        λ/N_train: the backfit solves ``min ‖Y − Bα‖² + ridge·N_train·‖α‖²``.
    tol : float or None
        Stop when ‖R‖/‖R₀‖ ≤ tol.
    fit_intercept : bool
        Centre the targets (the squared-loss equivalent of a constant atom).
    validation_fraction, n_iter_no_change, split_seed
        Early stopping on rows held out by a hash of their global index; the model is cut back
        to the basis size with the best validation score.
    callback : callable(record) or None
        Called after every iteration with that iteration's history record.

    Returns
    -------
    PursuitResult
        History records hold: ``iteration``, ``index`` (chosen row), ``score``, ``best_score``,
        ``median_score`` (over candidates), ``n_candidates``, ``residual_norm`` (training, after
        the update), ``val_score`` (accuracy for classification, −MSE for regression, or None)
        and ``seconds``.
    """
    if fit_mode not in FIT_MODES:
        raise ValueError(f"fit_mode must be one of {FIT_MODES}; got {fit_mode!r}")
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    base = {"targets": targets, "validation_fraction": validation_fraction, "split_seed": split_seed}
    stats = engine.run(kmp_stats, base)
    n_train = int(sum(s["n_train"] for s in stats))
    n_val = int(sum(s["n_val"] for s in stats))
    if n_train == 0:
        raise ValueError("no training rows: validation_fraction leaves nothing to fit")
    m = len(stats[0]["y_sum"])
    offset = _total(stats, "y_sum") / n_train if fit_intercept else np.zeros(m)
    lam = float(ridge) * n_train

    if isinstance(candidates, str):
        sampler = AllCandidates(n_rows, validation_fraction, split_seed)
    else:
        sampler = RandomCandidates(n_rows, int(candidates), validation_fraction, split_seed, n_train)
    use_val = n_val > 0 and validation_fraction > 0
    val_msg = None
    if use_val:
        if targets["kind"] == "ovr":
            val_msg = {"metric": "accuracy", "intercept": offset, "classes": targets["classes"]}
        else:
            val_msg = {"metric": "sse"}

    excluded: set[int] = set()
    idx = sampler.draw(rng, excluded)
    init_msg = {**base, "kernel": kernel, "offset": offset, "capacity": min(n_basis, 64) + 1}
    state = {"basis": [], "coef": np.zeros((0, m)), "pending_z": None}
    engine.restorer = lambda: [
        (kmp_restore, {**init_msg, "basis": np.asarray(state["basis"]).reshape(-1, n_features),
                       "coef": state["coef"], "pending_z": state["pending_z"]})
    ]
    res = engine.run(kmp_init, {**init_msg, "fetch": idx})
    Z = _gather(res, idx, n_features, dtype)
    rss0 = float(_total(res, "rss").sum())

    chol = IncrementalCholesky(capacity=max(n_basis, 1), ridge=lam) if fit_mode != "basic" else None
    chosen, basis, ytd_rows = [], [], []
    coef = np.zeros((0, m))
    history: list[dict] = []
    val_scores: list[float] = []
    accept = False
    stop = StopReason.N_BASIS
    warned = False

    def record_pass(res):
        rss = float(_total(res, "rss").sum())
        vs = None
        if use_val:
            nv = max(sum(r["val_n"] for r in res), 1)
            if val_msg["metric"] == "accuracy":
                vs = sum(r["val_correct"] for r in res) / nv
            else:
                vs = -sum(r["val_sse"] for r in res) / nv
            val_scores.append(vs)
        if history:
            history[-1]["residual_norm"] = float(np.sqrt(rss))
            history[-1]["val_score"] = vs
        return rss

    for t in range(n_basis):
        t0 = time.perf_counter()
        idx_next = None if sampler.exhaustive else sampler.draw(rng, excluded)
        msg = {
            "accept": accept, "coef": coef if accept else None, "cand": Z, "cand_sq": sqnorm(Z),
            "want_cross": fit_mode == "prefit" and len(chosen) > 0, "fetch": idx_next, "val": val_msg,
        }
        res = engine.run(kmp_step, msg)
        if accept:
            state.update(basis=list(basis), coef=coef, pending_z=None)
        accept = False
        rss = record_pass(res)
        if callback is not None and history:
            callback(history[-1])
        if use_val and n_iter_no_change and len(val_scores) - 1 - int(np.argmax(val_scores)) >= n_iter_no_change:
            stop = StopReason.EARLY_STOPPING
            break
        if tol is not None and rss0 > 0 and np.sqrt(rss / rss0) <= tol:
            stop = StopReason.TOL
            break
        cross = _total(res, "cross") if msg["want_cross"] else None
        score = _scores(fit_mode, _total(res, "corr"), _total(res, "sqn"), cross, chol, lam)
        if excluded:
            score[np.isin(idx, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))] = -np.inf
        if len(idx) == 0 or not np.isfinite(score).any():
            stop = StopReason.EXHAUSTED
            break
        finite = score[np.isfinite(score)]
        best = float(finite.max())
        if best <= 1e-13 * max(rss0, 1e-300):
            stop = StopReason.CONVERGED
            break
        order = np.argsort(-score, kind="stable")
        ok = False
        for j in order[:max_tries]:
            if not np.isfinite(score[j]):
                break
            c = engine.run(kmp_commit, {"z": Z[j]})
            state["pending_z"] = Z[j]
            cross_j, sqn_j = _total(c, "cross"), float(_total(c, "sqn"))
            ok = sqn_j > 0 if chol is None else chol.append(cross_j, sqn_j)
            if ok:
                break
            excluded.add(int(idx[j]))
            if not warned:
                warnings.warn(_DEPENDENT.format(idx=int(idx[j])), PrematureStopWarning, stacklevel=2)
                warned = True
        if not ok:
            warnings.warn(_PREMATURE.format(n=len(chosen), k=max_tries), PrematureStopWarning, stacklevel=2)
            stop = StopReason.LINEAR_DEPENDENCE
            break
        g = int(idx[j])
        chosen.append(g)
        excluded.add(g)
        basis.append(Z[j].copy())
        if chol is None:
            coef = np.vstack([coef, (_total(c, "corr") / sqn_j)[None, :]])
        else:
            ytd_rows.append(_total(c, "ytd"))
            coef = chol.solve(np.asarray(ytd_rows))
        accept = True
        history.append({
            "iteration": t, "index": g, "score": float(score[j]), "best_score": best,
            "median_score": float(np.median(finite)), "n_candidates": int(len(finite)),
            "residual_norm": None, "val_score": None, "seconds": 0.0,
        })
        if idx_next is not None:
            Z, idx = _gather(res, idx_next, n_features, dtype), idx_next
        history[-1]["seconds"] = time.perf_counter() - t0

    if accept:  # the last chosen column: let partitions accept it to get its residual / score
        res = engine.run(kmp_step, {"accept": True, "coef": coef, "val": val_msg})
        state.update(basis=list(basis), coef=coef, pending_z=None)
        record_pass(res)
        if callback is not None:
            callback(history[-1])

    n_keep = len(chosen)
    if use_val and n_iter_no_change and val_scores:
        n_keep = int(np.argmax(val_scores))  # val_scores[k] is the model with k atoms
        if n_keep < len(chosen):
            stop = StopReason.EARLY_STOPPING
            if chol is None:
                coef = coef[:n_keep]
            else:
                L = chol.L[:n_keep, :n_keep]
                coef = cho_solve((L, True), np.asarray(ytd_rows[:n_keep])) if n_keep else np.zeros((0, m))
    basis_arr = np.asarray(basis[:n_keep], dtype=dtype).reshape(n_keep, n_features)
    return PursuitResult(
        basis_indices=np.asarray(chosen[:n_keep], dtype=np.int64),
        basis_vectors=basis_arr,
        coef=np.asarray(coef[:n_keep]).reshape(n_keep, m),
        intercept=np.asarray(offset, dtype=np.float64),
        stop_reason=stop,
        history=history[:n_keep] if stop == StopReason.EARLY_STOPPING else history,
        n_train=n_train,
        n_val=n_val,
    )
