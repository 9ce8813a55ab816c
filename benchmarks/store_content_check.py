"""What does checking a store's chunks as they are read cost (docs/store.md "Content checks")?

What is measured
----------------
A store of N × d float32 rows (default 10⁶ × 20, 80 MB of X, labels with ``classes``) is
written by ``create_store``. Then, per storage chunk, in one process, each timing the median of
``--repeats`` passes over every chunk (the files are in the page cache after the first pass, so
this is the *cheapest* read, where the check weighs most):

* ``read``: zarr alone, ``arr[a:b]`` for X and y (decompression; no kmp_dask code);
* ``check``: :class:`~kmp_dask.store._validation.ContentCheck` on the blocks already read (the
  NaN/inf scan of X and y and the label-code range check of y);
* ``files``: the missing-chunk test on the blocks already read (does a chunk read as nothing
  but the fill value? O(d) per chunk when not, so no file-system call);
* ``read_range``: ``ZarrStore.read_range`` chunk by chunk with the checks on, and with
  ``kmp_dask.check-finite=False`` (codes and files still checked).

The ratio ``check / read`` is what the check adds to a data pass. Results go to
``benchmarks/results/store_content_check.json`` (``--quick``: 10⁵ rows, written to
``$TMPDIR/kmp_dask_benchmarks/``).

Usage: ``python benchmarks/store_content_check.py [--rows 1000000] [--features 20] [--chunk-rows N] [--quick]``
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "store_content_check"


def _args(p):
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per storage chunk (default: ingest's, ~16 MiB)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="10⁵ rows, output under $TMPDIR")


def _median_pass(fn, bounds, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for a, b in bounds:
            fn(a, b)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, _args, argv)
    import dask
    import numpy as np

    from kmp_dask.store import create_store
    from kmp_dask.store._zarr import _check_chunk_files

    t0 = time.perf_counter()
    n = 100_000 if args.quick else args.rows
    d = args.features
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d), dtype=np.float32)
    y = (X[:, 0] > 0).astype(np.int32)
    tmp = Path(tempfile.mkdtemp(prefix="kmp-content-check-"))
    try:
        store = create_store(tmp / "s.zarr", X, y, chunk_rows=args.chunk_rows, classes=["neg", "pos"])
        del X
        starts = np.concatenate([[0], np.cumsum(store.row_chunks)])
        bounds = [(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:], strict=True)]
        Xa, ya = store._X, store._y
        check = store.content_check(finite=True)
        blocks = {a: (Xa[a:b], ya[a:b]) for a, b in bounds}
        for a, b in bounds:  # warm the page cache and zarr's metadata
            Xa[a:b], ya[a:b]
        H.log(f"{n} x {d} float32, {len(bounds)} chunks of {store.chunk_rows} rows")

        read = _median_pass(lambda a, b: (Xa[a:b], ya[a:b]), bounds, args.repeats)
        chk = _median_pass(lambda a, b: (check.X(blocks[a][0], a), check.y(blocks[a][1], a)), bounds, args.repeats)
        files = _median_pass(lambda a, b: (_check_chunk_files(Xa, "X", store.location, a, b, blocks[a][0]),
                                           _check_chunk_files(ya, "y", store.location, a, b, blocks[a][1])),
                             bounds, args.repeats)
        on = _median_pass(store.read_range, bounds, args.repeats)
        with dask.config.set({"kmp_dask.check-finite": False}):
            off = _median_pass(store.read_range, bounds, args.repeats)
        result = {
            "question": "cost of the per-chunk content checks against the read of the chunk",
            "rows": n, "features": d, "dtype": "float32", "chunk_rows": store.chunk_rows, "chunks": len(bounds),
            "x_bytes": n * d * 4, "repeats": args.repeats,
            "seconds_per_pass": {"read": read, "check": chk, "files": files, "read_range_checked": on,
                                 "read_range_check_finite_false": off},
            "check_over_read": chk / read, "files_over_read": files / read,
            "read_range_checked_over_unchecked": on / off,
            "environment": H.environment(),
        }
        H.log(f"read {read:.3f}s  check {chk:.3f}s ({chk / read:.1%})  files {files:.5f}s  "
              f"read_range {on:.3f}s checked / {off:.3f}s check-finite=False")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    H.finish(result, H.output_path(NAME, args.out, args.quick), t0)


if __name__ == "__main__":
    main()
