"""``compress`` and ``report``: what comes after a fit (reduced sets; an HTML report)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._main import main
from ._model import _check_output_free, _open_store, _verbose
from ._where import running, store_nbytes, where_options

PICKLE_HELP = ("MODEL is a scikit-learn model file (joblib/pickle): unpickling runs whatever code the file "
               "holds, so it is only done with this flag — pass it only for files you made or trust. "
               "kmp_dask models (the open format) never need it.")


def _is_kmp_model(path: Path) -> bool:
    return path.is_dir() and (path / "model.json").is_file()


def _load_any(path: str, trust_pickle: bool):
    """A kmp_dask model (open format), or a joblib file only with ``--trust-pickle``."""
    from .. import load

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"MODEL {path!r} does not exist")
    if p.is_dir():
        return load(p)
    if not trust_pickle:
        raise click.UsageError(f"{path!r} is not a kmp_dask model directory; if it is a scikit-learn model file, "
                               "pass --trust-pickle (unpickling runs code from the file: only for files you trust)")
    import joblib

    try:
        return joblib.load(p)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not a model file"
        raise click.UsageError(f"{path!r} could not be read as a joblib model file: "
                               f"{type(exc).__name__}: {exc}") from None


IN_MEMORY_POOL_BYTES = 2 * 2**30
"""Largest --data (or --val-data) read into this process: always for --refit pool (least squares on
the pool as one array) and --probability without --val-data (calibration on the labelled pool),
and for --exchange when it fits (the rows' labels then guard the exchanges; a larger store is
exchanged on the engine, streaming the store)."""


def _fits_in_memory(st) -> bool:
    return st.n_rows * st.n_features * 8 <= IN_MEMORY_POOL_BYTES


def _pool_in_memory(st, option: str):
    """The labelled pool rows (X, y) of ``st`` as arrays, class codes mapped to the store's names."""
    if st is None:
        raise click.UsageError(f"{option} works on the candidate pool's rows in memory: pass --data with the "
                               "labelled rows (e.g. the training store)")
    if not _fits_in_memory(st):
        nbytes = st.n_rows * st.n_features * 8
        raise click.BadParameter(
            f"--data has {st.n_rows} x {st.n_features} values ({nbytes / 2**30:.1f} GiB as float64), more than the "
            f"{IN_MEMORY_POOL_BYTES / 2**30:.0f} GiB {option} reads into memory; drop {option} (the engine path "
            "streams the store) or pass a smaller sample as --data", param_hint=option.split()[0])
    import numpy as np

    X, y = st.read_range(0, st.n_rows)
    return np.asarray(X, dtype=np.float64), _class_names(st, y)


def _class_names(store, y):
    """Stored label codes as the store's class names (classification); values as they are."""
    import numpy as np

    names = store.attrs.get("classes")
    if y is not None and names is not None:
        y = np.asarray(names).take(np.asarray(y, dtype=np.int64))
    return y


@main.command(short_help="Reduced-set compression of a kernel model (kmp_dask or SVC).",
              epilog="\b\nExamples:\n  kmp-dask compress kmp.model --n-vectors 20 --model kmp20.model\n"
                     "  kmp-dask compress svc.joblib --trust-pickle --n-vectors 50 --data train.zarr "
                     "--model svc50.model\n"
                     "  kmp-dask compress svc.joblib --trust-pickle --n-vectors 0.2 --data train.zarr "
                     "--exchange 10 --refit pool --model svc-small.model\n"
                     "  kmp-dask compress svc.joblib --trust-pickle --n-vectors 0.2 --data train.zarr "
                     "--probability --val-data valid.zarr --model svc-proba.model")
@click.argument("source", metavar="MODEL")
@click.option("--n-vectors", required=True, help="Vectors to keep: an int, or a fraction of the model's (0.2).")
@click.option("--model", "model_path", required=True, type=click.Path(), help="Where to save the compressed model.")
@click.option("--data", default=None,
              help="A labelled store: the candidate pool (its labels guard the exchanges).")
@click.option("--method", type=click.Choice(["hmp", "l0", "l1"]), default="hmp", show_default=True,
              help="hmp: hyperplane matching pursuit (on the workers); l0, l1: the dense baselines.")
@click.option("--candidates", default="all", show_default=True,
              help="Pool points scored per iteration: 'all', 'auto' (59 random ones) or an int "
                   "(that many random ones).")
@click.option("--criterion", type=click.Choice(["eq13", "decrease"]), default="decrease", show_default=True,
              help="hmp selection score: the exact decrease of the RKHS error, or the paper's eq. 13.")
@click.option("--refit", type=click.Choice(["rkhs", "pool"]), default="rkhs", show_default=True,
              help="Coefficients: the paper's RKHS optimum, or least squares to the model's values on the --data rows "
                   "(reads --data into memory).")
@click.option("--exchange", default=0, show_default=True, type=click.IntRange(0, None),
              help="Sweeps of single-vector exchanges that improve the kept vectors (--data up to 2 GiB is read into "
                   "memory and its labels guard the exchanges; a larger store is exchanged on the workers).")
@click.option("--probability", is_flag=True,
              help="Classifiers: calibrate class probabilities (predict --proba) on the --val-data rows, else on the "
                   "--data rows (read into memory; usually the model's training rows, somewhat over-confident).")
@click.option("--val-data", default=None,
              help="A labelled store of held-out rows (read into memory): --probability is calibrated on them.")
