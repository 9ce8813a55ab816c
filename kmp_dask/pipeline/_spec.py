"""Pipeline files: one TOML file describing data → model → (compress | features → downstream)
→ evaluate → report, and where it runs. See docs/pipelines.md for the format.

A spec is validated whole before anything runs: unknown tables or keys, a step that names a
data set the file does not define, a missing model — each one clear error naming the key.
``[small]`` holds dotted-path overrides applied by ``--small`` (the tests' switch), e.g.
``"data.train.n_rows" = 4000``.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from pathlib import Path

__all__ = ["load_spec", "SpecError"]

TABLES = {"name", "description", "output", "data", "model", "compress", "features", "downstream", "evaluate",
          "report", "run", "small"}
DATA_KEYS = {"source", "n_rows", "seed", "start_row", "part", "test_size", "chunk_rows", "n_features", "n_classes",
             "label", "no_label", "drop", "delimiter", "header"}
#: ``test_size`` of a data set that names a ``part`` but no ``test_size``.
DEFAULT_TEST_SIZE = 0.3
MODEL_KEYS = {"algorithm", "task", "params", "checkpoint_every", "estimator", "cv"}
COMPRESS_KEYS = {"n_vectors", "method", "data", "params", "checkpoint_every"}
FEATURES_KEYS = {"data"}
DOWNSTREAM_KEYS = {"estimator", "params", "train", "test"}
EVALUATE_KEYS = {"data"}
REPORT_KEYS = {"data", "title", "sample_rows"}
RUN_KEYS = {"scheduler", "workers", "threads_per_worker", "memory_limit"}
#: ``[run] scheduler`` values that name no running cluster (else an address or a scheduler file).
SCHEDULER_MODES = ("auto", "sync", "local")
#: scikit-learn estimators a pipeline may name (``model.estimator`` / ``downstream.estimator``).
SKLEARN = {"SVC": "sklearn.svm", "SVR": "sklearn.svm", "NuSVC": "sklearn.svm", "KernelRidge": "sklearn.kernel_ridge",
           "KNeighborsClassifier": "sklearn.neighbors", "LogisticRegression": "sklearn.linear_model",
           "RidgeClassifier": "sklearn.linear_model", "LinearSVC": "sklearn.svm"}


#: ``algorithm`` values (CLI ``--algorithm``, pipelines' ``model.algorithm``) → (classifier, regressor).
ALGORITHMS = {
    "kmp": ("KMPClassifier", "KMPRegressor"),
    "kmp-cv": ("KMPClassifierCV", "KMPRegressorCV"),  # γ and the size by cross-validation along the path
    "cvm": ("CVMClassifier", None),
    "mmda": ("MMDA", None),
    "skpca": ("SparseKernelPCA", "SparseKernelPCA"),
}


def estimator_class(name: str):
    import kmp_dask

    return getattr(kmp_dask, name)


def class_for(algorithm: str, task: str):
    """The estimator class of ``algorithm`` for data whose task is ``task``."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; use one of {', '.join(sorted(ALGORITHMS))}")
    clf, reg = ALGORITHMS[algorithm]
    if task == "regression":
        if reg is None:
            raise ValueError(f"algorithm {algorithm} needs class labels; this store holds a regression target")
        return estimator_class(reg)
    return estimator_class(clf)


class SpecError(ValueError):
    """The pipeline file is not valid; the message names the file and the key."""


