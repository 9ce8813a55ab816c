"""Failure-catalogue rows, "stores not written by ingest": a store whose chunks hold
NaN/inf, label codes outside its ``classes`` or float codes, a store with a chunk file deleted,
and a test store whose columns are reordered (its ``feature_names`` say so).

Every family reads a store chunk by chunk (``read_range``, the workers' ``reader()``,
``to_dask``); the checks run there, so each row names the store, the array, the chunk and the
global row. The bad stores are made once per process from good ones (written by ingest, then
edited with zarr as another tool would) and copied into each row's workspace.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import zarr
from _catalogue import Case, Command

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 3))
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
NAMES = ["alpha", "beta", "gamma"]

_TEMPLATE: list[Path] = []


def _sety(group, values):
    del group["y"]
    arr = group.create_array("y", shape=values.shape, chunks=(20,), dtype=values.dtype)
    arr[:] = values


def _build(root: Path) -> None:
    from kmp_dask import KMPClassifier, save
    from kmp_dask.store import create_store

    def store(name, edit=None, *, y=Y, classes=("neg", "pos"), X_=X, names=None):
        create_store(root / f"{name}.zarr", X_, y, chunk_rows=20, classes=None if classes is None else list(classes),
                     feature_names=names)
        if edit is not None:
            edit(zarr.open_group(store=str(root / f"{name}.zarr"), mode="r+"))

    store("x_nan", lambda g: g["X"].__setitem__((25, 1), np.nan))
    store("x_inf", lambda g: g["X"].__setitem__((45, 2), np.inf))
    store("y_nan", lambda g: _sety(g, np.where(np.arange(60) == 7, np.nan, X[:, 0])), y=X[:, 0], classes=None)
    store("code_5", lambda g: g["y"].__setitem__(33, 5))
    store("code_minus_1", lambda g: g["y"].__setitem__(3, -1))
    store("code_float", lambda g: _sety(g, np.where(np.arange(60) == 50, 0.5, Y.astype(float))))
    store("missing_chunk")
    (root / "missing_chunk.zarr" / "X" / "c" / "1" / "0").unlink()
    store("named", names=NAMES)
    store("reversed", X_=X[:, ::-1], names=NAMES[::-1])
    store("renamed", names=["alpha", "beta", "delta"])
    # trained on the stores' class names (neg, pos), so evaluate matches the stores' labels to its classes
    save(KMPClassifier(n_basis=3, random_state=0).fit(X, np.array(["neg", "pos"])[Y]), root / "model.kmp")


def WORKSPACE(root: Path, ws) -> None:  # noqa: N802 - the catalogue's hook name
    if not _TEMPLATE:
        tmp = Path(tempfile.mkdtemp(prefix="kmp-catalogue-content-"))
        atexit.register(shutil.rmtree, tmp, True)
        _build(tmp)
        _TEMPLATE.append(tmp)
    try:  # hard links: ~20 ms a workspace instead of ~110 ms for a copy (the rows only read them)
        shutil.copytree(_TEMPLATE[0], root / "content", copy_function=os.link)
    except OSError:  # another file system than the template's
        shutil.copytree(_TEMPLATE[0], root / "content")
    for p in (root / "content").iterdir():
        setattr(ws, p.name.split(".")[0], str(p))


def _kmp(ws):
    from kmp_dask import KMPClassifier

    return KMPClassifier(n_basis=3, random_state=0, client="sync")


def _fit(family):
    """``fit`` of one family on the store ``path_of(ws)``, in this process (``client="sync"``)."""
    def make():
        from kmp_dask import MMDA, CVMClassifier, KMPClassifier, KMPRegressor, SparseKernelPCA

        return {"kmp": lambda: KMPClassifier(n_basis=3), "kmp_reg": lambda: KMPRegressor(n_basis=3),
                "cvm": CVMClassifier, "mmda": lambda: MMDA(n_components=1),
                "kpca": lambda: SparseKernelPCA(n_components=2)}[family]()

    return lambda path_of: lambda ws: make().set_params(client="sync").fit(path_of(ws))


def _evaluate(path_of):
    def run(ws):
        from kmp_dask import load
        from kmp_dask.evaluation import evaluate

        return evaluate(load(ws.model), path_of(ws), client="sync")
    return run


def _compress(ws):
    from kmp_dask import KMPClassifier, ReducedSetCompressor

    return ReducedSetCompressor(n_vectors=2, client="sync").fit(KMPClassifier(n_basis=5).fit(X, Y), ws.x_nan)


def _named_model(ws):
    from kmp_dask import KMPClassifier

    return KMPClassifier(n_basis=3, random_state=0, client="sync").fit(ws.named)


def _store_content_error():
    from kmp_dask.exceptions import StoreContentError

    return StoreContentError


def _corrupt_error():
    from kmp_dask.store import StoreCorruptError

    return StoreCorruptError


def _validation_error():
    from kmp_dask.exceptions import DataValidationError

    return DataValidationError


_NAN = ("x_nan.zarr", "array 'X'", "non-finite value (nan)", "row 25, column 1", "chunk 1, rows 20..39",
        "--overwrite", "--verify")
_SCE = _store_content_error()

CASES = [
    Case("store-X-nan-fit-kmp", _fit("kmp")(lambda ws: ws.x_nan), _SCE, _NAN),
    Case("store-X-inf-fit-cvm", _fit("cvm")(lambda ws: ws.x_inf), _SCE,
         ("x_inf.zarr", "array 'X'", "non-finite value (inf)", "row 45, column 2", "chunk 2, rows 40..59")),
    Case("store-X-nan-fit-mmda", _fit("mmda")(lambda ws: ws.x_nan), _SCE, _NAN),
    Case("store-X-nan-fit-sparse-kpca", _fit("kpca")(lambda ws: ws.x_nan), _SCE, _NAN),
    Case("store-X-nan-evaluate", _evaluate(lambda ws: ws.x_nan), _SCE, _NAN),
    Case("store-X-nan-predict", lambda ws: _kmp(ws).fit(X, Y).predict(ws.x_nan).compute(), _SCE, _NAN),
    Case("store-X-nan-compress-pool", _compress, _SCE, _NAN),
    Case("store-y-nan-fit-regressor", _fit("kmp_reg")(lambda ws: ws.y_nan), _SCE,
         ("y_nan.zarr", "array 'y'", "non-finite value (nan)", "row 7 (chunk 0, rows 0..19)", "impute")),
    Case("store-code-5-fit-cvm", _fit("cvm")(lambda ws: ws.code_5), _SCE,
         ("code_5.zarr", "array 'y'", "label code 5", "row 33 (chunk 1, rows 20..39)", "2 classes ['neg', 'pos']",
          "integer in 0..1", "np.unique(labels, return_inverse=True)")),
    Case("store-code-minus-1-fit-kmp", _fit("kmp")(lambda ws: ws.code_minus_1), _SCE,
         ("code_minus_1.zarr", "array 'y'", "label code -1", "row 3 (chunk 0, rows 0..19)", "integer in 0..1")),
    Case("store-code-float-fit-mmda", _fit("mmda")(lambda ws: ws.code_float), _SCE,
         ("code_float.zarr", "array 'y'", "0.5, which is not an integer label code", "row 50 (chunk 2, rows 40..59)")),
    Case("store-code-5-evaluate", _evaluate(lambda ws: ws.code_5), _SCE,
         ("code_5.zarr", "array 'y'", "label code 5", "row 33")),
    Case("create_store-code-outside-classes", lambda ws: __import__("kmp_dask.store").store.create_store(
        ws.root / "coded.zarr", X, np.where(np.arange(60) == 49, 5, Y), classes=["neg", "pos"]), _SCE,
         ("the y given to ingest", "label code 5", "row 49", "2 classes ['neg', 'pos']", "integer in 0..1",
          "return_inverse=True")),
    Case("store-missing-chunk-fit", _fit("kmp")(lambda ws: ws.missing_chunk), _corrupt_error(),
         ("missing_chunk.zarr", "chunk 1 (rows 20..39) of array 'X'", "is missing", "X/c/1/0", "does not exist",
          "restore it from a copy", "--overwrite")),
    Case("store-missing-chunk-read", lambda ws: __import__("kmp_dask.store").store.open_store(ws.missing_chunk)
         .read_rows([0, 25]), _corrupt_error(), ("missing_chunk.zarr", "chunk 1 (rows 20..39)", "is missing")),
    Case("store-columns-missing-score", lambda ws: _named_model(ws).score(ws.renamed), _validation_error(),
         ("renamed.zarr", "lacks 1 of the columns", "['gamma']", "its columns: ['alpha', 'beta', 'delta']",
          "in any order")),
    Case("store-columns-missing-evaluate", lambda ws: __import__("kmp_dask.evaluation").evaluation.evaluate(
        _named_model(ws), ws.renamed, client="sync"), _validation_error(),
         ("renamed.zarr", "lacks 1 of the columns", "['gamma']")),
    Case("store-columns-renamed-predict", lambda ws: _named_model(ws).predict(ws.renamed), _validation_error(),
         ("renamed.zarr", "lacks 1 of the columns", "['gamma']", "other columns are ignored")),
]

COMMANDS = [
    Command("info-verify-nan", lambda ws: ["info", ws.x_nan, "--verify", "--no-progress"], 1,
            ("chunk 1 (rows 20..39) of array 'X'", "non-finite value (nan) at row 25, column 1")),
    Command("info-verify-missing-chunk", lambda ws: ["info", ws.missing_chunk, "--verify", "--no-progress"], 1,
            ("chunk 1 (rows 20..39) of array 'X'", "is missing", "X/c/1/0")),
    Command("info-verify-code-5", lambda ws: ["info", ws.code_5, "--verify", "--no-progress"], 1,
            ("array 'y'", "label code 5", "row 33", "integer in 0..1")),
    Command("info-verify-code-float", lambda ws: ["info", ws.code_float, "--verify", "--no-progress"], 1,
            ("array 'y'", "0.5, which is not an integer label code", "row 50")),
    Command("evaluate-X-nan-on-workers", lambda ws: ["evaluate", ws.model, ws.x_nan, "--workers", "1",
                                                     "--memory-limit", "1GB"], 1,
            ("x_nan.zarr", "array 'X'", "non-finite value (nan)", "row 25, column 1", "chunk 1")),
]
