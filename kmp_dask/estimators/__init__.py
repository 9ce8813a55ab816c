"""scikit-learn estimators: validate, settle defaults, build the engine, call a driver."""

from ._cvm import MMDA, CVMClassifier
from ._kmp import KMPClassifier, KMPRegressor
from ._kmp_cv import KMPClassifierCV, KMPRegressorCV
from ._kpca import SparseKCCA, SparseKernelPCA

__all__ = ["CVMClassifier", "MMDA", "KMPClassifier", "KMPRegressor", "KMPClassifierCV", "KMPRegressorCV",
           "SparseKCCA", "SparseKernelPCA"]
