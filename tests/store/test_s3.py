"""Stores on object storage (docs/store.md "Object storage"), against a real S3-compatible server:
moto's server mode on 127.0.0.1 (tests/_s3_server.py), one per test process, a fresh bucket per module.

Checked: ingest, open, fit (every family, reading the store through ``read_range`` / readers) and
predict on ``s3://`` give the same arrays and the same model, bit for bit, as a local copy; a failed
ingest leaves nothing at the target; publishing writes the root ``zarr.json`` last and a failure while
publishing keeps the complete new store at its temporary prefix; a damaged or missing chunk object is
a ``StoreCorruptError`` as locally; ``overwrite`` replaces only a kmp_dask store; commands reach the
server through the standard AWS environment variables.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from _s3_server import s3_server  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from kmp_dask import CVMClassifier, KMPClassifier, KMPRegressor, SparseKernelPCA  # noqa: E402
from kmp_dask._overwrite import ForeignTargetError  # noqa: E402
from kmp_dask.cli import main as cli  # noqa: E402
from kmp_dask.exceptions import StoreExistsError  # noqa: E402
from kmp_dask.store import StoreCorruptError, create_store, open_store, store_from_blocks, store_from_csv  # noqa: E402
from kmp_dask.store._zarr import Location, StorePublishError  # noqa: E402

RNG = np.random.default_rng(26)
X = RNG.normal(size=(240, 4))
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)


@pytest.fixture(scope="module")
def s3():
    return s3_server()


@pytest.fixture(scope="module")
def bucket(s3):
    return s3.new_bucket("kmp-s3-tests")


@pytest.fixture
def url(bucket):
    """A fresh store URL in the module's bucket."""
    return f"s3://{bucket}/{uuid.uuid4().hex[:8]}/data.zarr"


@pytest.fixture(scope="module")
def pair(s3, bucket, tmp_path_factory):
    """The same data as a local store and as a store on the server."""
    local = create_store(tmp_path_factory.mktemp("s3") / "local.zarr", X, Y, chunk_rows=80)
    remote = create_store(f"s3://{bucket}/pair.zarr", X, Y, chunk_rows=80, storage_options=s3.storage_options)
    return local, remote


def _keys(s3, url):
    root = url[len("s3://"):]
    return sorted(p[len(root) + 1:] for p in s3.fs().find(root))


def _siblings(s3, url):
    """Everything next to the store's prefix: leftovers of temporaries would show here."""
    parent = url[len("s3://"):].rsplit("/", 1)[0]
    try:
        return sorted(s3.fs().ls(parent, detail=False))
    except FileNotFoundError:  # nothing at all under the parent prefix
        return []


