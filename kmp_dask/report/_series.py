"""The numbers behind each figure, read from a fitted model's attributes (and an optional sample).

Each function returns the series, or raises :class:`Unavailable` with a one-line reason that the
report prints in place of the figure (a model without a history has no time-per-iteration plot;
saying so is clearer than an empty axes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._models import compressor_of, task_of

__all__ = ["Unavailable", "Curve", "history_curves", "iteration_seconds", "metric_along_path", "full_model_score",
           "compression_curves", "bound_curve", "residual_trace", "spectrum", "features", "CVScores", "cv_scores",
           "cv_table_sizes", "N_PATH_SIZES", "MAX_SCATTER_POINTS"]

N_PATH_SIZES = 12  #: sizes k along the path where the test metric is computed
MAX_SCATTER_POINTS = 2000
MAX_METRIC_ROWS = 20_000  #: rows of X used for the test metric along the path (a seeded sample beyond)


class Unavailable(Exception):
    """This model has nothing for this figure; the message says why, in one line."""


@dataclass(frozen=True)
class Curve:
    label: str
    x: np.ndarray
    y: np.ndarray
    right: bool = False  #: drawn against a second y axis (another unit)
    marker: str = ""
    linestyle: str = "-"


def _history(model) -> list[dict]:
    hist = getattr(model, "history_", None)
    if not hist:
        raise Unavailable(f"{type(model).__name__} records no per-iteration history")
    return list(hist)


def _column(hist, key):
    """(basis size, value) for the iterations where ``key`` has a finite scalar value."""
    xs, ys = [], []
    for i, h in enumerate(hist):
        v = h.get(key)
        if v is None or np.ndim(v) != 0 or not np.isfinite(v):
            continue
        xs.append(h.get("n_basis", h.get("iteration", i) + 1))
        ys.append(float(v))
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)


def history_curves(model) -> list[Curve]:
    """Training residual (and loss) against basis size; validation score on a second axis."""
    hist = _history(model)
    out = []
    for key, label, right in (("residual_norm", "training residual ‖r‖", False), ("loss", "training loss", False),
                              ("val_score", "validation score", True)):
        x, y = _column(hist, key)
        if key == "val_score" and getattr(model, "val_scores_", None) is not None:  # the whole held-out path,
            x = np.asarray(model.val_sizes_, dtype=float)                           # also past the size kept
            y = np.asarray(model.val_scores_, dtype=float)
            x, y = x[x > 0], y[x > 0]
        if len(x):
            out.append(Curve(label, x, y, right=right))
    if not out:
        raise Unavailable("the history records neither a residual, a loss nor a validation score")
    return out


def iteration_seconds(model) -> tuple[np.ndarray, np.ndarray]:
    x, y = _column(_history(model), "seconds")
    if not len(x):
        raise Unavailable("the history records no per-iteration time")
    return np.arange(1, len(y) + 1, dtype=float), y


# -- test metric along the path ---------------------------------------------------------------------

def path_sizes(model) -> list[int]:
    """Up to :data:`N_PATH_SIZES` sizes k for which ``expansion_at(k)`` is exact."""
    comp = compressor_of(model)
    if comp is not None:
        levels = sorted({int(p["n_vectors"]) for p in getattr(comp, "path_", [])})
        if not levels:
            raise Unavailable("the compressor recorded no path")
        pick = np.unique(np.linspace(0, len(levels) - 1, N_PATH_SIZES).round().astype(int))
        return [levels[i] for i in pick]
    n = len(getattr(model, "history_", None) or []) or int(getattr(model, "n_basis_", 0))
    if n < 1:
        raise Unavailable("the model has no basis path")
    return sorted(set(np.linspace(1, n, min(N_PATH_SIZES, n)).round().astype(int).tolist()))


def _predict_with(model, expansion, X):
    """``model``'s prediction rule applied to another expansion's decision values."""
    F = np.asarray(expansion.decision_function(X), dtype=np.float64)
    F = F[:, None] if F.ndim == 1 else F
    comp = compressor_of(model)
    if comp is not None:
        return comp.target_.predict(F)
    if task_of(model) == "classifier":
        code = (F[:, 0] > 0).astype(int) if F.shape[1] == 1 else F.argmax(axis=1)
        return np.asarray(model.classes_).take(code)
    return F[:, 0] if F.shape[1] == 1 else F


def score(task: str, y_true, y_pred) -> float:
    """Accuracy (classifier) or R² averaged over outputs (regressor)."""
    if task == "classifier":
        return float(np.mean(np.asarray(y_pred).astype(str) == np.asarray(y_true).astype(str)))
    yt = np.asarray(y_true, dtype=np.float64).reshape(len(y_true), -1)
    yp = np.asarray(y_pred, dtype=np.float64).reshape(len(y_true), -1)
    ss_res = ((yt - yp) ** 2).sum(axis=0)
    ss_tot = ((yt - yt.mean(axis=0)) ** 2).sum(axis=0)
    return float(np.mean(np.where(ss_tot > 0, 1 - ss_res / np.where(ss_tot > 0, ss_tot, 1), 0.0)))


def metric_along_path(model, X, y) -> tuple[str, np.ndarray, np.ndarray]:
    """(metric name, sizes k, the metric of ``expansion_at(k)`` on (X, y))."""
    task = task_of(model)
    owner = compressor_of(model) or model
    if X is None or y is None:
        raise Unavailable("no labelled data given (pass X and y) for the test metric along the path")
    if task == "transformer" or not hasattr(owner, "expansion_at"):
        raise Unavailable(f"{type(model).__name__} has no path of prefix models (expansion_at)")
    X, y = _sample(X, y, MAX_METRIC_ROWS)
    sizes, values = [], []
    try:
        for k in path_sizes(model):
            values.append(score(task, y, _predict_with(model, owner.expansion_at(k), X)))
            sizes.append(k)
    except (ValueError, AttributeError, TypeError) as exc:  # e.g. a non-squared loss has no exact prefix models
        raise Unavailable(f"no prefix models to score: {str(exc).splitlines()[0]}") from None
    return ("test accuracy" if task == "classifier" else "test R²"), np.asarray(sizes, float), np.asarray(values)


def full_model_score(model, X, y) -> tuple[int, float]:
    """(vectors, test metric) of the model a compressor compressed, for a reference line."""
    comp = compressor_of(model)
    full = getattr(getattr(comp, "target_", None), "expansion", None)
    if full is None or X is None or y is None:
        raise Unavailable("no uncompressed model or no labelled data")
    X, y = _sample(X, y, MAX_METRIC_ROWS)
    return full.n_vectors, score(task_of(model), y, _predict_with(model, full, X))


def _sample(X, y, n: int, seed: int = 0):
    if len(X) <= n:
        return X, y
    idx = np.sort(np.random.default_rng(seed).choice(len(X), size=n, replace=False))
    return X[idx], (None if y is None else y[idx])


# -- paths recorded by the fit ----------------------------------------------------------------------

def compression_curves(model) -> tuple[list[Curve], list[Curve]]:
    """(relative RKHS error curves, train/val error curves) against the number of vectors."""
    comp = compressor_of(model)
    path = getattr(comp, "path_", None) if comp is not None else None
    if not path:
        raise Unavailable(f"{type(model).__name__} is not a compressed model (no compression path)")
    n = np.asarray([p["n_vectors"] for p in path], dtype=float)
    rkhs = [Curve("‖w − ŵ‖² / ‖w‖²", n, np.asarray([p["rkhs_error_rel"] for p in path], dtype=float))]
    errors = []
    for key, label in (("train_error", "training error"), ("val_error", "validation error")):
        pts = [(p["n_vectors"], p[key]) for p in path if p.get(key) is not None]
        if pts:
            x, v = np.asarray(pts, dtype=float).T
            errors.append(Curve(label, x, v, marker="o"))
    return rkhs, errors


def bound_curve(model) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(size k, bound at k, chosen size) of a fit with a bound stopping rule."""
    bound = getattr(model, "bound_path_", None)
    if bound is None or not len(bound):
        raise Unavailable("the model was not fitted with a bound stopping rule (no bound path)")
    chosen = getattr(model, "n_basis_", getattr(model, "n_components_", None))
    return np.arange(len(bound), dtype=float), np.asarray(bound, dtype=float), chosen


