"""KMPClassifierCV's defaults: the adaptive cap of ``n_basis="auto"``.

The cap starts at ``AUTO_N_BASIS[0]`` and doubles (up to ``AUTO_N_BASIS[1]``) while the best mean
held-out score is in its last tenth; the tests shrink both numbers so that a fit takes a second.
Oracles: the same search with a fixed ``n_basis`` (a pursuit's cap does not change the atoms it
picks, so its scores must be equal) and separately fitted ``KMPClassifier`` models.
"""

import numpy as np
import pytest
from _cv_checks import assert_extension_is_the_rerun, assert_same_search, checkerboard
from sklearn.datasets import make_moons

from kmp_dask import KMPClassifier, KMPClassifierCV, KMPRegressorCV
from kmp_dask.estimators import _kmp_cv


def test_default_n_basis_is_auto():
    assert KMPClassifierCV().n_basis == "auto"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_adaptive_cap_extends_when_the_best_is_at_the_cap(monkeypatch):
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, 40))
    X, y = checkerboard()
    kw = {"gammas": [0.5, 2.0], "cv": 3, "random_state": 0, "client": "sync"}
    short = KMPClassifierCV(n_basis=10, **kw).fit(X, y)
    mean = short.scores_.mean(axis=1)
    assert mean.max(axis=0).argmax() + 1 > 9  # the precondition: at 10 atoms the best is at the cap
    auto = KMPClassifierCV(n_basis="auto", **kw).fit(X, y)
    cap = int(auto.sizes_[-1])
    assert cap in (20, 40)
    full = KMPClassifierCV(n_basis=cap, **kw).fit(X, y)  # the oracle: a fixed cap of the size reached
    extended = [g for g in range(2) if mean[g].argmax() + 1 > 9]
    assert extended
    # each extended width was continued to at least 20 atoms: those sizes are the longer pursuit's
    np.testing.assert_allclose(auto.scores_[extended, :, :20], full.scores_[extended, :, :20], atol=1e-12)
    last = int(np.unravel_index(int(np.argmax(auto.scores_.mean(axis=1))), (2, cap))[0])
    if cap == 40:  # the width that made the cap double twice was continued to 40
        np.testing.assert_allclose(auto.scores_[last], full.scores_[last], atol=1e-12)
    np.testing.assert_array_equal(auto.scores_[:, :, :10], short.scores_)  # the first 10 sizes unchanged
    # the choice follows the rule on the recorded scores, and the refit is that model
    assert auto.rule_ == _kmp_cv.AUTO_RULE
    g, s = _kmp_cv.one_standard_error(auto.scores_, rule=auto.rule_)
    assert auto.best_params_ == {"gamma": [0.5, 2.0][g], "n_basis": s + 1}
    sep = KMPClassifier(gamma=auto.best_params_["gamma"], n_basis=auto.best_params_["n_basis"],
                        random_state=auto.best_estimator_.random_state, client="sync").fit(X, y)
    np.testing.assert_allclose(auto.decision_function(X), sep.decision_function(X), atol=1e-8)
    assert auto.n_basis_ == sep.n_basis_


def test_adaptive_cap_stays_when_the_best_is_early(monkeypatch):
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (40, 160))
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", None)  # the first cap 40 itself (not ⌈200 / 8⌉ = 25)
    X, y = make_moons(300, noise=0.3, random_state=0)
    auto = KMPClassifierCV(gammas=[1.0], n_basis="auto", cv=3, random_state=0, client="sync").fit(X, y)
    assert auto.scores_.mean(axis=1)[0].argmax() + 1 <= 36  # the precondition: the best is well inside
    assert auto.sizes_[-1] == 40 and auto.scores_.shape == (1, 3, 40)
    fixed = KMPClassifierCV(gammas=[1.0], n_basis=40, cv=3, random_state=0, client="sync").fit(X, y)
    np.testing.assert_array_equal(auto.scores_, fixed.scores_)
    assert auto.best_params_ == fixed.best_params_


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_adaptive_cap_stops_at_its_limit_and_warns(monkeypatch):
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (5, 10))
    X, y = checkerboard()
    with pytest.warns(UserWarning, match=r"at 10 of n_basis=10 atoms"):
        auto = KMPClassifierCV(gammas=[2.0], rule="best", cv=3, random_state=0, client="sync").fit(X, y)
    assert auto.sizes_[-1] == 10


