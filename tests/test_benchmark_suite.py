"""benchmarks/suite.py: the suite's table in benchmarks/README.md is the one its results give, and
each headline benchmark has its script and a record to summarise."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _suite():
    spec = importlib.util.spec_from_file_location("bench_suite", BENCH / "suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_suite"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_readme_table_and_suite_json_are_current():
    """Regenerate in memory and compare: fails when results/*.json changed without `suite.py table`."""
    assert _suite().table(check=True) == 0


def test_a_stale_table_is_detected(tmp_path, monkeypatch):
    suite = _suite()
    readme = tmp_path / "README.md"
    text = suite.README.read_text(encoding="utf-8")
    head, table = text.split(suite.BEGIN, 1)
    assert "| `svc_race` |" in table
    readme.write_text(head + suite.BEGIN + table.replace("| `svc_race` |", "| `svc_race (old)` |", 1), encoding="utf-8")
    results = tmp_path / "results"
    results.mkdir()
    for bench in suite.SUITE:
        (results / f"{bench.name}.json").write_bytes((suite.RESULTS / f"{bench.name}.json").read_bytes())
    (results / "suite.json").write_bytes((suite.RESULTS / "suite.json").read_bytes())
    monkeypatch.setattr(suite, "README", readme)
    monkeypatch.setattr(suite, "RESULTS", results)
    assert suite.table(check=True) == 1


def test_every_benchmark_has_a_script_and_rows():
    suite = _suite()
    assert {b.name for b in suite.SUITE} == {"svc_race", "out_of_core", "large_n", "keel_cv", "reduced_sets",
                                             "kmp_auto_race", "kmp_auto_acceptance", "cvm_growth"}
    for bench in suite.SUITE:
        assert (BENCH / bench.script).is_file()
        record = suite.summarise(bench)
        fields = {"case", "metric", "value", "unit", "reference"}
        assert record["rows"] and all(set(r) == fields for r in record["rows"])
        json.dumps(record)  # the one results format is plain JSON
