"""Evaluate a fitted model on a labelled store, or write its predictions to a store or a file.

All run chunk by chunk on the dask workers (the store's rows are never gathered on the
driver): the model's outputs over the store are one lazy dask array, one task per row chunk
(:func:`kmp_dask.parallel._evaluate.chunkwise`, the only data pass), reduced block by block
against the store's labels, written to zarr one storage chunk per task
(:func:`kmp_dask.store.store_from_dask`), or streamed in row order into a CSV, Parquet or
``.npy`` file (:func:`predict_to_file`). The CLI's ``evaluate`` and ``predict`` commands are
these functions. Any model with ``predict`` works: kmp_dask's estimators, a compressed model,
scikit-learn's.

Labels: a store keeps class *codes* in ``y`` and their names in the ``classes`` attribute;
a model fitted on a store has those names as ``classes_``. Rows are matched by name, so a
test store whose class list differs from the training store's (another order, a class
missing) is still scored correctly; a label the model never saw counts as an error. A store none of
whose class names is among the model's classes is refused before any pass (its codes would mean
nothing to the model).
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from ._predictions_file import PARQUET_MARKER, predictions_file_reason  # noqa: F401 - public here too

__all__ = ["evaluate", "predict_to_store", "predict_to_file", "model_kind", "check_model_data", "check_evaluate",
           "check_output_request", "FORMATS", "output_format"]

FORMATS = {".csv": "csv", ".parquet": "parquet", ".npy": "npy", ".zarr": "zarr"}
"""``--output`` extension → format of :func:`predict_to_file`."""

OUTPUTS = ("auto", "proba", "decision")
"""What :func:`predict_to_file` writes: the predictions (class names / values / features), the
class probabilities, or the decision values."""


def model_kind(model) -> str:
    """``"classifier"``, ``"regressor"`` or ``"transformer"``."""
    if hasattr(model, "classes_") and hasattr(model, "predict"):
        return "classifier"
    if hasattr(model, "transform") and not hasattr(model, "predict"):
        return "transformer"
    if hasattr(model, "predict"):
        return "regressor"
    raise TypeError(f"model must be a fitted kmp_dask estimator; got {type(model).__name__}")


def _open(data):
    from .store import open_store

    return open_store(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else data


def check_model_data(model, store) -> None:
    """Before any pass: ``store`` has the columns ``model`` was fitted on (count, and names when
    both have them). One clear error naming both otherwise."""
    from .estimators._inputs import check_store_feature_names
    from .exceptions import DataValidationError

    n = getattr(model, "n_features_in_", None)
    if n is not None and int(n) != store.n_features:
        raise DataValidationError(
            f"data {store.url!r} has {store.n_features} features but {type(model).__name__} was fitted on {int(n)}; "
            "use a store with the training data's columns (ingest it as the training data was)")
    check_store_feature_names(model, store)


def _store_labels(store):
    """The store's y as a dask array of class names (classification) or values."""
    import dask.array as da

    if not store.has_y:
        raise ValueError(f"data={store.url!r} has no labels (y); evaluate needs a labelled store")
    y = store.to_dask("y")
    names = store.attrs.get("classes")
    if names is None:
        return y
    names = np.asarray(names)
    return da.map_blocks(_names_block, y, names, dtype=names.dtype)


def _names_block(codes, names):
    return names.take(np.asarray(codes, dtype=np.int64))


def _check_classes(model, store) -> None:
    """A store with class names shares at least one with the model's ``classes_`` (by value or
    by name), else its codes cannot be matched to the model's classes: refused before the pass."""
    from .parallel._evaluate import _codes_block

    names = store.attrs.get("classes")
    if names is None:
        return
    classes = np.asarray(model.classes_)
    if (_codes_block(np.asarray(names), classes) >= 0).any():
        return
    raise ValueError(
        f"data {store.url!r} has the classes {list(map(str, names))[:10]} and {type(model).__name__} the classes "
        f"{[str(c) for c in classes.tolist()][:10]}: no class name in common, so the store's labels cannot be "
        "matched to the model's. Evaluate on a store whose 'classes' attribute names the labels the model was "
        "trained on (ingest it with the same label column)")


