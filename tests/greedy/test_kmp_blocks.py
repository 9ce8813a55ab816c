"""Several atoms per pass (``atoms_per_pass = k``) against a dense numpy oracle: sequential
backfitting pursuit restricted, batch by batch, to the 2k best candidates of the batch's scoring."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask.greedy import kernel_matching_pursuit
from kmp_dask.greedy._kmp_blocks import KEEP_FACTOR
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import ActorEngine, InProcessEngine, make_engine, partition_specs
from kmp_dask.store import InMemoryStore

GAMMA = 0.5


def _data(n=300, d=3, m=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.stack([np.sin(X[:, 0] + j) + 0.3 * X[:, 1] * (j + 1) for j in range(m)], axis=1)
    Y += 0.1 * rng.normal(size=Y.shape)
    return X, Y[:, 0] if m == 1 else Y


def _fit(X, y, *, chunk_rows=97, engine=None, **kw):
    kw = {"n_basis": 18, "fit_mode": "backfit", "candidates": "all", "ridge": 1e-6, "fit_intercept": True, **kw}
    eng = engine if engine is not None else make_engine(None, InMemoryStore(X, y, chunk_rows=chunk_rows))
    try:
        return kernel_matching_pursuit(
            eng, kernel=get_kernel("rbf", gamma=GAMMA), n_rows=len(X), n_features=X.shape[1], dtype=X.dtype,
            targets={"kind": "regression"}, **kw)
    finally:
        if engine is None:
            eng.close()


def _oracle(X, Y, n_basis, k, ridge, intercept):
    """Dense numpy: each batch scores every row by ⟨d,R⟩²/(‖d‖²+λ) on the exact residual, keeps the
    KEEP_FACTOR·k best, then admits k of them one at a time, re-solving the least squares each time."""
    K = rbf_kernel(X, X, gamma=GAMMA)
    Y = Y.reshape(len(X), -1)
    lam = ridge * len(X)
    sqn = np.einsum("ij,ij->j", K, K)
    idx: list[int] = []

    def solve():
        B = np.hstack(([np.ones((len(X), 1))] if intercept else []) + [K[:, idx]])
        a = np.linalg.solve(B.T @ B + lam * np.eye(B.shape[1]), B.T @ Y) if B.shape[1] else np.zeros((0, Y.shape[1]))
        return a, Y - B @ a

    while len(idx) < n_basis:
        _, R = solve()
        score = np.einsum("ij,ij->i", K.T @ R, K.T @ R) / (sqn + lam)
        score[idx] = -np.inf
        kept = list(np.argsort(-score, kind="stable")[: KEEP_FACTOR * k])
        for _ in range(k):
            if len(idx) == n_basis or not kept:
                break
            _, R = solve()
            s = [float(np.sum((K[:, j] @ R) ** 2) / (sqn[j] + lam)) for j in kept]
            idx.append(int(kept.pop(int(np.argmax(s)))))
    a, _ = solve()
    return idx, a


@pytest.mark.parametrize("k", [2, 3, 8])
@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("intercept", [True, False])
def test_block_fit_matches_dense_sequential_oracle(k, m, intercept):
    X, Y = _data(m=m, seed=k)
    res = _fit(X, Y, atoms_per_pass=k, fit_intercept=intercept)
    idx, a = _oracle(X, Y, 18, k, 1e-6, intercept)
    assert res.basis_indices.tolist() == idx
    coef = a[1:] if intercept else a
    scale = np.abs(a).max()
    np.testing.assert_allclose(res.coef.reshape(coef.shape), coef, rtol=0, atol=1e-10 * scale)
    if intercept:
        np.testing.assert_allclose(res.intercept, a[0], rtol=0, atol=1e-10 * scale)
    # the exact residual norms the driver records inside a batch match a dense fit's
    B = np.hstack(([np.ones((len(X), 1))] if intercept else []) + [rbf_kernel(X, X[idx], gamma=GAMMA)])
    R = Y.reshape(len(X), -1) - B @ a
    np.testing.assert_allclose(res.history[-1]["residual_norm"], np.linalg.norm(R), rtol=1e-8)


def test_one_atom_per_pass_is_todays_fit_bit_for_bit():
    X, y = _data(seed=3)
    for kw in ({}, {"candidates": 30, "random_state": np.random.default_rng(4)}):
        a = _fit(X, y, **kw)
        kw2 = {**kw, "random_state": np.random.default_rng(4)} if kw else kw
        b = _fit(X, y, atoms_per_pass=1, **kw2)
        assert a.basis_indices.tolist() == b.basis_indices.tolist()
        assert a.coef.tobytes() == b.coef.tobytes() and a.intercept.tobytes() == b.intercept.tobytes()


def test_chunking_does_not_change_the_block_fit():
    X, y = _data(seed=5)
    kw = {"atoms_per_pass": 4, "candidates": 25}
    a = _fit(X, y, chunk_rows=61, random_state=np.random.default_rng(1), **kw)
    b = _fit(X, y, chunk_rows=300, random_state=np.random.default_rng(1), **kw)
    assert a.basis_indices.tolist() == b.basis_indices.tolist()
    np.testing.assert_allclose(a.coef, b.coef, rtol=0, atol=1e-10 * np.abs(a.coef).max())


def test_random_candidates_draw_k_times_s_per_pass():
    X, y = _data(seed=6)
    res = _fit(X, y, atoms_per_pass=4, candidates=10, n_basis=8, random_state=np.random.default_rng(0))
    assert res.history[0]["n_candidates"] == 40  # k·s scored by the pass: Popovici's s per atom
    assert len(res.basis_indices) == 8


@pytest.mark.parametrize("kw, match", [({"fit_mode": "prefit"}, "backfit"), ({"atoms_per_pass": 0}, "int >= 1"),
                                       ({"atoms_per_pass": 2.0}, "int >= 1")])
def test_bad_atoms_per_pass(kw, match):
    X, y = _data(n=50)
    with pytest.raises(ValueError, match=match):
        _fit(X, y, **{"atoms_per_pass": 2, **kw})


def test_block_fit_on_two_process_workers_is_identical(process_client):
    X, y = _data(n=2000, seed=7)
    store = InMemoryStore(X, y, chunk_rows=250)
    kw = {"atoms_per_pass": 4, "candidates": 40, "n_basis": 24}
    with InProcessEngine(partition_specs(store)) as eng:
        ref = _fit(X, y, engine=eng, random_state=np.random.default_rng(3), **kw)
    with ActorEngine(process_client, partition_specs(store)) as eng:
        res = _fit(X, y, engine=eng, random_state=np.random.default_rng(3), **kw)
    assert res.basis_indices.tolist() == ref.basis_indices.tolist()
    assert res.coef.tobytes() == ref.coef.tobytes() and res.intercept.tobytes() == ref.intercept.tobytes()


class _Interrupted(Exception):
    pass


def test_checkpointed_block_fit_resumes_to_the_identical_model(tmp_path):
    """Interrupted mid-fit (from the callback), resumed from its checkpoint (saved when a batch
    crosses a multiple of ``every``): the model of an uninterrupted fit, bit for bit."""
    from kmp_dask.greedy._checkpoint import open_checkpoint

    X, y = _data(n=1200, seed=9)
    store = InMemoryStore(X, y, chunk_rows=400)
    kw = {"atoms_per_pass": 3, "candidates": 30, "n_basis": 20}

    def fit(ckpt=None, callback=None):
        with InProcessEngine(partition_specs(store)) as eng:
            return _fit(X, y, engine=eng, random_state=np.random.default_rng(5), callback=callback, checkpoint=ckpt,
                        **kw)

    ref = fit()

    def opened(resume):
        return open_checkpoint(tmp_path / "ck", every=4, resume=resume, estimator="test", params={}, store=store)

    def stop(rec):
        if rec["iteration"] >= 10:
            raise _Interrupted

    with pytest.raises(_Interrupted):
        fit(opened(False), stop)
    ck = opened(True)
    assert ck.saved["t"] == 11  # saved by the batch of atoms 9-11 (it crossed 12 = 3 × every); stopped at the next pass
    res = fit(ck)
    assert res.basis_indices.tolist() == ref.basis_indices.tolist()
    assert res.coef.tobytes() == ref.coef.tobytes() and res.intercept.tobytes() == ref.intercept.tobytes()
    assert [h["index"] for h in res.history] == [h["index"] for h in ref.history]


@pytest.mark.parametrize("k, n_basis", [(4, 12), (4, 14), (3, 20)])
def test_two_passes_per_batch(k, n_basis):
    """stats + init, intercept commit, (score + block) per batch of k atoms, final measuring pass."""
    X, y = _data(n=500, seed=10)
    with InProcessEngine(partition_specs(InMemoryStore(X, y, chunk_rows=128))) as eng:
        res = _fit(X, y, engine=eng, atoms_per_pass=k, candidates=30, n_basis=n_basis,
                   random_state=np.random.default_rng(0))
        assert len(res.basis_indices) == n_basis
        assert eng.n_calls == 2 + 1 + 2 * -(-n_basis // k) + 1


def test_recomputed_columns_and_float32_give_the_stored_block_fit():
    """The block pass reads the basis through either column mode; float32 data casts row blocks
    of the basis to float64 before the products (atoms equal, coefficients to float32 rounding)."""
    X, y = _data(n=600, seed=11)
    kw = {"atoms_per_pass": 3, "candidates": 40, "n_basis": 15}
    a = _fit(X, y, random_state=np.random.default_rng(2), **kw)
    b = _fit(X, y, random_state=np.random.default_rng(2), basis_columns="recomputed", **kw)
    assert a.basis_indices.tolist() == b.basis_indices.tolist()
    np.testing.assert_allclose(a.coef, b.coef, rtol=0, atol=1e-9 * np.abs(a.coef).max())
    X32 = X.astype(np.float32)
    c = _fit(X32, y, random_state=np.random.default_rng(2), **kw)
    d = _fit(X32, y, random_state=np.random.default_rng(2), basis_columns="recomputed", **kw)
    assert c.basis_indices.tolist() == d.basis_indices.tolist()
    np.testing.assert_allclose(c.coef, d.coef, rtol=0, atol=1e-4 * np.abs(c.coef).max())


@pytest.mark.parametrize("kw, match", [({"atoms_per_pass": 0}, "atoms_per_pass must be a positive int"),
                                       ({"atoms_per_pass": 2, "fit_mode": "basic"}, "atoms_per_pass=2 is implemented"),
                                       ({"atoms_per_pass": 2, "loss": "logistic"}, "atoms_per_pass=2 is implemented")])
def test_estimator_refuses_bad_atoms_per_pass_before_fitting(kw, match):
    from kmp_dask import KMPClassifier

    X, y = _data(n=60)
    with pytest.raises(ValueError, match=match):
        KMPClassifier(client="tcp://127.0.0.1:1", **kw).fit(X, (y > 0).astype(int))  # no cluster is contacted
