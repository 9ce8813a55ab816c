"""Ingest from NumPy, dask, CSV and LIBSVM; atomicity; overwrite; validation messages."""
from __future__ import annotations

import multiprocessing
import os
import pickle

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from kmp_dask.exceptions import DataValidationError, StoreExistsError, StoreSchemaError
from kmp_dask.store import (
    InMemoryStore,
    ZarrStore,
    as_store,
    create_store,
    default_chunk_rows,
    open_store,
    row_partitions,
    store_from_blocks,
    store_from_csv,
    store_from_dask,
    store_from_libsvm,
)
from kmp_dask.store._base import gather_rows


def _siblings(path):
    return sorted(os.listdir(os.path.dirname(path)))


def _with_nan(X, row, col):
    X = X.copy()
    X[row, col] = np.nan
    return X


# --- NumPy ----------------------------------------------------------------------------------


def test_create_store_roundtrip_and_layout(tmp_path, xy):
    X, y = xy
    store = create_store(tmp_path / "a.zarr", X, y, chunk_rows=100, provenance={"note": "t"})
    reopened = open_store(tmp_path / "a.zarr")
    np.testing.assert_array_equal(reopened.read_range(0, 1003)[0], X)
    group = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert group["X"].chunks == (100, 5) and group["y"].chunks == (100,)
    assert reopened.attrs["provenance"]["note"] == "t"
    assert reopened.attrs["provenance"]["source"] == "numpy"
    assert store.url == str(tmp_path / "a.zarr")


def test_default_chunking_is_about_16_mib_and_clamped():
    assert default_chunk_rows(10**8, 54, 4) == 16 * 2**20 // (54 * 4)
    assert default_chunk_rows(10**8, 1, 8) == 2**20
    assert default_chunk_rows(10**8, 10**6, 8) == 1024
    assert default_chunk_rows(500, 54, 4) == 500


def test_default_chunk_rows_never_exceed_n(tmp_path, xy):
    store = create_store(tmp_path / "a.zarr", *xy)
    assert store.row_chunks == (1003,)


def test_integer_X_is_stored_as_float64(tmp_path):
    store = create_store(tmp_path / "a.zarr", np.arange(12).reshape(6, 2))
    assert store.dtype == np.float64 and store.attrs["feature_names"] == ["x0", "x1"]


def test_memory_url_roundtrip(memory_url, xy):
    X, y = xy
    create_store(memory_url, X, y, chunk_rows=128)
    store = open_store(memory_url)
    np.testing.assert_array_equal(store.read_rows([5, 1000])[0], X[[5, 1000]])


# --- helpers: gather_rows and row_partitions ---------------------------------------------------


def test_gather_rows_reads_each_touched_chunk_once(xy):
    X, _ = xy
    calls = []

    def read_range(a, b):
        calls.append((a, b))
        return X[a:b], None

    idx = [950, 5, 7, 951, 5, 120]
    Xr, _ = gather_rows(read_range, idx, [100] * 10 + [3])
    np.testing.assert_array_equal(Xr, X[idx])
    assert calls == [(5, 8), (120, 121), (950, 952)]


def test_row_partitions_are_contiguous_aligned_and_balanced():
    chunks = [100] * 10 + [3]
    parts = row_partitions(chunks, 3)
    assert parts[0][0] == 0 and parts[-1][1] == 1003
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    assert all(start % 100 == 0 for start, _ in parts)
    assert max(b - a for a, b in parts) - min(b - a for a, b in parts) <= 100


def test_row_partitions_more_partitions_than_chunks():
    assert row_partitions([5, 5, 2], 10) == [(0, 5), (5, 10), (10, 12)]
    assert row_partitions([5, 5, 2], 1) == [(0, 12)]
    with pytest.raises(ValueError, match="n_partitions must be >= 1; got 0"):
        row_partitions([5], 0)


# --- dask ----------------------------------------------------------------------------------