@click.option("--random-state", default=0, show_default=True, type=int)
@click.option("--trust-pickle", is_flag=True, help=PICKLE_HELP)
@click.option("--overwrite", is_flag=True, help="Replace --model if it exists.")
@click.option("--quiet", "-q", is_flag=True)
@where_options
def compress(source, n_vectors, model_path, data, method, candidates, criterion, refit, exchange, probability,
             val_data, random_state, trust_pickle, overwrite, quiet, where):
    """Compress MODEL (a kmp_dask KMP, CVM or MMDA model, or a scikit-learn SVC/SVR/KernelRidge file) by
    reduced-set selection."""
    from .. import ReducedSetCompressor, save
    from ._params import candidates_value, parse_value

    _check_output_free(model_path, overwrite, "--model", "model")
    candidates = candidates_value(candidates)
    model = _load_any(source, trust_pickle)
    from ..reduced._models import as_compression_target

    # a model that cannot be compressed is refused before a cluster starts
    kind = as_compression_target(model).kind
    st = _open_store(data) if data else None
    val = _calibration_rows(probability, kind, st, val_data)
    n = parse_value(n_vectors)
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        raise click.BadParameter(f"expected an int or a fraction in (0, 1); got {n_vectors!r}",
                                 param_hint="--n-vectors")
    comp = ReducedSetCompressor(n_vectors=n, method=method, random_state=random_state, verbose=_verbose(quiet),
                                candidates=candidates, criterion=criterion,
                                refit=refit, exchange=exchange, probability=probability)
    calibrate_on_pool = probability and val is None
    in_memory = refit == "pool" or calibrate_on_pool or (exchange > 0 and st is not None and _fits_in_memory(st))
    pool = st.url if st is not None else None
    X_val, y_val = val if val is not None else (None, None)
    if in_memory:  # the pool's rows and labels in this process (exchange guard, calibration), no cluster
        option = "--refit pool" if refit == "pool" else "--probability" if calibrate_on_pool else "--exchange"
        pool, labels = _pool_in_memory(st, option)
        comp.fit(model, pool, labels, X_val=X_val, y_val=y_val)
    else:
        with running(where, quiet=quiet, nbytes=store_nbytes(st) if st is not None else None) as client:
            comp.set_params(client=client)
            comp.fit(model, pool, X_val=X_val, y_val=y_val)
    comp.set_params(client=None)
    save(comp, model_path, overwrite=overwrite)
    if not quiet:
        click.echo(f"compressed {type(model).__name__} to {comp.n_vectors_} vectors; saved to {model_path}")


def _calibration_rows(probability, kind, st, val_data):
    """``(X, y)`` of --val-data in memory (None without it), checked before any work: --probability
    needs a classifier and labelled rows (--val-data, else --data)."""
    if val_data and not probability:
        raise click.UsageError("--val-data holds the rows --probability is calibrated on: add --probability, or "
                               "drop --val-data")
    if not probability:
        return None
    if kind == "regression":
        raise click.UsageError("--probability needs a classifier; the model is a regression model: drop --probability")
    if val_data:
        return _pool_in_memory(_open_store(val_data), "--val-data")
    if st is None:
        raise click.UsageError("--probability calibrates on labelled rows: pass --val-data (held-out rows, best) or "
                               "--data (the labelled pool)")
    return None


@main.command(short_help="A self-contained HTML report of saved models.",
              epilog="\b\nExamples:\n  kmp-dask report kmp.model --output report.html\n"
                     "  kmp-dask report kmp.model kmp20.model --data test.zarr --evaluation metrics.json "
                     "--output report.html")
@click.argument("models", nargs=-1, required=True, metavar="MODEL...")
@click.option("--output", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--data", default=None,
              help="A store: a sample of its rows for accuracy-vs-size curves and feature scatter.")
@click.option("--sample-rows", default=2000, show_default=True, type=click.IntRange(10, 10**6),
              help="Rows of --data read for the plots.")
@click.option("--evaluation", "evaluations", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="JSON written by `evaluate --output` (repeatable), shown as tables.")
@click.option("--title", default=None)
@click.option("--overwrite", is_flag=True, help="Replace --output if it exists.")
def report(models, output, data, sample_rows, evaluations, title, overwrite):
    """Write a self-contained HTML report (plots embedded as PNG) of one or more saved models."""
    from .. import load
    from ..report import write_report

    _check_output_free(output, overwrite, "--output", "report")
    loaded = [(Path(m).name, load(m)) for m in models]
    X = y = None
    if data:
        st = _open_store(data)
        X, y = _sample(st, sample_rows, _data_columns(loaded, st))
    evals = {}
    for path in evaluations:
        try:
            evals[Path(path).stem] = json.loads(Path(path).read_text())
        except ValueError as exc:
            raise click.BadParameter(f"{path!r} is not JSON: {exc}", param_hint="--evaluation") from None
    out = write_report(loaded, output, X=X, y=y, evaluations=evals or None, title=title, overwrite=overwrite)
    click.echo(f"report written to {out}")


def _data_columns(loaded, store):
    """--data checked against every model as ``evaluate`` checks it (kmp_dask.evaluation.scoring_data:
    the number of columns, the names matched in any order): the store's columns in the models' order
    (None: as they are). Models fitted on differently ordered columns are refused: report them apart."""
    from ..evaluation import scoring_data

    chosen = None
    for k, (name, model) in enumerate(loaded):
        columns = scoring_data(model, store, warn=k == 0).columns
        if k and columns != chosen:
            raise click.UsageError(f"the models were fitted on different columns of --data {store.url!r} "
                                   f"({loaded[0][0]} and {name}); write one report per model")
        chosen = columns
    return chosen


def _sample(store, n: int, columns=None):
    """Up to ``n`` rows of ``store`` (a seeded sample, in row order; ``columns``: those, in that
    order) with labels as class names."""
    import numpy as np

    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(store.n_rows, size=min(n, store.n_rows), replace=False))
    X, y = store.read_rows(idx)
    X = np.asarray(X) if columns is None else np.asarray(X)[:, columns]
    return X, _class_names(store, y)
