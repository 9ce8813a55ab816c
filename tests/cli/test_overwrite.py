"""Overwrite: what --overwrite replaces (only kmp_dask's own outputs), what a pipeline
writes (only inside its run directory), and the temporaries of killed ingests. The refusals are rows
of the failure catalogue (tests/_catalogue_overwrite.py); here: that the things kmp_dask wrote *are*
replaced, what is on disk before and after, and the cases rows cannot express (a killed process,
the current directory as a run directory)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask import KMPClassifier, load, save
from kmp_dask._overwrite import RUN_MARKER, ForeignTargetError, check_replaceable, kind_of
from kmp_dask.cli import main as cli
from kmp_dask.exceptions import StoreExistsError
from kmp_dask.pipeline._runner import RunDirectory
from kmp_dask.pipeline._steps import make_store
from kmp_dask.report import write_report
from kmp_dask.store import create_store, open_store
from kmp_dask.store._ingest import INGEST_MARKER, clean_stale_temporaries, ingest_temporaries

RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 2))
Y = (X[:, 0] > 0).astype(int)


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else None, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def test_overwrite_replaces_what_kmp_dask_wrote(tmp_path):
    st = create_store(tmp_path / "s.zarr", X, Y)
    create_store(tmp_path / "s.zarr", X[:10], Y[:10], overwrite=True)
    assert open_store(tmp_path / "s.zarr").n_rows == 10 and kind_of(st.url) == "store"
    m = KMPClassifier(n_basis=2).fit(X, Y)
    save(m, tmp_path / "m.model")
    save(KMPClassifier(n_basis=3).fit(X, Y), tmp_path / "m.model", overwrite=True)
    assert load(tmp_path / "m.model").n_basis_ == 3 and kind_of(tmp_path / "m.model") == "model"
    write_report([("m", m)], tmp_path / "r.html")
    write_report([("m", m)], tmp_path / "r.html", overwrite=True)
    assert kind_of(tmp_path / "r.html") == "report"
    (tmp_path / "empty").mkdir()  # an empty directory: nothing to lose
    create_store(tmp_path / "empty", X, overwrite=True)
    assert kind_of(tmp_path / "empty") == "store"


def test_a_store_is_not_a_model_and_a_model_is_not_a_store(tmp_path):
    create_store(tmp_path / "s.zarr", X, Y)
    save(KMPClassifier(n_basis=2).fit(X, Y), tmp_path / "m.model")
    before = _tree(tmp_path)
    with pytest.raises(ForeignTargetError, match="not a kmp_dask model"):
        save(KMPClassifier(n_basis=2).fit(X, Y), tmp_path / "s.zarr", overwrite=True)
    with pytest.raises(ForeignTargetError, match="not a kmp_dask store"):
        create_store(tmp_path / "m.model", X, overwrite=True)
    assert _tree(tmp_path) == before


def test_the_cli_replaces_its_own_model_and_store(tmp_path):
    """train --overwrite over a model it wrote, ingest --overwrite over a store it wrote."""
    r = CliRunner().invoke(cli, ["ingest", "sklearn:iris", str(tmp_path / "i.zarr")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["ingest", "sklearn:wine", str(tmp_path / "i.zarr"), "--overwrite"])
    assert r.exit_code == 0, r.output
    assert open_store(tmp_path / "i.zarr").n_rows == 178


def test_run_directory_overwrite_clears_only_a_run(tmp_path):
    run = RunDirectory(tmp_path / "run", overwrite=False, resume=False)
    assert (run.root / RUN_MARKER).is_file() and (run.root / "steps").is_dir()
    (run.root / "summary.json").write_text("{}")
    create_store(run.path("data", "train.zarr"), X, Y)
    # a file the user put there: the directory is no longer only a run's, overwrite refuses
    (run.root / "mine.txt").write_text("keep me")
    before = _tree(tmp_path)
    with pytest.raises(ForeignTargetError, match=r"also holds mine\.txt"):
        RunDirectory(tmp_path / "run", overwrite=True, resume=False)
    assert _tree(tmp_path) == before
    (run.root / "mine.txt").unlink()
    again = RunDirectory(tmp_path / "run", overwrite=True, resume=False)
    assert sorted(os.listdir(again.root)) == [RUN_MARKER, "steps"]


def test_the_current_directory_as_a_run_directory(tmp_path, monkeypatch):
    """``output = "."`` replaces a run that is the current directory (its entries, not the
    directory); the current directory holding anything else is refused, nothing deleted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ForeignTargetError, match="not a kmp_dask run directory"):
        RunDirectory(".", overwrite=True, resume=False)
    assert os.listdir(tmp_path) == ["notes.txt"]
    (tmp_path / "notes.txt").unlink()
    RunDirectory(".", overwrite=True, resume=False)  # an empty current directory: nothing to lose
    (tmp_path / "summary.json").write_text("{}")
    RunDirectory(".", overwrite=True, resume=False)
    assert sorted(os.listdir(tmp_path)) == [RUN_MARKER, "steps"] and Path.cwd() == tmp_path
    sub = tmp_path / "steps"
    monkeypatch.chdir(sub)  # a directory containing the current one is never replaced
    with pytest.raises(ForeignTargetError, match="current directory or contains it"):
        check_replaceable(tmp_path, ("run",), option="output directory")


def test_run_paths_stay_inside(tmp_path):
    run = RunDirectory(tmp_path / "run", overwrite=False, resume=False)
    for parts in (("data", "../../x.zarr"), ("/abs/x",), ("..",)):
        with pytest.raises(ValueError, match="outside the run directory"):
            run.path(*parts)
    assert run.path("data", "train.zarr") == tmp_path / "run" / "data" / "train.zarr"


