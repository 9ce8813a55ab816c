"""Ingest NumPy files: one ``.npy`` (X, labels from another ``.npy``), one ``.npz`` (arrays ``X``
and optionally ``y``), or a directory of them concatenated in file-name order.

Files are read lazily, one storage chunk's worth at a time: ``.npy`` through a read-only memory
map sliced per chunk inside the writing task, ``.npz`` members (zip entries, which cannot be
mapped) whole, one file per task. Shapes come from the array headers, so nothing is loaded to
plan the store. The store is written by :func:`store_from_dask` (atomically, one task per chunk).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

__all__ = ["store_from_arrays"]


def _npz_header(path: Path, key: str):
    """(shape, dtype) of member ``key`` of the .npz at ``path``, or None if absent."""
    with zipfile.ZipFile(path) as z:
        name = f"{key}.npy"
        if name not in z.namelist():
            return None
        with z.open(name) as fh:
            version = np.lib.format.read_magic(fh)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(fh)
    return _checked_header(f"{path}[{key!r}]", shape, dtype)


def _checked_header(where, shape, dtype):
    """Refuse object arrays (reading them would unpickle) and 0-d arrays before any data is read."""
    from ..exceptions import DataValidationError

    if np.dtype(dtype).hasobject:
        raise DataValidationError(f"source {str(where)!r} holds an object array (dtype object), which kmp_dask does "
                                  "not read (loading it would unpickle); save a numeric array, e.g. "
                                  "np.save(path, X.astype('float64'))")
    if len(shape) == 0:
        raise DataValidationError(f"source {str(where)!r} holds a 0-d array (one value, shape ()); save a 2-D "
                                  "array of rows x features (labels: a 1-D array of one label per row)")
    return shape, dtype


def _load_member(path: str, key: str):
    with np.load(path, allow_pickle=False) as f:
        return f[key]


def _npz_arrays(path: Path):
    import dask
    import dask.array as da

    hx = _npz_header(path, "X")
    if hx is None:
        raise ValueError(f"source {str(path)!r}: an .npz file must hold an array named 'X' (and optionally 'y')")
    hy = _npz_header(path, "y")
    X = da.from_delayed(dask.delayed(_load_member)(str(path), "X"), shape=hx[0], dtype=hx[1])
    y = None if hy is None else da.from_delayed(dask.delayed(_load_member)(str(path), "y"), shape=hy[0], dtype=hy[1])
    return X, y


def _npy_array(path: Path, chunk_rows: int):
    import dask.array as da

    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(fh)
    except ValueError as exc:
        from ..exceptions import DataValidationError

        raise DataValidationError(f"source {str(path)!r} is not a .npy file ({exc}); write one with "
                                  "numpy.save(path, X)") from None
    _checked_header(path, shape, dtype)
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    return da.from_array(arr, chunks=(chunk_rows,) + arr.shape[1:])


def _files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    files = sorted(p for p in source.iterdir() if p.suffix in (".npy", ".npz"))
    if not files:
        raise FileNotFoundError(f"source {str(source)!r}: the directory holds no .npy or .npz files")
    kinds = {p.suffix for p in files}
    if len(kinds) > 1:
        raise ValueError(f"source {str(source)!r}: mixes .npy and .npz files; use one kind")
    return files


def arrays_dask(source, *, labels=None, chunk_rows=None):
    """``(X, y, provenance)``: the NumPy file(s) at ``source`` as lazy dask arrays (see the module doc)."""
    import dask.array as da

    src = Path(source)
    if not src.exists():
        raise FileNotFoundError(f"source {str(src)!r} does not exist")
    files = _files(src)
    rows = chunk_rows or 65536
    if files[0].suffix == ".npz":
        if labels is not None:
            raise ValueError("labels: .npz sources carry their labels as the array 'y'; drop --labels")
        pairs = [_npz_arrays(p) for p in files]
        if len({y is None for _, y in pairs}) > 1:
            raise ValueError(f"source {str(src)!r}: some .npz files have 'y' and some do not")
        X = da.concatenate([x for x, _ in pairs])
        y = None if pairs[0][1] is None else da.concatenate([y for _, y in pairs])
    else:
        X = da.concatenate([_npy_array(p, rows) for p in files])
        y = None if labels is None else _npy_array(Path(labels), rows)
        if y is not None and y.shape[0] != X.shape[0]:
            raise ValueError(f"labels: {labels!r} has {y.shape[0]} rows but the source has {X.shape[0]}")
    if X.ndim != 2:
        raise ValueError(f"source {str(src)!r}: X must be 2-D (rows, features); got shape {X.shape}")
    return X, y, {"source": str(src), "files": [p.name for p in files]}


def store_from_arrays(target, source, *, labels=None, chunk_rows=None, overwrite=False, classes=None,
                      n_rows=None):
    """Write the NumPy file(s) at ``source`` (the first ``n_rows`` rows, if given) to a zarr store at
    ``target`` (see the module doc)."""
    from ._ingest import store_from_dask
    from ._zarr import check_target_free

    check_target_free(target, overwrite=overwrite)
    X, y, prov = arrays_dask(source, labels=labels, chunk_rows=chunk_rows)
    if n_rows is not None:
        X, y = X[: int(n_rows)], None if y is None else y[: int(n_rows)]
    return store_from_dask(target, X, y, chunk_rows=chunk_rows, overwrite=overwrite, classes=classes, provenance=prov)
