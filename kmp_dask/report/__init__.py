"""A self-contained HTML report of fitted kmp_dask models (``kmp-dask report MODEL... --output``).

:func:`write_report` / :func:`build_report` take fitted estimators — ``KMPRegressor``,
``KMPClassifier``, ``CVMClassifier``, ``MMDA``, ``SparseKernelPCA``, ``SparseKCCA``,
``ReducedSetCompressor``, ``ReducedSetClassifier``, ``ReducedSetRegressor`` — and give one page:
an overview table, then per model a summary table and the figures it has data for (for a model
chosen by cross-validation, ``train --cv``: held-out score vs size per gamma; error vs basis
size, time per iteration, compression path, bound path, per-component values, feature scatter),
then the evaluation metrics passed in.

Design decisions:

* **One file, nothing external.** Figures are PNG ``data:`` URIs, the style sheet is inline,
  there is no script and no URL: the file can be mailed, archived next to a model, or opened
  offline; a browser shows it the same in ten years.
* **Matplotlib without pyplot.** Each figure is a ``matplotlib.figure.Figure`` on its own Agg
  canvas (:mod:`._plots`); ``matplotlib.use`` is never called, so importing this module inside a
  notebook leaves its backend alone, and no figure leaks into pyplot's registry.
* **Read what the fit recorded; never refit, never touch the data store.** Series come from
  fitted attributes (``history_``, ``path_``, ``bound_path_``, ``trace_residual_path_`` …),
  duck-typed (:mod:`._series`), so a model loaded from disk reports like a fresh one. The only
  computation is on the optional in-memory sample ``X, y``: the test metric of
  ``expansion_at(k)`` at up to 12 sizes, and ``transform`` for the feature scatter (≤ 2,000
  rows). Hence no dask, distributed or zarr here (tests/test_layers.py).
* **Missing is said, not drawn.** A figure the model has nothing for is listed under "Not shown"
  with its reason in one line, instead of an empty axes.
* **Text is escaped in one place** (:mod:`._html`); callers pass plain strings.
* **Written like a model file:** refused if the output exists (unless ``overwrite=True``),
  written to a temporary file in the same directory and renamed into place, so a reader never
  sees half a report.
"""

from ._build import build_report, write_report

__all__ = ["build_report", "write_report"]
