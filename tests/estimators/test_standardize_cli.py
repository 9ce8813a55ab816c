"""``kmp-dask train --standardize auto|yes|no``: the saved model carries the transform,
and ``evaluate`` / ``predict`` on the raw store use it. In process (``--scheduler sync``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask import KMPClassifier, load
from kmp_dask.cli import main
from kmp_dask.store import create_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("standardize_cli")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)) * [1.0, 50.0, 0.02] + [0.0, 500.0, 1.0]  # mixed scales
    y = (X[:, 0] + (X[:, 2] - 1.0) * 50 > 0).astype(int)
    create_store(root / "train.zarr", X, y, classes=["no", "yes"], chunk_rows=100)
    return root / "train.zarr", X, y


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.FeatureScaleWarning")  # --standardize no: the old warning
@pytest.mark.parametrize("flag, expect", [(None, True), ("yes", True), ("no", False)])
def test_train_standardize_flag_and_evaluate_on_raw_rows(store_path, tmp_path, flag, expect):
    path, X, y = store_path
    extra = [] if flag is None else ["--standardize", flag]
    r = _invoke("train", path, "--model", tmp_path / "m", "--n-basis", 15, "--random-state", 0,
                "--scheduler", "sync", "--quiet", "--force", *extra)
    assert r.exit_code == 0, r.output
    saved = load(tmp_path / "m")
    assert saved.standardized_ is expect and saved.standardize == (True if flag == "yes" else False if flag == "no"
                                                                   else "auto")
    ref = KMPClassifier(n_basis=15, random_state=0, standardize=expect, client="sync").fit(str(path))
    np.testing.assert_array_equal(saved.decision_function(X), ref.decision_function(X))
    r = _invoke("evaluate", tmp_path / "m", path, "--json", "--scheduler", "sync", "--quiet")
    assert r.exit_code == 0, r.output
    acc = json.loads(r.output)["accuracy"]
    assert acc == pytest.approx(np.mean(saved.predict(X) == np.array(["no", "yes"])[y]))


def test_bad_standardize_value_is_refused_before_the_fit(store_path, tmp_path):
    path, _, _ = store_path
    r = _invoke("train", path, "--model", tmp_path / "m", "--standardize", "maybe", "--scheduler", "sync")
    assert r.exit_code != 0 and "standardize must be 'auto'" in r.output and "'maybe'" in r.output, r.output
    assert not (tmp_path / "m").exists()
