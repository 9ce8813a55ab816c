"""How much does a CVM's held-out accuracy vary between random samples of the same size?

The ``stopping="sample"`` rule fits the core-set loop on a random sample of rows; its accuracy at
large N is that of a sample, so a change from one N to another is only meaningful against this
spread. Data: the nested test bed of ``cvm_growth.py`` (one draw of ``--draw-rows`` + ``--test-rows``
rows, seed ``--seed``, ``--flip-y`` label noise, standardised on the training rows). Fits, each
scored on the common held-out rows: ``stopping="paper"`` on ``--blocks`` disjoint consecutive
blocks of ``--sample`` rows (different samples of the same problem), and ``stopping=--sample`` on
all training rows with ``random_state`` 0, 1, … (the rule's own sample changes with the seed).

Usage: ``python benchmarks/cvm_sample_variance.py [--seed 2 --flip-y 0.03 --eps 1e-3 --sample 5000]``
JSON: benchmarks/results/cvm_sample_variance.json.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H
from cvm_growth import nested_data

NAME = "cvm_sample_variance"


def add_arguments(p):
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--flip-y", type=float, default=0.03)
    p.add_argument("--eps", type=float, default=1e-3)
    p.add_argument("--sample", type=int, default=5000)
    p.add_argument("--draw-rows", type=int, default=80_000)
    p.add_argument("--test-rows", type=int, default=20_000)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--seeds", type=int, default=3, help="random_state values of the sample-rule fits")


def _acc(est, Xte, yte):
    return float((est.predict(Xte) == yte).mean())


def main(argv=None):
    args = H.parse_main_args(NAME, __doc__, add_arguments, argv)
    from kmp_dask import CVMClassifier

    out = H.output_path(NAME, args.out)
    t0 = time.perf_counter()
    X, y, Xte, yte = nested_data([args.draw_rows], args.test_rows, seed=args.seed, flip_y=args.flip_y)(args.draw_rows)
    res = {"name": NAME, "environment": H.environment(), "uptime_at_start": H.uptime(), "settings": vars(args)}
    blocks = []
    for b in range(args.blocks):
        sl = slice(b * args.sample, (b + 1) * args.sample)
        blocks.append(_acc(CVMClassifier(eps=args.eps, random_state=0, stopping="paper").fit(X[sl], y[sl]), Xte, yte))
        H.log(f"paper rule on block {b}: {blocks[-1]:.4f}")
    rule = []
    for rs in range(args.seeds):
        rule.append(_acc(CVMClassifier(eps=args.eps, random_state=rs, stopping=args.sample).fit(X, y), Xte, yte))
        H.log(f"stopping={args.sample} on {len(X)} rows, random_state={rs}: {rule[-1]:.4f}")
    res.update(paper_rule_on_blocks=blocks, sample_rule_by_seed=rule, uptime_at_end=H.uptime())
    H.finish(res, out, t0)


if __name__ == "__main__":
    main()
