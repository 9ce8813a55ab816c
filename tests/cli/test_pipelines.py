"""``kmp-dask run``: the four pipelines end to end on small data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from kmp_dask import load
from kmp_dask.pipeline import SpecError, load_spec

from ._run import kmp_dask_cmd, run_cli

pytestmark = pytest.mark.timeout(900)
PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"


def _summary(out):
    s = json.loads((out / "summary.json").read_text())
    assert (out / "report.html").stat().st_size > 5000
    return s


@pytest.fixture(scope="module")
def pipeline1(tmp_path_factory):
    """Pipeline 1 as shipped (``--small``), run once: its own test checks the run, and it is the
    uninterrupted reference of the killed-and-resumed run below (one run fewer than each its own)."""
    out = tmp_path_factory.mktemp("pipeline1") / "run"
    run_cli("run", PIPELINES / "covertype_skmp.toml", "--small", "--output", out, "--workers", 2, "--quiet")
    return out


def test_pipeline1_on_embedded_cluster(pipeline1):
    out = pipeline1
    s = _summary(out)
    assert s["steps"]["model"]["n_basis"] == 25
    assert 0.3 < s["steps"]["evaluate"]["accuracy"] <= 1.0
    assert s["memory"]["driver_peak_rss_bytes"] > 0 and len(s["memory"]["workers_peak_rss_bytes"]) == 2
    again = run_cli("run", PIPELINES / "covertype_skmp.toml", "--small", "--output", out, check=False)
    assert again.returncode == 1 and "--overwrite" in again.stderr  # nothing overwritten


# pipeline 1 on the cluster/ start scripts' scheduler + workers: tests/cluster/test_cluster_live.py (-m slow)


@pytest.mark.parametrize("name,check", [
    ("svc_compress", lambda s: s["steps"]["compress"]["n_vectors"] >= 1 and "sklearn_model" in s["steps"]["evaluate"]),
    ("mmda_features", lambda s: s["steps"]["downstream"]["downstream_accuracy"] > 0.5),
    # ~8 s; `train --algorithm skpca` on a store stays in the default run (test_standardize_kpca.py)
    pytest.param("sparse_kpca", lambda s: s["steps"]["model"]["n_components"] >= 1, marks=pytest.mark.slow),
])
def test_pipelines_2_to_4(tmp_path, name, check):
    out = tmp_path / "run"
    run_cli("run", PIPELINES / f"{name}.toml", "--small", "--output", out, "--workers", 2)
    assert check(_summary(out))


def test_killed_pipeline_resumes_to_the_identical_model(tmp_path, pipeline1):
    """Killed (SIGKILL, whole process group) after its first KMP checkpoint, before the model step
    ends; resumed: the model of the uninterrupted shipped spec, bit for bit (checkpointing every 2
    atoms instead of 10 changes no number)."""
    spec = (PIPELINES / "covertype_skmp.toml").read_text().replace("checkpoint_every = 10", "checkpoint_every = 2")
    (tmp_path / "p.toml").write_text(spec)
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(kmp_dask_cmd() + ["run", str(tmp_path / "p.toml"), "--small", "--output", str(out),
                                              "--workers", "2"], start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (out / "checkpoint").exists() or not any((out / "checkpoint").iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before a checkpoint was written"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (out / "steps" / "model.json").exists(), "killed after the model step: nothing left to resume"
    run_cli("run", tmp_path / "p.toml", "--small", "--output", out, "--workers", 2, "--resume", "--quiet")
    a, b = load(pipeline1 / "model"), load(out / "model")
    np.testing.assert_array_equal(a.basis_indices_, b.basis_indices_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)


def test_spec_errors_name_the_key(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('[data.train]\nsource = "synthetic:classification"\nn_rows = 10\n[model]\nalgorithm = "kmp"\n'
                 '[evaluate]\ndata = "test"\n')
    with pytest.raises(SpecError, match="evaluate.data = 'test' names no data set"):
        load_spec(p)
    p.write_text('[data.train]\nsource = "x"\nbogus = 1\n[model]\n')
    with pytest.raises(SpecError, match="unknown key 'bogus' in \\[data.train\\]"):
        load_spec(p)
    for f in PIPELINES.glob("*.toml"):
        load_spec(f)
        load_spec(f, small=True)
