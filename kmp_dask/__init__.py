"""kmp_dask: sparse kernel learning on chunked zarr data with dask workers.

Public names are re-exported here; no logic lives in this module.
"""

from ._version import __version__
from .estimators import MMDA, CVMClassifier, KMPClassifier, KMPRegressor, SparseKCCA, SparseKernelPCA
from .expansion import KernelExpansion
from .kernels import Kernel, get_kernel
from .persist import load, save
from .reduced import ReducedSetCompressor, compress

__all__ = ["CVMClassifier", "MMDA", "KMPClassifier", "KMPRegressor", "Kernel", "KernelExpansion", "ReducedSetCompressor", "SparseKCCA", "SparseKernelPCA",
           "compress", "get_kernel", "load", "save", "__version__"]