def residual_trace(model) -> list[Curve]:
    """tr(K − K̂_k) against k (sparse kernel PCA / KCCA: one curve per view)."""
    trace = getattr(model, "trace_residual_path_", None)
    if trace is None:
        raise Unavailable("no residual trace path")
    t = np.asarray(trace, dtype=float).reshape(len(trace), -1)
    k = np.arange(len(t), dtype=float)
    names = ["tr(K − K̂)"] if t.shape[1] == 1 else [f"tr(K{v} − K̂{v})" for v in ("x", "y", "z")[: t.shape[1]]]
    return [Curve(names[j], k, t[:, j], marker="o") for j in range(t.shape[1])]


def spectrum(model) -> tuple[str, str, np.ndarray]:
    """(title, y label, one value per component) — explained variance, correlations, vectors."""
    for attr, title, label in (
            ("explained_variance_", "Explained variance per component", "variance"),
            ("correlations_", "Canonical correlation per component", "correlation"),
            ("vectors_per_feature_", "Expansion size per feature", "vectors")):
        v = getattr(model, attr, None)
        if v is not None and np.size(v):
            return title, label, np.asarray(v, dtype=float).ravel()
    raise Unavailable(f"{type(model).__name__} has no per-component values (explained variance, canonical "
                      "correlations or expansion sizes)")


