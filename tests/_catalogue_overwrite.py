"""Failure catalogue rows, area "overwrite": nothing lost, nothing unpickled.

``--overwrite`` / ``overwrite=True`` at every door (create_store and ingest, save, predict_to_store,
write_report, run_pipeline, and the commands train / predict / ingest / compress / report / evaluate /
run) refuses what kmp_dask did not write — a user's directory or file, a store holding other
files, the current or home directory — in one line, deleting nothing; a pipeline's data names are
names; a resumed run does not unpickle a planted ``model.joblib``; ``load`` calls no constructor
through the ``enum`` kind; a truncated or object ``.npy`` in a model and an object or 0-d array given
to ingest are one clear error. The workspace is unchanged after each row (tests/_catalogue.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
from _catalogue import Case, Command

from kmp_dask import KMPClassifier, load, save
from kmp_dask._overwrite import ForeignTargetError
from kmp_dask.evaluation import predict_to_store
from kmp_dask.exceptions import DataValidationError
from kmp_dask.persist._io import ModelFileError
from kmp_dask.pipeline import SpecError, load_spec, run_pipeline
from kmp_dask.pipeline._runner import RunDirectory
from kmp_dask.report import write_report
from kmp_dask.store import create_store, store_from_arrays

_RNG = np.random.default_rng(29)
X = _RNG.normal(size=(40, 3))
Y = (X[:, 0] > 0).astype(int)
_MODEL = []

PIPELINE = """name = "cat"
[data.{name}]
source = "keel:banana"
part = "train"
[model]
estimator = "SVC"
[compress]
n_vectors = 2
data = {data}
"""


def _model():
    if not _MODEL:
        _MODEL.append(KMPClassifier(n_basis=3, random_state=0).fit(X, Y))
    return _MODEL[0]


class _Planted:
    """Unpickling this runs ``touch FLAG`` (the flag would show as a change on disk)."""

    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (os.system, (f"touch {self.flag}",))


def _pipeline(root: Path, file: str, name: str, extra: str = "") -> str:
    p = root / file
    p.write_text(extra + PIPELINE.format(name=json.dumps(name), data=json.dumps(name)))
    return str(p)


_TEMPLATE = []


def _template() -> Path:
    """The row files, built once per process (models, stores, pipelines, run directories) and
    linked into each workspace (names, sizes and modification times as built)."""
    if _TEMPLATE:
        return _TEMPLATE[0]
    import atexit
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="kmp-dask-catalogue-overwrite-"))
    atexit.register(shutil.rmtree, root, True)
    user = root / "userdir"
    user.mkdir()
    (user / "notes.txt").write_text("the user's own file\n")
    (root / "page.html").write_text("<!DOCTYPE html><html><body>the user's page</body></html>\n")
    create_store(root / "extra.zarr", X, Y, classes=["neg", "pos"])
    (root / "extra.zarr" / "README.txt").write_text("kept with the data\n")
    save(_model(), root / "kmp.model")
    truncated = save(_model(), root / "truncated.model")
    f = truncated / "arrays" / "a0000.npy"
    f.write_bytes(f.read_bytes()[:-8])
    objarr = save(_model(), root / "objarray.model")
    np.save(objarr / "arrays" / "a0000.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    enum_model = save(_model(), root / "enum.model")
    doc = json.loads((enum_model / "model.json").read_text())
    doc["state"]["n_basis_"] = {"__kind__": "enum", "class": "kmp_dask.expansion.KernelExpansion", "value": 3}
    (enum_model / "model.json").write_text(json.dumps(doc))
    np.save(root / "objects.npy", np.array([[1.0, "a"], [2.0, "b"]], dtype=object), allow_pickle=True)
    np.save(root / "scalar.npy", np.array(3.0))
    np.save(root / "rows.npy", X[:2])
    # a temporary left by an ingest killed on another host two days ago (stale), and no store
    ghost = root / f"ghost.zarr.tmp-{'ab' * 16}"
    ghost.mkdir()
    (ghost / ".kmp_dask-ingest").write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": 0.0}))
    # pipelines: a good one, and data names that are paths
    _pipeline(root, "ok.toml", "train")
    (root / "other.toml").write_text((root / "ok.toml").read_text().replace("n_vectors = 2", "n_vectors = 5"))
    (root / "collide.toml").write_text((root / "ok.toml").read_text()
                                       + '[data.train_features]\nsource = "keel:banana"\n'
                                       '[features]\ndata = ["train"]\n')
    _pipeline(root, "abs.toml", "/tmp/victim.zarr")
    _pipeline(root, "up.toml", "../../x")
    _pipeline(root, "slash.toml", "a/b")
    _pipeline(root, "empty.toml", "")
    (root / "dotdot.toml").write_text(PIPELINE.format(name='"train"', data='"train"').replace('"cat"', '".."'))
    # a run directory whose model step finished, with a pickle planted where older versions kept the SVC
    spec = load_spec(root / "ok.toml")
    run = RunDirectory(root / "planted-run", overwrite=False, resume=False)
    (run.path("pipeline.json")).write_text(json.dumps(spec, indent=2))
    (run.path("data")).mkdir()
    create_store(run.path("data", "train.zarr"), X, Y, classes=["neg", "pos"])
    run.record("data", {"train": {"n_rows": len(X)}})
    run.record("model", {"estimator": "SVC"})
    _TEMPLATE.append(root)
    return root


def _link(src, dst):
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def WORKSPACE(root: Path, ws) -> None:
    import joblib

    # hard links: fast, and the snapshot still sees any write (the inode's mtime) to a linked file
    shutil.copytree(_template(), root, dirs_exist_ok=True, symlinks=True, copy_function=_link)
    # unpickling it would create PWNED in this workspace
    joblib.dump(_Planted(root / "PWNED"), root / "planted-run" / "model.joblib")
    ws.planted_run = str(root / "planted-run")
    ws.user_dir, ws.notes, ws.page = str(root / "userdir"), str(root / "userdir" / "notes.txt"), str(root / "page.html")
    ws.extra_store, ws.ghost = str(root / "extra.zarr"), str(root / "ghost.zarr")
    for name in ("kmp", "truncated", "objarray", "enum"):
        setattr(ws, "model" if name == "kmp" else f"{name}_model", str(root / f"{name}.model"))
    ws.objects_npy, ws.scalar_npy, ws.rows_npy = (str(root / f"{n}.npy") for n in ("objects", "scalar", "rows"))
    for name in ("ok", "abs", "up", "slash", "empty", "dotdot", "other", "collide"):
        setattr(ws, "pipeline" if name == "ok" else f"pipeline_{name}", str(root / f"{name}.toml"))
    ws.spec = load_spec(ws.pipeline)


def _in(directory, fn):
    """``fn()`` with ``directory`` as the current directory (restored after)."""
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        return fn()
    finally:
        os.chdir(cwd)


def _with_home(home, fn):
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = old


def _resume(run):
    return lambda ws: run_pipeline(ws.spec, getattr(ws, run), client=None, resume=True, log=lambda *_: None)


NOT_OURS = ("nothing was deleted", "move or delete it yourself")

CASES = [
    # --- overwrite replaces only what kmp_dask wrote ------------------------------------------------
    Case("create_store-overwrite-user-dir", lambda ws: create_store(ws.user_dir, X, overwrite=True),
         ForeignTargetError, ("target", "userdir", "not a kmp_dask store", "no zarr.json", *NOT_OURS)),
    Case("create_store-overwrite-store-holding-other-files", lambda ws: create_store(ws.extra_store, X, overwrite=True),
         ForeignTargetError, ("extra.zarr", "not a kmp_dask store", "also holds README.txt", *NOT_OURS)),
    Case("create_store-overwrite-current-dir",
         lambda ws: _in(ws.user_dir, lambda: create_store(".", X, overwrite=True)),
         ForeignTargetError, ("target '.'", "the current directory", *NOT_OURS)),
    Case("create_store-overwrite-home",
         lambda ws: _with_home(ws.user_dir, lambda: create_store(ws.user_dir, X, overwrite=True)),
         ForeignTargetError, ("userdir", "your home directory", *NOT_OURS)),
    Case("save-overwrite-user-dir", lambda ws: save(_model(), ws.user_dir, overwrite=True),
         ForeignTargetError, ("path", "userdir", "not a kmp_dask model", "no model.json", *NOT_OURS)),
    Case("save-overwrite-a-store", lambda ws: save(_model(), ws.good, overwrite=True),
         ForeignTargetError, ("good.zarr", "not a kmp_dask model", *NOT_OURS)),
    Case("predict_to_store-overwrite-user-dir",
         lambda ws: predict_to_store(_model(), ws.good, ws.user_dir, overwrite=True, client="sync"),
         ForeignTargetError, ("userdir", "not a kmp_dask store", *NOT_OURS)),
    Case("predict_to_store-overwrite-its-input",
         lambda ws: predict_to_store(_model(), ws.good, ws.good, overwrite=True, client="sync"),
         ValueError, ("good.zarr", "the store the predictions are computed from", "another path")),
    Case("write_report-overwrite-user-file",
         lambda ws: write_report([("m", _model())], ws.page, overwrite=True),
         ForeignTargetError, ("output", "page.html", "not a kmp_dask report", *NOT_OURS)),
    Case("run_pipeline-overwrite-user-dir",
         lambda ws: run_pipeline(ws.spec, ws.user_dir, client=None, overwrite=True, log=lambda *_: None),
         ForeignTargetError, ("output directory", "userdir", "not a kmp_dask run directory", ".kmp_dask-run",
                              *NOT_OURS)),
    Case("run_pipeline-output-dot",
         lambda ws: _in(ws.user_dir, lambda: run_pipeline(ws.spec, ".", client=None, overwrite=True,
                                                          log=lambda *_: None)),
         ForeignTargetError, ("output directory '.'", "not a kmp_dask run directory", *NOT_OURS)),
    Case("run_pipeline-resume-user-dir",
         lambda ws: run_pipeline(ws.spec, ws.user_dir, client=None, resume=True, log=lambda *_: None),
         ForeignTargetError, ("userdir", "not a kmp_dask run directory", *NOT_OURS)),
    # --- a pipeline's data names are names ----------------------------------------------------------
    Case("pipeline-data-name-absolute", lambda ws: load_spec(ws.pipeline_abs), SpecError,
         ("abs.toml", "victim.zarr", "is not a name", "never a path")),
    Case("pipeline-data-name-parent", lambda ws: load_spec(ws.pipeline_up), SpecError,
         ("'../../x'", "is not a name", "no '/', '..'")),
    Case("pipeline-data-name-slash", lambda ws: load_spec(ws.pipeline_slash), SpecError, ("'a/b'", "is not a name")),
    Case("pipeline-data-name-empty", lambda ws: load_spec(ws.pipeline_empty), SpecError, ("''", "is not a name")),
    Case("pipeline-features-name-collision", lambda ws: load_spec(ws.pipeline_collide), SpecError,
         ("collide.toml", "[features] writes the store train_features", "[data.train_features]", "rename")),
    Case("pipeline-name-dotdot", lambda ws: load_spec(ws.pipeline_dotdot), SpecError, ("name = '..'", "is not a name")),
    # --- nothing unpickled that the run did not write -----------------------------------------------
    Case("pipeline-resume-planted-pickle", _resume("planted_run"), FileNotFoundError,
         ("model.joblib", "no longer unpickle anything", "--overwrite")),
    Case("load-enum-names-a-constructor", lambda ws: load(ws.enum_model), ValueError,
         ("kmp_dask.expansion.KernelExpansion", "as an enum, but it is not one")),
    Case("load-truncated-npy", lambda ws: load(ws.truncated_model), ModelFileError,
         ("truncated.model", "arrays/a0000.npy", "damaged", "save it again")),
    Case("load-object-npy", lambda ws: load(ws.objarray_model), ModelFileError,
         ("objarray.model", "arrays/a0000.npy", "not a plain .npy array", "allow_pickle=False")),
    Case("store_from_arrays-object-npy", lambda ws: store_from_arrays(ws.new, ws.objects_npy), DataValidationError,
         ("objects.npy", "object array", "would unpickle", "astype('float64')")),
    Case("store_from_arrays-0d-npy", lambda ws: store_from_arrays(ws.new, ws.scalar_npy), DataValidationError,
         ("scalar.npy", "0-d array", "shape ()", "2-D")),
]

COMMANDS = [
    Command("train-overwrite-user-dir", lambda ws: ["train", ws.good, "--model", ws.user_dir, "--overwrite"], 1,
            ("--model", "userdir", "not a kmp_dask model", *NOT_OURS)),
    Command("predict-overwrite-user-dir",
            lambda ws: ["predict", ws.model, ws.good, "--output", ws.user_dir, "--overwrite"], 1,
            ("--output", "userdir", "not a kmp_dask store", *NOT_OURS)),
    Command("ingest-overwrite-user-dir", lambda ws: ["ingest", "sklearn:iris", ws.user_dir, "--overwrite"], 1,
            ("target", "userdir", "not a kmp_dask store", *NOT_OURS)),
    Command("ingest-overwrite-store-holding-other-files",
            lambda ws: ["ingest", "sklearn:iris", ws.extra_store, "--overwrite"], 1,
            ("extra.zarr", "also holds README.txt", *NOT_OURS)),
    Command("compress-overwrite-user-dir",
            lambda ws: ["compress", ws.model, "--n-vectors", "2", "--model", ws.user_dir, "--overwrite"], 1,
            ("--model", "userdir", "not a kmp_dask model", *NOT_OURS)),
    Command("report-overwrite-user-file", lambda ws: ["report", ws.model, "--output", ws.page, "--overwrite"], 1,
            ("--output", "page.html", "not a kmp_dask report", *NOT_OURS)),
    Command("evaluate-output-overwrite-user-file",
            lambda ws: ["evaluate", ws.model, ws.good, "--output", ws.notes, "--overwrite"], 1,
            ("--output", "notes.txt", "not a metrics file", *NOT_OURS)),
    Command("run-overwrite-user-dir", lambda ws: ["run", ws.pipeline, "--output", ws.user_dir, "--overwrite"], 1,
            ("output directory", "userdir", "not a kmp_dask run directory", *NOT_OURS)),
    Command("run-resume-user-dir", lambda ws: ["run", ws.pipeline, "--output", ws.user_dir, "--resume"], 1,
            ("output directory", "userdir", "not a kmp_dask run directory", *NOT_OURS)),
    Command("run-resume-another-pipeline",
            lambda ws: ["run", ws.pipeline_other, "--output", ws.planted_run, "--resume"], 1,
            ("planted-run", "started from a different pipeline", "pipeline.json", "same file and options")),
    Command("run-data-name-absolute", lambda ws: ["run", ws.pipeline_abs], 1,
            ("victim.zarr", "is not a name", "never a path")),
    Command("run-data-name-parent", lambda ws: ["run", ws.pipeline_up], 1, ("'../../x'", "is not a name")),
    Command("evaluate-truncated-npy", lambda ws: ["evaluate", ws.truncated_model, ws.good], 1,
            ("truncated.model", "arrays/a0000.npy", "damaged", "save it again")),
    Command("ingest-object-npy", lambda ws: ["ingest", ws.objects_npy, ws.new], 1,
            ("objects.npy", "object array", "would unpickle")),
    Command("ingest-0d-npy", lambda ws: ["ingest", ws.scalar_npy, ws.new], 1, ("scalar.npy", "0-d array", "2-D")),
    Command("info-stale-ingest-temporary", lambda ws: ["info", ws.ghost], 1,
            ("no store at", "ghost.zarr", "1 left by ingests", f"ghost.zarr.tmp-{'ab' * 16}", "host elsewhere",
             "stale: removed by the next ingest of")),
    Command("ingest-object-labels", lambda ws: ["ingest", ws.rows_npy, ws.new, "--labels", ws.objects_npy], 1,
            ("objects.npy", "object array")),
]
