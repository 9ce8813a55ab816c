"""The CLI chain end to end as subprocesses: ingest → train → evaluate → predict → report, on the
embedded cluster and on a real ``dask scheduler`` + 2 ``dask worker`` processes."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from kmp_dask import load
from kmp_dask.store import open_store

from ._run import run_cli

pytestmark = pytest.mark.timeout(900)


def _chain(tmp_path, where: list[str]):
    run_cli("ingest", "synthetic:classification", tmp_path / "train.zarr", "--n-rows", 3000, "--seed", 3,
            "--chunk-rows", 1000)
    run_cli("ingest", "synthetic:classification", tmp_path / "test.zarr", "--n-rows", 1000, "--seed", 3,
            "--start-row", 3000, "--chunk-rows", 500)
    tr = run_cli("train", tmp_path / "train.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 12,
                 "--gamma", 0.02, "--random-state", 0, "--log-json", tmp_path / "log.jsonl", *where)
    assert "saved to" in tr.stdout
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and lines[0]["iteration"] == 0 and "residual_norm" in lines[0]
    ev = run_cli("evaluate", tmp_path / "m.kmp", tmp_path / "test.zarr", "--json", "--output",
                 tmp_path / "metrics.json", *where)
    metrics = json.loads(ev.stdout)
    assert metrics == json.loads((tmp_path / "metrics.json").read_text())
    run_cli("predict", tmp_path / "m.kmp", tmp_path / "test.zarr", "--output", tmp_path / "pred.zarr", *where)
    run_cli("report", tmp_path / "m.kmp", "--data", tmp_path / "test.zarr", "--evaluation",
            tmp_path / "metrics.json", "--output", tmp_path / "report.html")
    return metrics


def _check_outputs(tmp_path, metrics):
    model = load(tmp_path / "m.kmp")
    test = open_store(tmp_path / "test.zarr")
    X, y = test.read_range(0, test.n_rows)
    names = np.asarray(test.attrs["classes"]).astype(str)
    expected = model.predict(X)
    # evaluate: the chunk-wise metrics equal the in-memory ones of the loaded model
    assert metrics["accuracy"] == pytest.approx(float(np.mean(expected.astype(str) == names[y])), abs=1e-12)
    assert sum(v["support"] for v in metrics["per_class"].values()) == test.n_rows
    # predict: y of the output store is the model's prediction, row for row
    pred = open_store(tmp_path / "pred.zarr")
    _, codes = pred.read_range(0, pred.n_rows)
    got = np.asarray(pred.attrs["classes"]).astype(str)[codes]
    np.testing.assert_array_equal(got, expected.astype(str))
    html = (tmp_path / "report.html").read_text()
    images = [base64.b64decode(s.split('"')[0]) for s in html.split('src="data:image/png;base64,')[1:]]
    assert len(images) >= 2 and all(img[:8] == b"\x89PNG\r\n\x1a\n" and len(img) > 2000 for img in images)


@pytest.mark.slow  # the same chain and checks as on a real scheduler below; the CLI's embedded cluster
# (--workers) in the default run: test_pipeline1_on_embedded_cluster, test_config_file_and_flags
def test_chain_on_embedded_cluster(tmp_path):
    metrics = _chain(tmp_path, ["--workers", "2"])
    assert metrics["accuracy"] > 0.5
    _check_outputs(tmp_path, metrics)


def test_chain_on_dask_scheduler_and_workers(tmp_path, cli_cluster):
    metrics = _chain(tmp_path, ["--scheduler-file", cli_cluster])
    _check_outputs(tmp_path, metrics)


def test_config_file_and_flags(tmp_path):
    run_cli("ingest", "synthetic:classification", tmp_path / "train.zarr", "--n-rows", 1500, "--seed", 1)
    (tmp_path / "kmp.toml").write_text('n_basis = 6\ngamma = 0.02\nrandom_state = 4\ncandidates = "all"\n')
    run_cli("train", tmp_path / "train.zarr", "--model", tmp_path / "a.kmp", "--config", tmp_path / "kmp.toml",
            "--n-basis", 4, "--quiet", "--workers", 1)
    m = load(tmp_path / "a.kmp")
    assert m.n_basis_ == 4 and m.candidates == "all" and m.random_state == 4  # the flag wins over the file
