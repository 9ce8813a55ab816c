"""Held-out scores of every prefix model of every (γ, fold) pursuit, in one pass over a store's row blocks.

The cross-validation estimators hand the scorers (:func:`kmp_dask.greedy._cv_path.prefix_scorer`)
here; each row block works out its rows' folds from the row-index hash and returns sums that add
over blocks (:func:`~kmp_dask.blockops._prefix_scores.hash_fold_stats`, run by
:func:`~._rowsums.row_block_sums`), cut back into one array per (γ, fold) on the driver.
"""

from __future__ import annotations

import numpy as np

from ..blockops._prefix_scores import hash_fold_stats
from ._rowsums import row_block_sums

__all__ = ["held_out_prefix_stats"]


def held_out_prefix_stats(store, scorers, n_folds: int, seed: int, *, client=None) -> list[list[np.ndarray]]:
    """``stats[g][f]``: the sums of ``scorers[g][f]`` (a ``PrefixScorer``) over the rows of fold ``f``.

    Folds are the row-index hash of ``seed`` (``n_folds`` of them); the store's ``attrs["classes"]``
    map its label codes to the scorers' classes. ``client``: a ``distributed.Client``, or None
    (this process).
    """
    names = store.attrs.get("classes")
    names = None if names is None else np.asarray(names)
    flat = row_block_sums(hash_fold_stats, store.to_dask(), store.to_dask("y"), (scorers, n_folds, seed, names),
                          client=client)
    return _split_stats(flat, scorers)


def _split_stats(flat, scorers):
    """The flat sums of ``hash_fold_stats`` cut back into one array per (γ, fold)."""
    out, a = [], 0
    for per_fold in scorers:
        row = []
        for sc in per_fold:
            row.append(flat[a:a + sc.n_stats])
            a += sc.n_stats
        out.append(row)
    return out
