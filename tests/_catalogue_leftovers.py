"""Failure catalogue rows of area "leftovers": damaged model files, a resume on a store changed in
place, outputs that cannot be written (a name past the file system's limit, a dangling link, a
directory) and configuration refused before any step (a pipeline's ``[run] workers``, an ``inproc://``
scheduler).

``WORKSPACE`` adds a good saved model (``ok_model``), one with NaN coefficients (``nan_model``), one
with a negative gamma (``gamma_model``), one whose ``model.json`` names an array file with a NUL
byte (``nul_model``), one whose ``.npy`` header claims 8 TiB (``huge_model``), one whose
``model.json`` nests 100,000 lists (``deep_model``), a store with a checkpoint written before its
middle chunk was rewritten in place (``changed_store``, ``changed_ckpt``), a directory named
``dir.csv`` and a pipeline file with ``[run] workers = -3`` (``workers_toml``).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import zarr
from _catalogue import Case, Command

from kmp_dask import KMPClassifier, load, save
from kmp_dask.evaluation import predict_to_file
from kmp_dask.persist import ModelFileError
from kmp_dask.pipeline import SpecError, load_spec
from kmp_dask.store import create_store

_RNG = np.random.default_rng(44)
X = _RNG.normal(size=(60, 3))
Y = (X[:, 0] > 0).astype(int)
_PARAMS = {"n_basis": 3, "random_state": 0, "client": "sync"}


@lru_cache(maxsize=1)
def _model():
    return KMPClassifier(n_basis=4, random_state=0).fit(X, Y)


def _doc(m: Path) -> dict:
    return json.loads((m / "model.json").read_text())


def _coef(m: Path) -> Path:
    return m / _doc(m)["state"]["expansion_"]["state"]["coef"]["file"]


def _nan(m: Path) -> None:
    a = np.load(_coef(m))
    a[0] = np.nan
    np.save(_coef(m), a)


def _gamma(m: Path) -> None:
    doc = _doc(m)
    for pair in doc["state"]["expansion_"]["state"]["kernels"]["items"][0]["state"]["params"]["items"]:
        if pair["items"][0] == "gamma":
            pair["items"][1] = -0.5
    (m / "model.json").write_text(json.dumps(doc))


def _nul(m: Path) -> None:
    doc = _doc(m)
    doc["state"]["expansion_"]["state"]["coef"]["file"] = "arrays/a\x00.npy"
    (m / "model.json").write_text(json.dumps(doc))


def _huge(m: Path) -> None:
    f = _coef(m)
    a = np.load(f)
    header = {**np.lib.format.header_data_from_array_1_0(a), "shape": (2**40, 8)}
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    f.write_bytes(buf.getvalue() + a.tobytes())


def _deep(m: Path) -> None:
    text, depth = json.dumps(_doc(m)), 100_000
    (m / "model.json").write_text(text[:-2] + ', "deep_": ' + "[" * depth + "0" + "]" * depth + "}}")


def _changed_store(root: Path):
    from kmp_dask.estimators._base import open_fit_checkpoint
    from kmp_dask.store import ZarrStore

    store = create_store(root / "changed.zarr", X, Y, chunk_rows=20, classes=["neg", "pos"])
    est = KMPClassifier(**_PARAMS)
    ckpt = open_fit_checkpoint(est, root / "changed-ckpt", 10, False, ZarrStore(store.url), True)
    ckpt.save_payload({"unread": True})  # the header is what a resume checks first
    ckpt.release()
    arr = zarr.open_array(store=str(root / "changed.zarr" / "X"), mode="r+")
    arr[20:40] = arr[20:40][::-1]  # the middle chunk rewritten in place; attributes untouched
    os.utime(root / "changed.zarr" / "X" / "c" / "1" / "0", ns=(0, 10**18))


_DAMAGES = {"ok": None, "nan": _nan, "gamma": _gamma, "nul": _nul, "huge": _huge, "deep": _deep}


@lru_cache(maxsize=1)
def _model_files() -> dict[str, dict[str, bytes]]:
    """The files of each model of the workspace (made once, then written byte for byte)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, damage in _DAMAGES.items():
            m = Path(tmp, f"{name}.model")
            save(_model(), m)
            if damage is not None:
                damage(m)
            out[name] = {str(f.relative_to(m)): f.read_bytes() for f in sorted(m.rglob("*")) if f.is_file()}
    return out


