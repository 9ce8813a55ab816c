"""``--resume`` on a store whose chunks changed in place is refused (one line), wherever the change is:
the checkpoint's data fingerprint lists every file of the store (size and modification time, or the
object's ETag), not only the first and last chunk and the summary attributes."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from kmp_dask.cli import main
from kmp_dask.greedy._checkpoint import data_fingerprint, open_checkpoint
from kmp_dask.store import ZarrStore, create_store

RNG = np.random.default_rng(3)
X = RNG.normal(size=(300, 4))
Y = (X[:, 0] + X[:, 1] > 0).astype(int)


def _change_middle_chunk(path):
    """Rewrite chunk 1 of 3 of X in place (other values, same shape); attributes and the first and last
    chunk are untouched, as another tool writing into the store would leave them."""
    arr = zarr.open_array(store=str(path / "X"), mode="r+")
    arr[100:200] = arr[100:200][::-1]
    os.utime(path / "X" / "c" / "1" / "0", ns=(0, 10**18))  # a modification time unlike the old one, whatever the clock


@pytest.fixture
def store(tmp_path):
    create_store(tmp_path / "d.zarr", X, Y, chunk_rows=100, classes=["a", "b"])
    return tmp_path / "d.zarr"


def test_the_fingerprint_sees_a_middle_chunk_changed_in_place(store):
    before = data_fingerprint(ZarrStore(store))
    _change_middle_chunk(store)
    after = data_fingerprint(ZarrStore(store))
    assert after["rows_sha256"] == before["rows_sha256"]  # the first / last chunks: what it read before
    assert after["summary_sha256"] == before["summary_sha256"]
    assert after["files"] != before["files"]


def test_resume_on_a_changed_store_is_refused(store, tmp_path):
    params = {"n_basis": 3}
    ckpt = open_checkpoint(tmp_path / "ck", estimator="KMPClassifier", params=params, store=ZarrStore(store))
    ckpt.save_payload({"x": 1})
    _change_middle_chunk(store)
    with pytest.raises(ValueError, match="chunk files changed since the checkpoint was written") as info:
        open_checkpoint(tmp_path / "ck", resume=True, estimator="KMPClassifier", params=params, store=ZarrStore(store))
    assert "\n" not in str(info.value)


def test_resume_is_refused_when_the_store_cannot_list_its_files(store, tmp_path, monkeypatch):
    params = {"n_basis": 3}
    open_checkpoint(tmp_path / "ck", estimator="KMPClassifier", params=params, store=ZarrStore(store)).save_payload({})
    monkeypatch.setattr(ZarrStore, "file_manifest", lambda self: None)  # e.g. no mtime, no ETag reported
    with pytest.raises(ValueError, match="cannot be resumed safely: the store has no listing"):
        open_checkpoint(tmp_path / "ck", resume=True, estimator="KMPClassifier", params=params, store=ZarrStore(store))


def test_an_unchanged_store_resumes(store, tmp_path):
    params = {"n_basis": 3}
    open_checkpoint(tmp_path / "ck", estimator="KMPClassifier", params=params, store=ZarrStore(store)).save_payload(
        {"x": 1})
    ZarrStore(store).read_range(0, 300)  # reading changes nothing
    got = open_checkpoint(tmp_path / "ck", resume=True, estimator="KMPClassifier", params=params,
                          store=ZarrStore(store))
    assert got.restore_payload() == {"x": 1}


def test_cli_resume_on_a_store_changed_in_place_is_one_error_line(store, tmp_path):
    args = ["train", str(store), "--n-basis", "4", "--gamma", "0.5", "--random-state", "0", "--checkpoint",
            str(tmp_path / "ck"), "--quiet"]
    first = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "a.kmp")])
    assert first.exit_code == 0, first.output
    _change_middle_chunk(store)
    res = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "b.kmp"), "--resume"])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "chunk files changed since the checkpoint was written" in lines[0]
    assert not (tmp_path / "b.kmp").exists()


def test_on_s3_the_listing_carries_etags_and_sees_a_middle_chunk_rewritten(tmp_path):
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _s3_server import s3_server

    s3 = s3_server()
    url = f"s3://{s3.new_bucket('kmp-fingerprint')}/d.zarr"
    store = create_store(url, X, Y, chunk_rows=100, storage_options=s3.storage_options)
    listing = store.file_manifest()
    assert listing and all(len(v.strip('"')) == 32 for _, _, v in listing)  # every object's ETag (an MD5)
    before = data_fingerprint(store)
    arr = zarr.open_array(store=store.location.zarr_store(read_only=False), path="X", mode="r+")
    arr[100:200] = arr[100:200][::-1]
    after = data_fingerprint(ZarrStore(url, storage_options=s3.storage_options))
    assert after["rows_sha256"] == before["rows_sha256"] and after["files"] != before["files"]