def test_store_on_s3_holds_what_a_local_one_holds(s3, pair):
    local, remote = pair
    assert remote.url.startswith("s3://") and remote.complete
    for a, b in zip(local.read_range(0, 240), remote.read_range(0, 240), strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    rows = [7, 200, 3, 7]
    assert np.array_equal(local.read_rows(rows)[0], remote.read_rows(rows)[0])
    strip = {"provenance"}
    assert {k: v for k, v in local.attrs.items() if k not in strip} == \
        {k: v for k, v in remote.attrs.items() if k not in strip}
    assert remote.verify() == 6
    # the published store only: no temporary prefix left next to it
    assert _siblings(s3, remote.url) == [remote.url[len("s3://"):]]
    reopened = open_store(remote.url, storage_options=s3.storage_options)
    assert np.array_equal(reopened.to_dask("X").compute(), X)


@pytest.mark.parametrize("make", [
    lambda: KMPClassifier(n_basis=6, candidates=20, gamma=0.5, random_state=0, client="sync"),
    lambda: KMPRegressor(n_basis=5, gamma=0.5, random_state=0, client="sync"),
    lambda: CVMClassifier(C=10, gamma=0.5, random_state=0, client="sync"),
    lambda: SparseKernelPCA(n_components=3, gamma=0.5, random_state=0, client="sync"),
], ids=["kmp-classifier", "kmp-regressor", "cvm", "sparse-kpca"])
def test_fit_on_s3_gives_the_model_of_a_local_copy(pair, make):
    local, remote = pair
    a, b = make().fit(local), make().fit(remote)
    out = "transform" if hasattr(a, "transform") else "predict"
    assert np.array_equal(getattr(a, out)(X), getattr(b, out)(X))
    if hasattr(a, "expansion_"):
        ea, eb = a.expansion_, b.expansion_
        assert np.array_equal(ea.support_vectors, eb.support_vectors)
        assert np.array_equal(ea.coef, eb.coef) and np.array_equal(ea.intercept, eb.intercept)


@pytest.mark.slow
def test_fit_and_predict_on_s3_on_a_cluster_same_as_local(pair):
    """Workers read the store on the server through the pickled reader (a thread cluster: the
    process cluster is in the slow test below)."""
    from distributed import Client, LocalCluster

    local, remote = pair
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as lc, \
            Client(lc) as client:
        a = KMPClassifier(n_basis=6, candidates=20, gamma=0.5, random_state=0, client=client).fit(local)
        b = KMPClassifier(n_basis=6, candidates=20, gamma=0.5, random_state=0, client=client).fit(remote)
        assert np.array_equal(a.expansion_.coef, b.expansion_.coef)
        assert np.array_equal(a.expansion_.support_vectors, b.expansion_.support_vectors)
        assert np.array_equal(np.asarray(a.predict(local).compute()), np.asarray(b.predict(remote).compute()))
        assert np.array_equal(np.asarray(b.predict(remote).compute()), a.predict(X))


@pytest.mark.slow
def test_csv_ingest_to_s3_same_as_local(s3, url, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{int(lab)}\n"
                                              for r, lab in zip(X[:50], Y[:50], strict=True)))
    local = store_from_csv(tmp_path / "l.zarr", path, chunk_rows=16)
    remote = store_from_csv(url, path, chunk_rows=16, storage_options=s3.storage_options)
    for a, b in zip(local.read_range(0, 50), remote.read_range(0, 50), strict=True):
        assert np.array_equal(a, b)
    assert local.attrs["feature_names"] == remote.attrs["feature_names"] == ["a", "b", "c"]


def _blocks(fail_at=None):
    def block(a, b):
        if fail_at is not None and a >= fail_at:
            raise RuntimeError("source broke")
        return X[a:b], Y[a:b]
    return block


def test_failed_ingest_leaves_nothing_and_keeps_the_old_store(s3, url):
    so = s3.storage_options
    with pytest.raises(RuntimeError, match="source broke"):
        store_from_blocks(url, 240, _blocks(fail_at=160), chunk_rows=80, storage_options=so)
    assert not Location.parse(url, so).exists()
    assert not [p for p in _siblings(s3, url) if ".tmp-" in p]
    create_store(url, X[:80], Y[:80], chunk_rows=40, storage_options=so)
    before = s3.listing(url[len("s3://"):])
    with pytest.raises(RuntimeError, match="source broke"):
        store_from_blocks(url, 240, _blocks(fail_at=80), chunk_rows=80, overwrite=True, storage_options=so)
    assert s3.listing(url[len("s3://"):]) == before
    assert open_store(url, storage_options=so).n_rows == 80
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        create_store(url, X, Y, storage_options=so)


def test_publish_writes_the_root_zarr_json_last(s3, url, monkeypatch):
    so = s3.storage_options
    create_store(url, X[:80], Y[:80], chunk_rows=40, storage_options=so)  # replaced below
    fs = Location.parse(url, so).fs
    events = []
    real_copy, real_rm = fs.copy, fs.rm
    monkeypatch.setattr(fs, "copy", lambda a, b, **kw: (events.append(("copy", b)), real_copy(a, b, **kw))[1])
    monkeypatch.setattr(fs, "rm", lambda p, *a, **kw: (events.append(("rm", p)), real_rm(p, *a, **kw))[1])
    create_store(url, X, Y, chunk_rows=80, overwrite=True, storage_options=so)
    root = url[len("s3://"):]
    # the old store first loses its zarr.json (no reader opens it any more), then the rest
    assert events[0] == ("rm", f"{root}/zarr.json")
    copies = [e for e in events if e[0] == "copy"]
    assert copies[-1] == ("copy", f"{root}/zarr.json")
    assert all(f"{root}/zarr.json" not in e[1] for e in copies[:-1])
    assert events[-1][0] == "rm" and ".tmp-" in events[-1][1]  # the temporary, after publishing
    assert open_store(url, storage_options=so).n_rows == 240
    assert _keys(s3, url) == sorted(["zarr.json", "X/zarr.json", "y/zarr.json"]
                                    + [f"X/c/{i}/0" for i in range(3)] + [f"y/c/{i}" for i in range(3)])