def features(model, X, y) -> tuple[np.ndarray, np.ndarray | None]:
    """The first two features of (a sample of) ``X`` and the matching labels."""
    if not hasattr(model, "transform") or hasattr(model, "predict"):
        raise Unavailable(f"{type(model).__name__} computes no features")
    if X is None:
        raise Unavailable("no data given (pass X) for the feature scatter")
    Xs, ys = _sample(X, y, MAX_SCATTER_POINTS)
    try:
        F = np.asarray(model.transform(Xs), dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise Unavailable(f"transform failed on the given X: {str(exc).splitlines()[0]}") from None
    F = F[:, None] if F.ndim == 1 else F
    return F[:, :2], ys


# -- cross-validation along the path (KMPClassifierCV / KMPRegressorCV) ------------------------------

@dataclass(frozen=True)
class CVScores:
    """The held-out score of every size for each γ, as the search that chose the model found it."""

    metric: str
    rule: str
    n_splits: int
    gammas: np.ndarray
    sizes: np.ndarray
    mean: np.ndarray  #: (n_gammas, n_sizes) mean over the folds
    se: np.ndarray  #: (n_gammas, n_sizes) standard error, std(ddof=1) / sqrt(n_splits)
    best: tuple[int, int]  #: (γ index, size index) of the best mean (ties: the smaller size, the earlier γ)
    chosen: tuple[int, int]  #: (γ index, size index) of the model that was refitted
    threshold: float  #: best mean − its standard error (× 1/2 for rule "half_se"): the rule's bar
    warnings: tuple[str, ...]


def cv_scores(model) -> CVScores:
    """The search recorded on a model chosen by cross-validation (``cv_search_``, kept in the saved
    model; a ``KMP*CV`` estimator is reported through its ``best_estimator_``)."""
    rec = getattr(model, "cv_search_", None)
    if not isinstance(rec, dict):
        raise Unavailable("the model was not chosen by cross-validation (no cv_search_)")
    try:
        scores = np.asarray(rec["scores"], dtype=np.float64)
        gammas, sizes = np.asarray(rec["gammas"], dtype=np.float64), np.asarray(rec["sizes"], dtype=np.int64)
        chosen_g, chosen_n = float(rec["best_gamma"]), int(rec["best_n_basis"])
    except (KeyError, TypeError, ValueError) as exc:
        raise Unavailable(f"the recorded cross-validation is incomplete ({type(exc).__name__}: {exc})") from None
    if scores.ndim != 3 or scores.shape[0] != len(gammas) or scores.shape[2] != len(sizes) or not len(sizes):
        raise Unavailable(f"the recorded cross-validation scores have shape {scores.shape}, not (gammas "
                          f"{len(gammas)}, folds, sizes {len(sizes)})")
    k = scores.shape[1]
    mean = scores.mean(axis=1)
    se = scores.std(axis=1, ddof=1) / np.sqrt(k) if k > 1 else np.zeros_like(mean)
    top = mean == mean.max()
    s0 = int(np.flatnonzero(top.any(axis=0))[0])
    g0 = int(np.flatnonzero(top[:, s0])[0])
    chosen = (int(np.argmin(np.abs(gammas - chosen_g))), int(np.argmin(np.abs(sizes - chosen_n))))
    return CVScores(str(rec.get("metric", "score")), str(rec.get("rule", "")), k, gammas, sizes, mean, se, (g0, s0),
                    chosen, float(mean[g0, s0] - (0.5 if rec.get("rule") == "half_se" else 1.0) * se[g0, s0]),
                    tuple(str(w) for w in rec.get("warnings", ())))


def cv_table_sizes(cv: CVScores) -> list[int]:
    """Indices into ``cv.sizes`` for the data table: up to :data:`N_PATH_SIZES` spread over the
    path, plus the chosen and the best size."""
    n = len(cv.sizes)
    spread = np.linspace(0, n - 1, min(N_PATH_SIZES, n)).round().astype(int).tolist()
    return sorted(set(spread) | {cv.chosen[1], cv.best[1]})
