"""A short chaos soak: mixed ``kmp-dask`` CLI jobs on a real ``dask scheduler`` + 3 ``dask
worker --nanny`` processes while workers, the scheduler and the driver are SIGKILLed at random.

Runs ``benchmarks/chaos_soak.py`` (:func:`run_soak`) on the working tree's kmp_dask for a few
minutes on a subset of its jobs (a KMP and a multi-class CVM train with ``--checkpoint``, a
predict to .npy, an evaluate, a pipeline through ``kmp-dask run``): every job must end in the
reference's result (resumed where it was killed) or one ``Error:`` line — no hang, traceback,
wrong result, leftover temporary or orphan process. The full soak (all jobs, 40 minutes) writes
``benchmarks/results/chaos_soak.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import chaos_soak as CS  # noqa: E402

JOBS = ["train-kmp", "train-cvm-multiclass", "predict-kmp-npy", "evaluate-kmp", "run-pipeline-kmp"]
BAD = ("hang", "traceback", "wrong-result", "leftover", "orphan", "unclear-error")


def _explain(doc) -> str:
    """The jobs with a bad outcome, for the assertion message."""
    lines = []
    for r in doc["records"]:
        if r["outcome"] in BAD:
            last = r["attempts"][-1]
            lines.append(f"job {r['n']} {r['job']}: {r['outcome']} {r['problems']}; kills {r['kills']}; "
                         f"differences {r['differences'][:3]}; leftovers {r['leftovers'][:5]}; orphans "
                         f"{r['orphans'][:3]}; last attempt rc {last['returncode']}: {last['stderr_tail'][-5:]}")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_short_chaos_soak(tmp_path):
    doc = CS.run_soak(tmp_path, duration=240, seed=3, kill_rate=5.0, scheduler_share=0.15, driver_share=0.25,
                      job_timeout=300, only=JOBS)
    s = doc["summary"]
    assert not s["references_failed"], s["references_failed"]
    assert s["jobs"] >= 3 and s["kills"] >= 3, s  # 4 jobs and 20 kills in 240 s at load 38
    assert {k: s["outcomes"][k] for k in BAD} == dict.fromkeys(BAD, 0), _explain(doc)
    assert not s["orphans_at_end"], s["orphans_at_end"]
    assert s["outcomes"]["identical"] + s["outcomes"]["identical-after-resume"] + s["outcomes"]["clear-error"] \
        == s["jobs"]
