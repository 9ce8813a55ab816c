"""kmp_dask: sparse kernel learning on chunked zarr data with dask workers.

Public names are re-exported here; no logic lives in this module. They are imported on first
use (PEP 562): a dask worker unpickling a partition holder imports only the engine, the
per-partition numerics and the store readers — not scikit-learn, pandas or the estimators —
which keeps ~100 MiB out of every worker's RSS, memory that the out-of-core budget
(docs/engine.md) then leaves to partitions.
"""

from ._version import __version__

_EXPORTS = {
    "CVMClassifier": "estimators", "MMDA": "estimators", "KMPClassifier": "estimators",
    "KMPRegressor": "estimators", "KMPClassifierCV": "estimators", "KMPRegressorCV": "estimators",
    "SparseKCCA": "estimators", "SparseKernelPCA": "estimators",
    "KernelExpansion": "expansion", "Kernel": "kernels", "get_kernel": "kernels",
    "load": "persist", "save": "persist", "ReducedSetCompressor": "reduced", "compress": "reduced",
    "ingest": "store",
}

__all__ = ["CVMClassifier", "MMDA", "KMPClassifier", "KMPRegressor", "KMPClassifierCV", "KMPRegressorCV", "Kernel",
           "KernelExpansion", "ReducedSetCompressor", "SparseKCCA", "SparseKernelPCA",
           "compress", "get_kernel", "ingest", "load", "save", "__version__"]


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kmp_dask' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
