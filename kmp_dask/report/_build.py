"""Assemble the report: one block per model (summary, then each figure it has), the evaluations,
and the atomic write."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .._version import __version__
from . import _series as S
from ._html import Block, Figure, Missing, Note, Table, render_page
from ._models import as_named_models, summary_rows
from ._plots import bar_png, cv_png, line_png, scatter_png

__all__ = ["build_report", "write_report"]

SIZE_FIELDS = ("basis functions", "vectors", "components", "features", "core vectors (union)")


# -- per-model figures: each returns a Figure or raises S.Unavailable -----------------------------

def _error_vs_size(name, model, X, y) -> Figure:
    curves, reasons = [], []
    for get in (S.history_curves, S.residual_trace):
        try:
            curves += get(model)
        except S.Unavailable as exc:
            reasons.append(str(exc))
    try:
        metric, k, v = S.metric_along_path(model, X, y)
        curves.append(S.Curve(metric, k, v, right=bool(curves), marker="o"))
        curves += _full_model_line(model, X, y, k, right=bool(curves[:-1]))
    except S.Unavailable as exc:
        reasons.append(str(exc))
    if not curves:
        raise S.Unavailable("; ".join(dict.fromkeys(reasons)))
    xlabel = "components" if hasattr(model, "trace_residual_path_") else "basis size (vectors)"
    ylabel = curves[0].label if not curves[0].right else "score"
    cut, why = _kept_size(model)
    png = line_png(f"{name}: error vs basis size", xlabel, ylabel, curves, right_label="validation / test score",
                   logy=curves[0].label.startswith("tr("), vline=cut, vlabel=f"kept ({why}): {cut}")
    shown = ", ".join(c.label for c in curves)
    return Figure("Error vs basis size", png, f"{name}: {shown} against {xlabel}")


def _kept_size(model):
    """(size, why) of the size a stopping rule kept — the bound's minimum, or the best held-out
    score of ``n_basis="auto"`` — marked on the error-vs-size figure; (None, "") otherwise."""
    if getattr(model, "stop_reason_", None) == "bound":
        return getattr(model, "n_basis_", None), "bound"
    if _growth_line(model):
        return getattr(model, "n_basis_", None), "n_basis=auto, best held-out score"
    return None, ""


def _growth_line(model):
    """The fit's own line on the size ``n_basis="auto"`` kept (``size_choice_``), or None."""
    line = getattr(model, "size_choice_", None)
    return line if isinstance(line, str) and line else None


def _full_model_line(model, X, y, k, *, right: bool) -> list:
    """A compressor's uncompressed model's test metric as a dashed reference line (or nothing)."""
    try:
        n, v = S.full_model_score(model, X, y)
    except (S.Unavailable, ValueError, AttributeError, TypeError):
        return []
    return [S.Curve(f"uncompressed model ({n} vectors)", np.array([k.min(), k.max()]), np.array([v, v]),
                    right=right, linestyle="--")]


def _time_per_iteration(name, model, X, y) -> Figure:
    it, secs = S.iteration_seconds(model)
    png = line_png(f"{name}: time per iteration (total {secs.sum():.3g} s)", "iteration", "seconds",
                   [S.Curve("seconds", it, secs, marker="." if len(it) < 60 else "")])
    alt = f"{name}: wall time of each of {len(it)} iterations, total {secs.sum():.3g} s"
    return Figure("Time per iteration", png, alt)


def _compression_path(name, model, X, y) -> Figure:
    rkhs, errors = S.compression_curves(model)
    errors = [replace(c, right=True) for c in errors]
    png = line_png(f"{name}: compression path", "vectors", "relative RKHS error", rkhs + errors,
                   right_label="error", logy=True)
    shown = ", ".join(c.label for c in rkhs + errors)
    return Figure("Compression path", png, f"{name}: {shown} against the number of vectors")


def _bound_path(name, model, X, y) -> Figure:
    k, bound, chosen = S.bound_curve(model)
    png = line_png(f"{name}: bound path", "size k", "bound", [S.Curve("bound", k, bound, marker=".")],
                   vline=chosen, vlabel=f"chosen: {chosen}")
    return Figure("Bound path", png, f"{name}: the stopping bound at each size k; the chosen size is {chosen}")


