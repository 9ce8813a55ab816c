"""Incremental Cholesky factor of a growing Gram matrix (driver side).

NumPy/SciPy only, always float64. Columns (atoms) are added one at a time
from their inner products with the atoms already selected; the factor is
stored in a preallocated buffer that doubles when full.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

_EPS = float(np.finfo(np.float64).eps)
_BREAKDOWN_FACTOR = 10.0


class IncrementalCholesky:
    """Lower Cholesky factor ``L`` of ``G + ridge * I``, grown one column at a time.

    ``G = B^T B`` is the Gram matrix of the selected atoms ``B = [b_1, ..., b_n]``
    (in KMP, kernel columns). Appending ``b_new`` needs only ``cross = B^T b_new``
    and ``diag = ||b_new||^2``.

    Parameters
    ----------
    capacity : int, default=64
        Initial number of atoms the buffer holds; doubled whenever full.
    ridge : float, default=0.0
        Non-negative ``lambda`` added to the diagonal of the Gram matrix.

    Raises
    ------
    ValueError
        If ``capacity`` is not an int >= 1 or ``ridge`` is not a finite
        float >= 0.

    Notes
    -----
    Invariant after every successful :meth:`append`:
    ``L @ L.T == G + ridge * I`` (to rounding) with ``L`` lower triangular and
    a positive diagonal. Appending solves ``v = L^{-1} cross`` and sets the new
    diagonal to ``sqrt(diag + ridge - ||v||^2)``; when that squared value is
    at most ``10 * eps * max(1, diag + ridge)`` the new atom is numerically
    dependent on the selected ones (breakdown), as in scikit-learn's
    ``_cholesky_omp``. Cost of one append: O(n^2).

    Examples
    --------
    >>> import numpy as np
    >>> chol = IncrementalCholesky(capacity=2)
    >>> chol.append(np.empty(0), 4.0)
    True
    >>> chol.append(np.array([2.0]), 5.0)
    True
    >>> chol.L
    array([[2., 0.],
           [1., 2.]])
    >>> chol.append(np.array([2.0, 5.0]), 5.0)  # duplicate of the 2nd atom
    False
    >>> chol.size
    2
    """

    def __init__(self, capacity: int = 64, *, ridge: float = 0.0):
        if not isinstance(capacity, Integral) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be an int >= 1. Got {capacity!r} instead.")
        ok = isinstance(ridge, Real) and not isinstance(ridge, bool)
        if not ok or not (math.isfinite(ridge) and ridge >= 0):
            raise ValueError(f"ridge must be a finite float >= 0. Got {ridge!r} instead.")
        self._buffer = np.zeros((int(capacity), int(capacity)))
        self._size = 0
        self.ridge = float(ridge)

    @property
    def size(self) -> int:
        """Number of atoms factored so far."""
        return self._size

    @property
    def capacity(self) -> int:
        """Number of atoms the current buffer can hold before it grows."""
        return self._buffer.shape[0]

    @property
    def L(self) -> np.ndarray:
        """Read-only view of the factor, shape (size, size), lower triangular."""
        view = self._buffer[: self._size, : self._size]
        view.flags.writeable = False
        return view

    def _grow(self) -> None:
        """Double the buffer, keeping the factor (upper part stays zero)."""
        new = np.zeros((2 * self.capacity, 2 * self.capacity))
        n = self._size
        new[:n, :n] = self._buffer[:n, :n]
        self._buffer = new

    def _check_rows(self, b: np.ndarray, name: str) -> np.ndarray:
        b = np.asarray(b, dtype=np.float64)
        if b.ndim not in (1, 2) or b.shape[0] != self._size:
            raise ValueError(
                f"{name} must have shape ({self._size},) or ({self._size}, m) to match "
                f"the {self._size} factored atoms. Got shape {b.shape} instead."
            )
        return b

    def solve_lower(self, b: np.ndarray) -> np.ndarray:
        """Forward substitution ``L^{-1} b``.

        Parameters
        ----------
        b : ndarray of shape (size,) or (size, m)

        Returns
        -------
        x : ndarray of the same shape as ``b``, float64
        """
        b = self._check_rows(b, "b")
        if self._size == 0:
            return b.copy()
        L = self._buffer[: self._size, : self._size]
        return solve_triangular(L, b, lower=True, check_finite=False)

    def solve(self, b: np.ndarray) -> np.ndarray:
        """Solve ``(G + ridge * I) x = b`` with two triangular solves.

        Parameters
        ----------
        b : ndarray of shape (size,) or (size, m)

        Returns
        -------
        x : ndarray of the same shape as ``b``, float64
        """
        b = self._check_rows(b, "b")
        if self._size == 0:
            return b.copy()
        L = self._buffer[: self._size, : self._size]
        return cho_solve((L, True), b, check_finite=False)

    def append(self, cross: np.ndarray, diag: float) -> bool:
        """Add one atom to the factor unless it is numerically dependent.

        Parameters
        ----------
        cross : ndarray of shape (size,)
            ``B^T b_new``: inner products of the new atom with the selected ones.
        diag : float
            ``||b_new||^2``.

        Returns
        -------
        appended : bool
            False on breakdown (new squared diagonal
            ``diag + ridge - ||L^{-1} cross||^2`` at most
            ``10 * eps * max(1, diag + ridge)``, or not finite); the factor is
            then left unchanged.
        """
        cross = self._check_rows(np.ravel(cross), "cross")
        v = self.solve_lower(cross)
        scale = float(diag) + self.ridge
        d2 = scale - float(v @ v)
        if not math.isfinite(d2) or d2 <= _BREAKDOWN_FACTOR * _EPS * max(1.0, scale):
            return False
        if self._size == self.capacity:
            self._grow()
        n = self._size
        self._buffer[n, :n] = v
        self._buffer[n, n] = math.sqrt(d2)
        self._size = n + 1
        return True

    def pivot_residual_norms(self, cross_matrix: np.ndarray, diags: np.ndarray) -> np.ndarray:
        """Squared norms of candidate atoms after projecting out the selected ones.

        Parameters
        ----------
        cross_matrix : ndarray of shape (size, n_candidates)
            ``B^T D``: inner products of each candidate with the selected atoms
            (a 1-D array of shape (size,) is one candidate).
        diags : ndarray of shape (n_candidates,)
            ``||d_j||^2`` for each candidate (add ``ridge`` yourself if the
            regularised quantity is wanted).

        Returns
        -------
        residuals : ndarray of shape (n_candidates,)
            ``diags - ||L^{-1} cross_matrix[:, j]||^2``, clipped at 0. With
            ``ridge = 0`` this is ``||P_perp d_j||^2``, the squared norm of the
            part of ``d_j`` orthogonal to the span of the selected atoms.
        """
        cross_matrix = self._check_rows(cross_matrix, "cross_matrix")
        if cross_matrix.ndim == 1:
            cross_matrix = cross_matrix[:, None]
        V = self.solve_lower(cross_matrix)
        residuals = np.asarray(diags, dtype=np.float64) - np.einsum("ij,ij->j", V, V)
        return np.maximum(residuals, 0.0)

    def reset(self) -> None:
        """Forget every atom (the buffer is kept)."""
        self._buffer[: self._size, : self._size] = 0.0
        self._size = 0

    def copy(self) -> IncrementalCholesky:
        """Independent copy (same factor, capacity and ridge)."""
        new = IncrementalCholesky(self.capacity, ridge=self.ridge)
        new._buffer = self._buffer.copy()
        new._size = self._size
        return new

    def __getstate__(self) -> dict:
        """Pickled without the unused part of the buffer (a fit's checkpoint early in a large
        ``n_basis`` would otherwise carry all of it); restored at the same capacity."""
        return {"capacity": self.capacity, "L": self.L.copy(), "ridge": self.ridge}

    def __setstate__(self, state: dict) -> None:
        n = len(state["L"])
        self._buffer = np.zeros((state["capacity"], state["capacity"]))
        self._buffer[:n, :n] = state["L"]
        self._size, self.ridge = n, state["ridge"]

    def __repr__(self) -> str:
        return (
            f"IncrementalCholesky(size={self._size}, capacity={self.capacity}, "
            f"ridge={self.ridge!r})"
        )
