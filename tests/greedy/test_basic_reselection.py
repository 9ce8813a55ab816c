"""``fit_mode="basic_reselect"``: Vincent & Bengio's basic matching pursuit, in which an atom
already chosen stays in the dictionary and may be chosen again (its coefficient updated),
against a hand-written dense numpy matching pursuit over the whole kernel dictionary."""

from __future__ import annotations

import numpy as np
import pytest
from _engines import pursue
from sklearn.metrics.pairwise import rbf_kernel

from kmp_dask.greedy import kernel_matching_pursuit
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore

GAMMA = 0.5


def _data(n=300, d=3, m=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.stack([np.sin(X[:, 0] + k) + 0.3 * X[:, 1] * k for k in range(m)], axis=1)
    Y += 0.1 * rng.normal(size=Y.shape)
    return X, Y


def _fit(X, Y, *, chunk_rows=97, **kw):
    kw = {"n_basis": 40, "fit_mode": "basic_reselect", "candidates": "all", "fit_intercept": False, **kw}
    return pursue(X, Y, chunk_rows=chunk_rows, gamma=GAMMA, **kw)


def _dense_mp(K, Y, n_iter):
    """Basic matching pursuit over every column of K, chosen ones included (Mallat & Zhang)."""
    R = np.array(Y, dtype=np.float64)
    sqn = (K * K).sum(axis=0)
    chosen, coef, norms = [], {}, []
    for _ in range(n_iter):
        corr = K.T @ R  # (N, m)
        j = int(np.argmax((corr * corr).sum(axis=1) / sqn))
        beta = corr[j] / sqn[j]
        R -= np.outer(K[:, j], beta)
        chosen.append(j)
        coef[j] = coef.get(j, 0.0) + beta
        norms.append(float(np.linalg.norm(R)))
    atoms = list(coef)  # first-selection order (dicts keep insertion order)
    return chosen, atoms, np.array([coef[j] for j in atoms]), norms


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_matches_dense_matching_pursuit(m, fit_intercept):
    X, Y = _data(m=m, seed=1)
    res = _fit(X, Y, fit_intercept=fit_intercept)
    Yc = Y - Y.mean(axis=0) if fit_intercept else Y
    chosen, atoms, coef, norms = _dense_mp(rbf_kernel(X, X, gamma=GAMMA), Yc, 40)
    assert len(set(chosen)) < len(chosen), "no atom was chosen twice: the test checks nothing"
    assert [h["index"] for h in res.history] == chosen
    assert res.basis_indices.tolist() == atoms
    np.testing.assert_allclose(res.coef, coef, rtol=0, atol=1e-10 * np.abs(coef).max())
    np.testing.assert_allclose([h["residual_norm"] for h in res.history], norms, rtol=1e-10)
    np.testing.assert_allclose(res.intercept, Y.mean(axis=0) if fit_intercept else 0.0, atol=1e-12)
    # the expansion is the model: distinct atoms, summed coefficients
    np.testing.assert_allclose(res.expansion.decision_function(X).reshape(Yc.shape), Y - Yc
                               + rbf_kernel(X, X[atoms], gamma=GAMMA) @ coef, atol=1e-10)


def test_plain_basic_still_never_repeats():
    """``basic`` keeps its distinct-atom pursuit; the two differ on the same data."""
    X, Y = _data(seed=1)
    old, new = _fit(X, Y, fit_mode="basic"), _fit(X, Y)
    assert len(set(old.basis_indices.tolist())) == len(old.basis_indices) == 40
    assert len(new.basis_indices) < 40
    assert [h["index"] for h in old.history] != [h["index"] for h in new.history]


@pytest.mark.parametrize("chunk_rows", [134, 61])
def test_chunking_invariance(chunk_rows):
    """Random candidates (a chosen row may be drawn again): same atoms and coefficients to rounding
    with one, three or five ragged partitions."""
    X, Y = _data(seed=5)
    kw = {"candidates": 59, "n_basis": 60, "fit_intercept": True}
    ref = _fit(X, Y, chunk_rows=300, random_state=np.random.default_rng(3), **kw)
    res = _fit(X, Y, chunk_rows=chunk_rows, random_state=np.random.default_rng(3), **kw)
    assert [h["index"] for h in res.history] == [h["index"] for h in ref.history]
    assert len(ref.basis_indices) < 60  # re-selections happened
    assert res.basis_indices.tolist() == ref.basis_indices.tolist()
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-9)


