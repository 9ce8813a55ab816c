"""The steps of a pipeline run (see ``_runner``); each returns a JSON-able result dict."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import numpy as np

from ._spec import DEFAULT_TEST_SIZE, SKLEARN, class_for


def make_store(d: dict, target: Path, client, *, overwrite: bool = False):
    """One ``[data.NAME]`` table → a zarr store at ``target``. An existing store there is replaced
    only with ``overwrite`` (the runner passes it when resuming a run whose data step did not
    finish; the store must then be a kmp_dask store, kmp_dask/_overwrite.py)."""
    from ..datasets import make_classification_store, make_regression_store

    src = d["source"]
    if src in ("synthetic:classification", "synthetic:regression"):
        gen = make_classification_store if src.endswith("classification") else make_regression_store
        kw = {k: d[k] for k in ("n_features", "n_classes") if k in d}
        if src.endswith("regression"):
            kw.pop("n_classes", None)
        # in process (--scheduler sync: client "sync") the generator writes its blocks here
        workers = None if isinstance(client, str) else client
        return gen(target, int(d["n_rows"]), random_state=int(d.get("seed", 0)), start_row=int(d.get("start_row", 0)),
                   chunk_rows=d.get("chunk_rows"), overwrite=overwrite, client=workers, **kw)
    if src.startswith(("keel:", "sklearn:")):
        return _split_store(d, target, overwrite)
    return file_store(d, target, overwrite=overwrite)


def file_store(d: dict, target: Path, *, overwrite: bool = False):
    """A file source (CSV/TSV, Parquet, NumPy, LIBSVM: already resolved to an absolute path by the
    spec check) ingested to ``target``, or an existing store used in place — not copied — when no
    ``n_rows``, ``part`` or ``test_size`` asks for a subset of it."""
    from ..store import ingest, open_store, source_kind

    src = d["source"]
    if source_kind(src) == "store" and not {"n_rows", "part", "test_size"} & set(d):
        return open_store(src)
    part = d.get("part")
    test_size = d.get("test_size", DEFAULT_TEST_SIZE) if part is not None else None
    from ._spec import source_options

    options = source_options(d)
    return ingest(src, target, n_rows=d.get("n_rows"), part=part, test_size=test_size, seed=int(d.get("seed", 0)),
                  chunk_rows=d.get("chunk_rows"), overwrite=overwrite, **options)


def _split_store(d: dict, target: Path, overwrite: bool):
    """Part ``train`` or ``test`` of a bundled data set: a seeded stratified split, standardised
    with the training part's mean and standard deviation (the same for both parts)."""
    from sklearn.model_selection import train_test_split

    from ..datasets import load
    from ..store import create_store

    ds = load(d["source"])
    part = d.get("part", "train")
    if part not in ("train", "test"):
        raise ValueError(f"data part must be 'train' or 'test'; got {part!r}")
    strat = ds.y if ds.task == "classification" else None
    Xtr, Xte, ytr, yte = train_test_split(ds.X, ds.y, test_size=float(d.get("test_size", 0.3)),
                                          random_state=int(d.get("seed", 0)), stratify=strat)
    mean, std = Xtr.mean(axis=0), Xtr.std(axis=0)
    std[std == 0] = 1.0
    X, y = (Xtr, ytr) if part == "train" else (Xte, yte)
    prov = {"source": d["source"], "part": part, "test_size": d.get("test_size", 0.3), "seed": d.get("seed", 0),
            "standardised": "train mean/std"}
    return create_store(target, (X - mean) / std, y, classes=ds.classes, overwrite=overwrite,
                        feature_names=ds.feature_names, provenance=prov)


def _store(run, name):
    """The store of data set ``name``: where the data step put it (a store source is used in place),
    else ``data/NAME.zarr`` in the run (the features step's stores)."""
    from ..store import open_store

    made = run.done("data") or {}
    if isinstance(made.get(name), dict) and made[name].get("path"):
        return open_store(made[name]["path"])
    return open_store(run.path("data", f"{name}.zarr"))