def check_evaluate(model, store) -> str:
    """Everything :func:`evaluate` checks before its pass (the CLI calls it before a cluster
    starts): a model that predicts, a labelled store with its columns, class names in common.
    Returns the model's kind."""
    kind = model_kind(model)
    if kind == "transformer":
        raise ValueError(f"model is a {type(model).__name__} (a transformer): there is nothing to score; "
                         "write its features with predict instead")
    check_model_data(model, store)
    if not store.has_y:
        raise ValueError(f"data={store.url!r} has no labels (y); evaluate needs a labelled store")
    if kind == "classifier":
        _check_classes(model, store)
    return kind


@contextlib.contextmanager
def _passes_on(client):
    """The client :func:`~kmp_dask.parallel.resolve_client` gives for ``client`` (None: in process),
    current for the passes inside: the model is scattered with it, so its graphs are computed there."""
    from .parallel import resolve_client

    with resolve_client(client, in_memory=False) as c:
        with c.as_current() if c is not None else contextlib.nullcontext():
            yield c


def _probe(store):
    X, _ = store.read_range(0, min(store.n_rows, 2))
    return np.asarray(X)


def evaluate(model, data, *, client=None) -> dict:
    """Metrics of ``model`` on the labelled store ``data`` (a path, URL or DataStore).

    Classifier: ``accuracy``, ``per_class`` (precision, recall, f1, support), ``confusion``
    (rows true, columns predicted, in ``classes`` order) and ``n_unknown_labels``. Regressor:
    ``r2``, ``mse``, ``mae`` (averaged over outputs) and ``n_rows``. The store's labels are
    matched to the model's ``classes_`` by name; a store sharing no class name with the model
    is refused (ValueError), as is one with other columns (:func:`check_model_data`).
    """
    from .parallel._evaluate import chunkwise, ship_model
    from .parallel._scatter import rerun_if_lost

    store = _open(data)
    kind = check_evaluate(model, store)
    def metrics(on):
        y = _store_labels(store)
        pred = chunkwise(model, store.to_dask("X"), "predict", _probe(store), ship_model(model, on))
        if kind == "classifier":
            return _classification_metrics(model.classes_, pred, y, store.n_rows)
        return _regression_metrics(pred, y)

    with _passes_on(client) as on:
        return rerun_if_lost(lambda: metrics(on))


def _classification_metrics(classes, pred, y, n_rows) -> dict:
    from .parallel._evaluate import confusion_counts, label_codes

    classes = np.asarray(classes)
    counts = confusion_counts(label_codes(pred, classes), label_codes(y, classes), len(classes))
    k = len(classes)
    cm = counts[:k, :k]
    tp = np.diag(cm).astype(float)
    support = counts[:k].sum(axis=1)
    predicted = counts[:, :k].sum(axis=0)
    if n_rows and support.sum() == 0:  # y without class names (values): none is one of the model's classes
        raise ValueError(f"none of the {int(n_rows)} labels of the data is among the model's classes "
                         f"{[str(c) for c in classes.tolist()][:10]}; evaluate on data labelled with those classes")
    per_class = {}
    for i, c in enumerate(classes.tolist()):
        prec = tp[i] / predicted[i] if predicted[i] else 0.0
        rec = tp[i] / support[i] if support[i] else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        per_class[str(c)] = {"precision": prec, "recall": rec, "f1": f1, "support": int(support[i])}
    return {"task": "classification", "n_rows": int(n_rows), "accuracy": float(tp.sum() / max(counts.sum(), 1)),
            "classes": [str(c) for c in classes.tolist()], "confusion": cm.tolist(),
            "n_unknown_labels": int(counts[k].sum()), "per_class": per_class}


def _regression_metrics(pred, y) -> dict:
    from .parallel._evaluate import regression_sums

    s = regression_sums(pred, y)
    n = s["n"]
    ss_tot = s["sumsq"] - s["sum"] ** 2 / n
    r2 = 1.0 - s["sse"] / np.where(ss_tot > 0, ss_tot, np.nan)
    return {"task": "regression", "n_rows": int(n[0]), "r2": float(np.nanmean(r2)) if np.isfinite(r2).any() else None,
            "mse": float(np.mean(s["sse"] / n)), "mae": float(np.mean(s["sae"] / n))}


