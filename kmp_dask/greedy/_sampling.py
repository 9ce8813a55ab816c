"""Candidate samplers: which rows the next pursuit iteration scores.

* :class:`AllCandidates` — every training row (exact KMP; small data only: the driver holds
  the rows, each pass computes N × N kernel values).
* :class:`RandomCandidates` — ``s`` distinct training rows drawn uniformly at random
  (stochastic KMP, Popovici et al.). With ``s = ⌈log ε / log q⌉`` the best of the ``s`` is,
  with probability ``1 − ε``, among the best ``(1 − q)`` fraction of all candidates.

Both draw *global row indices* on the driver from one seeded generator, so the draw does not
depend on how the data are chunked or on the number of workers (DESIGN.md §5).
"""

from __future__ import annotations

import math

import numpy as np

from ..blockops import split_mask

__all__ = ["AllCandidates", "RandomCandidates", "n_candidates_for"]


def n_candidates_for(eps: float, q: float) -> int:
    """``s = ⌈log ε / log q⌉`` — 59 for ε=0.05, q=0.95; 228 for ε=0.01, q=0.98."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1); got {eps!r}")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1); got {q!r}")
    # round before ceil so that e.g. log(0.05)/log(0.95) = 58.40… stays 59, not 60 from noise
    return int(math.ceil(round(math.log(eps) / math.log(q), 9)))


class AllCandidates:
    """Every training row is a candidate in every iteration."""

    exhaustive = True

    def __init__(self, n_rows: int, validation_fraction: float, split_seed: int):
        idx = np.arange(n_rows, dtype=np.int64)
        self.indices = idx[~split_mask(idx, validation_fraction, split_seed)]

    def draw(self, rng, excluded) -> np.ndarray:
        return self.indices


class RandomCandidates:
    """``s`` distinct random training rows per iteration, sorted by global index."""

    exhaustive = False

    def __init__(self, n_rows: int, s: int, validation_fraction: float, split_seed: int, n_train: int):
        self.n_rows = n_rows
        self.s = int(s)
        self.validation_fraction = validation_fraction
        self.split_seed = split_seed
        self.n_train = n_train

    def draw(self, rng, excluded) -> np.ndarray:
        available = self.n_train - len(excluded)
        want = min(self.s, max(available, 0))
        if want <= 0:
            return np.zeros(0, dtype=np.int64)
        if want * 4 >= available:
            # small data: exact draw from the explicit list of available rows
            idx = np.arange(self.n_rows, dtype=np.int64)
            idx = idx[~split_mask(idx, self.validation_fraction, self.split_seed)]
            idx = idx[~np.isin(idx, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))]
            return np.sort(rng.choice(idx, size=want, replace=False))
        chosen: list[int] = []
        seen = set(excluded)
        keep_frac = max(1.0 - self.validation_fraction, 1e-3)
        while len(chosen) < want:
            k = int((want - len(chosen)) / keep_frac * 1.25) + 8
            draw = rng.integers(0, self.n_rows, size=k, dtype=np.int64)
            draw = draw[~split_mask(draw, self.validation_fraction, self.split_seed)]
            for i in draw.tolist():
                if i not in seen:
                    seen.add(i)
                    chosen.append(i)
                    if len(chosen) == want:
                        break
        return np.sort(np.asarray(chosen, dtype=np.int64))
