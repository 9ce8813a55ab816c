"""Stores not written by ingest: every read of a chunk checks it.

NaN/inf in X or y, label codes outside the store's ``classes`` (5, −1) or not integers (0.5)
raise ``StoreContentError`` naming the store, array, chunk and global row, on every read path
(``read_range``, a pickled ``reader()``, ``read_rows``, ``to_dask``, on worker processes too);
``kmp_dask.check-finite=False`` skips the NaN/inf scan; int / bool X is read as float64; ingest
writes every chunk (also all-zero ones) so a deleted chunk file is found on read and by
``verify``; a store whose ``feature_names`` differ from the fitted ones is refused at predict.
"""

from __future__ import annotations

import os
import pickle
import time

import dask
import numpy as np
import pytest
import zarr

from kmp_dask import KMPClassifier, KMPRegressor, load, save
from kmp_dask.exceptions import DataValidationError, StoreContentError
from kmp_dask.store import InMemoryStore, StoreCorruptError, create_store, open_store

N, CHUNK = 1000, 250


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    return X, (X[:, 0] > 0).astype(np.int64)


@pytest.fixture
def store(tmp_path):
    X, y = _data()
    return create_store(tmp_path / "s.zarr", X, y, chunk_rows=CHUNK, classes=["neg", "pos"])


def _edit(store, fn):
    fn(zarr.open_group(store=store.url, mode="r+"))
    return open_store(store.url)


def _set_y(group, values):
    del group["y"]
    group.create_array("y", shape=values.shape, chunks=(CHUNK,), dtype=values.dtype)[:] = values


READS = {
    "read_range": lambda s: s.read_range(0, N),
    "reader": lambda s: pickle.loads(pickle.dumps(s.reader())).read_range(250, 1000),
    "read_rows": lambda s: s.read_rows([3, 900, 610]),
    "to_dask": lambda s: (s.to_dask("X").compute(), s.to_dask("y").compute()),
}


@pytest.mark.parametrize("how", sorted(READS))
def test_nonfinite_X_is_named_by_every_read(store, how):
    bad = _edit(store, lambda g: g["X"].__setitem__((610, 2), -np.inf))
    with pytest.raises(StoreContentError) as info:
        READS[how](bad)
    e = info.value
    assert (e.url, e.array, e.chunk, e.row, e.column, e.value) == (store.url, "X", 2, 610, 2, -np.inf)
    assert "row 610, column 2 (chunk 2, rows 500..749)" in str(e) and store.url in str(e)
    again = pickle.loads(pickle.dumps(e))  # the error crosses process boundaries from workers
    assert str(again) == str(e) and (again.chunk, again.row) == (2, 610)


@pytest.mark.parametrize("value, words", [
    (5, "the label code 5"), (-1, "the label code -1"), (0.5, "0.5, which is not an integer label code"),
    (np.nan, "non-finite value (nan)"),
])
@pytest.mark.parametrize("how", sorted(READS))
def test_bad_label_codes_are_named_by_every_read(store, how, value, words):
    y = _data()[1].astype(float if isinstance(value, float) else np.int64)
    y[900] = value
    bad = _edit(store, lambda g: _set_y(g, y))
    with pytest.raises(StoreContentError) as info:
        READS[how](bad)
    e = info.value
    assert (e.array, e.chunk, e.row, e.column) == ("y", 3, 900, None)
    assert words in str(e) and "row 900 (chunk 3, rows 750..999)" in str(e)


def test_integral_float_codes_and_regression_targets_are_read(store):
    """Float codes 0.0 / 1.0 are integers; a store without classes may hold any finite y."""
    X, y = _data()
    ok = _edit(store, lambda g: _set_y(g, y.astype(np.float64)))
    assert np.array_equal(ok.read_range(0, N)[1], y)
    reg = create_store(os.path.join(os.path.dirname(store.url), "r.zarr"), X, X[:, 0] * 7.5, chunk_rows=CHUNK)
    assert np.allclose(reg.read_range(0, N)[1], X[:, 0] * 7.5)


