"""The loop's fast paths give what the plain versions gave: rows gathered by position, candidate
masking by set lookups, the draw over a kept eligible list, the recorder's median."""

import numpy as np
import pytest

from kmp_dask.greedy._candidates import CandidateSet, gather_fetched
from kmp_dask.greedy._record import median
from kmp_dask.greedy._sampling import RandomCandidates, validation_eligibility


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("parts", [1, 3])
def test_gather_fetched_places_every_row(sort, parts):
    rng = np.random.default_rng(1)
    idx = rng.choice(1000, 40, replace=False)
    idx = np.sort(idx) if sort else idx
    X = rng.standard_normal((40, 3))
    pieces = [(idx[c], X[c]) for c in np.array_split(rng.permutation(40), parts)]
    np.testing.assert_array_equal(gather_fetched(pieces, idx, 3, np.float64), X)


def test_gather_fetched_names_rows_not_asked_for():
    with pytest.raises(KeyError, match=r"\[7\]"):
        gather_fetched([(np.array([7]), np.zeros((1, 2)))], np.array([1, 2]), 2, np.float64)


@pytest.mark.parametrize("s", [30, 700])  # set lookups and np.isin
def test_mask_rows_matches_isin(s):
    rng = np.random.default_rng(2)
    idx = np.sort(rng.choice(5000, s, replace=False))
    cs = CandidateSet(idx, rng.standard_normal((s, 2)), 2)
    excluded = set(rng.choice(idx, s // 3, replace=False).tolist()) | {9999}
    score = rng.standard_normal(2 * s + 1)
    want = score.copy()
    want[:2 * s][np.tile(np.isin(idx, list(excluded)), 2)] = -np.inf
    cs.mask_rows(score, excluded)
    np.testing.assert_array_equal(score, want)


def test_small_data_draw_is_the_plain_draw():
    elig = validation_eligibility(0.2, 3)
    n = 300
    sampler = RandomCandidates(n, 59, elig, n_eligible=int(elig(np.arange(n)).sum()))
    excluded = set(np.random.default_rng(4).choice(n, 120, replace=False).tolist())
    got = sampler.draw(np.random.default_rng(5), excluded)
    idx = np.arange(n)
    idx = idx[elig(idx)]
    idx = idx[~np.isin(idx, list(excluded))]
    want = np.sort(np.random.default_rng(5).choice(idx, size=min(59, len(idx)), replace=False))
    np.testing.assert_array_equal(got, want)


def test_median_is_numpy_median():
    rng = np.random.default_rng(6)
    for n in range(1, 60):
        a = np.round(rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5), 2)
        assert median(a) == float(np.median(a))
