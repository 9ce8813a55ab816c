"""Typed pass results: what one partition answers to a query, and the driver's total over a pass.

A query (``op(partition, msg)``) returns one of these small frozen records per partition; the
driver combines a pass's records with the type's :meth:`combine`, which sums every field over the
partitions *in partition order* with ``np.add.reduce`` over the list — the one order of
accumulation every driver uses, so a fit is bit-for-bit the same on any number of workers
(docs/engine.md, "The spine"). A field that is None in the partitions' records (not asked for)
stays None in the total.

KMP's scoring, commit, line-search, refit and Gram passes answer with these, and so do sparse
KPCA / KCCA's passes (:class:`KPCAScoreStats`, :class:`KPCAMoments`) and the reduced-set
pursuit's (:class:`RSStats`, :class:`RSScoreStats`, :class:`RSValues`) and CVM / MMDA's distance
pass (:class:`CVMFurthest`); KMP's statistics pass (whose labels the estimators read) and the
reduced-set exchanges still answer with string-keyed dicts.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

import numpy as np

__all__ = ["BlockStats", "CVMFurthest", "ColumnStats", "GramStats", "KPCAMoments", "KPCAScoreStats", "LineStats",
           "PassResult",
           "RSScoreStats", "RSStats", "RSValues", "ScoreStats", "total"]


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
    #: fields whose total is the elementwise maximum over the partitions (``np.maximum.reduce``)
    _MAXIMA: tuple = ()

    @classmethod
    def combine(cls, results):
        """The total of a pass's per-partition records (in the order given: partition order)."""
        results = list(results)
        if len(results) == 1:
            return cls._combine_one(results[0])
        first = results[0]
        out = {}
        for name, kind in cls._combine_plan():  # declared order; each field's sum is independent
            if kind == "gathered":
                out[name] = tuple([getattr(r, name) for r in results])
            elif getattr(first, name) is None:
                out[name] = None
            elif kind == "python":
                out[name] = sum(getattr(r, name) for r in results)
            elif kind == "max":
                out[name] = np.maximum.reduce([getattr(r, name) for r in results])
            else:
                s = np.add.reduce([getattr(r, name) for r in results])  # :func:`total`
                out[name] = float(s) if kind == "scalar" else s
        return cls(**out)

    @classmethod
    def _combine_one(cls, r):
        """:meth:`combine` of one record (one partition: numpy input in process), the same values
        and types without a list and a reduction per field: a sum over one record is ``0 + value``
        (``np.add.reduce`` starts from the identity, so −0.0 becomes 0.0 in both; integer and
        other arrays keep the reduction, whose dtype may differ from the addition's)."""
        kinds = cls._combine_kinds()
        out = dict(r.__dict__)  # the record's fields; those not None are replaced by their totals
        for name, v in r.__dict__.items():
            kind = kinds[name]
            if kind == "gathered":
                out[name] = (v,)
            elif v is None:
                continue
            elif kind == "python":
                out[name] = 0 + v
            elif kind == "max":
                out[name] = np.maximum.reduce([v])
            else:
                floating = isinstance(v, (float, np.floating)) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")
                s = np.add(v, 0) if floating else np.add.reduce([v])
                out[name] = float(s) if kind == "scalar" else s
        return cls._record(out)

    @classmethod
    def make(cls, values: dict):
        """``cls(**values)`` (the fields not given take their defaults; an unknown or a missing one is
        a TypeError) without the frozen dataclass's ``__init__``, which sets the fields one by one
        through ``object.__setattr__``: a pass's record, built a few times an atom."""
        spec = cls.__dict__.get("_spec")
        if spec is None:
            spec = cls._spec = tuple((f.name, f.default) for f in fields(cls))
        if len(values) > len(spec) or not values.keys() <= {name for name, _ in spec}:
            raise TypeError(f"{cls.__name__}.make() got unknown fields {sorted(set(values) - {n for n, _ in spec})}")
        out = {}
        for name, default in spec:
            v = values.get(name, default)
            if v is MISSING:
                raise TypeError(f"{cls.__name__}.make() missing the field {name!r}")
            out[name] = v
        return cls._record(out)

    @classmethod
    def _record(cls, values: dict):
        """``cls(**values)`` for a dict holding every field: the frozen dataclass's ``__init__`` sets
        them one by one through ``object.__setattr__`` (a few µs a record, twice an atom)."""
        new = object.__new__(cls)
        new.__dict__.update(values)
        return new

    @classmethod
    def _combine_kinds(cls) -> dict:
        """``{field name: how it is totalled}`` (:meth:`_combine_plan` as a dict)."""
        kinds = cls.__dict__.get("_kinds")
        if kinds is None:
            kinds = cls._kinds = dict(cls._combine_plan())
        return kinds

    @classmethod
    def _combine_plan(cls) -> tuple:
        """``(field name, how it is totalled)`` in declared order, worked out once per class (the
        scoring pass combines a few records per atom: ``dataclasses.fields`` each time was 5 % of
        a small-data CV fit, benchmarks/kmp_loop_overhead.py)."""
        plan = cls.__dict__.get("_plan")
        if plan is None:
            plan = tuple((f.name, "gathered" if f.name in cls._GATHERED else "python" if f.name in cls._PYTHON_SUMS
                          else "max" if f.name in cls._MAXIMA else "scalar" if f.name in cls._SCALARS else "sum")
                         for f in fields(cls))
            cls._plan = plan
        return plan


