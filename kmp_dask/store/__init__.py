"""Row-chunked dataset stores: a narrow protocol, a zarr implementation and an in-memory twin.

See docs/store.md for the on-disk layout, the attribute schema and the
atomicity and one-writer-per-chunk rules.
"""
from ._arrays import store_from_arrays
from ._base import DataStore, RowReader, StoreCorruptError, default_chunk_rows, row_partitions
from ._ingest import (
    as_store,
    create_store,
    open_store,
    store_from_blocks,
    store_from_csv,
    store_from_dask,
    store_from_libsvm,
)
from ._memory import InMemoryStore, MemoryRowReader
from ._parquet import store_from_parquet
from ._schema import SCHEMA_VERSION, RunningStats
from ._sources import check_source, default_test_target, ingest, source_kind
from ._transform import AffineReader, AffineStore
from ._zarr import ZarrRowReader, ZarrStore, check_target_free

__all__ = [
    "SCHEMA_VERSION",
    "AffineReader",
    "AffineStore",
    "DataStore",
    "InMemoryStore",
    "MemoryRowReader",
    "RowReader",
    "RunningStats",
    "StoreCorruptError",
    "ZarrRowReader",
    "ZarrStore",
    "as_store",
    "check_target_free",
    "create_store",
    "check_source",
    "default_chunk_rows",
    "default_test_target",
    "ingest",
    "open_store",
    "row_partitions",
    "store_from_arrays",
    "store_from_blocks",
    "store_from_csv",
    "store_from_dask",
    "store_from_libsvm",
    "store_from_parquet",
    "source_kind",
]
