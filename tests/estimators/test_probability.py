"""Probabilities on request (``probability=True``): a multinomial logistic map of the decision
values fitted on held-out rows, for KMP (default squared loss), KMPClassifierCV, the compressor and
ReducedSetClassifier; saved with the model; ``kmp-dask predict --proba``; logistic unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

import kmp_dask
from kmp_dask import KMPClassifier, KMPClassifierCV
from kmp_dask.estimators._calibration import PROBABILITY_HOLDOUT, PlattCalibrator
from kmp_dask.reduced import ReducedSetClassifier, ReducedSetCompressor
from kmp_dask.store import create_store


def _keel(name, n=None):
    from kmp_dask.datasets import load_keel

    d = load_keel(name)
    X, y = np.asarray(d.X, dtype=np.float64), np.asarray(d.y)
    if n is not None:
        X, _, y, _ = train_test_split(X, y, train_size=n, random_state=0, stratify=y)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _constant_log_loss(y_train, y_test, classes):
    share = np.array([np.mean(y_train == c) for c in classes])
    return log_loss(y_test, np.tile(share, (len(y_test), 1)), labels=classes)


@pytest.mark.parametrize("name, n", [("banana", 2000), ("segment", None)])
def test_default_kmp_with_probability_beats_the_class_shares_in_log_loss(name, n):
    Xtr, Xte, ytr, yte = _keel(name, n)
    clf = KMPClassifier(n_basis=40, probability=True, random_state=0).fit(Xtr, ytr)
    P = clf.predict_proba(Xte)
    assert P.shape == (len(Xte), len(clf.classes_))
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    loss, const = log_loss(yte, P, labels=clf.classes_), _constant_log_loss(ytr, yte, clf.classes_)
    assert loss < 0.6 * const, (loss, const)
    # calibrated on the 10 % of rows held out by the validation hash, which the fit did not train on
    assert clf.calibrator_.n_rows == pytest.approx(PROBABILITY_HOLDOUT * len(Xtr), rel=0.25)


def test_the_calibration_rows_are_the_validation_rows_when_there_are_some():
    Xtr, _, ytr, _ = _keel("banana", 1500)
    clf = KMPClassifier(n_basis=20, probability=True, validation_fraction=0.3, random_state=0).fit(Xtr, ytr)
    assert clf.calibrator_.n_rows == pytest.approx(0.3 * len(Xtr), rel=0.15)


def test_without_probability_there_is_no_predict_proba_and_the_error_says_how():
    X, y = np.random.default_rng(0).normal(size=(200, 2)), np.arange(200) % 2
    clf = KMPClassifier(n_basis=5, random_state=0).fit(X, y)
    assert not hasattr(clf, "predict_proba")
    with pytest.raises(AttributeError, match=r"probability=True"):
        clf.predict_proba(X)
    with pytest.raises(ValueError, match="probability must be True, False or 'auto'"):
        KMPClassifier(probability="yes").fit(X, y)


def test_logistic_predict_proba_is_unchanged():
    X = np.random.default_rng(1).normal(size=(300, 3))
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int)
    for probability in (False, True):
        clf = KMPClassifier(n_basis=15, loss="logistic", probability=probability, random_state=0).fit(X, y)
        F = clf.decision_function(X)
        p1 = 1.0 / (1.0 + np.exp(-np.clip(F, -50, 50)))  # σ(f): the logistic loss's own probabilities
        np.testing.assert_array_equal(clf.predict_proba(X), np.column_stack([1.0 - p1, p1]))
        assert clf.calibrator_ is None  # the held-out map is not used (nor fitted) for log-odds outputs


def test_saved_model_keeps_its_probabilities_and_store_input_gives_the_same(tmp_path):
    Xtr, Xte, ytr, yte = _keel("segment")
    clf = KMPClassifier(n_basis=30, probability=True, random_state=0).fit(Xtr, ytr)
    kmp_dask.save(clf, tmp_path / "m")
    back = kmp_dask.load(tmp_path / "m")
    np.testing.assert_array_equal(back.predict_proba(Xte), clf.predict_proba(Xte))
    store = create_store(tmp_path / "te.zarr", Xte, np.zeros(len(Xte)), chunk_rows=100)
    np.testing.assert_allclose(np.asarray(clf.predict_proba(store)), clf.predict_proba(Xte), rtol=1e-12)
    assert clf.prefix(5).score(Xte, yte) > 0 and not hasattr(clf.prefix(5), "predict_proba")


def test_a_store_fit_calibrates_on_its_held_out_rows(tmp_path):
    Xtr, Xte, ytr, yte = _keel("banana", 1500)
    store = create_store(tmp_path / "tr.zarr", Xtr, ytr, chunk_rows=128)
    clf = KMPClassifier(n_basis=20, probability=True, random_state=0, client="sync").fit(store)
    mem = KMPClassifier(n_basis=20, probability=True, random_state=0, client="sync").fit(Xtr, ytr)
    assert clf.calibrator_.n_rows == mem.calibrator_.n_rows  # the same rows, whatever the chunking
    assert log_loss(yte, clf.predict_proba(Xte), labels=clf.classes_) < _constant_log_loss(ytr, yte, clf.classes_)


def test_kmp_classifier_cv_calibrates_its_refit():
    Xtr, Xte, ytr, yte = _keel("banana", 1200)
    cv = KMPClassifierCV(n_basis=20, cv=3, gammas=[0.5, 2.0], probability=True, random_state=0).fit(Xtr, ytr)
    assert cv.best_estimator_.probability and cv.best_estimator_.calibrator_ is not None
    assert log_loss(yte, cv.predict_proba(Xte), labels=cv.classes_) < _constant_log_loss(ytr, yte, cv.classes_)
    assert not hasattr(KMPClassifierCV(n_basis=5, cv=3, gammas=[1.0], random_state=0).fit(Xtr, ytr),
                       "predict_proba")


def test_compressed_classifiers_give_calibrated_probabilities(tmp_path):
    Xtr, Xte, ytr, yte = _keel("segment")
    Xfit, Xcal, yfit, ycal = train_test_split(Xtr, ytr, test_size=0.2, random_state=0, stratify=ytr)
    scale = np.where(Xfit.std(0) > 0, Xfit.std(0), 1.0)
    svc = SVC(gamma=0.05).fit(Xfit / scale, yfit)
    const = _constant_log_loss(ytr, yte, svc.classes_)
    comp = ReducedSetCompressor(0.2, probability=True).fit(svc, Xfit / scale, yfit, X_val=Xcal / scale, y_val=ycal)
    P = comp.predict_proba(Xte / scale)
    assert P.shape == (len(Xte), len(svc.classes_)) and log_loss(yte, P, labels=svc.classes_) < 0.6 * const
    kmp_dask.save(comp, tmp_path / "c")
    np.testing.assert_array_equal(kmp_dask.load(tmp_path / "c").predict_proba(Xte / scale), P)
    meta = ReducedSetClassifier(SVC(gamma=0.05), probability=True, random_state=0).fit(Xtr / scale, ytr)
    assert log_loss(yte, meta.predict_proba(Xte / scale), labels=meta.classes_) < 0.6 * const
    with pytest.raises(ValueError, match="pass X_val and y_val"):
        ReducedSetCompressor(0.2, probability=True).fit(svc)


def test_calibrator_gives_absent_classes_a_small_probability():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(60, 3))
    codes = F[:, :2].argmax(axis=1)  # class 2 never occurs among these rows
    cal = PlattCalibrator.fit(F, codes, 3)
    P = cal.predict_proba(F)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(P[:, 2], 1.0 / 63)
    assert np.mean(P[:, :2].argmax(axis=1) == codes) > 0.9
    with pytest.warns(UserWarning, match="hold 1 class"):
        one = PlattCalibrator.fit(F, np.zeros(60, dtype=int), 3)
    np.testing.assert_allclose(one.predict_proba(F[:5]), np.tile([1 - 2 / 63, 1 / 63, 1 / 63], (5, 1)))
    with pytest.warns(UserWarning, match="hold 1 class"):
        two = PlattCalibrator.fit(F[:, :1], np.ones(60, dtype=int), 2)
    p2 = two.predict_proba(F[:, :1])
    np.testing.assert_allclose(p2, np.tile([1 / 62, 1 - 1 / 62], (60, 1)), rtol=1e-4)
    order = np.argsort(F[:, 0])  # two classes: ordered by the decision values, to within a rounding step
    assert np.all(np.diff(p2[order, 1]) > 0)


def test_cli_predict_proba_works_for_a_classifier_trained_with_probability(tmp_path):
    from kmp_dask.cli import main

    Xtr, Xte, ytr, yte = _keel("banana", 1500)
    create_store(tmp_path / "tr.zarr", Xtr, ytr, chunk_rows=256)
    create_store(tmp_path / "te.zarr", Xte, yte, chunk_rows=256)
    run = CliRunner().invoke
    r = run(main, ["train", str(tmp_path / "tr.zarr"), "--model", str(tmp_path / "m"), "--n-basis", "30",
                   "--probability", "true", "--task", "classification", "--random-state", "0", "--scheduler", "sync",
                   "--quiet"])
    assert r.exit_code == 0, r.output
    r = run(main, ["predict", str(tmp_path / "m"), str(tmp_path / "te.zarr"), "--output", str(tmp_path / "p.csv"),
                   "--proba", "--quiet", "--scheduler", "sync"])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(tmp_path / "p.csv")
    classes = kmp_dask.load(tmp_path / "m").classes_
    P = df[[f"proba_{c}" for c in classes]].to_numpy()
    assert log_loss(yte, P, labels=classes) < _constant_log_loss(ytr, yte, classes)
    # trained without it: one Error: line that says how to get probabilities
    r = run(main, ["train", str(tmp_path / "tr.zarr"), "--model", str(tmp_path / "plain"), "--n-basis", "10",
                   "--task", "classification", "--random-state", "0", "--scheduler", "sync", "--quiet"])
    assert r.exit_code == 0, r.output
    r = run(main, ["predict", str(tmp_path / "plain"), str(tmp_path / "te.zarr"), "--output",
                   str(tmp_path / "q.csv"), "--proba", "--quiet", "--scheduler", "sync"])
    assert r.exit_code != 0 and "--probability true" in r.output
    assert [line for line in r.output.splitlines() if line.strip()][-1].startswith("Error:")


@pytest.mark.slow
def test_a_cluster_fit_calibrates_on_the_same_rows_as_in_process(tmp_path):
    Xtr, Xte, ytr, yte = _keel("banana", 1500)
    store = create_store(tmp_path / "tr.zarr", Xtr, ytr, chunk_rows=128)
    here = KMPClassifier(n_basis=20, probability=True, random_state=0, client="sync").fit(store)
    there = KMPClassifier(n_basis=20, probability=True, random_state=0, client="embedded").fit(store)
    assert there.calibrator_.n_rows == here.calibrator_.n_rows
    np.testing.assert_allclose(there.predict_proba(Xte), here.predict_proba(Xte), rtol=1e-6, atol=1e-9)


def test_probability_auto_calibrates_where_rows_are_held_out_anyway():
    """``probability="auto"`` (the default): with ``n_basis="auto"`` the fit holds out rows for its
    size already, so it calibrates on them and the model is the one ``probability=False`` gives;
    with an int ``n_basis`` and no validation split it spends no rows and gives no predict_proba."""
    Xtr, Xte, ytr, yte = _keel("banana", 1500)
    auto = KMPClassifier(random_state=0).fit(Xtr, ytr)
    plain = KMPClassifier(random_state=0, probability=False).fit(Xtr, ytr)
    np.testing.assert_array_equal(auto.decision_function(Xte), plain.decision_function(Xte))
    P = auto.predict_proba(Xte)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert not hasattr(plain, "predict_proba")
    assert not hasattr(KMPClassifier(n_basis=10, random_state=0).fit(Xtr, ytr), "predict_proba")


def test_cli_predict_proba_works_for_a_classifier_trained_with_no_model_flags(tmp_path):
    """``train`` with no size and no ``--probability`` (``n_basis="auto"``, ``probability="auto"``):
    ``predict --proba`` works, and its log-loss beats the class shares."""
    from kmp_dask.cli import main

    Xtr, Xte, ytr, yte = _keel("banana", 1500)
    create_store(tmp_path / "tr.zarr", Xtr, ytr, chunk_rows=256)
    create_store(tmp_path / "te.zarr", Xte, yte, chunk_rows=256)
    run = CliRunner().invoke
    r = run(main, ["train", str(tmp_path / "tr.zarr"), "--model", str(tmp_path / "m"), "--random-state", "0",
                   "--task", "classification", "--scheduler", "sync", "--quiet"])  # banana's labels are ±1 numbers
    assert r.exit_code == 0, r.output
    r = run(main, ["predict", str(tmp_path / "m"), str(tmp_path / "te.zarr"), "--output", str(tmp_path / "p.csv"),
                   "--proba", "--quiet", "--scheduler", "sync"])
    assert r.exit_code == 0, r.output
    classes = kmp_dask.load(tmp_path / "m").classes_
    P = pd.read_csv(tmp_path / "p.csv")[[f"proba_{c}" for c in classes]].to_numpy()
    assert log_loss(yte, P, labels=classes) < _constant_log_loss(ytr, yte, classes)


def test_binary_calibration_keeps_the_decision_values_order():
    """A few held-out rows whose classes run against the decision values: the sigmoid's slope is
    held at a small positive bound (Platt's fit would turn it negative and reverse the ranking
    predict_proba gives against decision_function); rows that agree keep the ordinary fit."""
    from kmp_dask.estimators._calibration import PlattCalibrator

    F = np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
    against = PlattCalibrator.fit(F, np.array([1, 1, 1, 0, 0, 0]), 2)
    assert against.coef[0, 0] > 0
    grid = np.linspace(-3, 3, 13)
    p = against.predict_proba(grid)[:, 1]
    assert np.all(np.diff(p) > 0)
    along = PlattCalibrator.fit(F, np.array([0, 0, 1, 0, 1, 1]), 2)
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=1.0, max_iter=1000).fit(F[:, None], [0, 0, 1, 0, 1, 1])
    np.testing.assert_allclose(along.coef, lr.coef_.T)  # the unconstrained fit where it is increasing
