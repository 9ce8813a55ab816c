"""``train``, ``evaluate``, ``predict``, ``compress``, ``report``: saved models from and to stores.

Each command checks everything it can before any work (store there, output free or
``--overwrite``, options valid), then runs on the cluster ``_where.running`` gives it. Models
are saved in the open format (:func:`kmp_dask.save`, docs/models.md), written atomically.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from ._main import main
from ._params import ALGORITHMS, build_params, class_for, parse_value, read_config
from ._where import running, store_nbytes, where_options


def _check_output_free(path, overwrite: bool, option: str, kind: str) -> None:
    """Before any work: ``path`` is free, or ``--overwrite`` and it is kmp_dask's own ``kind``
    of output (a model, store, report, metrics file: kmp_dask/_overwrite.py)."""
    from .._overwrite import check_replaceable
    from .._temporaries import check_output_path

    check_output_path(path, option, file=kind not in ("model", "store", "run"))
    p = Path(path)
    if p.exists() and not overwrite:
        raise FileExistsError(f"{option} {str(p)!r} already exists; pass --overwrite to replace it")
    if p.exists():
        check_replaceable(p, (kind,), option=option)


def _open_store(path):
    from ..store import open_store

    return open_store(path)


def _load_model(path):
    from .. import load

    return load(path)


def _verbose(quiet: bool):
    """tqdm bar on a terminal, a line every 10 iterations in logs, nothing with --quiet."""
    if quiet:
        return 0
    return 1 if sys.stderr.isatty() else 10


class _Folds(click.ParamType):
    """``--cv``: a number of folds ≥ 2, or "auto" (``KMPClassifierCV``'s ``cv="auto"``)."""

    name = "K|auto"

    def convert(self, value, param, ctx):
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 2):
            return value
        try:
            k = int(value)
        except (TypeError, ValueError):
            k = None
        if k is None or k < 2:
            self.fail(f"{value!r} is not a number of folds; use a whole number >= 2 (e.g. --cv 5) or --cv auto",
                      param, ctx)
        return k


class _JsonLog:
    """``--log-json FILE``: one JSON line per iteration (appended, so a resumed run continues it)."""

    def __init__(self, path, algorithm):
        self.fh = open(path, "a", encoding="utf-8") if path else None
        self.algorithm = algorithm

    def __call__(self, desc, record):
        line = {"time": datetime.now(UTC).isoformat(), "algorithm": self.algorithm, "stage": desc}
        line.update(record)
        from ..pipeline._runner import json_default

        self.fh.write(json.dumps(line, default=json_default) + "\n")
        self.fh.flush()

    def close(self):
        if self.fh is not None:
            self.fh.close()


ALGORITHM_TEXT = {"kmp": "kernel matching pursuit: KMPClassifier / KMPRegressor (the default)",
                  "kmp-cv": "KMP with gamma and size by cross-validation: KMPClassifierCV / KMPRegressorCV (--cv K)",
                  "cvm": "core vector machine: CVMClassifier",
                  "mmda": "maximum-margin discriminant features: MMDA (a transformer)",
                  "skpca": "sparse kernel PCA: SparseKernelPCA (a transformer)"}

TRAIN_EPILOG = """\b
Algorithms (--algorithm; each one's parameter flags: kmp-dask train --algorithm NAME --help):
""" + "".join(f"  {k:<7} {v}\n" for k, v in ALGORITHM_TEXT.items()) + """
\b
Examples:
  kmp-dask train data/train.zarr --model kmp.model --n-basis 200 --gamma 0.5
  kmp-dask train data/train.zarr --model kmp.model --config kmp.toml --checkpoint ckpt/
  kmp-dask train data/train.zarr --model kmp.model --checkpoint ckpt/ --resume   # after a kill
  kmp-dask train data/train.zarr --model kmp.model --sample-weight weights.npy    # one weight per row
  kmp-dask train data/train.zarr --model cvm.model --algorithm cvm --C 10 --scheduler tcp://127.0.0.1:8786
  kmp-dask train data/train.zarr --model kmp.model --cv 5 --n-basis 300           # gamma, size by 5-fold CV
"""


