"""SIGKILL ``train --checkpoint`` mid-fit, then ``--resume``: the identical model."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from kmp_dask import load

from ._run import kmp_dask_cmd, run_cli

pytestmark = pytest.mark.timeout(900)

N_BASIS = 40


def _train_args(tmp_path, model, *extra):
    return ["train", tmp_path / "train.zarr", "--model", model, "--n-basis", N_BASIS, "--gamma", 0.02,
            "--random-state", 7, "--validation-fraction", 0.1, "--workers", 2, *extra]


def _kill_when(log, n_lines, proc, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= n_lines:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            return len(log.read_text().splitlines())
        if proc.poll() is not None:
            raise AssertionError(f"train ended before it could be killed: {proc.stderr.read()}")
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("train did not reach the kill point in time")


@pytest.mark.slow  # the same fault (a CLI fit on an embedded cluster SIGKILLed, resumed to the identical model)
# in the default run: test_pipelines.py::test_killed_pipeline_resumes_to_the_identical_model; train's
# --checkpoint / --resume flags: the test below; KMP SIGKILLed mid-fit: tests/greedy/test_checkpoint.py
def test_killed_train_resumes_to_the_identical_model(tmp_path):
    run_cli("ingest", "synthetic:classification", tmp_path / "train.zarr", "--n-rows", 6000, "--chunk-rows", 1500)
    run_cli(*_train_args(tmp_path, tmp_path / "ref.kmp", "--quiet"))
    log = tmp_path / "log.jsonl"
    args = [str(a) for a in _train_args(tmp_path, tmp_path / "m.kmp", "--checkpoint", tmp_path / "ckpt",
                                         "--checkpoint-every", 3, "--log-json", log)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(kmp_dask_cmd() + args, start_new_session=True, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    done = _kill_when(log, 14, proc)
    assert done < N_BASIS and not (tmp_path / "m.kmp").exists()
    assert any((tmp_path / "ckpt").iterdir())
    run_cli(*args, "--resume")
    ref, got = load(tmp_path / "ref.kmp"), load(tmp_path / "m.kmp")
    np.testing.assert_array_equal(got.basis_indices_, ref.basis_indices_)
    np.testing.assert_array_equal(got.dual_coef_, ref.dual_coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
    X = np.random.default_rng(0).normal(size=(50, ref.n_features_in_)).astype(np.float32)
    np.testing.assert_array_equal(got.decision_function(X), ref.decision_function(X))


@pytest.mark.parametrize("algorithm, flags", [
    ("cvm", ["--eps", "1e-3"]),
    pytest.param("skpca", ["--n-components", "12"], marks=pytest.mark.slow),
])
def test_every_algorithm_checkpoints_and_a_complete_checkpoint_resumes_to_the_same_model(tmp_path, algorithm, flags):
    """``--checkpoint`` is accepted for every ``--algorithm``; resuming a complete checkpoint
    gives the model of the run that wrote it, without fitting again."""
    run_cli("ingest", "synthetic:classification", tmp_path / "train.zarr", "--n-rows", 1500, "--chunk-rows", 500)
    common = ["train", tmp_path / "train.zarr", "--algorithm", algorithm, *flags, "--workers", 1, "--quiet",
              "--checkpoint", tmp_path / "ckpt", "--checkpoint-every", 2]
    run_cli(*common, "--model", tmp_path / "a.model")
    assert any((tmp_path / "ckpt").iterdir())
    run_cli(*common, "--model", tmp_path / "b.model", "--resume")
    a, b = load(tmp_path / "a.model"), load(tmp_path / "b.model")
    X = np.random.default_rng(0).normal(size=(40, a.n_features_in_)).astype(np.float32)
    out = "decision_function" if algorithm == "cvm" else "transform"
    np.testing.assert_array_equal(getattr(b, out)(X), getattr(a, out)(X))
