"""From a path's level to a model: coefficients, exchanges, thresholds, errors, the level choice.

Functions of a compression's :class:`~kmp_dask.reduced._state.RouteState` (the compressor's
parameters and the ``target``, ``wsq`` and ``path`` its fit handed over; the engine kept for
exchanges on a store pool during ``fit``) and a :class:`~kmp_dask.reduced._level._Level`:

* :func:`expansion` — the level's ``KernelExpansion`` (exchanged first when ``exchange`` is on;
  coefficients least-squares on the pool with ``refit="pool"``; thresholds re-optimised on the
  labelled pool);
* :func:`exchanged` — the level after single-vector exchanges, once per level, guarded by the
  labelled pool's error (``exchange_guard``);
* :func:`evaluate_path`, :func:`choose`, :func:`finish` — the path's errors, the chosen level
  and its model (in the state, from which the estimator takes its fitted attributes);
* :func:`prefix_guard` — a KMP model's own prefix instead of a compression that is worse on the
  labelled pool.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import user_stacklevel
from ..expansion import KernelExpansion
from ..greedy._exchange import engine_exchange, exchange_vectors
from ._level import _Level, eval_positions, exact_rkhs_error
from ._routes import pool_values

__all__ = [
    "PrefixKeptWarning",
    "best_threshold",
    "choose",
    "evaluate_path",
    "exchanged",
    "expansion",
    "finish",
    "level_error",
    "model_error",
    "prefix_guard",
]


def best_threshold(F: np.ndarray, labels: np.ndarray) -> float:
    """The offset ``b`` minimising the errors of ``sign(F + b)`` against ±1 ``labels``; among
    equally good offsets 0 (the model's own threshold) when it is one of them, else the one
    closest to 0 (a midpoint between two decision values)."""
    F = np.asarray(F, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if len(F) == 0:
        return 0.0
    Fs = np.sort(F, kind="stable")
    ls = labels[np.argsort(F, kind="stable")]
    # cut i: rows with F > t are predicted +1, for t in [lo_i, hi_i) = [Fs[i-1], Fs[i])
    pos_before = np.concatenate([[0], np.cumsum(ls > 0)])
    neg_after = np.sum(ls < 0) - np.concatenate([[0], np.cumsum(ls < 0)])
    errors = (pos_before + neg_after).astype(np.float64)
    lo = np.concatenate([[-np.inf], Fs])
    hi = np.concatenate([Fs, [np.inf]])
    errors[hi <= lo] = np.inf  # no threshold separates equal values
    best = np.flatnonzero(errors == errors.min())
    if np.any((lo[best] <= 0) & (0 < hi[best])):
        return 0.0
    lo_b, hi_b = lo[best], hi[best]
    cuts = np.where(np.isinf(lo_b), hi_b - 1.0, np.where(np.isinf(hi_b), lo_b + 1.0, 0.5 * (lo_b + hi_b)))
    return float(-cuts[np.argmin(np.abs(cuts))])


def _built_key(route, rows, y):
    return (route.refit, bool(route.optimize_threshold), id(rows), id(y))


def expansion(route, lv: _Level, rows, y, exchange=True) -> KernelExpansion:
    """The level's KernelExpansion (vectors from the pool) with thresholds (re-optimised on the
    labelled pool when asked); ``exchange=False``: the greedy level's own vectors."""
    exp = route.target.expansion
    if route.exchange and exchange:
        lv = exchanged(route, lv, rows, y)
        if lv.built is not None and lv.built[0] == _built_key(route, rows, y):
            return lv.built[1]
    vecs = lv.vectors if lv.vectors is not None else rows[lv.index]
    coef = lv.coef
    if route.refit == "pool" and rows is not None and len(vecs):
        coef = _pool_refit(route, exp, np.asarray(vecs), rows)
    out = KernelExpansion(np.asarray(vecs), coef, exp.intercept, exp.kernels[0])
    if route.optimize_threshold and y is not None and rows is not None and route.target.kind != "regression":
        F = out.decision_function(rows)
        b = out.intercept.copy()
        for j, (mask, lab) in enumerate(route.target.output_labels(y)):
            b[j] += best_threshold(F[mask, j], lab)
        out = out.with_coef(out.coef, b)
    return out


