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
  kmp-dask ingest data.csv data.zarr --chunk-rows 100000
  kmp-dask ingest X.npy data.zarr --labels y.npy
  kmp-dask ingest parts/ data.zarr        # a directory of .npz files (arrays X, y)
"""


@main.command(epilog=INGEST_EPILOG)
@click.argument("source")
@click.argument("target", type=click.Path())
@click.option("--chunk-rows", default=None, type=int, help="Rows per storage chunk (default ~16 MiB chunks).")
@click.option("--overwrite", is_flag=True, help="Replace TARGET if it exists (only once the new store is complete).")
@click.option("--n-rows", default=None, type=int, help="Rows for synthetic:classification / synthetic:regression.")
@click.option("--seed", default=0, show_default=True, help="Seed for synthetic generators.")
@click.option("--start-row", default=0, show_default=True, type=click.IntRange(0),
              help="Synthetic sources: first row of the seeded sequence (a held-out store: --start-row N_TRAIN).")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar of rows written (default: only on a terminal).")
@click.option("--labels", default=None, type=click.Path(exists=True, dir_okay=False),
              help="For a .npy SOURCE: a .npy file of labels (one per row).")
def ingest(source, target, chunk_rows, overwrite, n_rows, seed, start_row, progress, labels):
    """Write SOURCE into a zarr store at TARGET.

    SOURCE is keel:NAME, sklearn:NAME, synthetic:classification, synthetic:regression,
    a path to a .csv (last column = label) or .libsvm/.svm file, a .npy file (X; labels with
    --labels), a .npz file (arrays X and optionally y), or a directory of .npz (or .npy) files,
    concatenated in name order. An existing TARGET is
    reported before SOURCE is read; with --overwrite it is replaced only once the new store
    is complete.
    """
    from .. import datasets, store

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
                 progress=progress, start_row=start_row)
    elif source.endswith(".csv"):
        st = store.store_from_csv(target, source, chunk_rows=chunk_rows or 100_000, overwrite=overwrite,
                                  progress=progress)
    elif source.endswith((".libsvm", ".svm", ".txt")):
        st = store.store_from_libsvm(target, source, chunk_rows=chunk_rows, overwrite=overwrite,
                                     progress=progress)
    elif source.endswith((".npy", ".npz")) or Path(source).is_dir():
        from ..store import store_from_arrays

        st = store_from_arrays(target, source, labels=labels, chunk_rows=chunk_rows, overwrite=overwrite)
    elif source.startswith(("keel:", "sklearn:")):
        st = datasets.ingest(source, target, chunk_rows=chunk_rows, overwrite=overwrite,
                             progress=progress)
    else:
        raise click.BadParameter(
            f"{source!r} is not a data source; use keel:NAME, sklearn:NAME, "
            "synthetic:classification, synthetic:regression, a .csv, .libsvm, .svm, .txt, .npy or .npz "
            "file, or a directory of .npy/.npz files.",
            param_hint="SOURCE",
        )
    click.echo(f"wrote {st!r}")


@main.command(epilog="\b\nExamples:\n  kmp-dask info train.zarr --verify\n  kmp-dask info kmp.model")
@click.argument("target")
@click.option("--verify", is_flag=True,
              help="Read every chunk of X and y back and check it; exit 1 naming the first corrupt chunk.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar while verifying (default: only on a terminal).")
def info(target, verify, progress):
    """Print what the store or saved model at TARGET holds (shape, chunks, attributes / class, sizes)."""
    from ..store import open_store

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
    else:
        click.echo(f"  verify: chunks not read; `kmp-dask info {shlex.quote(target)} --verify` reads every one back")
    if temporaries:
        click.echo(f"  temporaries: {_temporaries_text(temporaries, target)}")


def _temporaries_text(temporaries, target) -> str:
    """The ``TARGET.tmp-<uuid>`` siblings left by ingests, and what the next ingest does with them."""
    parts = [f"{Path(t.path).name} ({t.why}; {t.nbytes} bytes; "
             f"{'stale: removed by the next ingest of ' + repr(target) if t.stale else 'kept'})" for t in temporaries]
    return f"{len(parts)} left by ingests: " + ", ".join(parts)