def _read_all(store, max_rows: int | None = None):
    n = store.n_rows if max_rows is None else min(store.n_rows, max_rows)
    X, y = store.read_range(0, n)
    names = store.attrs.get("classes")
    if y is not None and names is not None:
        y = np.asarray(names).take(np.asarray(y, dtype=np.int64))
    return X, y


def _sklearn(name: str, params: dict):
    return getattr(importlib.import_module(SKLEARN[name]), name)(**params)


def model_step(spec, run, client, *, resume=False):
    """Fit ``[model]`` on the ``train`` data set (or the first one) and save it."""
    from .. import save

    m = spec["model"]
    train = "train" if "train" in spec["data"] else next(iter(spec["data"]))
    st = _store(run, train)
    if "estimator" in m:  # a scikit-learn model, fitted in memory, to be compressed
        from ..reduced import as_compression_target

        est = _sklearn(m["estimator"], m.get("params", {}))
        X, y = _read_all(st)
        est.fit(X, y)
        # kept in the open format (its hyperplanes and prediction rule): nothing in a run is unpickled
        save(as_compression_target(est), run.path(SOURCE_MODEL), overwrite=run.resumed)
        return {"estimator": m["estimator"], "n_support": int(getattr(est, "n_support_", np.array([0])).sum())}
    task = m.get("task") or ("classification" if st.attrs.get("classes") is not None else "regression")
    cls = class_for(m.get("algorithm", "kmp"), task)
    est = cls(**m.get("params", {}))
    est.set_params(client=client)
    if "verbose" in est.get_params() and "verbose" not in m.get("params", {}):
        est.set_params(verbose=run.verbose)
    # every fit takes a checkpoint (the CV search: its finished (γ, fold) pursuits and its refit): a killed run resumes
    est.fit(st.url, **(_fit_kw(m, run, resume) if _checkpoints(est) else {}))
    est.set_params(client=None)
    chosen = getattr(est, "best_estimator_", None)  # kmp-cv: the model refitted with the chosen γ and size
    save(est if chosen is None else chosen, run.path("model"), overwrite=run.resumed)
    out = {"estimator": cls.__name__, "history": getattr(est, "history_", None)}
    if chosen is not None:
        out["best_params"] = {k: (float(v) if isinstance(v, float) else int(v)) for k, v in est.best_params_.items()}
    for attr in ("n_basis_", "n_components_", "n_vectors_", "n_features_out_"):
        if getattr(est, attr, None) is not None:
            out[attr.rstrip("_").replace("_out", "")] = int(getattr(est, attr))
    if hasattr(est, "radius_") or hasattr(est, "core_sizes_"):  # CVM, MMDA: the union
        out["n_core_vectors"] = int(est.expansion_.n_vectors)  # of the binary problems' core vectors
    return out


def _checkpoints(est) -> bool:
    """Whether ``est.fit`` takes a checkpoint directory (every family's estimator and the CV search)."""
    import inspect

    return "checkpoint" in inspect.signature(est.fit).parameters


def _fit_kw(m: dict, run, resume: bool, directory: str = "checkpoint") -> dict:
    """Keyword arguments of a step's ``fit``: every family's fit (KMP, CVM, MMDA, sparse KPCA, the
    compressor) continues from its checkpoint directory in the run, so a killed run resumes to the
    identical model."""
    return {"checkpoint": str(run.path(directory)), "checkpoint_every": int(m.get("checkpoint_every", 10)),
            "resume": resume}


#: Where the model step keeps a scikit-learn model: as a CompressionTarget in the open format.
SOURCE_MODEL = "source_model"


