"""The report of a model chosen by cross-validation: held-out score against the size for
each γ, drawn from what ``kmp-dask train --cv K`` saved (the open format, no pickle); other models'
reports unchanged; a size at the cap says how to raise it. In process (``--scheduler sync``)."""

from __future__ import annotations

import copy
import html
import re

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import Page, png_of, png_size

from kmp_dask import KMPClassifierCV, KMPRegressor, load
from kmp_dask.cli import main
from kmp_dask.exceptions import BoundAtCapWarning
from kmp_dask.report import build_report
from kmp_dask.store import create_store

CV_TITLE = "Cross-validation: score vs size"
N_BASIS, FOLDS = 12, 3


@pytest.fixture
def no_cluster(monkeypatch):
    """Starting or connecting to a cluster fails the test (everything here runs in process)."""
    from kmp_dask import parallel

    def refuse(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(parallel, "embedded_cluster", refuse)
    monkeypatch.setattr(parallel, "connect", refuse)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("report_cv")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3)) * [1.0, 50.0, 0.02]
    y = (X[:, 0] + X[:, 1] / 50.0 > 0).astype(int)
    create_store(root / "train.zarr", X, y, classes=["no", "yes"], chunk_rows=80)
    return root / "train.zarr"


@pytest.fixture(scope="module")
def reference(store_path):
    """The same search in Python: the oracle of the scores the report shows."""
    return KMPClassifierCV(cv=FOLDS, n_basis=N_BASIS, random_state=0, client="sync").fit(str(store_path))


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _cv_table(text: str) -> list[list[str]]:
    """The rows (header first) of the table that follows the cross-validation figure."""
    start = text.index("<h3>Cross-validation: mean held-out")
    table = text[start:text.index("</table>", start)]
    return [[html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table)]


def test_report_of_a_train_cv_model_draws_score_vs_size_per_gamma(store_path, reference, tmp_path, no_cluster):
    r = _invoke("train", store_path, "--model", tmp_path / "m", "--cv", FOLDS, "--n-basis", N_BASIS,
                "--random-state", 0, "--scheduler", "sync", "--quiet")
    assert r.exit_code == 0, r.output
    r = _invoke("report", tmp_path / "m", "--output", tmp_path / "r.html")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "r.html").read_text()
    page = Page(text)
    assert page.section_titles(0)[:2] == ["Summary", CV_TITLE]
    img = page.sections["model-0"]["img"][0]
    w, h = png_size(png_of(img["src"]))
    assert w >= 300 and h >= 200 and f"{len(reference.gammas_)} gammas" in img["alt"]
    # the data: mean ± standard error of every size for every γ, against the Python search's cv_results_
    res, gammas = reference.cv_results_, reference.gammas_
    split = np.stack([res[f"split{i}_test_score"] for i in range(FOLDS)], axis=1).reshape(len(gammas), N_BASIS, FOLDS)
    mean, se = split.mean(axis=2), split.std(axis=2, ddof=1) / np.sqrt(FOLDS)
    assert np.allclose(mean.ravel(), res["mean_test_score"])
    rows = _cv_table(text)
    assert rows[0] == ["atoms"] + [f"γ = {g:.4g}" for g in gammas] + ["mark"] and len(rows) == N_BASIS + 1
    for s, row in enumerate(rows[1:]):
        assert int(row[0]) == s + 1
        for g, cell in enumerate(row[1:-1]):
            assert cell == f"{mean[g, s]:.4f} ± {se[g, s]:.4f}", (s + 1, gammas[g], cell)
    # the rule's threshold (a classifier's default: half a standard error) and the marked choice agree
    # with the search's own choice
    g0, s0 = np.unravel_index(np.argmax(mean), mean.shape)
    assert reference.rule_ == "half_se"
    threshold = mean[g0, s0] - se[g0, s0] / 2
    chosen = reference.best_params_["n_basis"]
    assert f"half-SE threshold {threshold:.4f}" in text
    assert f"chosen: {chosen} atoms, gamma={reference.best_params_['gamma']:.4g}" in text
    assert "chosen" in rows[chosen][-1]
    assert all("chosen" not in row[-1] for i, row in enumerate(rows[1:]) if i + 1 != chosen)
    assert mean[:, chosen - 1].max() >= threshold and (mean[:, :chosen - 1] < threshold).all()
    # the estimator itself reports the same (its best_estimator_ carries the search)
    assert CV_TITLE in build_report({"cv": reference})
    assert load(tmp_path / "m").cv_search_["scores"].shape == (len(gammas), FOLDS, N_BASIS)


def test_a_model_without_a_search_reports_as_before(reference, fitted):
    with_cv = reference.best_estimator_
    without = copy.copy(with_cv)
    del without.cv_search_
    a, b = Page(build_report({"m": with_cv})), Page(build_report({"m": without}))
    assert [t for t in a.section_titles(0) if not t.startswith("Cross-validation")] == b.section_titles(0)
    assert len(a.images) == len(b.images) + 1
    plain = build_report({"kmp-clf": fitted["kmp-clf"]})  # every family: test_report_html's full report
    assert "Cross-validation" not in plain and "cv_search_" not in plain


def test_a_damaged_record_is_named_not_drawn(reference):
    est = copy.copy(reference.best_estimator_)
    est.cv_search_ = dict(est.cv_search_, gammas=np.array([1.0]))
    text = build_report({"m": est})
    assert CV_TITLE not in Page(text).section_titles(0) and "recorded cross-validation scores have shape" in text


def test_a_search_whose_best_is_at_the_cap_says_how_to_raise_it():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(300, 1))
    y = np.sin(3 * X[:, 0]) + 0.01 * rng.normal(size=300)
    from kmp_dask import KMPRegressorCV

    with pytest.warns(UserWarning, match="raise n_basis, e.g. n_basis=20"):
        est = KMPRegressorCV(gammas=[0.3], n_basis=10, cv=3, random_state=0).fit(X, y)
    assert est.cv_warnings_ and "n_basis=20" in est.cv_warnings_[0]
    text = html.unescape(build_report({"cv": est}))
    assert "the choice may be limited by the grid" in text and "raise n_basis, e.g. n_basis=20" in text


def test_a_bound_chosen_size_at_the_cap_says_how_to_raise_it():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(2000, 1))
    y = np.sin(2 * X[:, 0]) + 0.02 * rng.normal(size=2000)
    with pytest.warns(BoundAtCapWarning):
        est = KMPRegressor(n_basis=3, stopping="bound", bound_threshold=0.1, random_state=0).fit(X, y)
    text = html.unescape(build_report({"kmp": est}))
    assert "BoundAtCapWarning" in text and "Raise n_basis (e.g. n_basis=6) and fit again" in text
    # (a longer path is silent: tests/kpca/test_bound_cap_warning.py)