def test_check_finite_false_skips_the_scan_but_not_the_codes(store):
    bad = _edit(store, lambda g: g["X"].__setitem__((10, 0), np.nan))
    with dask.config.set({"kmp_dask.check-finite": False}):
        X, _ = bad.read_range(0, CHUNK)
        reader = bad.reader()  # the setting travels with the reader to the workers
        assert np.isnan(pickle.loads(pickle.dumps(reader)).read_range(0, CHUNK)[0][10, 0])
        assert np.isnan(bad.to_dask("X")[:CHUNK].compute()[10, 0])
    assert np.isnan(X[10, 0])
    with pytest.raises(StoreContentError):
        bad.read_range(0, CHUNK)  # the default is to check
    coded = _edit(store, lambda g: g["y"].__setitem__(3, 7))
    with dask.config.set({"kmp_dask.check-finite": False}), pytest.raises(StoreContentError, match="label code 7"):
        coded.read_range(0, CHUNK)


@pytest.mark.parametrize("dtype", ["int64", "bool", "uint8", "float16"])
def test_non_float_X_is_read_as_float64(store, dtype):
    X, y = _data()
    values = (X > 0) if dtype == "bool" else (np.abs(X) * 10).astype(dtype)

    def rewrite(g):
        del g["X"]
        g.create_array("X", shape=values.shape, chunks=(CHUNK, 3), dtype=dtype)[:] = values

    s = _edit(store, rewrite)
    assert s.dtype == np.float64
    Xr, _ = s.read_range(0, N)
    assert Xr.dtype == np.float64 and np.array_equal(Xr, values.astype(np.float64))
    assert s.to_dask("X").dtype == np.float64 and s.to_dask("X").compute().dtype == np.float64
    clf = KMPClassifier(n_basis=5, random_state=0, client="sync").fit(s.url)
    assert clf.predict(s.url).compute().shape == (N,)


@pytest.mark.filterwarnings("ignore:The data type")  # zarr: text dtypes have no v3 specification
def test_text_X_or_y_is_refused_when_opened(store):
    from kmp_dask.exceptions import StoreSchemaError

    def text_y(g):
        del g["y"]
        g.create_array("y", shape=(N,), chunks=(CHUNK,), dtype="<U3")

    with pytest.raises(StoreSchemaError, match="array 'y' .* has dtype <U3, not numbers"):
        _edit(store, text_y)


def test_in_memory_store_refuses_codes_outside_classes():
    X, y = _data()
    y = y.copy()
    y[260] = 2
    with pytest.raises(StoreContentError, match=r"label code 2, at row 260 \(chunk 1, rows 250..499\)"):
        InMemoryStore(X, y, classes=["neg", "pos"], chunk_rows=CHUNK)
    s = InMemoryStore(X, _data()[1], classes=["neg", "pos"], chunk_rows=CHUNK)
    with pytest.raises(StoreContentError, match=r"label code -1, at row 1001 \(chunk 4, rows 1000..1001\)"):
        s.append(X[:2], np.array([0, -1]))


# --- every chunk written, so a missing chunk file means loss -----------------------------------
def test_ingest_and_append_write_all_zero_chunks(tmp_path):
    X = np.zeros((100, 2))
    X[50:] = 1.0
    y = np.zeros(100, dtype=np.int64)  # every y chunk is all zeros (class 0): zarr would skip them
    s = create_store(tmp_path / "z.zarr", X, y, chunk_rows=25, classes=["a", "b"])
    assert s.complete and s.attrs["all_chunks_written"] is True
    for key in ["X/c/0/0", "X/c/1/0", "y/c/0", "y/c/1", "y/c/2", "y/c/3"]:
        assert os.path.exists(os.path.join(s.url, key)), key
    s.append(np.zeros((30, 2)), np.zeros(30, dtype=np.int64))
    assert {"4", "5"} <= set(os.listdir(os.path.join(s.url, "y", "c")))
    assert s.verify() == 2 * 6


@pytest.mark.parametrize("key, array, chunk", [("X/c/1/0", "X", 1), ("y/c/3", "y", 3)])
def test_missing_chunk_file_is_found_on_read_and_by_verify(store, key, array, chunk):
    os.remove(os.path.join(store.url, *key.split("/")))
    s = open_store(store.url)
    for read in [lambda: s.read_range(0, N), lambda: s.to_dask(array).compute(),
                 lambda: pickle.loads(pickle.dumps(s.reader())).read_rows([chunk * CHUNK + 5]), s.verify]:
        with pytest.raises(StoreCorruptError) as info:
            read()
        e = info.value
        assert (e.array, e.chunk, e.key, e.rows) == (array, chunk, key, (chunk * CHUNK, (chunk + 1) * CHUNK))
        assert "is missing" in str(e) and "does not exist" in str(e)
    assert s.read_range(0, CHUNK)[0].shape == (CHUNK, 3)  # the other chunks still read


