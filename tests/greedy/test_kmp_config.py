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


def test_every_keyword_but_the_run_time_objects_is_a_field():
    """kernel_matching_pursuit's keywords = the config's fields + engine, random_state, callback, checkpoint,
    and the two settings of the run's recorder and clock: ``max_time`` (this run's time budget) and
    ``val_criterion`` (what the held-out rows are scored with)."""
    keywords = set(inspect.signature(kernel_matching_pursuit).parameters) - {"engine", "random_state", "callback",
                                                                             "checkpoint", "max_time",
                                                                             "val_criterion"}
    fields = {f.name for f in dataclasses.fields(PursuitConfig)}
    assert fields == (keywords - {"kernel"}) | {"kernels"}
    defaults = {f.name: f.default for f in dataclasses.fields(PursuitConfig) if f.default is not dataclasses.MISSING}
    for name, p in inspect.signature(kernel_matching_pursuit).parameters.items():
        if name in defaults:
            assert p.default == defaults[name], name


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
