"""Damaged stores: a corrupt chunk is named (store, array, chunk rows, file) wherever it is read,
and ``ZarrStore.verify`` / ``kmp-dask info --verify`` find the first one. Also: ingest progress
(a callback, or a bar only when asked for or on a terminal)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from kmp_dask.cli import main
from kmp_dask.store import StoreCorruptError, create_store, open_store

N, CHUNK = 1000, 250


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    return create_store(tmp_path / "s.zarr", X, y, chunk_rows=CHUNK, classes=[0, 1])


def _corrupt(store, key="X/c/2/0", data=b"garbage " * 8):
    path = f"{store.url}/{key}"
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def _assert_names_chunk(exc, store, array="X", chunk=2):
    rows = (chunk * CHUNK, (chunk + 1) * CHUNK)
    msg = str(exc)
    assert store.url in msg and f"array {array!r}" in msg
    assert f"chunk {chunk} (rows {rows[0]}..{rows[1] - 1})" in msg
    assert "blosc" in msg  # the underlying codec error is kept
    assert "--verify" in msg and "--overwrite" in msg  # how to check and how to fix
    assert (exc.url, exc.array, exc.chunk, exc.rows) == (store.url, array, chunk, rows)
    assert exc.key == f"{array}/c/{chunk}" + ("/0" if array == "X" else "")


@pytest.mark.parametrize("how", ["read_range", "reader", "read_rows", "to_dask", "verify"])
def test_corrupt_chunk_is_named_by_every_read(store, how):
    _corrupt(store)
    reads = {
        "read_range": lambda: store.read_range(0, N),
        "reader": lambda: pickle.loads(pickle.dumps(store.reader())).read_range(400, 800),
        "read_rows": lambda: store.read_rows([3, 600, 10]),
        "to_dask": lambda: store.to_dask("X").compute(),
        "verify": store.verify,
    }
    with pytest.raises(StoreCorruptError) as info:
        reads[how]()
    _assert_names_chunk(info.value, store)


def test_intact_chunks_still_read_and_error_pickles(store):
    _corrupt(store)
    X, y = store.read_range(0, 2 * CHUNK)  # chunks 0 and 1 are fine
    assert X.shape == (500, 3) and y.shape == (500,)
    assert store.to_dask("X")[:500].compute().shape == (500, 3)
    with pytest.raises(StoreCorruptError) as info:
        store.read_range(0, N)
    again = pickle.loads(pickle.dumps(info.value))  # crosses process boundaries from workers
    assert str(again) == str(info.value) and again.key == "X/c/2/0" and again.rows == (500, 750)


def test_truncated_chunk_of_y(store):
    _corrupt(store, "y/c/3", b"")
    with pytest.raises(StoreCorruptError) as info:
        store.read_range(700, 1000)
    _assert_names_chunk(info.value, store, array="y", chunk=3)


def test_verify_counts_chunks_and_reports_progress(store):
    seen = []
    assert store.verify(callback=lambda done, total: seen.append((done, total))) == 8
    assert seen[-1] == (8, 8) and len(seen) == 8


def test_verify_finds_values_ingest_never_writes(store):
    arr = zarr.open_array(store=store.location.zarr_store(read_only=False), path="X", mode="r+")
    arr[777, 1] = np.nan
    with pytest.raises(StoreCorruptError, match=r"chunk 3 \(rows 750\.\.999\).*non-finite value \(nan\) at row 777"):
        open_store(store.url).verify()


def test_cli_info_verify(store):
    runner = CliRunner()
    ok = runner.invoke(main, ["info", store.url, "--verify", "--no-progress"])
    assert ok.exit_code == 0, ok.output
    assert "all 8 chunks of X and y read back intact" in ok.output
    _corrupt(store)
    plain = runner.invoke(main, ["info", store.url])
    assert plain.exit_code == 0  # without --verify, only metadata is read
    bad = runner.invoke(main, ["info", store.url, "--verify", "--no-progress"])
    assert bad.exit_code == 1
    err_lines = [ln for ln in bad.output.splitlines() if ln.startswith("Error:")]
    assert len(err_lines) == 1 and "Traceback" not in bad.output
    assert "chunk 2 (rows 500..749) of array 'X'" in err_lines[0] and "X/c/2/0" in err_lines[0]


def test_fit_in_process_names_the_corrupt_chunk(store):
    from kmp_dask import KMPClassifier

    _corrupt(store)
    with pytest.raises(StoreCorruptError) as info:
        KMPClassifier(n_basis=3, client="sync").fit(store.url)
    _assert_names_chunk(info.value, store)


def test_fit_on_workers_names_the_corrupt_chunk(store, process_client):
    from kmp_dask import KMPClassifier

    _corrupt(store)
    with pytest.raises(StoreCorruptError) as info:
        KMPClassifier(n_basis=3, client=process_client).fit(store.url)
    _assert_names_chunk(info.value, store)


# --- ingest progress (quiet unless asked for) -------------------------------------------------


def test_ingest_progress_callback(tmp_path):
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(1000, 2)), rng.integers(0, 2, 1000)
    seen = []
    create_store(tmp_path / "p.zarr", X, y, chunk_rows=300, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(300, 1000), (600, 1000), (900, 1000), (1000, 1000)]
    path = tmp_path / "p.csv"
    path.write_text("a,b,c\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(250)))
    seen.clear()
    from kmp_dask.store import store_from_csv

    store_from_csv(tmp_path / "c.zarr", path, chunk_rows=100, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(100, None), (200, None), (250, None)]  # a CSV's length is unknown up front


def test_cli_ingest_progress_bar_only_when_asked(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("a,b,c\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(250)))
    runner = CliRunner()
    quiet = runner.invoke(main, ["ingest", str(path), str(tmp_path / "q.zarr"), "--label", "c", "--chunk-rows", "100"])
    assert quiet.exit_code == 0 and "rows" not in quiet.stderr  # not a terminal: no bar
    shown = runner.invoke(main, ["ingest", str(path), str(tmp_path / "s.zarr"), "--label", "c", "--chunk-rows", "100",
                                  "--progress"])
    assert shown.exit_code == 0, shown.output
    assert "ingest" in shown.stderr and "250" in shown.stderr and "rows" in shown.stderr


def test_corrupt_chunk_on_workers_is_not_logged_as_a_failed_task(store, process_client):
    """The holder reads its partitions when it starts; a corrupt chunk there used to fail the
    actor's constructor, which the worker logs as a failed task with a long escaped traceback.
    The error now comes back from the first call: the fit's message names the chunk, the worker
    logs nothing about it."""
    from kmp_dask import KMPClassifier

    _corrupt(store)
    before = {w: len(log) for w, log in process_client.get_worker_logs().items()}
    with pytest.raises(StoreCorruptError) as info:
        KMPClassifier(n_basis=3, client=process_client).fit(store.url)
    _assert_names_chunk(info.value, store)
    new = [msg for w, log in process_client.get_worker_logs().items() for _, msg in log[: len(log) - before.get(w, 0)]]
    assert not [m for m in new if "Compute Failed" in m or "StoreCorruptError" in m], new