def test_missing_chunk_of_an_fsspec_store(tmp_path):
    """The same through fsspec (``memory://``): ``fs.exists`` on read, ``fs.find`` in verify."""
    import fsspec

    X, y = _data()
    url = f"memory://content-{tmp_path.name}/s.zarr"
    create_store(url, X, y, chunk_rows=CHUNK, classes=["neg", "pos"])
    fs = fsspec.filesystem("memory")
    try:
        fs.rm(f"/content-{tmp_path.name}/s.zarr/y/c/1")
        s = open_store(url)
        for read in [lambda: s.read_range(0, N), s.verify]:
            with pytest.raises(StoreCorruptError, match=r"chunk 1 \(rows 250..499\) of array 'y' .* is missing"):
                read()
    finally:
        fs.rm(f"/content-{tmp_path.name}", recursive=True)


def test_verify_compares_the_listing_with_the_grid_before_reading(store):
    """A deleted chunk of y is reported without reading X (the listing is checked first)."""
    os.remove(os.path.join(store.url, "y", "c", "0"))
    seen = []
    with pytest.raises(StoreCorruptError, match=r"chunk 0 \(rows 0..249\) of array 'y' .* is missing"):
        open_store(store.url).verify(callback=lambda done, total: seen.append(done))
    assert seen == []


def test_verify_reports_codes_outside_classes(store):
    bad = _edit(store, lambda g: g["y"].__setitem__(777, 9))
    with pytest.raises(StoreContentError, match=r"label code 9, at row 777 \(chunk 3"):
        bad.verify()


def test_store_without_the_marker_reads_a_missing_chunk_as_zarr_does(store):
    """Stores not written by this version's ingest may lack all-zero chunks legitimately: a
    missing file there is zarr's fill value (documented), and verify does not list files."""
    g = zarr.open_group(store=store.url, mode="r+")
    attrs = dict(g.attrs)
    del attrs["all_chunks_written"]
    g.attrs.clear()
    g.attrs.update(attrs)
    os.remove(os.path.join(store.url, "X", "c", "1", "0"))
    s = open_store(store.url)
    assert not s.complete
    assert (s.read_range(CHUNK, 2 * CHUNK)[0] == 0).all()
    assert s.verify() == 8


# --- feature names -------------------------------------------------------------------------------
@pytest.fixture
def named(tmp_path):
    from sklearn.datasets import make_classification

    X, y = make_classification(1000, n_features=6, n_informative=4, random_state=0)
    names = [f"f{j}" for j in range(6)]
    kw = dict(chunk_rows=250, classes=["a", "b"])
    return {"train": create_store(tmp_path / "tr.zarr", X[:700], y[:700], feature_names=names, **kw).url,
            "test": create_store(tmp_path / "te.zarr", X[700:], y[700:], feature_names=names, **kw).url,
            "reversed": create_store(tmp_path / "rev.zarr", X[700:, ::-1], y[700:], feature_names=names[::-1],
                                     **kw).url,
            "unnamed": create_store(tmp_path / "un.zarr", X[700:], y[700:], **kw).url, "X": X, "y": y,
            "names": names, "tmp": tmp_path}


