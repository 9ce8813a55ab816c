"""Which files are predictions that ``predict --output`` wrote (asked by kmp_dask/_overwrite.py).

Kept apart from :mod:`kmp_dask.evaluation` so that the overwrite check (imported by the store
layer) imports nothing but the standard library (and pyarrow, lazily, for a Parquet footer).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["PARQUET_MARKER", "predictions_file_reason"]

PARQUET_MARKER = {b"kmp_dask": b"predictions"}
"""Schema metadata of a predictions Parquet file (recognised by ``--overwrite``)."""

_CSV_HEADER = re.compile(r"^row,(prediction(_\d+)?|proba_[^,\n]*|decision(_[^,\n]*)?|feature_[^,\n]*)(,|\r?\n|$)")


def predictions_file_reason(p) -> str | None:
    """None when the file ``p`` is a predictions file :func:`predict_to_file` wrote (CSV: its header;
    Parquet: its schema metadata), else why not (kmp_dask/_overwrite.py asks this)."""
    p = Path(p)
    if not p.is_file():
        return "it is not a file"
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return "a .npy file carries no mark of what wrote it, so it is never replaced"
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            meta = pq.read_schema(p).metadata or {}
        except Exception:  # noqa: BLE001 - unreadable: not ours
            meta = {}
        ok = meta.get(b"kmp_dask") == PARQUET_MARKER[b"kmp_dask"]
        return None if ok else "it is not a Parquet file of predictions written by kmp_dask (no kmp_dask metadata)"
    with open(p, "rb") as fh:
        head = fh.read(4096).decode("utf-8", "replace")
    if _CSV_HEADER.match(head):
        return None
    return "it is not a CSV file of predictions written by kmp_dask (its header is not row,prediction...)"
