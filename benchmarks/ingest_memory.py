"""Peak resident memory of a 10⁷-row synthetic ingest (must stay under 1 GiB).

What is measured
----------------
Each measurement runs in a fresh child process (``python -c ...``) so that its peak resident set
size is its own and is read exactly from the kernel with ``getrusage(RUSAGE_CHILDREN).ru_maxrss``
after it exits — no sampling, nothing missed between samples:

* ``baseline``: the child imports numpy, zarr and kmp_dask and exits (interpreter + libraries).
* ``ingest``: the child writes ``make_classification_store(N, 54 features, float32)`` chunk by
  chunk into a local zarr store (the serial path, no client), reopens it and checks its shape.

The full X array is N·54·4 bytes (2.0 GiB at N = 10⁷), so a peak well under that shows the
writer holds O(chunk) memory. Results go to benchmarks/results/ingest_memory.json (``--quick``:
a smoke test on 200,000 rows, written to $TMPDIR/kmp_dask_benchmarks/).

Usage: ``python benchmarks/ingest_memory.py [--rows 10000000] [--chunk-rows N] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "ingest_memory"
QUICK_ROWS = 200_000
LIMIT_BYTES = 1 << 30

_BASELINE = "import numpy, zarr, kmp_dask, kmp_dask.datasets"

_INGEST = """
import sys
from kmp_dask.datasets import make_classification_store
from kmp_dask.store import open_store
path, n_rows, chunk_rows = sys.argv[1], int(sys.argv[2]), sys.argv[3]
chunk_rows = None if chunk_rows == "auto" else int(chunk_rows)
store = make_classification_store(path, n_rows, n_features=54, chunk_rows=chunk_rows)
again = open_store(path)
assert again.n_rows == n_rows and again.n_features == 54, (again.n_rows, again.n_features)
print(again.row_chunks[0], len(again.row_chunks))
"""


def child_peak_rss(code: str, *args: str) -> tuple[int, float, str]:
    """Run ``code`` in a fresh interpreter; return (peak RSS bytes, seconds, stdout).

    ``RUSAGE_CHILDREN`` reports the maximum over all waited-for children, so each measurement
    runs inside its own intermediate interpreter that reports its single child's figure.
    """
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-c', sys.argv[1], *sys.argv[2:]],"
        " capture_output=True, text=True)\n"
        "dt = time.perf_counter() - t\n"
        "if p.returncode: sys.stderr.write(p.stderr); sys.exit(p.returncode)\n"
        "kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(json.dumps({'kib': kib, 'seconds': dt, 'stdout': p.stdout}))\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, code, *args], capture_output=True,
                         text=True, check=True)
    rec = json.loads(out.stdout)
    return rec["kib"] * 1024, rec["seconds"], rec["stdout"].strip()


def measure(n_rows: int, chunk_rows: str = "auto", workdir: str | None = None) -> dict:
    """Measure baseline and ingest peak RSS; the store is deleted afterwards."""
    tmp = tempfile.mkdtemp(prefix="kmp_ingest_mem_", dir=workdir)
    try:
        base_rss, base_s, _ = child_peak_rss(_BASELINE)
        path = os.path.join(tmp, "synthetic.zarr")
        rss, seconds, out = child_peak_rss(_INGEST, path, str(n_rows), str(chunk_rows))
        first_chunk, n_chunks = (int(v) for v in out.split())
        disk = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "n_rows": n_rows, "n_features": 54, "dtype": "float32",
        "x_bytes": n_rows * 54 * 4, "chunk_rows": first_chunk, "n_chunks": n_chunks,
        "store_bytes_on_disk": disk,
        "baseline_peak_rss_bytes": base_rss,
        "ingest_peak_rss_bytes": rss,
        "ingest_seconds": seconds,
        "ingest_rows_per_second": n_rows / seconds,
        "limit_bytes": LIMIT_BYTES,
        "meets_limit": bool(rss < LIMIT_BYTES),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--chunk-rows", default="auto", help="rows per chunk (default: the store's)")
    p.add_argument("--quick", action="store_true", help=f"smoke test: {QUICK_ROWS:,} rows")
    H.add_common_args(p, NAME, plots=False, threads=False)
    args = p.parse_args(argv)
    out = H.output_path(NAME, args.out, args.quick)
    rec = measure(QUICK_ROWS if args.quick else args.rows, args.chunk_rows)
    rec.update(quick=bool(args.quick), environment=H.environment())
    mib = 2.0 ** 20
    print(f"N={rec['n_rows']:,} x 54 float32 (X = {rec['x_bytes'] / mib:,.0f} MiB), "
          f"{rec['n_chunks']} chunks of {rec['chunk_rows']:,} rows")
    print(f"baseline peak RSS {rec['baseline_peak_rss_bytes'] / mib:,.0f} MiB; "
          f"ingest peak RSS {rec['ingest_peak_rss_bytes'] / mib:,.0f} MiB "
          f"({rec['ingest_seconds']:.1f} s, {rec['ingest_rows_per_second']:,.0f} rows/s); "
          f"limit 1024 MiB: {'met' if rec['meets_limit'] else 'NOT met'}")
    H.write_json(out, rec)
    return 0 if rec["meets_limit"] else 1


if __name__ == "__main__":
    sys.exit(main())