def output_format(path) -> str:
    """The format ``path``'s extension names (``csv``, ``parquet``, ``npy``, ``zarr``; no extension:
    ``zarr``); a ValueError naming the extension and the four choices otherwise."""
    import os

    text = os.fspath(path)
    ext = os.path.splitext(text.rstrip("/"))[1].lower()
    if not ext:  # a path without an extension is a store, as before formats existed
        return "zarr"
    if ext not in FORMATS:
        raise ValueError(f"output {text!r} has the extension {ext!r}; the format is chosen by it: "
                         "use .csv, .parquet, .npy or .zarr (e.g. pred.csv; no extension: a zarr store)")
    return FORMATS[ext]


def check_output_request(model, output: str = "auto") -> str:
    """``output`` ("auto", "proba" or "decision") is one ``model`` can give: its kind, else a ValueError."""
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}; got {output!r}")
    kind = model_kind(model)
    if output == "proba" and not _has(model, "predict_proba"):
        raise ValueError(f"{type(model).__name__} has no class probabilities (predict_proba){_why(model, kind)}; "
                         "drop --proba, or use --decision for decision values")
    if output == "decision" and not _has(model, "decision_function"):
        raise ValueError(f"{type(model).__name__} has no decision values (decision_function){_why(model, kind)}; "
                         "drop --decision")
    return kind


def _has(model, name) -> bool:
    try:
        return hasattr(model, name)
    except Exception:  # noqa: BLE001 - an available_if check that raises means "not available"
        return False


def _why(model, kind) -> str:
    if kind != "classifier":
        return f" (it is a {kind})"
    if getattr(model, "loss", None) is not None and type(model).__name__ == "KMPClassifier":
        return f" (loss={getattr(model.loss, 'name', model.loss)!r}; probabilities need loss='logistic')"
    return ""


def _method(kind, output) -> str:
    if output == "proba":
        return "predict_proba"
    if output == "decision":
        return "decision_function"
    return "transform" if kind == "transformer" else "predict"


def _columns(model, kind, output, n_cols) -> list[str]:
    """Column names of the written table: ``prediction`` / ``proba_<class>`` / ``decision_<class>``
    (``decision_<j>`` when the outputs are not one per class, ``decision`` for one) /
    ``feature_<name>``."""
    classes = [str(c) for c in np.asarray(getattr(model, "classes_", [])).tolist()]
    if output == "proba":
        return [f"proba_{c}" for c in classes] if len(classes) == n_cols else [f"proba_{j}" for j in range(n_cols)]
    if output == "decision":
        if n_cols == 1:
            return ["decision"]
        if len(classes) == n_cols:
            return [f"decision_{c}" for c in classes]
        return [f"decision_{j}" for j in range(n_cols)]
    if kind == "transformer":
        try:
            names = [str(n) for n in model.get_feature_names_out()]
        except Exception:  # noqa: BLE001 - no names: numbered
            names = []
        return [f"feature_{n}" for n in names] if len(names) == n_cols else [f"feature_{j}" for j in range(n_cols)]
    return ["prediction"] if n_cols == 1 else [f"prediction_{j}" for j in range(n_cols)]


def predict_to_store(model, data, target, *, overwrite: bool = False, client=None, provenance=None,
                     output: str = "auto"):
    """Write ``model``'s output over the store ``data`` to a new zarr store at ``target``.

    Classifier: ``X`` = decision values (n, n_outputs) — the class probabilities with
    ``output="proba"`` — and ``y`` = predicted class (codes, with the model's classes as the
    store's ``classes``). Regressor: ``X`` = predictions (n, n_outputs), ``y`` = the predictions
    too. Transformer: ``X`` = the features, ``y`` = ``data``'s labels (so the output trains a
    downstream model directly). Written atomically; an existing ``target`` is refused unless
    ``overwrite``.
    """
    from .parallel._scatter import rerun_if_lost
    from .store import check_target_free, store_from_dask

    check_target_free(target, overwrite=overwrite)
    kind = check_output_request(model, output)
    store = _open(data)
    _check_not_input(store, target)
    check_model_data(model, store)
    prov = {"command": "predict", "model": type(model).__name__, "source": store.url, **(provenance or {})}
    def write(on):
        X, y, classes = _outputs(model, kind, store, output, on)
        return store_from_dask(target, X, y, classes=classes, overwrite=overwrite, provenance=prov)

    with _passes_on(client) as on:
        return rerun_if_lost(lambda: write(on))


