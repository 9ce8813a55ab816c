"""What ``overwrite=True`` / ``--overwrite`` may replace: only what kmp_dask itself wrote.

The one "is this ours?" check of the package (docs/cli.md "What --overwrite replaces"). Every
door that replaces an existing path calls :func:`check_replaceable` first — ``create_store`` and
every ingest (through ``store.check_target_free``), ``predict_to_store``, ``kmp_dask.save``,
``write_report``, the pipeline's run directory and the CLI's ``--model`` / ``--output`` — and
nothing is deleted when it refuses.

Recognised, by the marker kmp_dask writes and by holding nothing else:

``store``
    a directory whose ``zarr.json`` has the attribute ``kmp_dask_store = "dataset"`` and which
    holds only ``zarr.json``, ``X`` and ``y``;
``model``
    a directory whose ``model.json`` has ``"format": "kmp_dask-model"`` and which holds only
    ``model.json`` and ``arrays/`` (of ``aNNNN.npy`` files);
``run``
    a pipeline run directory: the marker file ``.kmp_dask-run`` (runs written before the marker
    existed: ``steps/`` plus a ``pipeline.json`` holding a spec), and only the entries a run
    writes (:data:`RUN_ENTRIES`, kmp_dask's own temporaries of them, ``data/*.zarr``);
``report``
    an HTML file whose header is the one ``write_report`` writes (``<p class="meta">kmp_dask
    VERSION · created ...``);
``metrics``
    a JSON object with the keys ``evaluate --output`` writes (``model``, ``store``, ``task``).
``predictions``
    a CSV file whose header ``predict --output`` writes (``row,`` then ``prediction`` /
    ``proba_`` / ``decision`` / ``feature_`` columns), or a Parquet file with the schema metadata
    ``kmp_dask = predictions``; a ``.npy`` file carries no mark and is never replaced.

An empty directory is free (nothing to lose). Never replaced, whatever it holds: ``/``, the home
directory, and the current directory or any directory containing it (a run directory may be the
current directory: its own entries are removed, the directory itself stays).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = ["ForeignTargetError", "check_replaceable", "kind_of", "RUN_MARKER", "RUN_ENTRIES",
           "clear_run_directory"]

RUN_MARKER = ".kmp_dask-run"
#: Entries a pipeline run writes at the top of its directory.
RUN_ENTRIES = frozenset({RUN_MARKER, "pipeline.json", "data", "model", "compressed", "checkpoint",
                         "checkpoint_compress", "steps", "summary.json", "report.html", "model.joblib", "source_model"})
#: kmp_dask's own temporaries of those entries (save, the report's atomic write, a step record).
_RUN_TEMPORARY = re.compile(r"^\.(model|compressed|source_model)\.(tmp|old)-\w+$|^\.report\.html\.\w+\.tmp$"
                            r"|^\.summary\.json\.\w+$"
                            r"|^\.(model|compressed|source_model|report\.html|summary\.json)\.tmp-\d+-[0-9a-f]{8}$")
_DATA_ENTRY = re.compile(r"^[^/]+\.zarr(\.(tmp|old)-[0-9a-f]{32})?$")
_ARRAY_FILE = re.compile(r"^a\d+\.npy$")
_REPORT_HEADER = re.compile(rb'<header><h1>.*?</h1><p class="meta">kmp_dask \S+ \xc2\xb7 created ', re.S)
_NAMES = {"store": "kmp_dask store", "model": "kmp_dask model", "run": "kmp_dask run directory",
          "report": "kmp_dask report", "metrics": "metrics file written by `kmp-dask evaluate`",
          "predictions": "predictions file written by `kmp-dask predict`"}


class ForeignTargetError(FileExistsError):
    """``overwrite`` was asked for a path that kmp_dask did not write; nothing was deleted."""


def _remote(target) -> bool:
    text = os.fspath(target)
    return isinstance(text, str) and "://" in text and not text.startswith("file://")


def _local(target) -> Path:
    text = os.fspath(target)
    text = text[len("file://"):] if isinstance(text, str) and text.startswith("file://") else text
    return Path(os.path.abspath(os.path.expanduser(text)))


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _others(entries, allowed) -> list[str]:
    return sorted(e for e in entries if not allowed(e))


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _why_not_store(p: Path) -> str | None:
    from .store._schema import MARKER_KEY, MARKER_VALUE

    if not p.is_dir():
        return "it is a file"
    meta = _json(p / "zarr.json")
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    if not isinstance(attrs, dict) or attrs.get(MARKER_KEY) != MARKER_VALUE:
        return f"it has no zarr.json with the attribute {MARKER_KEY} = {MARKER_VALUE!r}"
    other = _others(os.listdir(p), lambda e: e in ("zarr.json", "X", "y"))
    return f"it also holds {_listing(other)}" if other else None


def _why_not_model(p: Path) -> str | None:
    from .persist._io import FORMAT

    if not p.is_dir():
        return "it is a file"
    doc = _json(p / "model.json")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return f"it has no model.json with format {FORMAT!r}"
    other = _others(os.listdir(p), lambda e: e in ("model.json", "arrays"))
    if not other and (p / "arrays").is_dir():
        other = [f"arrays/{e}" for e in _others(os.listdir(p / "arrays"), _ARRAY_FILE.match)]
    return f"it also holds {_listing(other)}" if other else None


def _is_run_entry(name: str) -> bool:
    return name in RUN_ENTRIES or bool(_RUN_TEMPORARY.match(name))


def _why_not_run(p: Path) -> str | None:
    if not p.is_dir():
        return "it is a file"
    marker = _json(p / RUN_MARKER)
    spec = _json(p / "pipeline.json")
    legacy = (p / "steps").is_dir() and isinstance(spec, dict) and "data" in spec and "model" in spec
    if not (isinstance(marker, dict) and marker.get("format") == "kmp_dask-run") and not legacy:
        return f"it has no {RUN_MARKER} marker (nor steps/ and pipeline.json of an earlier run)"
    other = _others(os.listdir(p), _is_run_entry)
    if not other and (p / "data").is_dir():
        other = [f"data/{e}" for e in _others(os.listdir(p / "data"), _DATA_ENTRY.match)]
    return f"it also holds {_listing(other)}" if other else None


def _why_not_report(p: Path) -> str | None:
    if not p.is_file():
        return "it is not a file"
    with open(p, "rb") as fh:
        head = fh.read(1 << 20)
    return None if _REPORT_HEADER.search(head) else "it is not an HTML report written by kmp_dask's write_report"


def _why_not_metrics(p: Path) -> str | None:
    doc = _json(p) if p.is_file() else None
    ok = isinstance(doc, dict) and {"model", "store", "task"} <= set(doc)
    return None if ok else "it is not a JSON object with the keys model, store and task"


def _why_not_predictions(p: Path) -> str | None:
    from ._predictions_file import (
        predictions_file_reason,  # a CSV / Parquet file `predict` wrote (its header / metadata)
    )

    return predictions_file_reason(p)


_CHECKS = {"store": _why_not_store, "model": _why_not_model, "run": _why_not_run, "report": _why_not_report,
           "metrics": _why_not_metrics, "predictions": _why_not_predictions}


def kind_of(target, kinds=tuple(_CHECKS)) -> str | None:
    """Which of ``kinds`` of kmp_dask output the local path ``target`` is (None: none of them)."""
    p = _local(target)
    for kind in kinds:
        if _CHECKS[kind](p) is None:
            return kind
    return None


def _protected(p: Path, kinds) -> str | None:
    real, cwd, home = p.resolve(), Path.cwd().resolve(), Path.home().resolve()
    if real == Path(real.anchor):
        return "it is the root of the file system"
    if real == home:
        return "it is your home directory"
    if real == cwd and kinds == ("run",):
        return None  # a run directory may be the current one: its entries are removed, not it
    if real == cwd or real in cwd.parents:
        return "it is the current directory or contains it"
    return None


def _remote_store_reason(target, storage_options) -> str | None:
    import fsspec

    from .store._schema import MARKER_KEY, MARKER_VALUE

    fs, path = fsspec.core.url_to_fs(os.fspath(target), **(storage_options or {}))
    fs.invalidate_cache(path)  # object stores: list afresh, another writer may have changed the prefix
    try:
        attrs = json.loads(fs.cat(path.rstrip("/") + "/zarr.json")).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        attrs = {}
    if not isinstance(attrs, dict) or attrs.get(MARKER_KEY) != MARKER_VALUE:
        return f"it has no zarr.json with the attribute {MARKER_KEY} = {MARKER_VALUE!r}"
    other = sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=False)} - {"zarr.json", "X", "y"})
    return f"it also holds {_listing(other)}" if other else None


def check_replaceable(target, kinds, *, option: str = "path", storage_options=None) -> None:
    """Raise :class:`ForeignTargetError` unless the existing ``target`` is one of ``kinds``.

    Call it only when ``target`` exists and the caller was asked to overwrite it; an empty
    directory (and a path that does not exist) passes. ``option`` names the argument in the
    message (``"--model"``, ``"target"`` ...)."""
    kinds = tuple(kinds)
    what = " or ".join(_NAMES[k] for k in kinds)
    if _remote(target):
        reason = _remote_store_reason(target, storage_options) if "store" in kinds else "it is not local"
    else:
        p = _local(target)
        if not os.path.lexists(p) or (p.is_dir() and not p.is_symlink() and not os.listdir(p)):
            return
        reason = "it is a symbolic link" if p.is_symlink() else _protected(p, kinds)
        if reason is None:
            reasons = [_CHECKS[k](p) for k in kinds]
            reason = None if None in reasons else reasons[0]
    if reason is not None:
        raise ForeignTargetError(
            f"{option} {os.fspath(target)!r} exists and is not a {what} ({reason}): overwrite only replaces what "
            "kmp_dask wrote, so nothing was deleted. Choose a new path, or move or delete it yourself.")


def clear_run_directory(root) -> None:
    """Delete the entries of the run directory ``root`` (checked with :func:`check_replaceable`);
    the directory itself stays (it may be the current directory)."""
    import shutil

    root = _local(root)
    check_replaceable(root, ("run",), option="output directory")
    for name in sorted(os.listdir(root), key=lambda n: n == RUN_MARKER):  # the marker last
        p = root / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