def test_fixed_n_basis_never_extends():
    X, y = checkerboard()
    with pytest.warns(UserWarning, match="raise n_basis"):
        est = KMPClassifierCV(gammas=[2.0], n_basis=10, rule="best", cv=3, random_state=0, client="sync").fit(X, y)
    assert est.sizes_[-1] == 10


@pytest.mark.parametrize("bad", ["big", "200"])
def test_bad_n_basis_string_is_named(bad):
    with pytest.raises(ValueError, match=rf"n_basis must be 'auto'.*got n_basis='{bad}'"):
        KMPClassifierCV(n_basis=bad).fit(np.zeros((10, 2)), np.arange(10) % 2)


def test_default_grid_widens_at_the_end_where_the_best_is(monkeypatch):
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (30, 30))  # no cap extension: the grid only
    X, y = checkerboard(300)
    auto = KMPClassifierCV(cv=3, random_state=0, client="sync").fit(X, y)  # gammas=None, n_basis="auto"
    base = _kmp_cv.scale_gamma(X) * np.asarray(_kmp_cv.DEFAULT_GAMMA_FACTORS)
    assert len(auto.gammas_) > 3 and np.all(np.diff(auto.gammas_) > 0)
    assert all(np.isclose(auto.gammas_, g).any() for g in base)  # the default grid is kept
    assert len(auto.gammas_) <= 3 + 2 * _kmp_cv.AUTO_WIDEN
    ratios = auto.gammas_[1:] / auto.gammas_[:-1]
    np.testing.assert_allclose(ratios, 4.0, rtol=1e-9)
    # the oracle: the same widths given as a fixed grid give the same scores and choice
    fixed = KMPClassifierCV(gammas=list(auto.gammas_), n_basis=30, cv=3, random_state=0, client="sync").fit(X, y)
    np.testing.assert_array_equal(auto.scores_, fixed.scores_)
    assert auto.best_params_ == fixed.best_params_
    # widened because the best was at an end of the default grid, and only until it is inside
    base_rows = [int(np.argmin(np.abs(auto.gammas_ - g))) for g in base]
    mean = auto.scores_.mean(axis=1)
    assert int(np.unravel_index(int(np.argmax(mean[base_rows])), (3, 30))[0]) in (0, 2)
    g0 = int(np.unravel_index(int(np.argmax(mean)), mean.shape)[0])
    assert 0 < g0 < len(mean) - 1 or len(auto.gammas_) == 3 + _kmp_cv.AUTO_WIDEN


def test_given_grid_is_not_widened(monkeypatch):
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (30, 30))
    X, y = checkerboard(300)
    est = KMPClassifierCV(gammas=[0.01, 0.02], cv=3, random_state=0, client="sync")
    with pytest.warns(UserWarning, match="largest gamma"):
        est.fit(X, y)
    assert list(est.gammas_) == [0.01, 0.02]


def test_selection_rule_defaults_by_hand():
    """rule="auto": the classifier and the regressor take the smallest model within half a standard
    error of the best mean held-out score; checked against the bar computed here."""
    from kmp_dask import KMPRegressorCV

    assert KMPClassifierCV().rule == "auto" and _kmp_cv.AUTO_RULE == "half_se"
    X, y = make_moons(300, noise=0.3, random_state=0)
    kw = {"gammas": [0.5, 2.0, 8.0], "n_basis": 30, "cv": 3, "random_state": 0, "client": "sync"}
    for est, width, rule in ((KMPClassifierCV(**kw).fit(X, y), 0.5, "half_se"),
                             (KMPRegressorCV(**kw).fit(X, np.sin(2 * X[:, 0]) + 0.3 * y), 0.5, "half_se")):
        m = est.scores_.mean(axis=1)
        best = m.max()
        s0 = int(np.flatnonzero(m.max(axis=0) == best)[0])  # the smallest size holding the best mean
        g0 = int(np.flatnonzero(m[:, s0] == best)[0])
        bar = best - width * est.scores_[g0, :, s0].std(ddof=1) / np.sqrt(3)
        s = int(np.flatnonzero((m >= bar).any(axis=0))[0])
        g = int(np.argmax(np.where(m[:, s] >= bar, m[:, s], -np.inf)))
        assert est.rule_ == rule and est.best_estimator_.cv_search_["rule"] == rule
        assert est.best_params_ == {"gamma": kw["gammas"][g], "n_basis": s + 1}


