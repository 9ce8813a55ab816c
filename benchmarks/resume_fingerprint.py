"""What does the resume fingerprint cost, now that it lists every file of the store (docs/store.md "Resume")?

What is measured
----------------
A store of N × d float64 rows (default 10⁶ × 50, 400 MB of X, labels), written by ``create_store``
at two chunkings: ingest's default (~16 MiB chunks) and ``--small-chunk-rows`` (default 1,000 rows:
many small files, the listing's worst case). On each, in one process, interleaved over ``--repeats``
rounds (median and min/max recorded):

* ``fingerprint``: ``data_fingerprint(store)`` as a checkpoint computes it when a fit starts or
  resumes — shape, summary attributes, the first and last chunk read and hashed, and the SHA-256 of
  the file listing (every chunk's and metadata file's name, size and modification time);
* ``listing``: ``ZarrStore.file_manifest()`` alone (the part this change adds);
* ``first_last``: the fingerprint without the listing (what it was before: two chunks read);
* ``checksum_all``: a SHA-256 of every byte of every file of the store — the alternative that would
  also see a change that keeps a file's size and modification time, measured for comparison.

The files are in the page cache after the first round (the cheapest reads: ``checksum_all`` weighs
least there). The machine is shared with other jobs: ``uptime`` before and after is recorded.

Usage: ``python benchmarks/resume_fingerprint.py [--rows 1000000] [--features 50] [--quick]``
(``--quick``: 10⁵ rows, written to ``$TMPDIR/kmp_dask_benchmarks/``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "resume_fingerprint"


def _args(p):
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--small-chunk-rows", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="10⁵ rows, output under $TMPDIR")


def _checksum_all(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            with open(os.path.join(dirpath, f), "rb") as fh:
                while block := fh.read(1 << 22):
                    h.update(block)
    return h.hexdigest()



def _measure(store, path: Path, repeats: int) -> dict:
    from kmp_dask.greedy import _checkpoint as C

    def first_last():
        real = C._files_digest
        C._files_digest = lambda s: None
        try:
            return C.data_fingerprint(store)
        finally:
            C._files_digest = real

    ways = {"fingerprint": lambda: C.data_fingerprint(store), "listing": store.file_manifest,
            "first_last": first_last, "checksum_all": lambda: _checksum_all(path)}
    times = {k: [] for k in ways}
    for _ in range(repeats):  # interleaved: each round runs every way once
        for k, fn in ways.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    out = {k: {"median_s": sorted(v)[len(v) // 2], "min_s": min(v), "max_s": max(v)} for k, v in times.items()}
    out["files"] = len(store.file_manifest())
    out["chunks"] = len(store.row_chunks)
    out["chunk_rows"] = store.chunk_rows
    out["listing_over_first_last"] = out["listing"]["median_s"] / out["first_last"]["median_s"]
    out["checksum_all_over_fingerprint"] = out["checksum_all"]["median_s"] / out["fingerprint"]["median_s"]
    return out


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    import numpy as np

    from kmp_dask.store import create_store

    t0 = time.perf_counter()
    n, d = (100_000 if args.quick else args.rows), args.features
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = (X[:, 0] > 0).astype(np.int32)
    tmp = Path(tempfile.mkdtemp(prefix="kmp-resume-fingerprint-"))
    result = {"question": "cost of the resume fingerprint that lists every file of the store",
              "rows": n, "features": d, "dtype": "float64", "x_bytes": n * d * 8, "repeats": args.repeats,
              "uptime_before": H.uptime(), "layouts": {}}
    try:
        for label, rows in (("default_chunks", None), ("small_chunks", args.small_chunk_rows)):
            path = tmp / f"{label}.zarr"
            store = create_store(path, X, y, chunk_rows=rows, classes=["neg", "pos"])
            res = _measure(store, path, args.repeats)
            res["store_bytes"] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            result["layouts"][label] = res
            H.log(f"{label}: {res['chunks']} chunks, {res['files']} files: fingerprint "
                  f"{res['fingerprint']['median_s'] * 1e3:.1f} ms (listing {res['listing']['median_s'] * 1e3:.1f} ms, "
                  f"first/last {res['first_last']['median_s'] * 1e3:.1f} ms); checksum of every byte "
                  f"{res['checksum_all']['median_s'] * 1e3:.0f} ms")
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["uptime_after"] = H.uptime()
    result["environment"] = H.environment()
    H.finish(result, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
