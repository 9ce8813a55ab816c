"""Evaluate a fitted model on labelled data, or write its predictions to a store or a file.

The data is a store or any file ``ingest`` reads — CSV/TSV, Parquet, ``.npy`` / ``.npz``,
LIBSVM, local or at an fsspec URL — with its columns matched to the model's by name
(:mod:`kmp_dask.store._scoring`). All run chunk by chunk on the dask workers: the model's
outputs are lazy dask arrays, one task per row chunk (:func:`kmp_dask.parallel._evaluate.chunkwise`,
the only data pass), reduced block by block against the labels, written to zarr, or streamed in
row order into a CSV, Parquet or ``.npy`` file (:func:`predict_to_file`). A store's rows are
read by the tasks (never gathered on the driver); a file is read here with the ingest's readers,
a few row blocks at a time (:func:`~kmp_dask.parallel._evaluate.data_parts`), each sent to the
workers for its pass — no store is written first. The CLI's ``evaluate`` and ``predict`` commands
are these functions. Any model with ``predict`` works: kmp_dask's estimators, a compressed model,
scikit-learn's.

Labels: a store keeps class *codes* in ``y`` and their names in the ``classes`` attribute;
a model fitted on a store has those names as ``classes_``. Rows are matched by name, so a
test store whose class list differs from the training store's (another order, a class
missing) is still scored correctly; a label the model never saw counts as an error. A store none
of whose class names is among the model's classes is refused before any pass (its codes would
mean nothing to the model).
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


_UNSET = object()


def fitted_names(model):
    """The column names ``model`` was fitted on (``feature_names_in_``, else the older
    ``store_feature_names_``), or None."""
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = getattr(model, "store_feature_names_", None)
    return names


def scoring_data(model, data, *, label=_UNSET, labels=None, delimiter=None, header=True, warn=True):
    """``data`` (a store, its path / URL, or any file ``ingest`` reads) as the
    :class:`~kmp_dask.store._scoring.ScoringData` ``model`` scores: its columns matched to the
    model's by name (reordered; other columns left out and listed in one
    :class:`~kmp_dask.exceptions.IgnoredColumnsWarning` when ``warn``), the number of columns
    checked. Reads a file's header only. ``label``: a CSV / Parquet file's label column."""
    from .exceptions import DataValidationError
    from .store._scoring import ScoringData, open_scoring

    if not isinstance(data, ScoringData):
        n = getattr(model, "n_features_in_", None)
        kw = {} if label is _UNSET else {"label": label}
        data = open_scoring(data, fitted_names=fitted_names(model), model=type(model).__name__, labels=labels,
                            delimiter=delimiter, header=header, n_features=n, **kw)
        if warn:
            data.warn_ignored()
    n = getattr(model, "n_features_in_", None)
    if n is not None and data.n_features is not None and int(n) != data.n_features:
        raise DataValidationError(
            f"data {data.name} has {data.n_features} features but {type(model).__name__} was fitted on {int(n)}; "
            "score data with the training data's columns (named columns: in any order; a label column among "
            "unnamed ones: name it with --label COL)")
    return data


def check_model_data(model, store) -> None:
    """Before any pass: ``store`` has the columns ``model`` was fitted on (count, and names when
    both have them: matched by name, in any order). One clear error naming them otherwise."""
    scoring_data(model, store, warn=False)


def _label_names(y, classes):
    """Labels as a dask array of class names (codes with ``classes``) or values."""
    import dask.array as da

    if classes is None:
        return y
    names = np.asarray(classes)
    return da.map_blocks(_names_block, y, names, dtype=names.dtype)


def _names_block(codes, names):
    return names.take(np.asarray(codes, dtype=np.int64))


def _check_classes(model, data) -> None:
    """Data with class names shares at least one with the model's ``classes_`` (by value or
    by name), else its codes cannot be matched to the model's classes: refused before the pass."""
    from .parallel._evaluate import _codes_block

    names = data.classes
    if names is None:
        return
    classes = np.asarray(model.classes_)
    if (_codes_block(np.asarray(names), classes) >= 0).any():
        return
    raise ValueError(
        f"data {data.name} has the classes {list(map(str, names))[:10]} and {type(model).__name__} the classes "
        f"{[str(c) for c in classes.tolist()][:10]}: no class name in common, so the store's labels cannot be "
        "matched to the model's. Evaluate on a store whose 'classes' attribute names the labels the model was "
        "trained on (ingest it with the same label column)")


