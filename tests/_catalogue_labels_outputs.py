"""Failure catalogue rows, area "labels_outputs": predictions in the format the user
names, evaluate's class matching, and what cannot be compressed or scored — each refused in one
clear line before any pass over the data (and, for commands, before a cluster starts).

The workspace's ``good.zarr`` (60 x 3, classes neg / pos) is the data; this module adds a
KMPClassifier trained on string labels, a sparse KPCA (a transformer), a sparse KCCA (two
expansions: not a compression source), a store with other class
names, a store with 5 features, a user's CSV and ``.npy`` file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
from _catalogue import Case, Command

from kmp_dask import KMPClassifier, SparseKCCA, SparseKernelPCA, save
from kmp_dask._overwrite import ForeignTargetError
from kmp_dask.evaluation import evaluate, predict_to_file
from kmp_dask.exceptions import DataValidationError
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.store import create_store

_RNG = np.random.default_rng(26)
X = _RNG.normal(size=(60, 3))
NAMES = np.array(["neg", "pos"], dtype=object)
Y = NAMES[(X[:, 0] > 0).astype(int)]
_MODELS: dict = {}
_TEMPLATE: list = []


def _clf():
    if "clf" not in _MODELS:
        _MODELS["clf"] = KMPClassifier(n_basis=3, random_state=0, client="sync").fit(X, Y)
    return _MODELS["clf"]


def _skpca():
    if "skpca" not in _MODELS:
        _MODELS["skpca"] = SparseKernelPCA(n_components=2, random_state=0, client="sync").fit(X)
    return _MODELS["skpca"]


def _kcca():
    if "kcca" not in _MODELS:
        _MODELS["kcca"] = SparseKCCA(n_components=2, random_state=0).fit(X, X[:, :2] ** 2)
    return _MODELS["kcca"]


def _dask(a):
    import dask.array as da

    return da.from_array(a, chunks=(20,) + a.shape[1:])


def _template() -> Path:
    if _TEMPLATE:
        return _TEMPLATE[0]
    import atexit
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="kmp-dask-catalogue-labels-"))
    atexit.register(shutil.rmtree, root, True)
    save(_clf(), root / "lo_clf.model")
    save(_skpca(), root / "lo_skpca.model")
    save(_kcca(), root / "lo_kcca.model")
    codes = (X[:, 0] > 0).astype(np.int64)
    create_store(root / "lo_cats.zarr", X, codes, classes=["cat", "dog"])
    create_store(root / "lo_wide.zarr", _RNG.normal(size=(20, 5)), codes[:20], classes=["neg", "pos"])
    (root / "lo_user.csv").write_text("id,label\n1,a\n2,b\n")
    np.save(root / "lo_y.npy", np.arange(5))
    _TEMPLATE.append(root)
    return root


def _link(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def WORKSPACE(root: Path, ws) -> None:
    shutil.copytree(_template(), root, dirs_exist_ok=True, copy_function=_link)
    ws.lo_clf, ws.lo_skpca, ws.lo_kcca = (str(root / f"lo_{n}.model") for n in ("clf", "skpca", "kcca"))
    ws.lo_cats, ws.lo_wide = str(root / "lo_cats.zarr"), str(root / "lo_wide.zarr")
    ws.lo_user_csv, ws.lo_y_npy = str(root / "lo_user.csv"), str(root / "lo_y.npy")
    ws.lo_txt = str(root / "pred.txt")


NOT_OURS = ("nothing was deleted", "move or delete it yourself")
FORMATS = ".csv, .parquet, .npy or .zarr"

Y_MIXED = np.array(["neg", "pos"] * 29 + [None, 3], dtype=object)

CASES = [
    Case("fit-y-mixed-label-types",
         lambda ws: KMPClassifier(n_basis=2, client="sync").fit(X, Y_MIXED),
         DataValidationError, ("y mixes label types", "NoneType (row 58: None)", "int (row 59: 3)", "y.astype(str)")),
    Case("fit-dask-y-mixed-label-types",
         lambda ws: KMPClassifier(n_basis=2, client="sync").fit(_dask(X), _dask(Y_MIXED)),
         DataValidationError, ("y mixes label types", "str (row 0: 'neg')", "int (row 59: 3)")),
    Case("predict_to_file-unknown-extension",
         lambda ws: predict_to_file(_clf(), ws.good, ws.lo_txt, client="sync"),
         ValueError, ("pred.txt", "extension '.txt'", FORMATS)),
    Case("predict_to_file-proba-without-logistic-loss",
         lambda ws: predict_to_file(_clf(), ws.good, os.path.join(ws.root, "p.csv"), output="proba", client="sync"),
         ValueError, ("KMPClassifier has no class probabilities", "loss='squared'", "loss='logistic'", "--decision")),
    Case("predict_to_file-proba-of-a-transformer",
         lambda ws: predict_to_file(_skpca(), ws.good, os.path.join(ws.root, "p.csv"), output="proba", client="sync"),
         ValueError, ("SparseKernelPCA has no class probabilities", "it is a transformer")),
    Case("predict_to_file-overwrite-user-csv",
         lambda ws: predict_to_file(_clf(), ws.good, ws.lo_user_csv, overwrite=True, client="sync"),
         ForeignTargetError, ("lo_user.csv", "not a predictions file", "header is not row,prediction", *NOT_OURS)),
    Case("predict_to_file-overwrite-npy",
         lambda ws: predict_to_file(_clf(), ws.good, ws.lo_y_npy, overwrite=True, client="sync"),
         ForeignTargetError, ("lo_y.npy", "a .npy file carries no mark", *NOT_OURS)),
    Case("predict_to_file-other-feature-count",
         lambda ws: predict_to_file(_clf(), ws.lo_wide, os.path.join(ws.root, "p.csv"), client="sync"),
         DataValidationError, ("lo_wide.zarr", "has 5 features", "fitted on 3", "training data's columns")),
    Case("evaluate-no-class-in-common",
         lambda ws: evaluate(_clf(), ws.lo_cats, client="sync"),
         ValueError, ("lo_cats.zarr", "['cat', 'dog']", "['neg', 'pos']", "no class name in common",
                      "'classes' attribute")),
    Case("compress-kcca-two-expansions",
         lambda ws: ReducedSetCompressor(n_vectors=2).fit(_kcca()),
         TypeError, ("model must be one of", "kmp_dask.CVMClassifier", "kmp_dask.MMDA", "SparseKCCA",
                     "KernelExpansion(support_vectors")),
]

COMMANDS = [
    Command("predict-output-unknown-extension",
            lambda ws: ["predict", ws.lo_clf, ws.good, "--output", ws.lo_txt], 1,
            ("pred.txt", "extension '.txt'", FORMATS)),
    Command("predict-proba-and-decision",
            lambda ws: ["predict", ws.lo_clf, ws.good, "--output", os.path.join(ws.root, "p.csv"), "--proba",
                        "--decision"], 2,
            ("--proba and --decision are exclusive",)),
    Command("predict-proba-squared-loss",
            lambda ws: ["predict", ws.lo_clf, ws.good, "--output", os.path.join(ws.root, "p.csv"), "--proba"], 1,
            ("KMPClassifier has no class probabilities", "loss='logistic'")),
    Command("predict-overwrite-user-csv",
            lambda ws: ["predict", ws.lo_clf, ws.good, "--output", ws.lo_user_csv, "--overwrite"], 1,
            ("--output", "lo_user.csv", "not a predictions file", *NOT_OURS)),
    Command("predict-other-feature-count",
            lambda ws: ["predict", ws.lo_clf, ws.lo_wide, "--output", os.path.join(ws.root, "p.csv")], 1,
            ("has 5 features", "fitted on 3")),
    Command("evaluate-a-transformer",
            lambda ws: ["evaluate", ws.lo_skpca, ws.good], 1,
            ("SparseKernelPCA (a transformer)", "nothing to score", "predict")),
    Command("cli-evaluate-no-class-in-common",
            lambda ws: ["evaluate", ws.lo_clf, ws.lo_cats], 1,
            ("['cat', 'dog']", "no class name in common")),
    Command("evaluate-other-feature-count",
            lambda ws: ["evaluate", ws.lo_clf, ws.lo_wide], 1,
            ("has 5 features", "fitted on 3")),
    Command("cli-compress-kcca",
            lambda ws: ["compress", ws.lo_kcca, "--n-vectors", "2", "--model", os.path.join(ws.root, "c.model")], 1,
            ("model must be one of", "kmp_dask.MMDA", "SparseKCCA")),
]
