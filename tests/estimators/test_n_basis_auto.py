"""``n_basis="auto"`` (the default of KMPClassifier / KMPRegressor): the pursuit grows while the
score on held-out rows improves, stops after the patience, keeps the best size; the cap and the
time budget warn when they end a growth that was still improving; an int ``n_basis`` is the fit
it was before "auto" existed (no held-out rows, no early stopping)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal
from sklearn.datasets import make_friedman1, make_moons

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.estimators import _kmp
from kmp_dask.exceptions import PrematureStopWarning
from kmp_dask.greedy._record import patience_atoms

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def moons():
    return make_moons(800, noise=0.3, random_state=0)


def _fit_quiet(est, X, y, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est.fit(X, y, **kw)
    return est, [x for x in w if issubclass(x.category, PrematureStopWarning)]


def test_auto_stops_on_a_plateau_and_keeps_the_best_size(moons):
    X, y = moons
    est, premature = _fit_quiet(KMPClassifier(random_state=0), X, y)
    assert est.stop_reason_ == "early_stopping" and not est.still_improving_ and not premature
    best = int(np.argmax(est.val_scores_))
    assert est.n_basis_ == est.val_sizes_[best]  # the first size with the best held-out score
    last = int(est.val_sizes_[-1])
    assert last - est.n_basis_ >= patience_atoms(_kmp.AUTO_PATIENCE, est.n_basis_)  # stopped by the patience
    assert last < est.n_basis_cap_ == len(X) and est.cap_reason_ == "rows"
    # the model kept is the prefix of the path at the best size (not refitted)
    assert len(est.history_) == est.n_basis_
    assert est.score(X, y) > 0.85


def test_auto_classifier_grows_on_the_held_out_loss_and_records_the_accuracy(moons):
    """A classifier's growth is decided by the held-out −MSE on its ±1 targets (AUTO_CRITERION); the
    history keeps the held-out accuracy."""
    X, y = moons
    est = KMPClassifier(random_state=0).fit(X, y)
    assert _kmp.AUTO_CRITERION == "loss"
    assert np.all(est.val_scores_ <= 0) and est.n_basis_ == est.val_sizes_[np.argmax(est.val_scores_)]
    acc = [h["val_score"] for h in est.history_]
    assert all(0.5 < a <= 1 for a in acc)
    assert "−MSE on the ±1 targets" in _kmp.growth_summary(est)


def test_auto_at_its_cap_while_improving_warns(moons, monkeypatch):
    X, y = moons
    monkeypatch.setattr(_kmp, "auto_n_basis", lambda *a, **k: (6, "memory"))
    est, premature = _fit_quiet(KMPClassifier(random_state=0), X, y)
    assert est.stop_reason_ == "n_basis" and est.n_basis_cap_ == 6 and est.cap_reason_ == "memory"
    assert est.still_improving_ and len(premature) == 1
    assert "cap of 6 atoms (set by the memory)" in str(premature[0].message)
    assert "still improving" in _kmp.growth_summary(est)


def test_auto_time_budget_stops_and_warns(moons):
    X, y = moons
    est, premature = _fit_quiet(KMPClassifier(random_state=0, max_time=1e-9), X, y)
    assert est.stop_reason_ == "max_time" and est.n_basis_ <= 2
    assert est.still_improving_ and "max_time" in str(premature[0].message)


def test_auto_chosen_size_does_not_depend_on_the_chunking(moons):
    X, y = moons
    a = KMPClassifier(random_state=0).fit(X, y)
    b = KMPClassifier(random_state=0, chunk_rows=130).fit(X, y)
    assert a.n_basis_ == b.n_basis_
    assert_array_equal(a.basis_indices_, b.basis_indices_)
    assert_array_equal(a.val_sizes_, b.val_sizes_)


def test_auto_chosen_size_does_not_depend_on_the_workers(moons, thread_client):
    """In process (one partition) and on a 2-worker cluster with 4 or 3 partitions: the same held-out
    rows (by hash), the same path, the same size kept."""
    import dask.array as da

    X, y = moons
    ref = KMPClassifier(random_state=0, client="sync").fit(X, y)
    for rows in (200, 270):
        Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        est = KMPClassifier(random_state=0, client=thread_client).fit(Xd, yd)
        assert est.n_basis_ == ref.n_basis_, rows
        assert_array_equal(est.basis_indices_, ref.basis_indices_)
        assert_array_equal(est.val_sizes_, ref.val_sizes_)


@pytest.mark.parametrize("cls", [KMPClassifier, KMPRegressor])
def test_int_n_basis_is_the_fit_before_auto_bit_for_bit(cls):
    """An int n_basis with the defaults holds out no rows and never stops early: the same model as
    the explicit pre-"auto" settings (validation_fraction=0.0, n_iter_no_change=None)."""
    X, y = make_moons(500, noise=0.3, random_state=1) if cls is KMPClassifier else make_friedman1(500, random_state=1)
    new = cls(n_basis=25, random_state=3).fit(X, y)
    old = cls(n_basis=25, random_state=3, validation_fraction=0.0, n_iter_no_change=None).fit(X, y)
    assert new.stop_reason_ == old.stop_reason_ == "n_basis" and new.val_scores_ is None
    assert new.n_basis_cap_ == 25 and new.cap_reason_ == "n_basis" and not new.still_improving_
    for attr in ("basis_indices_", "dual_coef_", "intercept_", "basis_vectors_"):
        assert_array_equal(getattr(new, attr), getattr(old, attr))
        assert getattr(new, attr).tobytes() == getattr(old, attr).tobytes()


@pytest.mark.parametrize("cls", [KMPClassifier, KMPRegressor])
def test_auto_ranks_by_factored_scores_and_keeps_the_exact_model(cls, monkeypatch):
    """n_basis="auto" ranks candidates by the factored RBF scores (two elementwise passes, not nine)
    and the chosen columns and coefficients stay exact: the model equals the one exact scores give."""
    from kmp_dask.blockops import _kmp as blocks

    X, y = make_moons(700, noise=0.3, random_state=2) if cls is KMPClassifier else make_friedman1(700, random_state=2)
    calls = []
    factored = blocks._score_factored
    monkeypatch.setattr(blocks, "_score_factored", lambda *a: calls.append(1) or factored(*a))
    fast = cls(random_state=4).fit(X, y)
    assert calls, "the auto growth did not use the factored scores"
    monkeypatch.setattr(cls, "_rank_only_scores", lambda self: False)
    calls.clear()
    exact = cls(random_state=4).fit(X, y)
    assert not calls
    assert fast.n_basis_ == exact.n_basis_ > 5
    assert_array_equal(fast.val_sizes_, exact.val_sizes_)
    for attr in ("basis_indices_", "dual_coef_", "intercept_", "val_scores_"):
        assert getattr(fast, attr).tobytes() == getattr(exact, attr).tobytes()


def test_regressor_auto_grows_and_stops():
    X, y = make_friedman1(900, noise=0.5, random_state=0)
    est, _ = _fit_quiet(KMPRegressor(random_state=0), X, y)
    assert est.stop_reason_ in ("early_stopping", "n_basis") and est.n_basis_ > 10
    assert est.val_scores_[np.argmax(est.val_scores_)] <= 0  # −MSE
    assert est.score(X, y) > 0.8


def test_auto_records_the_standard_error_of_each_held_out_score(monkeypatch):
    """``val_ses_``: the standard error of the held-out mean squared error, from the held-out rows'
    spread (the validation pass's Σ ℓ²) — checked against the rows themselves at the last size."""
    from sklearn.utils import check_random_state

    from kmp_dask.blockops._partition import split_mask
    from kmp_dask.estimators._base import draw_seed

    X, y = make_friedman1(600, noise=0.5, random_state=3)
    monkeypatch.setattr(_kmp, "auto_n_basis", lambda *a, **k: (30, "rows"))
    est = KMPRegressor(random_state=5, n_iter_no_change=None).fit(X, y)  # no patience: grows to 30, keeps it
    assert est.n_basis_ == est.val_sizes_[-1] == 30 and len(est.val_ses_) == len(est.val_scores_)
    held = split_mask(np.arange(len(X)), _kmp.AUTO_VALIDATION_FRACTION, draw_seed(check_random_state(5)))
    loss = (y[held] - est.predict(X[held])) ** 2
    assert est.val_scores_[-1] == pytest.approx(-loss.mean(), rel=1e-9)
    assert est.val_ses_[-1] == pytest.approx(loss.std() / np.sqrt(held.sum()), rel=1e-9)
    assert np.all(est.val_ses_ > 0)
    assert not hasattr(KMPRegressor(n_basis=10, random_state=5).fit(X, y), "val_ses_")  # an int: as before


@pytest.mark.parametrize("params, match", [
    ({"validation_fraction": 0.0, "loss": "logistic"}, "validation_fraction=0 chooses the size by GCV"),
    ({"stopping": "bound"}, "stopping='bound' grows the path to an int n_basis"),
    ({"max_time": -1}, "max_time must be None or a positive number"),
    ({"n_basis": "many"}, "n_basis must be a positive int .* or 'auto'"),
    ({"n_basis": 10, "n_iter_no_change": 5}, "n_iter_no_change needs a validation split"),
])
def test_bad_growth_parameters_are_refused_before_any_work(moons, params, match):
    X, y = moons
    with pytest.raises(ValueError, match=match):
        KMPClassifier(**params).fit(X, y)


def test_cli_train_prints_the_chosen_size_and_why(tmp_path):
    from kmp_dask.cli import main
    from kmp_dask.store import create_store

    X, y = make_moons(600, noise=0.3, random_state=0)
    create_store(tmp_path / "t.zarr", X, y, classes=["a", "b"], chunk_rows=200)
    r = CliRunner().invoke(main, ["train", str(tmp_path / "t.zarr"), "--model", str(tmp_path / "m.kmp"),
                                  "--scheduler", "sync", "--random-state", "0"])
    assert r.exit_code == 0, r.output
    est = KMPClassifier(random_state=0, client="sync").fit(str(tmp_path / "t.zarr"))  # the same fit
    line = _kmp.growth_summary(est)
    assert line.startswith(f"n_basis=auto: kept {est.n_basis_} basis functions") and "; stopped at" in line
    assert line in r.output  # the size kept and why the growth stopped


def test_report_marks_the_chosen_size(moons, tmp_path):
    from kmp_dask import load, save
    from kmp_dask.report import build_report

    X, y = moons
    est = KMPClassifier(random_state=0).fit(X, y)
    save(est, tmp_path / "m.kmp")
    html = build_report({"auto": load(tmp_path / "m.kmp")}, X=X, y=y)
    assert "size chosen" in html and f"kept {est.n_basis_} basis functions" in html


def test_cv_cap_grows_past_the_old_limit_and_stops_at_max_time(monkeypatch):
    """KMPClassifierCV(n_basis="auto"): with no fixed largest cap (AUTO_N_BASIS[1] None) the cap doubles
    while the best held-out score is at it — here past the 4 × first cap a fixed (10, 40) allowed —
    and a spent max_time stops the doubling at the first cap."""
    from kmp_dask import KMPClassifierCV
    from kmp_dask.estimators import _kmp_cv

    X, y = make_moons(500, noise=0.1, random_state=0)
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, None))
    kw = dict(gammas=[20.0], cv=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grown = KMPClassifierCV(**kw).fit(X, y)
        timed = KMPClassifierCV(max_time=1e-9, **kw).fit(X, y)
    assert grown.n_basis_cap_ > 40 and timed.n_basis_cap_ == 10
    with pytest.raises(ValueError, match="max_time must be None or a positive number"):
        KMPClassifierCV(max_time=0).fit(X, y)


def _fast_sine(n=600, freq=30.0):
    """A 1-D target too wiggly for the ``gamma="scale"`` width: its kernel columns span too few
    directions, and the pursuit stops ``"converged"`` while the held-out error is still large."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n, 1))
    return X, np.sin(freq * X[:, 0]) + 0.05 * rng.normal(size=n)


def test_auto_escapes_a_too_wide_width_to_a_narrower_one():
    X, y = _fast_sine()
    est = KMPRegressor(random_state=0).fit(X[:450], y[:450])
    first = est.width_path_[0]
    assert first["factor"] == 1.0 and first["stop_reason"] == "converged"  # the default width ran dry
    assert len(est.width_path_) > 1 and est.gamma_ > first["gamma"]  # a narrower width was kept ...
    kept = next(p for p in est.width_path_ if p["gamma"] == est.gamma_)
    assert kept["val_score"] == max(p["val_score"] for p in est.width_path_)  # ... the best held-out one
    assert est.kernel_.get("gamma") == est.gamma_ and est.n_basis_ == kept["n_basis"]
    assert est.score(X[450:], y[450:]) > 0.95  # the default width alone: R² below 0.5
    assert "width: gamma=" in est.size_choice_


def test_width_escape_keeps_the_default_width_on_a_tie_or_when_not_exhausted(moons, monkeypatch):
    X, y = moons
    est = KMPClassifier(random_state=0).fit(X, y)  # stops by its patience: no refit
    assert est.stop_reason_ == "early_stopping" and len(est.width_path_) == 1 and est.gamma_ == est.kernel_.get("gamma")
    Xs, ys = _fast_sine()
    monkeypatch.setattr(_kmp, "_best_val", lambda result: -1.0)  # every width the same held-out score
    tie = KMPRegressor(random_state=0).fit(Xs, ys)
    assert len(tie.width_path_) > 1 and tie.gamma_ == tie.width_path_[0]["gamma"]  # the first is kept


@pytest.mark.parametrize("params", [{"gamma": 1.0}, {"n_basis": 40}])
def test_explicit_gamma_or_int_n_basis_never_escapes(params, monkeypatch):
    X, y = _fast_sine()
    est = KMPRegressor(random_state=0, **params).fit(X, y)
    monkeypatch.setattr(_kmp, "WIDTH_ESCAPE_FACTORS", ())
    plain = KMPRegressor(random_state=0, **params).fit(X, y)
    assert_array_equal(est.predict(X), plain.predict(X))
    assert not hasattr(est, "width_path_") if "n_basis" in params else len(est.width_path_) == 1


def test_cli_train_says_which_width_the_escape_kept(tmp_path):
    from kmp_dask.cli import main
    from kmp_dask.store import create_store

    X, y = _fast_sine()
    create_store(tmp_path / "s.zarr", X, y, chunk_rows=200)
    r = CliRunner().invoke(main, ["train", str(tmp_path / "s.zarr"), "--model", str(tmp_path / "m.kmp"),
                                  "--scheduler", "sync", "--random-state", "0"])
    assert r.exit_code == 0, r.output
    est = KMPRegressor(random_state=0, client="sync").fit(str(tmp_path / "s.zarr"))  # the same fit
    assert len(est.width_path_) > 1 and est.size_choice_ in r.output
    assert f"width: gamma={est.gamma_:.4g}" in r.output


def test_auto_keeping_no_basis_function_warns_and_says_what_to_try():
    """Labels that are noise: the held-out rows find no size better than the constant model. The
    fit keeps it (the majority class) and says so, naming the options for small data."""
    from kmp_dask.exceptions import DegenerateFitWarning

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(150, 4)), rng.integers(0, 2, 150)
    with pytest.warns(DegenerateFitWarning, match=r"kept no basis function: on its \d+ held-out rows .* "
                                                  r"predicts the majority class.*validation_fraction=0"):
        est = KMPClassifier(random_state=0).fit(X, y)
    assert est.n_basis_ == 0 and len(set(est.predict(X))) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFitWarning)
        KMPClassifier(random_state=0).fit(*make_moons(300, noise=0.2, random_state=0))  # atoms kept: no warning