def test_reordered_columns_are_matched_by_name_everywhere(named):
    """A store whose columns carry the fitted names in another order is read in the fitted order
    (it used to be refused); a missing name is refused naming it; extra columns are left out with
    an IgnoredColumnsWarning. The names are scikit-learn's ``feature_names_in_``, saved with the model."""
    from kmp_dask.evaluation import evaluate
    from kmp_dask.exceptions import IgnoredColumnsWarning

    clf = KMPClassifier(n_basis=20, random_state=0, client="sync").fit(named["train"])
    assert list(clf.feature_names_in_) == named["names"] == list(clf.store_feature_names_)
    good = clf.score(named["test"])
    assert good > 0.8
    assert clf.score(named["reversed"]) == good
    np.testing.assert_array_equal(clf.predict(named["reversed"]).compute(), clf.predict(named["test"]).compute())
    np.testing.assert_allclose(clf.decision_function(named["reversed"]).compute(),
                               clf.decision_function(named["test"]).compute())
    assert evaluate(clf, named["reversed"], client="sync") == evaluate(clf, named["test"], client="sync")
    assert clf.score(named["unnamed"]) == good  # default names x0, x1, ...: by position
    X = named["X"][700:]
    five = create_store(named["tmp"] / "five.zarr", X[:, 1:], named["y"][700:], feature_names=named["names"][1:],
                        classes=["a", "b"])
    for fn in [lambda: clf.predict(five), lambda: evaluate(clf, five, client="sync")]:
        with pytest.raises(DataValidationError, match=r"lacks 1 of the columns .*\['f0'\]"):
            fn()
    extra = create_store(named["tmp"] / "extra.zarr", np.c_[X[:, ::-1], X[:, :1]], named["y"][700:],
                         feature_names=named["names"][::-1] + ["id"], classes=["a", "b"])
    with pytest.warns(IgnoredColumnsWarning, match=r"\['id'\]"):
        assert clf.score(extra) == good
    again = load(save(clf, named["tmp"] / "m.kmp"))  # the names are saved with the model
    assert list(again.feature_names_in_) == named["names"]
    assert again.score(named["reversed"]) == good
    clf.fit(named["X"], named["y"])  # a numpy refit forgets the store's names
    assert not hasattr(clf, "store_feature_names_") and not hasattr(clf, "feature_names_in_")
    clf.score(named["reversed"])


def test_dataframe_fit_is_matched_with_a_store_and_a_dataframe(named):
    """Fitted on a DataFrame, or on a store: a store or a DataFrame with the columns in another
    order predicts the same (never silently by position); a missing column is named."""
    pd = pytest.importorskip("pandas")
    from kmp_dask.exceptions import IgnoredColumnsWarning

    df = pd.DataFrame(named["X"][:700], columns=named["names"])
    reg = KMPRegressor(n_basis=5, random_state=0).fit(df, named["y"][:700].astype(float))
    want = reg.predict(named["test"]).compute()
    np.testing.assert_allclose(reg.predict(named["reversed"]).compute(), want)
    clf = KMPClassifier(n_basis=20, random_state=0, client="sync").fit(named["train"])
    test = pd.DataFrame(named["X"][700:], columns=named["names"])
    for model in (reg, clf):  # the same up to rounding (the columns are copied in the fitted order)
        ordered = model.predict(test)
        same = np.testing.assert_array_equal if model is clf else np.testing.assert_allclose
        same(model.predict(test[named["names"][::-1]]), ordered)
        with pytest.warns(IgnoredColumnsWarning, match="'id'"):
            same(model.predict(test.assign(id=1.0)[["id"] + named["names"][::-1]]), ordered)
        with pytest.raises(DataValidationError, match=r"the DataFrame lacks 1 .*\['f3'\]"):
            model.predict(test.drop(columns="f3"))


def test_unsupervised_and_cvm_families_match_names(named):
    from kmp_dask import CVMClassifier, SparseKernelPCA

    pca = SparseKernelPCA(n_components=2, client="sync").fit(named["train"])
    cvm = CVMClassifier(eps=1e-2, client="sync").fit(named["train"])
    for fn in (pca.transform, cvm.predict):
        got, want = (np.asarray(dask.compute(fn(named[k]))[0]) for k in ("reversed", "test"))
        if got.dtype.kind == "f":  # rounding: the columns are copied in the fitted order
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(got, want)


# --- a bad chunk read on a worker process ----------------------------------------------------------
# (the default run reads one on a worker through `kmp-dask evaluate`: the catalogue's
# evaluate-X-nan-on-workers row)
@pytest.mark.slow
def test_bad_chunk_read_in_a_worker_reaches_the_driver(store, process_cluster):
    """A KMP fit and a CVM fit on a 2-process cluster: the NaN is in a chunk a worker loads; the
    driver gets the StoreContentError (store, array, chunk, row) within a bound, not a hang."""
    from distributed import Client

    from kmp_dask import CVMClassifier

    bad = _edit(store, lambda g: g["X"].__setitem__((880, 1), np.nan))
    with Client(process_cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=180)
        for est in [KMPClassifier(n_basis=5, client=client), CVMClassifier(eps=1e-2, client=client)]:
            t0 = time.monotonic()
            with pytest.raises(StoreContentError) as info:
                est.fit(bad.url)
            e = info.value
            assert (e.url, e.array, e.chunk, e.row, e.column) == (store.url, "X", 3, 880, 1), str(e)
            assert time.monotonic() - t0 < 120
        assert len(client.scheduler_info()["workers"]) == 2  # the workers survive the error