def test_a_failed_publish_keeps_the_complete_store_at_its_temporary(s3, url, monkeypatch):
    so = s3.storage_options
    fs = Location.parse(url, so).fs
    real_copy = fs.copy

    def copy(a, b, **kw):
        if isinstance(b, str) and b.endswith("/zarr.json"):
            raise ConnectionError("connection reset")
        return real_copy(a, b, **kw)

    monkeypatch.setattr(fs, "copy", copy)
    with pytest.raises(StorePublishError, match="connection reset") as info:
        create_store(url, X, Y, chunk_rows=80, storage_options=so)
    monkeypatch.undo()
    assert info.value.target == url and ".tmp-" in info.value.temporary
    assert info.value.temporary in str(info.value)
    assert not Location.parse(url, so).exists()  # nothing half-copied at the target
    kept = open_store(info.value.temporary, storage_options=so)
    assert kept.verify() == 6 and np.array_equal(kept.read_range(0, 240)[0], X)
    Location.parse(info.value.temporary, so).remove()


def test_damaged_and_missing_chunks_on_s3_are_named(s3, url):
    so = s3.storage_options
    store = create_store(url, X, Y, chunk_rows=80, storage_options=so)
    root = url[len("s3://"):]
    fs = s3.fs()
    fs.pipe(f"{root}/X/c/1/0", b"not a blosc frame at all")
    with pytest.raises(StoreCorruptError, match=r"chunk 1 \(rows 80..159\) of array 'X'") as info:
        open_store(url, storage_options=so).read_range(0, 240)
    assert info.value.key == "X/c/1/0" and url in str(info.value)
    with pytest.raises(StoreCorruptError, match="X/c/1/0"):
        KMPClassifier(n_basis=3, client="sync").fit(open_store(url, storage_options=so))
    fs.rm(f"{root}/y/c/2")
    again = open_store(url, storage_options=so)
    with pytest.raises(StoreCorruptError, match=r"y/c/2 does not exist"):
        again.read_range(160, 240)
    with pytest.raises(StoreCorruptError, match="is missing"):
        again.verify()
    assert store.n_rows == 240


def test_overwrite_on_s3_replaces_only_a_kmp_dask_store(s3, url):
    so = s3.storage_options
    root = url[len("s3://"):]
    fs = s3.fs()
    fs.pipe(f"{root}/notes.txt", b"mine")
    with pytest.raises(ForeignTargetError, match="no zarr.json with the attribute kmp_dask_store"):
        create_store(url, X, Y, overwrite=True, storage_options=so)
    assert fs.cat(f"{root}/notes.txt") == b"mine"
    fs.rm(f"{root}/notes.txt")
    create_store(url, X[:80], Y[:80], storage_options=so)
    fs.pipe(f"{root}/notes.txt", b"mine")  # a store holding a user's object as well
    with pytest.raises(ForeignTargetError, match="also holds notes.txt"):
        create_store(url, X, Y, overwrite=True, storage_options=so)
    fs.rm(f"{root}/notes.txt")
    assert create_store(url, X, Y, overwrite=True, storage_options=so).n_rows == 240


