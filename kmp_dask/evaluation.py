"""Evaluate a fitted model on a labelled store, or write its predictions to a new store.

Both run chunk by chunk on the dask workers (the store's rows are never gathered on the
driver): the model's predictions over the store are a lazy dask array, reduced block by
block against the store's labels (:mod:`kmp_dask.parallel._evaluate`) or written to zarr one
storage chunk per task (:func:`kmp_dask.store.store_from_dask`). The CLI's ``evaluate`` and
``predict`` commands are these two functions.

Labels: a store keeps class *codes* in ``y`` and their names in the ``classes`` attribute;
a model fitted on a store has those names as ``classes_``. Rows are matched by name, so a
test store whose class list differs from the training store's (another order, a class
missing) is still scored correctly; a label the model never saw counts as an error.
"""

from __future__ import annotations

import numpy as np

__all__ = ["evaluate", "predict_to_store", "model_kind"]


def model_kind(model) -> str:
    """``"classifier"``, ``"regressor"`` or ``"transformer"``."""
    if hasattr(model, "classes_") and hasattr(model, "predict"):
        return "classifier"
    if hasattr(model, "transform") and not hasattr(model, "predict"):
        return "transformer"
    if hasattr(model, "predict"):
        return "regressor"
    raise TypeError(f"model must be a fitted kmp_dask estimator; got {type(model).__name__}")


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
    return da.map_blocks(lambda b: names.take(np.asarray(b, dtype=np.int64)), y, dtype=names.dtype)


def evaluate(model, data, *, client=None) -> dict:
    """Metrics of ``model`` on the labelled store ``data`` (a path, URL or DataStore).

    Classifier: ``accuracy``, ``per_class`` (precision, recall, f1, support), ``confusion``
    (rows true, columns predicted, in ``classes`` order) and ``n_unknown_labels``. Regressor:
    ``r2``, ``mse``, ``mae`` (averaged over outputs) and ``n_rows``.
    """
    from .parallel import resolve_client
    from .store import open_store

    kind = model_kind(model)
    if kind == "transformer":
        raise ValueError(f"model is a {type(model).__name__} (a transformer): there is nothing to score; "
                         "write its features with predict instead")
    store = open_store(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else data
    with resolve_client(client, in_memory=False):
        y = _store_labels(store)
        pred = model.predict(store)
        if kind == "classifier":
            return _classification_metrics(model.classes_, pred, y, store.n_rows)
        return _regression_metrics(pred, y)


def _classification_metrics(classes, pred, y, n_rows) -> dict:
    from .parallel._evaluate import confusion_counts, label_codes

    classes = np.asarray(classes)
    counts = confusion_counts(label_codes(pred, classes), label_codes(y, classes), len(classes))
    k = len(classes)
    cm = counts[:k, :k]
    tp = np.diag(cm).astype(float)
    support = counts[:k].sum(axis=1)
    predicted = counts[:, :k].sum(axis=0)
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


def predict_to_store(model, data, target, *, overwrite: bool = False, client=None, provenance=None):
    """Write ``model``'s output over the store ``data`` to a new zarr store at ``target``.

    Classifier: ``X`` = decision values (n, n_outputs), ``y`` = predicted class (codes, with the
    model's classes as the store's ``classes``). Regressor: ``X`` = predictions (n, n_outputs),
    ``y`` = the predictions too. Transformer: ``X`` = the features, ``y`` = ``data``'s labels
    (so the output trains a downstream model directly). Written atomically; an existing
    ``target`` is refused unless ``overwrite``.
    """
    from .parallel import resolve_client
    from .store import check_target_free, open_store, store_from_dask

    check_target_free(target, overwrite=overwrite)
    kind = model_kind(model)
    store = open_store(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else data
    url = getattr(store, "url", None)
    if overwrite and isinstance(url, str) and "://" not in url and _same_path(url, target):
        raise ValueError(f"target {str(target)!r} is the store the predictions are computed from; write them to "
                         "another path (replacing the input store would lose it)")
    prov = {"command": "predict", "model": type(model).__name__, "source": store.url, **(provenance or {})}
    with resolve_client(client, in_memory=False):
        X, y, classes = _outputs(model, kind, store)
        return store_from_dask(target, X, y, classes=classes, overwrite=overwrite, provenance=prov)


def _same_path(a, b) -> bool:
    import os

    b = os.fspath(b)
    b = b[len("file://"):] if b.startswith("file://") else b
    return "://" not in b and os.path.realpath(a) == os.path.realpath(os.path.expanduser(b))


def _outputs(model, kind, store):
    import dask.array as da

    from .parallel._evaluate import label_codes

    def lazy(a):
        return a if isinstance(a, da.Array) else da.from_array(np.asarray(a), chunks=(store.chunk_rows,) + np.shape(a)[1:])

    def two_d(a):
        return a.reshape(a.shape[0], 1) if a.ndim == 1 else a

    if kind == "transformer":
        y = store.to_dask("y") if store.has_y else None
        return two_d(lazy(model.transform(store))), y, store.attrs.get("classes")
    if kind == "regressor":
        P = lazy(model.predict(store))
        return two_d(P), P, None
    F = two_d(lazy(model.decision_function(store))) if hasattr(model, "decision_function") else None
    codes = label_codes(lazy(model.predict(store)), model.classes_)
    if F is None:
        F = two_d(codes.astype(np.float32))
    return F, codes.astype(np.int32), [str(c) for c in np.asarray(model.classes_).tolist()]
