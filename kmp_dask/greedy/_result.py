"""Result objects of the greedy drivers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

__all__ = ["StopReason", "PursuitResult"]


class StopReason(str, enum.Enum):
    """Why a greedy loop ended (stored as ``stop_reason_`` on estimators, as its string value)."""

    N_BASIS = "n_basis"  #: the requested number of basis functions was reached
    TOL = "tol"  #: relative training residual norm fell below ``tol``
    EARLY_STOPPING = "early_stopping"  #: validation score stopped improving
    CONVERGED = "converged"  #: no candidate correlates with the residual any more
    LINEAR_DEPENDENCE = "linear_dependence"  #: every tried candidate was dependent on the basis
    EXHAUSTED = "exhausted"  #: no candidate rows left


@dataclass
class PursuitResult:
    """What a matching-pursuit run returns to its estimator.

    Attributes
    ----------
    basis_indices : ndarray of shape (n,)
        Global row indices of the selected basis rows, in selection order.
    basis_vectors : ndarray of shape (n, d)
    coef : ndarray of shape (n, m)
    intercept : ndarray of shape (m,)
    stop_reason : StopReason
    history : list of dict
        One record per iteration (see :func:`kernel_matching_pursuit`).
    n_train, n_val : int
        Rows used for fitting and for validation.
    basis_kernels : ndarray of shape (n,)
        Index of each basis element's kernel in the dictionary.
    """

    basis_indices: np.ndarray
    basis_vectors: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    stop_reason: StopReason
    history: list = field(default_factory=list)
    n_train: int = 0
    n_val: int = 0
    basis_kernels: np.ndarray | None = None