@dataclass(frozen=True)
class ScoreStats(PassResult):
    """The scoring pass (:func:`~kmp_dask.blockops.kmp_score`): ``rss = ‖R‖²`` and ``rsum = ΣR``
    (m,); ``loss`` (m,, other losses); ``n_above`` (rows with an error above the query's
    threshold); for candidates ``corr = DᵀR`` (S, m), ``sqn`` (S,) and ``cross = DᵀB`` (S, n, when
    asked); validation sums ``val_n``, ``val_sse`` / ``val_loss``, ``val_correct``, ``val_sq`` (Σ of the
    squared per-row losses); the rows fetched
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
    val_sq: Any = None
    fetched: Any = None
    zero_weight: Any = None

    _PYTHON_SUMS = ("n_above", "val_n", "val_sse", "val_loss", "val_correct", "val_sq")
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


# -- sparse KPCA / KCCA (blockops/_kpca.py) ----------------------------------------------------
@dataclass(frozen=True)
class KPCAScoreStats(PassResult):
    """The sparse KPCA / KCCA pass (:func:`~kmp_dask.blockops._kpca.kpca_score`), V views:
    ``trace`` (V,) = Σ d(x) the trace residual; ``n`` rows; ``dmax`` (V,) the largest residual
    (the total: the maximum over the partitions); for candidates ``sq`` (V, s) = Σ_x K̃_v(x, z)²
    and, with two views, ``cross`` (s,) = Σ_x K̃_0(x, z) K̃_1(x, z); the rows fetched for the next
    candidates (``fetched``, per partition in the total)."""

    trace: Any
    n: Any
    dmax: Any
    sq: Any = None
    cross: Any = None
    fetched: Any = None

    _PYTHON_SUMS = ("n",)
    _MAXIMA = ("dmax",)
    _GATHERED = ("fetched",)


@dataclass(frozen=True)
class KPCAMoments(PassResult):
    """The moments pass (:func:`~kmp_dask.blockops._kpca.kpca_moments`): ``n`` rows, ``sums[v]``
    = Σ_x L_v(x) (k,) per view and ``gram[(u, v)]`` = Σ_x L_u(x) L_v(x)ᵀ (k, k) for u ≤ v; the
    total sums each view's and each pair's arrays over the partitions, in partition order."""

    n: Any
    sums: Any
    gram: Any

    @classmethod
    def combine(cls, results):
        results = list(results)
        views = range(len(results[0].sums))
        return cls(sum(r.n for r in results), tuple(np.add.reduce([r.sums[v] for r in results]) for v in views),
                   {key: np.add.reduce([r.gram[key] for r in results]) for key in results[0].gram})


# -- reduced-set pursuit (blockops/_reduced.py) ------------------------------------------------
@dataclass(frozen=True)
class RSStats(PassResult):
    """The pool statistics (:func:`~kmp_dask.blockops.rs_stats`): ``n`` rows, ``fsq`` = Σ f² per
    output; per partition (gathered) ``own`` (its rows are the expansion's centres) and ``wsq``
    (its share Σ_i α_i f(x_i) of ‖w‖², None when not own)."""

    n: Any
    fsq: Any
    own: Any
    wsq: Any = None

    _PYTHON_SUMS = ("n",)
    _GATHERED = ("own", "wsq")


#: the candidate fields of :class:`RSScoreStats`, in the order :func:`~kmp_dask.greedy._candidates.merge_ranked` keeps
RS_CANDIDATE_FIELDS = ("index", "score", "rows", "r", "f", "kdiag")


@dataclass(frozen=True)
class RSScoreStats(PassResult):
    """The pursuit's pass (:func:`~kmp_dask.blockops.rs_score`): ``rss`` = Σ R² per output over
    the pool; the partition's best candidates (gathered per partition in the total): global
    ``index``, ``score``, ``rows``, residual ``r``, target values ``f`` and ``kdiag`` there."""

    rss: Any
    index: Any
    score: Any
    rows: Any
    r: Any
    f: Any
    kdiag: Any

    _GATHERED = RS_CANDIDATE_FIELDS

    def candidates(self) -> list[dict]:
        """The partitions' candidates as one dict per partition, in partition order (a total's)."""
        return [dict(zip(RS_CANDIDATE_FIELDS, vals, strict=True))
                for vals in zip(*(getattr(self, k) for k in RS_CANDIDATE_FIELDS), strict=True)]


@dataclass(frozen=True)
class RSValues(PassResult):
    """Prefix models' pool errors (:func:`~kmp_dask.blockops.rs_values`): ``sse`` (levels, m) =
    Σ (f − f̂_k)²; with values asked, ``values`` per partition (gathered: a list per level)."""

    sse: Any
    values: Any = None

    _GATHERED = ("values",)

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


# -- core vector machines / MMDA (blockops/_cvm.py) ------------------------------------------
#: the candidate fields of :class:`CVMFurthest`, in the order :func:`~kmp_dask.greedy._candidates.merge_ranked` keeps
CVM_CANDIDATE_FIELDS = ("index", "dist", "rows", "y", "P")


@dataclass(frozen=True)
class CVMFurthest(PassResult):
    """The distance pass (:func:`~kmp_dask.blockops._cvm.cvm_furthest`): ``n`` rows measured,
    ``kernel_evals`` kernel values computed (those read from the kernel-column cache are not) and
    ``n_wrong`` rows measured on the wrong side of the ball's hyperplane (``y f(x) < 0``: the
    model's training errors among them) — totalled with Python's ``sum``, as the driver did — and
    the partition's ``top`` furthest rows
    (gathered per partition in the total): global ``index``, squared distance ``dist`` to the
    ball's centre, ``rows``, targets ``y`` and MMDA projections ``P``."""

    n: Any
    kernel_evals: Any
    index: Any
    dist: Any
    rows: Any
    y: Any
    P: Any
    n_wrong: Any = 0

    _PYTHON_SUMS = ("n", "kernel_evals", "n_wrong")
    _GATHERED = CVM_CANDIDATE_FIELDS

    def candidates(self) -> list[dict]:
        """The partitions' furthest rows as one dict per partition, in partition order (a total's)."""
        return [dict(zip(CVM_CANDIDATE_FIELDS, vals, strict=True))
                for vals in zip(*(getattr(self, k) for k in CVM_CANDIDATE_FIELDS), strict=True)]