class _TrainCommand(click.Command):
    """``train``: the chosen algorithm's parameters become flags when the command line is parsed
    (``--algorithm``, else the ``--config`` file's ``algorithm``, else kmp), so ``train --algorithm
    cvm --help`` lists CVM's flags only; plain ``train --help`` imports no estimator and lists the
    algorithms instead. The other algorithms' flags are accepted but hidden: ``train --algorithm
    cvm --n-basis 5`` is refused with the parameters CVM has (``build_params``)."""

    def parse_args(self, ctx, args):
        from ._params import param_flags

        if not hasattr(self, "_common"):
            self._common = list(self.params)
        algorithm = _algorithm_in(args)
        if algorithm in (None, "kmp") and any(a == "--cv" or a.startswith("--cv=") for a in args):
            algorithm = "kmp-cv"  # --cv K: the cross-validated KMP's flags (gammas, rule, ...)
        names = {n for p in self._common for n in p.opts + p.secondary_opts} | set(ctx.help_option_names)
        plain_help = (algorithm is None and any(a in ctx.help_option_names for a in args)
                      and not any(a.startswith("--") and a.split("=")[0] not in names for a in args))
        extra, shown = [], set()
        if not plain_help:
            chosen = algorithm if algorithm in ALGORITHMS else "kmp"
            for algo in [chosen] + [a for a in ALGORITHMS if a != chosen]:
                for name, text in param_flags(algo):
                    if name not in shown and "--" + name.replace("_", "-") not in names:  # --cv is a common flag
                        extra.append(click.Option(["--" + name.replace("_", "-"), "param__" + name], default=None,
                                                  metavar="VALUE", help=text or None, hidden=algo != chosen))
                        shown.add(name)
            ctx.meta["kmp_dask.train_algorithm"] = chosen
        self.params = self._common + extra
        return super().parse_args(ctx, args)

    def format_options(self, ctx, formatter):
        common = [p.get_help_record(ctx) for p in self.get_params(ctx) if not p.name.startswith("param__")]
        own = [p.get_help_record(ctx) for p in self.get_params(ctx) if p.name.startswith("param__")]
        with formatter.section("Options"):
            formatter.write_dl([r for r in common if r])
        own = [r for r in own if r]
        if own:
            algo = ctx.meta.get("kmp_dask.train_algorithm", "kmp")
            classes = " / ".join(c for c in dict.fromkeys(ALGORITHMS[algo]) if c)
            with formatter.section(f"Parameters of --algorithm {algo} ({classes})"):
                formatter.write_dl(own)


def _algorithm_in(args) -> str | None:
    """``--algorithm`` on the command line, else the ``--config`` file's ``algorithm`` key."""
    config = None
    for k, a in enumerate(args):
        value = args[k + 1] if k + 1 < len(args) else None
        if a.startswith("--algorithm="):
            return a.split("=", 1)[1]
        if a == "--algorithm":
            return value
        if a.startswith("--config="):
            config = a.split("=", 1)[1]
        elif a == "--config":
            config = value
    if config:
        import tomllib

        try:
            with open(config, "rb") as fh:
                value = tomllib.load(fh).get("algorithm")
            return value if isinstance(value, str) else None
        except (OSError, ValueError):
            return None  # reported by --config's own check
    return None


@main.command(cls=_TrainCommand, epilog=TRAIN_EPILOG, short_help="Fit a model on a store and save it.")
@click.argument("store")
@click.option("--model", "model_path", required=True, type=click.Path(), help="Where to save the fitted model.")
@click.option("--algorithm", type=click.Choice(sorted(ALGORITHMS)), default=None,
              help="kmp (default), kmp-cv, cvm, mmda or skpca; may also be the config file's 'algorithm' key.")
@click.option("--task", type=click.Choice(["auto", "classification", "regression"]), default="auto",
              show_default=True, help="kmp/skpca: classifier or regressor; auto = classification when "
                                      "the store has class names.")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="TOML file of estimator parameters (flat keys, e.g. n_basis = 200); flags win.")