def test_one_pass_per_iteration_as_basic():
    """A re-selection costs what a new atom costs: one scoring pass (its column pended and accepted
    by the next pass's effects, a rank-one residual move), no commit pass."""
    X, Y = _data(seed=1)
    eng = InProcessEngine(partition_specs(InMemoryStore(X, Y, chunk_rows=128)))
    res = kernel_matching_pursuit(eng, kernel=get_kernel("rbf", gamma=GAMMA), n_rows=len(X), n_features=3,
                                  dtype=X.dtype, targets={"kind": "regression"}, n_basis=40,
                                  fit_mode="basic_reselect", candidates="all")
    assert len(res.history) == 40 > len(res.basis_indices)
    # stats + init, one scoring pass per iteration, the final pass
    assert eng.n_calls == 2 + 40 + 1


def test_estimator_counts_distinct_atoms():
    from kmp_dask import KMPRegressor

    X, Y = _data(seed=2)
    est = KMPRegressor(n_basis=40, fit_mode="basic_reselect", gamma=GAMMA, candidates="all").fit(X, Y[:, 0])
    assert est.n_basis_ == len(est.basis_indices_) == len(set(est.basis_indices_.tolist())) < 40
    np.testing.assert_allclose(est.predict(X), est.expansion_.decision_function(X).ravel(), atol=1e-10)


def test_refused_with_other_losses():
    from kmp_dask import KMPClassifier

    X, Y = _data(n=60)
    with pytest.raises(ValueError, match="fit_mode='basic_reselect' is defined for the squared loss only"):
        KMPClassifier(fit_mode="basic_reselect", loss="logistic").fit(X, Y[:, 0] > 0)


class _Interrupted(Exception):
    pass


def test_checkpoint_resume_is_identical(tmp_path, monkeypatch):
    """Interrupted after re-selections and resumed from its checkpoint: the identical model (the
    journal replays the duplicate columns; the re-selected rows stay eligible)."""
    import kmp_dask.estimators._kmp as est_kmp
    from kmp_dask import KMPRegressor

    X, Y = _data(seed=1)
    def make():
        return KMPRegressor(n_basis=40, fit_mode="basic_reselect", gamma=GAMMA, candidates="all")

    ref = make().fit(X, Y[:, 0])
    assert len(ref.history_) - ref.n_basis_ >= 3  # re-selections before and after the interruption

    def progress(verbose, total, **kw):
        def callback(record):
            if record["iteration"] == 24:
                raise _Interrupted()
        return callback, None

    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        m.setattr(est_kmp, "progress_callback", progress)
        with pytest.raises(_Interrupted):
            make().fit(X, Y[:, 0], checkpoint=ckpt, checkpoint_every=5)
    from kmp_dask.greedy import Pursuit

    begun, real_begin = [], Pursuit._begin
    with monkeypatch.context() as m:  # a resumed fit continues the loop: no set-up, no first draw
        m.setattr(Pursuit, "_begin", lambda self, rng: begun.append(1) or real_begin(self, rng))
        resumed = make().fit(X, Y[:, 0], checkpoint=ckpt, checkpoint_every=5, resume=True)
    assert not begun
    np.testing.assert_array_equal(resumed.basis_indices_, ref.basis_indices_)
    assert np.array_equal(resumed.dual_coef_, ref.dual_coef_)
    assert [h["index"] for h in resumed.history_] == [h["index"] for h in ref.history_]
