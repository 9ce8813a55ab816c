"""A store's label set, read with one partition query (the classifiers' classes when nothing names them).

The classifiers need their classes before the loop starts; when the input does not carry them
(numpy labels are encoded on the way in, a store may list them in ``attrs["classes"]``), every
partition reports the distinct labels it holds (``kmp_stats`` with ``StatsQuery(unique_labels=True)``)
and the driver merges them. This is the one copy of that query; the estimators call it on the
engine their session gives them and never name a partition query themselves.
"""

from __future__ import annotations

import numpy as np

from ..blockops import StatsQuery, kmp_stats

__all__ = ["partition_labels", "store_labels"]


def partition_labels(engine) -> list[np.ndarray]:
    """The distinct labels of each partition of ``engine`` (sorted), in partition order: one pass."""
    return [p["labels"] for p in engine.run(kmp_stats, StatsQuery(unique_labels=True))]


def store_labels(engine) -> np.ndarray:
    """The sorted distinct labels of every row the engine holds (:func:`partition_labels`, merged)."""
    return np.unique(np.concatenate(partition_labels(engine)))
