"""``n_basis="auto"`` with ``validation_fraction=0``: every row is trained on and the size is chosen by
generalised cross-validation, ``GCV(k) = (RSS_k / N) / (1 − p_k / N)²`` (``p_k`` = k atoms plus the
fitted mean), from the residual norm the scoring passes already compute. Checked against the fit's
own prefix models evaluated densely, on a plateau and at the cap, across chunkings and workers,
through an interrupted and a SIGKILLed fit resumed from its checkpoint, and the refusals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _contracts import interrupted_then_resumed, run_and_kill_at, same_kmp
from numpy.testing import assert_array_equal
from sklearn.datasets import make_friedman1, make_moons

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.estimators import _kmp
from kmp_dask.exceptions import PrematureStopWarning
from kmp_dask.greedy import Pursuit
from kmp_dask.greedy._checkpoint import checkpoint_info
from kmp_dask.greedy._record import gcv_score, patience_atoms
from kmp_dask.store import create_store

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def friedman():
    return make_friedman1(500, noise=1.0, random_state=0)


def _dense_gcv(est, X, Y, sizes):
    """−GCV of the fit's k-atom prefix models on the rows ``X`` (targets ``Y``, (N, m)), evaluated densely."""
    K = est.expansion_.kernel_matrix(X)
    n = len(X)
    out = []
    for k in sizes:
        e = est.expansion_at(int(k)) if k else None
        F = (K[:, :k] @ e.coef + e.intercept) if k else np.zeros_like(Y) + Y.mean(axis=0)
        out.append(-np.sum((Y - F.reshape(Y.shape)) ** 2) / n / (1 - (k + 1) / n) ** 2)
    return np.asarray(out)


def test_gcv_path_is_the_dense_gcv_of_the_prefix_models(friedman):
    X, y = friedman
    est = KMPRegressor(validation_fraction=0, random_state=0).fit(X, y)
    sizes = np.asarray(est.val_sizes_)
    kept = sizes[sizes <= est.n_basis_]  # the prefix models exist up to the size kept
    ref = _dense_gcv(est, X, y[:, None], kept)
    np.testing.assert_allclose(est.val_scores_[: len(kept)], ref, rtol=1e-9)
    assert np.all(np.isnan(est.val_ses_))  # no held-out rows: no standard error


def test_gcv_classifier_scores_its_pm1_targets(friedman):
    X, y = make_moons(400, noise=0.3, random_state=1)
    est = KMPClassifier(validation_fraction=0, random_state=0).fit(X, y)
    sizes = np.asarray(est.val_sizes_)
    kept = sizes[sizes <= est.n_basis_]
    ref = _dense_gcv(est, X, np.where(y == est.classes_[1], 1.0, -1.0)[:, None], kept)
    np.testing.assert_allclose(est.val_scores_[: len(kept)], ref, rtol=1e-9)
    assert est.score(X, y) > 0.85


def test_gcv_trains_on_every_row_stops_on_a_plateau_and_keeps_the_best_size(friedman):
    X, y = friedman
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrematureStopWarning)
        est = KMPRegressor(validation_fraction=0, random_state=0).fit(X, y)
    assert est.stop_reason_ == "early_stopping" and not est.still_improving_
    best = int(np.argmax(est.val_scores_))
    assert est.n_basis_ == est.val_sizes_[best] and len(est.history_) == est.n_basis_
    last = int(est.val_sizes_[-1])
    assert last - est.n_basis_ >= patience_atoms(_kmp.AUTO_PATIENCE, est.n_basis_)
    line = _kmp.growth_summary(est)
    assert line.startswith(f"n_basis=auto: kept {est.n_basis_} basis functions (best GCV score")
    assert "held-out" not in line
    # the history's val_score is the GCV too (no held-out rows to give an accuracy)
    assert est.history_[0]["val_score"] == pytest.approx(est.val_scores_[1], rel=1e-12)


def test_gcv_at_its_cap_while_improving_warns(friedman, monkeypatch):
    X, y = friedman
    monkeypatch.setattr(_kmp, "auto_n_basis", lambda *a, **k: (8, "memory"))
    with pytest.warns(PrematureStopWarning, match="while the GCV score was still improving"):
        est = KMPRegressor(validation_fraction=0, random_state=0).fit(X, y)
    assert est.stop_reason_ == "n_basis" and est.n_basis_ == 8 and est.still_improving_


def test_gcv_choice_does_not_depend_on_the_chunking_or_the_workers(friedman, thread_client):
    import dask.array as da

    X, y = friedman
    ref = KMPRegressor(validation_fraction=0, random_state=0, client="sync").fit(X, y)
    other = KMPRegressor(validation_fraction=0, random_state=0, chunk_rows=130).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(170, -1)), da.from_array(y, chunks=170)
    dist = KMPRegressor(validation_fraction=0, random_state=0, client=thread_client).fit(Xd, yd)
    for est in (other, dist):
        assert est.n_basis_ == ref.n_basis_
        assert_array_equal(est.basis_indices_, ref.basis_indices_)
        assert_array_equal(est.val_sizes_, ref.val_sizes_)
        np.testing.assert_allclose(est.val_scores_, ref.val_scores_, rtol=1e-10)


