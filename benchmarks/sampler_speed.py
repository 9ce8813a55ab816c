"""Candidate samplers' draw time: RandomCandidates (KMP, HMP, sparse KPCA) against the rejection
loop it replaced (which copied the excluded set on every draw) and the core vector machine's
ExcludingCandidates, all measured in this run (medians over repeats; ratios against the old loop).

The draws of RandomCandidates and of the old loop are checked identical (rows and generator
state) before anything is timed; ExcludingCandidates draws a different stream (its own
vectorised batches) and is timed for comparison only. Writes benchmarks/results/sampler_speed.json.
"""

from __future__ import annotations

import sys
import time

import _harness as H

NAME = "sampler_speed"


def _old_draw(sampler, rng, excluded):
    """RandomCandidates.draw before it read ``excluded`` in place (the reference)."""
    import numpy as np

    available = sampler.n_train - len(excluded)
    want = min(sampler.s, max(available, 0))
    if want * 4 >= available:
        return sampler.draw(rng, excluded)  # the small-data branch is unchanged
    chosen, seen = [], set(excluded)
    keep = max(sampler.keep_fraction if sampler.keep_fraction is not None else sampler.n_train / sampler.n_rows, 1e-3)
    while len(chosen) < want:
        draw = rng.integers(0, sampler.n_rows, size=int((want - len(chosen)) / keep * 1.25) + 8, dtype=np.int64)
        for i in draw[sampler.eligible(draw)].tolist():
            if i not in seen:
                seen.add(i)
                chosen.append(i)
                if len(chosen) == want:
                    break
    return np.sort(np.asarray(chosen, dtype=np.int64))


def _median_seconds(fn, reps):
    import numpy as np

    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, lambda p: p.add_argument("--reps", type=int, default=300), argv)
    import numpy as np

    sys.path.insert(0, str(H.ROOT))
    from kmp_dask.greedy import ExcludingCandidates, RandomCandidates

    t0 = time.perf_counter()
    rows = []
    for n_rows, n_excluded, s in [(10**6, 0, 59), (10**6, 2000, 59), (10**6, 20000, 59), (10**6, 20000, 228)]:
        sampler = RandomCandidates(n_rows, s)
        excluded = set(np.random.default_rng(0).choice(n_rows, n_excluded, replace=False).tolist())
        r1, r2 = np.random.default_rng(7), np.random.default_rng(7)
        for _ in range(100):
            assert np.array_equal(sampler.draw(r1, excluded), _old_draw(sampler, r2, excluded))
        assert r1.bit_generator.state == r2.bit_generator.state
        rng = np.random.default_rng(1)
        new = _median_seconds(lambda sampler=sampler, rng=rng, excluded=excluded: sampler.draw(rng, excluded),
                              args.reps)
        old = _median_seconds(lambda sampler=sampler, rng=rng, excluded=excluded: _old_draw(sampler, rng, excluded),
                              args.reps)
        exa = np.sort(np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
        cvm = ExcludingCandidates(n_rows, s)
        exc = _median_seconds(lambda cvm=cvm, rng=rng, exa=exa: cvm.draw(rng, exa), max(args.reps // 4, 5))
        row = {"n_rows": n_rows, "n_excluded": n_excluded, "s": s, "random_candidates_us": new * 1e6,
               "old_loop_us": old * 1e6, "excluding_candidates_us": exc * 1e6, "new_over_old": new / old,
               "excluding_over_new": exc / new}
        H.log(f"N={n_rows} excluded={n_excluded} s={s}: RandomCandidates {new * 1e6:.0f} µs, old loop "
              f"{old * 1e6:.0f} µs (ratio {new / old:.2f}), ExcludingCandidates {exc * 1e6:.0f} µs")
        rows.append(row)
    H.finish({"name": NAME, "rows": rows, "reps": args.reps, "environment": H.environment()},
             H.output_path(NAME, args.out), t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
