"""Selection drivers: no dask imports; they talk to data through an engine's ``run``.

Where each family's loop lives (start reading there):

* KMP: :meth:`kmp_dask.greedy._kmp.Pursuit.run` (fitting modes: ``_strategies.py``; several atoms
  per pass: ``_kmp_blocks.py``).
* CVM / MMDA: :func:`kmp_dask.greedy._cvm.core_vector_machine` (the core-set loop); MMDA runs
  it once per feature on the deflated kernel (``greedy/_cvm_problems.py::run_problem``,
  :func:`kmp_dask.greedy._cvm.mmda_feature`).
* Sparse KPCA / KCCA: :meth:`kmp_dask.greedy._sparse_kpca.KPCARun.loop` (entry ``sparse_kernel_pca``).
* Reduced sets (HMP): :func:`kmp_dask.greedy._hmp.hyperplane_pursuit` (numpy pool:
  ``dense_hyperplane_pursuit``).
"""

from ._candidates import CandidateSet, merge_ranked
from ._cvm import core_vector_machine
from ._cvm_problems import fit_binary_problems, run_problem
from ._dense import dense_kmp
from ._hmp import hyperplane_pursuit
from ._hmp_setup import chunked_compression, compress_on_pool
from ._kmp import BASIS_COLUMNS, FIT_MODES, Pursuit, kernel_matching_pursuit, read_held_out_rows, resolve_basis_columns
from ._kmp_config import PursuitConfig
from ._labels import partition_labels, store_labels
from ._result import PursuitResult, StopReason
from ._sampling import AllCandidates, ExcludingCandidates, RandomCandidates, n_candidates_for, validation_eligibility
from ._sparse_kpca import sparse_kernel_pca

__all__ = [
    "FIT_MODES", "BASIS_COLUMNS", "resolve_basis_columns", "kernel_matching_pursuit", "read_held_out_rows", "Pursuit",
    "PursuitConfig", "dense_kmp", "PursuitResult", "StopReason",
    "AllCandidates", "RandomCandidates", "n_candidates_for", "validation_eligibility", "CandidateSet",
    "core_vector_machine", "fit_binary_problems", "run_problem", "hyperplane_pursuit", "compress_on_pool",
    "chunked_compression", "sparse_kernel_pca", "ExcludingCandidates", "merge_ranked",
    "partition_labels", "store_labels",
]
