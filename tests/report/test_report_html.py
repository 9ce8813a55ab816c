"""kmp_dask.report: sections per family, embedded PNGs, escaping, self-containment, errors, writing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import Page, png_of, png_size

from kmp_dask import KMPClassifier, __version__
from kmp_dask.report import build_report, write_report

#: family -> figure titles its section must show when X, y are given
EXPECTED = {
    "kmp-clf": ["Summary", "Error vs basis size", "Time per iteration"],
    "kmp-reg-bound": ["Summary", "Error vs basis size", "Time per iteration", "Bound path"],
    "cvm": ["Summary"],
    "mmda": ["Summary", "Expansion size per feature", "Feature scatter"],
    "kpca": ["Summary", "Error vs basis size", "Bound path", "Explained variance per component", "Feature scatter"],
    "kcca": ["Summary", "Error vs basis size", "Canonical correlation per component", "Feature scatter"],
    "compressor": ["Summary", "Error vs basis size", "Compression path"],
    "rs-clf": ["Summary", "Error vs basis size", "Compression path"],
    "rs-reg": ["Summary", "Error vs basis size", "Compression path"],
}

EVALUATIONS = {
    "kmp-clf on test": {
        "task": "classification", "n_rows": 100, "accuracy": 0.93, "classes": ["0", "1"],
        "confusion": [[47, 3], [4, 46]], "n_unknown_labels": 0,
        "per_class": {"0": {"precision": 0.9216, "recall": 0.94, "f1": 0.9307, "support": 50},
                      "1": {"precision": 0.9388, "recall": 0.92, "f1": 0.9293, "support": 50}}},
    "kmp-reg on test": {"task": "regression", "n_rows": 100, "r2": 0.8765, "mse": 0.05, "mae": 0.17},
}


def _models(fitted, names):
    return [(n, fitted[n]) for n in names]


def _labels_for(name, data):
    """The test labels matching the model's task (regressors were fitted on yr)."""
    return data["yr_test"] if name in ("kmp-reg-bound", "rs-reg", "kcca") else data["y_test"]


@pytest.fixture(scope="module")
def full_report(fitted, data):
    """One report of every family with a classification sample and the evaluations."""
    return build_report(list(fitted.items()), X=data["X_test"], y=data["y_test"], evaluations=EVALUATIONS,
                        title="all families")


@pytest.fixture(scope="module")
def full_page(full_report):
    return Page(full_report)


def test_every_family_has_its_sections(fitted, full_page, full_report):
    for i, (name, model) in enumerate(fitted.items()):
        titles = full_page.section_titles(i)
        missing = [t for t in EXPECTED[name] if t not in titles]
        assert not missing, f"{name} ({type(model).__name__}) lacks {missing}; has {titles}"
    assert "Cross-validation" not in full_report  # only a model chosen by cross-validation has that section


def test_a_figure_with_nothing_to_show_is_named_with_its_reason_not_drawn(fitted, full_page, full_report):
    cvm = full_page.sections["model-2"]
    assert cvm["img"] == [] and "Not shown" in cvm["h3"]
    assert "Time per iteration" in full_report and "CVMClassifier records no per-iteration history" in full_report
    names = list(fitted)
    kmp = full_page.section_titles(names.index("kmp-clf"))
    assert "Compression path" not in kmp and "Feature scatter" not in kmp


def test_summary_shows_size_stop_reason_iterations_and_fit_time(full_report):
    for text in ("basis functions", "stop reason", "iterations", "fit time", "core vectors (union)",
                 "ball radius R", "kernel evaluations per feature", "15 (of", "n_basis"):
        assert text in full_report, text


def test_images_are_valid_pngs_of_real_size_with_alt_text(full_page):
    assert len(full_page.images) >= 20
    for img in full_page.images:
        png = png_of(img["src"])
        w, h = png_size(png)
        assert len(png) > 2048 and w >= 300 and h >= 200, (len(png), w, h, img.get("alt"))
        assert img.get("alt", "").strip(), "an image without alt text"


def test_the_page_loads_nothing_external(full_page, full_report):
    assert full_page.urls, "expected image sources and contents links"
    for url in full_page.urls:  # base64 payloads may spell "http" by chance: check the scheme
        assert url.startswith("data:image/png;base64,") or url.startswith("#"), url[:80]
        if url.startswith("#"):
            assert "http" not in url.lower() and "//" not in url, url
    assert not {"script", "link", "iframe", "object", "embed"} & full_page.tags
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:", full_report)
    assert "http" not in text.lower() and "url(" not in text and "@import" not in text


def test_version_time_and_title_are_stated(full_report):
    assert f"kmp_dask {__version__}" in full_report
    assert " UTC" in full_report and "created 20" in full_report
    assert "<title>all families</title>" in full_report


def test_evaluations_become_tables(full_report):
    for text in ("kmp-clf on test: metrics", "kmp-clf on test: per class", "0.9307", "0.93",
                 "kmp-clf on test: confusion", "kmp-reg on test: metrics", "0.8765", "r2"):
        assert text in full_report, text


@pytest.mark.parametrize("name, metric", [("kmp-clf", "test accuracy"), ("kmp-reg-bound", "test R²"),
                                          ("rs-clf", "test accuracy"), ("rs-reg", "test R²")])
def test_metric_along_the_path_when_labelled_data_is_given(fitted, data, name, metric):
    page = Page(build_report([(name, fitted[name])], X=data["X_test"], y=_labels_for(name, data)))
    alts = [i["alt"] for i in page.sections["model-0"]["img"]]
    assert any(metric in a for a in alts), alts


