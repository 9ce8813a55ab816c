"""Cross-validation along a pursuit's path, the driver side: prefix scorers and row-hash folds.

``KMPClassifierCV`` / ``KMPRegressorCV`` fit one pursuit per (γ, fold) and score every prefix
of it (sizes 0 … n) on the fold's held-out rows. This module builds what those scores need from
a fitted pursuit (:func:`prefix_scorer`) and the folds of a store's rows (:func:`row_folds`); the
scoring pass over a store's row blocks is :func:`kmp_dask.parallel._cv_scores.held_out_prefix_stats`.
Both use the NumPy-only scorer and hash of ``blockops/_prefix_scores.py``, which the workers run.
"""

from __future__ import annotations

import numpy as np

from ..blockops._prefix_scores import FactorPrefixScorer, PrefixScorer, hash_folds
from ..linalg import one_blas_thread

# hash_folds: the hash itself, re-exported
__all__ = ["factor_prefix_scorer", "hash_folds", "prefix_scorer", "row_folds"]


def prefix_scorer(expansion, expansion_at, classes=None, parameters_at=None) -> PrefixScorer:
    """The scorer of every prefix (sizes 0 … n) of a fitted pursuit.

    ``expansion``: its full model; ``expansion_at(k)``: its ``k``-atom model (``k`` = 0 … n);
    ``classes``: its classes (classification), or None (regression); ``parameters_at(k)``
    (optional): that model's ``(coef, intercept)`` alone, read instead of ``expansion_at``
    (:meth:`~kmp_dask.greedy._result.PursuitResult.prefix_parameters`: no expansion built per size).
    """
    n, m = expansion.n_vectors, expansion.n_outputs
    A, b = np.zeros((n, (n + 1) * m)), np.zeros((n + 1) * m)
    with one_blas_thread():  # n + 1 small Cholesky solves (docs/engine.md, Threads)
        for k in range(n + 1):
            if parameters_at is None:
                e = expansion_at(k)
                coef, intercept = e.coef, e.intercept
            else:
                coef, intercept = parameters_at(k)
            A[:k, k * m:(k + 1) * m] = np.reshape(coef, (k, m))
            b[k * m:(k + 1) * m] = intercept
    return PrefixScorer(expansion, A, b, classes)


def factor_prefix_scorer(expansion, path, classes=None) -> FactorPrefixScorer:
    """The scorer of every prefix of a fitted least-squares pursuit from its Gram factor: two
    triangular solves (``L⁻¹`` and ``L⁻¹ BᵀY``) instead of one solve per size
    (:class:`~kmp_dask.blockops._prefix_scores.FactorPrefixScorer`). ``path``: the fit's
    :class:`~kmp_dask.greedy._result.PursuitResult` (``gram_factor``, ``ytd``)."""
    from scipy.linalg import solve_triangular

    L = np.asarray(path.gram_factor, dtype=np.float64)
    j = len(L)
    with one_blas_thread():  # small triangular solves (docs/engine.md, Threads)
        W = solve_triangular(L, np.eye(j), lower=True).T if j else np.zeros((0, 0))
        z = solve_triangular(L, np.asarray(path.ytd, dtype=np.float64), lower=True) if j else np.zeros((0, 1))
    return FactorPrefixScorer(expansion, W, z, path._offset, path._bias_first, classes)


def row_folds(n_rows: int, n_folds: int, seed: int) -> np.ndarray:
    """The fold (0 … n_folds − 1) of each row 0 … n_rows − 1: a hash of the row index and ``seed``
    (:func:`~kmp_dask.blockops._prefix_scores.hash_folds`), whatever the chunking."""
    return hash_folds(np.arange(n_rows), n_folds, seed)
