"""CVMClassifier(probability=True): solved on the rows a hash split keeps, calibrated on the others.

Oracles: the model equals a CVMClassifier fitted on exactly the kept rows (``split_mask`` of the
row index, seeded by the fit's first problem seed); ``calibrator_`` equals a PlattCalibrator fitted
on the held-out rows' decision values; a store gives what the numpy rows give; the default
(``probability=False``) has no ``predict_proba`` and solves on every row.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.metrics import log_loss
from sklearn.utils.validation import check_random_state

from kmp_dask import CVMClassifier
from kmp_dask.blockops import split_mask
from kmp_dask.estimators._base import draw_seed
from kmp_dask.estimators._calibration import PROBABILITY_HOLDOUT, PlattCalibrator
from kmp_dask.parallel._holdout import SplitStore, held_out_rows
from kmp_dask.store import InMemoryStore, create_store

PARAMS = {"gamma": 0.5, "standardize": False, "random_state": 0, "client": "sync"}


def _data(n, seed, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    if classes == 2:
        return X, (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, np.array(["a", "b", "c"])[np.digitize(X[:, 0] + 0.3 * rng.normal(size=n), [-0.5, 0.5])]


def _held(n):
    return split_mask(np.arange(n), PROBABILITY_HOLDOUT, draw_seed(check_random_state(PARAMS["random_state"])))


def test_split_store_reads_the_kept_rows_in_order():
    X, y = _data(500, 0)
    base = InMemoryStore(X, y, chunk_rows=64)
    view = SplitStore(base, 0.3, 7)
    keep = ~split_mask(np.arange(500), 0.3, 7)
    assert view.n_rows == keep.sum() and sum(view.row_chunks) == view.n_rows
    Xa, ya = view.read_range(0, view.n_rows)
    assert_array_equal(Xa, X[keep])
    assert_array_equal(ya, y[keep])
    Xb, yb = view.read_range(40, 170)  # across chunks
    assert_array_equal(Xb, X[keep][40:170])
    idx = np.array([5, 300, 0, 299, 5])
    assert_array_equal(view.read_rows(idx)[0], X[keep][idx])
    assert_array_equal(view.base_index(idx), np.flatnonzero(keep)[idx])
    assert_array_equal(view.to_dask().compute(), X[keep])
    Xh, yh = held_out_rows(base, 0.3, 7)
    assert_array_equal(Xh, X[~keep])
    assert_array_equal(yh, y[~keep])


@pytest.mark.parametrize("classes", [2, 3])
def test_model_is_the_fit_on_the_kept_rows_and_calibrates_on_the_others(classes):
    X, y = _data(800, 1, classes)
    Xt, yt = _data(600, 2, classes)
    held = _held(len(X))
    clf = CVMClassifier(probability=True, **PARAMS).fit(X, y)
    ref = CVMClassifier(**PARAMS).fit(X[~held], y[~held])
    assert_array_equal(clf.expansion_.support_vectors, ref.expansion_.support_vectors)
    assert_allclose(clf.expansion_.coef, ref.expansion_.coef, rtol=1e-12, atol=0)
    # core_indices_ are rows of the data given to fit
    rows = clf.core_indices_ if classes == 2 else np.concatenate(clf.core_indices_)
    assert not held[rows].any()
    assert_array_equal(np.unique(X[rows], axis=0), np.unique(clf.expansion_.support_vectors, axis=0))
    # the calibrator: Platt / multinomial on the held-out rows' decision values (unit RMS, scale folded in)
    F = ref.expansion_.decision_function(X[held])
    unit = 1 / np.sqrt(np.mean(F ** 2))
    codes = np.searchsorted(clf.classes_, y[held])
    cal = PlattCalibrator.fit(F * unit, codes, len(clf.classes_))
    assert clf.calibrator_.n_rows == held.sum()
    assert_allclose(clf.calibrator_.coef, cal.coef * unit, rtol=1e-10)
    P = clf.predict_proba(Xt)
    assert P.shape == (len(Xt), classes)
    assert_allclose(P.sum(axis=1), 1.0)
    shares = np.array([np.mean(y == c) for c in clf.classes_])
    assert log_loss(yt, P, labels=clf.classes_) < 0.6 * log_loss(yt, np.tile(shares, (len(yt), 1)),
                                                                  labels=clf.classes_)


def test_default_has_no_probabilities_and_solves_on_every_row():
    X, y = _data(600, 3)
    clf = CVMClassifier(**PARAMS).fit(X, y)
    assert not hasattr(clf, "predict_proba") and clf.calibrator_ is None
    assert _held(len(X))[clf.core_indices_].any()  # held-out rows are core vectors too: all rows were used
    with pytest.raises(ValueError, match="probability must be True or False"):
        CVMClassifier(probability="yes").fit(X, y)


def test_a_store_gives_what_the_numpy_rows_give(tmp_path):
    X, y = _data(900, 4)
    store = create_store(tmp_path / "s.zarr", X, y, chunk_rows=128)
    a = CVMClassifier(probability=True, **PARAMS).fit(X, y)
    b = CVMClassifier(probability=True, **PARAMS).fit(store)
    assert_array_equal(a.expansion_.support_vectors, b.expansion_.support_vectors)
    assert_allclose(b.predict_proba(X), a.predict_proba(X), rtol=1e-10)
    assert_array_equal(b.core_indices_, a.core_indices_)


def test_cli_trains_a_calibrated_cvm_and_predicts_its_probabilities(tmp_path):
    import pandas as pd
    from click.testing import CliRunner

    from kmp_dask import load
    from kmp_dask.cli import main

    X, y = _data(700, 5)
    Xt, yt = _data(400, 6)
    create_store(tmp_path / "tr.zarr", X, y, chunk_rows=128)
    create_store(tmp_path / "te.zarr", Xt, yt, chunk_rows=128)
    r = CliRunner().invoke(main, ["train", str(tmp_path / "tr.zarr"), "--model", str(tmp_path / "m"), "--algorithm",
                                  "cvm", "--probability", "true", "--gamma", "0.5", "--task", "classification",
                                  "--random-state", "0", "--scheduler", "sync", "--quiet"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["predict", str(tmp_path / "m"), str(tmp_path / "te.zarr"), "--output",
                                  str(tmp_path / "p.csv"), "--proba", "--quiet", "--scheduler", "sync"])
    assert r.exit_code == 0, r.output
    model = load(tmp_path / "m")
    P = pd.read_csv(tmp_path / "p.csv")[[f"proba_{c}" for c in model.classes_]].to_numpy()
    assert_allclose(P, model.predict_proba(Xt), rtol=1e-9)
    shares = np.array([np.mean(y == c) for c in model.classes_])
    assert log_loss(yt, P, labels=model.classes_) < log_loss(yt, np.tile(shares, (len(yt), 1)), labels=model.classes_)
