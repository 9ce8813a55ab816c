"""The kernel table's column buffers (kmp_dask.kernels._table): a partition's columns gathered into
a reused buffer — of an earlier fold, or of the previous table through the pool — are the values
and the block layout of a fresh gather; the buffers stay within the table's size; the pool is
emptied when the tables that used it are freed; large fresh arrays in 4 KiB pages hold np.empty's
layout and give the same table, bit for bit."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from kmp_dask.kernels import Kernel, _table
from kmp_dask.kernels._table import kernel_table, row_tables


def _partitions(rows, n_parts):
    """Read-only index arrays of a fold's partitions (as the engine hands them to the kernel)."""
    parts = []
    for p in np.array_split(rows, n_parts):
        X = p.astype(float)[:, None]
        X.flags.writeable = False
        parts.append(X)
    return parts


def _held(token):
    cache = _table._COLUMNS.get(token, {})
    return sum(e[3].nbytes for e in cache.values() if e[3] is not None) + \
        sum(b.nbytes for b in _table._SPARES.get(token, []))


def _read_folds(T, token, folds, rng, n_parts=2):
    """Read every fold's partitions past the gather; every block against the dense oracle."""
    k = Kernel("row_table", {"table": token})
    for rows in folds:
        for X in _partitions(rows, n_parts):
            for _ in range(_table.GATHER_AFTER + 2):
                cand = rng.choice(rows, 30, replace=False)
                block = k(X[: len(X)], cand.astype(float)[:, None])
                expected = T[np.ix_(cand, X[:, 0].astype(int))].T.copy(order="F")
                np.testing.assert_array_equal(block, expected)
                assert block.flags.f_contiguous and block.strides == expected.strides
                assert _held(token) <= T.nbytes


def _buffers(token):
    return [e[3] for e in _table._COLUMNS[token].values() if e[3] is not None]


def test_later_folds_gather_into_the_earlier_folds_buffers():
    rng = np.random.default_rng(0)
    T = rng.normal(size=(500, 500))
    folds = [np.sort(rng.choice(500, 400 + f % 2, replace=False)) for f in range(4)]  # sizes differ by a row
    with row_tables(T) as token:
        _read_folds(T, token, folds[:1], rng)
        first = _buffers(token)
        assert len(first) == 2
        _read_folds(T, token, folds[1:], rng)
        later = _buffers(token)
        assert all(any(np.shares_memory(b, a) for a in first) for b in later)  # no new memory after fold 1


def test_the_next_table_reuses_the_pool_and_the_pool_goes_with_the_tables():
    rng = np.random.default_rng(1)
    folds = [np.sort(rng.choice(300, 240, replace=False)) for _ in range(2)]
    T1, T2 = rng.normal(size=(300, 300)), rng.normal(size=(300, 300))
    with row_tables(T1) as token:
        _read_folds(T1, token, folds, rng, n_parts=3)
        used = _buffers(token)
    assert token not in _table._COLUMNS and token not in _table._SPARES
    assert sum(b.nbytes for b in _table._POOL) <= T1.nbytes and _table._POOL
    with row_tables(T2) as token2:  # the next width's table: its gathers reuse the first table's buffers
        assert not _table._POOL
        _read_folds(T2, token2, folds, rng, n_parts=3)
        assert all(any(np.shares_memory(b, a) for a in used) for b in _buffers(token2))
    del T1, T2, used
    gc.collect()
    assert not _table._POOL and not _table._POOL_OWNERS  # no table left that used it: freed


def test_an_index_outside_the_table_still_raises():
    T = np.arange(100.0).reshape(10, 10)
    X = np.array([[1.0], [12.0]])
    X.flags.writeable = False
    with row_tables(T) as token:
        k = Kernel("row_table", {"table": token})
        with pytest.raises(IndexError):
            for _ in range(_table.GATHER_AFTER + 2):
                k(X, np.array([[0.0]]))


