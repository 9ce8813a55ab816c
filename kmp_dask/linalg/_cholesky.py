"""Incremental Cholesky factor of a growing Gram matrix (driver side): one storage for every
family that keeps a growing factor.

NumPy/SciPy only, always float64. The factor is stored in a preallocated buffer that doubles when
full. Columns (atoms, core points) are added one at a time or as a block, removed at any position,
or the whole factor is recomputed from its matrix. Two kinds of triangular solves read it: one
LAPACK call on the factor (:meth:`IncrementalCholesky.solve_lower`,
:meth:`~IncrementalCholesky.solve`, :meth:`~IncrementalCholesky.solve_upper`; KMP, HMP, sparse KPCA)
and row-blocked solves that read the buffer in place without copying the factor
(:func:`forward_substitution`, :func:`back_substitution`; the CVM core-set QP). They round
differently, so each family keeps the one it was built with and its fits stay bit for bit the same.
"""

from __future__ import annotations

import ctypes
import math
from numbers import Integral, Real

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.lapack import dpotrs, dtrtrs

_EPS = float(np.finfo(np.float64).eps)
_BREAKDOWN_FACTOR = 10.0

BLOCK = 128
"""Row block of :func:`forward_substitution` and :func:`back_substitution`: the off-diagonal part
is one matrix–vector product per block on a strided view of the factor's buffer (no copy), the
diagonal block a LAPACK solve."""

_REFACTOR_CAPACITY = 64
"""Smallest buffer :meth:`IncrementalCholesky.refactor` allocates."""


