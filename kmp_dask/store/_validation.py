"""Input validation for ingest: shapes, dtypes, finiteness, dask chunking.

Every message names the argument, what was received and how to fix it.
Checks on dask arrays use metadata only and never compute.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..exceptions import DataValidationError

_NUMERIC_KINDS = "biuf"


def resolve_dtype(dtype: Any, source_dtype: np.dtype) -> np.dtype:
    """Storage dtype of ``X``: the requested one, else float32 kept, anything else float64."""
    if dtype is not None:
        out = np.dtype(dtype)
        if out not in (np.float32, np.float64):
            raise DataValidationError(
                f"dtype must be float32 or float64; got {out}. Pass dtype='float32' or 'float64'."
            )
        return out
    return np.dtype(np.float32) if source_dtype == np.float32 else np.dtype(np.float64)


def check_numeric(name: str, dtype: np.dtype, hint: str) -> None:
    """Refuse non-numeric (object, string, complex, datetime) dtypes."""
    if np.dtype(dtype).kind not in _NUMERIC_KINDS:
        raise DataValidationError(f"{name} must be numeric; got dtype {dtype}. {hint}")


def check_X_meta(shape: tuple, dtype: np.dtype) -> None:
    """Check that ``X`` is 2-D, non-empty and numeric (metadata only)."""
    if len(shape) != 2:
        fix = "Reshape with X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample."
        raise DataValidationError(
            f"X must be 2-D with shape (n_samples, n_features); got shape {tuple(shape)}. {fix}"
        )
    if shape[0] == 0 or shape[1] == 0:
        raise DataValidationError(
            f"X is empty: got shape {tuple(shape)}; a store needs at least 1 row and 1 feature."
        )
    check_numeric(
        "X", dtype, "Encode categorical columns first, e.g. with pandas.get_dummies, "
        "and convert with X.astype('float64')."
    )


def check_y_meta(shape: tuple, dtype: np.dtype, n_rows: int) -> None:
    """Check that ``y`` has one entry per row of ``X`` and is numeric (metadata only)."""
    if len(shape) not in (1, 2):
        raise DataValidationError(
            f"y must have shape (n_samples,) or (n_samples, n_targets); got shape {tuple(shape)}."
        )
    if shape[0] != n_rows:
        raise DataValidationError(
            f"y has {shape[0]} rows but X has {n_rows}; pass one target per row of X."
        )
    check_numeric(
        "y", dtype, "Encode labels first, e.g. classes, y = np.unique(y, return_inverse=True), "
        "and pass classes=classes."
    )


def as_numpy_X(X: Any) -> np.ndarray:
    """Convert ``X`` to a validated 2-D numeric ndarray (no copy when possible)."""
    names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    arr = np.asarray(X)
    if arr.ndim == 2 and arr.size and arr.dtype.kind not in _NUMERIC_KINDS:
        _raise_non_numeric_column(arr, names)
    check_X_meta(arr.shape, arr.dtype)
    return arr


def _raise_non_numeric_column(arr: np.ndarray, names: list[str] | None) -> None:
    """Name the first column (and its first cell) of a text/object ``X`` that is not a number."""
    hint = ("Encode categorical columns first, e.g. with pandas.get_dummies, and convert with "
            "X.astype('float64').")
    for j in range(arr.shape[1]):
        col = arr[:, j]
        try:
            col.astype(np.float64)
            continue
        except (TypeError, ValueError):
            pass
        for i, value in enumerate(col):
            try:
                float(value)
            except (TypeError, ValueError):
                label = f"column {j}" + (f" ({names[j]!r})" if names else "")
                value = value.item() if isinstance(value, np.generic) else value
                raise DataValidationError(
                    f"X must be numeric; got dtype {arr.dtype}: {label} holds {value!r} at row "
                    f"{i}. {hint}"
                ) from None
    raise DataValidationError(
        f"X must be numeric; got dtype {arr.dtype} (text or objects), although every value "
        "reads as a number: convert it with X.astype('float64')."
    )


def as_numpy_y(y: Any, n_rows: int) -> np.ndarray | None:
    """Convert ``y`` to a validated ndarray with ``n_rows`` rows, or pass None through."""
    if y is None:
        return None
    arr = np.asarray(y)
    check_y_meta(arr.shape, arr.dtype, n_rows)
    return arr


def first_nonfinite(name: str, block: np.ndarray | None, offset: int) -> tuple | None:
    """``(name, global_row, column, value)`` of the first NaN/inf in a block, else None."""
    if block is None or block.dtype.kind != "f":
        return None
    bad = ~np.isfinite(block)
    if not bad.any():
        return None
    pos = np.argwhere(bad.reshape(block.shape[0], -1))[0]
    value = block.reshape(block.shape[0], -1)[pos[0], pos[1]]
    return name, int(pos[0]) + offset, int(pos[1]), float(value)


def raise_nonfinite(found: tuple) -> None:
    """Raise the error for a result of :func:`first_nonfinite`."""
    name, row, col, value = found
    raise DataValidationError(
        f"{name} contains a non-finite value ({value}) at row {row}, column {col}; "
        "remove or impute NaN/inf values before ingest."
    )


def check_dask_X(X: Any) -> None:
    """Metadata checks specific to dask ``X``: known chunk sizes, one chunk along features."""
    if any(np.isnan(c) for c in X.chunks[0]) or np.isnan(X.shape[0]):
        raise DataValidationError(
            "X has unknown chunk sizes along rows; call X.compute_chunk_sizes() first."
        )
    check_X_meta(X.shape, X.dtype)
    if len(X.chunks[1]) != 1:
        raise DataValidationError(
            f"X has {len(X.chunks[1])} chunks along axis 1; use X.rechunk({{1: -1}}) so that "
            "every chunk holds all features."
        )


def check_dask_y(y: Any, n_rows: int) -> None:
    """Metadata checks for dask ``y``."""
    if any(np.isnan(c) for c in y.chunks[0]):
        raise DataValidationError(
            "y has unknown chunk sizes along rows; call y.compute_chunk_sizes() first."
        )
    check_y_meta(y.shape, y.dtype, n_rows)


def check_append_shapes(n_features: int, has_y: bool, y_trailing, X: np.ndarray, y) -> None:
    """Check that appended rows match the store's width and target layout."""
    if X.shape[1] != n_features:
        raise DataValidationError(
            f"X has {X.shape[1]} features but the store has {n_features}; append rows "
            "with the same columns."
        )
    if has_y and y is None:
        raise DataValidationError("the store has targets y; pass y with the appended rows.")
    if not has_y and y is not None:
        raise DataValidationError("the store has no targets; append X only (y=None).")
    if y is not None and tuple(y.shape[1:]) != tuple(y_trailing):
        raise DataValidationError(
            f"y has shape {y.shape} but the store's y rows have shape {tuple(y_trailing)}."
        )