def test_fresh_arrays_and_the_table_in_small_pages_are_np_empty_s():
    a = _table.fresh_array(_table.SMALL_PAGES_FROM // 8 + 1, np.float64)
    assert not a.flags.owndata and a.flags.writeable and a.flags.c_contiguous and a.dtype == np.float64
    a[:] = 2.0
    assert a.sum() == 2.0 * len(a)
    assert _table.fresh_array(10, np.float32).flags.owndata  # small: np.empty itself
    X = np.random.default_rng(3).normal(size=(760, 5))  # 760² × 8 bytes > SMALL_PAGES_FROM: mapped
    kernel = Kernel("rbf", {"gamma": 0.3})
    T = kernel_table(kernel, X)
    assert not T.flags.owndata and T.flags.c_contiguous and T.shape == (760, 760)
    ref = np.empty((760, 760))  # the same blocks written into numpy's own memory
    sq = np.einsum("ij,ij->i", X, X)
    for a0 in range(0, 760, _table.TABLE_BLOCK_ROWS):
        b0 = min(a0 + _table.TABLE_BLOCK_ROWS, 760)
        kernel.block(X[a0:b0], X, X_sqnorm=sq[a0:b0], Y_sqnorm=sq, out=ref[a0:b0])
    assert T.tobytes() == ref.tobytes() and T.strides == ref.strides


def test_a_freed_table_s_memory_goes_to_the_next_table_while_a_registered_one_lives():
    X = np.random.default_rng(4).normal(size=(730, 3))  # 730² × 8 bytes > SMALL_PAGES_FROM: mapped
    kernel = Kernel("rbf", {"gamma": 0.5})
    kept = kernel_table(kernel, X)
    with row_tables(kept):  # a registered table that lives on (the CV's kept table)
        pass
    dropped = kernel_table(Kernel("rbf", {"gamma": 2.0}), X)
    with row_tables(dropped):
        pass
    memory = dropped.base.base.obj  # the anonymous map (the flat array's base is a memoryview of it)
    del dropped
    gc.collect()
    assert _table._FREED_TABLES == [memory]
    again = kernel_table(kernel, X)  # written over the freed table's memory: every value rewritten
    assert again.base.base.obj is memory and not _table._FREED_TABLES
    assert again.tobytes() == kept.tobytes()
    del again, kept
    gc.collect()
    assert not _table._FREED_TABLES and not _table._POOL_OWNERS


def test_nothing_is_left_after_a_cross_validation(monkeypatch):
    """A CV search registers a table per width (here 800 rows: 5 MB, mapped), keeps them for its
    next stage and passes column buffers from one width to the next through the pool: when the fit
    returns, no table, column buffer or freed table memory is left in the module."""
    from sklearn.datasets import make_moons

    from kmp_dask import KMPClassifierCV

    claimed, claim = [], _table._claim_pool

    def recording(token, table):
        claimed.append(len(_table._POOL))
        claim(token, table)

    monkeypatch.setattr(_table, "_claim_pool", recording)
    X, y = make_moons(800, noise=0.3, random_state=0)
    KMPClassifierCV(gammas=[0.5, 2.0], cv=3, random_state=0).fit(X, y)
    assert len(claimed) >= 2 and max(claimed) > 0  # the second width's table started with buffers
    gc.collect()
    assert not _table._TABLES and not _table._COLUMNS and not _table._SPARES
    assert not _table._POOL and not _table._FREED_TABLES and not _table._POOL_OWNERS


def test_column_sqnorms_are_the_blocks_einsum_bit_for_bit_once_the_columns_are_cached():
    """``Kernel.column_sqnorms`` of the table kernel: None until a partition's columns are cached,
    then exactly ``np.einsum("ij,ij->j", K, K)`` of the block ``K`` the kernel returns (the scoring
    pass uses them instead of that einsum); None for a writeable (uncached) X and for other kernels."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(400, 3))
    T = kernel_table(Kernel("rbf", {"gamma": 0.7}), A)
    rows = np.sort(rng.choice(400, 300, replace=False))
    with row_tables(T) as token:
        k = Kernel("row_table", {"table": token})
        (X,) = _partitions(rows, 1)
        seen_cached = False
        for _ in range(_table.GATHER_AFTER + 4):
            cand = rng.choice(rows, 40, replace=False).astype(float)[:, None]
            K = k.block(X, cand)
            held = k.column_sqnorms(X, cand)
            if held is None:
                assert not seen_cached
                continue
            seen_cached = True
            assert held.dtype == np.float64
            np.testing.assert_array_equal(held, np.einsum("ij,ij->j", K, K))
            assert held.tobytes() == np.einsum("ij,ij->j", K, K).tobytes()
        assert seen_cached
        assert k.column_sqnorms(X.copy(), cand) is None  # writeable: never cached
    assert Kernel("rbf", {"gamma": 0.7}).column_sqnorms(A, A[:3]) is None