def test_storage_options_are_checked_before_any_work(s3, tmp_path):
    with pytest.raises(TypeError, match="storage_options must be a dict of fsspec options"):
        create_store("s3://b/x.zarr", X, Y, storage_options="endpoint_url=http://h")
    with pytest.raises(ValueError, match="apply to URLs") as info:
        create_store(tmp_path / "x.zarr", X, Y, storage_options={"key": "AKIA", "secret": "s3cr3t"})
    assert "s3cr3t" not in str(info.value) and not (tmp_path / "x.zarr").exists()
    with pytest.raises(FileNotFoundError, match="the bucket 'no-such-bucket-26' does not exist"):
        create_store("s3://no-such-bucket-26/x.zarr", X, Y, storage_options=s3.storage_options)


def test_commands_reach_s3_through_the_aws_environment(s3, bucket, monkeypatch):
    """The CLI has no storage-option flag: s3fs reads AWS_ENDPOINT_URL and the keys (docs/store.md)."""
    for k, v in s3.environ().items():
        monkeypatch.setenv(k, v)
    target = f"s3://{bucket}/cli-{uuid.uuid4().hex[:6]}/train.zarr"
    run = CliRunner().invoke(cli, ["ingest", "synthetic:classification", target, "--n-rows", "300",
                                   "--chunk-rows", "100", "--no-progress"])
    assert run.exit_code == 0, run.output
    info = CliRunner().invoke(cli, ["info", target, "--verify", "--no-progress"])
    assert info.exit_code == 0 and "n_rows=300" in info.output and "intact" in info.output, info.output
    again = CliRunner().invoke(cli, ["ingest", "synthetic:classification", target, "--n-rows", "300"])
    assert again.exit_code == 1 and "pass --overwrite" in again.output, again.output


def _own_csv(path):
    path.write_text("species,a,b,c\n" + "".join(f"{'cat' if r[0] > 0 else 'dog'},{r[0]},{r[1]},{r[2]}\n"
                                                  for r in X[:80]))
    return str(path)


def test_own_csv_with_a_test_split_to_s3(s3, bucket, tmp_path, monkeypatch):
    """ingest --label --test-size writes two stores (two nested temporaries): both published; when the
    second publish fails, neither store nor any temporary is left but the one the error names."""
    for k, v in s3.environ().items():
        monkeypatch.setenv(k, v)
    csv = _own_csv(tmp_path / "own.csv")
    base = f"s3://{bucket}/own-{uuid.uuid4().hex[:6]}"
    run = CliRunner().invoke(cli, ["ingest", csv, f"{base}/train.zarr", "--label", "species", "--test-size", "0.25",
                                   "--no-progress"])
    assert run.exit_code == 0, run.output
    train, test = open_store(f"{base}/train.zarr"), open_store(f"{base}/train-test.zarr")
    assert train.n_rows + test.n_rows == 80 and train.attrs["classes"] == ["cat", "dog"]
    fs = Location.parse(base).fs  # the cached instance the command uses
    real_copy = fs.copy

    def copy(a, b, **kw):
        if isinstance(b, str) and b.endswith("-test.zarr/zarr.json"):
            raise ConnectionError("connection reset")
        return real_copy(a, b, **kw)

    monkeypatch.setattr(fs, "copy", copy)
    other = f"s3://{bucket}/own-{uuid.uuid4().hex[:6]}"
    cut = CliRunner().invoke(cli, ["ingest", csv, f"{other}/train.zarr", "--label", "species", "--test-size", "0.25",
                                   "--no-progress"])
    monkeypatch.undo()
    for k, v in s3.environ().items():
        monkeypatch.setenv(k, v)
    assert cut.exit_code == 1 and "connection reset" in cut.output and "is kept at" in cut.output, cut.output
    left = s3.fs().ls(other[len("s3://"):], detail=False)
    assert len(left) == 1 and "train-test.zarr.tmp-" in left[0], left  # the complete test store, named
    assert left[0] in cut.output


