"""The compressor's checks of its parameters and of ``fit``'s inputs, and the candidate pool.

Every check raises before any cluster starts, with the argument, the value received and what to
pass instead.
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


def check_params(est) -> None:
    """The estimator's parameters, each alone and in combination."""
    check_int_or_fraction("n_vectors", est.n_vectors, allow_none=False)
    for name, allowed in (("method", METHODS), ("select", SELECT), ("refit", REFIT)):
        if getattr(est, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}; got {getattr(est, name)!r}")
    if est.criterion not in ("eq13", "decrease"):
        raise ValueError(f"criterion must be 'eq13' or 'decrease'; got {est.criterion!r}")
    _check_exchange(est)
    if est.dense not in ("auto", True, False):
        raise ValueError(f"dense must be True, False or 'auto'; got {est.dense!r}")
    if est.coupled not in ("auto", True, False):
        raise ValueError(f"coupled must be True, False or 'auto'; got {est.coupled!r}")
    resolve_candidates(est.candidates)
    if not (isinstance(est.rkhs_tol, numbers.Real) and 0 <= est.rkhs_tol < 1):
        raise ValueError(f"rkhs_tol must be a float in [0, 1) (relative to ‖w‖²); got {est.rkhs_tol!r}")
    _check_chunking(est)
    if est.method != "hmp" and resolve_candidates(est.candidates) is not None:
        raise ValueError(f"candidates (probabilistic search) works with method='hmp' only; got method={est.method!r}")
    if est.l0_step not in L0_STEPS:
        raise ValueError(f"l0_step must be one of {L0_STEPS} (the l0 baseline's lossy step); got {est.l0_step!r}")


def _check_exchange(est) -> None:
    if not (isinstance(est.exchange, numbers.Integral) and not isinstance(est.exchange, bool)
            and est.exchange >= 0):
        raise ValueError(f"exchange must be an int >= 0 (sweeps of single-vector exchanges; 0: off); "
                         f"got {est.exchange!r}")
    if not isinstance(est.exchange_guard, (bool, np.bool_)):
        raise ValueError(f"exchange_guard must be True or False; got {est.exchange_guard!r}")
    if est.exchange and (est.method != "hmp" or not est.backfit or est.chunk_vectors is not None):
        raise ValueError("exchange works with method='hmp', backfit=True and no chunking tree "
                         f"(chunk_vectors=None); got method={est.method!r}, backfit={est.backfit!r}, "
                         f"chunk_vectors={est.chunk_vectors!r}")


def _check_chunking(est) -> None:
    if est.chunking not in CHUNKING:
        raise ValueError(f"chunking must be one of {CHUNKING} (how chunk_vectors pieces are compressed); "
                         f"got {est.chunking!r}")
    if est.chunk_vectors is None:
        return
    if est.method != "hmp":
        raise ValueError(f"chunk_vectors works with method='hmp' only; got method={est.method!r}")
    if not (isinstance(est.chunk_vectors, numbers.Integral) and est.chunk_vectors >= 2):
        raise ValueError(f"chunk_vectors must be None or an int >= 2; got {est.chunk_vectors!r}")


def check_target(est, exp, X_pool, y, X_val, y_val) -> None:
    """fit's checks of the model's expansion and of the labels / held-out data given with it."""
    if len(exp.kernels) != 1:
        raise ValueError(
            f"the model uses {len(exp.kernels)} kernels (a mixed dictionary); reduced-set compression needs one "
            "kernel (one RKHS). Compress each kernel's part separately, or fit with one kernel")
    if exp.n_vectors == 0:
        raise ValueError("the model has no support vectors (a constant model): there is nothing to compress")
    if est.select == "validation" and (X_val is None or y_val is None):
        raise ValueError("select='validation' needs held-out data: pass X_val and y_val to fit")
    if y is not None and X_pool is None and len(np.asarray(y)) != exp.n_vectors:
        raise ValueError(
            f"y has {len(np.asarray(y))} labels but the default pool (the model's support vectors) has "
            f"{exp.n_vectors} rows; pass X_pool with the rows y belongs to")


def prepare_pool(est, target: CompressionTarget, X_pool, y):
    """The candidate pool (store, numpy rows or None, pool coefficients or None, in-memory flag)
    and the compressed size, checked against ``refit``, ``y`` and ``chunk_vectors``."""
    exp = target.expansion
    store, rows, pool_coef, in_memory = _pool(exp, X_pool)
    if est.refit == "pool" and rows is None:
        raise ValueError("refit='pool' fits the coefficients to the model's values on the pool rows: X_pool must "
                         "be a numpy array (not a store)")
    if y is not None and len(np.asarray(y)) != store.n_rows:
        raise ValueError(f"y has {len(np.asarray(y))} entries but X_pool has {store.n_rows} rows")
    n_keep = _resolve_size(est.n_vectors, exp.n_vectors, store.n_rows)
    if est.chunk_vectors is not None and int(est.chunk_vectors) <= n_keep:
        raise ValueError(
            f"chunk_vectors={est.chunk_vectors} must exceed the compressed size ({n_keep} vectors): each piece "
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
