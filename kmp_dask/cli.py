"""``kmp-dask`` command line: a thin layer over the public API (no numerics here).

Commands
--------
``kmp-dask demo``     ingest a real data set, train stochastic KMP on an embedded process
                      cluster, compare with an SVC baseline (README's main job).
``kmp-dask ingest``   write a data set (keel:NAME, sklearn:NAME, a CSV or LIBSVM file, or a
                      seeded synthetic generator) into a zarr store.
``kmp-dask info``     summarise a store (``--verify``: read every chunk back).

Expected errors (bad input, existing or missing paths, damaged stores, unreachable schedulers)
are printed as one ``Error: ...`` line with exit status 1; ``kmp-dask --traceback ...`` shows
the full Python traceback instead. Anything else (a bug) keeps its traceback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import numpy as np

__all__ = ["main"]

#: Built-in errors that are about the user's input or environment, not bugs.
_EXPECTED_BUILTINS = (FileExistsError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
                      PermissionError, ConnectionError)


def _raised_in_kmp_dask(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is kmp_dask code (our own checks)."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and str(last.tb_frame.f_globals.get("__name__", "")).startswith("kmp_dask")


def is_expected_error(exc: BaseException) -> bool:
    """Errors reported in one line: kmp_dask's own exception classes, file-system and connection
    errors, and ``ValueError`` / ``TypeError`` raised by kmp_dask's input checks."""
    if type(exc).__module__.startswith("kmp_dask") or isinstance(exc, _EXPECTED_BUILTINS):
        return True
    return type(exc) in (ValueError, TypeError) and _raised_in_kmp_dask(exc)


def one_line_message(exc: BaseException) -> str:
    """``exc``'s message on one line, Python argument names replaced by the CLI's options."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, FileExistsError):
        text = text.replace("pass overwrite=True", "pass --overwrite")
    return text


class _Main(click.Group):
    """The command group: expected errors become one ``Error: ...`` line (exit status 1)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            if ctx.meta.get("kmp_dask.traceback") or not is_expected_error(exc):
                raise
            raise click.ClickException(one_line_message(exc)) from None


def _want_progress(flag) -> bool:
    """``--progress/--no-progress``; by default only when stderr is a terminal."""
    return sys.stderr.isatty() if flag is None else bool(flag)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kmp-dask")
@click.option("--traceback", "show_traceback", is_flag=True,
              help="Show the full Python traceback of errors instead of one line.")
@click.pass_context
def main(ctx, show_traceback):
    """Sparse kernel learning (kernel matching pursuit) on chunked zarr data with dask."""
    ctx.meta["kmp_dask.traceback"] = show_traceback


def _split_standardise(ds, test_size, seed):
    from sklearn.model_selection import train_test_split

    stratify = ds.y if ds.task == "classification" else None
    Xtr, Xte, ytr, yte = train_test_split(ds.X, ds.y, test_size=test_size, random_state=seed, stratify=stratify)
    mean, std = Xtr.mean(axis=0), Xtr.std(axis=0)
    std[std == 0] = 1.0
    return (Xtr - mean) / std, (Xte - mean) / std, ytr, yte


def _check_scheduler_option(scheduler: str) -> None:
    """Refuse a malformed ``--scheduler`` address or a missing scheduler file without connecting."""
    from .parallel._client import check_scheduler_address

    fix = ("Pass an address such as tcp://127.0.0.1:8786 (printed by `dask scheduler`) or a "
           "scheduler file (.json), or omit --scheduler to use an embedded cluster.")
    if scheduler.endswith(".json") or Path(scheduler).is_file():
        if not Path(scheduler).is_file():
            raise click.BadParameter(f"no scheduler file at {scheduler!r}. {fix}", param_hint="--scheduler")
        return
    try:
        check_scheduler_address(scheduler, name="--scheduler", fix=fix)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scheduler") from None


@main.command()
@click.option("--dataset", default="keel:banana", show_default=True,
              help="keel:NAME or sklearn:NAME (bundled data only; nothing is downloaded).")
@click.option("--workdir", default="kmp-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the train/test zarr stores are written.")
@click.option("--n-basis", default=100, show_default=True, help="Basis functions to select.")
@click.option("--candidates", default="auto", show_default=True,
              help="'auto' (59 = ceil(log .05 / log .95)), 'all', or an int.")