# --- checks of a store's content as its chunks are read (docs/store.md "Content checks") -----------

def read_dtype(dtype: Any) -> np.dtype | None:
    """dtype ``X`` is read as: float32 / float64 kept, bool / int / uint / float16 cast to float64
    (exactly, below 2**53), None for anything that is not a number (text, objects, complex)."""
    dtype = np.dtype(dtype)
    if dtype in (np.float32, np.float64):
        return dtype
    if dtype.kind in _NUMERIC_KINDS:
        return np.dtype(np.float64)
    return None


def _number(value: Any) -> str:
    """A value as a message shows it (``5``, ``-1``, ``0.5``, ``nan``)."""
    return str(value.item() if isinstance(value, np.generic) else value)


def _preview(classes: list | None, limit: int = 6) -> str:
    if classes is None:
        return ""
    shown = ", ".join(repr(c) for c in classes[:limit])
    return f"[{shown}{', ...' if len(classes) > limit else ''}]"


def content_check_enabled() -> bool:
    """dask config ``kmp_dask.check-finite`` (default True): whether reads scan X and y for NaN/inf."""
    try:
        import dask
    except ImportError:  # pragma: no cover - dask is a dependency
        return True
    value = dask.config.get("kmp_dask.check-finite", True)
    if isinstance(value, str):
        value = value.strip().lower() not in ("0", "false", "no", "off")
    return bool(value)


