"""Held-out scores of every prefix model of a pursuit, by blocks of rows (NumPy only).

Cross-validation along the path (``KMPClassifierCV``, ``KMPRegressorCV``) scores every size of
every (γ, fold) pursuit on the fold's held-out rows. Stores are scored in one pass on the
workers: each row block works out its rows' folds from a hash of the global row index
(:func:`hash_folds`, whatever the chunking) and returns sums that add over blocks. This module
is what those tasks run; it imports only NumPy, so a worker that unpickles a scorer loads no
scikit-learn.
"""

from __future__ import annotations

import numpy as np

from ._partition import _splitmix64

__all__ = ["ROWS_PER_BLOCK", "FactorPrefixScorer", "PrefixScorer", "hash_fold_stats", "hash_folds"]

ROWS_PER_BLOCK = 1 << 21  #: prefix values evaluated at once: rows × sizes × outputs (16 MiB of float64)


def hash_folds(index, n_folds: int, seed: int) -> np.ndarray:
    """Fold (0 … n_folds − 1) of each global row index: ``⌊n_folds · u(seed, i)⌋``.

    ``u`` is the seeded splitmix64 hash of the index mapped to [0, 1), the same hash as the
    engine's validation split and ``ingest``'s test split: a pure function of (index, seed), so
    every partition agrees without an index array and the folds do not depend on the chunking.
    """
    idx = np.asarray(index, dtype=np.uint64)
    h = _splitmix64(idx ^ _splitmix64(np.full(idx.shape, seed, dtype=np.uint64)))
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return np.minimum((u * n_folds).astype(np.int64), n_folds - 1)


