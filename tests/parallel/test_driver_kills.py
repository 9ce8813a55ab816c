"""A driver SIGKILLed at a random moment of a fit and restarted with ``resume=True`` ends with the
identical model (every family has checkpoint / resume).

Both tests run ``benchmarks/driver_kills.py`` (:func:`run_driver_kills`) on the working tree's
kmp_dask: every fit is a driver process (``fit(store, checkpoint=DIR, resume=True)`` then
``kmp_dask.save``), killed with SIGKILL at a time drawn uniformly within the measured duration of an
uninterrupted driver, restarted until it completes, and its saved model compared with the
uninterrupted one array by array, bit for bit. The full benchmark (all families, ≥ 50 kills) writes
``benchmarks/results/driver_kills.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import driver_kills as DK  # noqa: E402

pytestmark = pytest.mark.timeout(900)


def _explain(doc):
    bad = [r for r in doc["runs"] if r["identical"] is not True]
    return "\n".join(f"{r['family']} {r['client']} {r['run']}: status {r['status']}, kills "
                     f"{[(round(k['after_seconds'], 2), k['phase']) for k in r['kills']]}, "
                     f"differences {r.get('comparison', {}).get('differences')}, error {r.get('error')}\n"
                     f"{r.get('stderr_tail') or ''}" for r in bad)


def test_compare_models_sees_one_changed_bit(tmp_path):
    """The comparison the benchmark relies on: a model is identical to its copy, and not once a
    single bit of one array (or one value of model.json) changes; clock fields are skipped."""
    import json
    import shutil

    import numpy as np

    from kmp_dask import KMPClassifier, save

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    a = save(KMPClassifier(n_basis=5, gamma=0.5, random_state=0, client="sync").fit(X, y), tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    same = DK.compare_models(a, b)
    assert same["identical"] and same["arrays"] > 3 and same["values"] > 10, same
    doc = json.loads((b / "model.json").read_text())
    doc["state"]["fit_seconds_"] = 123.0  # a clock field: not compared
    (b / "model.json").write_text(json.dumps(doc))
    assert DK.compare_models(a, b)["identical"]
    f = sorted((b / "arrays").glob("*.npy"))[0]
    arr = np.load(f)
    raw = bytearray(arr.tobytes())
    raw[-1] ^= 1
    np.save(f, np.frombuffer(bytes(raw), dtype=arr.dtype).reshape(arr.shape))
    diff = DK.compare_models(a, b)
    assert not diff["identical"] and diff["n_differences"] == 1, diff
    shutil.rmtree(b)
    shutil.copytree(a, b)
    doc = json.loads((b / "model.json").read_text())
    doc["state"]["n_basis_"] = doc["state"]["n_basis_"] + 1
    (b / "model.json").write_text(json.dumps(doc))
    assert DK.compare_models(a, b)["differences"] == ["state.n_basis_"]


def test_two_driver_kills_of_kmp_resume_to_the_identical_model(tmp_path):
    """Fast: a small backfitting KMP fit (2,000 rows in 4 chunks, 16 atoms, a checkpoint every 2
    iterations), killed twice — once after its first checkpoint exists, once at any moment — each
    time resumed to the model of the uninterrupted driver."""
    doc = DK.run_driver_kills(tmp_path, families=["kmp"], runs=2, embedded_runs=0, rows=2000, chunk_rows=500,
                              rekill=0.0, seed=3, plain_reference=False, modes=("after_checkpoint", "any"),
                              overrides={"kmp": {"params": {"n_basis": 16}, "every": 2}}, max_redraws=6)
    assert doc["support"]["kmp"]["supported"]
    c = doc["counts"]["total"]
    assert c["runs"] == 2 and c["kills"] == 2 and c["identical"] == 2, _explain(doc)
    first = doc["runs"][0]["kills"][0]
    assert first["mode"] == "after_checkpoint" and first["checkpoint"]["exists"], first
    assert doc["runs"][0]["comparison"]["arrays"] > 3
    assert doc["all_identical"]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_random_driver_kills_of_every_supported_family(tmp_path):
    """Slow (6 min measured on the 2-core machine at load 4–12): every family whose fit takes ``checkpoint=`` (the
    others are reported, not run), two runs each on ``client="sync"`` with restarts killed again
    with probability ½, and one run of KMP on an embedded process cluster; every model identical
    to the uninterrupted driver's (which is itself identical to a fit without checkpoint)."""
    doc = DK.run_driver_kills(tmp_path, runs=2, embedded_runs=0, rekill=0.5, seed=11)
    supported = [f for f, s in doc["support"].items() if s["supported"]]
    assert {"kmp", "skmp"} <= set(supported)
    assert doc["controls_identical"], doc["references"]
    c = doc["counts"]
    assert c["total"]["runs"] == 2 * len(supported) and c["total"]["identical"] == c["total"]["runs"], _explain(doc)
    assert set(c["by_family"]) == set(supported)
    emb = DK.run_driver_kills(tmp_path / "embedded", families=["kmp"], runs=0, embedded_runs=1, seed=12)
    assert emb["counts"]["by_client"]["embedded"]["identical"] == 1, _explain(emb)
    assert emb["all_identical"]
