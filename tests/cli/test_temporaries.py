"""What killed writes leave behind is found and removed; outputs that cannot be written are refused
before any work; one checkpoint directory, one writer.

* a killed ``predict --output`` leaves its locked temporary ``.NAME.tmp-<pid>-<hex>``: the next write of
  that path removes it, and so does ``kmp-dask info NAME --clean`` (listing it); one still being
  written is kept;
* a killed ingest's temporary is removed by the next ingest even when the kill came before the sink
  wrote anything, and even while the killed process is a zombie nobody reaped;
* a name of 255 bytes (the usual limit) works for a file and a store output; 256 bytes, a dangling
  symbolic link or a directory as ``--output`` is one ``Error:`` line before any work;
* a second fit on a checkpoint directory in use is one line (the first holds its lock until it ends).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask import KMPClassifier, save
from kmp_dask.cli import main
from kmp_dask.evaluation import predict_to_file
from kmp_dask.store import ZarrStore, create_store
from kmp_dask.store._ingest import INGEST_MARKER, ingest_temporaries

pytestmark = pytest.mark.timeout(300)

RNG = np.random.default_rng(1)
X = RNG.normal(size=(200, 3))
Y = (X[:, 0] > 0).astype(int)


@pytest.fixture
def ws(tmp_path):
    create_store(tmp_path / "d.zarr", X, Y, chunk_rows=50, classes=["a", "b"])
    save(KMPClassifier(n_basis=4, random_state=0).fit(X, Y), tmp_path / "m.model")
    return tmp_path


def _wait_for(pred, proc, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not pred():
        assert proc.poll() is None, f"the writer ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def _stuck_predict(ws) -> subprocess.Popen:
    """``predict_to_file`` to ws/out.csv in another process, stuck after its first rows are written."""
    code = ("import time, kmp_dask.evaluation as ev\n"
            "real = ev._WRITERS['csv']\n"
            "def stuck(tmp, *a, **k):\n    open(tmp, 'w').write('row,prediction\\n0,a\\n'); time.sleep(600)\n"
            "ev._WRITERS['csv'] = stuck\n"
            f"ev.predict_to_file(__import__('kmp_dask').load({str(ws / 'm.model')!r}), {str(ws / 'd.zarr')!r}, "
            f"{str(ws / 'out.csv')!r})\n")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _temporaries(ws, name="out.csv"):
    return sorted(p.name for p in ws.iterdir() if p.name.startswith(f".{name}.tmp-"))


def _kill(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def test_a_killed_predict_leaves_a_temporary_info_clean_lists_and_removes(ws):
    proc = _stuck_predict(ws)
    try:
        _wait_for(lambda: _temporaries(ws), proc, "a temporary")
        kept = CliRunner().invoke(main, ["info", str(ws / "out.csv"), "--clean"])
        assert kept.exit_code == 0 and "0 temporaries" in kept.output, kept.output  # still being written: kept
        assert _temporaries(ws)
    finally:
        _kill(proc)
    (tmp,) = _temporaries(ws)
    res = CliRunner().invoke(main, ["info", str(ws / "out.csv"), "--clean"])
    assert res.exit_code == 0, res.output
    assert f"removed {ws / tmp}" in res.output and "has ended" in res.output and "1 temporary" in res.output
    assert _temporaries(ws) == [] and not (ws / "out.csv").exists()


@pytest.mark.slow  # the same removal (remove_stale) as `info --clean` above, called by the next write
def test_the_next_predict_removes_a_killed_predicts_temporary(ws):
    proc = _stuck_predict(ws)
    try:
        _wait_for(lambda: _temporaries(ws), proc, "a temporary")
    finally:
        _kill(proc)
    assert _temporaries(ws)
    from kmp_dask import load

    predict_to_file(load(ws / "m.model"), ws / "d.zarr", ws / "out.csv")
    assert _temporaries(ws) == [] and (ws / "out.csv").read_text().startswith("row,prediction\n0,")


def _slow_ingest(target: Path, patch: str) -> subprocess.Popen:
    code = ("import time, numpy as np, kmp_dask.store._ingest as ing\n" + patch +
            f"ing.create_store({str(target)!r}, np.ones((100, 2)), chunk_rows=10)\n")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_an_ingest_killed_right_after_creating_its_sink_leaves_a_removable_temporary(tmp_path):
    patch = ("init = ing.ZarrSink.__init__\n"
             "def slow(self, *a, **k):\n    init(self, *a, **k); time.sleep(600)\n"
             "ing.ZarrSink.__init__ = slow\n")
    proc = _slow_ingest(tmp_path / "k.zarr", patch)
    try:
        _wait_for(lambda: list(tmp_path.glob("k.zarr.tmp-*/X/zarr.json")), proc, "the sink's arrays")
    finally:
        _kill(proc)
    (t,) = ingest_temporaries(tmp_path / "k.zarr")
    assert t.stale, t.why  # the marker was written before the sink: recognisably ours, and its writer is gone
    create_store(tmp_path / "k.zarr", X, Y)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.zarr"]


def test_a_killed_ingests_zombie_counts_as_dead(tmp_path):
    patch = ("write = ing.ZarrSink.write\n"
             "def slow(self, *a, **k):\n    write(self, *a, **k); time.sleep(600)\n"
             "ing.ZarrSink.write = slow\n")
    proc = _slow_ingest(tmp_path / "z.zarr", patch)
    try:
        _wait_for(lambda: list(tmp_path.glob(f"z.zarr.tmp-*/{INGEST_MARKER}")), proc, "the marker")
        os.kill(proc.pid, signal.SIGKILL)  # not reaped: the process stays a zombie (state Z) until wait()
        deadline = time.monotonic() + 60
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (t,) = ingest_temporaries(tmp_path / "z.zarr")
        assert t.stale and "has ended" in t.why, t.why
    finally:
        proc.wait(timeout=60)


def test_names_of_255_bytes_work_for_files_and_stores(ws):
    from kmp_dask import load

    model = load(ws / "m.model")
    name = "p" * 251 + ".csv"
    out = predict_to_file(model, ws / "d.zarr", ws / name)
    assert out["n_rows"] == 200 and (ws / name).is_file()
    store = "s" * 250 + ".zarr"
    assert create_store(ws / store, X, Y).n_rows == 200 and ZarrStore(ws / store).n_rows == 200
    res = CliRunner().invoke(main, ["predict", str(ws / "m.model"), str(ws / "d.zarr"), "--output",
                                    str(ws / ("q" * 250 + ".zarr"))])
    assert res.exit_code == 0, res.output
    assert not [p for p in ws.iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("case", ["256-bytes", "dangling-link", "directory", "directory-overwrite", "store-256"])
def test_an_output_that_cannot_be_written_is_one_line_before_any_work(ws, case, no_cluster, monkeypatch):
    import kmp_dask.evaluation as ev

    def no_work(*a, **k):
        raise AssertionError("the prediction pass ran")

    monkeypatch.setattr(ev, "predict_to_file", no_work)
    out, extra, words = {
        "256-bytes": (ws / ("n" * 252 + ".csv"), [], ("256 bytes long", "at most 255", "shorter name")),
        "dangling-link": (ws / "link.csv", [], ("symbolic link", "does not exist", "remove the link")),
        "directory": (ws / "dir.csv", [], ("is a directory",)),
        "directory-overwrite": (ws / "dir.csv", ["--overwrite"], ("is a directory",)),
        "store-256": (ws / ("n" * 251 + ".zarr"), [], ("256 bytes long",)),
    }[case]
    (ws / "link.csv").symlink_to(ws / "nowhere" / "x.csv")
    (ws / "dir.csv").mkdir()
    res = CliRunner().invoke(main, ["predict", str(ws / "m.model"), str(ws / "d.zarr"), "--output", str(out), *extra])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: --output "), res.output
    assert all(w in lines[0] for w in words), lines[0]


def test_a_second_fit_on_a_checkpoint_directory_in_use_is_one_line(ws):
    code = ("import time, kmp_dask.greedy._checkpoint as C, kmp_dask.store as S\n"
            f"c = C.open_checkpoint({str(ws / 'ck')!r}, estimator='KMPClassifier', params={{}}, "
            f"store=S.open_store({str(ws / 'd.zarr')!r}))\n"
            "print('locked', flush=True); time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    args = ["train", str(ws / "d.zarr"), "--model", str(ws / "t.model"), "--n-basis", "3", "--checkpoint",
            str(ws / "ck"), "--quiet"]
    try:
        assert holder.stdout.readline().strip() == "locked"
        res = CliRunner().invoke(main, args)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
        assert "is in use by another fit" in lines[0] and str(ws / "ck") in lines[0], lines[0]
        assert not (ws / "t.model").exists()
    finally:
        _kill(holder)
    res = CliRunner().invoke(main, args)  # the lock went with the killed process
    assert res.exit_code == 0, res.output
