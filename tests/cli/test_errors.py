"""Bad arguments exit non-zero with one clear line naming the problem, and write nothing."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask.cli import main
from kmp_dask.cli._params import parse_value
from kmp_dask.store import create_store


@pytest.fixture
def ws(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    create_store(tmp_path / "train.zarr", X, (X[:, 0] > 0).astype(int), classes=["a", "b"])
    (tmp_path / "not_a_model").mkdir()
    (tmp_path / "not_a_model" / "x.txt").write_text("hello")
    (tmp_path / "svc.joblib").write_bytes(b"\x80\x04not really a pickle")
    (tmp_path / "bad.toml").write_text("n_basis = 5\nno_such_param = 1\n")
    (tmp_path / "exists.kmp").mkdir()
    return tmp_path


def _listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


CASES = {
    "missing store": (["train", "{ws}/nope.zarr", "--model", "{ws}/m.kmp", "--workers", "1"], "nope.zarr"),
    "model file that is not one": (["evaluate", "{ws}/not_a_model", "{ws}/train.zarr"], "not a kmp_dask model"),
    "unknown config key": (["train", "{ws}/train.zarr", "--model", "{ws}/m.kmp", "--config", "{ws}/bad.toml"],
                           "no_such_param"),
    "output exists": (["train", "{ws}/train.zarr", "--model", "{ws}/exists.kmp"], "--overwrite"),
    "pickle without --trust-pickle": (["compress", "{ws}/svc.joblib", "--n-vectors", "5", "--model", "{ws}/c.kmp"],
                                      "--trust-pickle"),
    "predict output exists": (["predict", "{ws}/not_a_model", "{ws}/train.zarr", "--output", "{ws}/train.zarr"],
                              "--overwrite"),
    "report output exists": (["report", "{ws}/exists.kmp", "--output", "{ws}/bad.toml"], "--overwrite"),
    "flag the algorithm lacks": (["train", "{ws}/train.zarr", "--model", "{ws}/m.kmp", "--algorithm", "cvm",
                                  "--n-basis", "5"], "--n-basis"),
    "bad scheduler address": (["train", "{ws}/train.zarr", "--model", "{ws}/m.kmp", "--scheduler", "localhost"],
                              "--scheduler"),
    "resume without checkpoint": (["train", "{ws}/train.zarr", "--model", "{ws}/m.kmp", "--resume"], "--checkpoint"),
    "ingest npz without X": (["ingest", "{ws}/e.npz", "{ws}/o.zarr"], "'X'"),
    "sample weights of another length": (["train", "{ws}/train.zarr", "--model", "{ws}/m.kmp", "--sample-weight",
                                          "{ws}/w7.npy", "--workers", "1"], "shape (200,)"),
    "sample weights not an array": (["train", "{ws}/train.zarr", "--model", "{ws}/m.kmp", "--sample-weight",
                                     "{ws}/bad.toml"], "--sample-weight"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_argument_is_one_line_and_writes_nothing(ws, case):
    np.savez(ws / "e.npz", Z=np.zeros((3, 2)))
    np.save(ws / "w7.npy", np.ones(7))
    args, needle = CASES[case]
    before = _listing(ws)
    result = CliRunner().invoke(main, [a.format(ws=ws) for a in args])
    assert result.exit_code != 0, result.output
    lines = [ln for ln in result.output.strip().splitlines() if ln.strip()]
    assert lines[-1].startswith("Error") and needle in result.output, result.output
    assert "Traceback" not in result.output
    assert _listing(ws) == before


def test_parse_value():
    assert parse_value("0.5") == 0.5 and parse_value("100") == 100 and parse_value("auto") == "auto"
    assert parse_value("none") is None and parse_value("true") is True
    assert parse_value("0.1,1,10") == [0.1, 1, 10] and parse_value("[1, 2]") == [1, 2]


def test_ingest_npy_and_npz_directory(tmp_path):
    rng = np.random.default_rng(1)
    parts = [rng.normal(size=(n, 4)).astype(np.float32) for n in (70, 50)]
    (tmp_path / "d").mkdir()
    for i, X in enumerate(parts):
        np.savez(tmp_path / "d" / f"part{i}.npz", X=X, y=(X[:, 0] > 0).astype(np.int32))
    np.save(tmp_path / "X.npy", parts[0])
    np.save(tmp_path / "y.npy", (parts[0][:, 0] > 0).astype(np.int32))
    runner = CliRunner()
    r1 = runner.invoke(main, ["ingest", str(tmp_path / "d"), str(tmp_path / "a.zarr"), "--chunk-rows", "32"])
    r2 = runner.invoke(main, ["ingest", str(tmp_path / "X.npy"), str(tmp_path / "b.zarr"), "--labels",
                              str(tmp_path / "y.npy")])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    from kmp_dask.store import open_store

    a, b = open_store(tmp_path / "a.zarr"), open_store(tmp_path / "b.zarr")
    Xa, ya = a.read_range(0, a.n_rows)
    np.testing.assert_array_equal(Xa, np.concatenate(parts))
    np.testing.assert_array_equal(ya, (np.concatenate(parts)[:, 0] > 0).astype(np.int32))
    assert b.n_rows == 70 and a.row_chunks[0] == 32
    assert os.path.isdir(tmp_path / "a.zarr")


def _svc_file(tmp_path, seed):
    """A labelled training store ``train.zarr`` and an RBF SVC fitted on it, saved as ``svc.joblib``."""
    import joblib
    from sklearn.svm import SVC

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    create_store(tmp_path / "train.zarr", X, y, classes=[0, 1])
    svc = SVC(gamma=1.0).fit(X, y)
    joblib.dump(svc, tmp_path / "svc.joblib")
    return X, y, svc


def test_compress_a_trusted_scikit_learn_file(tmp_path):
    from kmp_dask import load

    X, y, svc = _svc_file(tmp_path, 2)
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "svc.joblib"), "--trust-pickle", "--n-vectors", "15",
                                  "--data", str(tmp_path / "train.zarr"), "--model", str(tmp_path / "c.kmp"),
                                  "--workers", "1", "--quiet"])
    assert r.exit_code == 0, r.output
    comp = load(tmp_path / "c.kmp")
    assert comp.n_vectors_ == 15
    assert np.mean(comp.predict(X) == svc.predict(X)) > 0.9


@pytest.mark.parametrize("algorithm,extra", [("cvm", ["--C", "10"]), ("mmda", ["--n-components", "2"]),
                                             ("skpca", ["--n-components", "5"])])
def test_train_other_algorithms(tmp_path, algorithm, extra, process_client, process_cluster):
    """Each family trains from the command line on a cluster's workers: the session's process cluster
    by address (an embedded cluster per algorithm cost 2-6 s each; ``train --workers N`` starting
    one is covered by test_train_with_sample_weights_equals_the_python_fit and test_resume.py)."""
    from kmp_dask import load

    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    create_store(tmp_path / "train.zarr", X, (X[:, 0] * X[:, 1] > 0).astype(int), classes=["a", "b"])
    r = CliRunner().invoke(main, ["train", str(tmp_path / "train.zarr"), "--model", str(tmp_path / "m.kmp"),
                                  "--algorithm", algorithm, "--random-state", "0", "--quiet",
                                  "--scheduler", process_cluster.scheduler_address, *extra])
    assert r.exit_code == 0, r.output
    model = load(tmp_path / "m.kmp")
    assert type(model).__name__ == {"cvm": "CVMClassifier", "mmda": "MMDA", "skpca": "SparseKernelPCA"}[algorithm]
    out = model.predict(X) if algorithm == "cvm" else model.transform(X)
    assert len(out) == 400


def test_train_with_sample_weights_equals_the_python_fit(tmp_path):
    """``--sample-weight w.npy`` on the embedded cluster gives the in-process weighted model."""
    from kmp_dask import KMPClassifier, load

    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int)
    w = np.where(y == 1, 3.0, 1.0)
    create_store(tmp_path / "train.zarr", X, y, classes=["a", "b"])
    np.save(tmp_path / "w.npy", w)
    r = CliRunner().invoke(main, ["train", str(tmp_path / "train.zarr"), "--model", str(tmp_path / "m.kmp"),
                                  "--sample-weight", str(tmp_path / "w.npy"), "--n-basis", "12", "--random-state", "0",
                                  "--workers", "1", "--quiet"])
    assert r.exit_code == 0, r.output
    model = load(tmp_path / "m.kmp")
    ref = KMPClassifier(n_basis=12, random_state=0).fit(str(tmp_path / "train.zarr"), sample_weight=w)
    assert model.basis_indices_.tolist() == ref.basis_indices_.tolist()
    assert np.array_equal(model.dual_coef_, ref.dual_coef_)


def test_compress_with_exchange_and_refit_reads_the_pool_into_memory(tmp_path):
    from kmp_dask import load

    X, y, svc = _svc_file(tmp_path, 5)
    base = ["compress", str(tmp_path / "svc.joblib"), "--trust-pickle", "--n-vectors", "12", "--quiet"]
    r = CliRunner().invoke(main, base + ["--data", str(tmp_path / "train.zarr"), "--model", str(tmp_path / "c.kmp"),
                                         "--exchange", "5", "--refit", "pool"])
    assert r.exit_code == 0, r.output
    comp = load(tmp_path / "c.kmp")
    assert comp.n_vectors_ == 12 and comp.exchange == 5 and comp.refit == "pool"
    from kmp_dask import ReducedSetCompressor

    same = ReducedSetCompressor(n_vectors=12, exchange=5, refit="pool").fit(svc, X, y)  # labelled rows in memory
    np.testing.assert_allclose(comp.decision_function(X), same.decision_function(X), rtol=1e-6, atol=1e-8)
    assert np.mean(comp.predict(X) == svc.predict(X)) > 0.9
    r = CliRunner().invoke(main, base + ["--model", str(tmp_path / "d.kmp"), "--refit", "pool"])
    assert r.exit_code != 0 and "--refit pool" in r.output and "--data" in r.output, r.output
    r = CliRunner().invoke(main, base + ["--model", str(tmp_path / "f.kmp"), "--exchange", "2"])  # pool = its SVs
    assert r.exit_code == 0, r.output
    assert load(tmp_path / "f.kmp").n_vectors_ == 12
    r = CliRunner().invoke(main, base + ["--model", str(tmp_path / "e.kmp"), "--exchange", "-1"])
    assert r.exit_code != 0 and "--exchange" in r.output, r.output


def test_train_summary_counts_a_cvms_core_vectors_not_its_problems():
    """``_size`` said "3 core vectors" for a 3-class CVM with thousands (one entry per class)."""
    import numpy as np

    from kmp_dask import CVMClassifier
    from kmp_dask.cli._model import _size

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.digitize(X[:, 0], [-0.4, 0.4])
    est = CVMClassifier(client="sync", random_state=0).fit(X, y)
    n = len(est.expansion_.support_vectors)
    assert len(est.core_indices_) == 3 and n > 3
    assert _size(est) == f"{n} core vectors"
