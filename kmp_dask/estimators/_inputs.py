"""Turning what a user passes to ``fit``/``predict`` into a store, without loading big data.

* numpy / pandas / lists → scikit-learn's ``validate_data`` (all its checks apply), then an
  :class:`~kmp_dask.store.InMemoryStore` whose chunks are the engine's partitions;
* a dask array → metadata-only checks (row-only chunks, known chunk sizes, numeric dtype) and
  ``validate_data(..., skip_check_array=True)``; the array is written once to a temporary zarr
  store that workers read (and that lets a lost partition be rebuilt: docs/engine.md);
* a store object, or a path / URL of one → opened; its ``y`` is used.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings

import numpy as np
from sklearn.utils.validation import validate_data

from ..exceptions import DataValidationError
from ..parallel import encode_dask_labels
from ..store import DataStore, InMemoryStore, as_store, store_from_dask
from ..store._validation import as_numpy_X, first_nonfinite

__all__ = ["check_class_labels", "encode_labels", "is_dask_array", "is_store_like", "fit_input", "record_feature_names",
           "check_store_feature_names", "check_weights", "weights_digest", "unsupervised_input", "check_dask_X",
           "check_regression_targets", "sample_rows",
           "validate_numeric"]


def is_dask_array(X) -> bool:
    return type(X).__module__.startswith("dask.") and hasattr(X, "chunks") and hasattr(X, "dask")


def is_store_like(X) -> bool:
    return isinstance(X, (str, os.PathLike)) or isinstance(X, DataStore) and not isinstance(X, np.ndarray)


def check_dask_X(X):
    """dask-ml style metadata checks; returns X unchanged (nothing computed)."""
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got a dask array with shape {X.shape}")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if X.dtype.kind not in "fiub":
        if X.numblocks[0] and X.numblocks[1] == 1:  # one chunk read: name a text cell's column, row, value
            from ..parallel._waits import compute_bounded

            first = np.asarray(compute_bounded(X.blocks[0], what="first chunk of X")[0])
            try:
                first.astype(np.float64)
            except (TypeError, ValueError):
                as_numpy_X(first)
        raise DataValidationError(
            f"X must be numeric; got a dask array of dtype {X.dtype}. Encode categorical columns first "
            "(e.g. dask.dataframe.get_dummies) and convert with X.astype('float64')."
        )
    return X


def check_regression_targets(estimator, y) -> None:
    """A regressor's ``y`` must be numbers: say so in the estimator's words (not the store's)."""
    dtype = getattr(y, "dtype", None)
    if dtype is None:
        dtype = np.asarray(y).dtype
    if np.dtype(dtype).kind in "biuf":
        return
    if is_dask_array(y):
        example = ""
    else:
        flat = np.asarray(y).ravel()
        example = (f" (row 0 holds {flat[0].item() if isinstance(flat[0], np.generic) else flat[0]!r})"
                   if flat.size else "")
    raise DataValidationError(
        f"y must be numeric for {type(estimator).__name__}; got dtype {dtype}{example}. A regressor fits "
        "numbers: convert y with y.astype('float64'), or, for class labels, use KMPClassifier."
    )


def _store_input(estimator, X, *, need_y):
    """A store (or its path / URL) given to ``fit``: opened, its ``y`` required for a supervised fit;
    ``n_features_in_`` and ``store_feature_names_`` set from it."""
    store = as_store(X)
    if need_y and not store.has_y:
        raise ValueError(f"the store {store!r} has no 'y' array; supervised fit needs targets")
    estimator.n_features_in_ = store.n_features
    record_feature_names(estimator, store)
    return store


@contextlib.contextmanager
def fit_input(estimator, X, y, *, chunk_rows, is_classifier):
    """Yield a store holding X (and y) for ``fit``; sets ``n_features_in_``.

    Temporary stores made for dask input are deleted when the context exits.
    """
    if is_store_like(X):
        if y is not None:
            raise ValueError(
                "when X is a store (or a path to one), y is read from the store; got y as well. "
                "Pass y=None, or pass numpy/dask arrays for X and y."
            )
        yield _store_input(estimator, X, need_y=True)
        return
    record_feature_names(estimator, None)
    if is_dask_array(X):
        check_dask_X(X)
        if y is None:
            raise ValueError("y is required when X is an array")
        if not is_classifier:
            check_regression_targets(estimator, y)
        validate_data(estimator, X, skip_check_array=True)
        y = _dask_fit_labels(y)
        if is_classifier and not is_dask_array(y):  # labels in memory (any dtype): encoded here, no dask pass
            estimator._input_classes, y = encode_labels(y)
        elif is_classifier and y.dtype.kind not in "biuf":
            estimator._input_classes, y = encode_dask_labels(y, encode_labels)
        with _temporary_store(X, y, chunk_rows) as store:
            yield store
        return
    X, y = validate_numeric(
        X, validate_data, estimator, X, y, dtype=[np.float64, np.float32], multi_output=not is_classifier,
        y_numeric=not is_classifier,
    )
    if not is_classifier:
        check_regression_targets(estimator, y)
    if is_classifier:
        from sklearn.utils import column_or_1d

        y = column_or_1d(y, warn=True)
        estimator._input_classes, y = encode_labels(y)
    yield InMemoryStore(X, y, chunk_rows=chunk_rows or _default_memory_chunks(X))


def encode_labels(y):
    """``(classes, codes)`` of in-memory class labels (``np.unique``); labels of several types that
    cannot be ordered (``"a"`` and ``3``, a ``None`` among strings) are a DataValidationError naming
    them, not numpy's "'<' not supported"."""
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:
        y = np.asarray(y, dtype=object).ravel()
        kinds = {}
        for i, v in enumerate(y.tolist()):
            kinds.setdefault(type(v).__name__, (i, v))
        shown = ", ".join(f"{k} (row {i}: {v!r})" for k, (i, v) in list(kinds.items())[:4])
        raise DataValidationError(
            f"y mixes label types that cannot be ordered: {shown}. Class labels must be of one type: convert "
            "them, e.g. y.astype(str), or remove the rows without a label (None / NaN)") from None
    return classes, codes.reshape(-1)


def check_class_labels(y) -> None:
    """scikit-learn's ``check_classification_targets`` on in-memory labels, with labels of types
    that cannot be ordered named by :func:`encode_labels` (not numpy's "'<' not supported")."""
    from sklearn.utils.multiclass import check_classification_targets

    y = np.asarray(y.astype(object) if str(getattr(y, "dtype", "")) == "category" else y)
    if y.dtype == object and y.size:  # scikit-learn calls an object array of numbers "unknown": judge its values
        values = np.asarray(y.ravel().tolist())
        if values.dtype.kind in "biufU" and values.shape == (y.size,):
            y = values.reshape(y.shape)
    try:
        check_classification_targets(y)
    except TypeError:
        encode_labels(np.asarray(y, dtype=object))
        raise


def _dask_fit_labels(y):
    """``y`` given with a dask ``X``: a dask array stays lazy (a dask Series becomes its array);
    anything else — a list, a numpy object / string / bool array, a pandas Series, a pandas
    Categorical — becomes a 1-D or 2-D numpy array (a categorical → its values, as objects), so
    that no dask auto-rechunking of an object array is ever asked for."""
    if not is_dask_array(y) and type(y).__module__.startswith("dask.") and hasattr(y, "to_dask_array"):
        return y.to_dask_array(lengths=True)
    if is_dask_array(y):
        return y
    values = np.asarray(y.astype(object) if str(getattr(y, "dtype", "")) == "category" else y)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    return values


@contextlib.contextmanager
def _temporary_store(X, y, chunk_rows):
    """dask arrays written once to a temporary zarr store that workers read (deleted on exit)."""
    with tempfile.TemporaryDirectory(prefix="kmp-dask-fit-") as tmp:
        try:
            store = store_from_dask(os.path.join(tmp, "data.zarr"), X, y, chunk_rows=chunk_rows)
        except DataValidationError as e:
            raise _in_fit(e) from None
        yield store


@contextlib.contextmanager
def unsupervised_input(estimator, X, *, chunk_rows=None):
    """Yield a store holding X for an unsupervised ``fit`` (a store's ``y`` is ignored); sets
    ``n_features_in_``. Temporary stores made for dask input are deleted when the context exits."""
    if is_store_like(X):
        yield _store_input(estimator, X, need_y=False)
        return
    record_feature_names(estimator, None)
    if is_dask_array(X):
        check_dask_X(X)
        validate_data(estimator, X, skip_check_array=True)
        with _temporary_store(X, None, chunk_rows) as store:
            yield store
        return
    X = validate_numeric(X, validate_data, estimator, X, dtype=[np.float64, np.float32])
    yield InMemoryStore(X, chunk_rows=chunk_rows or _default_memory_chunks(X))


def check_weights(sample_weight, n_rows: int) -> np.ndarray | None:
    """``sample_weight`` as float64 (n_rows,), or None when absent; clear errors otherwise.

    A list, NumPy or dask array (computed: 8 bytes a row on the driver). Every weight must be
    finite and ≥ 0 and some > 0. All-ones weights are kept (the fit then runs the weighted
    sums, equal to the unweighted fit up to rounding).
    """
    if sample_weight is None:
        return None
    if is_dask_array(sample_weight):
        from ..parallel._waits import compute_bounded

        (sample_weight,) = compute_bounded(sample_weight, what="sample_weight")
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"sample_weight must be numbers, one per row; could not convert it ({e}).") from None
    if w.ndim == 0:
        raise ValueError(f"sample_weight must be an array of shape ({n_rows},), one weight per row; got the scalar "
                         f"{w.item()!r}. For equal weights pass nothing (sample_weight=None).")
    if w.ndim != 1 or len(w) != n_rows:
        raise ValueError(f"sample_weight must have shape ({n_rows},), one weight per row of X; got shape {w.shape}.")
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if len(bad):
        raise ValueError(f"sample_weight must be finite and >= 0; got {w[bad[0]]!r} at row {int(bad[0])}"
                         f"{f' (and {len(bad) - 1} more rows)' if len(bad) > 1 else ''}. Weights are row counts "
                         "or importances: use 0 to leave a row out.")
    if not np.any(w > 0):
        raise ValueError("sample_weight is zero on every row: nothing to fit. Give some rows a positive weight.")
    return w


