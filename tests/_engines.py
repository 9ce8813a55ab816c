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
