"""``one_blas_thread``: BLAS on one thread inside, the previous thread counts restored after
(nested, after an error), and the KMP pursuit loop and the CV prefix scorer run inside it."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from kmp_dask.linalg import one_blas_thread


def _blas_threads():
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.fixture
def two_threads():
    """BLAS on two threads for the test (skipped if this BLAS will not take two)."""
    if not _blas_threads():
        pytest.skip("no BLAS found by threadpoolctl")
    with threadpool_limits(2, user_api="blas"):
        if set(_blas_threads()) != {2}:
            pytest.skip(f"BLAS would not take two threads: {_blas_threads()}")
        yield


def test_limits_and_restores(two_threads):
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}  # the inner exit does not restore
    assert set(_blas_threads()) == {2}


def test_restores_after_an_error(two_threads):
    with pytest.raises(RuntimeError, match="inside"), one_blas_thread():
        raise RuntimeError("inside")
    assert set(_blas_threads()) == {2}


def test_pursuit_loop_and_prefix_scorer_run_on_one_thread(two_threads, monkeypatch):
    from _engines import pursue

    import kmp_dask.greedy._cv_path as cv_path

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=120)
    seen = []
    res = pursue(X, y, chunk_rows=50, gamma=0.5, n_basis=6, random_state=0,
                 callback=lambda rec: seen.append(set(_blas_threads())))
    assert len(seen) == len(res.history) >= 5
    assert all(s == {1} for s in seen)
    assert set(_blas_threads()) == {2}

    inside = []
    monkeypatch.setattr(cv_path, "PrefixScorer", lambda *a: inside.append(set(_blas_threads())))

    class _E:
        n_vectors, n_outputs = 2, 1

    def at(k):
        inside.append(set(_blas_threads()))
        return np.ones(k), np.zeros(1)

    cv_path.prefix_scorer(_E(), None, parameters_at=at)
    assert inside[:3] == [{1}, {1}, {1}]  # every prefix solve on one thread
    assert inside[3] == {2}               # the scorer itself (held-out GEMMs) keeps the threads