def check_evaluate(model, data) -> str:
    """Everything :func:`evaluate` checks before its pass (the CLI calls it before a cluster
    starts): a model that predicts, labelled data with its columns, class names in common.
    Returns the model's kind."""
    kind = model_kind(model)
    if kind == "transformer":
        raise ValueError(f"model is a {type(model).__name__} (a transformer): there is nothing to score; "
                         "write its features with predict instead")
    data = scoring_data(model, data, warn=False)
    if not data.has_y:
        if data.is_stream and data.plan.source in ("csv", "parquet"):
            cols = getattr(data.plan, "feature_names", None) or []
            raise ValueError(f"evaluate needs the labels of {data.name}: name its label column with --label COL "
                             f"(label= in Python); columns read as features: {[str(c) for c in cols][:20]}")
        raise ValueError(f"data {data.name} has no labels (y); evaluate needs labelled data")
    if kind == "classifier":
        _check_classes(model, data)
    return kind


@contextlib.contextmanager
def _passes_on(client, store=None):
    """The client :func:`~kmp_dask.parallel.resolve_client` gives for ``client`` (None: in process),
    current for the passes inside: the model is scattered with it, so its graphs are computed there.
    A ``store`` its workers cannot see (``memory://``) is refused before any pass."""
    from .parallel import resolve_client
    from .parallel._setup import check_store_visible

    with resolve_client(client, in_memory=False) as c:
        check_store_visible(c, store)
        with c.as_current() if c is not None else contextlib.nullcontext():
            yield c


def evaluate(model, data, *, client=None, label=_UNSET) -> dict:
    """Metrics of ``model`` on labelled ``data``: a store (a path, URL or DataStore) or any file
    ``ingest`` reads (a CSV / Parquet file with its label column named by ``label``).

    Classifier: ``accuracy``, ``per_class`` (precision, recall, f1, support), ``confusion``
    (rows true, columns predicted, in ``classes`` order) and ``n_unknown_labels``. Regressor:
    ``r2``, ``mse``, ``mae`` (averaged over outputs) and ``n_rows``. The data's labels are
    matched to the model's ``classes_`` by name; data sharing no class name with the model
    is refused (ValueError), as is data without the model's columns (:func:`scoring_data`).
    """
    from .parallel._scatter import rerun_if_lost

    data = scoring_data(model, data, label=label)
    kind = check_evaluate(model, data)
    with _passes_on(client, data) as on:
        return rerun_if_lost(lambda: _metrics(model, kind, data, on))


def _metrics(model, kind, data, on) -> dict:
    """One pass of :func:`evaluate`: per part of the data, the confusion counts or the sums behind
    R² / MSE / MAE, added up."""
    from .parallel._evaluate import chunkwise, confusion_counts, data_parts, label_codes, regression_sums, ship_model

    m, total = ship_model(model, on), None
    classes = np.asarray(getattr(model, "classes_", []))
    for X, y, probe in data_parts(data, on):
        pred = chunkwise(model, X, "predict", probe, m)
        y = _label_names(y, data.classes)
        if kind == "classifier":
            part = confusion_counts(label_codes(pred, classes), label_codes(y, classes), len(classes))
        else:
            part = regression_sums(pred, y)
        total = part if total is None else (total + part if kind == "classifier" else
                                            {k: total[k] + part[k] for k in total})
    if kind == "classifier":
        return _classification_metrics(classes, total)
    return _regression_metrics(total)


def _classification_metrics(classes, counts) -> dict:
    n_rows = int(counts.sum())
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


def _regression_metrics(s) -> dict:
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
        return (f" (loss={getattr(model.loss, 'name', model.loss)!r}; probabilities need loss='logistic', or a "
                "model trained with probability=True: kmp-dask train ... --probability true)")
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
        return ([f"decision_{c}" for c in classes] if len(classes) == n_cols
                else [f"decision_{j}" for j in range(n_cols)])
    if kind == "transformer":
        try:
            names = [str(n) for n in model.get_feature_names_out()]
        except Exception:  # noqa: BLE001 - no names: numbered
            names = []
        return [f"feature_{n}" for n in names] if len(names) == n_cols else [f"feature_{j}" for j in range(n_cols)]
    return ["prediction"] if n_cols == 1 else [f"prediction_{j}" for j in range(n_cols)]


