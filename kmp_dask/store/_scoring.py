"""Data to score: any source ``ingest`` reads, its columns matched to a model's by name.

``predict`` and ``evaluate`` read a store, a CSV/TSV or Parquet file, ``.npy`` / ``.npz`` arrays or
a LIBSVM file (local or an fsspec URL such as ``s3://``) with the readers ``ingest`` uses
(:mod:`kmp_dask.store._sources`): a store is read lazily chunk by chunk (a dask array, as
before); a file is read as the ingest reads it, a stream of row blocks (:class:`SourcePlan`),
and never written to a store first.

**Columns by name.** When the data's columns carry names (a CSV header, a Parquet schema, a
store's ``feature_names``) and the model was fitted on named columns (``feature_names_in_``),
the columns are matched by name (:func:`match_columns`): the model's columns are read in the
model's order wherever they are, the other columns are left out and listed in one
:class:`~kmp_dask.exceptions.IgnoredColumnsWarning` (a label column in a file given to
``predict`` is one of them), and a column the model needs that the data lacks is a
DataValidationError naming it. Without names on either side, columns are taken by position and
their number must match.

**The label.** A store, a LIBSVM file and a ``.npz`` with an array ``y`` carry their labels. A
CSV or Parquet file has a label column only when it is named (``label=``, ``--label COL``);
without one every column is a candidate feature (a label column among them is ignored by name,
as any other extra column).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import DataValidationError, IgnoredColumnsWarning

__all__ = ["ScoringData", "open_scoring", "match_columns", "default_names"]

_UNSET = object()


def default_names(names) -> list[str] | None:
    """``names`` as strings, or None when absent or the defaults ``x0, x1, ...`` (no real names)."""
    if names is None:
        return None
    names = [str(n) for n in names]
    return None if names == [f"x{j}" for j in range(len(names))] else names


def _shown(names, k: int = 12) -> str:
    names = [str(n) for n in names]
    return str(names[:k])[:-1] + (f", ... ({len(names)} in all)]" if len(names) > k else "]")


def match_columns(columns, fitted, *, where: str, model: str = "the model") -> tuple[list, list]:
    """``(selected, ignored)``: the entries of ``columns`` named as ``fitted`` (matched by
    ``str``), in ``fitted``'s order, and the other columns. A fitted name missing from
    ``columns`` is a DataValidationError naming every missing one."""
    by_name = {}
    for c in columns:
        by_name.setdefault(str(c), c)
    fitted = [str(n) for n in fitted]
    missing = [n for n in fitted if n not in by_name]
    if missing:
        raise DataValidationError(
            f"{where} lacks {len(missing)} of the columns {model} was fitted on: {_shown(missing)} (its columns: "
            f"{_shown(columns)}); score data with every column the model was trained on (matched by name, in any "
            "order; other columns are ignored).")
    wanted = set(fitted)
    return [by_name[n] for n in fitted], [c for c in columns if str(c) not in wanted]


def ignored_note(ignored, where: str, n_used: int) -> str:
    return (f"ignored {len(ignored)} column(s) of {where} that the model was not fitted on: {_shown(ignored)} "
            f"(the {n_used} fitted columns are matched by name)")


@dataclass
class ScoringData:
    """Rows to score, with what is known before reading them.

    Exactly one of ``store`` (read lazily; ``columns``: the store's column indices to use, None
    for all in order) and ``plan`` (a stream of numpy row blocks, the model's columns already
    chosen) is set.
    """

    name: str                  #: for messages: ``the store 'x.zarr'``, ``CSV file 'x.csv' ...``
    url: str | None            #: the location, as a metrics file records it
    n_features: int | None     #: columns read (after the matching); None until read for a stream
    has_y: bool
    classes: list | None       #: class names of y's codes, when y holds codes
    n_rows: int | None
    store: object = None
    columns: list | None = None
    plan: object = None
    ignored: list = field(default_factory=list)
    reordered: bool = False

    @property
    def is_stream(self) -> bool:
        return self.plan is not None

    def store_X(self):
        """The store's X as a dask array, its columns chosen (store data only)."""
        X = self.store.to_dask("X")
        return X if self.columns is None else X[:, self.columns]

    def warn_ignored(self) -> None:
        if self.ignored:
            warnings.warn(ignored_note(self.ignored, self.name, self.n_features or 0), IgnoredColumnsWarning,
                          stacklevel=3)


def _chooser(fitted, where, model, state):
    """The ``features=`` callable of a CSV / Parquet plan: the fitted names, by name."""

    def choose(candidates):
        selected = list(candidates)
        if fitted is not None and state.get("header") is not False:
            selected, ignored = match_columns(candidates, fitted, where=where, model=model)
            state["ignored"], state["reordered"] = ignored, selected != list(candidates)[:len(selected)]
        state["n"] = len(selected)
        return selected

    return choose


