"""One sparse KPCA / KCCA selection's configuration: a frozen record built once, read by the run.

:func:`~kmp_dask.greedy._sparse_kpca.sparse_kernel_pca` keeps its keyword arguments (the
estimators call it with them) and turns them into one :class:`KPCAConfig`;
:class:`~kmp_dask.greedy._sparse_kpca.KPCARun` takes that record instead of eight positional
values. What is not configuration stays an argument: the engine, the random generator, the
callback and the checkpoint. The same shape as KMP's
:class:`~kmp_dask.greedy._kmp_config.PursuitConfig` and HMP's
:class:`~kmp_dask.greedy._hmp_config.HMPConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = ["KPCAConfig"]


@dataclass(frozen=True)
class KPCAConfig:
    """Everything that defines a selection (parameters as in :func:`~kmp_dask.greedy._sparse_kpca.sparse_kernel_pca`).

    ``kernels`` one kernel per view (one kernel or a sequence → a tuple); ``columns`` the views'
    feature slices ``(start, stop)`` or None (whole rows), one per kernel; ``n_rows``,
    ``n_features``, ``dtype`` the data's shape and type; ``n_components`` points to choose;
    ``candidates`` s random rows per iteration or None (exact: every row); ``rank_tol`` the
    relative residual below which the kernel matrix's rank is reached.

    ``__post_init__`` normalises (tuples, ints, ``np.dtype``, float) and refuses what no
    selection runs — a number of views that differs between ``kernels`` and ``columns``, counts
    that are not integers, ``candidates`` below 1 — before any pass.
    """

    kernels: Any
    n_rows: int
    n_features: int
    dtype: Any
    n_components: int
    columns: tuple = (None,)
    candidates: int | None = None
    rank_tol: float = 1e-10

    def __post_init__(self):
        kernels = self.kernels
        object.__setattr__(self, "kernels", tuple(kernels) if isinstance(kernels, (tuple, list)) else (kernels,))
        object.__setattr__(self, "columns", tuple(self.columns))
        if len(self.columns) != len(self.kernels):
            raise ValueError(f"columns must give one feature slice per kernel ({len(self.kernels)} views); "
                             f"got {len(self.columns)}: {self.columns!r}")
        for name in ("n_rows", "n_features", "n_components"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral):
                raise ValueError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
            object.__setattr__(self, name, int(value))
        c = self.candidates
        if c is not None and (isinstance(c, bool) or not isinstance(c, Integral) or c < 1):
            raise ValueError(f"candidates must be None (every row, exact) or an int >= 1; got {c!r}")
        object.__setattr__(self, "candidates", None if c is None else int(c))
        if isinstance(self.rank_tol, bool) or not isinstance(self.rank_tol, Real):
            raise ValueError(f"rank_tol must be a float >= 0; got {self.rank_tol!r}")
        object.__setattr__(self, "rank_tol", float(self.rank_tol))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def exact(self) -> bool:
        """Every row is a candidate in every iteration (``candidates=None``)."""
        return self.candidates is None
