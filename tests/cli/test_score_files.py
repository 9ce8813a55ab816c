"""Scoring new data as it comes: ``predict`` and ``evaluate`` read any source ``ingest`` reads
(CSV, Parquet, ``.npy`` / ``.npz``, LIBSVM, a store), chunk by chunk and without writing a store,
with the columns matched to the model's by name; ``ingest`` never guesses the label.

The model is trained the way a user does it: a CSV whose label column comes first (string
classes, an id column), ``ingest --label species --drop id --test-size 0.25``, ``train``. The
oracle of every prediction is ``predict`` on the ingested test store (the path that existed
before), and of every metric ``evaluate`` on that store. In process (``--scheduler sync``, the
cluster starters swapped for ones that fail the test) and, for the acceptance files, on a real
``dask scheduler`` with two ``dask worker`` processes.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from kmp_dask import load
from kmp_dask.cli import main
from kmp_dask.store import open_store
from kmp_dask.store._sources import test_rows

from .test_own_files import NAMES, own_frame

pytestmark = [pytest.mark.timeout(600),  # the note on ignored columns is expected here (an error elsewhere)
              pytest.mark.filterwarnings("always::kmp_dask.exceptions.IgnoredColumnsWarning")]

N_ROWS = 1200
SHUFFLED = ["d", "id", "b", "a", "c"]  # no label column, the features in another order, an extra id


def _cli(*args, code=0):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r.output


def _error_line(*args) -> str:
    """The command fails with exactly one line, an ``Error:`` line (no traceback)."""
    out = _cli(*args, code=1)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), out
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """mine.csv (label first) → ingest → train; new.csv / new.parquet: the test rows without the
    label, columns shuffled; test.csv: the test rows with the label, as in the file."""
    root = tmp_path_factory.mktemp("score")
    df = own_frame(N_ROWS, seed=3)
    df.to_csv(root / "mine.csv", index=False)
    _cli("ingest", root / "mine.csv", root / "train.zarr", "--label", "species", "--drop", "id", "--test-size", 0.25,
         "--seed", 1, "--no-progress")
    _cli("train", root / "train.zarr", "--model", root / "m.kmp", "--n-basis", 12, "--gamma", 0.5, "--random-state", 0,
         "--scheduler", "sync", "--quiet")
    test = df[test_rows(0, len(df), 0.25, seed=1)].reset_index(drop=True)
    test.to_csv(root / "test.csv", index=False)
    test[SHUFFLED].to_csv(root / "new.csv", index=False)
    test[SHUFFLED].to_parquet(root / "new.parquet", row_group_size=100)
    _cli("predict", root / "m.kmp", root / "train-test.zarr", "--output", root / "ref.csv", "--scheduler", "sync")
    return root, test


def _same_predictions(path, ref):
    got, want = pd.read_csv(path), pd.read_csv(ref)
    assert len(want) > 200 and set(want["prediction"]) <= set(NAMES)
    pd.testing.assert_frame_equal(got, want)


@pytest.mark.parametrize("name", ["new.csv", "new.parquet"])
def test_predict_a_new_file_without_label_columns_shuffled(trained, tmp_path, no_cluster, name):
    """Acceptance: the same predictions, rows in the file's order, as on the ingested test store;
    the extra id column is ignored and named in one line."""
    root, _ = trained
    out = _cli("predict", root / "m.kmp", root / name, "--output", tmp_path / "pred.csv", "--scheduler", "sync")
    _same_predictions(tmp_path / "pred.csv", root / "ref.csv")
    notes = [ln for ln in out.splitlines() if "ignored" in ln]
    assert len(notes) == 1 and "'id'" in notes[0], out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["new.csv", "new.parquet"])
def test_predict_a_new_file_on_dask_scheduler_and_two_workers(trained, tmp_path, cli_cluster, name):
    """Acceptance, on a real cluster: the file is read here, its blocks sent to the workers."""
    from ._run import run_cli

    root, _ = trained
    run_cli("predict", root / "m.kmp", root / name, "--output", tmp_path / "pred.csv", "--scheduler-file",
            cli_cluster, timeout=600)
    _same_predictions(tmp_path / "pred.csv", root / "ref.csv")
    run_cli("predict", root / "m.kmp", root / name, "--output", tmp_path / "pred.npy", "--scheduler-file",
            cli_cluster, timeout=600)
    assert_array_equal(np.load(tmp_path / "pred.npy"), pd.read_csv(root / "ref.csv")["prediction"].to_numpy(str))


def test_predict_a_labelled_file_ignores_its_label(trained, tmp_path, no_cluster):
    root, _ = trained
    out = _cli("predict", root / "m.kmp", root / "test.csv", "--output", tmp_path / "a.csv", "--scheduler", "sync")
    _same_predictions(tmp_path / "a.csv", root / "ref.csv")
    assert "'species'" in out and "'id'" in out  # listed as ignored
    out = _cli("predict", root / "m.kmp", root / "test.csv", "--label", "species", "--output", tmp_path / "b.csv",
               "--scheduler", "sync")
    _same_predictions(tmp_path / "b.csv", root / "ref.csv")
    assert "'species'" not in out  # named as the label: left out without a word


@pytest.mark.parametrize("suffix", [".npy", ".parquet", ".zarr"])
def test_predict_a_file_to_every_output_format(trained, tmp_path, no_cluster, suffix):
    """The formats of a store's predictions, from a streamed file: .npy written with its header
    last (the rows of a CSV are not known before its end), .zarr by the ingest's writer."""
    root, _ = trained
    ref = pd.read_csv(root / "ref.csv")["prediction"].to_numpy(dtype=object)
    out = tmp_path / f"p{suffix}"
    _cli("predict", root / "m.kmp", root / "new.csv", "--output", out, "--scheduler", "sync")
    if suffix == ".npy":
        got = np.load(out, allow_pickle=False)
        assert got.dtype.kind == "U" and got.shape == ref.shape
    elif suffix == ".parquet":
        got = pd.read_parquet(out)["prediction"].to_numpy(dtype=object)
    else:
        st = open_store(out)
        _, codes = st.read_range(0, st.n_rows)
        got = np.asarray(st.attrs["classes"], dtype=object)[np.asarray(codes)]
    assert_array_equal(got.astype(object), ref)


