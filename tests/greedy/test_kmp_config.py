"""The pursuit's one configuration record: built once from the keywords, frozen, validated, and the
only thing that carries them to :class:`~kmp_dask.greedy.Pursuit` and its strategy."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from kmp_dask.greedy import Pursuit, PursuitConfig, kernel_matching_pursuit
from kmp_dask.greedy._strategies import (
    LossDriven,
    SquaredBasic,
    SquaredRefit,
    make_strategy,
)
from kmp_dask.kernels import get_kernel
from kmp_dask.losses import LogisticLoss, SquaredLoss
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore

K = get_kernel("rbf", gamma=0.5)


def _config(**kw):
    base = {"kernels": K, "n_rows": 100, "n_features": 3, "dtype": np.float64, "targets": {"kind": "regression"},
            "n_basis": 10}
    return PursuitConfig(**{**base, **kw})


def test_is_frozen_and_normalised():
    c = _config(loss=SquaredLoss())
    assert c.kernels == (K,) and c.loss is None  # squared loss: the exact least-squares path
    assert PursuitConfig([K, K], 1, 1, np.float64, {}, 1).kernels == (K, K)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_basis = 3


@pytest.mark.parametrize(("kw", "match"), [
    ({"fit_mode": "greedy"}, "fit_mode must be one of"),
    ({"fit_mode": "prefit", "loss": LogisticLoss()}, "squared loss only"),
    ({"fit_mode": "refit", "loss": LogisticLoss()}, "squared loss only"),
])
def test_refuses_what_no_pursuit_runs(kw, match):
    with pytest.raises(ValueError, match=match):
        _config(**kw)


def test_the_driver_takes_the_config_whole_or_its_fields_as_keywords():
    """kernel_matching_pursuit(engine, config, *, random_state, callback, checkpoint, max_time, val_criterion):
    the run-time objects and the two settings of the run's recorder and clock beside one config, built
    by the caller (the estimators) or from keywords that are exactly its fields (``kernel`` for
    ``kernels``) — the same fit either way; both, or an unknown keyword, are refused by name."""
    params = inspect.signature(kernel_matching_pursuit).parameters
    assert [n for n, p in params.items() if p.kind is not p.VAR_KEYWORD] == [
        "engine", "config", "random_state", "callback", "checkpoint", "max_time", "val_criterion"]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    store = InMemoryStore(X, np.sin(X[:, 0]), chunk_rows=50)
    kw = {"kernel": K, "n_rows": 120, "n_features": 3, "dtype": np.float64, "targets": {"kind": "regression"},
          "n_basis": 6, "candidates": 20, "ridge": 1e-6}
    fits = []
    for how in ("keywords", "config"):
        with InProcessEngine(partition_specs(store)) as eng:
            config = _config(**{k: v for k, v in kw.items() if k != "kernel"}) if how == "config" else None
            args = {} if how == "config" else kw
            fits.append(kernel_matching_pursuit(eng, config, random_state=np.random.default_rng(1), **args))
    assert fits[0].basis_indices.tolist() == fits[1].basis_indices.tolist()
    assert fits[0].coef.tobytes() == fits[1].coef.tobytes()
    with pytest.raises(ValueError, match=r"got unknown keyword\(s\) \['n_atoms'\]"):
        kernel_matching_pursuit(None, **kw, n_atoms=3)
    with pytest.raises(ValueError, match=r"pass either config= \(a PursuitConfig\) or \['n_basis'\], not both"):
        kernel_matching_pursuit(None, _config(), n_basis=3)
    with pytest.raises(ValueError, match=r"needs targets= and n_basis="):
        kernel_matching_pursuit(None, **{k: v for k, v in kw.items() if k not in ("targets", "n_basis")})


def test_strategy_comes_from_the_config():
    assert type(make_strategy(_config(fit_mode="basic"))) is SquaredBasic
    assert type(make_strategy(_config(fit_mode="refit"))) is SquaredRefit
    s = make_strategy(_config(loss=LogisticLoss(), refit_every=4, line_search_steps=2, final_refit_steps=7))
    assert type(s) is LossDriven and (s.refit_every, s.line_search_steps, s.final_refit_steps) == (4, 2, 7)


def test_pursuit_reads_the_config():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    with InProcessEngine(partition_specs(InMemoryStore(X, X[:, 0], chunk_rows=50))) as eng:
        p = Pursuit(eng, _config(n_rows=120, n_basis=7, tol=0.5, max_tries=2, candidates=9, ridge=1e-3))
        assert (p.n_basis, p.tol, p.max_tries, p.sampler.s) == (7, 0.5, 2, 9)
        assert p.lam == pytest.approx(1e-3 * 120) and p.kernels == [K] and p.basis_columns == "stored"