def _check_not_input(store, target) -> None:
    url = getattr(store, "url", None)
    if isinstance(url, str) and "://" not in url and _same_path(url, target):
        raise ValueError(f"target {str(target)!r} is the store the predictions are computed from; write them to "
                         "another path (replacing the input store would lose it)")


def _same_path(a, b) -> bool:
    import os

    b = os.fspath(b)
    b = b[len("file://"):] if b.startswith("file://") else b
    return "://" not in b and os.path.realpath(a) == os.path.realpath(os.path.expanduser(b))


def _two_d(a):
    return a.reshape(a.shape[0], 1) if a.ndim == 1 else a


def _outputs(model, kind, store, output="auto", client=None):
    from .parallel._evaluate import chunkwise, label_codes, ship_model

    X, probe, m = store.to_dask("X"), _probe(store), ship_model(model, client)  # one model for all passes
    if kind == "transformer":
        y = store.to_dask("y") if store.has_y else None
        return _two_d(chunkwise(model, X, "transform", probe, m)), y, store.attrs.get("classes")
    if kind == "regressor":
        P = chunkwise(model, X, "predict", probe, m)
        return _two_d(P), P, None
    F = None
    if output == "proba":
        F = chunkwise(model, X, "predict_proba", probe, m)
    elif _has(model, "decision_function"):
        F = _two_d(chunkwise(model, X, "decision_function", probe, m))
    pred = chunkwise(model, X, "predict", probe, m)
    codes = label_codes(pred, model.classes_)
    if F is None:
        F = _two_d(codes.astype(np.float32))
    return F.astype(np.float64), codes.astype(np.int32), [str(c) for c in np.asarray(model.classes_).tolist()]


def predict_to_file(model, data, path, *, output: str = "auto", overwrite: bool = False, client=None,
                    provenance=None, batch: int = 8):
    """Write ``model``'s predictions over the store ``data`` to ``path``, in the format its
    extension names, rows in the order of ``data``.

    Parameters
    ----------
    model : fitted model with ``predict`` (or ``transform``)
    data : store, or its path / URL
    path : str or path
        ``.csv`` / ``.parquet``: a table with a ``row`` column (the input's row index) and
        ``prediction`` (class names for a classifier, values for a regressor; ``prediction_<j>``
        for several outputs), ``proba_<class>`` with ``output="proba"``, ``decision`` /
        ``decision_<class>`` with ``output="decision"``, ``feature_<name>`` for a transformer.
        ``.npy``: the same values as one array (class names as fixed-width unicode).
        ``.zarr``: a store, as :func:`predict_to_store`.
    output : {"auto", "proba", "decision"}
        ``"auto"``: predicted classes / values / features; the other two need the model's
        ``predict_proba`` / ``decision_function`` (refused before any pass otherwise).
    overwrite : bool
        Replace an existing ``path`` that kmp_dask wrote (kmp_dask/_overwrite.py: a predictions
        CSV / Parquet file it recognises; a ``.npy`` file carries no mark and is never replaced).
    batch : int
        Row chunks computed at a time (one batch in this process's memory at once).

    Returns
    -------
    dict with ``path``, ``format``, ``n_rows``, ``columns``.

    The file is written to a temporary beside ``path`` chunk by chunk and renamed into place
    when complete, so ``path`` is either absent, the old file, or the whole new one.
    """
    import os

    fmt = output_format(path)
    if fmt == "zarr":
        out = predict_to_store(model, data, path, overwrite=overwrite, client=client, provenance=provenance,
                               output=output)
        return {"path": out.url, "format": "zarr", "n_rows": out.n_rows, "columns": None}
    text = os.fspath(path)
    if "://" in text and not text.startswith("file://"):
        raise ValueError(f"output {text!r}: .csv, .parquet and .npy are written to a local path; write a .zarr "
                         "store to object storage, or a local file")
    _check_file_free(path, overwrite)
    kind = check_output_request(model, output)
    store = _open(data)
    _check_not_input(store, path)
    check_model_data(model, store)
    from .parallel._scatter import rerun_if_lost

    with _passes_on(client) as on:
        n_rows, columns = rerun_if_lost(lambda: _write_file(model, kind, output, store, path, fmt, batch, on))
    return {"path": os.path.abspath(os.path.expanduser(text)), "format": fmt, "n_rows": n_rows, "columns": columns}


