"""RandomCandidates: the draws are a pure function of the generator, the excluded rows and the
eligibility, unchanged by how the rejection loop is written (every seeded stochastic KMP, HMP
and sparse KPCA model depends on them; benchmarks/bit_identity.py checks the models)."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask.greedy import RandomCandidates, validation_eligibility


def _reference_draw(n_rows, s, eligible, n_eligible, rng, excluded):
    """The rejection sampler as first written: batches sized by the eligible share, rows taken
    in order of draw, a copy of the excluded set as the 'seen' set (the specification)."""
    available = n_eligible - len(excluded)
    want = min(s, max(available, 0))
    if want <= 0:
        return np.zeros(0, dtype=np.int64)
    if want * 4 >= available:
        idx = np.arange(n_rows, dtype=np.int64)
        idx = idx[eligible(idx)]
        idx = idx[~np.isin(idx, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))]
        return np.sort(rng.choice(idx, size=want, replace=False))
    chosen, seen = [], set(excluded)
    keep = max(getattr(eligible, "keep_fraction", n_eligible / n_rows), 1e-3)
    while len(chosen) < want:
        draw = rng.integers(0, n_rows, size=int((want - len(chosen)) / keep * 1.25) + 8, dtype=np.int64)
        for i in draw[eligible(draw)].tolist():
            if i not in seen:
                seen.add(i)
                chosen.append(i)
                if len(chosen) == want:
                    break
    return np.sort(np.asarray(chosen, dtype=np.int64))


@pytest.mark.parametrize("seed", range(4))
def test_draws_and_generator_state_match_the_reference(seed):
    rs = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rs.integers(5, 2000))
        s = int(rs.integers(1, 80))
        vf = float(rs.choice([0.0, 0.3]))
        eligible = validation_eligibility(vf, int(rs.integers(0, 50)))
        pool = np.flatnonzero(eligible(np.arange(n)))
        excluded = set(rs.choice(pool, size=int(rs.integers(0, max(1, len(pool) // 2))), replace=False).tolist())
        sampler = RandomCandidates(n, s, eligible, len(pool))
        g = int(rs.integers(0, 2**31))
        r1, r2 = np.random.default_rng(g), np.random.default_rng(g)
        got = sampler.draw(r1, excluded)
        np.testing.assert_array_equal(got, _reference_draw(n, s, eligible, len(pool), r2, excluded))
        assert r1.bit_generator.state == r2.bit_generator.state
        assert len(np.unique(got)) == len(got) and not excluded.intersection(got.tolist())
        assert np.all(eligible(got)) and np.all(np.diff(got) > 0)


def test_large_excluded_set_is_not_copied():
    """The excluded set is read, never copied (it holds the whole basis: a copy per draw was
    O(n_basis) Python work)."""

    class NoCopy(set):
        def __iter__(self):
            raise AssertionError("the excluded set was iterated (copied)")

    excluded = NoCopy(range(0, 10_000, 3))
    got = RandomCandidates(1_000_000, 59).draw(np.random.default_rng(0), excluded)
    assert len(got) == 59 and not any(int(i) in excluded for i in got)