def test_predict_a_file_in_small_blocks_keeps_row_order(trained, tmp_path):
    """Several parts of several blocks each: the rows come out in the file's order."""
    from kmp_dask.evaluation import predict_to_file
    from kmp_dask.store._scoring import open_scoring

    root, test = trained
    model = load(root / "m.kmp")
    data = open_scoring(root / "new.csv", fitted_names=model.feature_names_in_)
    import dataclasses

    plan = data.plan
    small = dataclasses.replace(plan, blocks=lambda: ((X[a:a + 7], None) for X, _ in plan.blocks()
                                                      for a in range(0, len(X), 7)))
    predict_to_file(model, dataclasses.replace(data, plan=small), tmp_path / "p.csv", client="sync", batch=3)
    _same_predictions(tmp_path / "p.csv", root / "ref.csv")


def test_evaluate_a_file_with_its_label_column(trained, no_cluster):
    """Acceptance: ``evaluate MODEL test.csv --label species`` = the ingested test store's metrics."""
    root, _ = trained
    ref = json.loads(_json(_cli("evaluate", root / "m.kmp", root / "train-test.zarr", "--json", "--scheduler", "sync")))
    got = json.loads(_json(_cli("evaluate", root / "m.kmp", root / "test.csv", "--label", "species", "--json",
                                "--scheduler", "sync")))
    for key in ("accuracy", "confusion", "per_class", "n_rows", "classes"):
        assert got[key] == ref[key], key
    assert ref["accuracy"] > 0.7


def _json(out: str) -> str:
    return out[out.index("{"):]


def test_evaluate_a_file_without_label_says_which_option(trained, no_cluster):
    root, _ = trained
    line = _error_line("evaluate", root / "m.kmp", root / "test.csv", "--scheduler", "sync")
    assert "--label COL" in line and "test.csv" in line


def test_missing_column_is_named_in_one_line(trained, tmp_path, no_cluster):
    root, test = trained
    test[["a", "b", "id"]].to_csv(tmp_path / "short.csv", index=False)
    line = _error_line("predict", root / "m.kmp", tmp_path / "short.csv", "--output", tmp_path / "p.csv",
                       "--scheduler", "sync")
    assert "'c'" in line and "'d'" in line and "lacks 2" in line
    assert not (tmp_path / "p.csv").exists()