def exchanged(route, lv: _Level, rows, y=None) -> _Level:
    """The level after single-vector exchanges (computed once per level): in this process for
    a numpy pool (:func:`~kmp_dask.greedy.exchange_vectors`), on the pursuit's engine for a
    store pool (:func:`~kmp_dask.greedy._exchange.engine_exchange`; the vectors are the chosen
    rows as the partitions read them from the store). The engine is open only during ``fit``:
    there the chosen level and the levels whose labelled errors ``path_`` reports are
    exchanged; ``expansion_at`` later can only give levels exchanged then. With
    ``exchange_guard`` and labels for a numpy pool, the exchanged vectors are kept only when
    their error on the labelled pool is not above the greedy level's."""
    if lv.is_exchanged:
        return lv
    if lv.exchanged is None:
        res = _exchange(route, lv, rows)
        if res is None:  # K_SS not numerically positive definite: the greedy level as it is
            lv.exchanged = lv.unchanged()
        else:
            lv.exchanged = _Level(res.index, res.coef, res.rkhs_error,
                                  rows[res.index] if rows is not None else res.vectors, is_exchanged=True,
                                  n_swaps=res.n_swaps)
            if route.exchange_guard and y is not None and rows is not None and res.n_swaps:
                _guard(route, lv, rows, y)
    return lv.exchanged


def _exchange(route, lv, rows):
    """The exchange's result for ``lv`` (None: its ``K_SS`` is not numerically positive definite)."""
    kernel = route.target.expansion.kernels[0]
    if rows is not None:
        return exchange_vectors(rows, kernel=kernel, F=pool_values(route, route.target.expansion, rows),
                                wsq=route.wsq, index=lv.index, max_sweeps=int(route.exchange))
    if route.xengine is None:
        raise ValueError(
            f"exchange on a store pool runs on the engine during fit: the level with {lv.n_vectors} "
            "vectors was not exchanged then (only the chosen level and the levels with labelled "
            "errors in path_ are); pass a numpy X_pool, or fit with n_vectors="
            f"{lv.n_vectors} to exchange this level")
    engine, n_rows = route.xengine
    return engine_exchange(engine, kernel=kernel, wsq=route.wsq, index=lv.index, vectors=lv.vectors,
                           n_rows=n_rows, max_sweeps=int(route.exchange))


def _guard(route, lv, rows, y) -> None:
    """Keep the exchanged vectors only when their labelled pool error is not above the greedy
    level's; the kept model and its error are cached on the exchanged level (``built``)."""
    key = _built_key(route, rows, y)
    mx = expansion(route, lv.exchanged, rows, y, exchange=False)
    mg = expansion(route, lv, rows, y, exchange=False)
    err_x, err_g = model_error(route, mx, rows, y), model_error(route, mg, rows, y)
    if err_x > err_g:  # keep the greedy level
        lv.exchanged = lv.unchanged(guarded=True)
    # the kept model and its pool error: built once, not again by expansion / level_error
    lv.exchanged.built = (key, mg if err_x > err_g else mx, min(err_x, err_g))


def _pool_refit(route, exp, vecs, rows):
    """``argmin_β Σ_z (f(z) − k(z, S) β)²`` over the pool rows (least squares, minimum norm)."""
    F = pool_values(route, exp, rows)
    K = np.asarray(exp.kernels[0](np.asarray(rows, dtype=np.float64), np.asarray(vecs, dtype=np.float64)),
                   dtype=np.float64)
    beta, *_ = np.linalg.lstsq(K, F, rcond=None)
    return beta


def level_error(route, lv, rows, X, yy, y_pool, exchange=True) -> float:
    """The level's error on ``(X, yy)`` (the guard's pool error when it ran on these rows)."""
    if exchange and route.exchange and X is rows and yy is y_pool:  # the guard's pool error, if it ran
        built = exchanged(route, lv, rows, y_pool).built
        if built is not None and built[0] == _built_key(route, rows, y_pool):
            return built[2]
    return model_error(route, expansion(route, lv, rows, y_pool, exchange=exchange), X, yy)


def model_error(route, exp, X, yy) -> float:
    """Error rate (classifiers, as the model decides) or mean squared error of ``exp`` on ``X``."""
    F = exp.decision_function(X)
    if route.target.kind == "regression":
        Y = np.asarray(yy, dtype=np.float64).reshape(len(F), -1)
        return float(np.mean((F - Y) ** 2))
    return float(np.mean(route.target.predict(F) != np.asarray(yy)))