def weights_digest(w: np.ndarray) -> str:
    """SHA-256 of the weights (identifies them in a checkpoint's header)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(w, dtype=np.float64).tobytes()).hexdigest()


def _default_memory_chunks(X) -> int:
    """Partitions for in-memory input: ~4 MiB each, at least 2048 rows."""
    return int(max(2048, (4 << 20) // max(1, X.shape[1] * X.itemsize)))


def predict_input(estimator, X):
    """Return ("numpy", array) or ("dask", dask array) for prediction. A store's or a
    DataFrame's columns are matched to the fitted names by name (:func:`match_frame_columns`)."""
    if is_store_like(X):
        store = as_store(X)
        Xd = store.to_dask("X")
        perm = check_store_feature_names(estimator, store)
        if perm is not None:
            Xd = Xd[:, perm]
        with warnings.catch_warnings():  # names compared above, not by scikit-learn (a dask array has none)
            warnings.filterwarnings("ignore", "X does not have valid feature names", UserWarning)
            validate_data(estimator, Xd, skip_check_array=True, reset=False)
        return "dask", Xd
    X = match_frame_columns(estimator, X)
    if is_dask_array(X):
        check_dask_X(X)
        validate_data(estimator, X, skip_check_array=True, reset=False)
        if X.dtype.kind == "f":  # checked chunk by chunk as the prediction computes (no extra pass)
            X = X.map_blocks(_finite_block, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))
        return "dask", X
    return "numpy", validate_numeric(X, validate_data, estimator, X, dtype=[np.float64, np.float32], reset=False)


