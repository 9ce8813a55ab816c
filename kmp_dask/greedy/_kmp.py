"""The kernel matching pursuit driver (Vincent & Bengio; stochastic variant: Popovici et al.).

The driver holds only what is small — basis rows (n, d), the Cholesky factor of the basis Gram
(n, n), coefficients (n, m), the candidate rows (s, d) and the RNG — and talks to the data
through an *engine* (``engine.run(op, msg) -> list`` of per-partition results in partition
order; see :mod:`kmp_dask.parallel`). It never imports dask.

One iteration = two engine calls (plus, for losses other than squared, a bounded line search):

1. ``kmp_step`` (the data pass): every partition accepts the column chosen last time, sets the
   new coefficients, forms the residual (``Y − Bα``, or the negative functional gradient
   ``−∂L/∂f`` for other losses), scores this iteration's candidates (``d_kᵀR``, ``‖d_k‖²``,
   and ``d_kᵀB`` for pre-fitting) and returns the rows of the *next* iteration's candidates
   (drawn beforehand from the seeded generator), so no extra fetch is needed;
2. ``kmp_commit`` (light: one kernel column, O(rows·(d+n))): the chosen column is computed and
   kept pending; partitions return ``Bᵀd``, ``‖d‖²``, ``dᵀR``, ``dᵀY`` (and, for other
   losses, the loss, gradient and curvature along ``d`` at step 0). If the column is
   numerically dependent on the basis (duplicate rows), the driver tries the next-best candidate
   (at most ``max_tries``) and stops with :class:`~kmp_dask.exceptions.PrematureStopWarning`
   if all fail.

The second call exists because the backfitted coefficients of iteration t need ``Bᵀd_j`` of the
chosen column, a global reduction, before the residual of iteration t+1 can be formed
(docs/engine.md has the cost argument).

Squared loss, fitting modes (DESIGN.md §2):

``basic``    score ⟨d,R⟩²/‖d‖², new coefficient ⟨d,R⟩/‖d‖², earlier ones frozen;
``backfit``  same score, all coefficients re-solved: α = (BᵀB + λI)⁻¹ BᵀY (incremental Cholesky);
``prefit``   score ⟨d,R⟩²/‖P⊥d‖² (the decrease of the residual after refitting), backfitted α.

Other losses (gradient descent in function space): score ⟨d,g⟩²/‖d‖² with g = −∂L/∂f; the step
along the chosen column is a Newton line search on the true loss — each line-search pass
evaluates 4 trial steps at once on the cached column (O(rows·m) each, no kernel work), at most
``line_search_steps`` passes, and the step with the lowest loss wins (step 0 included, so the
training loss never increases). ``backfit`` adds a damped Newton refit of all coefficients every
``refit_every`` iterations — by default ("auto") each time the basis has grown by a tenth, so
the curvature work, O(N·n²·m) per refit, totals O(N·n²·m) rather than O(N·n³·m) — and a
converged one at the end (one pass per Newton step, returning ``Bᵀg`` and ``BᵀHB``). With
``fit_intercept`` the constant function is an atom of the dictionary, scored each iteration by
``(Σg)²/N`` and selected like any other. For the squared loss the constant is in the model
from the start: in ``basic`` mode by centring the targets (which is what selecting
the constant first and freezing it gives), in ``backfit``/``prefit`` as a column of ones that is
refitted with every atom (exact least squares with an intercept; its ridge term is negligible
at the default ``ridge``). It is not counted in ``n_basis`` there.

Multi-output targets share one basis: scores are summed over outputs (coupled selection).
Rows already in the basis are never selected again. A dictionary may hold several kernels; a
candidate is then a (row, kernel) pair.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.linalg import cho_solve, solve

from ..blockops import kmp_commit, kmp_init, kmp_linesearch, kmp_refit_stats, kmp_restore, kmp_stats, kmp_step, sqnorm
from ..exceptions import PrematureStopWarning
from ..linalg import IncrementalCholesky
from ._result import PursuitResult, StopReason
from ._sampling import AllCandidates, RandomCandidates

__all__ = ["kernel_matching_pursuit", "FIT_MODES"]

FIT_MODES = ("basic", "backfit", "prefit")
BIAS = -1  #: basis index recorded for the constant atom

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


def _line_search(engine, stats0, sqn, steps):
    """Newton line search along the pending column, per output; never increases the loss.

    ``stats0``: loss, grad, hess at step 0 (each (m,)). Each pass evaluates 4 trial steps on
    the segment from the current best towards its Newton point. Returns the step (m,).
    """
    a = np.zeros_like(stats0["loss"])
    L, G, H = stats0["loss"].copy(), stats0["grad"].copy(), stats0["hess"].copy()
    fractions = np.array([1.0, 0.5, 0.25, 0.125])
    for _ in range(steps):
        newton = np.where(H > 1e-12 * max(sqn, 1e-300), -G / np.maximum(H, 1e-300), -G / max(sqn, 1e-300))
        if np.all(np.abs(newton) <= 1e-12 * np.maximum(np.abs(a), 1e-12)):
            break
        trials = a[None, :] + fractions[:, None] * newton[None, :]
        res = engine.run(kmp_linesearch, {"alphas": trials})
        tl, tg, th = _total(res, "loss"), _total(res, "grad"), _total(res, "hess")
        best = np.argmin(tl, axis=0)
        cols = np.arange(len(a))
        better = tl[best, cols] < L
        a = np.where(better, trials[best, cols], a)
        G = np.where(better, tg[best, cols], G)
        H = np.where(better, th[best, cols], H)
        improvement = np.where(better, L - tl[best, cols], 0.0)
        L = np.where(better, tl[best, cols], L)
        if not better.any() or np.all(improvement <= 1e-10 * np.abs(L)):
            break
    return a


RESYNC_EVERY = 32
"""Rank-one residual updates between two full recomputations ``R = Y − Bα`` (drift bound)."""


def _refit_due(refit_every, t: int, n: int, last: int) -> bool:
    """Whether iteration ``t`` (basis size ``n`` after it) ends with a Newton refit.

    ``"auto"``: a geometric schedule — every iteration while n ≤ 10, then whenever the basis has
    grown by a tenth since the last refit. A refit costs O(N·n²·m) (the curvature ``BᵀHB``), so
    refitting every iteration costs O(N·n³·m) in total; the schedule keeps it O(N·n²·m).
    """
    if not refit_every:
        return False
    if refit_every == "auto":
        return n <= 10 or n - last >= max(1, last // 10)
    return (t + 1) % int(refit_every) == 0


def _newton_refit(engine, coef, lam, bias_pos, steps, accept):
    """Damped Newton on all coefficients for ``Σ L + ½ λ ‖coef (bias excluded)‖²``."""
    n, m = coef.shape
    pen = np.full(n, lam)
    if bias_pos is not None:
        pen[bias_pos] = 0.0
    res = engine.run(kmp_refit_stats, {"coefs": [coef], "stats": 0, "accept": accept})
    L = _total(res, "loss")[0] + 0.5 * (pen[:, None] * coef**2).sum(axis=0)
    G, H = _total(res, "grad"), _total(res, "hess")
    fractions = (1.0, 0.5, 0.25, 0.125)
    for it in range(steps):
        more = it < steps - 1  # the gradient/curvature at the new point is needed only then
        delta = np.empty_like(coef)
        for j in range(m):
            A = H[j] + np.diag(pen) + 1e-12 * np.trace(H[j]) / max(n, 1) * np.eye(n)
            try:
                delta[:, j] = -solve(A, G[:, j] + pen * coef[:, j], assume_a="pos", check_finite=False)
            except np.linalg.LinAlgError:
                delta[:, j] = -np.linalg.lstsq(A, G[:, j] + pen * coef[:, j], rcond=None)[0]
        trials = [coef + f * delta for f in fractions]
        res = engine.run(kmp_refit_stats, {"coefs": trials, "stats": 0 if more else None})
        tl = _total(res, "loss") + np.stack([0.5 * (pen[:, None] * c**2).sum(axis=0) for c in trials])
        best = np.argmin(tl, axis=0)
        cols = np.arange(m)
        better = tl[best, cols] < L
        if not better.any():
            break
        new = coef.copy()
        for j in np.flatnonzero(better):
            new[:, j] = trials[best[j]][:, j]
        gain = np.where(better, L - tl[best, cols], 0.0)
        L = np.where(better, tl[best, cols], L)
        coef = new
        if not more:
            break
        if np.all(best[better] == 0):
            G, H = _total(res, "grad"), _total(res, "hess")
        else:  # curvature at the mixed point: one more stats pass
            res = engine.run(kmp_refit_stats, {"coefs": [coef], "stats": 0})
            G, H = _total(res, "grad"), _total(res, "hess")
        if np.all(gain <= 1e-12 * np.abs(L)):
            break
    return coef


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
    loss=None,
    refit_every: int | str | None = "auto",
    line_search_steps: int = 3,
    final_refit_steps: int = 25,
) -> PursuitResult:
    """Greedy selection of ``n_basis`` kernel functions centred on training rows.

    Parameters
    ----------
    engine : object with ``run(op, msg) -> list`` and a settable ``restorer``
    kernel : Kernel or list of Kernel
        The dictionary's kernel(s); with several, a candidate is a (row, kernel) pair.
    n_rows, n_features : int
        Shape of the whole data set (training and validation rows).
    dtype : numpy dtype of the data rows.
    targets : dict
        ``{"kind": "regression"}`` or ``{"kind": "ovr", "classes": [...]}``.
    n_basis : int
        Maximum number of basis functions (the bias atom counts as one).
    fit_mode : {"basic", "backfit", "prefit"}
        ``prefit`` is for the squared loss only.
    candidates : "all" or int
        Exact pursuit over all training rows, or ``s`` random candidates per iteration.
    random_state : None, int or numpy Generator
    ridge : float
        λ/N_train: squared loss solves ``min ‖Y − Bα‖² + ridge·N_train·‖α‖²``; other losses add
        ``½·ridge·N_train·‖α‖²`` (bias excluded) to the summed loss in the Newton refit.
    tol : float or None
        Stop when ‖R‖/‖R₀‖ ≤ tol.
    fit_intercept : bool
        Squared loss: centre the targets. Other losses: the constant atom is in the dictionary.
    validation_fraction, n_iter_no_change, split_seed
        Early stopping on rows held out by a hash of their global index; the model is cut back
        to the basis size with the best validation score.
    callback : callable(record) or None
        Called after every iteration with that iteration's history record.
    loss : Loss or None
        None (or a squared loss) → the exact least-squares path.
    refit_every : "auto", int or None
        Other losses in ``backfit`` mode: Newton refit every that many iterations, on the
        geometric schedule of :func:`_refit_due` ("auto"), or only at the end (None).
    line_search_steps, final_refit_steps : int
        Other losses: line-search passes per iteration, Newton steps of the final refit.

    Returns
    -------
    PursuitResult
        History records hold: ``iteration``, ``index`` (chosen row; −1 for the bias atom),
        ``kernel`` (index into the dictionary), ``score``, ``best_score``, ``median_score``,
        ``n_candidates``, ``residual_norm`` (training, after the update), ``loss`` (training
        loss, other losses), ``val_score`` (accuracy for classification, −MSE or −mean loss
        for regression, or None) and ``seconds``.
    """
    if fit_mode not in FIT_MODES:
        raise ValueError(f"fit_mode must be one of {FIT_MODES}; got {fit_mode!r}")
    if loss is not None and getattr(loss, "name", None) == "squared":
        loss = None
    if loss is not None and fit_mode == "prefit":
        raise ValueError("fit_mode='prefit' is defined for the squared loss only; use 'basic' or 'backfit'")
    kernels = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel]
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    base = {"targets": targets, "validation_fraction": validation_fraction, "split_seed": split_seed}
    stats = engine.run(kmp_stats, base)
    n_train = int(sum(s["n_train"] for s in stats))
    n_val = int(sum(s["n_val"] for s in stats))
    if n_train == 0:
        raise ValueError("no training rows: validation_fraction leaves nothing to fit")
    m = len(stats[0]["y_sum"])
    centre = fit_intercept and loss is None and fit_mode == "basic"
    offset = _total(stats, "y_sum") / n_train if centre else np.zeros(m)
    bias_atom = fit_intercept and loss is not None
    forced_bias = fit_intercept and loss is None and fit_mode != "basic"
    lam = float(ridge) * n_train

    if isinstance(candidates, str):
        sampler = AllCandidates(n_rows, validation_fraction, split_seed)
    else:
        sampler = RandomCandidates(n_rows, int(candidates), validation_fraction, split_seed, n_train)
    use_val = n_val > 0 and validation_fraction > 0
    val_msg = None
    if use_val:
        val_msg = {"metric": "accuracy" if targets["kind"] == "ovr" else "loss", "intercept": offset,
                   "classes": targets.get("classes")}

    excluded: set[int] = set()
    idx = sampler.draw(rng, excluded)
    init_msg = {**base, "kernels": kernels, "loss": loss, "offset": offset, "capacity": n_basis + 2}
    # the driver's view of what every partition holds (for rebuilding a lost one)
    # ``sync``: the coefficients of the last full residual recomputation and the rank-one
    # updates applied since (replayed in order by kmp_restore, so a rebuilt partition is bit for
    # bit the lost one)
    state = {"basis": [], "coef": np.zeros((0, m)), "pending": None,
             "sync": {"n": 0, "coef": np.zeros((0, m)), "updates": []}}
    update = None  # (w, β) of the column accepted by the next step, or None: full recompute

    def run_step(msg):
        """One kmp_step; afterwards the driver's view of the partitions follows it."""
        sync = state["sync"]
        if msg.get("update") is not None and len(sync["updates"]) >= RESYNC_EVERY:
            msg = {**msg, "update": None}  # bound the drift of the rank-one updates
        res = engine.run(kmp_step, msg)
        if msg.get("update") is not None:
            sync["updates"].append(msg["update"])
        elif msg.get("coef") is not None:
            state["sync"] = {"n": len(msg["coef"]), "coef": np.array(msg["coef"]), "updates": []}
        return res
    engine.restorer = lambda: [(kmp_restore, {**init_msg, **state})]
    res = engine.run(kmp_init, {**init_msg, "fetch": idx})
    Z = _gather(res, idx, n_features, dtype)
    rss0 = float(_total(res, "rss").sum())
    if forced_bias:  # measure progress from the intercept-only model, as with centring
        ys = _total(stats, "y_sum")
        rss0 = float((_total(stats, "y_sqsum") - ys * ys / n_train).sum())

    use_chol = fit_mode != "basic"
    chol = IncrementalCholesky(capacity=max(n_basis, 1), ridge=lam) if use_chol else None
    chosen, basis, ytd_rows = [], [], []
    last_refit = 0  # basis size at the last Newton refit (other losses, backfit)
    coef = np.zeros((0, m))
    history: list[dict] = []
    val_scores: list[float] = []
    best_snapshot = (0, coef)
    accept = False
    stop = StopReason.N_BASIS
    warned = False
    bias_pos = None

    val_sizes: list[int] = []
    if forced_bias:
        # squared loss with refits: the constant column is in the model from the start and is
        # refitted with every atom (exact least squares with an intercept; centring the targets
        # would freeze the intercept at the target mean)
        c = engine.run(kmp_commit, {"bias": True})
        state["pending"] = (None, 0)
        chol.append(_total(c, "cross"), float(_total(c, "sqn")))
        ytd_rows.append(_total(c, "ytd"))
        coef = chol.solve(np.asarray(ytd_rows))
        chosen.append((BIAS, 0))
        basis.append((None, 0))
        bias_pos, accept = 0, True

    def record_pass(res):
        nonlocal best_snapshot
        rss = float(_total(res, "rss").sum())
        vs = None
        if use_val:
            nv = max(sum(r["val_n"] for r in res), 1)
            if val_msg["metric"] == "accuracy":
                vs = sum(r["val_correct"] for r in res) / nv
            elif loss is None:
                vs = -sum(r["val_sse"] for r in res) / nv
            else:
                vs = -sum(r["val_loss"] for r in res) / nv
            if val_sizes and val_sizes[-1] == len(chosen):  # same basis size re-evaluated (refit)
                val_scores.pop()
                val_sizes.pop()
            if not val_scores or vs > max(val_scores):
                best_snapshot = (len(chosen), coef.copy())
            val_scores.append(vs)
            val_sizes.append(len(chosen))
        if history:
            history[-1]["residual_norm"] = float(np.sqrt(rss))
            history[-1]["val_score"] = vs
            if loss is not None:
                history[-1]["loss"] = float(_total(res, "loss").sum())
        return rss

    for t in range(n_basis):
        t0 = time.perf_counter()
        idx_next = None if sampler.exhaustive else sampler.draw(rng, excluded)
        msg = {
            "accept": accept, "coef": coef, "update": update if accept else None, "cand": Z,
            "cand_sq": sqnorm(Z), "want_cross": fit_mode == "prefit" and len(chosen) > 0, "fetch": idx_next,
            "val": val_msg,
        }
        res = run_step(msg)
        state.update(basis=list(basis), coef=coef, pending=None)
        accept, update = False, None
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
        S = len(score)
        s = len(idx)
        if excluded:
            ex = np.isin(idx, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
            score[np.tile(ex, len(kernels))] = -np.inf
        if bias_atom:  # the constant function, scored like any atom: (Σ g)² / N
            rsum = _total(res, "rsum")
            score = np.append(score, float(rsum @ rsum) / n_train if bias_pos is None else -np.inf)
        if len(score) == 0 or not np.isfinite(score).any():
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
            is_bias = j == S
            item = (None, 0) if is_bias else (Z[j % s], int(j // s))
            c = engine.run(kmp_commit, {"z": item[0], "kernel": item[1], "bias": is_bias})
            state["pending"] = item
            cross_j, sqn_j = _total(c, "cross"), float(_total(c, "sqn"))
            # backfit: the old coefficients move along -w = -(BᵀB + λI)⁻¹Bᵀd times the new one
            w_j = chol.solve(cross_j) if chol is not None and chol.size else None
            ok = sqn_j > 0 if chol is None else chol.append(cross_j, sqn_j)
            if ok:
                break
            if not is_bias:
                excluded.add(int(idx[j % s]))
            if not warned:
                warnings.warn(_DEPENDENT.format(idx=BIAS if is_bias else int(idx[j % s])), PrematureStopWarning, stacklevel=2)
                warned = True
        if not ok:
            n_atoms = sum(g != BIAS for g, _ in chosen)
            warnings.warn(_PREMATURE.format(n=n_atoms, k=max_tries), PrematureStopWarning, stacklevel=2)
            stop = StopReason.LINEAR_DEPENDENCE
            break
        g = BIAS if is_bias else int(idx[j % s])
        if is_bias:
            bias_pos = len(chosen)
        else:
            excluded.add(g)
        chosen.append((g, item[1]))
        basis.append(item if is_bias else (item[0].copy(), item[1]))
        if loss is not None:
            stats0 = {k: _total(c, k)[0] for k in ("loss", "grad", "hess")}
            step = _line_search(engine, stats0, sqn_j, line_search_steps)
            accept = True
            if fit_mode == "backfit" and _refit_due(refit_every, t, len(chosen), last_refit):
                last_refit = len(chosen)
                # the refit's first pass accepts the pending column (partitions: old coef, 0 for it)
                state.update(basis=list(basis), coef=np.vstack([coef, np.zeros((1, m))]), pending=None)
                coef = _newton_refit(engine, np.vstack([coef, step[None, :]]), lam, bias_pos, 1, accept=True)
                accept = False
            else:
                coef = np.vstack([coef, step[None, :]])
                update = (None, step)
        elif chol is None:
            coef = np.vstack([coef, (_total(c, "corr") / sqn_j)[None, :]])
            accept, update = True, (None, coef[-1])
        else:
            ytd_rows.append(_total(c, "ytd"))
            coef = chol.solve(np.asarray(ytd_rows))
            accept, update = True, (w_j, coef[-1])
        history.append({
            "iteration": t, "index": g, "kernel": item[1], "score": float(score[j]), "best_score": best,
            "median_score": float(np.median(finite)), "n_candidates": int(len(finite)),
            "residual_norm": None, "loss": None, "val_score": None, "seconds": 0.0,
        })
        if idx_next is not None:
            Z, idx = _gather(res, idx_next, n_features, dtype), idx_next
        history[-1]["seconds"] = time.perf_counter() - t0

    if loss is not None and fit_mode == "backfit" and chosen:
        if accept:
            state.update(basis=list(basis), coef=np.vstack([state["coef"], np.zeros((1, m))]), pending=None)
        coef = _newton_refit(engine, coef, lam, bias_pos, final_refit_steps, accept=accept)
        accept, refitted = False, True
    else:
        refitted = False
    if chosen and (accept or refitted):  # partitions take the final model: last residual / score
        res = run_step({"accept": accept, "coef": coef, "val": val_msg})
        state.update(basis=list(basis), coef=coef, pending=None)
        record_pass(res)
        if callback is not None:
            callback(history[-1])

    n_keep = len(chosen)
    if use_val and n_iter_no_change and val_scores:
        k_best, coef_best = best_snapshot
        if k_best < len(chosen):
            stop = StopReason.EARLY_STOPPING
            n_keep = k_best
            if loss is not None or chol is None:
                coef = coef_best
            else:
                L = chol.L[:n_keep, :n_keep]
                coef = cho_solve((L, True), np.asarray(ytd_rows[:n_keep])) if n_keep else np.zeros((0, m))
    return _result(chosen[:n_keep], basis[:n_keep], np.asarray(coef[:n_keep]).reshape(n_keep, m), offset,
                   stop, history[: n_keep - int(forced_bias)] if stop == StopReason.EARLY_STOPPING else history,
                   n_train, n_val, n_features, dtype)


def _result(chosen, basis, coef, offset, stop, history, n_train, n_val, n_features, dtype):
    """Split the constant atom off into the intercept; basis arrays hold real rows only."""
    intercept = np.asarray(offset, dtype=np.float64).copy()
    rows = [k for k, (g, _) in enumerate(chosen) if g != BIAS]
    for k, (g, _) in enumerate(chosen):
        if g == BIAS:
            intercept += coef[k]
    return PursuitResult(
        basis_indices=np.asarray([chosen[k][0] for k in rows], dtype=np.int64),
        basis_vectors=np.asarray([basis[k][0] for k in rows], dtype=dtype).reshape(len(rows), n_features),
        coef=coef[rows],
        intercept=intercept,
        stop_reason=stop,
        history=history,
        n_train=n_train,
        n_val=n_val,
        basis_kernels=np.asarray([chosen[k][1] for k in rows], dtype=np.int64),
    )