def predict_to_store(model, data, target, *, overwrite: bool = False, client=None, provenance=None,
                     output: str = "auto", label=_UNSET):
    """Write ``model``'s output over ``data`` (a store or any file ``ingest`` reads, columns
    matched by name: :func:`scoring_data`) to a new zarr store at ``target``.

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
    data = scoring_data(model, data, label=label)
    _check_not_input(data, target)
    prov = {"command": "predict", "model": type(model).__name__, "source": data.url, **(provenance or {})}

    def write(on):
        from .parallel._evaluate import data_parts, ship_model

        m = ship_model(model, on)  # one model for all passes
        if not data.is_stream:
            X, y, classes = _outputs(model, kind, next(data_parts(data, on)), m, output, data.classes)
            return store_from_dask(target, X, y, classes=classes, overwrite=overwrite, provenance=prov)
        return _stream_to_store(model, kind, data, target, m, output, on, overwrite, prov)

    with _passes_on(client, data) as on:
        return rerun_if_lost(lambda: write(on))


def _stream_to_store(model, kind, data, target, m, output, on, overwrite, prov):
    """:func:`predict_to_store` of streamed data: the outputs of each part, computed a batch of
    blocks at a time, written in row order by the ingest's single writer (``write_plan``)."""
    from .parallel._evaluate import data_parts
    from .parallel._waits import compute_bounded
    from .store._ingest import SourcePlan, write_plan

    found = {}

    def blocks():
        for part in data_parts(data, on):
            X, y, classes = _outputs(model, kind, part, m, output, data.classes)
            found["classes"] = classes
            ys = [None] * X.numblocks[0] if y is None else y.to_delayed().ravel()
            pairs = list(zip(X.rechunk({1: -1}).to_delayed().ravel(), ys, strict=False))
            for i in range(0, len(pairs), 8):
                yield from compute_bounded(*pairs[i:i + 8], what="batch of predicted blocks")

    it = blocks()
    first = next(it)  # the classes are known once the first part's outputs are
    plan = SourcePlan(blocks=lambda: _chain_first(first, it), feature_names=None, classes=found.get("classes"),
                      provenance=prov, source="predict", chunk_rows=int(data.plan.chunk_rows))
    return write_plan(target, plan, overwrite=overwrite)


def _chain_first(first, rest):
    yield first
    yield from rest


def _check_not_input(data, target) -> None:
    url = getattr(data, "url", None)
    if isinstance(url, str) and "://" not in url and _same_path(url, target):
        what = "store" if getattr(data, "store", None) is not None else "file"
        raise ValueError(f"target {str(target)!r} is the {what} the predictions are computed from; write them to "
                         f"another path (replacing the input {what} would lose it)")


def _same_path(a, b) -> bool:
    import os

    b = os.fspath(b)
    b = b[len("file://"):] if b.startswith("file://") else b
    return "://" not in b and os.path.realpath(a) == os.path.realpath(os.path.expanduser(b))


def _two_d(a):
    return a.reshape(a.shape[0], 1) if a.ndim == 1 else a


