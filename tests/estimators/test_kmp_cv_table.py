"""The kernel table shared by the folds of the in-memory KMP cross-validation: every (γ, fold)
pursuit selects the same atoms as the same pursuit computing its kernel blocks, its prefix models
and held-out scores agree to rounding, and the table is used only within its memory budget, in
process and for float64 rows."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_moons
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from kmp_dask import KMPClassifierCV, KMPRegressorCV
from kmp_dask.estimators import _kmp_cv
from kmp_dask.kernels import Kernel
from kmp_dask.kernels._table import kernel_table, row_tables

_PREFIX_SCORER = _kmp_cv._prefix_scorer


def _record(monkeypatch):
    """Record every fold pursuit's model (the prefix scorers' full expansions)."""
    seen = []
    original = _PREFIX_SCORER

    def recording(est):
        seen.append(est.expansion_)
        return original(est)

    monkeypatch.setattr(_kmp_cv, "_prefix_scorer", recording)
    return seen


def _both(monkeypatch, make, X, y):
    """The same search without the table (every pursuit computes its blocks) and with it."""
    out = []
    for use in (False, True):
        monkeypatch.setattr(_kmp_cv, "USE_TABLE", use)
        seen = _record(monkeypatch)
        out.append((make().fit(X, y), seen))
    return out


def _assert_same_pursuits(X, plain, tabled):
    assert len(plain) == len(tabled) > 0
    for a, b in zip(plain, tabled, strict=True):
        rows = b.support_vectors[:, 0].astype(int)  # the table's kernel: basis "rows" are row indices
        np.testing.assert_array_equal(b.support_vectors[:, 0], rows)
        np.testing.assert_array_equal(X[rows], a.support_vectors)  # the same atoms, in the same order
        # kernel values differ at rounding level (another blocking of the GEMM); the least squares of
        # a small-ridge pursuit amplify that by its condition number: compare against the largest
        scale = np.abs(a.coef).max() + np.abs(a.intercept).max()
        np.testing.assert_allclose(b.coef, a.coef, rtol=0, atol=1e-7 * scale)
        np.testing.assert_allclose(b.intercept, a.intercept, rtol=0, atol=1e-7 * scale)


def test_classifier_folds_select_the_same_atoms_with_the_table(monkeypatch):
    X, y = make_moons(300, noise=0.3, random_state=0)
    # atoms_per_pass=1 on both paths ("auto" is k > 1 without the table); k > 1: test_kmp_cv_blocks.py
    make = lambda: KMPClassifierCV(gammas=[0.5, 4.0], n_basis=25, cv=3, random_state=0, atoms_per_pass=1)
    (plain, p_seen), (tabled, t_seen) = _both(monkeypatch, make, X, y)
    _assert_same_pursuits(X, p_seen, t_seen)
    np.testing.assert_allclose(tabled.scores_, plain.scores_, rtol=0, atol=1e-9)
    assert tabled.best_params_ == plain.best_params_
    np.testing.assert_array_equal(tabled.best_estimator_.basis_indices_, plain.best_estimator_.basis_indices_)
    assert tabled.best_estimator_.kernel == "rbf"  # the refit is the normal fit on the data's rows


def test_regressor_folds_agree_with_the_table(monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 3))
    y = np.column_stack([np.sin(2 * X[:, 0]), X[:, 1] ** 2]) + 0.1 * rng.normal(size=(240, 2))
    (plain, p_seen), (tabled, t_seen) = _both(
        monkeypatch, lambda: KMPRegressorCV(gammas=[0.3, 1.0], n_basis=20, cv=4, random_state=0,
                                            kernel="laplacian"), X, y)
    _assert_same_pursuits(X, p_seen, t_seen)
    np.testing.assert_allclose(tabled.scores_, plain.scores_, rtol=0, atol=1e-9)
    assert tabled.best_params_ == plain.best_params_


def test_no_table_above_the_budget_in_float32_or_on_a_cluster(monkeypatch):
    X, y = make_moons(120, noise=0.3, random_state=0)
    monkeypatch.setattr(_kmp_cv, "USE_TABLE", False)
    plain = KMPClassifierCV(gammas=[1.0], n_basis=10, cv=3, random_state=0).fit(X, y)

    def refuse(*args, **kwargs):
        raise AssertionError("the table must not be computed")

    monkeypatch.setattr(_kmp_cv, "USE_TABLE", True)
    monkeypatch.setattr(_kmp_cv, "TABLE_BYTES", 120 * 120 * 8 - 1)  # one byte short of this N × N table
    monkeypatch.setattr(_kmp_cv, "kernel_table", refuse)
    over = KMPClassifierCV(gammas=[1.0], n_basis=10, cv=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(over.scores_, plain.scores_)
    monkeypatch.setattr(_kmp_cv, "TABLE_BYTES", 120 * 120 * 8)
    assert _kmp_cv._table_rows(X, "sync") is not None
    assert _kmp_cv._table_rows(X.astype(np.float32), "sync") is None
    assert _kmp_cv._table_rows(X, object()) is None  # a dask client: the workers cannot read the table


@pytest.mark.parametrize("name, oracle", [("rbf", rbf_kernel), ("laplacian", laplacian_kernel)])
def test_table_values_and_lookups_match_a_dense_kernel(name, oracle):
    X = np.random.default_rng(2).normal(size=(700, 4))  # more rows than one table block
    T = kernel_table(Kernel(name, {"gamma": 0.4}), X)
    np.testing.assert_allclose(T, oracle(X, X, gamma=0.4), rtol=1e-12, atol=1e-13)
    with row_tables(T) as token:
        k = Kernel("row_table", {"table": token})
        rows, cols = np.array([5.0, 3.0, 650.0, 7.0]), np.array([1.0, 699.0, 5.0])
        np.testing.assert_array_equal(k(rows[:, None], cols[:, None]), T[np.ix_(cols.astype(int), rows.astype(int))].T)
        span = np.arange(100, 200, dtype=float)[:, None]  # a contiguous partition
        np.testing.assert_array_equal(k(span, cols[:, None]), T[cols.astype(int)][:, 100:200].T)
        np.testing.assert_array_equal(k.diag(rows[:, None]), np.diag(T)[rows.astype(int)])
    with pytest.raises(ValueError, match="table='row-table-.*not .*registered"):
        k(rows[:, None], cols[:, None])


def test_cached_partition_columns_give_the_same_blocks():
    """A read-only partition's columns of the table are gathered once and reused: every block is
    the uncached lookup's, bit for bit and in the same memory layout (the pursuit's products then
    round alike); a writeable array is never cached, and the cache goes with the table."""
    from kmp_dask.kernels import _table

    rng = np.random.default_rng(5)
    T = rng.normal(size=(400, 400))
    folds = [np.sort(rng.choice(400, 300, replace=False)), np.arange(50, 350)]  # a fold's rows; a contiguous span
    with row_tables(T) as token:
        k = Kernel("row_table", {"table": token})
        for rows in folds:
            X = rows.astype(float)[:, None]
            X.flags.writeable = False
            for _ in range(_table.GATHER_AFTER + 3):  # read through the lookup first, then through the gather
                cand = np.sort(rng.choice(400, 40, replace=False))
                block = k(X[: len(X)], cand.astype(float)[:, None])  # a new view each pass, as a partition's slice
                expected = T[np.ix_(cand, rows)].T.copy(order="F")
                np.testing.assert_array_equal(block, expected)
                assert block.flags.f_contiguous and block.shape == (len(rows), 40)
            assert any(entry[1] is not None for entry in _table._COLUMNS[token].values())
        writeable = folds[0].astype(float)[:, None]
        before = sum(len(c) for c in _table._COLUMNS.values())
        k(writeable, np.array([[1.0], [2.0]]))
        assert sum(len(c) for c in _table._COLUMNS.values()) == before
    assert token not in _table._COLUMNS