@click.option("--overwrite", is_flag=True, help="Replace --model if it exists.")
@click.option("--checkpoint", default=None, type=click.Path(file_okay=False),
              help="Save the driver's state here every --checkpoint-every iterations (every algorithm).")
@click.option("--checkpoint-every", default=10, show_default=True, type=click.IntRange(1))
@click.option("--resume", is_flag=True, help="Continue the fit saved in --checkpoint (identical model).")
@click.option("--sample-weight", "weights_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help="kmp: a .npy file of one non-negative weight per row of STORE (e.g. class weights).")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--log-json", default=None, type=click.Path(dir_okay=False),
              help="Append one JSON line per iteration to this file (for batch jobs).")
@click.option("--force", is_flag=True,
              help="Save the model even when the fit warns that the kernel width does not fit the data.")
@click.option("--cv", "cv", default=None, type=_Folds(), metavar="K|auto",
              help="kmp: choose gamma and the number of basis functions by K-fold cross-validation along "
                   "the pursuit (--algorithm kmp-cv with --cv K, or --cv auto: 3 folds from 3,000 rows, else "
                   "5); the model refitted with the choice is saved.")
@where_options
def train(store, model_path, algorithm, task, config_path, overwrite, checkpoint, checkpoint_every, resume,
          weights_path, quiet, log_json, force, cv, where, **params):
    """Fit a model on the zarr STORE and save it to --model (open format, see docs/models.md).

    The parameter flags depend on --algorithm: `kmp-dask train --algorithm cvm --help` lists
    CVM's. A fit whose kernel width does not fit the data (KernelWidthWarning) saves nothing
    and ends with an error saying which gamma to try, unless --force.
    """
    from .. import save  # noqa: F401

    config = read_config(config_path) if config_path else {}
    algorithm = algorithm or config.pop("algorithm", "kmp")
    config.pop("algorithm", None)
    if algorithm not in ALGORITHMS:
        raise click.BadParameter(f"unknown algorithm {algorithm!r}; use one of {', '.join(sorted(ALGORITHMS))}",
                                 param_hint="algorithm (in --config)")
    algorithm = _cv_algorithm(algorithm, cv, weights_path)
    _check_output_free(model_path, overwrite, "--model", "model")
    if resume and not checkpoint:
        raise click.UsageError("--resume needs --checkpoint DIR (the directory of the interrupted fit)")
    if weights_path and algorithm != "kmp":
        raise click.UsageError(f"--sample-weight is supported for --algorithm kmp only (got {algorithm})")
    st = _open_store(store)
    task = task if task != "auto" else ("classification" if st.attrs.get("classes") is not None else "regression")
    cls = class_for(algorithm, task)
    flags = {k[len("param__"):]: parse_value(v) for k, v in params.items() if v is not None}
    if cv is not None:
        flags["cv"] = cv
    est = cls(**build_params(cls, config, flags, config_name=config_path))
    if "verbose" in est.get_params():
        est.set_params(verbose=_verbose(quiet))
    fit_kw = {"checkpoint": checkpoint, "checkpoint_every": checkpoint_every, "resume": resume} if checkpoint else {}
    if weights_path:
        fit_kw["sample_weight"] = _read_weights(weights_path)
    if "n_basis" in flags or "n_basis" in config:  # the default is capped at the rows by the fit itself
        _check_n_basis(est, st)
    try:
        seconds = _fit(est, st, where, quiet, log_json, algorithm, fit_kw, force)
    except KeyboardInterrupt:
        click.echo(_interrupted_text(checkpoint, resume), err=True)
        raise
    chosen = getattr(est, "best_estimator_", None)  # kmp-cv: the refitted model with the chosen γ and size
    save(est if chosen is None else chosen, model_path, overwrite=overwrite)
    if not quiet:
        how = "" if chosen is None else f" (chosen by {est.n_splits_}-fold CV: {est.best_params_})"
        click.echo(f"trained {type(est).__name__} on {st.n_rows} rows in {seconds:.1f} s: {_size(est)}{how}; "
                   f"saved to {model_path}")
        _echo_growth(est if chosen is None else chosen)