def _store_names(store) -> list[str] | None:
    """A store's ``feature_names``, or None when they are the defaults ``x0, x1, ...`` (no names)."""
    from ..store._scoring import default_names

    return default_names(store.attrs.get("feature_names"))


def record_feature_names(estimator, store) -> None:
    """At ``fit``: keep the training store's column names as ``feature_names_in_`` (scikit-learn's
    attribute, an ndarray of str) and, as before, ``store_feature_names_``; remove a previous fit's
    when ``store`` is None or has only the default names ``x0, x1, ...`` (for numpy / DataFrame
    input scikit-learn's ``validate_data`` sets ``feature_names_in_`` itself, after this).
    Data given to predict / transform / score is matched to them by name
    (:func:`check_store_feature_names`, :func:`match_frame_columns`)."""
    names = None if store is None else _store_names(store)
    if names is None:
        estimator.__dict__.pop("store_feature_names_", None)
        if store is not None:
            estimator.__dict__.pop("feature_names_in_", None)
    else:
        estimator.store_feature_names_ = np.asarray(names, dtype=object)
        estimator.feature_names_in_ = np.asarray(names, dtype=object)


def _fitted(estimator) -> list[str] | None:
    fitted = getattr(estimator, "feature_names_in_", None)
    if fitted is None:
        fitted = getattr(estimator, "store_feature_names_", None)
    return None if fitted is None else [str(n) for n in fitted]


