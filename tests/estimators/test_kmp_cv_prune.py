"""``n_basis="auto"`` with ``_kmp_cv.PRUNE_SE = z``: when the cap doubles, only the widths whose best
mean held-out score is within z standard errors of the best are continued.

Oracles: a hand computation of the standard error and of the widths continued on synthetic score
arrays; the search without pruning (``PRUNE_SE = None``), whose scores up to the old cap the pruned
search must repeat bit for bit (a pursuit's cap does not change the atoms it picks), and
``one_standard_error`` applied to the recorded scores.
"""

import dask.array as da
import numpy as np
import pytest
from _cv_checks import checkerboard

from kmp_dask import KMPClassifierCV
from kmp_dask.estimators import _kmp_cv


def _curves(finals, cap=10, folds=None):
    """Scores (per width, per fold, sizes 0 … cap) rising linearly to ``finals[g]`` at the cap; the
    fold scores of width g at the cap are ``folds[g]`` when given (their mean is ``finals[g]``)."""
    out = []
    for g, final in enumerate(finals):
        ends = folds[g] if folds and g in folds else [final] * 3
        out.append([np.linspace(0.5, e, cap + 1) for e in ends])
    return out


def test_within_se_by_hand():
    # width 1 is the best: fold scores 0.93, 0.95, 0.97 at the cap -> mean 0.95, SE = 0.02 / sqrt(3)
    scores = _curves([0.90, 0.95, 0.935], folds={1: [0.93, 0.95, 0.97]})
    se = 0.02 / np.sqrt(3)  # std(ddof=1) of (0.93, 0.95, 0.97) is 0.02: 0.011547
    assert 0.95 - se > 0.935 > 0.95 - 2 * se > 0.90  # the precondition of the cases below
    assert _kmp_cv._within_se(scores, 10, None).tolist() == [True, True, True]
    assert _kmp_cv._within_se(scores, 10, 2.0).tolist() == [False, True, True]
    assert _kmp_cv._within_se(scores, 10, 1.0).tolist() == [False, True, False]
    assert _kmp_cv._within_se(scores, 10, 0.0).tolist() == [False, True, False]


def test_to_extend_prunes_by_hand(monkeypatch):
    scores = _curves([0.90, 0.95, 0.935], folds={1: [0.93, 0.95, 0.97]})
    for z, expected in ((None, [0, 1, 2]), (2.0, [1, 2]), (1.0, [1])):
        monkeypatch.setattr(_kmp_cv, "PRUNE_SE", z)
        assert _kmp_cv._to_extend(scores, 10) == expected, z
    # a width whose own best is not near the cap is not continued, pruned or not; nor when the best is early
    flat = _curves([0.90, 0.95, 0.935], folds={1: [0.93, 0.95, 0.97]})
    flat[2] = [np.r_[np.linspace(0.5, 0.94, 6), np.full(5, 0.94)] for _ in range(3)]  # best at size 5
    monkeypatch.setattr(_kmp_cv, "PRUNE_SE", 2.0)
    assert _kmp_cv._to_extend(flat, 10) == [1]
    early = [[np.r_[np.linspace(0.5, 0.95, 4), np.full(7, 0.95)] for _ in range(3)]]
    assert _kmp_cv._to_extend(early, 10) == []
    # the SE is the best (γ, size)'s, sizes beyond a short pursuit count as its last model
    short = _curves([0.90, 0.95], folds={1: [0.93, 0.95, 0.97]})
    short[0] = [s[:6] for s in short[0]]  # width 0 stopped at 5 atoms: not continued in any case
    monkeypatch.setattr(_kmp_cv, "PRUNE_SE", None)
    assert _kmp_cv._to_extend(short, 10) == [1]


def test_projected_gain_keeps_a_width_still_rising(monkeypatch):
    # widths 0 and 2 below the z = 1 bar (0.95 - 0.011547); width 0 flat over the last half (0.89 -> 0.90),
    # width 2 still rising (0.7175 at 5 atoms -> 0.935 at 10): best + gain 0.90 + 0.01 < bar < 0.935 + 0.2175
    scores = _curves([0.90, 0.95, 0.935], folds={1: [0.93, 0.95, 0.97]})
    scores[0] = [np.r_[np.linspace(0.5, 0.89, 6), np.linspace(0.8925, 0.90, 5)] for _ in range(3)]
    assert _kmp_cv._within_se(scores, 10, 1.0).tolist() == [False, True, False]
    assert _kmp_cv._within_se(scores, 10, 1.0, project=True).tolist() == [False, True, True]
    monkeypatch.setattr(_kmp_cv, "PRUNE_SE", 1.0)
    monkeypatch.setattr(_kmp_cv, "PRUNE_PROJECT", True)
    assert _kmp_cv._to_extend(scores, 10) == [1, 2]
    monkeypatch.setattr(_kmp_cv, "PRUNE_SE", None)
    assert _kmp_cv._to_extend(scores, 10) == [0, 1, 2]


