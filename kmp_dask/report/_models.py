"""What the report knows about a fitted model: which it is, whether it is fitted, and its summary.

Duck-typed on the fitted attributes (``history_``, ``path_``, ``bound_path_`` …), so this module
imports none of the estimators (they import the dask engine) and works the same on a model fitted
in this process and on one loaded from disk. Every function returns plain numbers, strings and
numpy arrays; the series to plot are in :mod:`._series`, drawing is :mod:`._plots`' job.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["KNOWN_CLASSES", "as_named_models", "unwrap_search", "check_model", "task_of", "compressor_of", "fit_time",
           "summary_rows"]

#: the kmp_dask estimators a report accepts, and the attribute that shows each is fitted
KNOWN_CLASSES = {
    "KMPRegressor": "expansion_", "KMPClassifier": "expansion_", "CVMClassifier": "expansion_",
    "MMDA": "expansion_", "SparseKernelPCA": "expansion_", "SparseKCCA": "expansion_x_",
    "ReducedSetCompressor": "expansion_", "ReducedSetClassifier": "compressor_",
    "ReducedSetRegressor": "compressor_",
}

#: constructor parameters shown in the summary, when the estimator has them
KEY_PARAMS = ("n_basis", "n_components", "max_components", "n_vectors", "kernel", "gamma", "kernel_x",
              "gamma_x", "kernel_y", "gamma_y", "C", "eps", "reg", "fit_mode", "loss", "candidates", "method",
              "backfit", "select", "stopping", "bound_threshold", "validation_fraction", "estimator")


def _kmp_dask_class(model) -> str | None:
    """The kmp_dask estimator class ``model`` is (or derives from), by name; None if none."""
    for cls in type(model).__mro__:
        if cls.__name__ in KNOWN_CLASSES and cls.__module__.startswith("kmp_dask."):
            return cls.__name__
    return None


def check_model(name: str, model) -> None:
    """Raise TypeError (not a kmp_dask estimator) or ValueError (not fitted), naming ``name``."""
    base = _kmp_dask_class(model)
    if base is None:
        raise TypeError(f"model {name!r} is a {type(model).__module__}.{type(model).__name__}, not a kmp_dask "
                        f"estimator; the report takes fitted {', '.join(sorted(KNOWN_CLASSES))}")
    if not hasattr(model, KNOWN_CLASSES[base]):
        raise ValueError(f"model {name!r} ({type(model).__name__}) is not fitted (no {KNOWN_CLASSES[base]}); "
                         "call fit first, or load a saved model")


def as_named_models(models) -> list[tuple[str, object]]:
    """``models`` (list of (name, estimator) pairs, or dict name → estimator) as a checked list."""
    if isinstance(models, Mapping):
        items = list(models.items())
    elif isinstance(models, (str, bytes)) or not hasattr(models, "__iter__"):
        raise TypeError(f"models must be a list of (name, fitted estimator) pairs or a dict name -> estimator; "
                        f"got {type(models).__name__}")
    else:
        items = list(models)
    if not items:
        raise ValueError("models is empty: pass at least one (name, fitted estimator) pair")
    out = []
    for i, item in enumerate(items):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"models[{i}] must be a (name, fitted estimator) pair; got {type(item).__name__}")
        name, model = str(item[0]), unwrap_search(str(item[0]), item[1])
        check_model(name, model)
        out.append((name, model))
    return out


def unwrap_search(name: str, model):
    """A fitted ``KMPClassifierCV`` / ``KMPRegressorCV`` as its ``best_estimator_`` (the model it
    saves; it carries the search's scores in ``cv_search_``); any other model unchanged."""
    names = {c.__name__ for c in type(model).__mro__ if c.__module__.startswith("kmp_dask.")}
    if not names & {"KMPClassifierCV", "KMPRegressorCV"}:
        return model
    if not hasattr(model, "best_estimator_"):
        raise ValueError(f"model {name!r} ({type(model).__name__}) is not fitted (no best_estimator_); call fit "
                         "first, or load a model saved by `kmp-dask train --cv K`")
    return model.best_estimator_


def task_of(model) -> str:
    """``"classifier"``, ``"regressor"`` or ``"transformer"``."""
    if hasattr(model, "transform") and not hasattr(model, "predict"):
        return "transformer"
    return "classifier" if getattr(model, "classes_", None) is not None else "regressor"


def compressor_of(model):
    """The fitted ReducedSetCompressor inside ``model`` (itself, or a meta-estimator's), or None."""
    if hasattr(model, "path_") and hasattr(model, "target_"):
        return model
    return getattr(model, "compressor_", None)


# -- summary ----------------------------------------------------------------------------------------

def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, np.ndarray):
        return ", ".join(_fmt(x.item() if hasattr(x, "item") else x) for x in v.ravel()[:8]) + \
            (" …" if v.size > 8 else "")
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v[:8]) + (" …" if len(v) > 8 else "")
    s = repr(v) if not isinstance(v, str) else v
    return s if len(s) <= 80 else s[:77] + "…"


