"""``row_block_sums`` on workers: its shared arguments are scattered, never put in the graph, and a
scatter or a pass that loses them is retried (bounded)."""

from __future__ import annotations

import warnings
from concurrent.futures import CancelledError

import dask.array as da
import numpy as np
import pytest

from kmp_dask.parallel import _scatter
from kmp_dask.parallel._rowsums import row_block_sums


def _weighted_sum(X, y, start, w):
    """A block's Σ_i w · x_i · y_i and its first row index (module level: shipped to workers)."""
    return np.array([float((X.sum(axis=1) * y).sum() * w[0]), float(start)])


def _data(rows=1000, chunk=250):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(rows, 3)), rng.normal(size=rows)
    return X, y, da.from_array(X, chunks=(chunk, 3)), da.from_array(y, chunks=chunk)


def _expected(X, y, w, chunk=250):
    return np.array([float((X.sum(axis=1) * y).sum() * w[0]), float(sum(range(0, len(X), chunk)))])


def test_large_arguments_are_scattered_not_sent_in_the_graph(process_client):
    """20 MB of arguments: on workers no "Sending large graph" warning (dask's, above 10 MB), and the
    same sums as in this process."""
    X, y, dX, dy = _data()
    w = np.full(2_500_000, 0.5)  # 20 MB
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = row_block_sums(_weighted_sum, dX, dy, (w,), client=process_client)
    assert not [s for s in seen if "large graph" in str(s.message)], [str(s.message) for s in seen]
    local = row_block_sums(_weighted_sum, dX, dy, (w,))
    np.testing.assert_allclose(got, _expected(X, y, w), rtol=1e-12)
    np.testing.assert_array_equal(got, local)


class _Flaky:
    """A client whose first scatter fails, or whose first pass is cancelled, as when a worker has just died."""

    def __init__(self, client, fail_scatter=0, fail_gather=0):
        self.client, self.fail_scatter, self.fail_gather, self.calls = client, fail_scatter, fail_gather, []
        self._scatter = client._scatter

    def sync(self, fn, *a, **k):  # scatter_value's bounded call of client._scatter
        if fn != self.client._scatter:  # the wait's questions to the scheduler (parallel._waits)
            return self.client.sync(fn, *a, **k)
        assert k.get("callback_timeout") == _scatter.SCATTER_TIMEOUT
        self.calls.append("scatter")
        if self.fail_scatter:
            self.fail_scatter -= 1
            raise KeyError("tcp://127.0.0.1:1")  # the scheduler's error for a worker it still listed
        return self.client.sync(fn, *a, **k)

    def compute(self, *a, **k):
        futures = self.client.compute(*a, **k)
        self.calls.append("gather")
        if self.fail_gather:  # the pass's tasks cancelled, as when the worker holding the scatter died
            self.fail_gather -= 1
            self.client.cancel(futures)
        return futures

    def __getattr__(self, name):  # status, scheduler, ...: the real client's
        return getattr(self.client, name)


def test_a_hung_scatter_ends_in_a_timeout(process_client, monkeypatch):
    """``client.scatter``'s own timeout does not bound the transfer: ``scatter_value``'s does."""
    import asyncio

    async def never(*a, **k):
        await asyncio.sleep(3600)

    monkeypatch.setattr(_scatter, "SCATTER_TIMEOUT", 0.5)
    monkeypatch.setattr(_scatter, "SCATTER_PAUSE", 0.0)
    monkeypatch.setattr(process_client, "_scatter", never)
    with pytest.raises(TimeoutError):
        _scatter.scatter_value(process_client, np.zeros(3))


@pytest.mark.parametrize("fail", [{"fail_scatter": 1}, {"fail_gather": 1}, {"fail_scatter": 1, "fail_gather": 1}])
def test_a_lost_scatter_is_sent_again(process_client, monkeypatch, fail):
    monkeypatch.setattr(_scatter, "SCATTER_PAUSE", 0.0)
    X, y, dX, dy = _data()
    w = np.array([2.0])
    flaky = _Flaky(process_client, **fail)
    got = row_block_sums(_weighted_sum, dX, dy, (w,), client=flaky)
    np.testing.assert_allclose(got, _expected(X, y, w), rtol=1e-12)
    assert flaky.calls.count("scatter") == 1 + sum(fail.values())


@pytest.mark.parametrize("kind", ["fail_scatter", "fail_gather"])
def test_retries_are_bounded(process_client, monkeypatch, kind):
    monkeypatch.setattr(_scatter, "SCATTER_PAUSE", 0.0)
    _, _, dX, dy = _data()
    flaky = _Flaky(process_client, **{kind: _scatter.SCATTER_RETRIES + 1})
    with pytest.raises(KeyError if kind == "fail_scatter" else CancelledError):
        row_block_sums(_weighted_sum, dX, dy, (np.array([1.0]),), client=flaky)
    assert flaky.calls.count("scatter") == _scatter.SCATTER_RETRIES + 1
