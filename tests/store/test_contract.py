"""The DataStore contract: every implementation must pass this one test class."""
from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest

from kmp_dask.exceptions import DataValidationError
from kmp_dask.store import DataStore, RowReader


class TestStoreContract:
    """Run against ZarrStore (local path and memory://) and InMemoryStore via ``make_store``."""

    def test_is_a_datastore_with_shape_and_dtype(self, make_store, xy):
        X, y = xy
        store = make_store(X, y, chunk_rows=100)
        assert isinstance(store, DataStore)
        assert (store.n_rows, store.n_features, store.dtype) == (1003, 5, np.float64)
        assert store.has_y and store.y_shape == (1003,)

    def test_row_chunks_are_storage_chunks(self, make_store, xy):
        store = make_store(*xy, chunk_rows=100)
        assert store.row_chunks == (100,) * 10 + (3,)

    def test_attrs_schema_and_statistics(self, make_store, xy):
        X, y = xy
        attrs = make_store(X, y, chunk_rows=100, classes=[0, 1, 2],
                           feature_names=list("abcde")).attrs
        assert attrs["schema_version"] == 1 and attrs["kmp_dask_store"] == "dataset"
        assert attrs["n_rows"] == 1003
        assert attrs["feature_names"] == list("abcde") and attrs["classes"] == [0, 1, 2]
        np.testing.assert_allclose(attrs["mean"], X.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(attrs["std"], X.std(axis=0), rtol=1e-12)
        assert {"source", "created", "kmp_dask_version"} <= set(attrs["provenance"])

    def test_read_range_matches_source(self, make_store, xy):
        X, y = xy
        store = make_store(X, y, chunk_rows=100)
        Xr, yr = store.read_range(95, 305)
        np.testing.assert_array_equal(Xr, X[95:305])
        np.testing.assert_array_equal(yr, y[95:305])
        assert store.read_range(7, 7)[0].shape == (0, 5)

    def test_read_range_out_of_bounds_raises(self, make_store, xy):
        store = make_store(*xy, chunk_rows=100)
        with pytest.raises(IndexError, match=r"row range \[1000, 1004\) is outside \[0, 1003\]"):
            store.read_range(1000, 1004)

    def test_read_rows_any_order_with_repeats(self, make_store, xy, rng):
        X, y = xy
        store = make_store(X, y, chunk_rows=100)
        idx = np.concatenate([rng.integers(0, 1003, size=200), [1002, 0, 0, 1002]])
        Xr, yr = store.read_rows(idx)
        np.testing.assert_array_equal(Xr, X[idx])
        np.testing.assert_array_equal(yr, y[idx])

    def test_read_rows_empty_and_invalid(self, make_store, xy):
        store = make_store(*xy, chunk_rows=100)
        Xr, yr = store.read_rows([])
        assert Xr.shape == (0, 5) and yr.shape == (0,)
        with pytest.raises(IndexError, match="row indices must lie in"):
            store.read_rows([0, 1003])

    def test_without_y(self, make_store, xy):
        X, _ = xy
        store = make_store(X, chunk_rows=100)
        assert not store.has_y and store.y_shape is None
        assert store.read_rows([3, 1])[1] is None and store.read_range(0, 2)[1] is None
        with pytest.raises(KeyError, match="no array 'y'"):
            store.to_dask("y")

    def test_multi_output_y(self, make_store, xy):
        X, _ = xy
        Y = np.stack([X[:, 0], X[:, 1] ** 2], axis=1)
        store = make_store(X, Y, chunk_rows=100)
        assert store.y_shape == (1003, 2)
        np.testing.assert_array_equal(store.read_rows([5, 2])[1], Y[[5, 2]])
        assert store.to_dask("y").chunks == (store.row_chunks, (2,))

    def test_to_dask_uses_storage_chunks(self, make_store, xy):
        X, y = xy
        store = make_store(X, y, chunk_rows=100)
        Xd = store.to_dask()
        assert Xd.chunks == (store.row_chunks, (5,))
        with dask.config.set(scheduler="synchronous"):
            np.testing.assert_array_equal(Xd.compute(), X)
            np.testing.assert_array_equal(store.to_dask("y").compute(), y)

    def test_to_dask_whole_multiples_only(self, make_store, xy):
        store = make_store(*xy, chunk_rows=100)
        assert store.to_dask(chunks=300).chunks[0] == (300, 300, 300, 103)
        with pytest.raises(ValueError, match="whole multiple of the storage chunk"):
            store.to_dask(chunks=150)

    def test_reader_pickles_and_reads(self, make_store, xy):
        X, y = xy
        store = make_store(X, y, chunk_rows=100)
        reader = pickle.loads(pickle.dumps(store.reader()))
        assert isinstance(reader, RowReader)
        np.testing.assert_array_equal(reader.read_range(10, 20)[0], X[10:20])
        np.testing.assert_array_equal(reader.read_rows([999, 3, 3])[1], y[[999, 3, 3]])

    def test_float32_is_preserved(self, make_store, xy):
        X, y = xy
        store = make_store(X.astype(np.float32), y, chunk_rows=100)
        assert store.dtype == np.float32 and store.read_range(0, 3)[0].dtype == np.float32
        np.testing.assert_allclose(store.attrs["mean"], X.astype(np.float32).mean(0, dtype=np.float64))

    def test_append_updates_rows_and_statistics(self, make_store, xy):
        X, y = xy
        store = make_store(X[:950], y[:950], chunk_rows=100)
        store.append(X[950:], y[950:])
        assert store.n_rows == 1003 and store.attrs["n_rows"] == 1003
        assert store.row_chunks == (100,) * 10 + (3,)
        np.testing.assert_array_equal(store.read_range(0, 1003)[0], X)
        np.testing.assert_array_equal(store.read_rows([1002, 949, 950])[1], y[[1002, 949, 950]])
        np.testing.assert_allclose(store.attrs["mean"], X.mean(axis=0), rtol=1e-10)
        np.testing.assert_allclose(store.attrs["std"], X.std(axis=0), rtol=1e-10)

    def test_append_rejects_mismatches(self, make_store, xy):
        X, y = xy
        store = make_store(X, y, chunk_rows=100)
        with pytest.raises(DataValidationError, match="X has 4 features but the store has 5"):
            store.append(X[:3, :4], y[:3])
        with pytest.raises(DataValidationError, match="pass y with the appended rows"):
            store.append(X[:3])
        with pytest.raises(DataValidationError, match=r"non-finite value \(nan\) at row 1004, column 2"):
            store.append(np.where(np.arange(15).reshape(3, 5) == 7, np.nan, 1.0), y[:3])
        assert store.n_rows == 1003
