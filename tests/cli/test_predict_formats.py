"""Predictions in the format ``--output``'s extension names: ``predict_to_file`` and
the ``predict`` command write .csv / .parquet / .npy / .zarr with class names, probabilities or
decision values, in the input's row order, streamed block by block, atomically, and replace
only what they wrote.

The command runs in process here (``running`` swapped for the synchronous scheduler: the
cluster path is the same ``predict_to_file`` call, exercised with a real cluster by the slow
test at the end and by tests/cli/test_chain.py).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from numpy.testing import assert_allclose, assert_array_equal

from kmp_dask import MMDA, KMPClassifier, KMPRegressor, save
from kmp_dask._overwrite import ForeignTargetError
from kmp_dask.evaluation import predict_to_file
from kmp_dask.store import create_store, open_store

NAMES = np.array(["ant", "bee", "cat"], dtype=object)


def _data(n=350, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    code = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.8)
    return X, code


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("pred")
    X, code = _data()
    store = create_store(root / "test.zarr", X, code, classes=NAMES.tolist(), chunk_rows=64)  # 6 chunks
    clf = KMPClassifier(n_basis=10, gamma=0.5, loss="logistic", client="sync", random_state=0).fit(X, NAMES[code])
    reg = KMPRegressor(n_basis=8, gamma=0.5, client="sync", random_state=0).fit(X, X[:, 0] ** 2)
    save(clf, root / "clf.model")
    return root, X, store, clf, reg


def test_csv_has_class_names_in_row_order(setup, tmp_path):
    root, X, store, clf, _ = setup
    out = predict_to_file(clf, store, tmp_path / "pred.csv", client="sync")
    df = pd.read_csv(tmp_path / "pred.csv")
    assert list(df.columns) == ["row", "prediction"] and out["columns"] == ["prediction"]
    assert_array_equal(df["row"], np.arange(len(X)))
    assert_array_equal(df["prediction"].to_numpy(dtype=object), clf.predict(X))
    assert set(df["prediction"]) <= set(NAMES)


def test_parquet_probabilities(setup, tmp_path):
    pytest.importorskip("pyarrow")
    root, X, store, clf, _ = setup
    predict_to_file(clf, store, tmp_path / "p.parquet", output="proba", client="sync")
    df = pd.read_parquet(tmp_path / "p.parquet")
    assert list(df.columns) == ["row", "proba_ant", "proba_bee", "proba_cat"]
    assert_allclose(df[["proba_ant", "proba_bee", "proba_cat"]].to_numpy(), clf.predict_proba(X), rtol=1e-12)
    assert_array_equal(df["row"], np.arange(len(X)))


def test_npy_names_and_decision_values(setup, tmp_path):
    root, X, store, clf, reg = setup
    predict_to_file(clf, store, tmp_path / "p.npy", client="sync")
    names = np.load(tmp_path / "p.npy", allow_pickle=False)
    assert names.dtype == np.dtype("U3")
    assert_array_equal(names, clf.predict(X).astype(str))
    predict_to_file(clf, store, tmp_path / "d.npy", output="decision", client="sync")
    assert_allclose(np.load(tmp_path / "d.npy"), clf.decision_function(X), rtol=1e-12)
    predict_to_file(reg, store, tmp_path / "r.csv", client="sync")
    assert_allclose(pd.read_csv(tmp_path / "r.csv")["prediction"], reg.predict(X), rtol=1e-12)


def test_zarr_with_probabilities(setup, tmp_path):
    root, X, store, clf, _ = setup
    predict_to_file(clf, store, tmp_path / "p.zarr", output="proba", client="sync")
    out = open_store(tmp_path / "p.zarr")
    P, codes = out.read_range(0, out.n_rows)
    assert_allclose(P, clf.predict_proba(X), rtol=1e-12)
    assert_array_equal(np.asarray(out.attrs["classes"])[codes], clf.predict(X))


def test_transformer_features_csv(setup, tmp_path):
    root, X, store, clf, _ = setup
    mmda = MMDA(n_components=1, gamma=0.5, max_core=30, client="sync", random_state=0).fit(X[:120],
                                                                                          NAMES[_data()[1][:120]])
    predict_to_file(mmda, store, tmp_path / "f.csv", client="sync")
    df = pd.read_csv(tmp_path / "f.csv")
    assert list(df.columns) == ["row"] + [f"feature_{n}" for n in mmda.get_feature_names_out()]
    assert_allclose(df.iloc[:, 1:].to_numpy(), mmda.transform(X), rtol=1e-9)


def test_blocks_are_streamed_in_batches(setup, tmp_path, monkeypatch):
    """The writer asks for at most ``batch`` row chunks at a time, never the whole column."""
    import dask

    root, X, store, clf, _ = setup
    sizes = []
    real = dask.compute

    def counting(*args, **kw):
        sizes.append(len(args))
        return real(*args, **kw)

    monkeypatch.setattr(dask, "compute", counting)
    predict_to_file(clf, store, tmp_path / "b.csv", client="sync", batch=2)
    assert sizes == [2, 2, 2]  # 6 chunks of 64 rows (350 rows), two at a time
    assert len(pd.read_csv(tmp_path / "b.csv")) == len(X)


class _FailsOnThirdBlock:
    """A classifier whose predict fails on the third block it sees (a worker dying mid-write)."""

    def __init__(self, model):
        self.model, self.classes_, self.n_features_in_, self.calls = model, model.classes_, 2, 0

    def predict(self, X):
        self.calls += 1
        if self.calls == 4:  # the first call is the probe on two rows
            raise RuntimeError("boom on block 3")
        return self.model.predict(X)


@pytest.mark.parametrize("name", ["a.csv", "a.npy", "a.parquet"])
def test_failure_mid_write_leaves_nothing(setup, tmp_path, name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    root, X, store, clf, _ = setup
    with pytest.raises(RuntimeError, match="boom on block 3"):
        predict_to_file(_FailsOnThirdBlock(clf), store, tmp_path / name, client="sync", batch=1)
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_only_predictions(setup, tmp_path):
    root, X, store, clf, _ = setup
    target = tmp_path / "p.csv"
    predict_to_file(clf, store, target, client="sync")
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        predict_to_file(clf, store, target, client="sync")
    predict_to_file(clf, store, target, output="proba", overwrite=True, client="sync")
    assert pd.read_csv(target).columns[1] == "proba_ant"
    user = tmp_path / "mine.csv"
    user.write_text("id,label\n1,a\n")
    with pytest.raises(ForeignTargetError, match="not a predictions file written by `kmp-dask predict`"):
        predict_to_file(clf, store, user, overwrite=True, client="sync")
    assert user.read_text() == "id,label\n1,a\n"
    mine = tmp_path / "y.npy"
    np.save(mine, np.arange(3))
    with pytest.raises(ForeignTargetError, match="a .npy file carries no mark"):
        predict_to_file(clf, store, mine, overwrite=True, client="sync")
    assert_array_equal(np.load(mine), np.arange(3))


def test_parquet_overwrite_recognises_its_metadata(setup, tmp_path):
    pytest.importorskip("pyarrow")
    root, X, store, clf, _ = setup
    target = tmp_path / "p.parquet"
    predict_to_file(clf, store, target, client="sync")
    predict_to_file(clf, store, target, overwrite=True, output="decision", client="sync")
    assert "decision_ant" in pd.read_parquet(target).columns
    pd.DataFrame({"row": [0], "prediction": ["x"]}).to_parquet(tmp_path / "user.parquet")
    with pytest.raises(ForeignTargetError, match="no kmp_dask metadata"):
        predict_to_file(clf, store, tmp_path / "user.parquet", overwrite=True, client="sync")


def test_refusals_before_any_pass(setup, tmp_path):
    root, X, store, clf, reg = setup
    with pytest.raises(ValueError, match=r"extension '.txt'.*use .csv, .parquet, .npy or .zarr"):
        predict_to_file(clf, store, tmp_path / "p.txt", client="sync")
    with pytest.raises(ValueError, match=r"KMPRegressor has no class probabilities.*\(it is a regressor\)"):
        predict_to_file(reg, store, tmp_path / "p.csv", output="proba", client="sync")
    plain = KMPClassifier(n_basis=3, client="sync", random_state=0).fit(X, NAMES[_data()[1]])
    with pytest.raises(ValueError, match=r"loss='squared'.*probabilities need loss='logistic'"):
        predict_to_file(plain, store, tmp_path / "p.csv", output="proba", client="sync")
    with pytest.raises(ValueError, match="is the store the predictions are computed from"):
        predict_to_file(clf, store, store.url, overwrite=True, client="sync")
    assert list(tmp_path.iterdir()) == []


# -- the command, in process -----------------------------------------------------------------------


@pytest.fixture
def in_process(monkeypatch):
    from kmp_dask.cli import _model

    @contextlib.contextmanager
    def sync(where, quiet=False, **kw):
        yield "sync"

    monkeypatch.setattr(_model, "running", sync)


def _invoke(*args):
    from kmp_dask.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_command_writes_csv_with_names(setup, tmp_path, in_process):
    root, X, store, clf, _ = setup
    res = _invoke("predict", root / "clf.model", store.url, "--output", tmp_path / "pred.csv")
    assert res.exit_code == 0, res.output
    assert f"wrote {len(X)} rows (csv)" in res.output
    df = pd.read_csv(tmp_path / "pred.csv")
    assert_array_equal(df["prediction"].to_numpy(dtype=object), clf.predict(X))
    res = _invoke("predict", root / "clf.model", store.url, "--output", tmp_path / "proba.npy", "--proba")
    assert res.exit_code == 0, res.output
    assert_allclose(np.load(tmp_path / "proba.npy"), clf.predict_proba(X), rtol=1e-12)


@pytest.mark.slow
def test_command_on_embedded_cluster(setup, tmp_path):
    from ._run import run_cli

    root, X, store, clf, _ = setup
    run_cli("predict", root / "clf.model", store.url, "--output", tmp_path / "pred.csv", "--workers", "2")
    df = pd.read_csv(tmp_path / "pred.csv")
    assert_array_equal(df["prediction"].to_numpy(dtype=object), clf.predict(X))


def test_compressed_svc_on_string_labels_evaluates_and_predicts_names(setup, tmp_path, in_process):
    """The issue's case: an SVC trained on string labels, compressed by the command, evaluated
    and predicted to CSV (it raised "Can not use auto rechunking with object dtype")."""
    import json

    import joblib
    from sklearn.svm import SVC

    from kmp_dask import load

    root, X, store, clf, _ = setup
    svc = SVC(gamma=0.5).fit(X, NAMES[_data()[1]])
    joblib.dump(svc, tmp_path / "svc.joblib")
    res = _invoke("compress", tmp_path / "svc.joblib", "--trust-pickle", "--n-vectors", "10", "--data", store.url,
                  "--refit", "pool", "--model", tmp_path / "svc10.model", "--quiet")
    assert res.exit_code == 0, res.output
    res = _invoke("evaluate", tmp_path / "svc10.model", store.url, "--json")
    assert res.exit_code == 0, res.output
    metrics = json.loads(res.output)
    comp = load(tmp_path / "svc10.model")
    assert metrics["classes"] == ["ant", "bee", "cat"]
    assert metrics["accuracy"] == pytest.approx(float(np.mean(comp.predict(X) == NAMES[_data()[1]])))
    res = _invoke("predict", tmp_path / "svc10.model", store.url, "--output", tmp_path / "svc.csv", "--quiet")
    assert res.exit_code == 0, res.output
    assert_array_equal(pd.read_csv(tmp_path / "svc.csv")["prediction"].to_numpy(dtype=object), comp.predict(X))


def test_compress_with_probability_calibrates_on_held_out_rows(setup, tmp_path, in_process):
    """``compress --probability --val-data`` fits the compressed model's calibrator on the held-out
    store's rows (as ``ReducedSetCompressor(probability=True).fit(..., X_val=, y_val=)``), saves it,
    and ``predict --proba`` writes its probabilities; its log-loss on held-out rows is below the
    class shares'."""
    import joblib
    from sklearn.metrics import log_loss
    from sklearn.svm import SVC

    from kmp_dask import ReducedSetCompressor, load

    root, X, store, clf, _ = setup
    y = NAMES[_data()[1]]
    Xv, code_v = _data(n=200, seed=1)
    val = create_store(tmp_path / "val.zarr", Xv, code_v, classes=NAMES.tolist(), chunk_rows=64)
    Xt, code_t = _data(n=400, seed=2)
    svc = SVC(gamma=0.5).fit(X, y)
    joblib.dump(svc, tmp_path / "svc.joblib")
    args = ("compress", tmp_path / "svc.joblib", "--trust-pickle", "--n-vectors", "12", "--data", store.url,
            "--model", tmp_path / "p.model", "--quiet")
    res = _invoke(*args, "--probability", "--val-data", val.url)
    assert res.exit_code == 0, res.output
    comp = load(tmp_path / "p.model")
    ref = ReducedSetCompressor(12, probability=True, random_state=0).fit(svc, X, y, X_val=Xv, y_val=NAMES[code_v])
    assert_allclose(comp.predict_proba(Xt), ref.predict_proba(Xt), rtol=1e-10, atol=1e-12)
    res = _invoke("predict", tmp_path / "p.model", store.url, "--output", tmp_path / "p.csv", "--proba", "--quiet")
    assert res.exit_code == 0, res.output
    df = pd.read_csv(tmp_path / "p.csv")
    assert list(df.columns) == ["row", "proba_ant", "proba_bee", "proba_cat"]
    assert_allclose(df[["proba_ant", "proba_bee", "proba_cat"]].to_numpy(), comp.predict_proba(X), rtol=1e-9)
    shares = np.array([np.mean(y == c) for c in NAMES])
    assert log_loss(NAMES[code_t], comp.predict_proba(Xt), labels=NAMES) < log_loss(
        NAMES[code_t], np.tile(shares, (len(Xt), 1)), labels=NAMES)
    # without --val-data: the labelled --data rows, as fit(model, X_pool, y) calibrates
    res = _invoke(*args[:-2], tmp_path / "q.model", "--quiet", "--probability")
    assert res.exit_code == 0, res.output
    on_pool = ReducedSetCompressor(12, probability=True, random_state=0).fit(svc, X, y)
    assert_allclose(load(tmp_path / "q.model").predict_proba(Xt), on_pool.predict_proba(Xt), rtol=1e-10, atol=1e-12)
    # refused in one line before any work: no labelled rows, --val-data alone
    for extra, message in ((("--probability",), "--val-data"), (("--val-data", val.url), "add --probability")):
        res = _invoke("compress", tmp_path / "svc.joblib", "--trust-pickle", "--n-vectors", "12", "--model",
                      tmp_path / "r.model", "--quiet", *extra)
        assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output, res.output
        assert not (tmp_path / "r.model").exists()