def check_store_feature_names(estimator, store) -> list[int] | None:
    """The store's column indices in the order the model was fitted on (None: all, as they are),
    matched by name (``feature_names_in_``); a fitted name the store lacks is a
    DataValidationError naming it, the store's other columns are left out with an
    :class:`~kmp_dask.exceptions.IgnoredColumnsWarning`. Nothing is matched when either side has
    no names (numpy / dask input, or a store with the default ``x0, x1, ...``)."""
    from ..store._scoring import ignored_note, match_columns

    fitted, names = _fitted(estimator), _store_names(store)
    if fitted is None or names is None or names == fitted:
        return None
    where = f"the store {store.url!r}" if store.url is not None else "the in-memory store"
    selected, ignored = match_columns(names, fitted, where=where, model=type(estimator).__name__)
    if ignored:
        from ..exceptions import IgnoredColumnsWarning

        warnings.warn(ignored_note(ignored, where, len(selected)), IgnoredColumnsWarning, stacklevel=4)
    return [names.index(n) for n in selected]


def match_frame_columns(estimator, X):
    """A pandas DataFrame given to predict / transform / score, its columns matched to the fitted
    names as a store's are (:func:`check_store_feature_names`): reordered, other columns left out
    (an IgnoredColumnsWarning lists them), a missing one named in a DataValidationError — never
    predicted by position when the names say otherwise. Anything else is returned as it is."""
    from ..store._scoring import ignored_note, match_columns

    fitted = _fitted(estimator)
    columns = getattr(X, "columns", None)
    if fitted is None or columns is None or not hasattr(X, "iloc"):
        return X
    if not all(isinstance(c, str) for c in columns) or [str(c) for c in columns] == fitted:
        return X  # unnamed (integer) columns: scikit-learn's own warning and positions
    selected, ignored = match_columns(list(columns), fitted, where="the DataFrame", model=type(estimator).__name__)
    if ignored:
        from ..exceptions import IgnoredColumnsWarning

        warnings.warn(ignored_note(ignored, "the DataFrame", len(selected)), IgnoredColumnsWarning, stacklevel=4)
    return X[selected]


def _finite_block(block, block_info=None):
    """``block`` unchanged, or a DataValidationError naming the first NaN/inf by its row in the
    whole dask array (a NaN row would otherwise get an arbitrary prediction)."""
    if np.isfinite(block).all():
        return block
    (r0, _), (c0, _) = block_info[0]["array-location"] if block_info else ((0, 0), (0, 0))
    _, row, col, value = first_nonfinite("X", block, r0)
    col += c0
    raise DataValidationError(
        f"X contains a non-finite value ({value}) at row {row}, column {col}; remove or impute NaN/inf "
        "values before calling predict (or transform / score)."
    )


def validate_numeric(X, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` (scikit-learn's ``validate_data``), but a text cell in ``X`` is
    reported by column, row and value (scikit-learn says only "could not convert string to float").

    Only that one failure is rewritten; every other error, and every accepted input, is
    scikit-learn's own.
    """
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        if "could not convert" not in str(e):
            raise
        try:
            as_numpy_X(X)  # names the first non-numeric column, its value and row
        except DataValidationError as named:
            raise named from e
        raise


def _in_fit(error: DataValidationError) -> DataValidationError:
    """The store layer's checks speak of ingest; during ``fit`` on dask input, say so instead."""
    return type(error)(str(error).replace("before ingest", "before calling fit"))


def sample_rows(store, n: int = 256, max_chunks: int = 4, seed: int = 0) -> np.ndarray | None:
    """Up to ``n`` rows of ``store``'s X (float64), drawn with a fixed seed (never the fit's).

    In-memory stores are sampled over all rows; other stores from at most ``max_chunks`` of
    their storage chunks (chosen at random), so the sample costs at most that many chunk reads.
    Returns None when the rows cannot be read here (e.g. a store only the workers can reach).
    """
    rng = np.random.default_rng(seed)
    sizes = np.asarray(store.row_chunks, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pick = np.arange(len(sizes))
    if not isinstance(store, InMemoryStore) and len(sizes) > max_chunks:
        pick = np.sort(rng.choice(len(sizes), max_chunks, replace=False))
    total = int(sizes[pick].sum())
    if total == 0:
        return None
    pos = np.sort(rng.choice(total, min(n, total), replace=False))
    ends = np.cumsum(sizes[pick])
    which = np.searchsorted(ends, pos, side="right")
    idx = starts[pick][which] + pos - (ends - sizes[pick])[which]
    try:
        X, _ = store.read_rows(idx)
    except (OSError, ValueError, KeyError):
        return None
    return np.asarray(X, dtype=np.float64)