def _write_file(model, kind, output, store, path, fmt, batch, on):
    """One pass of :func:`predict_to_file`: ``(n_rows, columns)`` of the file written atomically."""
    from .parallel._evaluate import chunkwise, ship_model

    values = chunkwise(model, store.to_dask("X"), _method(kind, output), _probe(store), ship_model(model, on))
    width = 64  # .npy of object labels: fixed-width unicode, as wide as the longest class name
    if values.dtype.kind == "O" and kind == "classifier":
        width = max(1, *(len(str(c)) for c in np.asarray(model.classes_).tolist()))
    n_cols = 1 if values.ndim == 1 else int(values.shape[1])
    columns = _columns(model, kind, output, n_cols)
    _write_atomic(path, lambda tmp: _WRITERS[fmt](tmp, values, columns, batch, width))
    return int(values.shape[0]), columns


def _check_file_free(path, overwrite) -> None:
    from pathlib import Path

    from ._overwrite import check_replaceable

    p = Path(path).expanduser()
    if os.path.lexists(p) and not overwrite:
        raise FileExistsError(f"output {str(path)!r} already exists; pass overwrite=True (--overwrite) to replace it")
    if os.path.lexists(p):
        check_replaceable(p, ("predictions",), option="output")


def _write_atomic(path, write) -> None:
    import uuid
    from pathlib import Path

    p = Path(path).expanduser()
    tmp = p.parent / f".{p.name}.tmp-{uuid.uuid4().hex}"
    try:
        write(tmp)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _frame(block, columns, start):
    import pandas as pd

    block = _two_d(np.asarray(block))
    df = pd.DataFrame({c: block[:, j] for j, c in enumerate(columns)})
    df.insert(0, "row", np.arange(start, start + len(block), dtype=np.int64))
    return df


def _write_csv(tmp, values, columns, batch, width=None):
    from .parallel._evaluate import computed_blocks

    start = 0
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(["row", *columns]) + "\n")
        for block in computed_blocks(values, batch):
            _frame(block, columns, start).to_csv(fh, header=False, index=False)
            start += len(block)


def _write_parquet(tmp, values, columns, batch, width=None):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing .parquet needs pyarrow: pip install pyarrow (or write .csv / .npy)") from None
    from .parallel._evaluate import computed_blocks

    writer, start = None, 0
    try:
        for block in computed_blocks(values, batch):
            table = pa.Table.from_pandas(_frame(block, columns, start), preserve_index=False)
            if writer is None:
                table = table.replace_schema_metadata(PARQUET_MARKER)
                writer = pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table.cast(writer.schema))
            start += len(block)
        if writer is None:  # no rows: an empty table with the columns
            writer = pq.ParquetWriter(tmp, pa.Table.from_pandas(_frame(np.empty((0, len(columns))), columns, 0),
                                                                preserve_index=False).schema.with_metadata(PARQUET_MARKER))
    finally:
        if writer is not None:
            writer.close()


def _write_npy(tmp, values, columns, batch, width=64):
    """One array of ``values``' shape, filled chunk by chunk through a memory map (never whole in
    memory). Labels of object or string dtype are stored as fixed-width unicode (``.npy`` never
    pickles): the width is that of ``values``' dtype, or ``width`` for objects."""
    from .parallel._evaluate import computed_blocks

    dtype = values.dtype
    if dtype.kind == "O":
        dtype = np.dtype(f"U{width}")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=tuple(values.shape))
    start = 0
    for block in computed_blocks(values, batch):
        block = np.asarray(block)
        out[start:start + len(block)] = block.astype(str) if block.dtype.kind == "O" else block
        start += len(block)
    out.flush()
    del out


_WRITERS = {"csv": _write_csv, "parquet": _write_parquet, "npy": _write_npy}
