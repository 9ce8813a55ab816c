"""A user's own files through ``kmp-dask ingest`` and a pipeline whose ``source`` is the file's
path: a CSV with the label first and string classes, and the same data as Parquet."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask.cli import main as cli
from kmp_dask.pipeline import SpecError, load_spec, run_pipeline
from kmp_dask.store import open_store

NAMES = ["setosa", "versicolor", "virginica"]


def own_frame(n, seed=0):
    """A user's table (as in tests/store/test_sources.py): the label FIRST with string classes, an id
    column, four numeric features."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    df.insert(0, "species", np.array(NAMES)[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)])
    df.insert(1, "id", np.arange(n))
    return df

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def own(tmp_path):
    df = own_frame(2000)
    df.to_csv(tmp_path / "mine.csv", index=False)
    df.to_parquet(tmp_path / "mine.parquet", row_group_size=500)
    return tmp_path


@pytest.mark.parametrize("name", ["mine.csv", "mine.parquet"])
def test_ingest_label_first_with_a_test_split(own, name):
    r = CliRunner().invoke(cli, ["ingest", str(own / name), str(own / "train.zarr"), "--label", "species",
                                 "--drop", "id", "--test-size", "0.25", "--seed", "1", "--no-progress"])
    assert r.exit_code == 0, r.output
    train, test = open_store(own / "train.zarr"), open_store(own / "train-test.zarr")
    assert train.n_rows + test.n_rows == 2000 and 400 < test.n_rows < 600
    assert train.attrs["classes"] == test.attrs["classes"] == list(NAMES)
    assert train.attrs["feature_names"] == ["a", "b", "c", "d"]
    assert "train-test.zarr" in r.output


def test_ingest_label_by_position_and_a_named_test_target(own):
    r = CliRunner().invoke(cli, ["ingest", str(own / "mine.csv"), str(own / "a.zarr"), "--label", "0", "--drop",
                                 "1", "--test-size", "0.5", "--test-target", str(own / "held.zarr"), "--n-rows", "100"])
    assert r.exit_code == 0, r.output
    assert open_store(own / "a.zarr").n_rows + open_store(own / "held.zarr").n_rows == 100


TOML = """
name = "mine"

[data.train]
source = "{src}"
label = "species"
drop = ["id"]
part = "train"
test_size = 0.25

[data.test]
source = "{src}"
label = "species"
drop = ["id"]
part = "test"
test_size = 0.25

[model]
algorithm = "kmp"
params = {{ n_basis = 15, gamma = 0.5, random_state = 0 }}

[evaluate]
data = "test"

[report]
data = "test"
sample_rows = 300
"""


@pytest.mark.parametrize("name", ["mine.csv", "mine.parquet"])
def test_pipeline_whose_source_is_the_file_path_in_process(own, name):
    sub = own / "pipelines"
    sub.mkdir()
    (sub / "mine.toml").write_text(TOML.format(src=f"../{name}"))  # relative to the pipeline file
    spec = load_spec(sub / "mine.toml")
    assert spec["data"]["train"]["source"] == str(own / name)
    summary = run_pipeline(spec, own / "run", client="sync", log=lambda m: None)
    data = summary["steps"]["data"]
    assert data["train"]["n_rows"] + data["test"]["n_rows"] == 2000
    assert summary["steps"]["evaluate"]["accuracy"] > 0.7
    assert (own / "run" / "report.html").stat().st_size > 5000


def test_pipeline_store_source_is_used_in_place(own):
    CliRunner().invoke(cli, ["ingest", str(own / "mine.csv"), str(own / "t.zarr"), "--label", "species",
                             "--drop", "id", "--test-size", "0.3"])
    (own / "p.toml").write_text('[data.train]\nsource = "t.zarr"\n[data.test]\nsource = "t-test.zarr"\n'
                                '[model]\nparams = { n_basis = 5, gamma = 0.5 }\n[evaluate]\ndata = "test"\n')
    summary = run_pipeline(load_spec(own / "p.toml"), own / "run", client="sync", log=lambda m: None)
    assert summary["steps"]["data"]["train"] == {**summary["steps"]["data"]["train"], "path": str(own / "t.zarr"),
                                                 "in_place": True}
    assert not (own / "run" / "data" / "train.zarr").exists()
    assert summary["steps"]["evaluate"]["accuracy"] > 0.5


@pytest.mark.parametrize("change,words", [
    (('"../mine.csv"', '"../mine_train.csv"'), ["[data.train]", "mine_train.csv", "does not exist"]),
    (('label = "species"', 'label = "class"'), ["label column 'class' is not a column", "'species'"]),
    (('drop = ["id"]', 'drop = ["ID"]'), ["drop column 'ID' is not a column"]),
    (("n_basis = 15", "n_basiss = 15"), ["unknown parameter 'n_basiss'", "did you mean 'n_basis'"]),
    (('part = "train"', 'part = "val"'), ["part='val'", "'train' or 'test'"]),
    (("test_size = 0.25", "test_size = 25"), ["test_size=25", "between 0 and 1"]),
])
def test_run_refuses_a_bad_pipeline_before_any_cluster_or_directory(own, change, words, monkeypatch):
    sub = own / "pipelines"
    sub.mkdir()
    (sub / "mine.toml").write_text(TOML.format(src="../mine.csv").replace(*change, 1))
    with pytest.raises(SpecError) as info:
        load_spec(sub / "mine.toml")
    assert all(w in str(info.value) for w in words), str(info.value)
    import kmp_dask.cli._run as run_command

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(run_command, "running", no_cluster)
    monkeypatch.chdir(own)
    r = CliRunner().invoke(cli, ["run", str(sub / "mine.toml")])
    assert r.exit_code == 1 and r.output.count("Error:") == 1 and "Traceback" not in r.output, r.output
    assert not (own / "runs").exists()


@pytest.mark.slow
def test_kmp_dask_run_on_an_embedded_process_cluster(own):
    """The same pipeline through the console script on two worker processes (the workers read the
    stores the driver ingested from the CSV)."""
    from ._run import run_cli

    (own / "mine.toml").write_text(TOML.format(src="mine.csv"))
    out = own / "run"
    run_cli("run", own / "mine.toml", "--output", out, "--workers", 2, "--quiet", cwd=own, timeout=900)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"]["evaluate"]["accuracy"] > 0.7
    assert len(summary["memory"]["workers_peak_rss_bytes"]) == 2


def test_n_rows_is_honoured_for_keel(tmp_path):
    r = CliRunner().invoke(cli, ["ingest", "keel:banana", str(tmp_path / "b.zarr"), "--n-rows", "100"])
    assert r.exit_code == 0, r.output
    st = open_store(tmp_path / "b.zarr")
    assert st.n_rows == 100 and st.attrs["provenance"]["dataset"] == "keel:banana"