def _echo_growth(est) -> None:
    """``n_basis=auto``: the size kept and why the growth stopped (one line: ``size_choice_``)."""
    line = getattr(est, "size_choice_", None)
    if line:
        click.echo(line)


def _interrupted_text(checkpoint, resume) -> str:
    """What Ctrl-C during ``train`` leaves, and how not to lose the work next time."""
    if checkpoint:
        return (f"Interrupted: the fit's state saved in --checkpoint {checkpoint} continues with the same command and "
                "--resume (nothing was saved to --model).")
    return ("Interrupted: nothing was saved. Train with --checkpoint DIR to save the fit's state every "
            "--checkpoint-every iterations; after an interruption the same command with --resume continues it.")


def _check_n_basis(est, st) -> None:
    """Before the fit: ``n_basis`` above the store's rows (times its kernels) is refused in one
    line — a pursuit has at most one basis function per row and kernel, and the n_basis² factor
    it would size for the request costs minutes before the first iteration shows it."""
    n = est.get_params().get("n_basis")
    if isinstance(n, bool) or not isinstance(n, int):
        return
    kernel = est.get_params().get("kernel")
    n_kernels = len(kernel) if isinstance(kernel, (list, tuple)) else 1
    if n > st.n_rows * n_kernels:
        raise click.BadParameter(
            f"{n} basis functions on the {st.n_rows} rows of {st.url!r}: a model has at most one basis function per "
            f"training row{' and kernel' if n_kernels > 1 else ''}; pass a size below {st.n_rows * n_kernels} (a few "
            "hundred is typical; --cv K chooses it)", param_hint="--n-basis")


def _cv_algorithm(algorithm: str, cv, weights_path) -> str:
    """``--cv K``: the kmp algorithm as ``kmp-cv`` (refused with the other algorithms and with sample
    weights, which the cross-validated search does not take; ``--checkpoint`` keeps its units and refit)."""
    if cv is None:
        return algorithm
    if algorithm not in ("kmp", "kmp-cv"):
        raise click.UsageError(f"--cv works with --algorithm kmp only (got {algorithm}); choose C / gamma of "
                               f"{algorithm} by hand or leave --cv out")
    if weights_path:
        raise click.UsageError("--cv cannot be combined with --sample-weight: the cross-validated search takes no "
                               "weights; leave --sample-weight out, or train --algorithm kmp with a fixed gamma")
    return "kmp-cv"


def _read_weights(path):
    """The --sample-weight file: a .npy array read without unpickling (the fit checks its values)."""
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise click.BadParameter(f"{path!r} is not a .npy array of numbers ({e}); write one with "
                                 "numpy.save('weights.npy', w)", param_hint="--sample-weight") from None


def _fit(est, st, where, quiet, log_json, algorithm, fit_kw, force=False) -> float:
    """Fit ``est`` on ``st`` where ``where`` says; the fit's seconds. Without ``force`` a
    ``KernelWidthWarning`` ends the command (one ``Error:`` line, nothing saved)."""
    import warnings

    from ..estimators._progress import iteration_listener
    from ..exceptions import KernelWidthWarning

    log = _JsonLog(log_json, algorithm)
    try:
        with running(where, quiet=quiet, nbytes=store_nbytes(st)) as client, warnings.catch_warnings():
            warnings.simplefilter("always" if force else "error", KernelWidthWarning)  # --force: shown, not fatal
            est.set_params(client=client)
            t0 = time.perf_counter()
            try:
                with iteration_listener(log) if log.fh is not None else contextlib.nullcontext():
                    est.fit(st.url, **fit_kw)
            except KernelWidthWarning as w:
                raise click.ClickException(
                    " ".join(str(w).split()) + " Nothing was saved: train again with such a --gamma (or "
                    "standardised data), or pass --force to save this model anyway.") from None
            seconds = time.perf_counter() - t0
    finally:
        log.close()
    est.set_params(client=None)
    return seconds


