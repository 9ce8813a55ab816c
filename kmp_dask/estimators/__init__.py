"""scikit-learn estimators: validate, settle defaults, build the engine, call a driver."""

from ._kmp import KMPClassifier, KMPRegressor

__all__ = ["KMPClassifier", "KMPRegressor"]
