"""The own-file acceptance chain: a user's CSV with the label column first and string classes, and
the same data as Parquet, through ``ingest --label``, a pipeline TOML whose ``source`` is the
file's path, ``train``, ``evaluate``, ``predict --output pred.csv`` and ``report`` — in process
(``--scheduler sync``, with the cluster starters swapped for ones that fail the test), and on a
real ``dask scheduler`` with two ``dask worker`` processes (slow). Oracles: the loaded model's
own in-memory predictions on the CSV's rows, and the file's rows in their order."""

from __future__ import annotations

import base64
import json
import time

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from kmp_dask import load
from kmp_dask.cli import main
from kmp_dask.store import create_store, open_store
from kmp_dask.store._sources import test_rows

from .test_own_files import NAMES, own_frame

pytestmark = pytest.mark.timeout(900)

PIPELINE = """
name = "mine"

[data.train]
source = "{src}"
label = "species"
drop = ["id"]
part = "train"
test_size = 0.25
seed = 1

[data.test]
source = "{src}"
label = "species"
drop = ["id"]
part = "test"
test_size = 0.25
seed = 1

[model]
params = {{ n_basis = 12, gamma = 0.5, random_state = 0 }}

[evaluate]
data = "test"

[report]
data = "test"
sample_rows = 200
"""

N_ROWS = 1200


def _in_process(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


def _chain(root, name, cli, where):
    """ingest → run PIPELINE → train → evaluate → predict pred.csv → report, with ``cli``."""
    df = own_frame(N_ROWS, seed=3)
    df.to_csv(root / "mine.csv", index=False)
    df.to_parquet(root / "mine.parquet", row_group_size=300)
    src = root / name
    cli("ingest", src, root / "train.zarr", "--label", "species", "--drop", "id", "--test-size", 0.25, "--seed", 1,
        "--no-progress")
    (root / "mine.toml").write_text(PIPELINE.format(src=name))  # relative to the pipeline file
    cli("run", root / "mine.toml", "--output", root / "run", "--quiet", *where)
    cli("train", root / "train.zarr", "--model", root / "m.kmp", "--n-basis", 12, "--gamma", 0.5,
        "--random-state", 0, *where)
    metrics = _json_of(cli("evaluate", root / "m.kmp", root / "train-test.zarr", "--json", "--output",
                           root / "metrics.json", *where))
    cli("predict", root / "m.kmp", root / "train-test.zarr", "--output", root / "pred.csv", *where)
    cli("report", root / "m.kmp", "--data", root / "train-test.zarr", "--evaluation", root / "metrics.json",
        "--output", root / "report.html")
    return df, metrics


def _json_of(output: str) -> dict:
    """The JSON document in a command's output (stderr lines, e.g. where it ran, may precede it)."""
    return json.loads(output[output.index("{"):])


def _check(root, df, metrics):
    test_mask = test_rows(0, len(df), 0.25, seed=1)
    X_file = df[["a", "b", "c", "d"]].to_numpy()
    test = open_store(root / "train-test.zarr")
    X_test, _ = test.read_range(0, test.n_rows)
    assert_array_equal(X_test, X_file[test_mask])  # the test store holds the file's test rows, in order
    model = load(root / "m.kmp")
    expected = model.predict(X_file[test_mask])
    truth = df["species"].to_numpy()[test_mask]
    assert metrics["classes"] == NAMES and metrics["accuracy"] == pytest.approx(np.mean(expected == truth))
    assert metrics["accuracy"] > 0.7
    pred = pd.read_csv(root / "pred.csv")
    assert_array_equal(pred["row"], np.arange(test_mask.sum()))
    assert_array_equal(pred["prediction"].to_numpy(dtype=object), expected)  # class names, input row order
    assert set(pred["prediction"]) <= set(NAMES)
    summary = json.loads((root / "run" / "summary.json").read_text())
    data = summary["steps"]["data"]
    assert data["train"]["n_rows"] + data["test"]["n_rows"] == len(df)
    assert data["test"]["n_rows"] == int(test_mask.sum())
    assert summary["steps"]["evaluate"]["accuracy"] > 0.7
    html = (root / "report.html").read_text()
    images = [base64.b64decode(s.split('"')[0]) for s in html.split('src="data:image/png;base64,')[1:]]
    assert images and all(img[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    assert (root / "run" / "report.html").stat().st_size > 5000


@pytest.mark.parametrize("name", ["mine.csv", "mine.parquet"])
def test_own_file_chain_in_process(tmp_path, no_cluster, name):
    df, metrics = _chain(tmp_path, name, _in_process, ["--scheduler", "sync"])
    _check(tmp_path, df, metrics)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mine.csv", "mine.parquet"])
def test_own_file_chain_on_dask_scheduler_and_two_workers(tmp_path, cli_cluster, name):
    from ._run import run_cli

    def cli(*args):
        return run_cli(*args, timeout=600).stdout

    df, metrics = _chain(tmp_path, name, cli, ["--scheduler-file", cli_cluster])
    _check(tmp_path, df, metrics)


def test_store_with_other_features_is_refused_in_one_line(tmp_path, no_cluster):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 4))
    y = np.array(NAMES, dtype=object)[(X[:, 0] > 0).astype(int)]
    create_store(tmp_path / "four.zarr", X, (X[:, 0] > 0).astype(int), classes=NAMES[:2])
    create_store(tmp_path / "three.zarr", X[:, :3], (X[:, 0] > 0).astype(int), classes=NAMES[:2])
    _in_process("train", tmp_path / "four.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 4, "--gamma", 0.5,
                "--scheduler", "sync")
    assert set(load(tmp_path / "m.kmp").classes_) <= set(y)
    for command in (["evaluate", tmp_path / "m.kmp", tmp_path / "three.zarr"],
                    ["predict", tmp_path / "m.kmp", tmp_path / "three.zarr", "--output", tmp_path / "p.csv"]):
        r = CliRunner().invoke(main, [str(a) for a in command] + ["--scheduler", "local"])
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error:"), r.output
        assert "4" in lines[0] and "3" in lines[0], lines[0]
    assert not (tmp_path / "p.csv").exists()


def test_gamma_abc_is_refused_at_once(tmp_path, no_cluster):
    """Refused before any cluster (the starters fail the test) and before the store is read; the
    2 s bound is generous: the check runs in this process, whose imports are already done."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    create_store(tmp_path / "t.zarr", X, (X[:, 0] > 0).astype(int), classes=NAMES[:2])
    CliRunner().invoke(main, ["train", "--algorithm", "kmp", "--help"])  # imports done once, not timed
    t0 = time.perf_counter()
    r = CliRunner().invoke(main, ["train", str(tmp_path / "t.zarr"), "--model", str(tmp_path / "m"), "--gamma", "abc",
                                  "--scheduler", "local"])
    seconds = time.perf_counter() - t0
    assert r.exit_code != 0 and r.output.count("Error") == 1 and "--gamma" in r.output, r.output
    assert seconds < 2.0, seconds
    assert not (tmp_path / "m").exists()
