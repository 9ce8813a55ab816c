"""Peak RSS of a 10⁷-row synthetic ingest stays under 1 GiB (slow: ~1 minute).

Runs the same measurement as ``benchmarks/ingest_memory.py`` (a fresh child interpreter, its
peak RSS read from ``getrusage`` after it exits). Run with ``pytest -m slow``.
"""

import importlib.util
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ingest_memory.py"


def _bench():
    spec = importlib.util.spec_from_file_location("ingest_memory", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_ten_million_row_ingest_peak_rss_under_one_gib(tmp_path):
    rec = _bench().measure(10_000_000, workdir=str(tmp_path))
    assert rec["n_chunks"] > 1
    assert rec["ingest_peak_rss_bytes"] < 1 << 30, rec
    # the whole X would be 2 GiB: memory is bounded by chunks, not by N
    assert rec["ingest_peak_rss_bytes"] < rec["x_bytes"] / 4, rec
