"""Failure catalogue rows of area "sources": a user's own CSV/TSV/Parquet files through
``kmp-dask ingest`` / :func:`kmp_dask.store.ingest`, and pipeline sources checked before any
cluster starts or the run directory is made (every ``run`` row names ``--output`` inside the
workspace, so a directory made by mistake would show in the on-disk check)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _catalogue import Case, Command

from kmp_dask.exceptions import DataValidationError
from kmp_dask.store import ingest, store_from_csv, store_from_parquet


def WORKSPACE(root, ws):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df.insert(0, "species", np.where(X[:, 0] > 0, "yes", "no"))
    df.insert(1, "id", np.arange(40))
    df.to_csv(root / "own.csv", index=False)
    df.to_csv(root / "own_semi.csv", index=False, sep=";")
    df.to_parquet(root / "own.parquet")
    df.assign(a=df["a"].where(df.index != 1)).to_parquet(root / "own_null.parquet")
    (root / "not_parquet.parquet").write_text("a,b\n1,2\n")
    np.savez(root / "own.npz", X=X)
    (root / "zero.csv").write_bytes(b"")
    (root / "header_only.csv").write_text("species,id,a,b,c\n")
    df[["species", "a", "b"]].to_csv(root / "own_ab.csv", index=False)
    from kmp_dask import KMPClassifier, save

    save(KMPClassifier(n_basis=3, client="sync").fit(df[["a", "b", "c"]], df["species"]), root / "own_clf.model")
    ws.zero_csv, ws.header_csv, ws.own_ab_csv = str(root / "zero.csv"), str(root / "header_only.csv"), \
        str(root / "own_ab.csv")
    ws.own_clf = str(root / "own_clf.model")
    ws.own_csv, ws.own_semi, ws.own_parquet = (str(root / "own.csv"), str(root / "own_semi.csv"),
                                               str(root / "own.parquet"))
    ws.own_null, ws.not_parquet, ws.own_npz = (str(root / "own_null.parquet"), str(root / "not_parquet.parquet"),
                                               str(root / "own.npz"))
    good = ('[data.train]\nsource = "own.csv"\nlabel = "species"\ndrop = ["id"]\npart = "train"\n'
            '[data.test]\nsource = "own.csv"\nlabel = "species"\ndrop = ["id"]\npart = "test"\n'
            '[model]\nparams = { n_basis = 3 }\n[evaluate]\ndata = "test"\n')
    bad = {"missing_source": good.replace('"own.csv"', '"mine_train.csv"', 1),
           "no_source_kind": good.replace('"own.csv"', '"mine_train"', 1),
           "bad_label": good.replace('label = "species"', 'label = "class"', 1),
           "bad_drop": good.replace('drop = ["id"]', 'drop = ["ID"]', 1),
           "bad_param": good.replace("n_basis = 3", "n_basiss = 3"),
           "label_on_keel": good.replace('source = "own.csv"\nlabel = "species"\ndrop = ["id"]',
                                         'source = "keel:banana"\nlabel = "species"', 1),
           "test_size_no_part": good.replace('part = "train"\n', 'test_size = 0.2\n', 1),
           "unknown_keel": good.replace('source = "own.csv"\nlabel = "species"\ndrop = ["id"]',
                                        'source = "keel:no_such_set"', 1)}
    ws.pipelines = {}
    for name, text in bad.items():
        (root / f"p_{name}.toml").write_text(text)
        ws.pipelines[name] = str(root / f"p_{name}.toml")
    ws.run_out = str(root / "run_out")


def _run(name):
    return lambda ws: ["run", ws.pipelines[name], "--output", ws.run_out]


CASES = [
    Case("ingest-py-n-rows-negative", lambda ws: ingest(ws.own_csv, ws.new, label="species", n_rows=-1), ValueError,
         ("n_rows=-1", "positive number of rows")),
    Case("ingest-py-part-without-test-size", lambda ws: ingest(ws.own_csv, ws.new, label="species", part="test"),
         ValueError, ("part='test' needs test_size",)),
    Case("csv-py-label-not-a-column", lambda ws: store_from_csv(ws.new, ws.own_csv, label_column="label"), ValueError,
         ("label column 'label' is not a column", "'species'", "label=")),
    Case("parquet-py-drop-unknown", lambda ws: store_from_parquet(ws.new, ws.own_parquet, label_column=0, drop="ID"),
         ValueError, ("drop column 'ID' is not a column", "'id'", "drop=")),
    Case("ingest-py-label-on-npz", lambda ws: ingest(ws.own_npz, ws.new, label="y"), ValueError,
         ("--label (label=) applies to csv and parquet sources", "own.npz")),
    Case("ingest-py-parquet-null", lambda ws: ingest(ws.own_null, ws.new, label="species", drop="id"),
         DataValidationError, ("column 'a'", "missing value (null) at row 1")),
]

COMMANDS = [
    Command("ingest-label-not-a-column", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "class"], 1,
            ("label column 'class' is not a column", "'species'", "--label")),
    Command("ingest-label-out-of-range", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "9"], 1,
            ("label column '9' is out of range", "5 columns", "0-based position")),
    Command("ingest-drop-not-a-column", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "species", "--drop", "ID"],
            1, ("drop column 'ID' is not a column", "'id'", "--drop")),
    Command("ingest-drop-the-label", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "0", "--drop", "species"], 1,
            ("drop column 'species' is the label column",)),
    Command("ingest-label-first-without-label", lambda ws: ["ingest", ws.own_csv, ws.new], 1,
            ("which column", "is the label?", "['species', 'id', 'a', 'b', 'c']", "--label COL", "--no-label")),
    Command("ingest-text-feature-wrong-label", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "c"], 1,
            ("column(s) ['species']", "not numeric", "--label species", "--drop species")),
    Command("ingest-csv-zero-bytes", lambda ws: ["ingest", ws.zero_csv, ws.new, "--label", "0"], 1,
            ("zero.csv", "is empty", "nothing to read"), ("Traceback", "EmptyDataError")),
    Command("ingest-csv-header-only", lambda ws: ["ingest", ws.header_csv, ws.new, "--label", "species"], 1,
            ("header_only.csv", "no data rows"), ("not numeric",)),
    Command("predict-csv-zero-bytes", lambda ws: ["predict", ws.own_clf, ws.zero_csv, "--output", ws.run_out + ".csv"],
            1, ("zero.csv", "is empty"), ("Traceback",)),
    Command("predict-csv-missing-column", lambda ws: ["predict", ws.own_clf, ws.own_ab_csv, "--output",
                                                      ws.run_out + ".csv"], 1,
            ("own_ab.csv", "lacks 1 of the columns", "['c']", "in any order")),
    Command("evaluate-csv-without-label", lambda ws: ["evaluate", ws.own_clf, ws.own_csv], 1,
            ("evaluate needs the labels", "own.csv", "--label COL")),
    Command("ingest-wrong-delimiter", lambda ws: ["ingest", ws.own_semi, ws.new, "--delimiter", ","], 1,
            ("single column", "delimiter ','", "--delimiter ';'")),
    Command("ingest-delimiter-not-one-char", lambda ws: ["ingest", ws.own_csv, ws.new, "--delimiter", ";;"], 2,
            ("--delimiter", "not one character")),
    Command("ingest-delimiter-on-parquet", lambda ws: ["ingest", ws.own_parquet, ws.new, "--delimiter", ";"], 1,
            ("--delimiter (delimiter=) applies to csv sources", "a Parquet file", "leave --delimiter out")),
    Command("ingest-test-size-out-of-range", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "0",
                                                         "--test-size", "1.5"], 1,
            ("test_size=1.5", "strictly between 0 and 1")),
    Command("ingest-test-size-synthetic", lambda ws: ["ingest", "synthetic:classification", ws.new, "--n-rows", "10",
                                                      "--test-size", "0.2"], 1, ("--test-size", "--start-row")),
    Command("ingest-test-target-exists", lambda ws: ["ingest", ws.own_csv, ws.new, "--label", "0", "--test-size", "0.2",
                                                     "--test-target", ws.good], 1, ("good.zarr", "already exists")),
    Command("ingest-n-rows-zero", lambda ws: ["ingest", ws.own_csv, ws.new, "--n-rows", "0"], 2, ("--n-rows",)),
    Command("ingest-synthetic-without-n-rows", lambda ws: ["ingest", "synthetic:regression", ws.new], 1,
            ("needs --n-rows",)),
    Command("ingest-missing-parquet", lambda ws: ["ingest", str(ws.root / "nope.parquet"), ws.new], 1,
            ("nope.parquet", "no such Parquet file")),
    Command("ingest-parquet-text-feature", lambda ws: ["ingest", ws.own_parquet, ws.new, "--label", "c"], 1,
            ("column(s) ['species']", "not numeric", "--label species")),
    Command("ingest-not-parquet", lambda ws: ["ingest", ws.not_parquet, ws.new], 1,
            ("not_parquet.parquet", "not a readable Parquet file")),
    Command("run-source-missing", _run("missing_source"), 1, ("[data.train]", "mine_train.csv", "does not exist")),
    Command("run-source-not-a-source", _run("no_source_kind"), 1, ("[data.train]", "is not a data source", ".csv")),
    Command("run-source-bad-label", _run("bad_label"), 1,
            ("[data.train]", "label column 'class' is not a column", "'species'")),
    Command("run-source-bad-drop", _run("bad_drop"), 1, ("[data.train]", "drop column 'ID' is not a column")),
    Command("run-unknown-parameter", _run("bad_param"), 1, ("model.params", "unknown parameter 'n_basiss'",
                                                            "did you mean 'n_basis'")),
    Command("run-label-on-keel", _run("label_on_keel"), 1, ("[data.train]", "applies to csv and parquet sources")),
    Command("run-unknown-keel", _run("unknown_keel"), 1, ("[data.train]", "unknown KEEL dataset 'no_such_set'",
                                                          "'banana'")),
    Command("run-test-size-without-part", _run("test_size_no_part"), 1,
            ("[data.train]", "test_size = 0.2 needs part")),
]