def evaluate_path(route, levels, wsq, rows, y, X_val, y_val) -> list[dict]:
    """``path_``: every level's size and RKHS error; labelled errors at up to ~50 levels."""
    total = float(np.sum(wsq))
    path = []
    for lv in levels:
        entry = {"n_vectors": lv.n_vectors, "rkhs_error": float(np.sum(lv.rkhs_error)),
                 "rkhs_error_rel": float(np.sum(lv.rkhs_error)) / total if total > 0 else 0.0}
        path.append(entry)
    labelled = [("train_error", rows, y)] if (y is not None and rows is not None) else []
    if X_val is not None and y_val is not None:
        labelled.append(("val_error", np.asarray(X_val), np.asarray(y_val)))
    if not labelled:
        return path
    for i in eval_positions(len(levels)):
        for key, X, yy in labelled:
            path[i][key] = level_error(route, levels[i], rows, X, yy, y)
    return path


def choose(route, levels, wsq, n_keep) -> _Level:
    """The level ``select`` asks for."""
    if route.select == "n_vectors":
        fits = [lv for lv in levels if lv.n_vectors <= n_keep]
        return fits[-1] if fits else levels[0]
    if route.select == "rkhs_tol":
        total = float(np.sum(wsq))
        for lv in levels:
            if np.sum(lv.rkhs_error) <= route.rkhs_tol * total:
                return lv
        return levels[-1]
    scored = [(p["val_error"], p["n_vectors"], i) for i, p in enumerate(route.path) if "val_error" in p]
    return levels[min(scored)[2]]


def finish(route, lv, rows, y) -> None:
    """The chosen level's model, its RKHS error and pool rows in ``route`` (``model``,
    ``rkhs_error``, ``support_index``: the estimator's ``expansion_``, ``rkhs_error_``,
    ``support_index_``; its ``n_vectors_`` is the model's)."""
    route.model = expansion(route, lv, rows, y)
    if route.exchange:
        lv = exchanged(route, lv, rows, y)
    route.rkhs_error = np.asarray(lv.rkhs_error, dtype=np.float64)
    if route.refit == "pool" and rows is not None:  # the refitted model's own ‖w − ŵ‖²
        route.rkhs_error = exact_rkhs_error(route.target.expansion, route.model.support_vectors,
                                           route.model.coef, route.wsq)
    route.support_index = lv.index


class PrefixKeptWarning(UserWarning):
    """A compressed KMP model was worse on the labelled pool than the KMP fit's own prefix of the
    same size, so the prefix was kept (``used_prefix_ = True``)."""


def prefix_guard(route, model, rows, y) -> None:
    """KMP sources with a path (``expansion_at``, squared loss with backfit / prefit) and a
    labelled numpy pool: keep the model's own first ``n_vectors_`` atoms when the compressed
    model's pool error is above theirs, and say so (``used_prefix_``, a PrefixKeptWarning).
    A pursuit of k atoms fits the data; a compression of the whole model to k vectors fits ``w``,
    which at high compression can be the worse model for the data (docs/reduced.md)."""
    route.used_prefix = False
    if route.target.source not in ("KMPClassifier", "KMPRegressor") or rows is None or y is None:
        return
    try:
        prefix = model.expansion_at(route.model.n_vectors).without_input_transform()  # pool rows: the model's space
    except ValueError:  # no path (another loss or fit mode): nothing to compare with
        return
    err_c, err_p = model_error(route, route.model, rows, y), model_error(route, prefix, rows, y)
    if err_c <= err_p:
        return
    warnings.warn(
        f"the compressed model ({route.model.n_vectors} vectors) has error {err_c:.4g} on the labelled pool, above the "
        f"{route.target.source}'s own first {prefix.n_vectors} atoms ({err_p:.4g}): keeping that prefix "
        "(used_prefix_ = True; it is model.expansion_at(k)). A pursuit of k atoms fits the data, a compression "
        "fits the whole model; pass a larger n_vectors to compress, or use the prefix directly",
        PrefixKeptWarning, stacklevel=user_stacklevel())
    route.used_prefix = True
    route.model = prefix
    route.rkhs_error = exact_rkhs_error(route.target.expansion, prefix.support_vectors, prefix.coef, route.wsq)
    route.support_index = _rows_of(rows, prefix.support_vectors)


def _rows_of(rows, vectors) -> np.ndarray:
    """The pool row equal to each vector (the first one; −1 where none is)."""
    rows = np.asarray(rows, dtype=np.float64)
    out = np.full(len(vectors), -1, dtype=np.int64)
    for i, v in enumerate(np.asarray(vectors, dtype=np.float64)):
        hit = np.flatnonzero(np.all(rows == v, axis=1))
        if len(hit):
            out[i] = hit[0]
    return out
