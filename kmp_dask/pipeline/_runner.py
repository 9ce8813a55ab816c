"""Run a pipeline: each step writes its outputs under the run directory and a completion record
``steps/STEP.json``; ``resume`` skips completed steps and continues an interrupted KMP fit
from its checkpoint (``checkpoint/``), giving the identical model.

Steps, in order: ``data`` (one store per ``[data.NAME]``), ``model`` (a kmp_dask estimator,
or a scikit-learn one for pipelines that compress it), ``compress``, ``features`` (a
transformer's output over stores, as new stores NAME_features), ``downstream`` (a
scikit-learn classifier on those features), ``evaluate``, ``report``. A finished run leaves
``summary.json``: every step's results, seconds, and peak memory of the driver and workers.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from pathlib import Path

from .._overwrite import RUN_MARKER

__all__ = ["run_pipeline", "RunDirectory"]


class RunDirectory:
    """The one directory a run writes; step records written atomically.

    A run directory carries the marker file ``.kmp_dask-run`` (kmp_dask/_overwrite.py): only such a
    directory (holding nothing but what a run writes) is replaced by ``overwrite`` — its entries
    are deleted, the directory itself stays — or continued by ``resume``. Anything else that
    exists (a user's directory, ``.``, ``..``, the home directory) is refused before anything is
    written; an existing empty directory (with overwrite or resume) has nothing to lose."""

    def __init__(self, root, *, overwrite: bool, resume: bool, verbose=0):
        from .._overwrite import check_replaceable, clear_run_directory

        self.root = Path(root).expanduser()  # every step writes under this one path
        self.verbose = verbose  # the fits' progress (estimators' verbose)
        self.resumed = False
        if self.root.exists():
            if not (overwrite or resume):
                raise FileExistsError(f"output directory {str(self.root)!r} exists; pass overwrite=True to replace "
                                      "it, or resume=True to continue the run in it")
            check_replaceable(self.root, ("run",), option="output directory")
            if resume:
                self.resumed = any(self.root.iterdir())
            else:
                clear_run_directory(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        marker = self.root / RUN_MARKER
        if not marker.exists():
            marker.write_text(json.dumps({"format": "kmp_dask-run", "created": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        (self.root / "steps").mkdir(exist_ok=True)
        self._real = self.root.resolve()

    def path(self, *parts) -> Path:
        """``root/parts``, refused if it would leave the run directory (data names are names)."""
        p = self.root.joinpath(*parts)
        real = p.resolve()
        if real != self._real and self._real not in real.parents:
            raise ValueError(f"{str(p)!r} is outside the run directory {str(self.root)!r}; pipeline files stay "
                             "inside it (data names are names, not paths)")
        return p

    def done(self, step: str):
        p = self.path("steps", f"{step}.json")
        return json.loads(p.read_text()) if p.is_file() else None

    def record(self, step: str, result: dict) -> dict:
        p = self.path("steps", f"{step}.json")
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2, default=json_default))
        os.replace(tmp, p)
        return result


def json_default(v):
    """JSON for NumPy values (and ``str`` of anything else) in records and logs."""
    import numpy as np

    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def _data_step(spec, run, client):
    from ._steps import make_store

    out = {}
    for name, d in spec["data"].items():
        target = run.path("data", f"{name}.zarr")
        st = make_store(d, target, client, overwrite=run.resumed)
        path = str(target) if not hasattr(st, "url") or os.path.realpath(st.url) == os.path.realpath(target) else st.url
        out[name] = {"path": path, "n_rows": st.n_rows, "n_features": st.n_features,
                     **({"in_place": True} if path != str(target) else {})}
    return out


def _peak_memory(client) -> dict:
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    workers = {}
    if client is not None and hasattr(client, "run"):  # not for client="sync" (in process)
        workers = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"driver_peak_rss_bytes": int(driver), "workers_peak_rss_bytes": {k: int(v) for k, v in workers.items()}}


def _steps(spec):
    from . import _steps as s

    yield "data", _data_step
    yield "model", s.model_step
    for name, fn in (("compress", s.compress_step), ("features", s.features_step),
                     ("downstream", s.downstream_step), ("evaluate", s.evaluate_step)):
        if name in spec:
            yield name, fn
    yield "report", s.report_step


def check_resumable(spec: dict, output) -> None:
    """A run is resumed only with the spec it was started with (its ``pipeline.json``)."""
    earlier = Path(output) / "pipeline.json"
    if not earlier.is_file():
        return
    try:
        same = json.loads(earlier.read_text()) == json.loads(json.dumps(spec, default=json_default))
    except ValueError:
        same = False
    if not same:
        raise ValueError(f"the run in {str(output)!r} was started from a different pipeline (its pipeline.json "
                         "differs from this spec, e.g. another file or --small): resume it with the same file and "
                         "options, or overwrite it to start again")


def run_pipeline(spec: dict, output, *, client, overwrite: bool = False, resume: bool = False, log=print,
                 verbose=0) -> dict:
    """Run ``spec`` (from :func:`load_spec`) into ``output`` on ``client``; return the summary.

    ``verbose`` is given to the estimators that have it (unless the spec sets it): progress."""
    output = Path(output).expanduser()
    if resume and Path(output).exists():
        from .._overwrite import check_replaceable

        check_replaceable(output, ("run",), option="output directory")  # before reading anything in it
        check_resumable(spec, output)
    run = RunDirectory(output, overwrite=overwrite, resume=resume, verbose=verbose)
    if not (run.path("pipeline.json").is_file() and run.resumed):
        run.path("pipeline.json").write_text(json.dumps(spec, indent=2, default=json_default))
    results, t_all = {}, time.perf_counter()
    for name, fn in _steps(spec):
        previous = run.done(name) if resume else None
        if previous is not None:
            log(f"[{spec['name']}] {name}: done in an earlier run, skipped")
            results[name] = previous
            continue
        log(f"[{spec['name']}] {name} ...")
        t0 = time.perf_counter()
        res = fn(spec, run, client, resume=resume) if name != "data" else fn(spec, run, client)
        res = {**res, "seconds": time.perf_counter() - t0}
        results[name] = run.record(name, res)
        log(f"[{spec['name']}] {name}: {_short(res)}")
    summary = {"pipeline": spec["name"], "output": str(run.root), "seconds": time.perf_counter() - t_all,
               "steps": results, "memory": _peak_memory(client)}
    run.record("summary", summary)
    shutil.copyfile(run.path("steps", "summary.json"), run.path("summary.json"))
    return summary


def _short(res: dict) -> str:
    keys = ("accuracy", "r2", "n_basis", "n_vectors", "n_components", "n_features", "n_core_vectors",
            "downstream_accuracy", "report")
    parts = [f"{k} {res[k]:.4g}" if isinstance(res[k], float) else f"{k} {res[k]}" for k in keys if k in res]
    return ", ".join(parts + [f"{res['seconds']:.1f} s"])