class ContentCheck:
    """What is checked in every chunk of a store as it is read (picklable, a few bytes).

    * ``X``: cast to :func:`read_dtype` (int / bool stores read as float64); with ``finite``,
      no NaN / inf.
    * ``y``: with ``finite``, no NaN / inf; in a classification store (``classes`` not None)
      every value an integer code in ``range(len(classes))`` — always checked (``y`` is small).

    A failure raises :class:`~kmp_dask.exceptions.StoreContentError` naming the store, the
    array, the chunk (index and rows), the global row and column and the value.

    Parameters
    ----------
    url : str or None
        The store's location (None: an in-memory store).
    row_chunks : sequence of int
        The storage chunk sizes along rows (chunk index and rows in messages).
    classes : list or None
        The store's ``classes`` attribute.
    finite : bool
        Scan for NaN / inf (dask config ``kmp_dask.check-finite``).
    x_dtype : numpy dtype
        dtype ``X`` is returned as.
    source : str, optional
        What the messages call the data instead of "the store URL" (e.g. ingest's input).
    """

    def __init__(self, url, row_chunks, classes=None, *, finite=True, x_dtype=np.float64, source=None):
        self.url = url
        self.source = source
        self.row_chunks = tuple(int(c) for c in row_chunks)
        self.classes = None if classes is None else list(classes)
        self.finite = bool(finite)
        self.x_dtype = np.dtype(x_dtype)
        self._starts = np.concatenate([[0], np.cumsum(self.row_chunks, dtype=np.int64)])

    def __getstate__(self):
        return {"url": self.url, "row_chunks": self.row_chunks, "classes": self.classes,
                "finite": self.finite, "x_dtype": self.x_dtype.str, "source": self.source}

    def __setstate__(self, state):
        self.__init__(state["url"], state["row_chunks"], state["classes"], finite=state["finite"],
                      x_dtype=state["x_dtype"], source=state.get("source"))

    def __call__(self, name: str, block: np.ndarray, start: int) -> np.ndarray:
        """``block`` (rows from global row ``start`` of array ``name``) cast and checked."""
        if name == "X":
            return self.X(block, start)
        return self.y(block, start)

    def X(self, block: np.ndarray, start: int) -> np.ndarray:
        """Rows of X: cast to ``x_dtype``; with ``finite``, NaN / inf refused."""
        if block.dtype != self.x_dtype:
            block = block.astype(self.x_dtype)
        if self.finite and block.size and not np.isfinite(block).all():
            _, row, col, value = first_nonfinite("X", block, start)
            self._fail("X", row, col, value, "nonfinite")
        return block

    def y(self, block: np.ndarray, start: int) -> np.ndarray:
        """Rows of y: with ``finite``, NaN / inf refused; class codes within ``classes``."""
        if not block.size:
            return block
        flat = block.reshape(block.shape[0], -1)
        if block.dtype.kind == "f":
            if (self.finite or self.classes is not None) and not np.isfinite(flat).all():
                _, row, col, value = first_nonfinite("y", flat, start)
                self._fail("y", row, col if block.ndim > 1 else None, value, "nonfinite")
            if self.classes is not None and (flat != np.floor(flat)).any():
                row, col = np.argwhere(flat != np.floor(flat))[0]
                self._fail("y", int(row) + start, int(col) if block.ndim > 1 else None, flat[row, col],
                           "notinteger")
        if self.classes is not None:
            n = len(self.classes)
            codes = flat.astype(np.int8) if flat.dtype.kind == "b" else flat
            bad = (codes < 0) | (codes >= n)
            if bad.any():
                row, col = np.argwhere(bad)[0]
                self._fail("y", int(row) + start, int(col) if block.ndim > 1 else None, codes[row, col],
                           "outofrange")
        return block

    def _fail(self, name, row, col, value, why):
        from ..exceptions import StoreContentError

        chunk = int(np.searchsorted(self._starts, row, side="right") - 1)
        a, b = int(self._starts[chunk]), int(self._starts[min(chunk + 1, len(self._starts) - 1)])
        where = self.source or (f"the store {self.url!r}" if self.url is not None else "an in-memory store")
        at = f"row {row}" + (f", column {col}" if col is not None else "") + f" (chunk {chunk}, rows {a}..{b - 1})"
        verify = (f"; `kmp-dask info --verify {self.url}` checks every chunk"
                  if self.url is not None and self.source is None else "")
        if why == "nonfinite":
            text = (f"array {name!r} of {where} holds a non-finite value ({_number(value)}) at {at}. kmp_dask "
                    "needs finite numbers: the store was not written by ingest (which refuses NaN/inf) or was "
                    "changed since. Remove or impute the NaN/inf values and write the store again "
                    f"(kmp-dask ingest SOURCE {self.url or 'TARGET'} --overwrite){verify}.")
        else:
            n = len(self.classes)
            what = (f"{_number(value)}, which is not an integer label code" if why == "notinteger"
                    else f"the label code {_number(value)}")
            subject = f"array {name!r} of {where}" if self.source is None else self.source
            listed = "its 'classes' attribute lists" if self.source is None else "classes lists"
            other = ("correct the store's 'classes' attribute" if self.source is None
                     else "pass the classes the codes refer to")
            text = (f"{subject} holds {what}, at {at}; {listed} {n} classes {_preview(self.classes)}, so a code "
                    f"must be an integer in 0..{n - 1}. Write y as indices into the classes (classes, y = "
                    f"np.unique(labels, return_inverse=True)) and ingest again with classes=classes, or {other}"
                    f"{verify}.")
        raise StoreContentError(text, url=self.url, array=name, chunk=chunk, row=int(row),
                                column=None if col is None else int(col),
                                value=value.item() if isinstance(value, np.generic) else value)
