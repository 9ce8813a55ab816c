"""Candidate samplers: which rows the next pursuit iteration scores.

* :class:`AllCandidates` — every training row (exact KMP; small data only: the driver holds
  the rows, each pass computes N × N kernel values).
* :class:`RandomCandidates` — ``s`` distinct training rows drawn uniformly at random
  (stochastic KMP, Popovici et al.; HMP and sparse KPCA draw with it too). With
  ``s = ⌈log ε / log q⌉`` the best of the ``s`` is, with probability ``1 − ε``, among the best
  ``(1 − q)`` fraction of all candidates.
* :class:`ExcludingCandidates` — the same with vectorised draws outside a sorted array of
  excluded rows (the core vector machine's loop; see its docstring for why it stays separate).

All draw *global row indices* on the driver from one seeded generator, so the draw does not
depend on how the data are chunked or on the number of workers (docs/engine.md).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..blockops import split_mask

__all__ = ["AllCandidates", "RandomCandidates", "ExcludingCandidates", "n_candidates_for", "validation_eligibility"]


def n_candidates_for(eps: float, q: float) -> int:
    """``s = ⌈log ε / log q⌉`` — 59 for ε=0.05, q=0.95; 228 for ε=0.01, q=0.98."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1); got {eps!r}")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1); got {q!r}")
    # round before ceil so that e.g. log(0.05)/log(0.95) = 58.40… stays 59, not 60 from noise
    return int(math.ceil(round(math.log(eps) / math.log(q), 9)))


#: The one ``candidates`` vocabulary of every estimator: "all" (None: every row / pool point each
#: iteration), "auto" (Popovici et al.'s s = ⌈log ε / log q⌉ = 59 for ε = 0.05, q = 0.95) or an int.
CANDIDATE_WORDS = ("all", "auto")


def resolve_candidates(value, *, eps: float = 0.05, q: float = 0.95) -> int | None:
    """``candidates`` as a loop takes it: None for ``"all"`` or None, ``n_candidates_for(eps, q)``
    for ``"auto"``, the int itself (≥ 1); a ValueError naming the argument otherwise."""
    if value is None or (isinstance(value, str) and value == "all"):
        return None
    if isinstance(value, str) and value == "auto":
        return n_candidates_for(eps, q)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise ValueError(f"candidates must be 'all' (every row each iteration; None means the same), 'auto' "
                     f"(⌈log ε / log q⌉ random rows: {n_candidates_for(eps, q)}) or an int >= 1; got {value!r}")


def validation_eligibility(validation_fraction: float, split_seed: int):
    """Eligibility of global rows as candidates: not held out for validation (a pure function
    of the index, so the driver never holds an O(N) mask)."""
    return ValidationEligibility(float(validation_fraction), int(split_seed))


class ValidationEligibility:
    """``(global indices) -> bool mask``: rows not held out for validation (picklable, so a
    sampler is part of a checkpoint)."""

    def __init__(self, validation_fraction: float, split_seed: int):
        self.validation_fraction, self.split_seed = validation_fraction, split_seed
        self.keep_fraction = 1.0 - validation_fraction

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        return ~split_mask(idx, self.validation_fraction, self.split_seed)


def _all_eligible(idx: np.ndarray) -> np.ndarray:
    return np.ones(idx.shape, dtype=bool)


class AllCandidates:
    """Every eligible row is a candidate in every iteration.

    ``eligible`` : callable ``(global indices) -> bool mask`` (e.g. :func:`validation_eligibility`).
    """

    exhaustive = True

    def __init__(self, n_rows: int, eligible=None):
        idx = np.arange(n_rows, dtype=np.int64)
        self.indices = idx if eligible is None else idx[eligible(idx)]

    def draw(self, rng, excluded) -> np.ndarray:
        return self.indices


