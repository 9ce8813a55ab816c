"""The large-N mode: basis columns recomputed from the atoms instead of stored.

Oracle: the same fit with the stored cache (itself tested against scikit-learn's OMP and a dense
reference in test_kmp_driver.py). The two differ only by the rounding of the kernel values (a
block of many centres vs one column), so the selected atoms must be the same and the
coefficients agree to float64 rounding; and the partitions must hold no rows × n matrix.
"""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.blockops import ColumnCache, RecomputedColumns, Workspace
from kmp_dask.blockops._kmp import Atom
from kmp_dask.greedy import kernel_matching_pursuit, resolve_basis_columns
from kmp_dask.kernels import get_kernel
from kmp_dask.losses import get_loss
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore

GAMMA = 0.5


def _data(n=600, d=4, m=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.stack([np.sin(X[:, 0] + k) + 0.3 * X[:, 1] * k for k in range(m)], axis=1)
    Y += 0.1 * rng.normal(size=Y.shape)
    return X, Y[:, 0] if m == 1 else Y


def _fit(X, y, columns, *, kernel=None, targets=None, **kw):
    kw = {"n_basis": 25, "fit_mode": "backfit", "candidates": "all", "ridge": 1e-8, "fit_intercept": True, **kw}
    engine = make_engine(None, InMemoryStore(X, y, chunk_rows=131))
    try:
        res = kernel_matching_pursuit(
            engine, kernel=kernel or get_kernel("rbf", gamma=GAMMA), n_rows=len(X), n_features=X.shape[1],
            dtype=X.dtype, targets=targets or {"kind": "regression"}, basis_columns=columns, **kw)
        caches = [p.state["kmp"].cache for p in engine.partitions]
        return res, caches
    finally:
        engine.close()


def _same(a, b, rtol=1e-7, atol=1e-9):
    assert a.basis_indices.tolist() == b.basis_indices.tolist()
    assert a.basis_kernels.tolist() == b.basis_kernels.tolist()
    np.testing.assert_allclose(a.coef, b.coef, rtol=rtol, atol=atol)


@pytest.mark.parametrize("mode", ["basic", "backfit", "prefit"])
@pytest.mark.parametrize("m", [1, 3])
def test_squared_loss_same_fit_as_stored(mode, m):
    X, y = _data(m=m)
    stored, caches_s = _fit(X, y, "stored", fit_mode=mode)
    recomputed, caches_r = _fit(X, y, "recomputed", fit_mode=mode)
    assert all(isinstance(c, ColumnCache) for c in caches_s)
    assert all(isinstance(c, RecomputedColumns) for c in caches_r)
    assert recomputed.basis_columns == "recomputed" and stored.basis_columns == "stored"
    _same(stored, recomputed)
    np.testing.assert_allclose([r["residual_norm"] for r in recomputed.history],
                               [r["residual_norm"] for r in stored.history], rtol=1e-7)


def test_partitions_hold_no_rows_by_atoms_matrix():
    X, y = _data(n=2000)
    _, caches_s = _fit(X, y, "stored", n_basis=40, candidates=50, random_state=0)
    _, caches_r = _fit(X, y, "recomputed", n_basis=40, candidates=50, random_state=0)
    stored = sum(c.nbytes for c in caches_s)
    recomputed = sum(c.nbytes for c in caches_r)
    assert stored >= 2000 * 40 * 8
    # the atoms (40 x 4) plus one pending and one last column per partition
    assert recomputed <= 40 * 4 * 8 * len(caches_r) + 4 * 2000 * 8
    assert recomputed < stored / 5


@pytest.mark.parametrize("mode", ["basic", "backfit"])
def test_logistic_loss_with_newton_refits_same_as_stored(mode):
    X, y = _data(n=500)
    labels = np.where(y > np.median(y), 1, 0)
    targets = {"kind": "ovr", "classes": [0, 1]}
    kw = {"fit_mode": mode, "loss": get_loss("logistic", kind="classification"), "n_basis": 12, "targets": targets,
          "refit_every": 3}
    stored, _ = _fit(X, labels, "stored", **kw)
    recomputed, _ = _fit(X, labels, "recomputed", **kw)
    _same(stored, recomputed, rtol=1e-6, atol=1e-8)


def test_mixed_kernels_validation_and_float32():
    X, y = _data(n=800)
    X = X.astype(np.float32)
    kernels = [get_kernel("rbf", gamma=0.2), get_kernel("rbf", gamma=2.0)]
    kw = {"kernel": kernels, "validation_fraction": 0.2, "n_iter_no_change": 5, "candidates": 80,
          "random_state": 3, "n_basis": 30}
    stored, _ = _fit(X, y, "stored", **kw)
    recomputed, _ = _fit(X, y, "recomputed", **kw)
    assert len(set(stored.basis_kernels.tolist())) == 2  # both kernels (and the blocks' grouping) used
    _same(stored, recomputed, rtol=1e-4, atol=1e-5)  # float32 columns: GEMM vs GEMV rounding
    np.testing.assert_allclose([r["val_score"] for r in recomputed.history],
                               [r["val_score"] for r in stored.history], rtol=1e-4)


def test_row_blocks_equal_stored_columns_with_bias_and_two_kernels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    kernels = [get_kernel("rbf", gamma=0.3), get_kernel("laplacian", gamma=0.1)]
    atoms = [Atom(X[5], 0, 5), Atom(None, 0, -1), Atom(X[17], 1, 17), Atom(X[40], 0, 40)]
    sq = np.einsum("ij,ij->i", X, X)
    stored, rec = ColumnCache(300, 0, X.dtype, 8), RecomputedColumns(300, 0, X.dtype)
    rec.BLOCK_ELEMENTS = 4 * 70  # several row blocks
    for atom in atoms:
        col = np.ones(300) if atom.is_bias else kernels[atom.kernel].block(X, atom.z[None])[:, 0]
        for c in (stored, rec):
            c.pend(col, col[:0], atom=atom)
            c.accept()
    full = np.zeros((300, 4))
    n_blocks = 0
    for a, b, Bb in rec.row_blocks(X, sq, kernels, Workspace()):  # one reused buffer: copy out
        full[a:b] = Bb
        n_blocks += 1
    assert n_blocks > 1
    np.testing.assert_allclose(full, stored.train(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rec.rows(X, sq, kernels, Workspace(), 10, 20), stored.train()[10:20], rtol=1e-12)
    np.testing.assert_array_equal(rec.last(), stored.last())


def test_pend_without_atom_and_accept_without_pending_are_refused():
    rec = RecomputedColumns(10, 0, np.float64)
    with pytest.raises(RuntimeError, match="needs the atom"):
        rec.pend(np.ones(10), np.ones(0))
    with pytest.raises(RuntimeError, match="no pending column"):
        rec.accept()


class _Budget:
    def __init__(self, free):
        self.free = free

    def free_state_bytes(self):
        return self.free


def test_auto_follows_the_budget():
    need = 10_000 * ((100 + 2) * 4 + 24)
    assert resolve_basis_columns("auto", _Budget(need), 10_000, 100, np.float32, 1) == "stored"
    assert resolve_basis_columns("auto", _Budget(need - 1), 10_000, 100, np.float32, 1) == "recomputed"
    assert resolve_basis_columns("auto", _Budget(None), 10_000, 100, np.float32, 1) == "stored"
    assert resolve_basis_columns("auto", object(), 10_000, 100, np.float32, 1) == "stored"
    assert resolve_basis_columns("recomputed", _Budget(None), 10, 1, np.float32, 1) == "recomputed"
    with pytest.raises(ValueError, match="basis_columns must be one of"):
        resolve_basis_columns("disk", _Budget(None), 10, 1, np.float32, 1)


def test_estimators_take_basis_columns():
    X, y = _data(n=400)
    a = KMPRegressor(n_basis=15, gamma=GAMMA, basis_columns="stored", random_state=0).fit(X, y)
    b = KMPRegressor(n_basis=15, gamma=GAMMA, basis_columns="recomputed", random_state=0).fit(X, y)
    assert (a.basis_columns_, b.basis_columns_) == ("stored", "recomputed")
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-6, atol=1e-8)
    assert KMPRegressor(n_basis=5).fit(X, y).basis_columns_ == "stored"  # auto, a laptop's memory
    clf = KMPClassifier(n_basis=10, basis_columns="recomputed", fit_mode="basic").fit(X, y > 0)
    assert clf.score(X, y > 0) > 0.8
    with pytest.raises(ValueError, match=r"basis_columns must be one of .*got 'disk'"):
        KMPRegressor(basis_columns="disk").fit(X, y)