def _outputs(model, kind, part, m, output="auto", data_classes=None):
    """``(X, y, classes)`` a predictions store holds, as lazy dask arrays, for one part
    ``(X, y, probe)`` of the data (:func:`~kmp_dask.parallel._evaluate.data_parts`)."""
    from .parallel._evaluate import chunkwise, label_codes

    X, y_in, probe = part
    if kind == "transformer":
        return _two_d(chunkwise(model, X, "transform", probe, m)), y_in, data_classes
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
                    provenance=None, batch: int = 8, label=_UNSET):
    """Write ``model``'s predictions over ``data`` to ``path``, in the format its extension
    names, rows in the order of ``data``.

    Parameters
    ----------
    model : fitted model with ``predict`` (or ``transform``)
    data : store, or its path / URL, or any file ``ingest`` reads (CSV/TSV, Parquet, ``.npy`` /
        ``.npz``, LIBSVM; local or an fsspec URL), read chunk by chunk, its columns matched to the
        model's by name (:func:`scoring_data`; or a :class:`~kmp_dask.store._scoring.ScoringData`)
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
        Row chunks computed at a time (one batch in this process's memory at once; a file's
        blocks are read and sent to the workers as many at a time).
    label : column name or position, optional
        A CSV / Parquet file's label column, left out of the features (an unnamed label column
        is left out too when the model's columns are named: it is not one of them).

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
                               output=output, label=label)
        return {"path": out.url, "format": "zarr", "n_rows": out.n_rows, "columns": None}
    text = os.fspath(path)
    if "://" in text and not text.startswith("file://"):
        raise ValueError(f"output {text!r}: .csv, .parquet and .npy are written to a local path; write a .zarr "
                         "store to object storage, or a local file")
    _check_file_free(path, overwrite)
    kind = check_output_request(model, output)
    data = scoring_data(model, data, label=label)
    _check_not_input(data, path)
    from .parallel._scatter import rerun_if_lost

    with _passes_on(client, data) as on:
        n_rows, columns = rerun_if_lost(lambda: _write_file(model, kind, output, data, path, fmt, batch, on))
    return {"path": os.path.abspath(os.path.expanduser(text)), "format": fmt, "n_rows": n_rows, "columns": columns}


def _write_file(model, kind, output, data, path, fmt, batch, on):
    """One pass of :func:`predict_to_file`: ``(n_rows, columns)`` of the file written atomically."""
    from .exceptions import DataValidationError
    from .parallel._evaluate import chunkwise, computed_blocks, data_parts, ship_model

    m, method = ship_model(model, on), _method(kind, output)

    def blocks():
        for X, _, probe in data_parts(data, on, batch):
            yield from (np.asarray(b) for b in computed_blocks(chunkwise(model, X, method, probe, m), batch))

    it = blocks()
    first = next(it, None)
    if first is None:
        raise DataValidationError(f"no rows to predict: {data.name} has no rows")
    width = 64  # .npy of labels: fixed-width unicode, as wide as the longest class name
    if first.dtype.kind in "OU" and kind == "classifier":
        width = max(1, *(len(str(c)) for c in np.asarray(model.classes_).tolist()))
    columns = _columns(model, kind, output, 1 if first.ndim == 1 else int(first.shape[1]))
    n_rows = []
    _write_atomic(path, lambda tmp: n_rows.append(_WRITERS[fmt](tmp, _chain_first(first, it), columns, width)))
    return int(n_rows[0]), columns


def _check_file_free(path, overwrite) -> None:
    from pathlib import Path

    from ._overwrite import check_replaceable
    from ._temporaries import check_output_path

    check_output_path(path, "output")
    p = Path(path).expanduser()
    if os.path.lexists(p) and not overwrite:
        raise FileExistsError(f"output {str(path)!r} already exists; pass overwrite=True (--overwrite) to replace it")
    if os.path.lexists(p):
        check_replaceable(p, ("predictions",), option="output")


def _write_atomic(path, write) -> None:
    """``write(tmp)`` a locked temporary beside ``path`` (kmp_dask/_temporaries.py), then rename it
    over ``path``; the temporaries of earlier writes to ``path`` that were killed are removed first."""
    from pathlib import Path

    from ._temporaries import remove_stale, temporary

    p = Path(path).expanduser()
    remove_stale(p)
    with temporary(p) as tmp:
        write(tmp)
        os.replace(tmp, p)


def _frame(block, columns, start):
    import pandas as pd

    block = _two_d(np.asarray(block))
    df = pd.DataFrame({c: block[:, j] for j, c in enumerate(columns)})
    df.insert(0, "row", np.arange(start, start + len(block), dtype=np.int64))
    return df


def _write_csv(tmp, blocks, columns, width=None) -> int:
    start = 0
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(["row", *columns]) + "\n")
        for block in blocks:
            _frame(block, columns, start).to_csv(fh, header=False, index=False)
            start += len(block)
    return start


def _write_parquet(tmp, blocks, columns, width=None) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing .parquet needs pyarrow: pip install pyarrow (or write .csv / .npy)") from None

    writer, start = None, 0
    try:
        for block in blocks:
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
    return start


NPY_HEADER_BYTES = 256
"""Bytes of the ``.npy`` header :func:`_write_npy` reserves (a multiple of 64, as NumPy aligns)."""


def _npy_header(dtype, shape) -> bytes:
    """A ``.npy`` format 1.0 header for ``dtype`` and ``shape``, padded to :data:`NPY_HEADER_BYTES`."""
    text = (f"{{'descr': {np.lib.format.dtype_to_descr(dtype)!r}, 'fortran_order': False, "
            f"'shape': {tuple(int(k) for k in shape)!r}, }}")
    head = text.ljust(NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode("latin1")


def _write_npy(tmp, blocks, columns, width=64) -> int:
    """One array, appended block by block (never whole in memory) behind a reserved header that is
    written last, when the number of rows is known (a streamed file's is not before its end).
    Labels of object or string dtype are stored as fixed-width unicode of ``width`` characters
    (``.npy`` never pickles)."""
    n, dtype, tail = 0, None, ()
    with open(tmp, "wb") as fh:
        fh.write(b"\0" * NPY_HEADER_BYTES)
        for block in blocks:
            block = np.asarray(block)
            if dtype is None:
                dtype, tail = (np.dtype(f"U{width}") if block.dtype.kind in "OU" else block.dtype), block.shape[1:]
            out = block.astype(str).astype(dtype) if block.dtype.kind in "OU" else block.astype(dtype, copy=False)
            fh.write(np.ascontiguousarray(out).tobytes())
            n += len(block)
        fh.seek(0)
        fh.write(_npy_header(dtype if dtype is not None else np.dtype(np.float64), (n, *tail)))
    return n


_WRITERS = {"csv": _write_csv, "parquet": _write_parquet, "npy": _write_npy}