class RandomCandidates:
    """``s`` distinct random eligible rows per iteration, sorted by global index.

    ``eligible`` : callable ``(global indices) -> bool mask``; ``n_eligible`` : how many rows it
    admits; ``keep_fraction`` : the expected share of rows it admits (sizes the rejection draws).
    """

    exhaustive = False

    def __init__(self, n_rows: int, s: int, eligible=None, n_eligible: int | None = None,
                 keep_fraction: float | None = None):
        self.n_rows = n_rows
        self.s = int(s)
        self.eligible = eligible if eligible is not None else _all_eligible
        self.n_train = n_rows if n_eligible is None else int(n_eligible)
        self.keep_fraction = getattr(self.eligible, "keep_fraction", None) if keep_fraction is None else keep_fraction

    def draw(self, rng, excluded) -> np.ndarray:
        """``s`` rows (fewer when fewer are left) not in ``excluded`` (a set of global rows)."""
        available = self.n_train - len(excluded)
        want = min(self.s, max(available, 0))
        if want <= 0:
            return np.zeros(0, dtype=np.int64)
        if want * 4 >= available:
            # small data: exact draw from the explicit list of available rows (the eligible rows
            # kept from the first such draw; the excluded ones dropped through a boolean mask, not
            # np.isin's sort: 0.3 ms per atom on wdbc's CV folds, benchmarks/kmp_loop_overhead.py)
            idx = self._eligible_rows()
            if excluded:
                free = np.ones(self.n_rows, dtype=bool)
                free[np.fromiter(excluded, dtype=np.int64, count=len(excluded))] = False
                idx = idx[free[idx]]
            return np.sort(rng.choice(idx, size=want, replace=False))
        # rows taken in order of draw; ``excluded`` is read, never copied (it holds the whole basis:
        # copying it per draw was 0.6 ms of 0.62 at 20 000 rows, benchmarks/sampler_speed.py)
        chosen: dict[int, None] = {}
        keep_frac = max(self.keep_fraction if self.keep_fraction is not None
                        else self.n_train / max(self.n_rows, 1), 1e-3)
        while len(chosen) < want:
            k = int((want - len(chosen)) / keep_frac * 1.25) + 8
            draw = rng.integers(0, self.n_rows, size=k, dtype=np.int64)
            draw = draw[self.eligible(draw)]
            for i in draw.tolist():
                if i not in excluded and i not in chosen:
                    chosen[i] = None
                    if len(chosen) == want:
                        break
        return np.sort(np.fromiter(chosen, dtype=np.int64, count=len(chosen)))

    def _eligible_rows(self) -> np.ndarray:
        """The eligible global rows, sorted (computed once: ``eligible`` is a pure function of the index)."""
        rows = getattr(self, "_eligible_cache", None)
        if rows is None:
            rows = np.arange(self.n_rows, dtype=np.int64)
            rows = rows[self.eligible(rows)]
            self._eligible_cache = rows
        return rows

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_eligible_cache"}


class ExcludingCandidates:
    """``s`` distinct random rows outside an excluded set given as a sorted array (the core-set
    loop's sampler; sorted; vectorised draws: this runs once per core vector, and
    :class:`RandomCandidates`' per-row rejection loop was a tenth of a letter fit).

    Not merged with :class:`RandomCandidates`: the two consume the generator differently (here
    batches of ``2s`` integers merged with ``np.union1d``, then a choice of ``s``; there batches
    sized by the eligible share, kept in order of draw), so using one for both would change every
    seeded model of the other families (checked by ``benchmarks/bit_identity.py``).

    ``rows``: draw among these sorted global rows only (None: all ``n_rows``); ``exclude`` must
    then be a subset of them."""

    def __init__(self, n_rows: int, s: int, rows: np.ndarray | None = None):
        self.n_rows, self.s, self.rows = n_rows, s, None if rows is None else np.asarray(rows, dtype=np.int64)
        if self.rows is not None:
            self.n_rows = len(self.rows)

    def draw(self, rng, exclude: np.ndarray) -> np.ndarray:
        if self.rows is None:
            return self._draw(rng, exclude)
        return self.rows[self._draw(rng, np.searchsorted(self.rows, exclude))]

    def _draw(self, rng, exclude: np.ndarray) -> np.ndarray:
        available = self.n_rows - len(exclude)
        want = min(self.s, max(available, 0))
        if want <= 0:
            return np.zeros(0, dtype=np.int64)
        if want * 4 >= available:
            idx = np.setdiff1d(np.arange(self.n_rows, dtype=np.int64), exclude, assume_unique=True)
            return np.sort(rng.choice(idx, size=want, replace=False))
        taken = np.zeros(self.n_rows, dtype=bool)
        taken[exclude] = True
        got = np.zeros(0, dtype=np.int64)
        while len(got) < want:
            x = rng.integers(0, self.n_rows, size=2 * want)
            got = np.union1d(got, x[~taken[x]])
        return np.sort(rng.choice(got, size=want, replace=False))