def test_gcv_score_formula():
    assert gcv_score(8.0, 3, 100, 100.0, 1) == pytest.approx(-(8.0 / 100) / (1 - 4 / 100) ** 2)
    assert gcv_score(8.0, 3, 100, 50.0, 0) == pytest.approx(-(8.0 / 50) / (1 - 3 / 100) ** 2)  # weighted RSS
    assert gcv_score(1.0, 99, 100, 100.0, 1) == float("-inf")  # as many parameters as rows


def test_gcv_scaled_weights_give_the_unweighted_fit(friedman):
    """The weighted mean square and the rows' count: weights of 3 on every row change nothing."""
    X, y = friedman
    a = KMPRegressor(validation_fraction=0, random_state=0).fit(X, y)
    b = KMPRegressor(validation_fraction=0, random_state=0).fit(X, y, sample_weight=np.full(len(X), 3.0))
    assert a.n_basis_ == b.n_basis_
    assert_array_equal(a.basis_indices_, b.basis_indices_)
    np.testing.assert_allclose(a.val_scores_, b.val_scores_, rtol=1e-9)


@pytest.mark.parametrize("params, match", [
    ({"loss": "logistic"}, "validation_fraction=0 chooses the size by GCV .* loss='logistic'"),
    ({"fit_mode": "basic"}, "validation_fraction=0 chooses the size by GCV .* fit_mode='basic'"),
    ({"n_basis": 10, "n_iter_no_change": 5}, "n_iter_no_change needs a validation split"),
])
def test_gcv_refusals_come_before_any_work(params, match, monkeypatch):
    X, y = make_moons(200, noise=0.3, random_state=0)
    monkeypatch.setattr(_kmp, "engine_session", None)  # any work would fail on this
    with pytest.raises(ValueError, match=match):
        KMPClassifier(validation_fraction=0, **params).fit(X, y)


def test_gcv_patience_can_be_an_int(friedman):
    X, y = friedman
    est = KMPRegressor(validation_fraction=0, n_iter_no_change=7, random_state=0).fit(X, y)
    best = int(np.argmax(est.val_scores_))
    assert est.stop_reason_ == "early_stopping" and len(est.val_scores_) - 1 - best == 7


def test_gcv_interrupted_fit_resumes_to_the_identical_model(friedman, tmp_path, monkeypatch):
    X, y = friedman
    make = lambda: KMPRegressor(validation_fraction=0, random_state=2)  # noqa: E731
    ref = make().fit(X, y)
    resumed = interrupted_then_resumed(monkeypatch, make, (X, y), tmp_path / "ck", 25, 4,
                                       begin=[(Pursuit, "_begin")])
    same_kmp(resumed, ref, X)
    assert_array_equal(resumed.val_sizes_, ref.val_sizes_)
    assert resumed.val_scores_.tobytes() == ref.val_scores_.tobytes()


def test_gcv_sigkilled_fit_resumes_to_the_identical_model(friedman, tmp_path):
    X, y = friedman
    url = create_store(tmp_path / "d.zarr", X, y, chunk_rows=150).url
    params = {"validation_fraction": 0, "random_state": 5, "client": "sync"}
    setup = f"from kmp_dask import KMPRegressor\nest = KMPRegressor(**{params!r})\nargs = [sys.argv[1]]"
    ckpt = tmp_path / "ck"
    seen = run_and_kill_at(tmp_path, setup, [url, ckpt], "kmp: iteration 12", timeout=180)
    assert "kmp: iteration 12" in seen and "done" not in seen, seen[-5:]
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and info["iteration"] >= 5
    resumed = KMPRegressor(**params).fit(url, checkpoint=ckpt, resume=True)
    ref = KMPRegressor(**params).fit(url)
    same_kmp(resumed, ref, X)
    assert resumed.val_scores_.tobytes() == ref.val_scores_.tobytes()


def test_cli_train_with_validation_fraction_0_says_gcv_chose_the_size(tmp_path):
    from click.testing import CliRunner

    from kmp_dask.cli import main

    X, y = make_moons(500, noise=0.3, random_state=0)
    create_store(tmp_path / "t.zarr", X, y, classes=["a", "b"], chunk_rows=200)
    r = CliRunner().invoke(main, ["train", str(tmp_path / "t.zarr"), "--model", str(tmp_path / "m.kmp"),
                                  "--scheduler", "sync", "--random-state", "0", "--validation-fraction", "0"])
    assert r.exit_code == 0, r.output
    est = KMPClassifier(random_state=0, client="sync", validation_fraction=0).fit(str(tmp_path / "t.zarr"))
    line = _kmp.growth_summary(est)
    assert "(best GCV score" in line and line in r.output