@pytest.mark.slow
def test_cli_train_predict_evaluate_on_s3_on_a_process_cluster_same_as_local(s3, bucket, tmp_path):
    """Worker processes read s3:// with credentials from the environment; the models trained on the
    store on the server and on its local copy are the same, and so are the predictions and scores."""
    env = dict(os.environ, **s3.environ())
    remote = f"s3://{bucket}/slow-{uuid.uuid4().hex[:6]}/train.zarr"
    local = str(tmp_path / "train.zarr")

    def kmp(*args):
        out = subprocess.run([sys.executable, "-c", "from kmp_dask.cli import main; main()", *args], env=env,
                             capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    for target in (remote, local):
        kmp("ingest", "synthetic:classification", target, "--n-rows", "600", "--chunk-rows", "200")
    scores = {}
    for name, store in (("r", remote), ("l", local)):
        kmp("train", store, "--model", str(tmp_path / f"{name}.model"), "--n-basis", "5", "--random-state", "0")
        kmp("predict", str(tmp_path / f"{name}.model"), store, "--output", str(tmp_path / f"{name}-pred.zarr"))
        scores[name] = kmp("evaluate", str(tmp_path / f"{name}.model"), store).splitlines()[0]
    assert scores["r"] == scores["l"] and "accuracy" in scores["r"], scores
    from kmp_dask import load

    a, b = load(tmp_path / "r.model"), load(tmp_path / "l.model")
    assert np.array_equal(a.expansion_.coef, b.expansion_.coef)
    pa, pb = open_store(tmp_path / "r-pred.zarr"), open_store(tmp_path / "l-pred.zarr")
    assert np.array_equal(pa.read_range(0, 600)[1], pb.read_range(0, 600)[1])


def test_a_prefix_without_its_root_zarr_json_is_not_a_store(s3, url):
    """What a reader meets while a store is being published (root zarr.json not yet copied)."""
    from kmp_dask.exceptions import StoreSchemaError

    so = s3.storage_options
    create_store(url, X, Y, chunk_rows=80, storage_options=so)
    s3.fs().rm(f"{url[len('s3://'):]}/zarr.json")
    with pytest.raises(StoreSchemaError, match="not a readable zarr group"):
        open_store(url, storage_options=so)
    with pytest.raises(ForeignTargetError, match="no zarr.json with the attribute kmp_dask_store"):
        create_store(url, X, Y, overwrite=True, storage_options=so)


def test_without_s3fs_a_command_says_what_to_install(monkeypatch):
    """One Error line (not an ImportError traceback) when s3fs is missing."""
    reg = importlib.import_module("fsspec.registry")  # fsspec.registry is also a mapping attribute

    monkeypatch.delitem(reg._registry, "s3", raising=False)
    monkeypatch.setitem(reg.known_implementations, "s3", {"class": "kmp_no_such_module.S3FileSystem",
                                                          "err": "Install s3fs to access S3"})
    run = CliRunner().invoke(cli, ["info", "s3://bucket/x.zarr"])
    assert run.exit_code == 1 and isinstance(run.exception, SystemExit), run.output
    assert [line for line in run.output.splitlines() if line.startswith("Error:")] == [
        line for line in run.output.splitlines() if line.strip()]
    assert "pip install 'kmp_dask[s3]'" in run.output and "Traceback" not in run.output


@pytest.mark.filterwarnings("always::kmp_dask.exceptions.IgnoredColumnsWarning")  # the label column, at predict
def test_predict_and_evaluate_a_csv_on_s3_as_the_local_file(s3, bucket, tmp_path, monkeypatch):
    """predict / evaluate read a CSV at an s3:// URL with the ingest's reader, no store written."""
    import fsspec
    import pandas as pd

    from kmp_dask import KMPClassifier, save

    for k, v in s3.environ().items():
        monkeypatch.setenv(k, v)
    csv = _own_csv(tmp_path / "own.csv")
    model = KMPClassifier(n_basis=5, gamma=0.5, client="sync", random_state=0)
    model.fit(pd.read_csv(csv)[["a", "b", "c"]], pd.read_csv(csv)["species"])
    save(model, tmp_path / "m.kmp")
    remote = f"s3://{bucket}/new-{uuid.uuid4().hex[:6]}/own.csv"
    fsspec.filesystem("s3", **s3.storage_options).put(csv, remote)
    outs = {}
    for name, src in (("local", csv), ("remote", remote)):
        run = CliRunner().invoke(cli, ["predict", str(tmp_path / "m.kmp"), src,
                                       "--output", str(tmp_path / f"{name}.csv"), "--scheduler", "sync"])
        assert run.exit_code == 0, run.output
        outs[name] = pd.read_csv(tmp_path / f"{name}.csv")
        run = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "m.kmp"), src, "--label", "species", "--json",
                                       "--scheduler", "sync"])
        assert run.exit_code == 0, run.output
        outs[name + "-metrics"] = json.loads(run.output[run.output.index("{"):])["accuracy"]
    pd.testing.assert_frame_equal(outs["remote"], outs["local"])
    assert outs["remote"]["prediction"].tolist() == model.predict(pd.read_csv(csv)[["a", "b", "c"]]).tolist()
    assert outs["remote-metrics"] == outs["local-metrics"] > 0.8


