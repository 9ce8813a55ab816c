"""Peak resident memory of ingesting a large Parquet file (a 5 GB file under 1 GB RSS).

What is measured
----------------
1. A seeded Parquet file is written chunk by chunk (``pyarrow.parquet.ParquetWriter``, one row
   group per chunk; this process never holds more than one chunk): ``--features`` float64 columns
   of normal noise plus a text label column ``label`` (``"class_0"`` … ``"class_4"``) placed FIRST,
   as a user's file might have it. Random floats do not compress, so the file's size is about
   ``rows · (8 · features + ~12)`` bytes.
2. ``kmp_dask.store.ingest(file, store, label="label")`` runs in a fresh child process; its peak
   resident set size is read exactly from the kernel (``getrusage(RUSAGE_CHILDREN).ru_maxrss``
   of an intermediate interpreter, as in ``ingest_memory.py``): no sampling. The ingest makes one
   pass over the label column (the text classes) and one over the whole file (record batches of
   one storage chunk, row group by row group).
3. A ``baseline`` child only imports numpy, zarr, pyarrow and kmp_dask.

The store is reopened and its shape checked; file and store are deleted afterwards (``--keep``
keeps them). Results: benchmarks/results/ingest_parquet.json (``--quick``: a 20 MB smoke test
written to $TMPDIR/kmp_dask_benchmarks/).

Usage: ``python benchmarks/ingest_parquet.py [--gb 5] [--features 20] [--row-group-rows 500000]
[--dir DIR] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from ingest_memory import child_peak_rss  # noqa: E402

NAME = "ingest_parquet"
LIMIT_BYTES = 1 << 30

_BASELINE = "import numpy, zarr, pyarrow.parquet, kmp_dask, kmp_dask.store"

_INGEST = """
import sys
from kmp_dask.store import ingest, open_store
src, dst = sys.argv[1], sys.argv[2]
st = ingest(src, dst, label="label")
again = open_store(dst)
print(again.n_rows, again.n_features, again.row_chunks[0], len(again.row_chunks), len(again.attrs["classes"]))
"""


def write_parquet(path: str, n_rows: int, n_features: int, group_rows: int, seed: int = 0) -> int:
    """Write the seeded file chunk by chunk; return its size in bytes."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    names = np.array([f"class_{k}" for k in range(5)])
    schema = pa.schema([("label", pa.string())] + [(f"f{j}", pa.float64()) for j in range(n_features)])
    with pq.ParquetWriter(path, schema) as w:
        for start in range(0, n_rows, group_rows):
            n = min(group_rows, n_rows - start)
            X = rng.standard_normal((n, n_features))
            cols = [pa.array(names[rng.integers(0, 5, n)])] + [pa.array(X[:, j]) for j in range(n_features)]
            w.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=group_rows)
    return os.path.getsize(path)


def measure(gb: float, n_features: int, group_rows: int, workdir: str | None, keep: bool) -> dict:
    bytes_per_row = 8 * n_features + 12
    n_rows = int(gb * 1e9 / bytes_per_row)
    tmp = tempfile.mkdtemp(prefix="kmp_ingest_parquet_", dir=workdir)
    try:
        src, dst = os.path.join(tmp, "big.parquet"), os.path.join(tmp, "big.zarr")
        t0 = time.perf_counter()
        size = write_parquet(src, n_rows, n_features, group_rows)
        write_s = time.perf_counter() - t0
        H.log(f"wrote {size / 1e9:.2f} GB ({n_rows:,} rows) in {write_s:.0f} s")
        base_rss, _, _ = child_peak_rss(_BASELINE)
        rss, seconds, out = child_peak_rss(_INGEST, src, dst)
        rows, feats, chunk_rows, n_chunks, n_classes = (int(v) for v in out.split())
        assert rows == n_rows and feats == n_features and n_classes == 5, out
        disk = sum(f.stat().st_size for f in Path(dst).rglob("*") if f.is_file())
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "n_rows": n_rows, "n_features": n_features, "row_group_rows": group_rows,
        "parquet_bytes": size, "parquet_write_seconds": write_s,
        "store_chunk_rows": chunk_rows, "store_chunks": n_chunks, "store_bytes_on_disk": disk,
        "baseline_peak_rss_bytes": base_rss, "ingest_peak_rss_bytes": rss, "ingest_seconds": seconds,
        "ingest_mb_per_second": size / 1e6 / seconds, "limit_bytes": LIMIT_BYTES,
        "meets_limit": bool(rss < LIMIT_BYTES),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gb", type=float, default=5.0, help="size of the Parquet file in GB (10^9 bytes)")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--row-group-rows", type=int, default=500_000)
    p.add_argument("--dir", default=None, help="where file and store are written (default: $TMPDIR)")
    p.add_argument("--keep", action="store_true", help="keep the file and the store")
    p.add_argument("--quick", action="store_true", help="smoke test: a 0.02 GB file")
    H.add_common_args(p, NAME, plots=False, threads=False)
    args = p.parse_args(argv)
    out = H.output_path(NAME, args.out, args.quick)
    rec = measure(0.02 if args.quick else args.gb, args.features, 50_000 if args.quick else args.row_group_rows,
                  args.dir, args.keep)
    rec.update(quick=bool(args.quick), environment=H.environment())
    mib = 2.0 ** 20
    print(f"{rec['parquet_bytes'] / 1e9:.2f} GB Parquet ({rec['n_rows']:,} rows x {rec['n_features']} + label, "
          f"row groups of {rec['row_group_rows']:,}): ingest peak RSS {rec['ingest_peak_rss_bytes'] / mib:,.0f} MiB "
          f"(baseline {rec['baseline_peak_rss_bytes'] / mib:,.0f} MiB), {rec['ingest_seconds']:.0f} s "
          f"({rec['ingest_mb_per_second']:.0f} MB/s); limit 1024 MiB: {'met' if rec['meets_limit'] else 'NOT met'}")
    H.write_json(out, rec)
    return 0 if rec["meets_limit"] else 1


if __name__ == "__main__":
    sys.exit(main())