@click.option("--gamma", default=None, type=float, help="RBF width (default: 1/n_features).")
@click.option("--workers", default=2, show_default=True, help="Worker processes of the embedded cluster.")
@click.option("--scheduler", default=None, help="Use this scheduler address / file instead of an embedded cluster.")
@click.option("--every", default=10, show_default=True, help="Print a progress line every N iterations.")
@click.option("--seed", default=0, show_default=True)
@click.option("--overwrite/--no-overwrite", default=True, show_default=True,
              help="Replace the demo stores in --workdir if they exist.")
def demo(dataset, workdir, n_basis, candidates, gamma, workers, scheduler, every, seed, overwrite):
    """Ingest DATASET, train stochastic KMP on a local process cluster, compare with SVC and
    with the SVC compressed to as many vectors by reduced-set selection."""
    from sklearn.svm import SVC

    from .datasets import load
    from .estimators import KMPClassifier
    from .parallel import embedded_cluster, resolve_client
    from .reduced import ReducedSetCompressor
    from .store import create_store

    if scheduler:
        _check_scheduler_option(scheduler)  # before anything is written to --workdir
    ds = load(dataset)
    if ds.task != "classification":
        raise click.BadParameter(f"the demo needs a classification data set; {dataset} is {ds.task}", param_hint="--dataset")
    Xtr, Xte, ytr, yte = _split_standardise(ds, 0.3, seed)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    name = dataset.split(":")[-1]
    provenance = {"source": dataset, "split": "70/30 stratified", "seed": seed, "standardised": "train mean/std"}
    tr = create_store(work / f"{name}-train.zarr", Xtr, ytr, classes=ds.classes, overwrite=overwrite,
                      feature_names=ds.feature_names, provenance=provenance)
    te = create_store(work / f"{name}-test.zarr", Xte, yte, classes=ds.classes, overwrite=overwrite,
                      feature_names=ds.feature_names, provenance=provenance)
    click.echo(f"ingested {dataset}: train {tr.n_rows} x {tr.n_features} -> {tr.url}, test {te.n_rows} rows -> {te.url}")

    cand = candidates if candidates in ("auto", "all") else int(candidates)
    clf = KMPClassifier(n_basis=n_basis, candidates=cand, gamma=gamma, random_state=seed, verbose=every)
    cm = resolve_client(scheduler, in_memory=False) if scheduler else embedded_cluster(workers)
    with cm as client:
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        click.echo(f"dask cluster: {n_workers} workers ({'embedded LocalCluster' if not scheduler else scheduler})")
        clf.set_params(client=client)
        t0 = time.perf_counter()
        clf.fit(tr.url)
        fit_s = time.perf_counter() - t0
        pred = np.asarray(clf.predict(te.url).compute())
    acc = float(np.mean(pred == np.asarray(ds.classes)[yte]))

    t0 = time.perf_counter()
    svc = SVC(C=1.0, gamma=clf.kernel_.get("gamma")).fit(Xtr, ytr)
    svc_s = time.perf_counter() - t0
    svc_acc = float(svc.score(Xte, yte))
    # the SVC compressed to as many vectors as KMP selected (Weston & Bakır reduced-set selection)
    n_small = int(min(max(clf.n_basis_, 1), svc.n_support_.sum()))
    t0 = time.perf_counter()
    small = ReducedSetCompressor(n_vectors=n_small).fit(svc, Xtr, ytr)
    rs_s = time.perf_counter() - t0
    rs_acc = float(small.score(Xte, yte))
    summary = {
        "dataset": dataset, "n_train": int(tr.n_rows), "n_test": int(te.n_rows),
        "kmp": {"accuracy": acc, "n_basis": int(clf.n_basis_), "fit_seconds": fit_s, "stop_reason": clf.stop_reason_},
        "svc": {"accuracy": svc_acc, "n_support": int(svc.n_support_.sum()), "fit_seconds": svc_s},
        "svc_reduced_set": {"accuracy": rs_acc, "n_vectors": int(small.n_vectors_), "compress_seconds": rs_s},
    }
    click.echo(f"KMP : test accuracy {acc:.4f} with {clf.n_basis_} basis functions (fit {fit_s:.1f} s, stop: {clf.stop_reason_})")
    click.echo(f"SVC : test accuracy {svc_acc:.4f} with {summary['svc']['n_support']} support vectors (fit {svc_s:.1f} s, same gamma, C=1)")
    click.echo(f"SVC reduced set: test accuracy {rs_acc:.4f} with {small.n_vectors_} vectors "
               f"(hyperplane matching pursuit, {rs_s:.1f} s)")
    (work / "demo-summary.json").write_text(json.dumps(summary, indent=2))
    click.echo(f"summary written to {work / 'demo-summary.json'}")


