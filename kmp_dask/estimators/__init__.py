"""scikit-learn estimators: validate, settle defaults, build the engine, call a driver."""

from ._kmp import KMPClassifier, KMPRegressor
from ._kpca import SparseKCCA, SparseKernelPCA

__all__ = ["KMPClassifier", "KMPRegressor", "SparseKCCA", "SparseKernelPCA"]
