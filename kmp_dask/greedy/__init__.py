"""Selection drivers: no dask imports; they talk to data through an engine's ``run``."""

from ._dense import dense_kmp
from ._kmp import FIT_MODES, kernel_matching_pursuit
from ._result import PursuitResult, StopReason
from ._sampling import AllCandidates, RandomCandidates, n_candidates_for

__all__ = [
    "FIT_MODES", "kernel_matching_pursuit", "dense_kmp", "PursuitResult", "StopReason",
    "AllCandidates", "RandomCandidates", "n_candidates_for",
]