def test_make_store_never_replaces_an_existing_store(tmp_path):
    target = tmp_path / "train.zarr"
    create_store(target, X, Y)
    before = _tree(tmp_path)
    d = {"source": "synthetic:classification", "n_rows": 50, "n_features": 2}
    with pytest.raises(StoreExistsError, match="already exists"):
        make_store(d, target, None)
    assert _tree(tmp_path) == before
    assert make_store(d, target, None, overwrite=True).n_rows == 50  # the runner's resume


# --- temporaries of killed ingests ----------------------------------------------------------------
def _fake_temporary(parent: Path, name: str, marker: dict | None) -> Path:
    p = parent / f"{name}.tmp-{os.urandom(16).hex()}"
    p.mkdir()
    (p / "zarr.json").write_text("{}")
    if marker is not None:
        (p / INGEST_MARKER).write_text(json.dumps(marker))
    return p


def test_stale_temporaries_are_removed_only_when_their_writer_is_gone(tmp_path):
    import socket

    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    stale = _fake_temporary(tmp_path, "t.zarr", {"host": host, "pid": dead_pid, "started": time.time()})
    live = _fake_temporary(tmp_path, "t.zarr", {"host": host, "pid": os.getpid(), "started": time.time()})
    unmarked = _fake_temporary(tmp_path, "t.zarr", None)
    far_old = _fake_temporary(tmp_path, "t.zarr", {"host": "elsewhere", "pid": 1, "started": time.time() - 2 * 86400})
    far_new = _fake_temporary(tmp_path, "t.zarr", {"host": "elsewhere", "pid": 1, "started": time.time()})
    other_target = _fake_temporary(tmp_path, "u.zarr", {"host": host, "pid": dead_pid, "started": time.time()})
    found = {Path(t.path): t.stale for t in ingest_temporaries(tmp_path / "t.zarr")}
    assert found == {stale: True, live: False, unmarked: False, far_old: True, far_new: False}
    r = CliRunner().invoke(cli, ["info", str(tmp_path / "t.zarr")])  # no store yet: the error lists them
    assert r.exit_code == 1 and "5 left by ingests" in r.output and "has ended" in r.output, r.output
    create_store(tmp_path / "t.zarr", X, Y)  # the next ingest of that target
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["t.zarr", live.name, unmarked.name, far_new.name, other_target.name])
    r = CliRunner().invoke(cli, ["info", str(tmp_path / "t.zarr")])
    assert r.exit_code == 0 and "temporaries: 3 left by ingests" in r.output and "kept" in r.output, r.output
    assert clean_stale_temporaries(tmp_path / "t.zarr") == []


def test_a_killed_ingest_leaves_a_temporary_the_next_ingest_removes(tmp_path):
    code = ("import time, numpy as np, kmp_dask.store._ingest as ing\n"
            "write = ing.ZarrSink.write\n"
            "def slow(self, *a, **k):\n    write(self, *a, **k); time.sleep(120)\n"
            "ing.ZarrSink.write = slow\n"
            f"ing.create_store({str(tmp_path / 'k.zarr')!r}, np.ones((100, 2)), chunk_rows=10)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not list(tmp_path.glob(f"k.zarr.tmp-*/{INGEST_MARKER}")):
            assert proc.poll() is None and time.monotonic() < deadline, "the ingest did not start writing"
            time.sleep(0.05)
        (temporary,) = ingest_temporaries(tmp_path / "k.zarr")
        assert not temporary.stale and "still running" in temporary.why  # in use: kept
        assert clean_stale_temporaries(tmp_path / "k.zarr") == []
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    (temporary,) = ingest_temporaries(tmp_path / "k.zarr")
    assert temporary.stale and "has ended" in temporary.why
    create_store(tmp_path / "k.zarr", X, Y)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.zarr"]
    assert INGEST_MARKER not in os.listdir(tmp_path / "k.zarr")  # the marker never reaches the store


@pytest.mark.slow
def test_pipeline_overwrite_and_resume_end_to_end(tmp_path, monkeypatch):
    """A whole (small, in-process) pipeline: run (the SVC kept in the open format), refuse a
    planted model.joblib on resume, overwrite in the current directory."""
    import joblib

    from kmp_dask.pipeline import load_spec, run_pipeline

    p = tmp_path / "p.toml"
    p.write_text('name = "t"\n[data.train]\nsource = "synthetic:classification"\nn_rows = 200\nn_features = 3\n'
                 '[model]\nestimator = "SVC"\n[compress]\nn_vectors = 3\n')
    spec = load_spec(p)
    run = tmp_path / "run"
    run_pipeline(spec, run, client=None, log=lambda *_: None)
    assert {"source_model", "compressed", "report.html", RUN_MARKER} <= set(os.listdir(run))
    assert "model.joblib" not in os.listdir(run)
    shutil.rmtree(run / "source_model")
    joblib.dump({"planted": True}, run / "model.joblib")
    for step in ("compress", "report", "summary"):
        (run / "steps" / f"{step}.json").unlink()
    with pytest.raises(FileNotFoundError, match="no longer unpickle anything"):
        run_pipeline(spec, run, client=None, resume=True, log=lambda *_: None)
    monkeypatch.chdir(run)
    summary = run_pipeline(spec, ".", client=None, overwrite=True, log=lambda *_: None)
    assert summary["steps"]["compress"]["n_vectors"] == 3 and Path.cwd() == run