def test_three_rules_by_hand():
    # made-up scores, 2 γ × 3 folds × 4 sizes; the best mean 0.90 is γ1 at size 4, fold scores
    # 0.80 0.90 1.00: SE = 0.1 / √3 = 0.0577. 1se bar 0.8423: size 2 (γ1 0.86; γ0 0.82);
    # half_se bar 0.8711: size 3 (γ1 0.88; γ0 0.86); best: size 4
    S = np.array([[[0.70, 0.80, 0.85, 0.86], [0.72, 0.82, 0.86, 0.87], [0.74, 0.84, 0.87, 0.88]],
                  [[0.60, 0.84, 0.85, 0.80], [0.62, 0.86, 0.88, 0.90], [0.64, 0.88, 0.91, 1.00]]])
    assert _kmp_cv.one_standard_error(S, rule="1se") == (1, 1)
    assert _kmp_cv.one_standard_error(S, rule="half_se") == (1, 2)
    assert _kmp_cv.one_standard_error(S, rule="best") == (1, 3)
    S[0, :, 2] += 0.02  # γ0 size 3 now has mean 0.88 = γ1's: the earlier γ wins the tie
    assert _kmp_cv.one_standard_error(S, rule="half_se") == (0, 2)


def test_best_rule_breaks_ties_by_size_then_gamma():
    # made-up scores, 2 γ × 2 folds × 4 sizes: the best mean 0.9 is reached at size 3 by γ1 and at
    # size 4 by γ0 and γ1; "best" takes the smallest size (3, γ1); "1se" a smaller one
    S = np.array([[[0.5, 0.7, 0.8, 0.9], [0.5, 0.7, 0.8, 0.9]],
                  [[0.6, 0.8, 0.9, 0.9], [0.6, 0.8, 0.9, 0.9]]])
    assert _kmp_cv.one_standard_error(S, rule="best") == (1, 2)
    S[0, :, 2] = 0.9  # now γ0 reaches 0.9 at size 3 too: the earlier γ wins the tie
    assert _kmp_cv.one_standard_error(S, rule="best") == (0, 2)
    S[1, :, 1] = [0.8, 1.0]  # γ1 reaches the mean 0.9 already at size 2 (two different folds)
    assert _kmp_cv.one_standard_error(S, rule="best") == (1, 1)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("store", [False, True])
def test_doubled_cap_continues_the_pursuits_bit_for_bit(monkeypatch, store):
    """The oracle: today's path, every extended (γ, fold) pursuit run again from atom 1."""
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (8, 32) if store else (10, 40))  # caps that double here
    X, y = checkerboard()
    if store:
        import dask.array as da

        X, y = da.from_array(X, chunks=150), da.from_array(y, chunks=150)
    # k = 1 (dask input's "auto" is k > 1, whose continuation test_kmp_cv_blocks.py checks)
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=3, random_state=0, client="sync", atoms_per_pass=1)
    assert_extension_is_the_rerun(monkeypatch, make, X, y, first_cap=_kmp_cv.AUTO_N_BASIS[0])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kept_kernel_tables_are_not_recomputed_and_change_nothing(monkeypatch):
    """A width continued to a doubled cap reads the table kept from the stage before (oracle: the
    same search with every table recomputed at each stage, KEEP_TABLE_BYTES = 0)."""
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, 40))
    X, y = checkerboard()
    built, original = [], _kmp_cv.kernel_table
    monkeypatch.setattr(_kmp_cv, "kernel_table", lambda kernel, rows: built.append(1) or original(kernel, rows))
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=3, random_state=0, client="sync")
    monkeypatch.setattr(_kmp_cv, "KEEP_TABLE_BYTES", 0)
    rebuilt = make().fit(X, y)
    n_rebuilt = len(built)
    built.clear()
    monkeypatch.setattr(_kmp_cv, "KEEP_TABLE_BYTES", _kmp_cv.TABLE_BYTES)
    kept = make().fit(X, y)
    assert rebuilt.sizes_[-1] > 10 and n_rebuilt > 2  # the precondition: a doubling stage recomputed a table
    assert len(built) == 2  # one table per width, whatever the stages
    assert_same_search(rebuilt, kept)