def _size(est) -> str:
    """The fitted model's size for the summary line: basis functions (KMP), vectors (a compressed
    model), features and the distinct vectors they expand on (MMDA), components (sparse KPCA),
    and for a CVM the distinct core vectors of all its binary problems (the rows of its kernel
    expansion), not the number of problems."""
    if getattr(est, "n_features_out_", None) is not None and getattr(est, "expansion_", None) is not None:
        return f"{int(est.n_features_out_)} features on {est.expansion_.n_vectors} core vectors"
    for attr, what in (("n_basis_", "basis functions"), ("n_vectors_", "vectors"),
                       ("n_components_", "components")):
        v = getattr(est, attr, None)
        if v is not None:
            return f"{int(v)} {what}"
    if getattr(est, "core_indices_", None) is not None:
        return f"{est.expansion_.n_vectors} core vectors"
    return "fitted"


def _data_options(fn):
    """``--label``, ``--delimiter``, ``--no-header``: how DATA's file is read (as ``ingest`` reads it)."""
    fn = click.option("--no-header", is_flag=True,
                      help="CSV/TSV DATA: the first line is data; columns by position (--label 0 is the first).")(fn)
    fn = click.option("--delimiter", default=None,
                      help="CSV/TSV DATA: the field delimiter (default: detected from the first lines).")(fn)
    return fn


def _scoring(model, data, label, delimiter, no_header, warn=True):
    """DATA as the model scores it, columns matched by name (kmp_dask.evaluation.scoring_data)."""
    from ..evaluation import scoring_data
    from ._data import _delimiter

    kw = {"label": label} if label is not None else {}
    return scoring_data(model, data, delimiter=_delimiter(delimiter), header=not no_header, warn=warn, **kw)


@main.command(short_help="Accuracy / per-class metrics or R² of a model on a store or a file.",
              epilog="\b\nExamples:\n  kmp-dask evaluate kmp.model test.csv --label species\n"
                     "  kmp-dask evaluate kmp.model data/test.zarr\n"
                     "  kmp-dask evaluate kmp.model data/test.zarr --json --output metrics.json")
@click.argument("model_path", metavar="MODEL")
@click.argument("data", metavar="DATA")
@click.option("--label", default=None,
              help="CSV/TSV, Parquet DATA: the label column, by name or 0-based position (required for them).")
@_data_options
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@click.option("--output", default=None, type=click.Path(dir_okay=False), help="Also write the JSON metrics here.")
@click.option("--overwrite", is_flag=True, help="Replace --output if it exists.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but the metrics.")
@where_options
def evaluate(model_path, data, label, delimiter, no_header, as_json, output, overwrite, quiet, where):
    """Accuracy and per-class metrics (classifiers) or R², MSE, MAE (regressors) on labelled DATA.

    DATA is a store or any file `ingest` reads (.csv/.tsv and .parquet with --label COL, .npz
    with an array y, .libsvm), local or at an s3:// URL, read chunk by chunk (no store is
    written). Named columns are matched to the model's by name, in any order; other columns
    are ignored and listed in one line.
    """
    from ..evaluation import check_evaluate
    from ..evaluation import evaluate as run_evaluate
    from ._where import data_nbytes

    if output:
        _check_output_free(output, overwrite, "--output", "metrics")
    model = _load_model(model_path)
    sd = _scoring(model, data, label, delimiter, no_header, warn=False)
    check_evaluate(model, sd)  # transformer, other columns, no labels, no class in common: before a cluster starts
    sd.warn_ignored()
    with running(where, quiet=quiet or as_json, nbytes=data_nbytes(sd)) as client:
        metrics = run_evaluate(model, sd, client=client)
    metrics = {"model": str(model_path), "store": sd.url, **metrics}
    text = json.dumps(metrics, indent=2)
    if output:
        _atomic_write_text(output, text)
    click.echo(text if as_json else _metrics_text(metrics))


def _metrics_text(m) -> str:
    if m["task"] == "regression":
        return f"{m['n_rows']} rows: R² {m['r2']:.4f}, MSE {m['mse']:.4g}, MAE {m['mae']:.4g}"
    lines = [f"{m['n_rows']} rows: accuracy {m['accuracy']:.4f}",
             f"{'class':>16} {'precision':>9} {'recall':>9} {'f1':>9} {'support':>9}"]
    for c, v in m["per_class"].items():
        lines.append(f"{c[:16]:>16} {v['precision']:9.4f} {v['recall']:9.4f} {v['f1']:9.4f} {v['support']:9d}")
    if m["n_unknown_labels"]:
        lines.append(f"{m['n_unknown_labels']} rows have a label the model never saw (counted as errors)")
    return "\n".join(lines)


