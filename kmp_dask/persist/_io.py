"""``save`` / ``load`` / ``model_info``: the open model format on disk (docs/models.md).

A model is a directory::

    model.json      format name and version, kmp_dask version, creation time, class,
                    parameters, a summary (sizes, classes), and every fitted attribute
                    encoded by :mod:`._codec`
    arrays/*.npy    the arrays, NumPy's own format, written and read without pickle

``save`` writes into a temporary sibling directory and renames it into place; replacing an
existing model (``overwrite=True``) renames the old one aside first and deletes it only after
the new one is in place, so ``path`` never holds a half-written model. Loading imports no
dask and unpickles nothing.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .._temporaries import check_output_path, remove_stale, temporary
from ._checks import ModelFileError, check_array_name, check_depth, check_npy_size, check_values
from ._codec import ALLOWED, Encoder, decode, qualname, resolve

__all__ = ["save", "load", "model_info", "FORMAT", "FORMAT_VERSION", "ModelFileError"]

FORMAT = "kmp_dask-model"
FORMAT_VERSION = 1
#: Fitted attributes that hold a third-party model; not stored (prediction does not use them).
DROPPED = ("estimator_",)
SUMMARY = ("n_basis_", "n_vectors_", "n_components_", "n_features_in_", "n_iter_", "stop_reason_")


def _check_model(model) -> None:
    if qualname(model) not in ALLOWED or not hasattr(model, "__dict__"):
        raise TypeError(f"model must be a fitted kmp_dask estimator or a KernelExpansion; got {type(model).__name__}")
    if hasattr(model, "get_params") and not any(k.endswith("_") and not k.startswith("_") for k in vars(model)):
        raise ValueError(f"model ({type(model).__name__}) is not fitted: fit it before saving")


def _summary(model) -> dict:
    out = {}
    for k in SUMMARY:
        v = getattr(model, k, None)
        if isinstance(v, (int, np.integer, str)):
            out[k] = v.item() if isinstance(v, np.generic) else v
    if getattr(model, "classes_", None) is not None:  # a compressed regression model has classes_ None
        out["classes_"] = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(model.classes_).tolist()]
    return out


def _document(model) -> tuple[dict, dict]:
    from .._version import __version__

    enc = Encoder()
    state = {k: v for k, v in vars(model).items() if k not in DROPPED}
    if "client" in state:
        state["client"] = None
    params = ({k: v for k, v in model.get_params(deep=False).items() if k != "client"}
              if hasattr(model, "get_params") else {})
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "kmp_dask_version": __version__,
           "created": datetime.now(UTC).isoformat(timespec="seconds"), "class": qualname(model),
           "params": enc.encode(params, "params"), "summary": _summary(model),
           "dropped": sorted(k for k in DROPPED if k in vars(model)),
           "state": {k: enc.encode(v, k) for k, v in state.items()}}
    return doc, enc.arrays


def save(model, path, *, overwrite: bool = False) -> Path:
    """Save a fitted kmp_dask model (or a KernelExpansion) to the directory ``path``."""
    _check_model(model)
    check_output_path(path, "path", file=False)
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"path {str(path)!r} already exists; pass overwrite=True to replace it")
    if path.exists():  # overwrite=True replaces only a kmp_dask model (kmp_dask/_overwrite.py)
        from .._overwrite import check_replaceable

        check_replaceable(path, ("model",), option="path")
    doc, arrays = _document(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)  # the temporaries of earlier saves to ``path`` that were killed
    with temporary(path, directory=True) as tmp:  # locked until renamed (kmp_dask/_temporaries.py)
        (tmp / "arrays").mkdir()
        for name, a in arrays.items():
            np.save(tmp / name, a, allow_pickle=False)
        (tmp / "model.json").write_text(json.dumps(doc, indent=1, allow_nan=True), encoding="utf-8")
        _swap_in(tmp, path)
    return path


def _swap_in(tmp: Path, path: Path) -> None:
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
        os.rmdir(old)
        os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()


def _read_document(path) -> tuple[Path, dict]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no kmp_dask model at {str(path)!r}")
    meta = path / "model.json"
    if not meta.is_file():
        raise ValueError(f"{str(path)!r} is not a kmp_dask model: it has no model.json "
                         "(kmp_dask.save writes a directory holding model.json and arrays/)")
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{str(path)!r} is not a kmp_dask model: model.json is not JSON ({exc})") from None
    except RecursionError:  # nested deeper than the JSON parser goes
        raise ModelFileError(f"{str(path)!r}: model.json is nested too deeply to read, which kmp_dask.save never "
                             "writes; the model cannot be loaded — save it again (kmp_dask.save / kmp-dask train)"
                             ) from None
    check_depth(doc, path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a kmp_dask model: model.json has format "
                         f"{doc.get('format') if isinstance(doc, dict) else None!r}, not {FORMAT!r}")
    version = doc.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise ValueError(f"{str(path)!r} has model format version {version!r}, written by kmp_dask "
                         f"{doc.get('kmp_dask_version')}; this kmp_dask reads format version {FORMAT_VERSION} "
                         "and older. Upgrade kmp_dask to load it.")
    return path, doc


def load(path):
    """The model saved at ``path`` by :func:`save` (no dask import, no unpickling)."""
    path, doc = _read_document(path)
    root = path.resolve()

    def load_array(name):
        f = (path / check_array_name(name, path)).resolve()
        if root not in f.parents:
            raise ValueError(f"{str(path)!r}: array reference {name!r} points outside the model directory")
        try:
            check_npy_size(f, name, path)  # the header's claim against the file's size, before any allocation
            return np.load(f, allow_pickle=False)
        except ModelFileError:
            raise
        except FileNotFoundError:
            raise ModelFileError(f"{str(path)!r}: the array file {name!r} that model.json refers to is missing; the "
                                 "model is incomplete — save it again (kmp_dask.save / kmp-dask train)") from None
        except (ValueError, OSError, EOFError) as exc:  # truncated, an object array (pickle), not .npy
            raise ModelFileError(f"{str(path)!r}: the array file {name!r} is damaged or not a plain .npy array "
                                 f"({' '.join(str(exc).split())}); the model cannot be loaded — save it again "
                                 "(kmp_dask.save / kmp-dask train)") from None

    cls = resolve(doc.get("class"))
    state = doc.get("state")
    if not isinstance(state, dict):
        raise ModelFileError(f"{str(path)!r}: model.json has no 'state' object; the file is damaged — "
                             "save the model again")
    obj = cls.__new__(cls)
    for k, v in state.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ModelFileError(f"{str(path)!r}: model.json names the attribute {k!r}, which is not a Python name; "
                                 "the file is damaged — save the model again (kmp_dask.save / kmp-dask train)")
        object.__setattr__(obj, k, decode(v, load_array))
    check_values(obj, path)  # finite coefficients, valid kernels
    _default_new_params(obj)
    return obj


def _default_new_params(obj) -> None:
    """Constructor parameters added after a model was saved (e.g. ``standardize``) take their
    declared defaults, so that ``get_params`` / ``clone`` work on models saved by older versions;
    the fitted state (what predictions use) is the file's."""
    if not hasattr(obj, "get_params"):
        return
    try:
        signature = inspect.signature(type(obj).__init__)
    except (TypeError, ValueError):
        return
    for name, p in signature.parameters.items():
        if name != "self" and p.default is not inspect.Parameter.empty and not hasattr(obj, name):
            object.__setattr__(obj, name, p.default)


def model_info(path) -> dict:
    """What a saved model is, from its JSON only (class, versions, parameters, sizes)."""
    path, doc = _read_document(path)
    params = decode(doc.get("params", {}), lambda name: f"<array {name}>")
    return {"path": str(path), "class": str(doc.get("class")).rsplit(".", 1)[-1],
            "format_version": doc["format_version"],
            "kmp_dask_version": doc.get("kmp_dask_version"), "created": doc.get("created"),
            "params": params, **doc.get("summary", {}), "dropped": doc.get("dropped", [])}