@main.command()
@click.argument("source")
@click.argument("target", type=click.Path())
@click.option("--chunk-rows", default=None, type=int, help="Rows per storage chunk (default ~16 MiB chunks).")
@click.option("--overwrite", is_flag=True, help="Replace TARGET if it exists (only once the new store is complete).")
@click.option("--n-rows", default=None, type=int, help="Rows for synthetic:classification / synthetic:regression.")
@click.option("--seed", default=0, show_default=True, help="Seed for synthetic generators.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar of rows written (default: only on a terminal).")
def ingest(source, target, chunk_rows, overwrite, n_rows, seed, progress):
    """Write SOURCE into a zarr store at TARGET.

    SOURCE is keel:NAME, sklearn:NAME, synthetic:classification, synthetic:regression,
    or a path to a .csv (last column = label) or .libsvm/.svm file. An existing TARGET is
    reported before SOURCE is read; with --overwrite it is replaced only once the new store
    is complete.
    """
    from . import datasets, store

    store.check_target_free(target, overwrite=overwrite)
    progress = _want_progress(progress)
    if source.startswith("synthetic:"):
        kind = source.split(":", 1)[1]
        gen = {"classification": datasets.make_classification_store,
               "regression": datasets.make_regression_store}.get(kind)
        if gen is None:
            raise click.BadParameter(f"unknown generator {kind!r}; use classification or regression", param_hint="SOURCE")
        if not n_rows:
            raise click.BadParameter("synthetic sources need --n-rows", param_hint="--n-rows")
        st = gen(target, n_rows, chunk_rows=chunk_rows, random_state=seed, overwrite=overwrite,
                 progress=progress)
    elif source.endswith(".csv"):
        st = store.store_from_csv(target, source, chunk_rows=chunk_rows or 100_000, overwrite=overwrite,
                                  progress=progress)
    elif source.endswith((".libsvm", ".svm", ".txt")):
        st = store.store_from_libsvm(target, source, chunk_rows=chunk_rows, overwrite=overwrite,
                                     progress=progress)
    elif source.startswith(("keel:", "sklearn:")):
        st = datasets.ingest(source, target, chunk_rows=chunk_rows, overwrite=overwrite,
                             progress=progress)
    else:
        raise click.BadParameter(
            f"{source!r} is not a data source; use keel:NAME, sklearn:NAME, "
            "synthetic:classification, synthetic:regression, or a .csv, .libsvm, .svm or .txt file.",
            param_hint="SOURCE",
        )
    click.echo(f"wrote {st!r}")


@main.command()
@click.argument("target")
@click.option("--verify", is_flag=True,
              help="Read every chunk of X and y back and check it; exit 1 naming the first corrupt chunk.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar while verifying (default: only on a terminal).")
def info(target, verify, progress):
    """Print the shape, chunking and attributes of the store at TARGET."""
    from .store import open_store

    st = open_store(target)
    attrs = st.attrs
    click.echo(f"{st!r}\n  dtype {st.dtype}, {len(st.row_chunks)} row chunks of {st.row_chunks[0]} rows, y {st.y_shape}")
    for key in ("feature_names", "classes", "provenance"):
        val = attrs.get(key)
        text = json.dumps(val) if val is not None else "-"
        click.echo(f"  {key}: {text[:200]}{'...' if len(text) > 200 else ''}")
    if verify:
        bar = None
        if _want_progress(progress):
            from tqdm.auto import tqdm

            bar = tqdm(desc="verify", unit="chunks", file=sys.stderr)

        def tick(done, total):
            bar.total = total
            bar.update(done - bar.n)

        try:
            n = st.verify(callback=tick if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
        click.echo(f"  verify: all {n} chunks of {'X and y' if st.has_y else 'X'} read back intact")


if __name__ == "__main__":
    main()