def open_scoring(data, *, fitted_names=None, model: str = "the model", label=_UNSET, delimiter=None,
                 header=True, labels=None, n_features=None) -> ScoringData:
    """``data`` (a store object, or a path / URL of any source ``ingest`` reads) as
    :class:`ScoringData`, its columns matched to ``fitted_names`` (see the module doc).

    ``label``: a CSV / Parquet file's label column (name or 0-based position), None or unset for
    none. ``labels``: a ``.npy`` file's labels. ``n_features``: the model's number of columns (a
    LIBSVM file is read with that many, its largest index permitting).
    """
    from ._base import DataStore

    fitted = default_names(fitted_names)
    if isinstance(data, DataStore):
        return _store_data(data, fitted, model)
    from ._sources import source_kind

    kind = source_kind(data)
    text = os.fspath(data)
    if label is not _UNSET and label is not None and kind not in ("csv", "parquet"):
        raise ValueError(f"--label (label=) applies to CSV/TSV and Parquet files; {text!r} is a {kind} source "
                         "that carries its labels itself: leave --label out.")
    if kind == "store":
        from ._ingest import open_store

        return _store_data(open_store(text), fitted, model)
    if kind == "synthetic":
        raise ValueError(f"source {text!r} generates rows; write them with `kmp-dask ingest {text} STORE --n-rows N` "
                         "and score the store.")
    if kind in ("csv", "parquet"):
        return _table_data(text, kind, fitted, model, None if label is _UNSET else label, delimiter, header)
    return _plain_data(text, kind, labels, n_features)


def _store_data(store, fitted, model) -> ScoringData:
    names = default_names(store.attrs.get("feature_names"))
    where = f"the store {store.url!r}" if store.url is not None else "the in-memory store"
    columns, ignored, reordered = None, [], False
    if fitted is not None and names is not None and names != fitted:
        selected, ignored = match_columns(names, fitted, where=where, model=model)
        columns = [names.index(n) for n in selected]
        reordered = columns != sorted(columns)
    n = store.n_features if columns is None else len(columns)
    return ScoringData(name=where, url=store.url, n_features=n, has_y=bool(store.has_y),
                       classes=store.attrs.get("classes"), n_rows=store.n_rows, store=store, columns=columns,
                       ignored=ignored, reordered=reordered)


def _table_data(text, kind, fitted, model, label, delimiter, header) -> ScoringData:
    state = {"header": header}
    where = (f"CSV file {text!r}" if kind == "csv" else f"Parquet file {text!r}")
    choose = _chooser(fitted, where, model, state)
    if kind == "csv":
        from ._ingest import csv_plan

        plan = csv_plan(text, label_column=label, delimiter=delimiter, header="infer" if header else None,
                        features=choose)
    else:
        if header is not True:
            raise ValueError(f"--no-header applies to CSV/TSV files; {text!r} is a Parquet file: leave it out.")
        from ._parquet import parquet_plan

        plan = parquet_plan(text, label_column=label, features=choose)
    return ScoringData(name=where, url=text, n_features=state["n"], has_y=label is not None, classes=plan.classes,
                       n_rows=plan.n_rows, plan=plan, ignored=state.get("ignored", []),
                       reordered=state.get("reordered", False))


def _plain_data(text, kind, labels, n_features) -> ScoringData:
    """``.npy`` / ``.npz`` arrays, LIBSVM files and bundled data sets: columns by position."""
    from ._sources import _array_plan, _libsvm_plan, _plan

    if kind == "libsvm":
        plan, n, has_y = _libsvm_plan(text, None, None, n_features=n_features), None, True
    elif kind == "numpy":
        from ._arrays import arrays_dask

        X, y, prov = arrays_dask(text, labels=labels)
        plan = _array_plan(X, y, chunk_rows=65536, feature_names=None, classes=None, provenance=prov, source="numpy")
        n, has_y = int(X.shape[1]), y is not None
    else:  # a bundled data set
        plan = _plan(text, kind, label=_UNSET, drop=None, delimiter=None, labels=_UNSET, n_rows=None,
                     chunk_rows=None, dtype=None)
        n, has_y = len(plan.feature_names), True
    if n is None:
        n = int(plan.n_features)
    where = {"libsvm": f"LIBSVM file {text!r}", "numpy": f"the arrays {text!r}"}.get(kind, f"data set {text!r}")
    return ScoringData(name=where, url=text, n_features=n, has_y=has_y, classes=plan.classes, n_rows=plan.n_rows,
                       plan=plan)


def probe_rows(data: ScoringData, n: int = 2) -> np.ndarray:
    """The first ``n`` rows of X (columns chosen), as numpy."""
    if data.store is not None:
        X, _ = data.store.read_range(0, min(data.store.n_rows, n))
        X = np.asarray(X)
        return X if data.columns is None else X[:, data.columns]
    first = next(iter(data.plan.blocks()), None)
    if first is None:
        raise DataValidationError(f"no rows to score: {data.name} has no rows.")
    return np.asarray(first[0][:n])