def forward_substitution(L: np.ndarray, b: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """``L⁻¹ b`` for a lower-triangular ``L`` (any strides), blocked by ``block`` rows.

    ``b``: shape (m,) or (m, k). Returns a new float64 array of ``b``'s shape. With
    ``block >= len(L)`` this is one LAPACK ``dtrtrs`` call."""
    x = np.array(b, dtype=np.float64)
    m = len(L)
    for i0 in range(0, m, block):
        i1 = min(i0 + block, m)
        if i0:
            x[i0:i1] -= L[i0:i1, :i0] @ x[:i0]
        x[i0:i1] = dtrtrs(L[i0:i1, i0:i1], x[i0:i1], lower=1)[0]
    return x


def back_substitution(L: np.ndarray, b: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """``L⁻ᵀ b`` for a lower-triangular ``L`` (any strides), blocked by ``block`` rows from the bottom."""
    x = np.array(b, dtype=np.float64)
    m = len(L)
    for i1 in range(m, 0, -block):
        i0 = max(0, i1 - block)
        if i1 < m:
            x[i0:i1] -= L[i1:m, i0:i1].T @ x[i1:m]
        x[i0:i1] = dtrtrs(L[i0:i1, i0:i1], x[i0:i1], lower=1, trans=1)[0]
    return x


def _cho_solve(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve((L, True), b, check_finite=False)`` for float64 ``L``, ``b``: the same
    LAPACK call (``dpotrs``, lower) without scipy's wrappers, whose overhead was most of a solve's
    time at the sizes of a small-data pursuit (benchmarks/notes/kmp_cv_speed.md)."""
    if not b.size:
        return cho_solve((L, True), b, check_finite=False)
    x, info = dpotrs(L, b, lower=1)
    if info != 0:
        raise ValueError(f"illegal value in {-info}th argument of internal potrs")
    return x


def _solve_lower(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``scipy.linalg.solve_triangular(L, b, lower=True, check_finite=False)`` for float64 ``L``,
    ``b``: the same LAPACK call (``dtrtrs`` on ``L``, or on ``Lᵀ`` transposed when ``L`` is not
    Fortran-ordered, as scipy chooses) without scipy's wrappers."""
    if not b.size:
        return solve_triangular(L, b, lower=True, check_finite=False)
    if L.flags.f_contiguous:
        x, info = dtrtrs(L, b, lower=1, trans=0)
    else:
        x, info = dtrtrs(L.T, b, lower=0, trans=1)
    if info > 0:
        raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
    if info < 0:
        raise ValueError(f"illegal value in {-info}-th argument of internal trtrs")
    return x


def _lapack_dtrtrs():
    """scipy's own LAPACK ``dtrtrs`` (the routine behind ``scipy.linalg.lapack.dtrtrs``) as a ctypes
    function taking a leading dimension, from ``scipy.linalg.cython_lapack``'s exported C API; None
    when it cannot be loaded (the f2py wrapper is then used)."""
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__["dtrtrs"]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        pointer = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
        ip, vp, cp = ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_char_p
        return ctypes.CFUNCTYPE(None, cp, cp, cp, ip, ip, vp, ip, vp, ip, ip)(pointer)
    except Exception:  # no cython_lapack API (another scipy build): the copying call stays
        return None


_DTRTRS = _lapack_dtrtrs()


def _solve_lower_strided(buffer: np.ndarray, n: int, b: np.ndarray) -> np.ndarray | None:
    """``_solve_lower(buffer[:n, :n], b)`` bit for bit, without the copy of the factor: for a
    C-contiguous float64 ``buffer`` the f2py wrapper copies the strided leading block
    (``n²`` values, most of the time of an append once ``n`` is in the hundreds; it grows with the
    buffer's capacity, not with ``n``). The same LAPACK routine on the same values — the buffer
    read in Fortran order is ``Lᵀ`` with leading dimension ``capacity`` — called directly. None
    when that call is not available or ``buffer`` is not laid out so (the caller falls back)."""
    if _DTRTRS is None or not (buffer.flags.c_contiguous and buffer.dtype == np.float64 and buffer.ndim == 2) \
            or b.ndim not in (1, 2) or not b.size:
        return None
    x = np.array(b, dtype=np.float64, order="F")  # as f2py: a Fortran-ordered copy, overwritten
    nrhs = 1 if x.ndim == 1 else x.shape[1]
    ints = [ctypes.c_int(v) for v in (n, nrhs, buffer.shape[1], max(n, 1), 0)]
    n_, nrhs_, lda, ldb, info = (ctypes.byref(v) for v in ints)
    _DTRTRS(b"U", b"T", b"N", n_, nrhs_, buffer.ctypes.data, lda, x.ctypes.data, ldb, info)
    code = ints[4].value
    if code > 0:
        raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {code - 1}")
    if code < 0:
        raise ValueError(f"illegal value in {-code}-th argument of internal trtrs")
    return x


def _cholesky_with_jitter(A: np.ndarray) -> np.ndarray:
    """``numpy.linalg.cholesky(A)``; when rounding makes a positive-definite ``A`` fail, once more
    with ``1e-12 · trace(A)/n`` added to the diagonal."""
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return np.linalg.cholesky(A + 1e-12 * np.trace(A) / len(A) * np.eye(len(A)))


def _update_trailing(T: np.ndarray, x: np.ndarray) -> None:
    """``T ← chol(T Tᵀ + x xᵀ)`` in place (``T`` lower triangular, Fortran order): the trailing
    block of a factor after the row and column before it were removed, ``x`` that column's part
    below the removed diagonal."""
    for j in range(len(x)):
        ljj = T[j, j]
        r = np.hypot(ljj, x[j])
        c, s = r / ljj, x[j] / ljj
        T[j, j] = r
        if j + 1 < len(x):
            T[j + 1 :, j] = (T[j + 1 :, j] + s * x[j + 1 :]) / c
            x[j + 1 :] = c * x[j + 1 :] - s * T[j + 1 :, j]


class _FortranCopy:
    """The leading ``n × n`` block of a factor's buffer as a Fortran-contiguous array — the copy
    LAPACK's wrapper makes of the C-ordered, capacity-strided block at every call (a transposing
    copy of n² values: most of a solve's time once n passes ~50) — kept between calls. Appends only
    add rows below the block, so it grows by copying itself (a column-wise copy) and the new rows
    into the other of two reused flat buffers (a fresh array per atom faulted its pages in: slower
    than the copy). The same values in the same layout: the solves round as before. Whoever changes
    the buffer other than by appending drops it (:meth:`IncrementalCholesky._changed`)."""

    def __init__(self):
        self.kept, self.flats, self.cur = None, None, 0

    def of(self, B: np.ndarray, n: int) -> np.ndarray:
        kept = self.kept
        if kept is not None and kept.shape[0] == n:
            return kept
        if self.flats is None or self.flats[0].size < n * n:
            size = max(2 * n * n, 4096)
            self.flats = [np.empty(size), np.empty(size)]
        self.cur = 1 - self.cur
        F = self.flats[self.cur][: n * n].reshape((n, n), order="F")
        k = 0 if kept is None or kept.shape[0] > n else kept.shape[0]
        if k:
            F[:k, :k] = kept
            F[:k, k:] = B[:k, k:n]
            F[k:, :] = B[k:n, :n]
        else:
            F[...] = B[:n, :n]
        self.kept = F
        return F


def _checked_arguments(capacity, ridge) -> tuple[int, float]:
    """``(capacity, ridge)`` of an :class:`IncrementalCholesky`, checked before any buffer is made."""
    if not isinstance(capacity, Integral) or isinstance(capacity, bool) or capacity < 1:
        raise ValueError(f"capacity must be an int >= 1. Got {capacity!r} instead.")
    ok = isinstance(ridge, Real) and not isinstance(ridge, bool)
    if not ok or not (math.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite float >= 0. Got {ridge!r} instead.")
    return int(capacity), float(ridge)


class IncrementalCholesky:
    """Lower Cholesky factor ``L`` of ``G + ridge * I``, grown one column at a time.

    ``G = B^T B`` is the Gram matrix of the selected atoms ``B = [b_1, ..., b_n]``
    (in KMP, kernel columns). Appending ``b_new`` needs only ``cross = B^T b_new``
    and ``diag = ||b_new||^2``.

    Two sets of operations share the buffer:

    * KMP, HMP and sparse KPCA: :meth:`append` (breakdown rule below), :meth:`solve_lower`,
      :meth:`solve_upper`, :meth:`solve`, :meth:`pivot_residual_norms` — one LAPACK call per
      solve; :meth:`of_factor` reads a finished path's factor (a result's ``L``) the same way.
    * The CVM core-set QP (``greedy/_cvm_qp.ActiveSetQP``), whose factor also shrinks:
      :meth:`forward` / :meth:`backward` (row-blocked, in place), :meth:`append_row` and
      :meth:`append_block` (relative breakdown rule ``rtol``), :meth:`remove` (any position, a
      rank-one update of the block after it, O(n²)) and :meth:`refactor` (from the matrix).

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
        capacity, self.ridge = _checked_arguments(capacity, ridge)
        self._buffer = np.zeros((capacity, capacity))
        self._size = 0

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

    def reserve(self, n: int) -> None:
        """Room for ``n`` rows: the buffer grows to ``max(n, 2 * capacity)`` when smaller,
        keeping the factor (the part outside it stays zero)."""
        if n > self.capacity:
            new = np.zeros((max(n, 2 * self.capacity),) * 2)
            k = self._size
            new[:k, :k] = self._buffer[:k, :k]
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
        x = _solve_lower_strided(self._buffer, self._size, b)
        return _solve_lower(self._buffer[: self._size, : self._size], b) if x is None else x

    def solve_upper(self, b: np.ndarray, size: int | None = None) -> np.ndarray:
        """Back substitution ``L_k⁻ᵀ b`` on the factor's leading ``k = size`` rows (all by default):
        with ``c̃ = L⁻¹ f`` this gives ``K⁻¹ f`` on the first k atoms (nested factors: a path's
        prefix models), with ``b`` the last row of ``L`` the new atom's projection coefficients.

        One LAPACK call, ``scipy.linalg.solve_triangular(L_k.T, b, lower=False)`` on the buffer's
        leading block (the layout decides which LAPACK variant runs, so every family calls this
        one form and rounds alike). ``b``: shape (k,) or (k, m); ``size`` in 0..size."""
        k = self._size if size is None else int(size)
        if not 0 <= k <= self._size:
            raise ValueError(f"size must be in 0..{self._size} (the factored atoms); got {size!r}")
        L = self._buffer[:k, :k]
        return solve_triangular(L.T, b, lower=False)

    @classmethod
    def of_factor(cls, L: np.ndarray) -> IncrementalCholesky:
        """A finished factor (lower triangular, e.g. a result's ``L``) read as an
        :class:`IncrementalCholesky` for its solves: a read-only view, no copy (its layout — and
        so the solves' rounding — is the array's own). Growing it copies into a new buffer;
        :meth:`remove` and :meth:`reset` refuse (read-only): :meth:`copy` first to change it."""
        L = np.asarray(L, dtype=np.float64)
        if L.ndim != 2 or L.shape[0] != L.shape[1]:
            raise ValueError(f"L must be a square (k, k) lower-triangular factor; got shape {L.shape}")
        new = cls.__new__(cls)
        new._buffer = L.view()
        new._buffer.flags.writeable = False
        new._size, new.ridge = len(L), 0.0
        return new

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
        return _cho_solve(self._fortran_factor(), b)

    def _fortran_factor(self) -> np.ndarray:
        """The factor as a Fortran-contiguous array, kept between solves (:class:`_FortranCopy`)."""
        kept = self.__dict__.get("_fortran") or self.__dict__.setdefault("_fortran", _FortranCopy())
        return kept.of(self._buffer, self._size)

    def _changed(self) -> None:
        """The buffer changed other than by appending rows: the Fortran copy is stale."""
        self.__dict__.pop("_fortran", None)

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
        n = self._size
        self.reserve(n + 1)
        self._buffer[n, :n] = v
        self._buffer[n, n] = math.sqrt(d2)
        self._size = n + 1
        return True

    def forward(self, b: np.ndarray) -> np.ndarray:
        """``L⁻¹ b`` by :func:`forward_substitution` (row-blocked, reads the buffer in place).

        ``b``: shape (size,) or (size, m). Rounds differently from :meth:`solve_lower`."""
        b = self._check_rows(b, "b")
        return forward_substitution(self._buffer[: self._size, : self._size], b)

    def backward(self, b: np.ndarray) -> np.ndarray:
        """``L⁻ᵀ b`` by :func:`back_substitution` (row-blocked, reads the buffer in place)."""
        b = self._check_rows(b, "b")
        return back_substitution(self._buffer[: self._size, : self._size], b)

    def append_row(self, cross: np.ndarray, diag: float, *, rtol: float):
        """Add one column by :meth:`forward` unless its new squared diagonal
        ``d² = diag + ridge − ‖v‖²`` (``v = L⁻¹ cross``) is not above ``rtol · (diag + ridge)``.

        Returns ``(v, d)``, the new row of ``L`` (``d`` its diagonal), or None on breakdown (the
        factor is then left unchanged)."""
        v = self.forward(np.ravel(cross))
        scale = diag + self.ridge if self.ridge else diag
        d2 = scale - float(v @ v)
        if not d2 > rtol * scale:
            return None
        n = self._size
        self.reserve(n + 1)
        d = np.sqrt(d2)
        self._buffer[n, :n] = v
        self._buffer[n, n] = d
        self._size = n + 1
        return v, d

    def append_block(self, cross: np.ndarray, diag_block: np.ndarray, *, rtol: float):
        """Add ``k`` columns at once: ``V = L⁻¹ cross`` (one :meth:`forward` with ``k`` right-hand
        sides, ``cross`` of shape (size, k)) and ``Lk = chol(diag_block + ridge I − VᵀV)``, the
        factor of their Schur complement (``diag_block`` (k, k): their own Gram).

        Returns ``(V, Lk)`` (the new rows are ``[Vᵀ Lk]``), or None on breakdown — the Schur
        complement not positive definite or a squared diagonal of ``Lk`` not above ``rtol`` times
        that of ``diag_block + ridge I`` — leaving the factor unchanged."""
        cross = self._check_rows(cross, "cross")
        if cross.ndim != 2:
            raise ValueError(f"cross must have shape ({self._size}, k), one column per new point. "
                             f"Got shape {cross.shape} instead.")
        n, k = self._size, cross.shape[1]
        if self.ridge:
            diag_block = diag_block + self.ridge * np.eye(k)
        V = self.forward(cross)
        try:
            Lk = np.linalg.cholesky(diag_block - V.T @ V)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.diag(Lk) ** 2 > rtol * np.diag(diag_block)):
            return None
        self.reserve(n + k)
        self._buffer[n : n + k, :n] = V.T
        self._buffer[n : n + k, n : n + k] = Lk
        self._size = n + k
        return V, Lk

    def remove(self, p: int) -> None:
        """Drop row and column ``p`` of the factored matrix: the rows after ``p`` move up and
        the block after ``p`` takes in the removed column by a rank-one update (Givens-style,
        O(size²), no refactorisation)."""
        m, B = self._size, self._buffer
        if not 0 <= p < m:
            raise IndexError(f"p must be a position in 0..{m - 1} of the factored atoms. Got {p!r} instead.")
        x = B[p + 1 : m, p].copy()
        B[p : m - 1, :p] = B[p + 1 : m, :p]
        B[p : m - 1, p : m - 1] = B[p + 1 : m, p + 1 : m]
        B[m - 1, :m] = 0.0
        B[:m, m - 1] = 0.0
        T = np.asfortranarray(B[p : m - 1, p : m - 1])  # column operations: contiguous columns
        _update_trailing(T, x)
        B[p : m - 1, p : m - 1] = T
        self._size = m - 1
        self._changed()

    def refactor(self, A: np.ndarray) -> None:
        """Forget the factor and factor ``A + ridge I`` from scratch (``numpy.linalg.cholesky``;
        when rounding makes it fail, once more with ``1e-12 · trace/n`` on the diagonal), in a new
        buffer of at least 64 rows."""
        A = np.asarray(A, dtype=np.float64)
        if self.ridge:
            A = A + self.ridge * np.eye(len(A))
        L = _cholesky_with_jitter(A)
        n = len(L)
        self._buffer = np.zeros((max(_REFACTOR_CAPACITY, n),) * 2)
        self._buffer[:n, :n] = L
        self._size = n
        self._changed()

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
        self._changed()

    def copy(self) -> IncrementalCholesky:
        """Independent copy (same factor, capacity and ridge)."""
        new = IncrementalCholesky(max(self.capacity, 1), ridge=self.ridge)
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
        self._changed()

    def __repr__(self) -> str:
        return (
            f"IncrementalCholesky(size={self._size}, capacity={self.capacity}, "
            f"ridge={self.ridge!r})"
        )