def WORKSPACE(root: Path, ws) -> None:  # noqa: N802 (the hook's name)
    for name, files in _model_files().items():
        m = root / f"{name}.model"
        for rel, data in files.items():
            (m / rel).parent.mkdir(parents=True, exist_ok=True)
            (m / rel).write_bytes(data)
        setattr(ws, f"{name}_model", str(m))
    _changed_store(root)
    ws.changed_store, ws.changed_ckpt = str(root / "changed.zarr"), str(root / "changed-ckpt")
    (root / "dir.csv").mkdir()
    (root / "workers.toml").write_text('name = "w"\n[data.train]\nsource = "synthetic:classification"\nn_rows = 100\n'
                                       '[model]\nalgorithm = "kmp"\n[run]\nworkers = -3\n')
    ws.workers_toml = str(root / "workers.toml")


def _dangling(ws):
    link = ws.root / "link.csv"
    link.symlink_to(ws.root / "nowhere" / "x.csv")
    try:
        return predict_to_file(_model(), ws.good, link)
    finally:
        link.unlink()


_LONG = "n" * 252 + ".csv"  # 256 bytes: one past the usual limit

CASES = [
    Case("load-nan-coefficients", lambda ws: load(ws.nan_model), ModelFileError,
         ("nan.model", "non-finite value", "coef", "save it again")),
    Case("load-negative-gamma", lambda ws: load(ws.gamma_model), ModelFileError,
         ("gamma.model", "invalid kernel", "gamma", "-0.5")),
    Case("load-nul-in-array-name", lambda ws: load(ws.nul_model), ModelFileError,
         ("nul.model", "'arrays/a\\x00.npy'", "not a name kmp_dask.save writes")),
    Case("load-npy-header-claims-64-TiB", lambda ws: load(ws.huge_model), ModelFileError,
         ("huge.model", "announces shape (1099511627776, 8)", "64.0 TiB", "damaged"), absent=("out of memory",)),
    Case("load-json-nested-100000-deep", lambda ws: load(ws.deep_model), ModelFileError,
         ("deep.model", "nested too deeply", "save it again")),
    Case("KMPClassifier-resume-store-changed-in-place",
         lambda ws: KMPClassifier(**_PARAMS).fit(ws.changed_store, checkpoint=ws.changed_ckpt, resume=True),
         ValueError, ("is of another fit", "chunk files changed since the checkpoint was written", "remove it")),
    Case("pipeline-run-workers=-3", lambda ws: load_spec(ws.workers_toml), SpecError,
         ("[run] workers = -3", "1 to 256")),
    Case("predict_to_file-name-256-bytes", lambda ws: predict_to_file(_model(), ws.good, ws.root / _LONG), ValueError,
         ("256 bytes long", "at most 255", "shorter name")),
    Case("predict_to_file-dangling-link", _dangling, ValueError,
         ("link.csv", "symbolic link", "does not exist", "remove the link")),
    Case("predict_to_file-output-is-a-directory",
         lambda ws: predict_to_file(_model(), ws.good, ws.root / "dir.csv", overwrite=True), IsADirectoryError,
         ("dir.csv", "is a directory", "path of a file")),
]

COMMANDS = [
    Command("evaluate-model-with-nan-coefficients", lambda ws: ["evaluate", ws.nan_model, ws.good], 1,
            ("non-finite value", "save it again")),
    Command("evaluate-model-npy-header-claims-64-TiB", lambda ws: ["evaluate", ws.huge_model, ws.good], 1,
            ("announces shape", "64.0 TiB"), absent=("out of memory", "--n-basis")),
    Command("predict-output-name-256-bytes",
            lambda ws: ["predict", ws.ok_model, ws.good, "--output", str(ws.root / _LONG)], 1,
            ("--output", "256 bytes long", "shorter name")),
    Command("predict-output-directory-overwrite",
            lambda ws: ["predict", ws.ok_model, ws.good, "--output", str(ws.root / "dir.csv"), "--overwrite"], 1,
            ("--output", "dir.csv", "is a directory")),
    Command("evaluate-scheduler-inproc",
            lambda ws: ["evaluate", ws.ok_model, ws.good, "--scheduler", "inproc://x"], 2,
            ("inproc://", "cannot reach", "tcp://")),
    Command("run-workers=-3", lambda ws: ["run", ws.workers_toml, "--output", str(ws.root / "run-out")], 1,
            ("[run] workers = -3", "1 to 256")),
]
