"""One hyperplane-matching-pursuit run's configuration: a frozen record built once, read by the loop.

:func:`~kmp_dask.greedy._hmp.hyperplane_pursuit` and
:func:`~kmp_dask.greedy._hmp.dense_hyperplane_pursuit` keep their keyword arguments and turn them
into one :class:`HMPConfig`; :func:`~kmp_dask.greedy._hmp_setup.compress_on_pool` (the
compressor's engine route) takes the record itself, and the loop objects
(:class:`~kmp_dask.greedy._hmp._HMPModel`, :class:`~kmp_dask.greedy._hmp._DensePursuit`) read it
instead of receiving the keywords one by one. What is not configuration stays an argument: the
engine, the outputs pursued and their ``‖w_j‖²`` (one group of outputs per pursuit), the random
generator, the callback and the checkpoint. The same shape as KMP's
:class:`~kmp_dask.greedy._kmp_config.PursuitConfig`.

One name per idea: ``n_vectors`` is the reduced-set size everywhere (the compressor's
``n_keep`` / ``path_len`` / ``n_path`` and the chunking tree's ``keep`` were other names for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

__all__ = ["CRITERIA", "HMPConfig"]

CRITERIA = ("eq13", "decrease")
"""Selection scores: eq. 13's ``Σ_j r_j(z)² / k(z, z)`` or the exact backfitted decrease ``Σ_j r_j(z)² / δ(z)``."""


def _is_int(x) -> bool:
    """An integer (a float with an integer value counts: counts are often computed)."""
    if isinstance(x, bool) or not isinstance(x, Real):
        return False
    return isinstance(x, Integral) or float(x).is_integer()


@dataclass(frozen=True)
class HMPConfig:
    """Everything that defines one pursuit (parameters as in :func:`~kmp_dask.greedy._hmp.hyperplane_pursuit`).

    ``kernel`` the expansion's kernel; ``n_rows`` the pool size; ``n_vectors`` stop after this
    many distinct vectors; ``backfit`` re-optimise every coefficient after each selection (eq. 7);
    ``candidates`` s random pool points scored per iteration (None: all); ``rkhs_tol`` stop when
    ``Σ_j ‖w_j − ŵ_j‖² ≤ rkhs_tol · Σ_j ‖w_j‖²``; ``top`` best candidates each partition returns
    (engine path); ``criterion`` ``"eq13"`` or ``"decrease"`` (backfitting only).

    ``__post_init__`` normalises the numbers (``n_rows``, ``n_vectors``, ``candidates``, ``top`` to
    int, ``rkhs_tol`` to float) and refuses an unknown ``criterion``, ``"decrease"`` without
    backfitting and counts that are not integers — before any pass runs.
    """

    kernel: Any
    n_rows: int
    n_vectors: int
    backfit: bool = True
    candidates: int | None = None
    rkhs_tol: float = 0.0
    top: int = 4
    criterion: str = "eq13"

    def __post_init__(self):
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}; got {self.criterion!r}")
        if self.criterion == "decrease" and not self.backfit:
            raise ValueError("criterion='decrease' needs backfit=True: the basic pursuit (algorithm 3.2) only adds "
                             "r(z)/k(z,z) to one coefficient, so the decrease it gets is eq. 13's score — use "
                             "criterion='eq13' with backfit=False")
        for name in ("n_rows", "n_vectors", "top"):
            value = getattr(self, name)
            if not _is_int(value):
                raise ValueError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
            object.__setattr__(self, name, int(value))
        c = self.candidates
        if c is not None and not (_is_int(c) and c >= 1):
            raise ValueError(f"candidates must be None (score every pool point) or an int >= 1; got {c!r}")
        object.__setattr__(self, "candidates", None if c is None else int(c))
        if not isinstance(self.rkhs_tol, Real) or isinstance(self.rkhs_tol, bool):
            raise ValueError(f"rkhs_tol must be a float >= 0; got {self.rkhs_tol!r}")
        object.__setattr__(self, "rkhs_tol", float(self.rkhs_tol))
