"""Shared checks of the cross-validating estimators' tests."""

from __future__ import annotations

import numpy as np


def assert_same_search(a, b):
    """Two fitted ``KMP*CV`` searches agree bit for bit: widths, every held-out score, every
    ``cv_results_`` entry but the pursuits' seconds, the choice and the refit's basis."""
    np.testing.assert_array_equal(a.gammas_, b.gammas_)
    np.testing.assert_array_equal(a.scores_, b.scores_)
    for key, value in a.cv_results_.items():
        if "fit_time" not in key:  # the pursuits' seconds
            assert value == b.cv_results_[key] if key == "params" else np.array_equal(value, b.cv_results_[key]), key
    assert a.best_params_ == b.best_params_
    np.testing.assert_array_equal(a.best_estimator_.basis_indices_, b.best_estimator_.basis_indices_)


def checkerboard(n=400, seed=0):
    """A 2-d checkerboard: a boundary that needs many atoms (caps that bind in small searches)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    return X, (np.sin(2 * X[:, 0]) * np.sin(2 * X[:, 1]) > 0).astype(int)


def fold_copies(folds, n_distinct=5, seed=0):
    """Rows of fold 0: distinct uniform points (checkerboard labels); the other rows: copies of
    ``n_distinct`` points. Fold 0's pursuit trains on the copies only (and stops before its cap),
    the others on fold 0's rows."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(len(folds), 2))
    few = rng.uniform(-3, 3, size=(n_distinct, 2))
    rest = np.flatnonzero(folds != 0)
    X[rest] = few[np.arange(len(rest)) % n_distinct]
    return X, (np.sin(2 * X[:, 0]) * np.sin(2 * X[:, 1]) > 0).astype(int)


def continued_pursuits(monkeypatch):
    """A list that gets one entry per (γ, fold) pursuit continued from a kept state (the extend hook)."""
    from kmp_dask.greedy import _kmp as greedy_kmp

    calls, original = [], greedy_kmp.PursuitExtension.restore
    monkeypatch.setattr(greedy_kmp.PursuitExtension, "restore",
                        lambda self, engine, rng: calls.append(1) or original(self, engine, rng))
    return calls


def assert_extension_is_the_rerun(monkeypatch, make, X, y, first_cap):
    """With the cap doubling past ``first_cap``, continuing the kept pursuits (``EXTEND``) gives the
    search that reruns every extended pursuit from atom 1, bit for bit; some pursuit was continued."""
    from kmp_dask.estimators import _kmp_cv

    monkeypatch.setattr(_kmp_cv, "EXTEND", False)
    rerun = make().fit(X, y)
    monkeypatch.setattr(_kmp_cv, "EXTEND", True)
    continued = continued_pursuits(monkeypatch)
    extended = make().fit(X, y)
    assert rerun.sizes_[-1] > first_cap and continued  # the precondition: the cap doubled, pursuits were continued
    assert_same_search(rerun, extended)