def test_ingest_no_label_makes_a_store_predict_scores(trained, tmp_path, no_cluster):
    root, _ = trained
    _cli("ingest", root / "new.csv", tmp_path / "new.zarr", "--no-label", "--no-progress")
    st = open_store(tmp_path / "new.zarr")
    assert not st.has_y and st.attrs["feature_names"] == SHUFFLED
    _cli("predict", root / "m.kmp", tmp_path / "new.zarr", "--output", tmp_path / "p.csv", "--scheduler", "sync")
    _same_predictions(tmp_path / "p.csv", root / "ref.csv")
    line = _error_line("evaluate", root / "m.kmp", tmp_path / "new.zarr", "--scheduler", "sync")
    assert "no labels" in line


@pytest.mark.parametrize("name", ["mine.csv", "mine.parquet"])
def test_ingest_without_label_or_no_label_is_refused_listing_the_columns(trained, tmp_path, name):
    """The label is never guessed: before, the last column ('d') became y without a word."""
    root, _ = trained
    if name.endswith(".parquet"):
        pd.read_csv(root / "mine.csv").to_parquet(root / name)
    line = _error_line("ingest", root / name, tmp_path / "x.zarr")
    assert "--label COL" in line and "--no-label" in line and "'species'" in line and "'d'" in line
    assert not (tmp_path / "x.zarr").exists()
    out = _cli("ingest", root / name, tmp_path / "x.zarr", "--label", "species", "--no-label", code=2)
    assert "exclude each other" in out


def test_store_with_columns_in_another_order_is_matched_by_name(trained, tmp_path, no_cluster):
    """A store (not only a file) whose columns carry names in another order scores the same."""
    root, test = trained
    _cli("ingest", root / "test.csv", tmp_path / "t.zarr", "--label", "species", "--drop", "id", "--no-progress")
    test[["species", "d", "c", "b", "a"]].to_csv(tmp_path / "rev.csv", index=False)
    _cli("ingest", tmp_path / "rev.csv", tmp_path / "rev.zarr", "--label", "species", "--no-progress")
    _cli("predict", root / "m.kmp", tmp_path / "rev.zarr", "--output", tmp_path / "p.csv", "--scheduler", "sync")
    _same_predictions(tmp_path / "p.csv", root / "ref.csv")
    a = json.loads(_json(_cli("evaluate", root / "m.kmp", tmp_path / "rev.zarr", "--json", "--scheduler", "sync")))
    b = json.loads(_json(_cli("evaluate", root / "m.kmp", root / "train-test.zarr", "--json", "--scheduler", "sync")))
    assert a["accuracy"] == b["accuracy"] and a["confusion"] == b["confusion"]


def test_positional_sources_npy_npz_libsvm(trained, tmp_path, no_cluster):
    """Sources without column names are read by position: .npy, .npz (with y: evaluate too), LIBSVM."""
    from sklearn.datasets import dump_svmlight_file

    root, test = trained
    X = test[["a", "b", "c", "d"]].to_numpy()
    codes = np.searchsorted(NAMES, test["species"].to_numpy())
    np.save(tmp_path / "x.npy", X)
    np.savez(tmp_path / "xy.npz", X=X, y=codes)
    for src in ("x.npy", "xy.npz"):
        _cli("predict", root / "m.kmp", tmp_path / src, "--output", tmp_path / f"{src}.csv", "--scheduler", "sync")
        _same_predictions(tmp_path / f"{src}.csv", root / "ref.csv")
    model = load(root / "m.kmp")
    assert list(model.classes_) == NAMES
    dump_svmlight_file(X, codes, str(tmp_path / "x.libsvm"), zero_based=False)
    _cli("predict", root / "m.kmp", tmp_path / "x.libsvm", "--output", tmp_path / "l.csv", "--scheduler", "sync")
    got = pd.read_csv(tmp_path / "l.csv")["prediction"].to_numpy(dtype=object)
    assert_array_equal(got, model.predict(X))
    np.save(tmp_path / "x3.npy", X[:, :3])
    line = _error_line("predict", root / "m.kmp", tmp_path / "x3.npy", "--output", tmp_path / "e.csv",
                       "--scheduler", "sync")
    assert "has 3 features" in line and "fitted on 4" in line
