"""Property tests for the store helpers (hypothesis)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kmp_dask.store import RunningStats, row_partitions
from kmp_dask.store._base import gather_rows

chunk_lists = st.lists(st.integers(1, 50), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(chunks=chunk_lists, p=st.integers(1, 40))
def test_row_partitions_cover_rows_on_chunk_boundaries(chunks, p):
    parts = row_partitions(chunks, p)
    bounds = set(np.concatenate([[0], np.cumsum(chunks)]).tolist())
    assert len(parts) == min(p, len(chunks))
    assert parts[0][0] == 0 and parts[-1][1] == sum(chunks)
    assert all(a < b and a in bounds and b in bounds for a, b in parts)
    assert all(x[1] == y[0] for x, y in zip(parts, parts[1:], strict=False))


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 20), min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_running_stats_merge_equals_full_pass(sizes, seed):
    X = np.random.default_rng(seed).normal(3.0, 2.0, size=(sum(sizes), 3))
    stats, start = RunningStats.empty(3), 0
    for n in sizes:
        stats = stats.merge(RunningStats.of_block(X[start:start + n]))
        start += n
    assert stats.n == len(X)
    if len(X):
        np.testing.assert_allclose(stats.mean, X.mean(axis=0), rtol=1e-10)
        np.testing.assert_allclose(stats.std, X.std(axis=0), rtol=1e-9, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(chunks=chunk_lists, data=st.data())
def test_gather_rows_equals_fancy_indexing(chunks, data):
    n = sum(chunks)
    X = np.arange(n * 2, dtype=float).reshape(n, 2)
    idx = data.draw(st.lists(st.integers(0, n - 1), max_size=40))
    Xr, yr = gather_rows(lambda a, b: (X[a:b], X[a:b, 0]), idx, chunks)
    np.testing.assert_array_equal(Xr, X[idx] if idx else X[:0])
    np.testing.assert_array_equal(yr, X[idx, 0] if idx else X[:0, 0])