def _check_keys(where: str, table, allowed: set, path) -> None:
    if not isinstance(table, dict):
        raise SpecError(f"{path}: [{where}] must be a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SpecError(f"{path}: unknown key {unknown[0]!r} in [{where}]; allowed: {', '.join(sorted(allowed))}")


def _apply_small(spec: dict, path) -> dict:
    out = copy.deepcopy(spec)
    for dotted, value in spec.get("small", {}).items():
        *parents, leaf = dotted.split(".")
        node = out
        for key in parents:
            if not isinstance(node.get(key), dict):
                raise SpecError(f"{path}: [small] key {dotted!r} names no table of the pipeline")
            node = node[key]
        node[leaf] = value
    return out


def _data_refs(spec: dict) -> list[tuple[str, str]]:
    refs = [("evaluate.data", spec.get("evaluate", {}).get("data")),
            ("report.data", spec.get("report", {}).get("data")),
            ("compress.data", spec.get("compress", {}).get("data"))]
    refs += [("features.data", d) for d in spec.get("features", {}).get("data", [])]
    return [(k, v) for k, v in refs if v is not None]


#: A data set's (and a pipeline's) name: it becomes a file name inside the run directory, so it is
#: a name, not a path (no '/', '\\', '..', leading dot, or empty name).
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def _check_name(value, key: str, path) -> None:
    if not isinstance(value, str) or not NAME.match(value) or ".." in value:
        raise SpecError(f"{path}: {key} = {value!r} is not a name: use letters, digits, '_', '-', '.' and '+' "
                        "(starting with a letter or digit; no '/', '..' or empty name) — it names a file inside "
                        "the run directory, never a path")


def validate(spec: dict, path) -> None:
    _check_keys("top level", spec, TABLES, path)
    if "data" not in spec or not spec["data"]:
        raise SpecError(f"{path}: a pipeline needs a [data.NAME] table (e.g. [data.train])")
    if "name" in spec:
        _check_name(spec["name"], "name", path)
    if "output" in spec and (not isinstance(spec["output"], str) or not spec["output"].strip()):
        raise SpecError(f"{path}: output = {spec['output']!r} must be a non-empty path of the run directory")
    if "output" in spec:  # "~/x": the home directory, once for every step (never a literal ./~/x as well)
        spec["output"] = os.path.expanduser(spec["output"])
    for name, d in spec["data"].items():
        _check_name(name, f"[data.{name!r}]", path)
        _check_keys(f"data.{name}", d, DATA_KEYS, path)
        if "source" not in d:
            raise SpecError(f"{path}: [data.{name}] needs a 'source' (synthetic:classification, keel:NAME, "
                            "a .csv/.parquet/.npz file or a .zarr store, ...)")
        _check_source(name, d, path)
    if "model" not in spec:
        raise SpecError(f"{path}: a pipeline needs a [model] table")
    for table, keys in (("model", MODEL_KEYS), ("compress", COMPRESS_KEYS), ("features", FEATURES_KEYS),
                        ("downstream", DOWNSTREAM_KEYS), ("evaluate", EVALUATE_KEYS), ("report", REPORT_KEYS),
                        ("run", RUN_KEYS)):
        if table in spec:
            _check_keys(table, spec[table], keys, path)
    if "compress" in spec and "n_vectors" not in spec["compress"]:
        raise SpecError(f"{path}: [compress] needs n_vectors (vectors to keep: an int, or a fraction of the "
                        "model's, e.g. n_vectors = 0.2)")
    _apply_model_cv(spec["model"], path)
    algo = spec["model"].get("algorithm", "kmp")
    if algo not in ALGORITHMS:
        raise SpecError(f"{path}: model.algorithm = {algo!r}; use one of {', '.join(sorted(ALGORITHMS))}")
    for est in (spec["model"].get("estimator"), spec.get("downstream", {}).get("estimator")):
        if est is not None and est not in SKLEARN:
            raise SpecError(f"{path}: estimator {est!r} is not one a pipeline may use; "
                            f"choose from {', '.join(sorted(SKLEARN))}")
    for d in spec.get("features", {}).get("data", []):
        if f"{d}_features" in spec["data"]:
            raise SpecError(f"{path}: [features] writes the store {d}_features, which [data.{d}_features] also "
                            "names; rename that data set")
    names = set(spec["data"]) | {f"{d}_features" for d in spec.get("features", {}).get("data", [])}
    for key, ref in _data_refs(spec) + [("downstream.train", spec.get("downstream", {}).get("train")),
                                        ("downstream.test", spec.get("downstream", {}).get("test"))]:
        if ref is not None and ref not in names:
            raise SpecError(f"{path}: {key} = {ref!r} names no data set; defined: {', '.join(sorted(names))}")
    _check_run(spec.get("run", {}), path)
    _check_params(spec, path)


def _apply_model_cv(m: dict, path) -> None:
    """``[model] cv = K``: the KMP model chosen by K-fold cross-validation (algorithm ``kmp-cv``
    with ``params.cv = K``); only for the kmp algorithm."""
    if "cv" not in m:
        return
    cv = m.pop("cv")
    if cv != "auto" and (isinstance(cv, bool) or not isinstance(cv, int) or cv < 2):
        raise SpecError(f"{path}: model.cv = {cv!r}; use a whole number of folds ≥ 2 (e.g. cv = 5) or "
                        "\"auto\" (3 folds from 3,000 rows, else 5)")
    if m.get("algorithm", "kmp") not in ("kmp", "kmp-cv") or "estimator" in m:
        raise SpecError(f"{path}: model.cv works with algorithm = \"kmp\" only; got "
                        f"{m.get('estimator') or m.get('algorithm')!r}")
    m["algorithm"] = "kmp-cv"
    m["params"] = {**m.get("params", {}), "cv": cv}


def _check_run(run: dict, path) -> None:
    """``[run] scheduler``: auto, sync, local, an address (tcp://, tls://) or a scheduler file
    (.json, resolved relative to the pipeline file like the data paths); ``memory_limit`` as the
    embedded cluster takes it (checked even when the run turns out to need no cluster)."""
    if "memory_limit" in run:
        from ..parallel._client import check_memory_limit

        try:
            check_memory_limit(run["memory_limit"], name="memory_limit")
        except ValueError as exc:
            raise SpecError(f"{path}: [run] {exc}") from None
    _check_counts(run, path)
    s = run.get("scheduler")
    if s is None or s in SCHEDULER_MODES or (isinstance(s, str) and s.startswith(("tcp://", "tls://", "inproc://"))):
        return
    if isinstance(s, str) and s.endswith(".json"):
        resolved = Path(s).expanduser()
        if not resolved.is_absolute():
            resolved = Path(path).resolve().parent / resolved
        if not resolved.is_file():
            raise SpecError(f"{path}: [run] scheduler = {s!r}: no scheduler file there (written by `dask scheduler "
                            "--scheduler-file FILE`)")
        run["scheduler"] = os.path.normpath(resolved)
        return
    raise SpecError(f"{path}: [run] scheduler = {s!r}: use \"auto\" (the default: in process for small data), "
                    "\"sync\" (in process), \"local\" (an embedded cluster), an address such as "
                    "\"tcp://127.0.0.1:8786\" or a scheduler file (.json)")


def _check_counts(run: dict, path) -> None:
    """``[run] workers`` and ``threads_per_worker``: whole numbers in 1..256 (the CLI's ``--workers`` /
    ``--threads-per-worker``), checked with the rest of the file, before any step runs."""
    for key in ("workers", "threads_per_worker"):
        v = run.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 256):
            raise SpecError(
                f"{path}: [run] {key} = {v!r}: give a whole number from 1 to 256 "
                f"({'worker processes of the embedded cluster' if key == 'workers' else 'threads per worker'}"
                f"), or leave it out for the default")