def _components(name, model, X, y) -> Figure:
    title, label, values = S.spectrum(model)
    return Figure(title, bar_png(f"{name}: {title.lower()}", "component", label, values),
                  f"{name}: {label} of each of {len(values)} components")


def _scatter(name, model, X, y) -> Figure:
    F, ys = S.features(model, X, y)
    coloured = " coloured by y" if ys is not None else ""
    png = scatter_png(f"{name}: first two features ({len(F)} rows){coloured}", F, ys)
    return Figure("Feature scatter", png, f"{name}: first two features of {len(F)} rows{coloured}")


def _cv_parts(name, model) -> list:
    """A model chosen by cross-validation (``cv_search_``): the held-out score against the size per
    γ, its numbers at up to 14 sizes, and what the search warned about (with how to widen it).
    Nothing for any other model, so their reports are unchanged."""
    if getattr(model, "cv_search_", None) is None:
        return []
    try:
        cv = S.cv_scores(model)
    except S.Unavailable as exc:
        return [Missing([("Cross-validation: score vs size", str(exc))])]
    (cg, cs), (bg, bs) = cv.chosen, cv.best
    chosen = f"{int(cv.sizes[cs])} atoms, gamma={cv.gammas[cg]:.4g}"
    png = cv_png(f"{name}: {cv.n_splits}-fold cross-validation, held-out {cv.metric} vs size", cv)
    alt = (f"{name}: mean held-out {cv.metric} ± one standard error against the number of atoms for "
           f"{len(cv.gammas)} gammas; best mean {cv.mean[bg, bs]:.4g} at {int(cv.sizes[bs])} atoms, threshold "
           f"{cv.threshold:.4g}; chosen ({cv.rule} rule): {chosen}")
    header = ["atoms"] + [f"γ = {g:.4g}" for g in cv.gammas] + ["mark"]
    rows = []
    for s in S.cv_table_sizes(cv):
        mark = ", ".join(m for m, hit in (("chosen", s == cs), ("best mean", s == bs)) if hit)
        rows.append([int(cv.sizes[s])] + [f"{cv.mean[g, s]:.4f} ± {cv.se[g, s]:.4f}" for g in range(len(cv.gammas))]
                    + [mark])
    parts = [Figure("Cross-validation: score vs size", png, alt),
             Table(f"Cross-validation: mean held-out {cv.metric} ± 1 SE ({cv.n_splits} folds; "
                   f"{'half-SE' if cv.rule == 'half_se' else 'one-SE'} threshold "
                   f"{cv.threshold:.4f}; chosen: {chosen})", header, rows)]
    if cv.warnings:
        parts.append(Note("Cross-validation: the choice may be limited by the grid", " | ".join(cv.warnings)))
    return parts


FIGURES = (("Error vs basis size", _error_vs_size), ("Time per iteration", _time_per_iteration),
           ("Compression path", _compression_path), ("Bound path", _bound_path),
           ("Components", _components), ("Feature scatter", _scatter))


def _model_block(i: int, name: str, model, X, y) -> Block:
    rows = summary_rows(model)
    if _growth_line(model):
        rows.append(("size chosen", _growth_line(model)))
    parts, missing = [Table("Summary", ["field", "value"], [list(r) for r in rows])] + _cv_parts(name, model), []
    for title, draw in FIGURES:
        try:
            parts.append(draw(name, model, X, y))
        except S.Unavailable as exc:
            missing.append((title, str(exc)))
    if missing:
        parts.append(Missing(missing))
    return Block(f"model-{i}", name, type(model).__name__, parts)


def _overview_row(name, model) -> list:
    d = dict(summary_rows(model))
    size = next((f"{d[f]} {f}" for f in SIZE_FIELDS if f in d), "—")
    return [name, d["class"], d["task"], size, d.get("stop reason", "—"), d.get("fit time", "—")]


# -- evaluations ----------------------------------------------------------------------------------

def _scalar_rows(metrics: Mapping) -> list[list]:
    return [[k, v] for k, v in metrics.items()
            if isinstance(v, (int, float, str, np.number)) and not isinstance(v, bool)]


