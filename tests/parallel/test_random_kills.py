"""A worker SIGKILLed at a random moment of a fit, on real ``dask scheduler`` + ``dask worker --nanny``
processes, is repaired with the identical model.

Both tests run ``benchmarks/random_kills.py`` (:func:`run_random_kills`) on the working tree's
kmp_dask: each fit in a child process (so a hang fails the test after ``fit_timeout`` instead of
blocking it), one worker *process* (never its nanny) SIGKILLed at a uniformly random time within
the measured fit duration, or right after a randomly chosen engine call; the model compared bit for
bit with a fit without faults. The full benchmark (50 + 10 kills, 3 scheduler kills) writes
``benchmarks/results/random_kills.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import random_kills as RK  # noqa: E402


def _explain(doc):
    """The failed or different runs, for the assertion message."""
    bad = [r for r in doc["worker_kills"] + doc["between_call_kills"] if r["identical"] is not True]
    return "\n".join(
        f"run {r['run']}: kill at {r['kill_after_seconds']:.2f} s = {r['kill_fraction']:.3f} of the fit "
        f"({r['phase']}), status {r['status']}, identical={r['identical']}: {r.get('error')}\n"
        f"{r.get('traceback') or ''}" for r in bad)


def test_two_random_worker_kills_give_the_identical_model(tmp_path):
    """Fast: a small fit (12,000 rows in 6 partitions, 20 atoms), one kill at a random time and one
    right after a random engine call (more random times: the slow test below)."""
    doc = RK.run_random_kills(tmp_path, kills=1, between_kills=1, scheduler_kills=0, rows=12_000, chunk_rows=2_000,
                              n_basis=20, seed=1, controls=0, warmup=False, fit_timeout=120, max_misses=8)
    assert doc["reference"]["n_basis"] == 20
    c = doc["counts"]["worker_kills_at_random_times"]
    assert c["runs"] == 1 and c["identical"] == 1, _explain(doc)
    c = doc["counts"]["worker_kills_between_calls"]
    assert c["runs"] == 1 and c["identical"] == 1, _explain(doc)
    assert doc["between_call_kills"][0]["phase"] == "between_calls"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ten_random_worker_kills_give_the_identical_model_and_a_scheduler_kill_ends_the_fit(tmp_path):
    """Slow: the benchmark's fit (60,000 × 20 rows in 12 partitions, 60 atoms, 59 candidates), 10 kills
    at random times and 3 between engine calls, every model identical; a scheduler killed mid-fit
    ends the driver within ``fit_timeout`` (raised or completed, never hung)."""
    doc = RK.run_random_kills(tmp_path, kills=10, between_kills=3, scheduler_kills=1, seed=2, fit_timeout=180,
                              max_misses=30)
    assert doc["reference"]["no_fault_fits_identical"]
    c = doc["counts"]["worker_kills_at_random_times"]
    assert c["runs"] == 10 and c["identical"] == 10, _explain(doc)
    c = doc["counts"]["worker_kills_between_calls"]
    assert c["runs"] == 3 and c["identical"] == 3, _explain(doc)
    sk = doc["counts"]["scheduler_kills"]
    assert sk["runs"] == 1 and sk["hang"] == 0 and sk["other"] == 0, doc["scheduler_kills"]
    assert sk["max_seconds_from_kill_to_driver_end"] < 180