def _fitted_widths(monkeypatch):
    """Record every (γ, fold) pursuit fitted: (γ, cap)."""
    calls, original = [], _kmp_cv._CVSearch._fold_fit

    def fold_fit(self, gamma, *args, **kwargs):
        calls.append((float(gamma), int(self.cap)))
        return original(self, gamma, *args, **kwargs)

    monkeypatch.setattr(_kmp_cv._CVSearch, "_fold_fit", fold_fit)
    return calls


def _search(monkeypatch, z, X, y, **kw):
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, 40))
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", None)  # the first cap 10 itself
    monkeypatch.setattr(_kmp_cv, "CAP_SHARE", 0.0)  # every width that reaches the cap is near it
    monkeypatch.setattr(_kmp_cv, "PRUNE_SE", z)
    calls = _fitted_widths(monkeypatch)
    est = KMPClassifierCV(gammas=[50.0, 2.0], cv=3, random_state=0, **kw).fit(X, y)
    return est, list(calls)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_far_worse_width_is_pruned_and_the_search_stays_consistent(monkeypatch):
    X, y = checkerboard()
    full, full_calls = _search(monkeypatch, None, X, y, client="sync")
    pruned, calls = _search(monkeypatch, 1.0, X, y, client="sync")
    mean = full.scores_.mean(axis=1)
    assert mean[0, :10].max() < mean[1, :10].max() - 0.1  # the precondition: γ = 50.0 is far worse
    assert {c for g, c in full_calls if g == 50.0} == {10, 20, 40}  # without pruning it goes on to 40
    assert {c for g, c in calls if g == 50.0} == {10} and {c for g, c in calls if g == 2.0} == {10, 20, 40}
    assert pruned.sizes_[-1] == full.sizes_[-1] == 40
    # the kept width's scores are the unpruned search's; the pruned one's to its cap too, then its last model's
    np.testing.assert_array_equal(pruned.scores_[1], full.scores_[1])
    np.testing.assert_array_equal(pruned.scores_[0, :, :10], full.scores_[0, :, :10])
    np.testing.assert_array_equal(pruned.scores_[0, :, 10:], np.repeat(full.scores_[0, :, 9:10], 30, axis=1))
    # cv_results_ and the choice follow the recorded scores
    res = pruned.cv_results_
    np.testing.assert_array_equal(res["mean_test_score"], pruned.scores_.mean(axis=1).ravel())
    for i in range(3):
        np.testing.assert_array_equal(res[f"split{i}_test_score"], pruned.scores_[:, i, :].ravel())
    g, s = _kmp_cv.one_standard_error(pruned.scores_, rule=pruned.rule_)
    assert pruned.best_params_ == {"gamma": [50.0, 2.0][g], "n_basis": s + 1}
    assert pruned.best_params_ == full.best_params_  # the pruned width was not the choice
    assert res["params"][pruned.best_index_] == pruned.best_params_


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pruned_search_on_dask_input_does_not_depend_on_chunking(monkeypatch):
    X, y = checkerboard(300)
    _, unpruned = _search(monkeypatch, None, da.from_array(X, chunks=64), da.from_array(y, chunks=64), client="sync")
    assert max(c for g, c in unpruned if g == 50.0) > 10  # the precondition: without pruning it is continued
    a, _ = _search(monkeypatch, 1.0, da.from_array(X, chunks=64), da.from_array(y, chunks=64), client="sync")
    b, calls = _search(monkeypatch, 1.0, da.from_array(X, chunks=300), da.from_array(y, chunks=300), client="sync")
    assert {c for g, c in calls if g == 50.0} == {10} and max(c for _, c in calls) > 10  # pruned, cap doubled
    np.testing.assert_array_equal(a.scores_, b.scores_)
    assert a.best_params_ == b.best_params_