def test_metric_along_the_path_is_a_real_score(fitted, data):
    from kmp_dask.report._series import metric_along_path

    model = fitted["kmp-clf"]
    _, k, v = metric_along_path(model, data["X_test"], data["y_test"])
    assert 2 <= len(k) <= 12 and k[-1] == model.n_iter_
    assert v[-1] == pytest.approx(model.score(data["X_test"], data["y_test"]))


def test_without_data_no_scatter_and_no_test_metric(fitted):
    text = build_report([("kpca", fitted["kpca"]), ("kmp", fitted["kmp-clf"])])
    page = Page(text)
    assert "Feature scatter" not in page.section_titles(0)
    assert "no data given (pass X)" in text and "test accuracy" not in text


def test_names_and_titles_are_escaped(fitted):
    evil = "<script>alert('x')</script>"
    text = build_report({evil: fitted["kmp-clf"]}, title="<b>t</b> & co", evaluations={evil: {"accuracy": 1.0}})
    assert "<script" not in text and "<b>t</b>" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text and "&lt;b&gt;t&lt;/b&gt; &amp; co" in text


def test_a_dict_of_models_works(fitted):
    text = build_report({"a": fitted["cvm"], "b": fitted["kcca"]})
    assert Page(text).sections.keys() >= {"model-0", "model-1"}


@pytest.mark.parametrize("models, exc, match", [
    ([], ValueError, "models"),
    ({}, ValueError, "models"),
    ("model.kmp", TypeError, "models"),
    ([("svc", "not a model")], TypeError, "'svc'"),
    ([("unfitted", KMPClassifier())], ValueError, "'unfitted'.*not fitted"),
    (["no-pair"], TypeError, r"models\[0\]"),
])
def test_bad_models_are_refused_by_name(models, exc, match):
    with pytest.raises(exc, match=match):
        build_report(models)


def test_a_scikit_learn_model_is_refused_by_name(data):
    from sklearn.svm import SVC

    with pytest.raises(TypeError, match="'svc'.*not a kmp_dask estimator"):
        build_report([("svc", SVC().fit(data["X"], data["y"]))])


def test_bad_data_and_evaluations_are_refused(fitted, data):
    m = [("kmp", fitted["kmp-clf"])]
    with pytest.raises(ValueError, match="y was given without X"):
        build_report(m, y=data["y_test"])
    with pytest.raises(ValueError, match="same number of rows"):
        build_report(m, X=data["X_test"], y=data["y_test"][:5])
    with pytest.raises(TypeError, match="evaluations"):
        build_report(m, evaluations=[1, 2])


def test_write_report_refuses_to_overwrite(fitted, tmp_path):
    out = tmp_path / "report.html"
    out.write_text("keep me")
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        write_report([("kmp", fitted["kmp-clf"])], out)
    assert out.read_text() == "keep me"
    with pytest.raises(FileExistsError, match="not a kmp_dask report"):  # overwrite replaces only a report
        write_report([("kmp", fitted["kmp-clf"])], out, overwrite=True)
    assert out.read_text() == "keep me"
    out.unlink()
    write_report([("kmp", fitted["kmp-clf"])], out)
    assert write_report([("kmp", fitted["kmp-clf"])], out, overwrite=True) == out
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_write_report_is_atomic(fitted, tmp_path, monkeypatch):
    """The text goes to a temporary file in the same directory and is renamed into place; a
    failure before the rename leaves the old report untouched and no temporary file behind."""
    out = tmp_path / "report.html"
    old = write_report([("kmp", fitted["kmp-clf"])], out, title="old").read_text(encoding="utf-8")
    calls = []
    real_replace = os.replace

    def spy(src, dst):
        calls.append((Path(src), Path(dst), Path(dst).read_text()))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_report([("kmp", fitted["kmp-clf"])], out, overwrite=True)
    (src, dst, before), = calls
    assert src.parent == out.parent and src != out and dst == out and before == old
    assert not src.exists() and "kmp_dask" in out.read_text(encoding="utf-8")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_report([("kmp", fitted["kmp-clf"])], out, overwrite=True)
    assert "kmp_dask" in out.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_write_report_accepts_str_paths_and_refuses_a_directory(fitted, tmp_path):
    out = write_report([("kmp", fitted["kmp-clf"])], str(tmp_path / "r.html"))
    assert out == tmp_path / "r.html" and out.is_file()
    with pytest.raises(IsADirectoryError):
        write_report([("kmp", fitted["kmp-clf"])], tmp_path, overwrite=True)


def test_scatter_is_capped_at_2000_rows(fitted):
    from kmp_dask.report._series import features

    X = np.random.default_rng(0).normal(size=(5000, 2))
    F, ys = features(fitted["kpca"], X, np.zeros(5000))
    assert F.shape == (2000, 2) and len(ys) == 2000


def test_no_pyplot_and_no_backend_change():
    """Building a report neither imports pyplot nor selects a backend (notebooks keep theirs)."""
    code = (
        "import sys, numpy as np, matplotlib\n"
        "before = matplotlib.rcParams._get('backend')\n"
        "from kmp_dask import KMPRegressor\n"
        "from kmp_dask.report import build_report\n"
        "X = np.random.default_rng(0).normal(size=(60, 2))\n"
        "build_report([('m', KMPRegressor(n_basis=5, random_state=0).fit(X, X[:, 0]))], X=X, y=X[:, 0])\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
        "assert matplotlib.rcParams._get('backend') == before, 'backend changed'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