def test_parquet_on_s3_ingests_predicts_and_evaluates_as_the_local_file(s3, bucket, tmp_path, monkeypatch):
    """A Parquet file at an s3:// URL: ``ingest`` makes the store the local file makes (arrays, class
    names, column names), a model trained on it scores the remote file with ``predict`` (columns
    shuffled, no label column) and ``evaluate --label`` as the local file and the ingested store."""
    pytest.importorskip("pyarrow")
    import fsspec
    import pandas as pd

    from kmp_dask import load

    for k, v in s3.environ().items():
        monkeypatch.setenv(k, v)
    frame = pd.read_csv(_own_csv(tmp_path / "own.csv"))
    frame.to_parquet(tmp_path / "own.parquet", index=False)
    frame[["c", "a", "b"]].to_parquet(tmp_path / "new.parquet", index=False)  # unlabelled, shuffled columns
    base = f"s3://{bucket}/pq-{uuid.uuid4().hex[:6]}"
    fs = fsspec.filesystem("s3", **s3.storage_options)
    for name in ("own.parquet", "new.parquet"):
        fs.put(str(tmp_path / name), f"{base}/{name}")

    def run(*args):
        out = CliRunner().invoke(cli, [str(a) for a in args])
        assert out.exit_code == 0, out.output
        return out.output

    for where, src in (("local", tmp_path / "own.parquet"), ("remote", f"{base}/own.parquet")):
        run("ingest", src, tmp_path / f"{where}.zarr", "--label", "species", "--no-progress")
    local, remote = open_store(tmp_path / "local.zarr"), open_store(tmp_path / "remote.zarr")
    for a, b in zip(local.read_range(0, local.n_rows), remote.read_range(0, remote.n_rows), strict=True):
        np.testing.assert_array_equal(a, b)
    assert remote.attrs["classes"] == local.attrs["classes"] == ["cat", "dog"]
    assert remote.attrs["feature_names"] == local.attrs["feature_names"] == ["a", "b", "c"]
    run("train", tmp_path / "remote.zarr", "--model", tmp_path / "m.kmp", "--n-basis", "5", "--gamma", "0.5",
        "--scheduler", "sync", "--quiet")
    model = load(tmp_path / "m.kmp")
    outs = {}
    for where, src in (("local", tmp_path / "new.parquet"), ("remote", f"{base}/new.parquet"),
                       ("store", tmp_path / "local.zarr")):
        run("predict", tmp_path / "m.kmp", src, "--output", tmp_path / f"{where}.csv", "--scheduler", "sync",
            "--quiet")
        outs[where] = pd.read_csv(tmp_path / f"{where}.csv")
    pd.testing.assert_frame_equal(outs["remote"], outs["local"])
    pd.testing.assert_frame_equal(outs["remote"], outs["store"])
    assert outs["remote"]["prediction"].tolist() == model.predict(frame[["a", "b", "c"]]).tolist()
    acc = {}
    for where, src, label in (("remote", f"{base}/own.parquet", ["--label", "species"]),
                              ("store", tmp_path / "local.zarr", [])):
        text = run("evaluate", tmp_path / "m.kmp", src, *label, "--json", "--scheduler", "sync")
        acc[where] = json.loads(text[text.index("{"):])["accuracy"]
    assert acc["remote"] == acc["store"] == pytest.approx(float(np.mean(model.predict(frame[["a", "b", "c"]])
                                                                        == frame["species"])))
