"""The compressor's checks of its parameters and of ``fit``'s inputs, and the candidate pool.

Every check raises before any cluster starts, with the argument, the value received and what to
pass instead. The checks read the parameters from the fit's
:class:`~kmp_dask.reduced._state.RouteState`.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..estimators._inputs import is_dask_array, is_store_like
from ..greedy._sampling import resolve_candidates
from ..store import InMemoryStore, as_store
from ._models import CompressionTarget
from ._sparse import L0_STEPS

__all__ = ["CHUNKING", "METHODS", "REFIT", "SELECT", "check_params", "check_target", "prepare_pool"]

METHODS = ("hmp", "l0", "l1")
SELECT = ("n_vectors", "rkhs_tol", "validation")
REFIT = ("rkhs", "pool")
CHUNKING = ("tree", "cyclic")


def check_int_or_fraction(name, value, *, allow_none):
    if value is None and allow_none:
        return
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
        return
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < 1:
        return
    raise ValueError(
        f"{name} must be an int >= 1 (a number of vectors) or a float in (0, 1) (a fraction of the "
        f"model's expansion){' or None' if allow_none else ''}; got {value!r}")


def check_params(route) -> None:
    """The compressor's parameters, each alone and in combination (``route``: its
    :class:`~kmp_dask.reduced._state.RouteState`, or the compressor itself: the same names)."""
    check_int_or_fraction("n_vectors", route.n_vectors, allow_none=False)
    for name, allowed in (("method", METHODS), ("select", SELECT), ("refit", REFIT)):
        if getattr(route, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}; got {getattr(route, name)!r}")
    if route.criterion not in ("eq13", "decrease"):
        raise ValueError(f"criterion must be 'eq13' or 'decrease'; got {route.criterion!r}")
    _check_exchange(route)
    if route.dense not in ("auto", True, False):
        raise ValueError(f"dense must be True, False or 'auto'; got {route.dense!r}")
    if route.coupled not in ("auto", True, False):
        raise ValueError(f"coupled must be True, False or 'auto'; got {route.coupled!r}")
    resolve_candidates(route.candidates)
    if not (isinstance(route.rkhs_tol, numbers.Real) and 0 <= route.rkhs_tol < 1):
        raise ValueError(f"rkhs_tol must be a float in [0, 1) (relative to ‖w‖²); got {route.rkhs_tol!r}")
    _check_chunking(route)
    if route.method != "hmp" and resolve_candidates(route.candidates) is not None:
        raise ValueError(f"candidates (probabilistic search) works with method='hmp' only; got method={route.method!r}")
    if route.l0_step not in L0_STEPS:
        raise ValueError(f"l0_step must be one of {L0_STEPS} (the l0 baseline's lossy step); got {route.l0_step!r}")


def _check_exchange(route) -> None:
    if not (isinstance(route.exchange, numbers.Integral) and not isinstance(route.exchange, bool)
            and route.exchange >= 0):
        raise ValueError(f"exchange must be an int >= 0 (sweeps of single-vector exchanges; 0: off); "
                         f"got {route.exchange!r}")
    if not isinstance(route.exchange_guard, (bool, np.bool_)):
        raise ValueError(f"exchange_guard must be True or False; got {route.exchange_guard!r}")
    if route.exchange and (route.method != "hmp" or not route.backfit or route.chunk_vectors is not None):
        raise ValueError("exchange works with method='hmp', backfit=True and no chunking tree "
                         f"(chunk_vectors=None); got method={route.method!r}, backfit={route.backfit!r}, "
                         f"chunk_vectors={route.chunk_vectors!r}")


def _check_chunking(route) -> None:
    if route.chunking not in CHUNKING:
        raise ValueError(f"chunking must be one of {CHUNKING} (how chunk_vectors pieces are compressed); "
                         f"got {route.chunking!r}")
    if route.chunk_vectors is None:
        return
    if route.method != "hmp":
        raise ValueError(f"chunk_vectors works with method='hmp' only; got method={route.method!r}")
    if not (isinstance(route.chunk_vectors, numbers.Integral) and route.chunk_vectors >= 2):
        raise ValueError(f"chunk_vectors must be None or an int >= 2; got {route.chunk_vectors!r}")


def check_target(route, exp, X_pool, y, X_val, y_val) -> None:
    """fit's checks of the model's expansion and of the labels / held-out data given with it."""
    if len(exp.kernels) != 1:
        raise ValueError(
            f"the model uses {len(exp.kernels)} kernels (a mixed dictionary); reduced-set compression needs one "
            "kernel (one RKHS). Compress each kernel's part separately, or fit with one kernel")
    if exp.n_vectors == 0:
        raise ValueError("the model has no support vectors (a constant model): there is nothing to compress")
    if route.select == "validation" and (X_val is None or y_val is None):
        raise ValueError("select='validation' needs held-out data: pass X_val and y_val to fit")
    if y is not None and X_pool is None and len(np.asarray(y)) != exp.n_vectors:
        raise ValueError(
            f"y has {len(np.asarray(y))} labels but the default pool (the model's support vectors) has "
            f"{exp.n_vectors} rows; pass X_pool with the rows y belongs to")


def prepare_pool(route, target: CompressionTarget, X_pool, y):
    """The candidate pool (store, numpy rows or None, pool coefficients or None, in-memory flag)
    and the compressed size, checked against ``refit``, ``y`` and ``chunk_vectors``."""
    exp = target.expansion
    store, rows, pool_coef, in_memory = _pool(exp, X_pool)
    if route.refit == "pool" and rows is None:
        raise ValueError("refit='pool' fits the coefficients to the model's values on the pool rows: X_pool must "
                         "be a numpy array (not a store)")
    if y is not None and len(np.asarray(y)) != store.n_rows:
        raise ValueError(f"y has {len(np.asarray(y))} entries but X_pool has {store.n_rows} rows")
    n_keep = _resolve_size(route.n_vectors, exp.n_vectors, store.n_rows)
    if route.chunk_vectors is not None and int(route.chunk_vectors) <= n_keep:
        raise ValueError(
            f"chunk_vectors={route.chunk_vectors} must exceed the compressed size ({n_keep} vectors): each piece "
            "of the expansion is compressed to that size, so smaller pieces are not compressed at all. Use "
            "pieces several times larger than n_vectors, or chunk_vectors=None")
    return store, rows, pool_coef, in_memory, n_keep


def _pool(exp, X_pool):
    """(store, numpy rows or None, pool_coef or None, in_memory)"""
    if X_pool is None:
        rows = np.ascontiguousarray(exp.support_vectors)
        return InMemoryStore(rows), rows, exp.coef, True
    if is_store_like(X_pool):
        store = as_store(X_pool)
        _check_width(store.n_features, exp)
        # the store may hold the expansion's own centres (a model trained on it): each
        # partition checks, and ‖w‖² is then a pass instead of O(n²) on the driver
        own = exp.coef if store.n_rows == exp.n_vectors else None
        return store, None, own, False
    if is_dask_array(X_pool):
        raise TypeError("X_pool as a dask array: write it to a store first (kmp_dask.store.store_from_dask) "
                        "and pass the store or its path")
    rows = np.asarray(X_pool)
    if rows.ndim != 2:
        raise ValueError(f"X_pool must be 2-D (n_candidates, n_features); got shape {rows.shape}")
    if rows.dtype.kind not in "fiu" or not np.all(np.isfinite(rows)):
        raise ValueError("X_pool must be finite numbers (no NaN / inf, no text)")
    _check_width(rows.shape[1], exp)
    rows = np.ascontiguousarray(rows, dtype=np.float32 if rows.dtype == np.float32 else np.float64)
    own = exp.coef if len(rows) == exp.n_vectors else None  # checked per partition (as for stores)
    return InMemoryStore(rows), rows, own, True


def _check_width(n_features, exp):
    if n_features != exp.n_features:
        raise ValueError(
            f"X_pool has {n_features} features but the model's support vectors have {exp.n_features}; "
            "pass candidate rows in the model's feature space (the rows it was trained on)")


def _resolve_size(n, n_terms: int, n_pool: int) -> int:
    k = int(n) if isinstance(n, numbers.Integral) else max(1, int(round(n * n_terms)))
    if k > n_pool:
        raise ValueError(
            f"n_vectors={n!r} asks for {k} vectors but the candidate pool has only {n_pool} rows; "
            "pass a smaller n_vectors or a larger X_pool")
    return k
