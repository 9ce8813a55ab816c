"""Labels of any dtype (strings, object arrays, lists, pandas Series / Categorical, bools) through
fit, predict, score and evaluate, on numpy, dask and store input.

Each classifier learns a clean two-feature problem, so its predictions are checked against the
true labels as *values* of the user's dtype; evaluate on a store matches the store's class
names to the model's ``classes_`` by name.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.svm import SVC

from kmp_dask import CVMClassifier, KMPClassifier, ReducedSetCompressor
from kmp_dask.evaluation import evaluate
from kmp_dask.reduced import ReducedSetClassifier
from kmp_dask.store import create_store

NAMES = np.array(["neg", "pos"], dtype=object)


def _data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, NAMES[(X[:, 0] + X[:, 1] > 0).astype(int)]


def _labels(kind, y):
    if kind == "object":
        return y
    if kind == "str":
        return y.astype(str)
    if kind == "list":
        return y.tolist()
    if kind == "series":
        return pd.Series(y)
    if kind == "categorical":
        return pd.Categorical(y)
    if kind == "series-categorical":
        return pd.Series(pd.Categorical(y))
    if kind == "bool":
        return y == "pos"
    raise AssertionError(kind)


def _expected(kind, y):
    return y == "pos" if kind == "bool" else y


KINDS = ["object", "str", "list", "series", "categorical", "series-categorical", "bool"]


def _kmp():
    return KMPClassifier(n_basis=8, gamma=0.5, client="sync", random_state=0)


def _cvm():
    return CVMClassifier(C=10.0, gamma=0.5, client="sync", random_state=0)


@pytest.mark.parametrize("make", [_kmp, _cvm], ids=["kmp", "cvm"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("container", ["numpy", "dask"])
def test_fit_predict_score(make, kind, container):
    X, y = _data()
    labels, truth = _labels(kind, y), _expected(kind, y)
    Xin = da.from_array(X, chunks=80) if container == "dask" else X
    model = make().fit(Xin, labels)
    assert_array_equal(model.classes_, np.unique(truth))
    pred = np.asarray(model.predict(X))
    assert pred.dtype.kind in ("b" if kind == "bool" else "OU")
    assert np.mean(pred == truth) > 0.9
    assert model.score(X, labels) > 0.9


@pytest.mark.parametrize("make", [_kmp, _cvm], ids=["kmp", "cvm"])
def test_dask_labels_of_object_dtype(make):
    X, y = _data()
    model = make().fit(da.from_array(X, chunks=80), da.from_array(y, chunks=80))
    assert_array_equal(model.classes_, ["neg", "pos"])
    assert np.mean(np.asarray(model.predict(X)) == y) > 0.9


@pytest.fixture
def stores(tmp_path):
    """A training store with the class names ["neg", "pos"] and a test store listing them in the
    other order (its codes mean other names): evaluate must match by name."""
    X, y = _data()
    Xt, yt = _data(seed=1)
    train = create_store(tmp_path / "train.zarr", X, (y == "pos").astype(np.int64), classes=["neg", "pos"],
                         chunk_rows=64)
    test = create_store(tmp_path / "test.zarr", Xt, (yt == "neg").astype(np.int64), classes=["pos", "neg"],
                        chunk_rows=64)
    return X, y, Xt, yt, train, test


def _accuracy(model, Xt, yt):
    return float(np.mean(np.asarray(model.predict(Xt)) == yt))


@pytest.mark.parametrize("make", [_kmp, _cvm], ids=["kmp", "cvm"])
def test_store_fit_and_evaluate_match_classes_by_name(stores, make):
    X, y, Xt, yt, train, test = stores
    model = make().fit(train)
    assert_array_equal(model.classes_, ["neg", "pos"])
    metrics = evaluate(model, test, client="sync")
    assert metrics["accuracy"] == pytest.approx(_accuracy(model, Xt, yt))
    assert metrics["accuracy"] > 0.9 and metrics["n_unknown_labels"] == 0
    assert metrics["per_class"]["pos"]["support"] == int(np.sum(yt == "pos"))


def test_compressed_svc_on_string_labels_evaluates(stores):
    X, y, Xt, yt, train, test = stores
    svc = SVC(gamma=0.5).fit(X, y)
    comp = ReducedSetCompressor(n_vectors=10, random_state=0).fit(svc, X, y)
    metrics = evaluate(comp, test, client="sync")
    assert metrics["classes"] == ["neg", "pos"]
    assert metrics["accuracy"] == pytest.approx(_accuracy(comp, Xt, yt)) and metrics["accuracy"] > 0.9


def test_reduced_set_classifier_on_string_labels_evaluates(stores):
    X, y, Xt, yt, train, test = stores
    rsc = ReducedSetClassifier(n_vectors=10, random_state=0).fit(X, y)
    metrics = evaluate(rsc, test, client="sync")
    assert metrics["accuracy"] == pytest.approx(_accuracy(rsc, Xt, yt)) and metrics["accuracy"] > 0.9


def test_model_with_numeric_classes_matches_store_names_by_string(tmp_path):
    X, y = _data()
    model = _kmp().fit(X, (y == "pos").astype(int))  # classes_ [0, 1]
    store = create_store(tmp_path / "s.zarr", X, (y == "pos").astype(np.int64), classes=["0", "1"])
    metrics = evaluate(model, store, client="sync")
    assert metrics["accuracy"] == pytest.approx(model.score(X, (y == "pos").astype(int)))


def test_evaluate_refuses_a_store_with_no_class_in_common(tmp_path):
    X, y = _data()
    model = _kmp().fit(X, y)
    store = create_store(tmp_path / "s.zarr", X, (y == "pos").astype(np.int64), classes=["cat", "dog"])
    with pytest.raises(ValueError,
                       match=r"classes \['cat', 'dog'\].*classes \['neg', 'pos'\]: no class name in common"):
        evaluate(model, store, client="sync")


def test_evaluate_refuses_numeric_labels_outside_the_classes(tmp_path):
    X, y = _data()
    model = _kmp().fit(X, y)
    store = create_store(tmp_path / "s.zarr", X, (y == "pos").astype(np.float64) + 5.0)
    with pytest.raises(ValueError, match=r"none of the 240 labels of the data is among the model's classes"):
        evaluate(model, store, client="sync")


@pytest.mark.parametrize("make", [_kmp, _cvm], ids=["kmp", "cvm"])
@pytest.mark.parametrize("container", ["numpy", "dask"])
def test_labels_of_mixed_types_are_named(make, container):
    from kmp_dask.exceptions import DataValidationError

    X, y = _data(n=40)
    y = y.copy()
    y[7], y[9] = None, 3
    wrap = (lambda a: da.from_array(a, chunks=(10,) + a.shape[1:])) if container == "dask" else (lambda a: a)
    with pytest.raises(DataValidationError, match=r"y mixes label types .*NoneType \(row 7: None\), int \(row 9: 3\)"):
        make().fit(wrap(X), wrap(y))


@pytest.mark.slow  # 4.5 s (the report's plots)
def test_report_of_models_on_string_labels(stores, tmp_path):
    """The report's accuracy-vs-size curve compares predictions with the sample's class names."""
    from kmp_dask.cli._post import _sample
    from kmp_dask.report import write_report

    X, y, Xt, yt, train, test = stores
    model = _kmp().fit(train)
    Xs, ys = _sample(test, 100)
    assert set(np.unique(ys)) == {"neg", "pos"}
    from kmp_dask.report._series import metric_along_path

    name, sizes, values = metric_along_path(model, Xs, ys)
    assert name == "test accuracy" and sizes[-1] == model.n_basis_
    assert values[-1] == pytest.approx(float(np.mean(np.asarray(model.predict(Xs)) == ys))) and values[-1] > 0.9
    out = write_report([("kmp", model)], tmp_path / "r.html", X=Xs, y=ys)
    assert "Error vs basis size" in out.read_text()