#: Bytes per value of the synthetic generators' stores (float32) and their default feature counts.
_SYNTHETIC = {"synthetic:classification": 54, "synthetic:regression": 8}


def data_nbytes(spec: dict) -> int:
    """About how many bytes the pipeline's data hold (``[run] scheduler = "auto"`` weighs it): a
    synthetic source's rows × features × 4, a store's ``X``, a file's size on disk (each file
    once, however many data sets read parts of it); bundled keel / sklearn sets count 0."""
    total, seen = 0, set()
    for d in spec["data"].values():
        src = d["source"]
        if src in _SYNTHETIC:
            total += int(d.get("n_rows", 0)) * int(d.get("n_features", _SYNTHETIC[src])) * 4
        elif not src.startswith(("keel:", "sklearn:")) and src not in seen:
            seen.add(src)
            total += _path_nbytes(src)
    return total


def _path_nbytes(src: str) -> int:
    if os.path.isfile(os.path.join(src, "zarr.json")):
        import numpy as np

        from ..store import open_store

        st = open_store(src)
        return int(st.n_rows) * int(st.n_features) * np.dtype(st.dtype).itemsize
    if os.path.isdir(src):
        return sum(f.stat().st_size for f in Path(src).rglob("*") if f.is_file())
    return os.path.getsize(src) if os.path.isfile(src) else 0


def source_options(d: dict) -> dict:
    """A ``[data.NAME]`` table's options for ``ingest``: ``label``, ``drop``, ``delimiter``,
    ``header``; ``no_label = true`` is ``label=None`` (a store of the features only). A CSV or
    Parquet source needs one of ``label`` and ``no_label`` (the label is never guessed)."""
    options = {k: d[k] for k in ("label", "drop", "delimiter", "header") if k in d}
    if "no_label" in d:
        if not isinstance(d["no_label"], bool):
            raise ValueError(f"no_label = {d['no_label']!r}: give true (no label column) or leave it out")
        if d["no_label"] and "label" in d:
            raise ValueError(f"label = {d['label']!r} and no_label = true exclude each other; keep one")
        if d["no_label"]:
            options["label"] = None
    return options