def _atomic_write_text(path, text: str) -> None:
    import os

    from .._temporaries import remove_stale, temporary

    p = Path(path)
    remove_stale(p)
    with temporary(p) as tmp:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)


@main.command(short_help="Predictions, probabilities or features of a store or a file, to .csv/.parquet/.npy/.zarr.",
              epilog="\b\nExamples:\n"
                     "  kmp-dask predict kmp.model new.csv --output pred.csv              "
                     "# a new file, no label needed\n"
                     "  kmp-dask predict kmp.model new.parquet --output pred.parquet\n"
                     "  kmp-dask predict kmp.model data/test.zarr --output pred.csv          "
                     "# row, prediction (class names)\n"
                     "  kmp-dask predict kmp.model data/test.zarr --output proba.parquet --proba   "
                     "# row, proba_<class>...\n"
                     "  kmp-dask predict svc10.model data/test.zarr --output scores.npy --decision\n"
                     "  kmp-dask predict kmp.model data/test.zarr --output pred.zarr         "
                     "# a store: X = decision values, y = classes\n"
                     "  kmp-dask predict mmda.model data/train.zarr --output features.zarr   "
                     "# X = features, y = labels")
@click.argument("model_path", metavar="MODEL")
@click.argument("data", metavar="DATA")
@click.option("--output", required=True, type=click.Path(),
              help="Where to write; the extension names the format: .csv, .parquet, .npy or .zarr.")
@click.option("--label", default=None,
              help="CSV/TSV, Parquet DATA: a label column to leave out (by name or 0-based position); a named label "
                   "column is left out anyway when the model's columns are named.")
@_data_options
@click.option("--proba", is_flag=True, help="Class probabilities instead of classes (models with predict_proba).")
@click.option("--decision", is_flag=True, help="Decision values instead of classes (models with decision_function).")
@click.option("--overwrite", is_flag=True, help="Replace --output if it exists (once the new one is complete).")
@click.option("--quiet", "-q", is_flag=True)
@where_options
def predict(model_path, data, output, label, delimiter, no_header, proba, decision, overwrite, quiet, where):
    """Write MODEL's predictions over DATA, chunk by chunk and in DATA's row order, to --output.

    DATA is a store or any file `ingest` reads (.csv/.tsv, .parquet, .npy/.npz, .libsvm), local
    or at an s3:// URL, read chunk by chunk (no store is written); it needs no label column.
    Named columns are matched to the model's by name, in any order; other columns (a label
    column too) are ignored and listed in one line.

    .csv / .parquet: a `row` column, then `prediction` (class names for classifiers), or
    `proba_<class>` (--proba), `decision_<class>` (--decision), `feature_<name>` (transformers).
    .npy: the same values as one array. .zarr: a store (classifiers: y = predicted class, X =
    decision values, or probabilities with --proba; regressors: X = y = predictions; transformers
    (mmda, skpca): X = features, y = DATA's labels).
    """
    from ..evaluation import check_output_request, output_format, predict_to_file
    from ._where import data_nbytes

    if proba and decision:
        raise click.UsageError("--proba and --decision are exclusive: write one, then the other to a second file")
    fmt = output_format(output)
    if fmt == "zarr":
        _check_output_free(output, overwrite, "--output", "store")
    else:
        _check_output_free(output, overwrite, "--output", "predictions")
    model = _load_model(model_path)
    what = "proba" if proba else "decision" if decision else "auto"
    check_output_request(model, what)
    sd = _scoring(model, data, label, delimiter, no_header)
    with running(where, quiet=quiet, nbytes=data_nbytes(sd)) as client:
        out = predict_to_file(model, sd, output, output=what, overwrite=overwrite, client=client,
                              provenance={"model_path": str(model_path)})
    if not quiet:
        click.echo(f"wrote {out['n_rows']} rows ({fmt}) to {out['path']}")
