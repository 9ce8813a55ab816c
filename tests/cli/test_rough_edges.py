"""Rough edges a new user meets around training and scoring, each one line or one honest number:
Ctrl-C during ``train`` says how not to lose the fit next time, ``--n-basis`` above the rows is
refused before the fit, the progress estimate is shown as an estimate, a pipeline's parameter
values are checked before its data step, ``output = "~/x"`` is one directory, the report says
when a compression was replaced by the model's own prefix and checks ``--data`` as ``evaluate``
does, and a pipeline's CSV source names its label or says it has none."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask.cli import main
from kmp_dask.store import create_store

from ._run import kmp_dask_cmd

pytestmark = pytest.mark.timeout(600)


def _cli(*args, code=0):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r.output


def _store(path, n=300, d=4, names=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return create_store(path, X, (X[:, 0] > 0).astype(int), classes=["neg", "pos"], feature_names=names)


@pytest.mark.parametrize("checkpoint", [False, True])
def test_ctrl_c_during_train_says_how_to_keep_the_fit(tmp_path, checkpoint):
    """SIGINT a few seconds into a long fit (a real process: the signal, not a simulated exception):
    the last lines name --checkpoint DIR (without one) or --resume (with one); no model is saved."""
    _store(tmp_path / "big.zarr", n=4000, d=10)
    args = ["train", tmp_path / "big.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 2000, "--gamma", 0.1,
            "--scheduler", "sync"]
    if checkpoint:
        args += ["--checkpoint", tmp_path / "ckpt", "--checkpoint-every", 5]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    # an ignored SIGINT is inherited across exec (a test run's parent may ignore it): the child gets
    # the default disposition, as from an interactive shell, so Python turns the signal into Ctrl-C
    proc = subprocess.Popen(kmp_dask_cmd() + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180  # imports on a loaded machine, then "dask: in process ..."
        while not any(ln.startswith("dask:") for ln in lines) and time.monotonic() < deadline:
            assert proc.poll() is None, "".join(lines)
            time.sleep(0.2)
        time.sleep(3)  # the pursuit under way (it runs for minutes)
        assert proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines)
    assert proc.returncode != 0
    text = " ".join(err.split())
    if checkpoint:
        assert "--resume" in text and str(tmp_path / "ckpt") in text, err
    else:
        assert "Train with --checkpoint DIR" in text and "--resume" in text, err
    assert "Traceback" not in err and not (tmp_path / "m.kmp").exists()


def test_n_basis_above_the_rows_is_refused_before_the_fit(tmp_path, no_cluster):
    _store(tmp_path / "s.zarr", n=150)
    out = _cli("train", tmp_path / "s.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 200, "--scheduler", "sync",
               code=2)
    assert "200 basis functions on the 150 rows" in out and "--n-basis" in out, out
    assert "dask:" not in out  # refused before the fit: `running` says where the fit runs, just before it
    assert not (tmp_path / "m.kmp").exists()
    (tmp_path / "c.toml").write_text("n_basis = 20000\n")
    out = _cli("train", tmp_path / "s.zarr", "--model", tmp_path / "m.kmp", "--config", tmp_path / "c.toml",
               "--scheduler", "sync", code=2)
    assert "20000 basis functions on the 150 rows" in out
    _cli("train", tmp_path / "s.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 5, "--scheduler", "sync",
         "--quiet")  # a size the rows allow trains


def test_progress_lines_show_an_estimate_not_a_bound(capsys):
    from kmp_dask.estimators._progress import progress_callback

    callback, closer = progress_callback(2, 6)
    for i in range(6):
        callback({"iteration": i, "residual_norm": 1.0 / (i + 1)})
    closer.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and "≤" not in "".join(lines)
    assert all("s left at this pace" in ln and ", ~" in ln for ln in lines[:2]), lines
    assert "left" not in lines[2]  # the last iteration: nothing left to estimate


PIPELINE = """
[data.train]
source = "synthetic:classification"
n_rows = 300
n_features = 4
[data.test]
source = "synthetic:classification"
n_rows = 100
n_features = 4
start_row = 300
[model]
params = {{ n_basis = {n_basis}, gamma = 0.5 }}
[evaluate]
data = "test"
[run]
scheduler = "sync"
"""


@pytest.mark.parametrize("params, words", [("-3", ("model.params", "n_basis", "-3")),
                                           ('"ten"', ("model.params", "n_basis", "'ten'"))])
def test_pipeline_parameter_values_are_checked_before_the_data_step(tmp_path, no_cluster, params, words):
    (tmp_path / "p.toml").write_text(PIPELINE.format(n_basis=params))
    out = _cli("run", tmp_path / "p.toml", "--output", tmp_path / "run", code=1)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and all(w in lines[0] for w in words), out
    assert not (tmp_path / "run").exists()  # the data step never ran


def test_pipeline_output_under_home_is_one_directory(tmp_path, monkeypatch, no_cluster):
    """``output = "~/x"``: everything under $HOME/x; nothing in a literal ./~ directory."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    (cwd / "p.toml").write_text('output = "~/x"\n' + PIPELINE.format(n_basis=5))
    _cli("run", cwd / "p.toml", "--quiet")
    assert (home / "x" / "summary.json").is_file() and (home / "x" / "report.html").is_file()
    assert not (cwd / "~").exists(), sorted(os.listdir(cwd))
    assert sorted(os.listdir(cwd)) == ["p.toml"]