def _check_source(name: str, d: dict, path) -> None:
    """One ``[data.NAME]``'s source and keys, checked without writing anything: a file or store
    path is resolved relative to the pipeline file (``d["source"]`` becomes the absolute path),
    must exist and be readable, and its ``label`` / ``drop`` columns must exist."""
    from ..store import check_source, source_kind

    where = f"{path}: [data.{name}]"
    src = d["source"]
    if not isinstance(src, str) or not src.strip():
        raise SpecError(f"{where} source = {src!r}: give a source name or a path as a string")
    for key in ("n_rows", "seed", "start_row", "chunk_rows", "n_features", "n_classes"):
        if key in d and (isinstance(d[key], bool) or not isinstance(d[key], int)
                         or d[key] < (0 if key in ("seed", "start_row") else 1)):
            kind = "non-negative" if key in ("seed", "start_row") else "positive"
            raise SpecError(f"{where} {key} = {d[key]!r}: give a {kind} integer")
    if "drop" in d and not (isinstance(d["drop"], (str, int)) or (isinstance(d["drop"], list) and all(
            isinstance(c, (str, int)) for c in d["drop"]))):
        raise SpecError(f"{where} drop = {d['drop']!r}: give a column name or position, or a list of them")
    try:
        kind = source_kind(src) if src.startswith(("keel:", "sklearn:", "synthetic:")) else None
        if kind is None:
            resolved = Path(src).expanduser()
            if not resolved.is_absolute():
                resolved = (Path(path).resolve().parent / resolved)
            d["source"] = src = os.path.normpath(resolved)
        test_size = d.get("test_size", DEFAULT_TEST_SIZE if "part" in d else None)
        if "test_size" in d and "part" not in d:
            raise ValueError(f"test_size = {d['test_size']!r} needs part = 'train' or 'test' (which part this "
                             "data set is); add a second [data.*] table for the other part")
        options = source_options(d)
        check_source(src, n_rows=d.get("n_rows"), test_size=test_size, part=d.get("part"), **options)
        if src.startswith("synthetic:") and "n_rows" not in d:
            raise ValueError("a synthetic source needs n_rows")
        extra = sorted({"start_row", "n_features", "n_classes"} & set(d))
        if extra and not src.startswith("synthetic:"):
            raise ValueError(f"{extra[0]} applies to synthetic sources only; leave it out")
    except SpecError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        raise SpecError(f"{where}: {exc}") from None
    except Exception as exc:  # DataValidationError / StoreSchemaError (ValueError subclasses are above)
        raise SpecError(f"{where}: {exc}") from None


def _accepted(cls) -> set:
    return set(cls().get_params())


def _check_params(spec: dict, path) -> None:
    """Parameter names of the model, compressor and downstream estimators, checked before anything runs."""
    import importlib

    tables = []
    m = spec["model"]
    if "estimator" in m:
        est = m["estimator"]
        tables.append(("model.params", m.get("params", {}), [getattr(importlib.import_module(SKLEARN[est]), est)]))
    else:
        names = [n for n in ALGORITHMS[m.get("algorithm", "kmp")] if n is not None]
        tables.append(("model.params", m.get("params", {}), [estimator_class(n) for n in names]))
    if "compress" in spec:
        tables.append(("compress.params", spec["compress"].get("params", {}),
                       [estimator_class("ReducedSetCompressor")]))
    d = spec.get("downstream", {})
    if "estimator" in d:
        est = d["estimator"]
        tables.append(("downstream.params", d.get("params", {}),
                       [getattr(importlib.import_module(SKLEARN[est]), est)]))
    for key, params, classes in tables:
        if not isinstance(params, dict):
            raise SpecError(f"{path}: {key} must be a table of parameter = value")
        accepted = set().union(*(_accepted(c) for c in classes))
        unknown = sorted(set(params) - accepted)
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], sorted(accepted), n=1)
            raise SpecError(f"{path}: {key} has unknown parameter {unknown[0]!r} for {classes[0].__name__}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + f"; accepted: {', '.join(sorted(accepted))}")
        _check_values(key, params, classes, path)


def _check_values(key: str, params: dict, classes: list, path) -> None:
    """The parameter *values* of a table, checked as the estimator's fit checks them first (before
    any data is read), so a bad value ends the run before the data step: one class of ``classes``
    (classifier or regressor) must accept them."""
    errors = []
    for cls in classes:
        if not set(params) <= _accepted(cls):
            continue
        try:
            _check_estimator_values(cls(**params))
            return
        except (ValueError, TypeError) as exc:
            errors.append(exc)
    if errors:
        raise SpecError(f"{path}: {key}: {' '.join(str(errors[0]).split())}")


def _check_estimator_values(est) -> None:
    """``est``'s own parameter check, without data: kmp_dask's (the fit's first step) or
    scikit-learn's parameter constraints."""
    from ..estimators._kmp_cv import _BaseKMPCV, _check_cv_params

    if isinstance(est, _BaseKMPCV):
        _check_cv_params(est)
    elif type(est).__name__ == "ReducedSetCompressor":
        from ..reduced._checks import check_params

        check_params(est)
    elif hasattr(est, "_check_fit_args"):
        est._check_fit_args(None, None)
    elif hasattr(est, "_validate_params"):
        est._validate_params()


def load_spec(path, *, small: bool = False) -> dict:
    """The validated pipeline at ``path`` (with ``[small]`` applied when ``small``)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no pipeline file at {str(p)!r}")
    try:
        spec = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: not valid TOML: {exc}") from None
    if small:
        spec = _apply_small(spec, p)
    validate(spec, p)
    spec.setdefault("name", p.stem)
    return spec