def _reached(auto, full, caps):
    """Per width: the cap its pursuits were run to — ``auto``'s scores are ``full``'s (a fixed cap)
    up to it and the last model's beyond it — or None when no cap of ``caps`` fits."""
    out = []
    for a, f in zip(auto.scores_, full.scores_, strict=True):
        fits = [c for c in caps if np.array_equal(a[:, :c], f[:, :c]) and np.all(a[:, c:] == a[:, c - 1:c])]
        out.append(fits[0] if fits else None)
    return out


def test_first_cap_relative_to_the_folds_rows(monkeypatch):
    """FIRST_CAP_SHARE (a classifier's default): the first cap is ⌈share · the fewest training rows
    of a fold⌉ (at least MIN_FIRST_CAP); when the best is early it stays there, with the fixed cap's
    scores. A regressor starts at AUTO_N_BASIS[0]."""
    assert _kmp_cv.FIRST_CAP_SHARE == 0.125
    X, y = make_moons(300, noise=0.3, random_state=0)
    kw = {"gammas": [1.0, 4.0], "cv": 3, "random_state": 0, "client": "sync"}
    auto = KMPClassifierCV(**kw).fit(X, y)  # folds of 200 training rows: a first cap of 25
    assert auto.sizes_[-1] == 25
    fixed = KMPClassifierCV(n_basis=25, **kw).fit(X, y)
    np.testing.assert_array_equal(auto.scores_, fixed.scores_)
    assert auto.best_params_ == fixed.best_params_
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", 0.01)  # 2 atoms: the smallest first cap instead
    small = KMPClassifierCV(**kw).fit(X, y)
    np.testing.assert_array_equal(small.scores_[:, :, :_kmp_cv.MIN_FIRST_CAP],
                                  fixed.scores_[:, :, :_kmp_cv.MIN_FIRST_CAP])
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (30, 30))
    reg = KMPRegressorCV(**kw).fit(X, X[:, 0] + y)
    assert reg.sizes_[-1] == 30


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_small_caps_double_to_the_first_cap_then_as_before(monkeypatch):
    """Below AUTO_N_BASIS[0] the cap doubles under the looser SMALL_CAP_SHARE, clipped at
    AUTO_N_BASIS[0]; every width's scores are a fixed-cap search's up to the cap it reached."""
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (60, 120))
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", 0.05)  # 266 training rows a fold: MIN_FIRST_CAP = 20
    monkeypatch.setattr(_kmp_cv, "SMALL_CAP_SHARE", 0.5)
    X, y = checkerboard()
    kw = {"gammas": [0.5, 2.0], "cv": 3, "random_state": 0, "client": "sync"}
    auto = KMPClassifierCV(**kw).fit(X, y)
    cap = int(auto.sizes_[-1])
    assert cap in (40, 60, 120)  # 20 doubled (to 40, then 60 — not 80 —, then by the usual rule)
    full = KMPClassifierCV(n_basis=cap, **kw).fit(X, y)
    reached = _reached(auto, full, [c for c in (20, 40, 60, 120) if c <= cap])
    assert None not in reached and cap in reached
    g, s = _kmp_cv.one_standard_error(auto.scores_, rule=auto.rule_)
    assert auto.best_params_ == {"gamma": kw["gammas"][g], "n_basis": s + 1}