def load_model(run):
    """The run's model, read in the open format (``kmp_dask.load``: nothing is unpickled): the
    kmp_dask estimator, or the scikit-learn model's :class:`~kmp_dask.reduced.CompressionTarget`
    (its support vectors, coefficients, kernel and prediction rule)."""
    from .. import load

    for name in ("model", SOURCE_MODEL):
        if run.path(name).exists():
            return load(run.path(name))
    if run.path("model.joblib").exists():  # made by kmp_dask before the open-format source model
        raise FileNotFoundError(
            f"{str(run.path('model.joblib'))!r} is a pickle written by an older kmp_dask; pipelines no longer "
            "unpickle anything. Re-run the pipeline with --overwrite to train the model again")
    raise FileNotFoundError(f"no model in {str(run.root)!r}: its model step has not run; run the pipeline without "
                            "--resume (or with --overwrite)")


def compress_step(spec, run, client, *, resume=False):
    from .. import ReducedSetCompressor, save

    c = spec["compress"]
    X, y = _read_all(_store(run, c.get("data", "train")))
    comp = ReducedSetCompressor(n_vectors=c["n_vectors"], method=c.get("method", "hmp"),
                                **{"verbose": run.verbose, **c.get("params", {})})
    t0 = time.perf_counter()
    comp.fit(load_model(run), X, y, **_fit_kw(c, run, resume, "checkpoint_compress"))
    seconds = time.perf_counter() - t0
    save(comp, run.path("compressed"), overwrite=run.resumed)
    return {"n_vectors": int(comp.n_vectors_), "compress_seconds": seconds, "path": comp.path_}


def features_step(spec, run, client, *, resume=False):
    from ..evaluation import predict_to_store

    model = load_model(run)
    out = {}
    for name in spec["features"]["data"]:
        target = run.path("data", f"{name}_features.zarr")
        st = predict_to_store(model, _store(run, name), target, overwrite=run.resumed, client=client)
        out[name] = {"path": str(target), "n_features": st.n_features}
    return out


def downstream_step(spec, run, client, *, resume=False):
    """A scikit-learn classifier on the features (read into memory: n × n_components)."""
    d = spec["downstream"]
    Xtr, ytr = _read_all(_store(run, d.get("train", "train_features")))
    Xte, yte = _read_all(_store(run, d.get("test", "test_features")))
    est = _sklearn(d["estimator"], d.get("params", {})).fit(Xtr, ytr)
    return {"estimator": d["estimator"], "downstream_accuracy": float(np.mean(est.predict(Xte) == yte)),
            "n_features": int(Xtr.shape[1])}


def evaluate_step(spec, run, client, *, resume=False):
    from ..evaluation import evaluate, model_kind

    st = _store(run, spec["evaluate"].get("data", "test"))
    out = {}
    for name in ("model", "compressed"):
        p = run.path(name)
        if not p.exists():
            continue
        from .. import load

        model = load(p)
        if model_kind(model) != "transformer":
            out[name] = evaluate(model, st, client=client)
    if run.path(SOURCE_MODEL).exists():  # the scikit-learn model, predicting by its own rule (in memory)
        X, y = _read_all(st)
        target = load_model(run)
        out["sklearn_model"] = {"accuracy": float(np.mean(target.predict(target.expansion.decision_function(X)) == y))}
    first = next(iter(out.values()), {})
    return {**out, **({"accuracy": first["accuracy"]} if "accuracy" in first else {}),
            **({"r2": first["r2"]} if "r2" in first else {})}


def report_step(spec, run, client, *, resume=False):
    from .. import load
    from ..report import write_report

    r = spec.get("report", {})
    models = [(n, load(run.path(n))) for n in ("model", "compressed") if run.path(n).exists()]
    X = y = None
    if r.get("data"):
        X, y = _read_all(_store(run, r["data"]), int(r.get("sample_rows", 2000)))
    evals = run.done("evaluate")
    evals = {k: v for k, v in (evals or {}).items() if isinstance(v, dict) and "task" in v} or None
    out = write_report(models, run.path("report.html"), X=X, y=y, evaluations=evals,
                       title=r.get("title", spec["name"]), overwrite=run.resumed)
    return {"report": str(out)}