class PrefixScorer:
    """Every prefix model (sizes 0 … n) of one fitted pursuit, scored on given rows.

    ``expansion`` is the full model (its kernel columns are computed once per block of rows);
    column block ``k`` of ``A`` (n × (n+1)·m) holds the ``k``-atom model's coefficients (zero below
    row k) and ``b[k·m:(k+1)·m]`` its intercept, so the values of all prefixes are ``K @ A + b``.
    ``classes``: the model's classes (classification: accuracy), or None (regression: R²).

    ``stats(X, y)`` returns sums that add over row blocks: classification ``[n, correct_0 …
    correct_n]``; regression ``[n, Σd (m), Σd² (m), SSE_0 (m) … SSE_n (m)]`` with ``d = y − c``
    (``c`` the full model's intercept, so that the held-out ``Σ(y − ȳ)²`` loses no precision).
    """

    def __init__(self, expansion, A, b, classes=None):
        self.expansion = expansion
        self.m = expansion.n_outputs
        self.n_sizes = expansion.n_vectors + 1
        self.A, self.b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
        self.classes = None if classes is None else np.asarray(classes)
        self.centre = np.asarray(expansion.intercept, dtype=np.float64)

    @property
    def n_stats(self) -> int:
        return 1 + self.n_sizes if self.classes is not None else 1 + 2 * self.m + self.n_sizes * self.m

    def stats(self, X, y, names=None) -> np.ndarray:
        out = np.zeros(self.n_stats)
        step = max(1, ROWS_PER_BLOCK // (self.n_sizes * self.m))
        for a in range(0, len(X), step):
            out += self._block(np.asarray(X[a:a + step]), np.asarray(y[a:a + step]), names)
        return out

    def _values(self, X) -> np.ndarray:
        """The values of every prefix model on the rows ``X``: (rows, sizes, outputs)."""
        n = len(X)
        K = self.expansion.kernel_matrix(X) if self.expansion.n_vectors else np.zeros((n, 0))
        return (K @ self.A + self.b).reshape(n, self.n_sizes, self.m)

    def _block(self, X, y, names):
        n = len(X)
        F = self._values(X)
        if self.classes is not None:
            code = F[..., 0] > 0 if self.m == 1 else F.argmax(axis=2)
            truth = y.reshape(n) if names is None else names[y.reshape(n).astype(np.intp)]
            correct = (self.classes[code.astype(np.intp)] == truth[:, None]).sum(axis=0)
            return np.concatenate([[n], correct])
        Y = np.asarray(y, dtype=np.float64).reshape(n, self.m)
        D = Y - self.centre
        sse = ((F - Y[:, None, :]) ** 2).sum(axis=0).ravel()
        return np.concatenate([[n], D.sum(axis=0), (D * D).sum(axis=0), sse])

    def scores(self, s: np.ndarray) -> np.ndarray:
        """Score of each size (0 … n) from summed stats: accuracy, or R² averaged over outputs."""
        n = s[0]
        if n == 0:
            raise ValueError("a cross-validation fold has no held-out rows; use a smaller cv")
        if self.classes is not None:
            return s[1:] / n
        m = self.m
        s1, s2, sse = s[1:1 + m], s[1 + m:1 + 2 * m], s[1 + 2 * m:].reshape(self.n_sizes, m)
        sst = np.maximum(s2 - s1 * s1 / n, 0.0)
        ok = sst > 0
        r2 = np.where(ok, 1.0 - sse / np.where(ok, sst, 1.0), np.where(sse == 0, 1.0, 0.0))
        return r2.mean(axis=1)


class FactorPrefixScorer(PrefixScorer):
    """:class:`PrefixScorer` of a least-squares path given by its Gram factor: same stats, other sums.

    The ``k``-atom model's coefficients are ``c_k = L_k⁻ᵀ z_k`` with ``L`` the Cholesky factor of the
    basis Gram (with the ridge), ``z = L⁻¹ BᵀY`` (nested: ``z_k`` is its first ``k`` rows) and ``L_k``
    the leading ``k × k`` block; the leading block of ``W = L⁻ᵀ`` (upper triangular) is ``L_k⁻ᵀ``.
    So the ``k``-atom value on a row with kernel row ``κ`` is ``Σ_{j<k} (κW)_j z_j``: ONE product
    ``P = K W`` and a running sum over ``j`` give every prefix — ``rows · n²`` operations, where
    ``K @ A`` takes ``rows · n² · m`` and building ``A`` one solve per size ``n³ · m / 3``.
    ``bias_first``: the path's first column is the intercept's column of ones (``K`` gets it).
    The values agree with :class:`PrefixScorer`'s to rounding, not bit for bit.
    """

    def __init__(self, expansion, W, z, offset, bias_first, classes=None):
        m = expansion.n_outputs
        super().__init__(expansion, np.zeros((0, 0)), np.zeros(0), classes)
        self.W, self.z = np.asarray(W, dtype=np.float64), np.asarray(z, dtype=np.float64).reshape(-1, m)
        self.offset, self.bias_first = np.asarray(offset, dtype=np.float64).reshape(m), bool(bias_first)

    def _values(self, X) -> np.ndarray:
        n = len(X)
        K = self.expansion.kernel_matrix(X) if self.expansion.n_vectors else np.zeros((n, 0))
        if self.bias_first:
            K = np.concatenate([np.ones((n, 1)), K], axis=1)
        P = K @ self.W
        F = np.empty((n, self.n_sizes, self.m))
        at = 0 if self.bias_first else 1  # size k holds columns 0 … k (with the bias column), else 0 … k − 1
        F[:, :at] = 0.0
        np.cumsum(P[:, :, None] * self.z[None, :, :], axis=1, out=F[:, at:])
        F += self.offset
        return F


def hash_fold_stats(X, y, start, scorers, n_folds, seed, names):
    """One row block of a store: each (γ, fold) scorer on the block's rows of its fold."""
    fold = hash_folds(np.arange(start, start + len(X)), n_folds, seed)
    out = []
    for per_fold in scorers:
        for f, sc in enumerate(per_fold):
            rows = fold == f
            out.append(sc.stats(X[rows], y[rows], names))
    return np.concatenate(out)
