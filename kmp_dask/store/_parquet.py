"""Parquet files into stores, streamed by record batches (pyarrow).

``pyarrow.parquet.ParquetFile.iter_batches`` decodes one row group's columns at a time and hands
out record batches of at most ``chunk_rows`` rows, so the memory of an ingest is bounded by one
row group plus one storage chunk, whatever the file's size (benchmarks/ingest_parquet.py measures
it). Feature columns must be numeric (integer, float, boolean) — checked from the schema before
any row is read; the label column may be numeric or text/categorical (sorted into ``classes``, one
extra pass over that column only). Missing values (nulls, NaN) are refused naming the row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from ..exceptions import DataValidationError
from ._base import default_chunk_rows
from ._ingest import SourcePlan, _check_file, _resolve_drop, _resolve_label, write_plan
from ._validation import resolve_dtype
from ._zarr import ZarrStore, check_target_free

__all__ = ["parquet_plan", "store_from_parquet"]


def _pq():
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from exc
    return pq


def _is_numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)


def _is_text(t) -> bool:
    import pyarrow as pa

    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t)
            or pa.types.is_binary(t))


def _classes(pf, label: str, n_rows) -> list:
    """Sorted, stripped text labels of the first ``n_rows`` rows (all if None): one pass over the
    label column only."""
    labels: set = set()
    seen = 0
    for batch in pf.iter_batches(batch_size=65536, columns=[label]):
        col = batch.column(0).to_pandas()
        if n_rows is not None:
            col = col.iloc[: max(0, n_rows - seen)]
        labels.update(col.dropna().astype(str).str.strip())
        seen += batch.num_rows
        if n_rows is not None and seen >= n_rows:
            break
    return sorted(labels)


def _open(path):
    """The file, read without pre-buffering: pyarrow's pre-buffering (on by default) keeps the
    column chunks it has read ahead, and the peak memory of a pass grew with the file's size
    (1.25 GiB RSS for a 1 GB file; 0.38 GiB without — benchmarks/ingest_parquet.py)."""
    return _pq().ParquetFile(path, pre_buffer=False)


def _blocks(path, features: list, label, classes, chunk_rows: int, n_rows) -> Iterator:
    pf = _open(path)
    codes = None if classes is None else {c: i for i, c in enumerate(classes)}
    columns = features + ([label] if label is not None else [])
    start = 0
    for batch in pf.iter_batches(batch_size=chunk_rows, columns=columns):
        if n_rows is not None and start >= n_rows:
            return
        if n_rows is not None and start + batch.num_rows > n_rows:
            batch = batch.slice(0, n_rows - start)
        for name in columns:
            col = batch.column(name)
            if col.null_count:
                row = start + int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise DataValidationError(f"column {name!r} of Parquet file {os.fspath(path)!r} has a missing "
                                          f"value (null) at row {row}; fill in or drop missing values before ingest.")
        X = np.column_stack([batch.column(f).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
                             for f in features])
        y = None
        if label is not None:
            raw = batch.column(label).to_pandas()
            if codes is None:
                y = raw.to_numpy()
            else:
                y = raw.astype(str).str.strip().map(codes).to_numpy(dtype=np.int32)
        yield X, y
        start += batch.num_rows


def parquet_plan(path, *, label_column=-1, drop=None, chunk_rows=None, feature_names=None, dtype=None,
                 n_rows=None, provenance=None, features=None) -> SourcePlan:
    """Read a Parquet file's schema and settle its columns: a :class:`SourcePlan` that streams it
    by record batches. Refuses a bad label or drop column and non-numeric feature columns before
    any row is read. ``features``: as for :func:`~kmp_dask.store._ingest.csv_plan` (the columns
    to read, chosen from the feature columns, in their order)."""
    _check_file(path, "Parquet")
    try:
        pf = _open(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a file that is not Parquet
        raise DataValidationError(f"source {os.fspath(path)!r} is not a readable Parquet file ({exc}).") from None
    schema = pf.schema_arrow
    columns = list(schema.names)
    where = f"Parquet file {os.fspath(path)!r}"
    label = _resolve_label(columns, label_column, where)
    dropped = _resolve_drop(columns, drop, label, where)
    features_all = [c for c in columns if c != label and c not in dropped]
    features = list(features(features_all)) if features is not None and features_all else features_all
    if not features:
        raise DataValidationError(f"{where} has no feature column left (columns {columns}, label {label!r}, "
                                  f"dropped {dropped}).")
    bad = [c for c in features if not _is_numeric(schema.field(c).type)]
    if bad:
        raise DataValidationError(
            f"column(s) {bad} of {where} are not numeric (type {schema.field(bad[0]).type}). Encode them before "
            f"ingest, or drop them (--drop {bad[0]}, drop= in Python). If column {bad[0]!r} is the label, name it: "
            f"--label {bad[0]} (label= in Python; the label column is {'none' if label is None else repr(label)} now).")
    classes = None
    if label is not None:
        t = schema.field(label).type
        if _is_text(t):
            classes = _classes(pf, label, n_rows)
        elif not _is_numeric(t):
            raise DataValidationError(f"label column {label!r} of {where} has type {t}; use numbers or text.")
    itemsize = resolve_dtype(dtype, np.dtype(np.float64)).itemsize
    chunk_rows = chunk_rows or default_chunk_rows(2**31, len(features), itemsize)
    total = pf.metadata.num_rows if n_rows is None else min(int(n_rows), pf.metadata.num_rows)
    prov = {"path": os.fspath(path), "label_column": str(label),
            **({"dropped": dropped} if dropped else {}), **(provenance or {})}
    return SourcePlan(blocks=lambda: _blocks(path, features, label, classes, chunk_rows, n_rows),
                      feature_names=feature_names or features, classes=classes, provenance=prov,
                      source="parquet", chunk_rows=int(chunk_rows), n_rows=total)


def store_from_parquet(target, path, *, label_column=-1, drop=None, chunk_rows=None, overwrite=False,
                       feature_names=None, provenance=None, dtype=None, storage_options=None, progress=None,
                       n_rows=None) -> ZarrStore:
    """Stream a Parquet file into a new store, one record batch at a time (see the module doc).

    Parameters are those of :func:`~kmp_dask.store.store_from_csv` (without ``delimiter`` and
    ``header``): ``label_column`` by name or 0-based position (default the last column; None for
    no label), ``drop`` columns left out, ``n_rows`` the first rows only.
    """
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    plan = parquet_plan(path, label_column=label_column, drop=drop, chunk_rows=chunk_rows,
                        feature_names=feature_names, dtype=dtype, n_rows=n_rows, provenance=provenance)
    return write_plan(target, plan, overwrite=overwrite, storage_options=storage_options, progress=progress,
                      dtype=dtype)
