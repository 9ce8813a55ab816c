"""kmp_dask: sparse kernel learning on chunked zarr data with dask workers.

Public names are re-exported here; no logic lives in this module.
"""

from .estimators import KMPClassifier, KMPRegressor
from .expansion import KernelExpansion
from .kernels import Kernel, get_kernel

__version__ = "0.1.0"

__all__ = ["KMPClassifier", "KMPRegressor", "Kernel", "KernelExpansion", "get_kernel", "__version__"]
