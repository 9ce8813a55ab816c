"""``ingest`` and ``info``: data into zarr stores; what a store or a saved model holds."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from ._main import _want_progress, main

INGEST_EPILOG = """\b
Examples:
  kmp-dask ingest keel:banana banana.zarr
  kmp-dask ingest synthetic:classification train.zarr --n-rows 1000000 --seed 0
  kmp-dask ingest synthetic:classification test.zarr --n-rows 100000 --seed 0 --start-row 1000000
  kmp-dask ingest mine.csv train.zarr --label species --drop id --test-size 0.25
                                   # train.zarr + train-test.zarr
  kmp-dask ingest mine.csv mine.zarr --label 0 --delimiter ';'
  kmp-dask ingest new.csv new.zarr --no-label                # features only: a store to predict
  kmp-dask ingest raw.csv raw.zarr --no-header --label 0     # no header line: columns 0, 1, ...
  kmp-dask ingest mine.parquet mine.zarr --label species --n-rows 100000
  kmp-dask ingest X.npy data.zarr --labels y.npy
  kmp-dask ingest parts/ data.zarr        # a directory of .npz files (arrays X, y)
  kmp-dask ingest big.zarr small.zarr --n-rows 10000   # a store: copied chunk by chunk
"""


@main.command(epilog=INGEST_EPILOG, short_help="Write a data source (a file, a data set) into a zarr store.")
@click.argument("source")
@click.argument("target", type=click.Path())
@click.option("--label", default=None,
              help="CSV/TSV, Parquet: the label column, by name or 0-based position (this or --no-label is "
                   "required for them: the label is never guessed).")
@click.option("--no-label", is_flag=True,
              help="CSV/TSV, Parquet: no label column; a store of the features only (to score with predict).")
@click.option("--drop", multiple=True,
              help="CSV/TSV, Parquet: a column to leave out, by name or position (repeat, or comma-separated).")
@click.option("--delimiter", default=None,
              help="CSV/TSV: the field delimiter (default: detected from the first lines).")
@click.option("--no-header", is_flag=True,
              help="CSV/TSV: the first line is data, not column names; columns are then named by position "
                   "(--label 0 is the first).")
@click.option("--n-rows", default=None, type=click.IntRange(1),
              help="Store the first N rows of SOURCE (synthetic sources: rows to generate).")
@click.option("--test-size", default=None, type=float,
              help="Also write a test store of this share of the rows (seeded, stratified in expectation).")
@click.option("--test-target", default=None, type=click.Path(),
              help="With --test-size: the test store (default: TARGET with -test, train.zarr -> train-test.zarr).")
@click.option("--chunk-rows", default=None, type=int, help="Rows per storage chunk (default ~16 MiB chunks).")
@click.option("--overwrite", is_flag=True, help="Replace TARGET if it exists (only once the new store is complete).")
@click.option("--seed", default=0, show_default=True, help="Seed for synthetic generators and the --test-size split.")
@click.option("--start-row", default=0, show_default=True, type=click.IntRange(0),
              help="Synthetic sources: first row of the seeded sequence (a held-out store: --start-row N_TRAIN).")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar of rows written (default: only on a terminal).")
@click.option("--labels", default=None, type=click.Path(exists=True, dir_okay=False),
              help="For a .npy SOURCE: a .npy file of labels (one per row).")
def ingest(source, target, label, no_label, drop, delimiter, no_header, n_rows, test_size, test_target, chunk_rows,
           overwrite, seed, start_row, progress, labels):
    """Write SOURCE into a zarr store at TARGET.

    SOURCE is keel:NAME, sklearn:NAME, synthetic:classification, synthetic:regression,
    a path to a .csv/.tsv file (delimiter detected; --label COL or --no-label required),
    a .parquet file (read by row groups), a .libsvm/.svm/.txt file, a .npy file (X; labels
    with --labels), a .npz file (arrays X and optionally y), a directory of .npz (or .npy)
    files concatenated in name order, or an existing store (copied chunk by chunk). An
    existing TARGET is reported before SOURCE is read; with --overwrite it is replaced only
    once the new store is complete. See docs/store.md "Ingest".
    """
    from .. import store

    try:
        store.source_kind(source)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="SOURCE") from None
    if label is not None and no_label:
        raise click.UsageError("--label and --no-label exclude each other: name the label column, or say there is none")
    drops = [c.strip() for value in drop for c in value.split(",") if c.strip()] or None
    progress = _want_progress(progress)
    options = {k: v for k, v in (("label", label), ("delimiter", _delimiter(delimiter)), ("labels", labels))
               if v is not None}
    if no_label:
        options["label"] = None
    out = store.ingest(source, target, drop=drops, n_rows=n_rows, test_size=test_size, test_target=test_target,
                       seed=seed, start_row=start_row, chunk_rows=chunk_rows or None, overwrite=overwrite,
                       progress=progress, header=not no_header, **options)
    for st in out if isinstance(out, tuple) else (out,):
        click.echo(f"wrote {st!r}")


def _delimiter(value):
    """``--delimiter``: one character; ``\\t`` and ``tab`` mean TAB."""
    if value is None:
        return None
    value = {"\\t": "\t", "tab": "\t", "TAB": "\t"}.get(value, value)
    if len(value) != 1:
        raise click.BadParameter(f"{value!r} is not one character; give the delimiter itself, e.g. ';' or '\\t'",
                                 param_hint="--delimiter")
    return value


@main.command(short_help="Summarise a store or a saved model (--verify reads every chunk).",
              epilog="\b\nExamples:\n  kmp-dask info train.zarr --verify\n  kmp-dask info kmp.model\n"
                     "  kmp-dask info pred.csv --clean     # remove what killed writes of pred.csv left")
@click.argument("target")
@click.option("--verify", is_flag=True,
              help="Read every chunk of X and y back and check it; exit 1 naming the first corrupt chunk.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar while verifying (default: only on a terminal).")
@click.option("--clean", is_flag=True,
              help="First remove the temporaries killed writes of TARGET left beside it (an ingest's TARGET.tmp-*, "
                   "a predict/evaluate/train output's .TARGET.tmp-*) whose writer is gone, listing each; "
                   "temporaries still being written are kept. TARGET need not exist.")
def info(target, verify, progress, clean):
    """Print what the store or saved model at TARGET holds (shape, chunks, attributes / class, sizes)."""
    from ..store import open_store

    if clean:
        _clean(target)
        if not Path(target).exists() and "://" not in target:
            return
    if (Path(target) / "model.json").is_file():
        from ..persist import model_info

        click.echo(json.dumps(model_info(target), indent=2, default=str))
        return

    from ..store._ingest import ingest_temporaries

    temporaries = ingest_temporaries(target)
    if temporaries and not Path(target).exists():
        raise FileNotFoundError(f"no store at {target!r}; beside it: {_temporaries_text(temporaries, target)}")
    st = open_store(target)
    attrs = st.attrs
    click.echo(f"{st!r}\n  dtype {st.dtype}, {len(st.row_chunks)} row chunks of {st.row_chunks[0]} rows, "
               f"y {st.y_shape}")
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
    else:
        click.echo(f"  verify: chunks not read; `kmp-dask info {shlex.quote(target)} --verify` reads every one back")
    if temporaries:
        click.echo(f"  temporaries: {_temporaries_text(temporaries, target)}")


def _clean(target) -> None:
    """``info --clean``: remove the stale temporaries of ``target`` and list them (one line each)."""
    from .._temporaries import remove_stale
    from ..store._ingest import clean_stale_temporaries

    removed = list(clean_stale_temporaries(target, quiet=True)) + remove_stale(target)
    for t in removed:
        click.echo(f"removed {t.path} ({t.why}; {t.nbytes} bytes)")
    click.echo(f"clean: {len(removed)} temporar{'y' if len(removed) == 1 else 'ies'} of {target} removed")


def _temporaries_text(temporaries, target) -> str:
    """The ``TARGET.tmp-<uuid>`` siblings left by ingests, and what the next ingest does with them."""
    parts = [f"{Path(t.path).name} ({t.why}; {t.nbytes} bytes; "
             f"{'stale: removed by the next ingest of ' + repr(target) if t.stale else 'kept'})" for t in temporaries]
    return f"{len(parts)} left by ingests: " + ", ".join(parts)


