"""One KMP run's configuration: a frozen record built once, read by the pursuit and its strategy.

:func:`~kmp_dask.greedy.kernel_matching_pursuit` keeps its keyword arguments (the estimators call
it with them) and turns them into one :class:`PursuitConfig`; :class:`~kmp_dask.greedy._kmp.Pursuit`
and :func:`~kmp_dask.greedy._strategies.make_strategy` take that record instead of relaying the
keywords one by one. What is not configuration stays an argument: the engine, the random
generator, the callback and the checkpoint (run-time objects, not part of what the fit *is*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FIT_MODES", "PursuitConfig"]

FIT_MODES = ("basic", "backfit", "prefit", "refit", "basic_reselect")


@dataclass(frozen=True)
class PursuitConfig:
    """Everything that defines a KMP run (parameters as in :func:`~kmp_dask.greedy.kernel_matching_pursuit`).

    Built with the keywords' values; ``__post_init__`` normalises (``kernels``: one kernel or a
    sequence → a tuple; a squared :class:`~kmp_dask.losses.Loss` → None, the exact least-squares
    path) and refuses what no pursuit runs: an unknown ``fit_mode``, ``prefit``/``refit`` with a
    loss other than squared, ``atoms_per_pass`` > 1 outside squared-loss ``backfit``.
    """

    kernels: Any
    n_rows: int
    n_features: int
    dtype: Any
    targets: dict
    n_basis: int
    fit_mode: str = "backfit"
    candidates: Any = "all"
    ridge: float = 0.0
    tol: float | None = None
    fit_intercept: bool = True
    validation_fraction: float = 0.0
    n_iter_no_change: int | None = None
    split_seed: int = 0
    max_tries: int = 5
    loss: Any = None
    refit_every: int | str | None = "auto"
    line_search_steps: int = 3
    final_refit_steps: int = 25
    error_threshold: float | None = None
    basis_columns: str = "stored"
    atoms_per_pass: int = 1
    rank_only_scores: bool = False

    def __post_init__(self):
        if self.fit_mode not in FIT_MODES:
            raise ValueError(f"fit_mode must be one of {FIT_MODES}; got {self.fit_mode!r}")
        loss = self.loss
        if loss is not None and getattr(loss, "name", None) == "squared":
            object.__setattr__(self, "loss", None)
        if self.loss is not None and self.fit_mode in ("prefit", "refit", "basic_reselect"):
            raise ValueError(f"fit_mode={self.fit_mode!r} is defined for the squared loss only; use 'basic' or "
                             "'backfit' (other losses with 'backfit' refit on the refit_every schedule)")
        k = self.atoms_per_pass
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"atoms_per_pass must be an int >= 1 (1: one atom per scoring pass); got {k!r}")
        if k > 1 and (self.fit_mode != "backfit" or self.loss is not None):
            raise ValueError(f"atoms_per_pass={k} is implemented for fit_mode='backfit' with the squared loss only; "
                             f"got fit_mode={self.fit_mode!r}, loss={getattr(self.loss, 'name', self.loss)!r}. "
                             "Use atoms_per_pass=1 for the other modes and losses.")
        kernels = self.kernels
        object.__setattr__(self, "kernels", tuple(kernels) if isinstance(kernels, (list, tuple)) else (kernels,))
