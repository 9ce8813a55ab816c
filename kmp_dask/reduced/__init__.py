"""Reduced-set compression of fitted kernel models (Weston & Bakır).

* :class:`ReducedSetCompressor` / :func:`compress` — the estimator: hyperplane matching pursuit
  on the engine (default), the dense ℓ0 / ℓ1 baselines, the chunking method as a task graph;
* :class:`ReducedSetClassifier` / :class:`ReducedSetRegressor` — ``fit(X, y)`` fits a kernel model
  and compresses it (pipelines, grid search, scikit-learn's checks);
* :func:`as_compression_target` — a fitted model (scikit-learn SVC/NuSVC/SVR/NuSVR/KernelRidge,
  kmp_dask's KMP estimators, a :class:`~kmp_dask.KernelExpansion`, or a scikit-learn Pipeline of
  linear scalers ending in one of them — the scaling then travels inside the model) as a
  :class:`CompressionTarget`: its hyperplanes as one kernel expansion plus its prediction rule;
* :func:`l0_path`, :func:`l1_path` — the baselines on dense pool Grams.

docs/reduced.md explains the method choices and when to use which.
"""

from ._build import PrefixKeptWarning
from ._compressor import ReducedSetCompressor, best_threshold, compress
from ._meta import ReducedSetClassifier, ReducedSetRegressor
from ._models import CompressionTarget, as_compression_target
from ._sparse import SparseLevel, l0_path, l1_path

__all__ = [
    "ReducedSetCompressor", "ReducedSetClassifier", "ReducedSetRegressor", "compress", "best_threshold",
    "CompressionTarget", "as_compression_target",
    "SparseLevel", "l0_path", "l1_path", "PrefixKeptWarning",
]
