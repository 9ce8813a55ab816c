"""Figures as PNG bytes, drawn with matplotlib's object API on an Agg canvas.

No pyplot and no ``matplotlib.use``: a :class:`~matplotlib.figure.Figure` with its own
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg` leaves the process's backend (a
notebook's inline or widget backend) untouched and keeps no global figure registry.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._series import Curve

__all__ = ["line_png", "bar_png", "scatter_png", "cv_png"]

SIZE = (7.0, 3.6)  #: inches; at DPI, 700 × 360 pixels
DPI = 100


def _figure() -> tuple[Figure, object]:
    fig = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _draw(ax, curves, colours, *, logy=False):
    for c, colour in zip(curves, colours, strict=True):
        ax.plot(c.x, c.y, color=colour, label=c.label, marker=c.marker or None, markersize=4, linewidth=1.5,
                linestyle=c.linestyle)
    if logy and all(np.all(c.y > 0) for c in curves):
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)


def line_png(title: str, xlabel: str, ylabel: str, curves: list[Curve], *, right_label: str = "",
             logy: bool = False, vline: float | None = None, vlabel: str = "") -> bytes:
    """Curves against a shared x; those with ``right=True`` on a second y axis."""
    fig, ax = _figure()
    colours = [f"C{i}" for i in range(len(curves))]
    left = [(c, k) for c, k in zip(curves, colours, strict=True) if not c.right]
    right = [(c, k) for c, k in zip(curves, colours, strict=True) if c.right]
    _draw(ax, [c for c, _ in left], [k for _, k in left], logy=logy)
    handles, labels = ax.get_legend_handles_labels()
    if right:
        ax2 = ax.twinx()
        _draw(ax2, [c for c, _ in right], [k for _, k in right])
        ax2.set_ylabel(right_label)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if vline is not None:
        handles.append(ax.axvline(vline, color="0.3", linestyle="--", linewidth=1))
        labels.append(vlabel)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(handles), 4), fontsize="small",
                   frameon=False)
    return _png(fig)


def bar_png(title: str, xlabel: str, ylabel: str, values: np.ndarray) -> bytes:
    fig, ax = _figure()
    ax.bar(np.arange(1, len(values) + 1), values, color="C0")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, axis="y", alpha=0.3)
    return _png(fig)


def _is_categorical(y) -> bool:
    y = np.asarray(y)
    return y.dtype.kind not in "fc" or len(np.unique(y)) <= 20


def scatter_png(title: str, F: np.ndarray, y=None) -> bytes:
    """First two columns of ``F`` (one column: against the row index), coloured by ``y``."""
    fig, ax = _figure()
    xs, ys = (F[:, 0], F[:, 1]) if F.shape[1] > 1 else (np.arange(len(F)), F[:, 0])
    kw = dict(s=9, alpha=0.7, linewidths=0)
    if y is None:
        ax.scatter(xs, ys, color="C0", **kw)
    elif _is_categorical(y):
        y = np.asarray(y)
        for i, label in enumerate(np.unique(y)):
            m = y == label
            ax.scatter(xs[m], ys[m], color=f"C{i % 10}", label=str(label), **kw)
        ax.legend(loc="best", fontsize="small", markerscale=2, title="y")
    else:
        sc = ax.scatter(xs, ys, c=np.asarray(y, dtype=float), cmap="viridis", **kw)
        fig.colorbar(sc, ax=ax, label="y")
    ax.set(title=title, xlabel="feature 1" if F.shape[1] > 1 else "row",
           ylabel="feature 2" if F.shape[1] > 1 else "feature 1")
    ax.grid(True, alpha=0.3)
    return _png(fig)


def cv_png(title: str, cv) -> bytes:
    """Mean held-out score ± one standard error against the size, one line per γ; the
    one-standard-error threshold, the best mean and the chosen model marked (``cv``: a
    :class:`~._series.CVScores`)."""
    fig, ax = _figure()
    x = cv.sizes.astype(float)
    for i, g in enumerate(cv.gammas):
        colour = f"C{i % 10}"
        ax.plot(x, cv.mean[i], color=colour, linewidth=1.5, label=f"γ = {g:.4g}")
        ax.fill_between(x, cv.mean[i] - cv.se[i], cv.mean[i] + cv.se[i], color=colour, alpha=0.18, linewidth=0)
    ax.axhline(cv.threshold, color="0.3", linestyle="--", linewidth=1,
               label=f"best − 1 SE = {cv.threshold:.4g}")
    (bg, bs), (cg, cs) = cv.best, cv.chosen
    ax.plot([x[bs]], [cv.mean[bg, bs]], linestyle="none", marker="o", markersize=7, markerfacecolor="none",
            markeredgecolor="0.2", label=f"best mean: {int(cv.sizes[bs])} atoms, γ = {cv.gammas[bg]:.4g}")
    ax.plot([x[cs]], [cv.mean[cg, cs]], linestyle="none", marker="*", markersize=13, color=f"C{cg % 10}",
            markeredgecolor="black", label=f"chosen: {int(cv.sizes[cs])} atoms, γ = {cv.gammas[cg]:.4g}")
    ax.axvline(x[cs], color="0.5", linestyle=":", linewidth=1)
    ax.set(title=title, xlabel="number of atoms (basis functions)",
           ylabel=f"held-out {cv.metric} (mean ± 1 SE, {cv.n_splits} folds)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(handles), 3), fontsize="small",
               frameon=False)
    return _png(fig)
