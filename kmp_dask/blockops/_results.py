"""Typed pass results: what one partition answers to a query, and the driver's total over a pass.

A query (``op(partition, msg)``) returns one of these small frozen records per partition; the
driver combines a pass's records with the type's :meth:`combine`, which sums every field over the
partitions *in partition order* with ``np.add.reduce`` over the list — the one order of
accumulation every driver uses, so a fit is bit-for-bit the same on any number of workers
(docs/engine.md, "The spine"). A field that is None in the partitions' records (not asked for)
stays None in the total.

KMP's scoring, commit, line-search, refit and Gram passes answer with these; KMP's statistics
pass (whose labels the estimators read) and the other families' queries still answer with
string-keyed dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["BlockStats", "ColumnStats", "GramStats", "LineStats", "PassResult", "ScoreStats", "total"]


def total(results, name: str):
    """``Σ_p results[p].name`` in partition order (``np.add.reduce`` over the list)."""
    return np.add.reduce([getattr(r, name) for r in results])


class PassResult:
    """Mixin of the frozen result records: :meth:`combine` sums each field over a pass."""

    #: fields the total turns into a Python float (scalars the driver compares and formats)
    _SCALARS: tuple = ()
    #: counts and sums of Python scalars: totalled with the builtin ``sum`` (left to right from 0)
    _PYTHON_SUMS: tuple = ()
    #: per-partition pieces that are not summed: the total holds the tuple of them, in partition order
    _GATHERED: tuple = ()

    @classmethod
    def combine(cls, results):
        """The total of a pass's per-partition records (in the order given: partition order)."""
        results = list(results)
        first = results[0]
        out = {}
        for f in fields(cls):  # declared order; each field's sum is independent of the others
            if f.name in cls._GATHERED:
                out[f.name] = tuple(getattr(r, f.name) for r in results)
            elif getattr(first, f.name) is None:
                out[f.name] = None
            elif f.name in cls._PYTHON_SUMS:
                out[f.name] = sum(getattr(r, f.name) for r in results)
            else:
                s = total(results, f.name)
                out[f.name] = float(s) if f.name in cls._SCALARS else s
        return cls(**out)


@dataclass(frozen=True)
class ScoreStats(PassResult):
    """The scoring pass (:func:`~kmp_dask.blockops.kmp_score`): ``rss = ‖R‖²`` and ``rsum = ΣR``
    (m,); ``loss`` (m,, other losses); ``n_above`` (rows with an error above the query's
    threshold); for candidates ``corr = DᵀR`` (S, m), ``sqn`` (S,) and ``cross = DᵀB`` (S, n, when
    asked); validation sums ``val_n``, ``val_sse`` / ``val_loss``, ``val_correct``; the rows fetched
    for the next candidates ``fetched = (global indices, rows)`` and those of them with sample
    weight 0 (``zero_weight``). In the total the counts and validation sums are Python sums and
    ``fetched`` / ``zero_weight`` the per-partition pieces, in partition order."""

    rss: Any
    rsum: Any
    loss: Any = None
    n_above: Any = None
    corr: Any = None
    sqn: Any = None
    cross: Any = None
    val_n: Any = None
    val_sse: Any = None
    val_loss: Any = None
    val_correct: Any = None
    fetched: Any = None
    zero_weight: Any = None

    _PYTHON_SUMS = ("n_above", "val_n", "val_sse", "val_loss", "val_correct")
    _GATHERED = ("fetched", "zero_weight")


@dataclass(frozen=True)
class ColumnStats(PassResult):
    """The pending column ``d``'s products (:func:`~kmp_dask.blockops.kmp_column_stats`):
    ``sqn = ‖d‖²``, ``corr = dᵀR`` (m,), ``ytd = dᵀY`` (m,), ``cross = Bᵀd`` (n,) when asked,
    and for other losses the line-search statistics at step 0 (``loss``, ``grad``, ``hess``, (1, m)).

    Basic pursuit builds its column from the scoring pass instead (``ytd`` None)."""

    sqn: Any
    corr: Any
    ytd: Any = None
    cross: Any = None
    loss: Any = None
    grad: Any = None
    hess: Any = None

    _SCALARS = ("sqn",)


@dataclass(frozen=True)
class LineStats(PassResult):
    """Loss and its derivatives at trial points: the line search's (``loss``, ``grad``, ``hess``,
    each (k, m)) or the Newton refit's (``loss`` (k, m); ``grad`` (n, m) and ``hess`` (m, n, n)
    at one of them, else None)."""

    loss: Any
    grad: Any = None
    hess: Any = None


@dataclass(frozen=True)
class GramStats(PassResult):
    """The basis's least-squares statistics: ``gram = BᵀWB`` (n, n), ``bty = BᵀWY`` (n, m)."""

    gram: Any
    bty: Any


@dataclass(frozen=True)
class BlockStats(PassResult):
    """The kept candidates' products (:func:`~kmp_dask.blockops.kmp_block_stats`, several atoms
    per pass), float64 over the training rows: ``gram = DᵀWD`` (c, c) between the c candidate
    columns, ``cross = DᵀWB`` (c, n) with the basis, ``corr = DᵀWR`` (c, m) with the residual and
    ``ytd = DᵀWY`` (c, m) with the targets."""

    gram: Any
    cross: Any
    corr: Any
    ytd: Any
