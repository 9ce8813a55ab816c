"""The model every family produces: a kernel expansion ``f(x) = Σ_j k_j(x, z_j) c_j + b``.

A :class:`KernelExpansion` is what kernel matching pursuit selects, what reduced-set
compression takes in and gives back, what an MMDA feature or a sparse KPCA direction is. It
holds only small arrays — the support vectors ``z_j`` (n, d), the coefficients (n, m), the
intercept (m,) — and the dictionary of kernels with each vector's kernel index (mixed
dictionaries: several RBF widths, or RBF and polynomial atoms in one model).

Evaluation:

* numpy input → :func:`kmp_dask.blockops.predict_block`, row-blocked, in this process;
* dask arrays and stores (a :class:`~kmp_dask.store.DataStore` or a path / URL of one) → a lazy
  dask array evaluated chunk by chunk through :mod:`kmp_dask.parallel` (dask is imported only
  then, so the driver layers that carry expansions stay free of it).

The class is a plain value: picklable, comparable with :meth:`allclose`, and convertible to and
from a dict of JSON scalars and numpy arrays (:meth:`to_dict`, :meth:`from_dict`) for the open
model format.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .blockops import predict_block
from .kernels import Kernel

__all__ = ["KernelExpansion"]

RKHS_BLOCK_ROWS = 2048
"""Rows of the kernel block :meth:`KernelExpansion.rkhs_inner` holds at once."""


def _as_kernels(kernels) -> tuple[Kernel, ...]:
    items = tuple(kernels) if isinstance(kernels, (list, tuple)) else (kernels,)
    if not items or not all(isinstance(k, Kernel) for k in items):
        raise TypeError(
            f"kernels must be a Kernel or a non-empty list of Kernel objects; got {kernels!r}. "
            "Build them with kmp_dask.get_kernel('rbf', gamma=...)."
        )
    return items


@dataclass(eq=False)
class KernelExpansion:
    """``f(x) = Σ_j k_{q_j}(x, z_j) · coef[j] + intercept`` with m outputs.

    Parameters
    ----------
    support_vectors : array (n, d)
        The expansion's centres ``z_j`` (may be empty: the constant model ``intercept``).
    coef : array (n, m) or (n,)
        Coefficients; a 1-D array is one output.
    intercept : array (m,) or float, default 0
    kernels : Kernel or sequence of Kernel
        The dictionary; with several, ``kernel_index`` says which one each vector uses.
    kernel_index : array (n,) of int, optional
        Index into ``kernels`` per vector (default: all 0).
    input_offset, input_scale : array (d,), optional
        A per-feature affine map applied to every input row before the kernel:
        ``f(x) = Σ_j k((x − input_offset) / input_scale, z_j) c_j + b`` — the support vectors live
        in the transformed (e.g. standardised) space and the model is evaluated on raw rows. Both or
        neither (None: no transform; old saved models have none).
    """

    support_vectors: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    kernels: tuple = field(default=())
    kernel_index: np.ndarray | None = None
    input_offset: np.ndarray | None = None
    input_scale: np.ndarray | None = None

    def __post_init__(self):
        self.kernels = _as_kernels(self.kernels)
        sv = np.asarray(self.support_vectors)
        if sv.ndim != 2:
            raise ValueError(f"support_vectors must be 2-D (n, d); got shape {sv.shape}")
        coef = np.asarray(self.coef, dtype=np.float64)
        if coef.ndim == 1:
            coef = coef[:, None]
        if coef.ndim != 2 or coef.shape[0] != sv.shape[0]:
            raise ValueError(
                f"coef must have one row per support vector: support_vectors has {sv.shape[0]} rows, "
                f"coef has shape {np.shape(self.coef)}"
            )
        intercept = np.broadcast_to(np.asarray(self.intercept, dtype=np.float64), (coef.shape[1],)).copy()
        idx = np.zeros(sv.shape[0], dtype=np.int64) if self.kernel_index is None else np.asarray(
            self.kernel_index, dtype=np.int64).reshape(-1)
        if idx.shape != (sv.shape[0],) or (idx.size and (idx.min() < 0 or idx.max() >= len(self.kernels))):
            raise ValueError(
                f"kernel_index must hold one index in [0, {len(self.kernels)}) per support vector; got {idx!r}"
            )
        self.support_vectors, self.coef, self.intercept, self.kernel_index = sv, coef, intercept, idx
        self.input_offset, self.input_scale = _check_transform(self.input_offset, self.input_scale, sv.shape[1])

    # -- shape ---------------------------------------------------------------------------------
    @property
    def n_vectors(self) -> int:
        return int(self.support_vectors.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.support_vectors.shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.coef.shape[1])

    def __len__(self) -> int:
        return self.n_vectors

    def __repr__(self) -> str:
        names = ", ".join(repr(k) for k in self.kernels)
        return (f"KernelExpansion(n_vectors={self.n_vectors}, n_features={self.n_features}, "
                f"n_outputs={self.n_outputs}, kernels=[{names}])")

    # -- evaluation ----------------------------------------------------------------------------
    def decision_function(self, X):
        """Values (N, m): numpy in → numpy out; dask array or store in → lazy dask array out."""
        if _is_dask_array(X) or _is_store_like(X):
            from .parallel import map_rows_predict

            return map_rows_predict(_dask_rows(X), self)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"X must be 2-D with {self.n_features} features (the support vectors' width); got shape {X.shape}"
            )
        return self.evaluate_block(X)

    def evaluate_block(self, X_block: np.ndarray) -> np.ndarray:
        """Values (rows, m) for one numpy block of raw rows (the function dask maps over chunks)."""
        X_block = self.transform_input(X_block)
        basis = (self.support_vectors.astype(X_block.dtype, copy=False) if X_block.dtype.kind == "f"
                 else self.support_vectors)
        return predict_block(X_block, basis, self.coef, self.intercept, list(self.kernels), self.kernel_index)

    def kernel_matrix(self, X) -> np.ndarray:
        """``K[i, j] = k_{q_j}(x_i, z_j)`` (N, n) for numpy ``X`` (small data, tests, compression)."""
        X = self.transform_input(np.asarray(X))
        K = np.empty((X.shape[0], self.n_vectors))
        for q, kern in enumerate(self.kernels):
            sel = np.flatnonzero(self.kernel_index == q)
            if sel.size:
                K[:, sel] = kern(X, self.support_vectors[sel].astype(X.dtype, copy=False))
        return K

    # -- the input transform -------------------------------------------------------------------
    @property
    def has_input_transform(self) -> bool:
        return getattr(self, "input_scale", None) is not None

    def transform_input(self, X: np.ndarray) -> np.ndarray:
        """Raw rows → the space of the support vectors (unchanged without a transform)."""
        if not self.has_input_transform:
            return X
        from .store._transform import affine_rows

        return affine_rows(X, self.input_offset, self.input_scale)

    def with_input_transform(self, offset, scale) -> KernelExpansion:
        """The same expansion taking raw rows ``x`` mapped by ``(x − offset) / scale`` (None: none)."""
        return KernelExpansion(self.support_vectors, self.coef, self.intercept, self.kernels, self.kernel_index,
                               offset, scale)

    def without_input_transform(self) -> KernelExpansion:
        """The expansion on rows already in its support vectors' space."""
        return self.with_input_transform(None, None)

    # -- algebra -------------------------------------------------------------------------------
    def _transform(self):
        return (getattr(self, "input_offset", None), getattr(self, "input_scale", None))

    def subset(self, index) -> KernelExpansion:
        """The expansion restricted to the vectors ``index`` (same intercept and input transform)."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        return KernelExpansion(self.support_vectors[index], self.coef[index], self.intercept,
                               self.kernels, self.kernel_index[index], *self._transform())

    def with_coef(self, coef, intercept=None) -> KernelExpansion:
        """Same vectors (and input transform), new coefficients (and intercept)."""
        return KernelExpansion(self.support_vectors, coef, self.intercept if intercept is None else intercept,
                               self.kernels, self.kernel_index, *self._transform())

    def rkhs_inner(self, other: KernelExpansion) -> np.ndarray:
        """``⟨f_a, g_b⟩`` in the RKHS for every pair of outputs (m, m'), intercepts excluded.

        Only defined between expansions over one kernel (mixed dictionaries have no common RKHS
        inner product here).
        """
        if len(set(self.kernels) | set(other.kernels)) != 1:
            raise ValueError("rkhs_inner needs both expansions to use one and the same kernel")
        if not _same_transform(self._transform(), other._transform()):
            raise ValueError("rkhs_inner needs both expansions to have the same input transform (input_offset, "
                             "input_scale): their support vectors live in different spaces")
        k = self.kernels[0]
        out = np.zeros((self.n_outputs, other.n_outputs))
        A, B = self.support_vectors.astype(np.float64), other.support_vectors.astype(np.float64)
        for a in range(0, len(A), RKHS_BLOCK_ROWS):  # bounded memory: K in row blocks
            out += self.coef[a : a + RKHS_BLOCK_ROWS].T @ (k(A[a : a + RKHS_BLOCK_ROWS], B) @ other.coef)
        return out

    def rkhs_sqnorm(self) -> np.ndarray:
        """``‖f_j‖²`` per output (m,), intercept excluded (O(n²) kernel values, in row blocks)."""
        return np.diag(self.rkhs_inner(self)).copy()

    def allclose(self, other: KernelExpansion, rtol=1e-12, atol=0.0) -> bool:
        return (
            self.kernels == other.kernels
            and self.support_vectors.shape == other.support_vectors.shape
            and np.array_equal(self.kernel_index, other.kernel_index)
            and np.array_equal(self.support_vectors, other.support_vectors)
            and np.allclose(self.coef, other.coef, rtol=rtol, atol=atol)
            and np.allclose(self.intercept, other.intercept, rtol=rtol, atol=atol)
            and _same_transform(self._transform(), other._transform())
        )

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Arrays and JSON scalars only (no pickle): the open model format's building block.
        The input transform is included only when there is one."""
        out = {
            "support_vectors": self.support_vectors,
            "coef": self.coef,
            "intercept": self.intercept,
            "kernel_index": self.kernel_index,
            "kernels": [k.to_dict() for k in self.kernels],
        }
        if self.has_input_transform:
            out["input_offset"], out["input_scale"] = self.input_offset, self.input_scale
        return out

    @classmethod
    def from_dict(cls, d: dict) -> KernelExpansion:
        """Inverse of :meth:`to_dict` (a dict without the input transform — older models — has none)."""
        return cls(np.asarray(d["support_vectors"]), np.asarray(d["coef"]), np.asarray(d["intercept"]),
                   tuple(Kernel.from_dict(k) for k in d["kernels"]), np.asarray(d["kernel_index"]),
                   d.get("input_offset"), d.get("input_scale"))


def _check_transform(offset, scale, n_features: int):
    """``(offset, scale)`` as float64 vectors of length ``n_features`` (scale > 0), or ``(None, None)``."""
    if offset is None and scale is None:
        return None, None
    if offset is None or scale is None:
        raise ValueError("input_offset and input_scale go together: pass both (one number per feature) or neither")
    offset = np.asarray(offset, dtype=np.float64).reshape(-1)
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    if offset.shape != (n_features,) or scale.shape != (n_features,) or not np.all(scale > 0):
        raise ValueError(f"input_offset and input_scale must hold {n_features} numbers each (one per feature; "
                         f"scale > 0); got shapes {offset.shape} and {scale.shape}")
    return offset, scale


def _same_transform(a, b) -> bool:
    if (a[1] is None) != (b[1] is None):
        return False
    return a[1] is None or (np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))


def _is_dask_array(X) -> bool:
    return type(X).__module__.startswith("dask.") and hasattr(X, "chunks") and hasattr(X, "dask")


def _is_store_like(X) -> bool:
    from .store import DataStore

    return isinstance(X, (str, os.PathLike, DataStore))


def _dask_rows(X):
    if _is_dask_array(X):
        return X
    from .store import as_store

    return as_store(X).to_dask("X")
