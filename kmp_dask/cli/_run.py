"""``run``: a declarative pipeline file end to end (kmp_dask.pipeline; docs/pipelines.md)."""

from __future__ import annotations

import contextlib

import click

from ._main import main
from ._model import _verbose
from ._where import Where, check_where, mode, running, where_options

RUN_EPILOG = """\b
Examples:
  kmp-dask run pipelines/covertype_skmp.toml                 # full size, embedded cluster
  kmp-dask run pipelines/covertype_skmp.toml --small --output runs/try
  kmp-dask run pipelines/covertype_skmp.toml --resume        # after a kill: identical model
  kmp-dask run pipelines/covertype_skmp.toml --scheduler-file cluster/scheduler.json
"""


@main.command(epilog=RUN_EPILOG, short_help="Run a pipeline file: data, model, compress, evaluate, report.")
@click.argument("pipeline", type=click.Path(dir_okay=False))
@click.option("--output", default=None, type=click.Path(file_okay=False),
              help="Run directory (default: the pipeline's 'output', else runs/NAME).")
@click.option("--small", is_flag=True, help="Apply the pipeline's [small] overrides (tests, a quick look).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in its directory (skips finished steps).")
@click.option("--overwrite", is_flag=True, help="Replace the run directory if it exists.")
@click.option("--quiet", "-q", is_flag=True)
@click.option("--log-json", default=None, type=click.Path(dir_okay=False),
              help="Append one JSON line per iteration of every fit in the run to this file (for batch jobs).")
@where_options
def run(pipeline, output, small, resume, overwrite, quiet, log_json, where):
    """Run PIPELINE (a TOML file): data → model → compress / features → evaluate → report."""
    from pathlib import Path

    from .._overwrite import check_replaceable
    from ..pipeline import load_spec, run_pipeline
    from ..pipeline._runner import check_resumable

    spec = load_spec(pipeline, small=small)
    out = Path(output or spec.get("output") or Path("runs") / spec["name"]).expanduser()
    if out.exists() and not (resume or overwrite):
        raise FileExistsError(f"output directory {str(out)!r} exists; pass --overwrite to replace it, "
                              "or --resume to continue the run in it")
    if out.exists():  # before the cluster starts: only a kmp_dask run directory is replaced or continued
        check_replaceable(out, ("run",), option="output directory")
        if resume:
            check_resumable(spec, out)
    where, nbytes = _where_for(spec, where)
    log = (lambda *_: None) if quiet else (lambda m: click.echo(m, err=True))
    with running(where, quiet=quiet, nbytes=nbytes) as client, _json_lines(log_json, spec):
        summary = run_pipeline(spec, out, client=client, overwrite=overwrite, resume=resume, log=log,
                               verbose=_verbose(quiet))
    click.echo(f"pipeline {spec['name']} finished in {summary['seconds']:.1f} s; results in {out}/summary.json, "
               f"report {out}/report.html")


@contextlib.contextmanager
def _json_lines(path, spec: dict):
    """``--log-json FILE``: every fit of the run (model, compressor, features) appends its
    iterations to FILE, as ``train --log-json`` does (``algorithm``: the model's)."""
    if path is None:
        yield
        return
    from ..estimators._progress import iteration_listener
    from ._model import _JsonLog

    log = _JsonLog(path, spec["model"].get("algorithm") or spec["model"].get("estimator") or "kmp")
    try:
        with iteration_listener(log):
            yield
    finally:
        log.close()


def _where_for(spec: dict, where: Where):
    """Where the pipeline runs: ``--scheduler`` if given, else its ``[run] scheduler`` (default
    auto: by the size of its data, :func:`kmp_dask.pipeline._spec.data_nbytes`). ``[run]``'s
    workers, threads and memory limit size the embedded cluster when one is started."""
    from ..pipeline._spec import data_nbytes

    r = spec.get("run", {})
    if where.scheduler is None and r.get("scheduler"):
        where = Where(**{**where.__dict__, "scheduler": r["scheduler"]})
        check_where(where)
    nbytes = data_nbytes(spec)
    if mode(where, nbytes) == "local":
        where = Where(**{**where.__dict__, "workers": where.workers or r.get("workers"),
                         "threads_per_worker": r.get("threads_per_worker", where.threads_per_worker),
                         "memory_limit": r.get("memory_limit", where.memory_limit)})
    return where, nbytes