def _params(model) -> list[tuple[str, str]]:
    try:
        p = model.get_params(deep=False)
    except Exception:  # noqa: BLE001 — a summary row is not worth failing the report for
        return []
    return [(k, _fmt(p[k])) for k in KEY_PARAMS if k in p and p[k] is not None]


def _size(model) -> list[tuple[str, str]]:
    comp = compressor_of(model)
    if comp is not None:
        full = getattr(getattr(comp, "target_", None), "expansion", None)
        of = f" (of {full.n_vectors} in the {comp.target_.source} model)" if full is not None else ""
        return [("vectors", f"{comp.n_vectors_}{of}")]
    rows = []
    for attr, label in (("n_basis_", "basis functions"), ("n_components_", "components"),
                        ("n_features_out_", "features"), ("kernel_evaluations_per_feature_",
                                                         "kernel evaluations per feature")):
        if hasattr(model, attr):
            rows.append((label, _fmt(getattr(model, attr))))
    if hasattr(model, "radius_"):
        rows += [("core vectors (union)", str(model.expansion_.n_vectors)), ("ball radius R", _fmt(model.radius_))]
    elif hasattr(model, "core_sizes_"):
        rows.append(("vectors (union)", str(model.expansion_.n_vectors)))
    return rows


def fit_time(model) -> str:
    """The recorded fit time: the compressor's ``seconds_``, or the sum of the iterations' times."""
    comp = compressor_of(model)
    secs = getattr(comp, "seconds_", None) if comp is not None else None
    if secs is not None:
        return f"{float(secs):.3g} s"
    if getattr(model, "fit_seconds_", None) is not None:  # CVMClassifier, MMDA: the fit's wall-clock time
        return f"{float(model.fit_seconds_):.3g} s"
    secs = [h.get("seconds") for h in (getattr(model, "history_", None) or []) if h.get("seconds") is not None]
    return f"{float(np.sum(secs)):.3g} s (sum over iterations)" if secs else "not recorded"


def _progress(model) -> list[tuple[str, str]]:
    comp = compressor_of(model)
    stop = getattr(model, "stop_reason_", None) or getattr(comp, "stop_reason_", None)
    rows = [("stop reason", _fmt(stop) if stop is not None else "not recorded")]
    if hasattr(model, "n_iter_"):
        rows.append(("iterations", _fmt(model.n_iter_)))
    elif comp is not None and getattr(comp, "path_", None):
        rows.append(("path levels", str(len(comp.path_))))
    if hasattr(model, "n_passes_"):
        rows.append(("data passes", str(model.n_passes_)))
    if hasattr(model, "n_full_passes_"):
        rows.append(("full data passes", _fmt(model.n_full_passes_)))
    return rows + [("fit time", fit_time(model))]


def summary_rows(model) -> list[tuple[str, str]]:
    """(field, value) rows: class, task, key parameters, size, stop reason, iterations, fit time,
    and each warning the fit recorded (``fit_warnings_``)."""
    rows = [("class", type(model).__name__), ("task", task_of(model))]
    kernel = getattr(model, "kernel_", None)
    if kernel is not None:
        rows.append(("fitted kernel", _fmt(kernel)))
    return rows + _params(model) + _size(model) + _prefix_kept(model) + _progress(model) + _warnings(model)


def _prefix_kept(model) -> list[tuple[str, str]]:
    """A compression replaced by the source KMP model's own prefix (``used_prefix_``), said in its
    own row: the model is then not a compression at all."""
    if getattr(model, "used_prefix_", False) is not True:
        return []
    k = getattr(model, "n_vectors_", None)
    return [("compression", f"not used: the compressed model was worse on the labelled pool than the source KMP "
                            f"model's own first {k} basis functions, so this model is that prefix "
                            "(used_prefix_ = True)")]


def _warnings(model) -> list[tuple[str, str]]:
    """The fit's suspect-result warnings (``fit_warnings_``: class and message), one row each."""
    found = getattr(model, "fit_warnings_", None) or []
    return [("warning" if len(found) == 1 else f"warning {i + 1}", str(w)) for i, w in enumerate(found)]
