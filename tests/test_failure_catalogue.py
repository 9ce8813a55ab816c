"""Failure catalogue: every bad input or fault a user meets, one row each.

A row says what the user does, the exception type (or, for ``kmp-dask`` commands, the exit
status) and the words the message must contain: the argument, what was received and how to
fix it. Every row runs in a fresh workspace holding a good store, a store with a corrupt chunk,
a zarr group that is not a kmp_dask store and CSV / LIBSVM files, and the workspace must be
unchanged afterwards (names, sizes, modification times): no partial store, temporary directory
or rewritten file is left behind. Command rows must print exactly one ``Error:`` line and no
traceback.

Rows live here and in per-area modules ``tests/_catalogue_*.py`` (``CASES``, ``COMMANDS``, an
optional ``WORKSPACE(root, ws)`` adding files); the machinery is ``tests/_catalogue.py``.
docs/store.md ("Failure catalogue") lists the rows with one line each, in any order
(``test_catalogue_is_listed_in_docs`` keeps the two in sync), followed by where the faults with real
processes are tested.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

pytest.importorskip("distributed")  # loads distributed's config defaults before dask.config.set
import dask.array as da  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from kmp_dask import KMPClassifier, KMPRegressor, ReducedSetCompressor  # noqa: E402
from kmp_dask.cli import main as cli  # noqa: E402
from kmp_dask.datasets import load  # noqa: E402
from kmp_dask.exceptions import (  # noqa: E402
    DataValidationError,
    DegenerateFitWarning,
    KernelWidthWarning,
    StoreExistsError,
    StoreSchemaError,
)
from kmp_dask.store import (  # noqa: E402
    InMemoryStore,
    StoreCorruptError,
    create_store,
    open_store,
    store_from_csv,
    store_from_libsvm,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 3))
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
X_NAN = X.copy()
X_NAN[5, 1] = np.nan
X_INF = X.copy()
X_INF[7, 2] = np.inf
X_TEXT = X.astype(str)
X_TEXT[7, 1] = "x"
X_TEXT_LATE = X.astype(str)
X_TEXT_LATE[27, 1] = "x"  # in the second of three dask chunks: only the first is read to name a cell
Y_TEXT = np.array(["a"] * 60)
X_NAN_LATE = X.copy()
X_NAN_LATE[45, 1] = np.nan  # in the third dask chunk: the row is counted over the whole array
_SVC = SVC(C=10.0, gamma=0.5).fit(X, Y)


def _csv(rows: list[str], edit: Callable[[list[str]], None] | None = None) -> str:
    rows = list(rows)
    if edit:
        edit(rows)
    return "\n".join(rows) + "\n"


CSV_ROWS = ["a,b,label"] + [f"{i},{i * 2},{'yes' if i % 3 else 'no'}" for i in range(60)]
CSV_FILES = {
    "ok.csv": _csv(CSV_ROWS),
    "short.csv": _csv(CSV_ROWS, lambda r: r.__setitem__(51, "50,100")),  # row 50, line 52
    "long.csv": _csv(CSV_ROWS, lambda r: r.__setitem__(41, "40,80,yes,7")),  # row 40, line 42
    "long_first.csv": _csv(CSV_ROWS, lambda r: r.__setitem__(1, "0,0,no,7")),
    "text.csv": _csv(CSV_ROWS, lambda r: r.__setitem__(31, "30,abc,no")),  # row 30, line 32
    "empty_cell.csv": _csv(CSV_ROWS, lambda r: r.__setitem__(21, "20,,no")),  # row 20, line 22
}
SVM_FILES = {"zero_based.svm": "1 0:1.5 2:3\n0 1:2\n"}


def _make_workspace(root: Path) -> SimpleNamespace:
    good = create_store(root / "good.zarr", X, Y, chunk_rows=20, classes=["neg", "pos"])
    corrupt = create_store(root / "corrupt.zarr", X, Y, chunk_rows=20, classes=["neg", "pos"])
    (root / "corrupt.zarr" / "X" / "c" / "1" / "0").write_bytes(b"not a blosc frame" * 4)
    zarr.open_group(store=str(root / "foreign.zarr"), mode="w").create_array("X", shape=(4, 2), dtype="f8")
    for name, text in {**CSV_FILES, **SVM_FILES}.items():
        (root / name).write_text(text)
    (root / "garbage_scheduler.json").write_text("{not json")
    return SimpleNamespace(root=root, good=good.url, corrupt=corrupt.url, foreign=str(root / "foreign.zarr"),
                           **{name.split(".")[0]: str(root / name) for name in {**CSV_FILES, **SVM_FILES}},
                           new=str(root / "new.zarr"), missing=str(root / "missing.zarr"))


from _catalogue import FIX_ADDRESS, Case, Command, _short_timeout, _snapshot  # noqa: E402

CASES = [
    # --- numpy input to the estimators (scikit-learn's checks plus ours) --------------------------
    Case("X-has-nan", lambda ws: KMPClassifier().fit(X_NAN, Y), ValueError, ("Input X contains NaN",)),
    Case("X-has-inf", lambda ws: KMPClassifier().fit(X_INF, Y), ValueError, ("Input X contains infinity",)),
    Case("X-is-1d", lambda ws: KMPClassifier().fit(X[:, 0], Y), ValueError, ("Expected 2D array", "reshape(-1, 1)")),
    Case("y-wrong-length", lambda ws: KMPClassifier().fit(X, Y[:-1]), ValueError,
         ("inconsistent numbers of samples", "[60, 59]")),
    Case("X-empty", lambda ws: KMPClassifier().fit(X[:0], Y[:0]), ValueError, ("0 sample(s)", "shape=(0, 3)")),
    Case("single-class", lambda ws: KMPClassifier().fit(X, np.zeros(60)), ValueError,
         ("at least 2 classes", "got 1 class", "KMPRegressor")),
    Case("predict-before-fit", lambda ws: KMPClassifier().predict(X), NotFittedError, ("not fitted yet", "Call 'fit'")),
    Case("predict-wrong-width", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).predict(X[:, :2]), ValueError,
         ("X has 2 features", "expecting 3")),
    # --- parameter ranges -------------------------------------------------------------------------
    Case("n_basis=0", lambda ws: KMPClassifier(n_basis=0).fit(X, Y), ValueError,
         ("n_basis must be a positive int", "got 0")),
    Case("candidates='x'", lambda ws: KMPClassifier(candidates="x").fit(X, Y), ValueError,
         ("candidates must be 'all', 'auto' or a positive int", "got 'x'")),
    Case("ridge=-1", lambda ws: KMPClassifier(ridge=-1).fit(X, Y), ValueError,
         ("ridge must be a float >= 0", "got -1")),
    Case("tol=2", lambda ws: KMPRegressor(tol=2).fit(X, X[:, 0]), ValueError,
         ("tol must be None or a float in [0, 1)", "got 2")),
    Case("validation_fraction=1.5", lambda ws: KMPClassifier(validation_fraction=1.5).fit(X, Y), ValueError,
         ("validation_fraction must be 'auto' or a float in [0, 1)", "got 1.5")),
    Case("n_iter_no_change-without-split", lambda ws: KMPClassifier(n_basis=5, n_iter_no_change=5).fit(X, Y),
         ValueError,
         ("n_iter_no_change", "validation_fraction > 0")),
    Case("fit_mode='nope'", lambda ws: KMPClassifier(fit_mode="nope").fit(X, Y), ValueError,
         ("fit_mode must be one of", "'backfit'", "got 'nope'")),
    Case("basis_columns='disk'", lambda ws: KMPRegressor(basis_columns="disk").fit(X, Y), ValueError,
         ("basis_columns must be one of", "'recomputed'", "got 'disk'")),
    Case("kernel='nope'", lambda ws: KMPClassifier(kernel="nope").fit(X, Y), ValueError,
         ("Unknown kernel 'nope'", "'rbf'", "register_kernel")),
    Case("gamma=-1", lambda ws: KMPClassifier(gamma=-1.0).fit(X, Y), ValueError, ("gamma", "-1.0", "positive")),
    Case("refit_every=0", lambda ws: KMPClassifier(refit_every=0).fit(X, Y), ValueError,
         ("refit_every must be 'auto', None or a positive int", "got 0")),
    Case("chunk_rows=0", lambda ws: KMPClassifier(chunk_rows=0).fit(X, Y), ValueError,
         ("chunk_rows must be None or a positive int", "got 0")),
    Case("loss='nope'", lambda ws: KMPClassifier(loss="nope").fit(X, Y), ValueError,
         ("loss must be one of", "'logistic'", "got 'nope'")),
    Case("regressor-classification-loss", lambda ws: KMPRegressor(loss="logistic").fit(X, X[:, 0]), ValueError,
         ("'logistic' is a classification loss", "'huber'")),
    # --- where the fit runs: client= ----------------------------------------------------------
    Case("client='localhost'", lambda ws: KMPClassifier(client="localhost").fit(X, Y), ValueError,
         ("client='localhost'", "missing port number", FIX_ADDRESS, "scheduler file")),
    Case("client=unknown-protocol", lambda ws: KMPClassifier(client="foo://h:1").fit(X, Y), ValueError,
         ("client='foo://h:1'", "unknown protocol 'foo'", FIX_ADDRESS)),
    Case("client=unreachable", _short_timeout(lambda ws: KMPClassifier(client="tcp://127.0.0.1:1").fit(X, Y)),
         ConnectionError, ("tcp://127.0.0.1:1", "within 2 s", "dask scheduler", "'embedded'")),
    Case("client=missing-scheduler-file", lambda ws: KMPClassifier(client=str(ws.root / "sched.json")).fit(X, Y),
         FileNotFoundError, ("sched.json", "no scheduler file", "dask scheduler --scheduler-file")),
    Case("client=42", lambda ws: KMPClassifier(client=42).fit(X, Y), TypeError,
         ("client must be", "got int", FIX_ADDRESS)),
    Case("client=bad-port", lambda ws: KMPClassifier(client="tcp://127.0.0.1:http").fit(X, Y), ValueError,
         ("client='tcp://127.0.0.1:http'", "not a dask scheduler address", FIX_ADDRESS)),
    Case("client=no-host", lambda ws: KMPClassifier(client="tcp://:8786").fit(X, Y), ValueError,
         ("client='tcp://:8786'", "host is missing")),
    Case("client=garbage-scheduler-file",
         lambda ws: KMPClassifier(client=str(ws.root / "garbage_scheduler.json")).fit(X, Y),
         ValueError, ("garbage_scheduler.json", "not a readable dask scheduler file", "'address'",
                      "dask scheduler --scheduler-file")),
    # --- stores as fit input --------------------------------------------------------------------
    Case("store-missing", lambda ws: KMPClassifier().fit(ws.missing), FileNotFoundError,
         ("no store at", "missing.zarr")),
    Case("store-not-kmp_dask", lambda ws: KMPClassifier().fit(ws.foreign), StoreSchemaError,
         ("schema_version", "not a kmp_dask store")),
    Case("store-plus-y", lambda ws: KMPClassifier().fit(ws.good, Y), ValueError,
         ("y is read from the store", "y=None")),
    Case("store-corrupt-chunk-fit", lambda ws: KMPClassifier(n_basis=3, client="sync").fit(ws.corrupt),
         StoreCorruptError, ("corrupt.zarr", "array 'X'", "chunk 1 (rows 20..39)", "X/c/1/0", "blosc", "--verify")),
    Case("store-corrupt-chunk-predict", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).predict(ws.corrupt).compute(),
         StoreCorruptError, ("corrupt.zarr", "array 'X'", "chunk 1 (rows 20..39)", "X/c/1/0", "--verify")),
    Case("store-corrupt-chunk-score", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).score(ws.corrupt),
         StoreCorruptError, ("corrupt.zarr", "array 'X'", "chunk 1 (rows 20..39)", "--overwrite")),
    Case("store-corrupt-chunk-read", lambda ws: open_store(ws.corrupt).read_rows([0, 25]), StoreCorruptError,
         ("corrupt.zarr", "array 'X'", "chunk 1 (rows 20..39)", "restore it from a copy")),
    # --- ingest from Python -----------------------------------------------------------------------
    Case("create_store-existing-target", lambda ws: create_store(ws.good, X), StoreExistsError,
         ("already exists", "good.zarr", "pass overwrite=True")),
    Case("create_store-nan", lambda ws: create_store(ws.new, X_NAN), DataValidationError,
         ("non-finite value (nan)", "row 5, column 1", "impute")),
    Case("create_store-text-column", lambda ws: create_store(ws.new, np.array([["1", "2"], ["3", "x"]])),
         DataValidationError, ("X must be numeric", "column 1", "'x'", "row 1", "get_dummies")),
    Case("create_store-y-length", lambda ws: create_store(ws.new, X, Y[:10]), DataValidationError,
         ("y has 10 rows but X has 60", "one target per row")),
    Case("csv-short-row", lambda ws: store_from_csv(ws.new, ws.short), DataValidationError,
         ("row 50", "line 52", "is short", "2 fields", "3 columns", "complete or drop")),
    Case("csv-long-row", lambda ws: store_from_csv(ws.new, ws.long), DataValidationError,
         ("line 42", "data row 40", "too long", "4 fields", "3 columns"), ("Error tokenizing",)),
    Case("csv-long-first-row", lambda ws: store_from_csv(ws.new, ws.long_first), DataValidationError,
         ("row 0", "line 2", "too long", "4 fields")),
    Case("csv-text-cell", lambda ws: store_from_csv(ws.new, ws.text), DataValidationError,
         ("column 'b'", "'abc'", "row 30", "line 32", "not numeric", "get_dummies")),
    Case("csv-empty-cell", lambda ws: store_from_csv(ws.new, ws.empty_cell), DataValidationError,
         ("column 'b'", "missing value", "row 20", "line 22")),
    Case("csv-existing-target-before-parsing", lambda ws: store_from_csv(ws.good, ws.long), StoreExistsError,
         ("already exists", "good.zarr")),
    Case("csv-missing-file", lambda ws: store_from_csv(ws.new, ws.root / "nope.csv"), FileNotFoundError,
         ("nope.csv", "no such CSV file")),
    Case("libsvm-zero-based", lambda ws: store_from_libsvm(ws.new, ws.zero_based), DataValidationError,
         ("line 1", "feature index 0", "1-based")),
    Case("keel:no_such_dataset", lambda ws: load("keel:no_such_dataset"), FileNotFoundError,
         ("'no_such_dataset'", "choose one of", "'banana'"), ("site-packages", ".dat")),
    Case("sklearn:nope", lambda ws: load("sklearn:nope"), ValueError, ("'nope'", "choose one of", "'digits'")),
    Case("dataset-without-prefix", lambda ws: load("banana"), ValueError, ("'keel:banana'", "got 'banana'")),
    # --- degenerate fits: kmp_dask's warnings are errors in this test run, so they surface here --
    Case("fit-identical-rows", lambda ws: KMPClassifier().fit(np.ones((1000, 3)), np.repeat([0, 1], 500)),
         DegenerateFitWarning, ("stop_reason='no_usable_candidate'", "identical", "duplicate rows",
                                "Remove the duplicate rows")),
    Case("fit-gamma-tiny", lambda ws: KMPClassifier(gamma=1e-9).fit(X, Y), DegenerateFitWarning,
         ("stop_reason='constant_kernel'", "numerically constant", "gamma=1e-09", "Increase `gamma`")),
    Case("fit-gamma-huge", lambda ws: KMPClassifier(gamma=1e6).fit(X, Y), KernelWidthWarning,
         ("gamma=1000000.0", "very narrow", "Make gamma smaller: 1 / median squared distance", "StandardScaler")),
    Case("fit-conflicting-duplicates",
         lambda ws: KMPClassifier(n_basis=100).fit(np.repeat([[0.0, 0.0], [1.0, 1.0]], 500, axis=0),
                                                   np.tile([0, 1], 500)),
         DegenerateFitWarning, ("stop_reason='no_usable_candidate'", "duplicate rows with conflicting targets",
                                "`gamma`", "`ridge`")),
    Case("fit-ridge-huge", lambda ws: KMPClassifier(ridge=1e15).fit(X, Y), DegenerateFitWarning,
         ("stop_reason='no_usable_candidate'", "lower `ridge` (now 1e+15 per training row)")),
    # --- methods: predict_proba, score ------------------------------------------------------------
    Case("predict_proba-squared-loss", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).predict_proba(X), AttributeError,
         ("predict_proba is available with loss='logistic' or probability=True", "loss='squared'",
          "KMPClassifier(probability=True)", "decision_function")),
    Case("score-y=None-numpy", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).score(X), ValueError,
         ("score needs y unless X is a store", "got y=None", "ndarray")),
    Case("score-store-without-y", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).score(InMemoryStore(X)), ValueError,
         ("reads y from the store", "has no 'y' array", "pass y")),
    Case("score-store-sample_weight",
         lambda ws: KMPClassifier(n_basis=3, client="sync").fit(ws.good).score(ws.good, sample_weight=np.ones(60)),
         ValueError, ("sample_weight is not supported with y=None",)),
    # --- sample_weight ------------------------------------------------------------------------------
    Case("sample_weight-negative", lambda ws: KMPClassifier().fit(X, Y, sample_weight=np.r_[np.ones(59), -1.0]),
         ValueError, ("sample_weight must be finite and >= 0", "-1.0", "row 59", "use 0 to leave a row out")),
    Case("sample_weight-nan", lambda ws: KMPClassifier().fit(X, Y, sample_weight=np.r_[np.nan, np.ones(59)]),
         ValueError, ("sample_weight must be finite", "nan", "row 0")),
    Case("sample_weight-wrong-length", lambda ws: KMPRegressor().fit(X, X[:, 0], sample_weight=np.ones(59)),
         ValueError, ("sample_weight must have shape (60,)", "got shape (59,)")),
    Case("sample_weight-scalar", lambda ws: KMPRegressor().fit(X, X[:, 0], sample_weight=2.0),
         ValueError, ("shape (60,)", "got the scalar 2.0", "sample_weight=None")),
    Case("sample_weight-all-zero", lambda ws: KMPClassifier().fit(X, Y, sample_weight=np.zeros(60)),
         ValueError, ("sample_weight is zero on every row", "positive weight")),
    Case("sample_weight-text", lambda ws: KMPClassifier().fit(X, Y, sample_weight=["a"] * 60),
         ValueError, ("sample_weight must be numbers", "could not convert")),
    Case("sample_weight-store-length", lambda ws: KMPClassifier(client="sync").fit(ws.good, sample_weight=np.ones(7)),
         ValueError, ("sample_weight must have shape (60,)", "got shape (7,)")),
    # --- text features on numpy / pandas input, NaN in dask input during a fit -------------------
    Case("X-text-cell", lambda ws: KMPClassifier().fit(
        np.array([[f"{a}", "x" if i == 7 else f"{b}", f"{c}"] for i, (a, b, c) in enumerate(X)]), Y),
         DataValidationError, ("X must be numeric", "column 1", "'x'", "row 7", "get_dummies"), ("could not convert",)),
    Case("X-text-column-pandas", lambda ws: KMPClassifier().fit(
        pd.DataFrame({"a": X[:, 0], "colour": ["red", "blue"] * 30}), Y),
         DataValidationError, ("column 1 ('colour')", "'red'", "row 0", "get_dummies"), ("could not convert",)),
    Case("predict-text-cell", lambda ws: KMPClassifier(n_basis=3).fit(X, Y).predict(np.array([["1", "2", "three"]])),
         DataValidationError, ("column 2", "'three'", "row 0"), ("could not convert",)),
    Case("dask-X-nan-fit", lambda ws: KMPClassifier(client="sync").fit(da.from_array(X_NAN, chunks=20),
                                                                        da.from_array(Y, chunks=20)),
         DataValidationError, ("non-finite value (nan)", "row 5, column 1", "before calling fit"), ("before ingest",)),
    Case("dask-X-inf-fit", lambda ws: KMPClassifier(client="sync").fit(da.from_array(X_INF, chunks=20),
                                                                        da.from_array(Y, chunks=20)),
         DataValidationError, ("non-finite value (inf)", "row 7, column 2", "before calling fit"), ("before ingest",)),
    Case("dask-X-feature-chunks", lambda ws: KMPClassifier(client="sync").fit(da.from_array(X, chunks=(20, 1)),
                                                                               da.from_array(Y, chunks=20)),
         DataValidationError, ("3 chunks along axis 1", "X.rechunk({1: -1})"), ("ingest",)),
    Case("dask-y-wrong-length-fit", lambda ws: KMPClassifier(client="sync").fit(da.from_array(X, chunks=20),
                                                                                 da.from_array(Y[:50], chunks=10)),
         DataValidationError, ("y has 50 rows but X has 60", "one target per row"), ("ingest",)),
    Case("dask-X-text-cell", lambda ws: KMPClassifier(client="sync").fit(da.from_array(X_TEXT, chunks=20),
                                                                          da.from_array(Y, chunks=20)),
         DataValidationError, ("X must be numeric", "column 1", "'x'", "row 7", "get_dummies"), ("ingest",)),
    Case("dask-X-text-later-chunk", lambda ws: KMPClassifier(client="sync").fit(da.from_array(X_TEXT_LATE, chunks=20),
                                                                                 da.from_array(Y, chunks=20)),
         DataValidationError, ("X must be numeric", "dask array of dtype <U", "get_dummies", "astype('float64')"),
         ("reads as a number",)),
    Case("dask-X-nan-predict",
         lambda ws: KMPClassifier(n_basis=3).fit(X, Y).predict(da.from_array(X_NAN_LATE, chunks=20)).compute(),
         DataValidationError, ("non-finite value (nan)", "row 45, column 1", "before calling predict"), ("ingest",)),
    Case("dask-X-inf-score",
         lambda ws: KMPRegressor(n_basis=3).fit(X, X[:, 0]).score(da.from_array(X_INF, chunks=20),
                                                                   da.from_array(X[:, 0], chunks=20)),
         DataValidationError, ("non-finite value (inf)", "row 7, column 2")),
    Case("regressor-y-text", lambda ws: KMPRegressor().fit(X, Y_TEXT), DataValidationError,
         ("y must be numeric for KMPRegressor", "'a'", "y.astype('float64')", "KMPClassifier"), ("classes=classes",)),
    Case("regressor-y-text-dask", lambda ws: KMPRegressor(client="sync").fit(da.from_array(X, chunks=20),
                                                                              da.from_array(Y_TEXT, chunks=20)),
         DataValidationError, ("y must be numeric for KMPRegressor", "KMPClassifier"), ("classes=classes",)),
    # --- reduced-set compression --------------------------------------------------------
    Case("compress-unfitted", lambda ws: ReducedSetCompressor().fit(SVC()), NotFittedError, ("SVC", "fit")),
    Case("compress-precomputed", lambda ws: ReducedSetCompressor().fit(SVC(kernel="precomputed").fit(X @ X.T, Y)),
         ValueError, ("precomputed",)),
    Case("compress-not-a-model", lambda ws: ReducedSetCompressor().fit("svc.pkl"), TypeError, ("SVC", "KernelRidge")),
    Case("compress-too-many-vectors", lambda ws: ReducedSetCompressor(n_vectors=500).fit(_SVC), ValueError,
         ("n_vectors=500", "pool has only", "smaller n_vectors")),
    Case("compress-pool-width", lambda ws: ReducedSetCompressor(n_vectors=3).fit(_SVC, X[:, :2]), ValueError,
         ("X_pool has 2 features", "3", "feature space")),
    Case("compress-pool-nan", lambda ws: ReducedSetCompressor(n_vectors=3).fit(_SVC, X_NAN), ValueError,
         ("X_pool must be finite",)),
    Case("compress-n_vectors=0", lambda ws: ReducedSetCompressor(n_vectors=0).fit(_SVC), ValueError,
         ("n_vectors must be", "got 0")),
    Case("compress-dense-store-pool", lambda ws: ReducedSetCompressor(n_vectors=3, method="l1").fit(_SVC, ws.good),
         ValueError, ("X_pool must be a numpy array", "method='hmp'")),
    Case("compress-y-wrong-length", lambda ws: ReducedSetCompressor(n_vectors=3).fit(_SVC, X, Y[:-1]), ValueError,
         ("y has 59", "60 rows")),
    Case("compress-exchange=-1", lambda ws: ReducedSetCompressor(n_vectors=3, exchange=-1).fit(_SVC), ValueError,
         ("exchange must be an int >= 0", "got -1")),
    Case("compress-exchange-independent-outputs",
         lambda ws: ReducedSetCompressor(n_vectors=3, exchange=2, coupled=False).fit(
             SVC(C=10.0, gamma=0.5).fit(X, np.arange(60) % 3), X),
         ValueError, ("exchange improves one shared set of vectors", "coupled=True", "3-output", "exchange=0")),
]

COMMANDS = [
    Command("ingest-existing-target", lambda ws: ["ingest", "sklearn:iris", ws.good], 1,
            ("already exists", "good.zarr", "pass --overwrite"), ("overwrite=True",)),
    Command("ingest-csv-existing-target", lambda ws: ["ingest", ws.long, ws.good], 1,
            ("already exists", "--overwrite"), ("too long",)),
    Command("ingest-csv-short-row", lambda ws: ["ingest", ws.short, ws.new, "--label", "label"], 1,
            ("row 50", "line 52", "is short")),
    Command("ingest-csv-text-cell", lambda ws: ["ingest", ws.text, ws.new, "--label", "label"], 1,
            ("column 'b'", "'abc'", "row 30")),
    Command("ingest-csv-long-row", lambda ws: ["ingest", ws.long, ws.new, "--label", "label"], 1,
            ("line 42", "data row 40", "too long", "4 fields"), ("Error tokenizing",)),
    Command("ingest-csv-empty-cell", lambda ws: ["ingest", ws.empty_cell, ws.new, "--label", "label"], 1,
            ("column 'b'", "missing value", "row 20")),
    Command("ingest-sklearn-unknown", lambda ws: ["ingest", "sklearn:nope", ws.new], 1,
            ("'nope'", "choose one of", "'digits'")),
    Command("ingest-unknown-dataset", lambda ws: ["ingest", "keel:no_such_dataset", ws.new], 1,
            ("choose one of", "'banana'")),
    Command("ingest-unknown-source", lambda ws: ["ingest", "data.xlsx", ws.new], 2,
            ("'data.xlsx' is not a data source", "keel:NAME", ".csv")),
    Command("ingest-missing-csv", lambda ws: ["ingest", str(ws.root / "nope.csv"), ws.new], 1,
            ("nope.csv", "no such CSV file")),
    Command("info-missing-store", lambda ws: ["info", ws.missing], 1, ("no store at", "missing.zarr")),
    Command("info-not-a-store", lambda ws: ["info", ws.foreign], 1, ("not a kmp_dask store",)),
    Command("info-verify-corrupt", lambda ws: ["info", ws.corrupt, "--verify", "--no-progress"], 1,
            ("chunk 1 (rows 20..39)", "array 'X'", "X/c/1/0")),
    Command("demo-bad-scheduler", lambda ws: ["demo", "--scheduler", "localhost", "--workdir", str(ws.root / "w")], 2,
            ("--scheduler='localhost'", "missing port number", FIX_ADDRESS)),
    Command("demo-missing-scheduler-file",
            lambda ws: ["demo", "--scheduler", str(ws.root / "s.json"), "--workdir", str(ws.root / "w")], 2,
            ("no scheduler file", "s.json")),
]


# --- rows kept in per-area modules (tests/_catalogue_*.py), appended in name order ---------------
AREAS = [importlib.import_module(p.stem) for p in sorted(Path(__file__).parent.glob("_catalogue_*.py"))]
for _area in AREAS:
    CASES += list(getattr(_area, "CASES", ()))
    COMMANDS += list(getattr(_area, "COMMANDS", ()))


@pytest.fixture
def ws(tmp_path):
    space = _make_workspace(tmp_path)
    for area in AREAS:
        if hasattr(area, "WORKSPACE"):
            area.WORKSPACE(tmp_path, space)
    return space


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_python_api(case: Case, ws):
    before = _snapshot(ws.root)
    with pytest.raises(case.exc) as info:
        case.run(ws)
    message = str(info.value)
    missing = [w for w in case.words if w not in message]
    assert not missing, f"message lacks {missing}: {message}"
    assert not [w for w in case.absent if w in message], message
    assert _snapshot(ws.root) == before, "the failure changed files on disk"


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_command_line(command: Command, ws):
    before = _snapshot(ws.root)
    result = CliRunner().invoke(cli, command.args(ws))
    assert result.exit_code == command.exit_code, result.output
    assert isinstance(result.exception, SystemExit), f"uncaught {result.exception!r}"
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    text = " ".join(result.output.split())  # click wraps nothing, but be safe
    missing = [w for w in command.words if w not in text]
    assert not missing, f"output lacks {missing}: {result.output}"
    assert not [w for w in command.absent if w in text], result.output
    assert _snapshot(ws.root) == before, "the failure changed files on disk"


def test_catalogue_size():
    assert len(CASES) + len(COMMANDS) >= 40
    assert len({c.id for c in CASES} | {c.id for c in COMMANDS}) == len(CASES) + len(COMMANDS)


def test_a_good_fit_after_the_failures(ws):
    """The failures above ran in this process; none of them left state behind."""
    assert KMPClassifier(n_basis=5, random_state=0).fit(X, Y).score(X, Y) > 0.8
    assert KMPClassifier(n_basis=5, random_state=0, client="sync").fit(ws.good).n_basis_ == 5


def test_snapshot_sees_what_a_failure_could_leave(ws):
    """The on-disk check itself: a leftover sibling, a rewritten chunk and a temp dir all show."""
    before = _snapshot(ws.root)
    (ws.root / "good.zarr.tmp-123").mkdir()
    assert _snapshot(ws.root) != before
    os.rmdir(ws.root / "good.zarr.tmp-123")
    assert _snapshot(ws.root) == before
    chunk = ws.root / "good.zarr" / "X" / "c" / "0" / "0"
    os.utime(chunk, ns=(0, 0))
    assert _snapshot(ws.root) != before
    with tempfile.TemporaryDirectory(prefix="kmp-dask-fit-"):
        assert _snapshot(ws.root)["<tmp>"] != before["<tmp>"]


# --- the "Missing" items that are not failures: documented where a user looks ------------
@pytest.mark.parametrize("estimator", [KMPClassifier, KMPRegressor])
def test_docstring_has_a_parameters_section_naming_every_parameter(estimator):
    import inspect
    import re

    doc = inspect.getdoc(estimator)
    assert re.search(r"^Parameters\n-{10}", doc, re.M), "no numpydoc Parameters section"
    section = doc.split("Parameters\n----------", 1)[1].split("\nAttributes\n", 1)[0]
    documented = set(re.findall(r"^(\w+) :", section, re.M))
    params = set(inspect.signature(estimator).parameters)
    assert params <= documented, f"undocumented parameters: {sorted(params - documented)}"
    # every fit_mode value is explained, and so is sample_weight in fit
    fit_mode = section.split("fit_mode :", 1)[1].split("\ncandidates :", 1)[0]
    from kmp_dask.greedy import FIT_MODES

    for value in FIT_MODES:
        assert f'- ``"{value}"``' in fit_mode, f"fit_mode={value!r} is not explained"
    assert "sample_weight" in inspect.getdoc(estimator.fit)


def test_catalogue_is_listed_in_docs():
    """docs/store.md ("Failure catalogue") has one table line per case (any order)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "store.md").read_text(encoding="utf-8")
    section = doc.split("## Failure catalogue", 1)[1].split("\n## ", 1)[0]
    table = section.split("| case | what the user does |", 1)[1].split("\n\n", 1)[0]  # the first table
    listed = [line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")]
    assert sorted(listed) == sorted([c.id for c in CASES] + [c.id for c in COMMANDS]), (
        "docs/store.md's catalogue table and tests/test_failure_catalogue.py differ: "
        f"missing there {sorted(set(c.id for c in CASES + COMMANDS) - set(listed))}, "
        f"extra there {sorted(set(listed) - set(c.id for c in CASES + COMMANDS))}")
