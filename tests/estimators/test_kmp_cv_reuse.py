"""``n_basis="auto"``: a (γ, fold) pursuit that stopped before its cap is not fitted again when the
cap doubles (``_kmp_cv.REUSE``; vehicle's regression).

The data: one fold's training rows are copies of a few distinct points (its pursuit fits them
exactly and stops early), the other folds' training rows hold many distinct points (their
pursuits reach every cap). ``CAP_SHARE = 0`` makes the cap double while any fold reaches it, so
the search has stages whatever the score curves. The oracle: the same search with
``REUSE = False`` (the stopped pursuit fitted again from atom 1 at every stage): every score,
``cv_results_`` entry, choice and refitted model must be bit for bit the same.
"""

import numpy as np
import pytest
from _cv_checks import assert_same_search, fold_copies
from sklearn.model_selection import PredefinedSplit
from sklearn.utils import check_random_state

from kmp_dask import KMPClassifierCV, KMPRegressorCV
from kmp_dask.estimators import _kmp_cv
from kmp_dask.greedy._cv_path import row_folds

K = 3




def _counting(monkeypatch):
    """Record every (γ, fold) pursuit fitted: (γ, fold, cap, stopped before the cap)."""
    calls, original = [], _kmp_cv._CVSearch._fold_fit

    def fold_fit(self, gamma, *args, fold=0, **kwargs):
        out = original(self, gamma, *args, fold=fold, **kwargs)
        calls.append((float(gamma), int(fold), int(self.cap), out[2]))
        return out

    monkeypatch.setattr(_kmp_cv._CVSearch, "_fold_fit", fold_fit)
    return calls


def _both(monkeypatch, make, X, y):
    """The search with REUSE False, then True: (reference, reused, calls of each)."""
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, 40))
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", None)  # the first cap 10 itself
    monkeypatch.setattr(_kmp_cv, "CAP_SHARE", 0.0)  # double while a fold reaches the cap
    calls = _counting(monkeypatch)
    monkeypatch.setattr(_kmp_cv, "REUSE", False)
    reference = make().fit(X, y)
    before = list(calls)
    calls.clear()
    monkeypatch.setattr(_kmp_cv, "REUSE", True)
    reused = make().fit(X, y)
    return reference, reused, before, list(calls)


def _check_fitted_once(before, after):
    stopped = {(g, f) for g, f, _, s in before if s}
    refitted = {k for k in stopped if sum((g, f) == k for g, f, _, _ in before) > 1}
    assert refitted, before  # the precondition: without reuse a stopped pursuit is fitted again
    for key in stopped:
        assert sum((g, f) == key for g, f, _, _ in after) == 1, (key, after)  # fitted once
    assert len(after) == len(before) - sum(sum((g, f) == k for g, f, _, _ in before) - 1 for k in stopped)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_stopped_fold_pursuit_is_fitted_once_with_the_same_results(monkeypatch):
    folds = np.arange(150) % K
    X, y = fold_copies(folds)
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=PredefinedSplit(folds), random_state=0, client="sync")
    reference, reused, before, after = _both(monkeypatch, make, X, y)
    assert reference.sizes_[-1] == 40  # the precondition: two doublings
    stops = {f for _, f, _, s in before if s}
    assert stops == {0}  # only the fold trained on copies stopped early
    _check_fitted_once(before, after)
    assert_same_search(reference, reused)
    # its scores are its last model's beyond where it stopped: the fixed-cap oracle at 40 agrees
    fixed = KMPClassifierCV(gammas=[0.5, 2.0], n_basis=40, cv=PredefinedSplit(folds), random_state=0,
                            client="sync").fit(X, y)
    np.testing.assert_array_equal(reused.scores_, fixed.scores_)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_regressor_stopped_fold_pursuit_is_fitted_once(monkeypatch):
    folds = np.arange(150) % K
    X, y = fold_copies(folds)
    target = np.sin(X[:, 0]) + 0.5 * y
    make = lambda: KMPRegressorCV(gammas=[1.0], cv=PredefinedSplit(folds), random_state=0, client="sync")
    reference, reused, before, after = _both(monkeypatch, make, X, target)
    _check_fitted_once(before, after)
    assert_same_search(reference, reused)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_store_input_stopped_fold_pursuit_is_fitted_once(monkeypatch):
    """Dask input (folds by a hash of the row index): the kept scorer is scored again in the one pass."""
    import dask.array as da

    n = 150
    split_seed = int(check_random_state(0).randint(0, 2**31 - 1))  # KMPClassifierCV's first draw
    X, y = fold_copies(row_folds(n, K, split_seed))
    Xd, yd = da.from_array(X, chunks=60), da.from_array(y, chunks=60)
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=K, random_state=0, client="sync")
    reference, reused, before, after = _both(monkeypatch, make, Xd, yd)
    assert reused.split_seed_ == split_seed and reference.sizes_[-1] == 40
    assert {f for _, f, _, s in before if s} == {0}
    _check_fitted_once(before, after)
    assert_same_search(reference, reused)