def test_pipeline_csv_source_needs_label_or_no_label(tmp_path):
    import pandas as pd

    from kmp_dask.pipeline import load_spec
    from kmp_dask.pipeline._spec import SpecError

    pd.DataFrame({"y": [0, 1] * 20, "a": np.arange(40.0), "b": np.ones(40)}).to_csv(tmp_path / "f.csv", index=False)
    base = '[data.train]\nsource = "f.csv"\n{extra}[model]\nparams = {{ n_basis = 3 }}\n'
    for extra, err in [("", "--label COL"), ('label = "y"\nno_label = true\n', "exclude each other"),
                       ("no_label = 1\n", "no_label = 1")]:
        (tmp_path / "p.toml").write_text(base.format(extra=extra))
        with pytest.raises(SpecError, match=err):
            load_spec(tmp_path / "p.toml")
    for extra in ('label = "y"\n', "no_label = true\n"):
        (tmp_path / "p.toml").write_text(base.format(extra=extra))
        load_spec(tmp_path / "p.toml")


def test_report_says_the_compression_was_replaced_by_the_prefix(tmp_path):
    from sklearn.datasets import make_classification

    from kmp_dask import KMPClassifier, ReducedSetCompressor
    from kmp_dask.reduced import PrefixKeptWarning
    from kmp_dask.report import build_report

    X, y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0, flip_y=0.05)
    model = KMPClassifier(gamma=0.3, n_basis=60, random_state=0).fit(X, y)
    with pytest.warns(PrefixKeptWarning):
        kept = ReducedSetCompressor(5, random_state=0).fit(model, X, y)
    compressed = ReducedSetCompressor(40, random_state=0).fit(model, X, y)
    assert kept.used_prefix_ and not compressed.used_prefix_
    html = build_report([("kept", kept), ("compressed", compressed)])
    assert html.count("first 5 basis functions, so this model is that prefix") == 1


def test_report_data_is_checked_as_evaluate_checks_it(tmp_path, no_cluster):
    """A store with the model's columns in another order is read in the model's order (it used to
    plot wrong accuracies without a word); a store lacking a column is one Error line."""
    from kmp_dask import load
    from kmp_dask.cli._post import _data_columns, _sample
    from kmp_dask.store import open_store

    names = ["a", "b", "c", "d"]
    st = _store(tmp_path / "s.zarr", names=names)
    X, _ = st.read_range(0, st.n_rows)
    y = (np.asarray(X)[:, 0] > 0).astype(int)
    create_store(tmp_path / "rev.zarr", np.asarray(X)[:, ::-1], y, classes=["neg", "pos"], feature_names=names[::-1])
    create_store(tmp_path / "abc.zarr", np.asarray(X)[:, :3], y, classes=["neg", "pos"], feature_names=names[:3])
    _cli("train", tmp_path / "s.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 8, "--gamma", 0.5,
         "--scheduler", "sync", "--quiet")
    loaded = [("m", load(tmp_path / "m.kmp"))]
    rev = open_store(tmp_path / "rev.zarr")
    Xr, yr = _sample(rev, 100, _data_columns(loaded, rev))
    Xs, ys = _sample(st, 100)
    np.testing.assert_array_equal(Xr, Xs)
    np.testing.assert_array_equal(yr, ys)
    _cli("report", tmp_path / "m.kmp", "--data", tmp_path / "rev.zarr", "--output", tmp_path / "r.html")
    out = _cli("report", tmp_path / "m.kmp", "--data", tmp_path / "abc.zarr", "--output", tmp_path / "bad.html",
               code=1)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and "lacks 1 of the columns" in lines[0] and "['d']" in lines[0], out
    assert not (tmp_path / "bad.html").exists()
