"""Selection drivers: no dask imports; they talk to data through an engine's ``run``.

Start reading at :meth:`kmp_dask.greedy._kmp.Pursuit.run` (the KMP loop).
"""

from ._candidates import CandidateSet
from ._dense import dense_kmp
from ._kmp import BASIS_COLUMNS, FIT_MODES, Pursuit, kernel_matching_pursuit, resolve_basis_columns
from ._result import PursuitResult, StopReason
from ._sampling import AllCandidates, RandomCandidates, n_candidates_for, validation_eligibility

__all__ = [
    "FIT_MODES", "BASIS_COLUMNS", "resolve_basis_columns", "kernel_matching_pursuit", "Pursuit", "dense_kmp", "PursuitResult", "StopReason",
    "AllCandidates", "RandomCandidates", "n_candidates_for", "validation_eligibility", "CandidateSet",
]
