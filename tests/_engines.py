"""Engine wrappers shared by tests (imported as ``from _engines import ...``; tests/ is on
sys.path through tests/conftest.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from kmp_dask.blockops import ScoreStats


class NoisyScores:
    """Engine wrapper that makes every candidate look correlated with the residual.

    Emulates the rounding noise that lets a numerically dependent column win the scoring, so
    the driver's breakdown path (skip, warn, stop) is exercised deterministically.
    """

    def __init__(self, engine):
        self.engine = engine

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def run(self, op, msg=None, effects=()):
        out = self.engine.run(op, msg, effects)
        if isinstance(out[0], ScoreStats) and out[0].corr is not None:  # scoring passes with candidates
            out = [dataclasses.replace(r, corr=np.ones_like(r.corr)) for r in out]
        return out


def pursue(X, y, *, chunk_rows, gamma, client=None, sample_weight=None, **kw):
    """``kernel_matching_pursuit`` on an engine over ``InMemoryStore(X, y, chunk_rows)`` with an RBF
    kernel of width ``gamma`` (regression targets); the engine is closed however the fit ends."""
    from kmp_dask.greedy import kernel_matching_pursuit
    from kmp_dask.kernels import get_kernel
    from kmp_dask.parallel import make_engine
    from kmp_dask.store import InMemoryStore

    engine = make_engine(client, InMemoryStore(X, y, chunk_rows=chunk_rows), sample_weight=sample_weight)
    try:
        return kernel_matching_pursuit(
            engine, kernel=get_kernel("rbf", gamma=gamma), n_rows=len(X), n_features=X.shape[1],
            dtype=X.dtype, targets={"kind": "regression"}, **kw)
    finally:
        engine.close()