def test_store_from_dask_rechunks_and_matches_numpy(tmp_path, xy):
    X, y = xy
    Xd = da.from_array(X, chunks=(77, 5))
    store = store_from_dask(tmp_path / "d.zarr", Xd, da.from_array(y, chunks=50), chunk_rows=100)
    assert store.row_chunks == (100,) * 10 + (3,)
    np.testing.assert_array_equal(store.read_range(0, 1003)[0], X)
    np.testing.assert_array_equal(store.read_range(0, 1003)[1], y)
    np.testing.assert_allclose(store.attrs["mean"], X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(store.attrs["std"], X.std(axis=0), rtol=1e-12)


def test_store_from_dask_is_one_compute(tmp_path, xy):
    X, y = xy
    counter = {"n": 0}
    real_get = dask.get

    def counting_get(*args, **kwargs):
        counter["n"] += 1
        return real_get(*args, **kwargs)

    with dask.config.set(scheduler=counting_get):
        store_from_dask(tmp_path / "d.zarr", da.from_array(X, chunks=(100, 5)), y, chunk_rows=100)
    assert counter["n"] == 1


def test_store_from_dask_feature_chunks_rejected(tmp_path, xy):
    Xd = da.from_array(xy[0], chunks=(100, 2))
    with pytest.raises(DataValidationError, match=r"X has 3 chunks along axis 1; use X.rechunk\(\{1: -1\}\)"):
        store_from_dask(tmp_path / "d.zarr", Xd)


def test_store_from_dask_unknown_chunks_rejected(tmp_path, xy):
    Xd = da.from_array(xy[0], chunks=(100, 5))
    Xd = Xd[Xd[:, 0] > -np.inf]
    with pytest.raises(DataValidationError, match=r"unknown chunk sizes.*compute_chunk_sizes\(\)"):
        store_from_dask(tmp_path / "d.zarr", Xd)


def test_store_from_dask_reports_first_nonfinite_row_and_leaves_nothing(tmp_path, xy):
    X = _with_nan(_with_nan(xy[0], 733, 1), 310, 4)
    X[920, 0] = np.inf
    target = tmp_path / "d.zarr"
    with pytest.raises(DataValidationError, match=r"X contains a non-finite value \(nan\) at row 310, column 4"):
        store_from_dask(target, da.from_array(X, chunks=(100, 5)), chunk_rows=100)
    assert _siblings(target) == []


# --- CSV -----------------------------------------------------------------------------------


def _write_csv(tmp_path, n=523):
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    df["label"] = rng.choice([" cat", "dog ", "emu"], size=n)
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    return path, pd.read_csv(path)


def test_store_from_csv_matches_pandas(tmp_path):
    path, ref = _write_csv(tmp_path)
    store = store_from_csv(tmp_path / "c.zarr", path, chunk_rows=100)
    X, y = store.read_range(0, store.n_rows)
    np.testing.assert_allclose(X, ref[["a", "b", "c"]].to_numpy())
    assert store.attrs["classes"] == ["cat", "dog", "emu"]
    labels = np.array(store.attrs["classes"])[y]
    np.testing.assert_array_equal(labels, ref["label"].str.strip().to_numpy())
    assert store.attrs["feature_names"] == ["a", "b", "c"] and store.row_chunks[-1] == 23


def test_store_from_csv_label_by_name_no_header_and_unsupervised(tmp_path):
    _, ref = _write_csv(tmp_path)
    ref[["a", "b", "c"]].to_csv(tmp_path / "num.csv", index=False)
    by_name = store_from_csv(tmp_path / "n.zarr", tmp_path / "num.csv", label_column="a")
    np.testing.assert_allclose(by_name.read_range(0, 5)[1], ref["a"][:5])
    assert by_name.attrs["feature_names"] == ["b", "c"] and by_name.attrs["classes"] is None
    ref[["a", "b"]].to_csv(tmp_path / "nh.csv", index=False, header=False)
    unsup = store_from_csv(tmp_path / "u.zarr", tmp_path / "nh.csv", header=None, label_column=None)
    assert not unsup.has_y and unsup.attrs["feature_names"] == ["x0", "x1"]
    np.testing.assert_allclose(unsup.read_range(0, 523)[0], ref[["a", "b"]].to_numpy())


def test_store_from_csv_rejects_text_features(tmp_path):
    path, ref = _write_csv(tmp_path)
    ref.assign(colour="red").to_csv(path, index=False)
    with pytest.raises(DataValidationError, match=r"column\(s\) \['colour'\] .* are not numeric"):
        store_from_csv(tmp_path / "c.zarr", path, label_column="label")
    with pytest.raises(ValueError, match="label column 'nope' is not a column"):
        store_from_csv(tmp_path / "c.zarr", path, label_column="nope")


# --- LIBSVM --------------------------------------------------------------------------------


def test_store_from_libsvm_matches_sklearn(tmp_path, rng):
    X = rng.normal(size=(357, 12)) * (rng.random((357, 12)) < 0.3)
    y = rng.integers(0, 4, size=357)
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    store = store_from_libsvm(tmp_path / "s.zarr", path, chunk_rows=50)
    X_ref, y_ref = load_svmlight_file(str(path), zero_based=False)
    Xs, ys = store.read_range(0, store.n_rows)
    np.testing.assert_allclose(Xs[:, : X_ref.shape[1]], X_ref.toarray())
    np.testing.assert_array_equal(ys, y_ref)
    assert ys.dtype == np.int64 and store.n_features == X_ref.shape[1]


def test_store_from_libsvm_comments_float_labels_and_n_features(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("# header\n0.5 1:2 3:4.5 # tail\n\n-1.25 qid:3 2:1\n")
    store = store_from_libsvm(tmp_path / "s.zarr", path, n_features=5)
    X, y = store.read_range(0, 2)
    np.testing.assert_array_equal(X, [[2, 0, 4.5, 0, 0], [0, 1, 0, 0, 0]])
    np.testing.assert_array_equal(y, [0.5, -1.25])
    with pytest.raises(DataValidationError, match="n_features=2 but .* uses feature index 3"):
        store_from_libsvm(tmp_path / "t.zarr", path, n_features=2)


def test_store_from_libsvm_rejects_zero_based(tmp_path):
    path = tmp_path / "z.svm"
    path.write_text("1 0:1 2:3\n")
    with pytest.raises(DataValidationError, match="line 1 has feature index 0; indices are 1-based"):
        store_from_libsvm(tmp_path / "s.zarr", path)


# --- atomicity and overwrite -----------------------------------------------------------------


def test_failing_ingest_leaves_no_store(tmp_path, xy):
    X = _with_nan(xy[0], 345, 2)
    target = tmp_path / "a.zarr"
    with pytest.raises(DataValidationError, match=r"non-finite value \(nan\) at row 345, column 2"):
        create_store(target, X, chunk_rows=100)
    assert _siblings(target) == []


def test_failing_block_function_leaves_no_store(tmp_path):
    def block_fn(start, stop):
        if start >= 300:
            raise RuntimeError("disk on fire")
        return np.ones((stop - start, 2)), None

    with pytest.raises(RuntimeError, match="disk on fire"):
        store_from_blocks(tmp_path / "b.zarr", 1000, block_fn, chunk_rows=100)
    assert _siblings(tmp_path / "b.zarr") == []


def test_existing_target_needs_overwrite(tmp_path, xy):
    X, y = xy
    target = tmp_path / "a.zarr"
    create_store(target, X, y, chunk_rows=100)
    with pytest.raises(StoreExistsError, match=r"already exists at '.*a\.zarr'; pass overwrite=True"):
        create_store(target, X[:10] + 1, chunk_rows=5)
    np.testing.assert_array_equal(open_store(target).read_range(0, 1003)[0], X)


def test_overwrite_replaces_only_on_success(tmp_path, xy):
    X, y = xy
    target = tmp_path / "a.zarr"
    create_store(target, X, y, chunk_rows=100)
    with pytest.raises(DataValidationError):
        create_store(target, _with_nan(X, 999, 0), overwrite=True)
    np.testing.assert_array_equal(open_store(target).read_range(0, 1003)[0], X)
    new = create_store(target, X[:10] * 2, overwrite=True)
    assert new.n_rows == 10 and not new.has_y
    assert _siblings(target) == ["a.zarr"]


def test_overwrite_on_memory_url(memory_url, xy):
    X, y = xy
    create_store(memory_url, X, y)
    with pytest.raises(StoreExistsError, match="pass overwrite=True"):
        create_store(memory_url, X)
    assert create_store(memory_url, X[:7], overwrite=True).n_rows == 7


# --- open_store / as_store -------------------------------------------------------------------


def test_open_store_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no store at"):
        open_store(tmp_path / "nope.zarr")


def test_open_store_foreign_group(tmp_path):
    group = zarr.open_group(str(tmp_path / "f.zarr"), mode="w")
    group.create_array("X", data=np.ones((4, 2)))
    with pytest.raises(StoreSchemaError, match="attribute 'schema_version' missing: not a kmp_dask store"):
        open_store(tmp_path / "f.zarr")


def test_open_store_missing_array(tmp_path, xy):
    create_store(tmp_path / "a.zarr", *xy)
    group = zarr.open_group(str(tmp_path / "a.zarr"), mode="r+")
    del group["X"]
    with pytest.raises(StoreSchemaError, match=r"store at '.*a.zarr' has no array 'X'"):
        open_store(tmp_path / "a.zarr")


def test_open_store_not_a_zarr_group(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "file.txt").write_text("hello")
    with pytest.raises(StoreSchemaError, match="not a readable zarr group|schema_version"):
        open_store(tmp_path / "plain")


def test_as_store_accepts_stores_and_paths(tmp_path, xy):
    mem = InMemoryStore(*xy)
    assert as_store(mem) is mem
    create_store(tmp_path / "a.zarr", *xy)
    assert isinstance(as_store(tmp_path / "a.zarr"), ZarrStore)
    assert isinstance(as_store("file://" + str(tmp_path / "a.zarr")), ZarrStore)
    with pytest.raises(TypeError, match="Wrap in-memory arrays with InMemoryStore"):
        as_store(xy[0])


# --- validation messages ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.array([["a", "b"], ["c", "d"]]), None, r"X must be numeric; got dtype <U1.*get_dummies"),
        (np.array([[1, None]], dtype=object), None, "X must be numeric; got dtype object"),
        (np.arange(100.0), None,
         r"X must be 2-D with shape \(n_samples, n_features\); got shape \(100,\)\. Reshape with X.reshape\(-1, 1\)"),
        (np.ones((10, 2)), np.ones(9), "y has 9 rows but X has 10; pass one target per row of X"),
        (np.ones((3, 2)), np.array(["a", "b", "c"]), r"y must be numeric.*np.unique\(y, return_inverse=True\)"),
        (np.zeros((0, 3)), None, r"X is empty: got shape \(0, 3\)"),
        (np.zeros((4, 0)), None, r"X is empty: got shape \(4, 0\)"),
        (np.array([[1.0, 2.0], [3.0, np.inf]]), None, r"X contains a non-finite value \(inf\) at row 1, column 1"),
        (np.ones((3, 2)), np.array([0.0, np.nan, 1.0]), r"y contains a non-finite value \(nan\) at row 1, column 0"),
    ],
)
def test_validation_messages(tmp_path, X, y, match):
    with pytest.raises(DataValidationError, match=match):
        create_store(tmp_path / "v.zarr", X, y)
    assert not (tmp_path / "v.zarr").exists()


def test_feature_names_length_and_dtype_checked(tmp_path, xy):
    with pytest.raises(DataValidationError, match="feature_names has 2 entries but X has 5 columns"):
        create_store(tmp_path / "v.zarr", xy[0], feature_names=["a", "b"])
    with pytest.raises(DataValidationError, match="dtype must be float32 or float64; got int32"):
        create_store(tmp_path / "v.zarr", xy[0], dtype="int32")


# --- readers in other processes --------------------------------------------------------------


def _read_in_child(reader_bytes):
    reader = pickle.loads(reader_bytes)
    return reader.read_rows([7, 3, 7])[0]


def test_zarr_reader_works_in_spawned_process(tmp_path, xy):
    X, y = xy
    store = create_store(tmp_path / "a.zarr", X, y, chunk_rows=100)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        rows = pool.apply(_read_in_child, (pickle.dumps(store.reader()),))
    np.testing.assert_array_equal(rows, X[[7, 3, 7]])