def _evaluation_parts(name: str, metrics: Mapping) -> list:
    parts = [Table(f"{name}: metrics", ["metric", "value"], _scalar_rows(metrics))]
    per_class = metrics.get("per_class")
    if isinstance(per_class, Mapping) and per_class:
        cols = ["precision", "recall", "f1", "support"]
        rows = [[str(c)] + [m.get(k, "") if isinstance(m, Mapping) else "" for k in cols]
                for c, m in per_class.items()]
        parts.append(Table(f"{name}: per class", ["class"] + cols, rows))
    cm, classes = metrics.get("confusion"), metrics.get("classes")
    if cm and classes and len(cm) == len(classes):
        rows = [[str(c)] + [int(v) for v in r] for c, r in zip(classes, cm, strict=True)]
        parts.append(Table(f"{name}: confusion (rows true, columns predicted)",
                           ["true \\ predicted"] + [str(c) for c in classes], rows))
    return parts


def _evaluations_block(evaluations) -> Block:
    if not isinstance(evaluations, Mapping):
        raise TypeError(f"evaluations must be a dict name -> metrics dict; got {type(evaluations).__name__}")
    parts = []
    for name, metrics in evaluations.items():
        if not isinstance(metrics, Mapping):
            raise TypeError(f"evaluations[{name!r}] must be a metrics dict (as `evaluate --json` writes); "
                            f"got {type(metrics).__name__}")
        parts += _evaluation_parts(str(name), metrics)
    return Block("evaluations", "Evaluations", "metrics on held-out data, as `kmp-dask evaluate --json` gives them",
                 parts)


# -- the page -------------------------------------------------------------------------------------

def _check_data(X, y):
    if X is None:
        if y is not None:
            raise ValueError("y was given without X; pass the rows X that the labels y belong to")
        return None, None
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows, features); got shape {X.shape}")
    if y is not None:
        y = np.asarray(y)
        if len(y) != len(X):
            raise ValueError(f"X and y must have the same number of rows; got {len(X)} and {len(y)}")
    return X, y


def build_report(models, *, X=None, y=None, evaluations=None, title=None) -> str:
    """The report as one HTML string (see :func:`write_report` for the parameters)."""
    named = as_named_models(models)
    X, y = _check_data(X, y)
    blocks = [_model_block(i, n, m, X, y) for i, (n, m) in enumerate(named)]
    if evaluations:
        blocks.append(_evaluations_block(evaluations))
    overview = Table("Models", ["name", "class", "task", "size", "stop reason", "fit time"],
                     [_overview_row(n, m) for n, m in named])
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    data = f" · plots on {len(X)} given rows" if X is not None else ""
    meta = f"kmp_dask {__version__} · created {created} · {len(named)} model(s){data}"
    title = title or ("kmp_dask report: " + ", ".join(n for n, _ in named))
    return render_page(title, meta, overview, blocks)


def write_report(models, output, *, X=None, y=None, evaluations=None, title=None, overwrite=False) -> Path:
    """Write the HTML report of ``models`` to ``output``; returns the path written.

    Parameters
    ----------
    models : list of (name, estimator) pairs, or dict name -> estimator
        Fitted kmp_dask estimators.
    output : str or path
        The HTML file. An existing file is refused unless ``overwrite=True``.
    X, y : array-like, optional
        A sample of held-out rows (and labels): test accuracy / R² along the basis path, and the
        feature scatter of transformers (at most 2,000 rows are drawn).
    evaluations : dict name -> metrics dict, optional
        As ``kmp-dask evaluate --json`` writes them; shown as tables.
    title : str, optional
    overwrite : bool, default=False
    """
    path = Path(output)
    if path.is_dir():
        raise IsADirectoryError(f"output {str(path)!r} is a directory; pass a file name such as report.html")
    if path.exists() and not overwrite:
        raise FileExistsError(f"output {str(path)!r} already exists; pass overwrite=True to replace it")
    if path.exists():  # overwrite=True replaces only a report written here (kmp_dask/_overwrite.py)
        from .._overwrite import check_replaceable

        check_replaceable(path, ("report",), option="output")
    text = build_report(models, X=X, y=y, evaluations=evaluations, title=title)
    _atomic_write(path, text.encode("utf-8"))
    return path


def _atomic_write(path: Path, data: bytes) -> None:
    """A temporary file in the target's directory, flushed to disk, then renamed over ``path``."""
    from .._temporaries import remove_stale, temporary

    remove_stale(path)
    with temporary(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
